"""The checks of ``benchmarks/gpu/gpu_check.py``: the table of checks (:data:`CHECKS`), the self test and the
runner of one check's process; the checks themselves are in the sibling modules, one a group: gpu_check_pipelines
(a, f), gpu_check_gloo (b, e), gpu_check_nccl (c), gpu_check_learner (d), gpu_check_images (g), gpu_check_sync
(h, b3, n1), and what they share in gpu_check_common.

Every ``check_*`` function takes a :class:`Ctx` (device, sizes, a scratch folder) and returns a list of rows
(``{"id", "name", "status", "figure"}``) or raises; :func:`run_child` runs one of them in its own process and
sends the rows (or the one-line error) back to the parent. The ``rank_*`` functions run on every rank of a
``ding_dist.launch`` and return CPU tensors and plain values only (a CUDA tensor would make the parent
initialize CUDA to unpickle it).

With ``device == "cpu"`` every check runs on the CPU with the same code (``cuda`` replaced by ``cpu``); the
nccl checks run their body over a gloo world of one as a stand-in and report ``skipped: no CUDA``.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch
from gpu_check_common import REPO, Ctx, one_line, row
from gpu_check_common import SIZES as SIZES  # re-exported: tests/test_gpu_check.py reads gpu_check_lib.SIZES
from gpu_check_gloo import (
    check_cli_torchrun,
    check_gloo_pair,
    check_pytest_devices,
    check_pytest_learn_reads,
    check_pytest_priorities,
)
from gpu_check_images import check_image_policies
from gpu_check_learner import check_learner_rate
from gpu_check_nccl import check_nccl_collectives, check_nccl_distribute
from gpu_check_pipelines import AL_RUNS, ZOO, check_actor_learner, check_pipeline, check_zoo
from gpu_check_sync import check_nccl_p2p, check_sync_algorithms


# --------------------------------------------------------------------------------------- self test
def check_self_test(ctx: Ctx, how: str) -> list[dict[str, str]]:
    """For tests/test_gpu_check.py: a check that raises, one whose process dies, one that hangs, one that passes.

    The passing one is also the fork server's warm-up: with --device cuda it checks that CUDA starts in a
    forked check (else gpu_check.py spawns every check afresh).
    """
    if how == "raise":
        raise ValueError("deliberate failure\nsecond line not shown")
    if how == "crash":
        os._exit(3)
    if how == "hang":
        time.sleep(3600)
    if ctx.cuda:  # CUDA must start in a process forked from the fork server
        if torch.cuda._is_in_bad_fork():
            return [row("z4", "self test: passes", "torch reports a bad fork")]
        try:
            torch.ones(1, device="cuda").sum().item()
        except Exception as exc:  # any failure means: do not fork the checks
            return [row("z4", "self test: passes", f"a CUDA tensor failed: {one_line(exc)}")]
    return [row("z4", "self test: passes", "ok")]


# ------------------------------------------------------------------------------------------- the runner
CHECKS: dict[str, tuple[str, Callable[..., list[dict[str, str]]], tuple, list[str]]] = {
    # check id: (default row name, function, extra arguments, ids of the rows it produces)
    "a1": ("pipeline DQN", check_pipeline, ("a1", "dqn", "{device}"), ["a1"]),
    "a2": ("pipeline PPO", check_pipeline, ("a2", "ppo", "{device}"), ["a2"]),
    "a3": ("pipeline SAC", check_pipeline, ("a3", "sac", "{device}"), ["a3"]),
    "a4": ("pipeline PPO, policy.device=auto", check_pipeline, ("a4", "auto", "auto"), ["a4"]),
    "a5": ("pipeline IMPALA", check_pipeline, ("a5", "impala", "{device}"), ["a5"]),
    "p1": ("pipelines of the other policies", check_zoo, (), [f"p{i + 1}" for i in range(len(ZOO))]),
    "b1": ("2 gloo ranks: engine vs torch DDP, ding-dist train", check_gloo_pair, (), ["b1", "b2", "e1", "e2", "b5"]),
    "b4": ("pytest tests/comm/test_devices.py", check_pytest_devices, (), ["b4"]),
    "b6": ("ding-dist train --nproc 2 (torchrun)", check_cli_torchrun, (), ["b6"]),
    "c1": ("nccl world of one: collectives", check_nccl_collectives, (), ["c1"]),
    "c2": ("nccl world of one: distribute", check_nccl_distribute, (), ["c2"]),
    "d1": ("learner updates/s, Nature-DQN conv", check_learner_rate, ("d1", "conv"), ["d1"]),
    "d2": ("learner updates/s, CartPole MLP", check_learner_rate, ("d2", "mlp"), ["d2"]),
    "d3": ("pytest tests/policy/test_no_host_reads.py", check_pytest_learn_reads, (), ["d3"]),
    "d4": ("pytest tests/data/test_prioritized.py", check_pytest_priorities, (), ["d4"]),
    "f1": ("ding-dist train --actors N --learners M", check_actor_learner, (), list(AL_RUNS)),
    "g1": ("image policies, 1 process", check_image_policies, (), ["g1", "g2", "g3"]),
    "h0": (
        "2 ranks on one device: collectives, sync algorithms, obs_norm",
        check_sync_algorithms,
        (),
        ["b3"] + [f"h{i}" for i in range(7)],
    ),
    "n1": ("nccl 2 ranks: point-to-point", check_nccl_p2p, (), ["n1"]),
}
SELF_TEST: dict[str, tuple[str, Callable[..., list[dict[str, str]]], tuple, list[str]]] = {
    "z1": ("self test: raises", check_self_test, ("raise",), ["z1"]),
    "z2": ("self test: process dies", check_self_test, ("crash",), ["z2"]),
    "z3": ("self test: hangs", check_self_test, ("hang",), ["z3"]),
    "z4": ("self test: passes", check_self_test, ("ok",), ["z4"]),
}


NVML_CHECK_ENV = "PYTORCH_NVML_BASED_CUDA_CHECK"


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(143)  # unwinds: launch() stops its ranks in its finally block


def run_child(check_id: str, ctx: Ctx, log_path: str, conn: Any) -> None:
    """Entry point of one check's process: output to ``log_path``, the result (or error) through ``conn``."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    # A forkserver child inherits the forkserver start method as its default; give it the platform's default,
    # as a plain ``python train.py`` has (tqdm's lock then needs no named semaphore, so none is left behind).
    multiprocessing.set_start_method(None, force=True)
    os.environ.pop(NVML_CHECK_ENV, None)  # set only while the fork server started (see gpu_check.py)
    if ctx.nvml_check is not None:
        os.environ[NVML_CHECK_ENV] = ctx.nvml_check
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.chdir(REPO)  # relative paths in the checks (and the tests' call-site names) are the repository's
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, force=True)
    _, fn, args, _ = {**CHECKS, **SELF_TEST}[check_id]
    args = tuple(a.format(device=ctx.device) if isinstance(a, str) else a for a in args)
    try:
        rows = fn(ctx, *args)
        conn.send(("ok", rows))
    except BaseException as exc:  # noqa: B036 - SystemExit from SIGTERM included: report it, then exit
        traceback.print_exc()
        conn.send(("error", one_line(exc)))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        conn.close()
