"""The checks of ``benchmarks/gpu_check.py``: one function per check, plus what its ranks run.

Every ``check_*`` function takes a :class:`Ctx` (device, sizes, a scratch folder) and returns a list of rows
(``{"id", "name", "status", "figure"}``) or raises; :func:`run_child` runs one of them in its own process and
sends the rows (or the one-line error) back to the parent. The ``rank_*`` functions run on every rank of a
``ding_dist.launch`` and return CPU tensors and plain values only (a CUDA tensor would make the parent
initialize CUDA to unpickle it).

With ``device == "cpu"`` every check runs on the CPU with the same code (``cuda`` replaced by ``cpu``); the
nccl checks run their body over a gloo world of one as a stand-in and report ``skipped: no CUDA``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import logging
import math
import multiprocessing
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

import ding_dist as dd
from ding_dist import comm

REPO = Path(__file__).resolve().parent.parent
CONFIGS = {
    "dqn": REPO / "configs" / "cartpole_dqn_config.py",
    "ppo": REPO / "configs" / "cartpole_ppo_config.py",
    "impala": REPO / "configs" / "cartpole_impala_config.py",
    "sac": REPO / "configs" / "pendulum_sac_config.py",
}

# Sizes of the full run (one GPU, <= 8 minutes for everything with the wheel install) and of --quick (CPU CI, tiny).
SIZES: dict[str, dict[str, int]] = {
    "full": dict(
        zoo_steps=1024,
        dqn_steps=4096,
        ppo_steps=4096,
        sac_steps=3072,
        impala_steps=4096,
        auto_steps=2048,
        cli_steps=2048,
        al_steps=4096,
        ddp_steps=20,
        d_repeats=5,
        d_warmup=10,
        d_updates_conv_gpu=100,
        d_updates_conv_cpu=5,
        d_updates_mlp_gpu=200,
        d_updates_mlp_cpu=100,
        e_steps=24,
        e_rounds=4,
        e_warmup=3,
        e_batch=32,
        e_mlp_width=408,
        e_mlp_layers=30,
        sync_steps=20,
        image_side=84,
        image_hidden=512,
        image_dqn_updates=8,
        image_steps=2048,
        image_envs=4,
        image_batch=32,
        launch_timeout=140,
    ),
    "quick": dict(
        zoo_steps=128,
        dqn_steps=512,
        ppo_steps=512,
        sac_steps=256,
        impala_steps=512,
        auto_steps=256,
        cli_steps=256,
        al_steps=512,
        ddp_steps=4,
        d_repeats=3,
        d_warmup=1,
        d_updates_conv_gpu=3,
        d_updates_conv_cpu=2,
        d_updates_mlp_gpu=10,
        d_updates_mlp_cpu=10,
        e_steps=4,
        e_rounds=2,
        e_warmup=1,
        e_batch=4,
        e_mlp_width=64,
        e_mlp_layers=4,
        sync_steps=6,
        image_side=36,
        image_hidden=32,
        image_dqn_updates=2,
        image_steps=64,
        image_envs=2,
        image_batch=8,
        launch_timeout=120,
    ),
}

# --quick: fewer updates and evaluation episodes, so a CPU-only CI run stays short; same code paths.
_QUICK_EVAL = ["env.evaluator_env_num=2", "env.n_evaluator_episode=2"]
QUICK_OVERRIDES = {
    "dqn": ["policy.learn.learning_starts=128", "policy.learn.update_per_collect=8", *_QUICK_EVAL],
    "ppo": ["policy.learn.epoch_per_collect=2", *_QUICK_EVAL],
    "impala": ["policy.learn.epoch_per_collect=2", *_QUICK_EVAL],
    "sac": [
        "policy.learn.learning_starts=128",
        "policy.learn.update_per_collect=8",
        "env.collector_env_num=2",
        *_QUICK_EVAL,
    ],
}


@dataclasses.dataclass
class Ctx:
    """What every check needs: the device under test (``"cuda"`` or ``"cpu"``), sizes and a scratch folder."""

    device: str
    quick: bool
    workdir: str
    cpu_threads: int = 1
    nvml_check: str | None = None  # the caller's PYTORCH_NVML_BASED_CUDA_CHECK, restored in each check

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    def size(self, key: str) -> int:
        return SIZES["quick" if self.quick else "full"][key]

    def overrides(self, algo: str) -> list[str]:
        return list(QUICK_OVERRIDES[algo]) if self.quick else []

    def scratch(self, name: str) -> str:
        path = os.path.join(self.workdir, name)
        os.makedirs(path, exist_ok=True)
        return path


def row(check_id: str, name: str, figure: str, status: str = "ok") -> dict[str, str]:
    return {"id": check_id, "name": name, "status": status, "figure": figure}


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (a LaunchError's first line names the rank and its error)."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    if isinstance(exc, dd.LaunchError):
        # "rank 0 raised AssertionError: ..." is the useful part; the traceback follows on later lines
        return first
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _rank_device(device: str) -> torch.device:
    """This rank's device for ``device`` (``"cuda"``: its GPU, as the library decides it)."""
    if device == "cuda":
        index = dd.rank_cuda_index()
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device("cpu")


def _to_host(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, dict):
        return {k: _to_host(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_to_host(v) for v in x)
    return x


def flat(params) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).clone() for p in params])


def small_mlp(seed: int) -> nn.Module:
    """The sync tests' MLP (6-32-32-3, tanh)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 3))


# ------------------------------------------------------------------------------------------------ models
class NatureQ(nn.Module):
    """The Nature-DQN Q-network on 4x84x84 uint8 frames, scaled by 1/255 inside forward."""

    def __init__(self, actions: int = 6) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(4, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(3136, 512),
            nn.ReLU(),
            nn.Linear(512, actions),
        )

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.net(frames.float() / 255.0)


def wide_mlp(width: int, layers: int) -> nn.Module:
    """benchmarks/bench_sync.py's MLP: ``layers`` Linear width x width (30 x 408: 5.0M parameters)."""
    torch.manual_seed(0)
    mods: list[nn.Module] = []
    for i in range(layers):
        mods.append(nn.Linear(width, width))
        if i < layers - 1:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


# ------------------------------------------------------------------------------- (a) 1-process pipelines
class _PolicyDeviceLog(logging.Handler):
    """Collects the device of the pipeline's start line ("... policy on cuda:0, exp dir ...")."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.devices: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "policy on" in str(record.msg) and isinstance(record.args, tuple):
            self.devices += [str(a) for a in record.args if isinstance(a, torch.device)]


@contextmanager
def policy_device_log() -> Iterator[_PolicyDeviceLog]:
    log = logging.getLogger("ding_dist.entry")
    handler, level = _PolicyDeviceLog(), log.level
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def _expected_device(spec: str) -> str:
    if spec == "auto":  # one process: the GPU whenever there is one
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    return "cuda:0" if spec == "cuda" else "cpu"


def _check_result(result: dict[str, Any], steps: int, world: int) -> str:
    ret = result.get("last_eval_return")
    assert ret is not None and math.isfinite(ret), f"last_eval_return is {ret!r}"
    reached = result.get("stopped_by") == "stop_value"  # e.g. SAC on Pendulum reaches -200 after ~2.5k steps
    if not reached:
        got = result["env_steps"]
        assert got >= steps, f"stopped at {got} env steps ({result.get('stopped_by')}), asked for {steps}"
    assert result["train_iters"] > 0, "no policy update was applied"
    assert result["world_size"] == world, f"world_size {result['world_size']}, expected {world}"
    figure = f"last_eval_return {ret:.1f} after {result['env_steps']} env steps, {result['train_iters']} updates"
    return figure + (" (reached the config's stop_value)" if reached else "")


def check_pipeline(ctx: Ctx, check_id: str, algo: str, spec: str) -> list[dict[str, str]]:
    """``ding_dist.entry.train`` in this process with ``policy.device=spec`` (``auto``: the default)."""
    from ding_dist.entry import train

    config = CONFIGS["ppo" if algo == "auto" else algo]
    base = "ppo" if algo == "auto" else algo
    steps = ctx.size(f"{algo}_steps")
    overrides = ctx.overrides(base) + ([] if spec == "auto" else [f"policy.device={spec}"])
    with policy_device_log() as seen:
        result = train(
            str(config), seed=0, overrides=overrides, exp_dir=ctx.scratch(f"{check_id}_run"), max_env_steps=steps
        )
    expected = _expected_device(spec)
    assert seen.devices, "the pipeline did not log its policy's device (its start line changed?)"
    assert seen.devices[0] == expected, f"policy on {seen.devices[0]}, expected {expected} (policy.device={spec})"
    figure = f"{_check_result(result, steps, 1)}; policy on {seen.devices[0]}"
    name = f"pipeline {base.upper()} 1 process, policy.device={spec}"
    if algo == "auto":
        name = f"pipeline PPO 1 process, policy.device=auto -> {expected}"
    return [row(check_id, name, figure)]


# The policies of DI-engine's zoo beyond the four above: (config, overrides that keep a short run short).
_OFF_POLICY = ["policy.learn.learning_starts=64", "policy.learn.update_per_collect=4", *_QUICK_EVAL]
ZOO: dict[str, tuple[str, list[str]]] = {
    "c51": ("cartpole_c51_config.py", _OFF_POLICY),
    "qrdqn": ("cartpole_qrdqn_config.py", _OFF_POLICY),
    "mdqn": ("cartpole_mdqn_config.py", _OFF_POLICY),
    "iqn": ("cartpole_iqn_config.py", _OFF_POLICY),
    "rainbow": ("cartpole_rainbow_config.py", _OFF_POLICY),  # prioritized replay, noisy layers
    "td3": ("pendulum_td3_config.py", _OFF_POLICY),
    "ddpg": ("pendulum_ddpg_config.py", _OFF_POLICY),
    "a2c": ("cartpole_a2c_config.py", _QUICK_EVAL),
    "pg": ("cartpole_pg_config.py", [*_QUICK_EVAL, "policy.collect.n_episode=2"]),
    "sql": ("cartpole_sql_config.py", _OFF_POLICY),
    "discrete_sac": ("cartpole_discrete_sac_config.py", _OFF_POLICY),
    "ppo_pg": ("cartpole_ppo_pg_config.py", [*_QUICK_EVAL, "policy.collect.n_episode=2"]),
    "fqf": ("cartpole_fqf_config.py", _OFF_POLICY),  # fraction proposal network: a second parameter group
    "sqn": ("cartpole_sqn_config.py", _OFF_POLICY),
    "bdq": ("pendulum_bdq_config.py", _OFF_POLICY),
    "d4pg": ("pendulum_d4pg_config.py", _OFF_POLICY),  # distributional critic, prioritized n-step replay
    "ppo_offpolicy": ("cartpole_ppo_offpolicy_config.py", _QUICK_EVAL),
    "ppg_offpolicy": ("cartpole_ppg_config.py", _QUICK_EVAL),
    "acer": ("cartpole_acer_config.py", _QUICK_EVAL),
    # LSTM state carried on the device, sequence replay with burn-in: sequences short enough for a short run
    "r2d2": (
        "cartpole_r2d2_config.py",
        [
            *_OFF_POLICY,
            "policy.sequence.seq_len=6",
            "policy.sequence.burnin=2",
            "policy.sequence.overlap=2",
            "policy.learn.batch_size=8",
        ],
    ),  # fmt: skip
}


def check_zoo(ctx: Ctx) -> list[dict[str, str]]:
    """Each policy of :data:`ZOO` trained briefly in this process on the device under test (one row each): its
    networks, replay (prioritized for Rainbow) and per-update draws on CUDA."""
    from ding_dist.entry import train

    steps, rows = ctx.size("zoo_steps"), []
    for i, (algo, (config, quick)) in enumerate(ZOO.items()):
        spec = "cuda" if ctx.cuda else "cpu"
        overrides = [*quick, "env.stop_value=1e9", f"policy.device={spec}"]
        with policy_device_log() as seen:
            result = train(str(REPO / "configs" / config), seed=0, overrides=overrides,
                           exp_dir=ctx.scratch(f"zoo_{algo}"), max_env_steps=steps)  # fmt: skip
        expected = _expected_device(spec)
        assert seen.devices and seen.devices[0] == expected, f"{algo}: policy on {seen.devices}, expected {expected}"
        rows.append(row(f"p{i + 1}", f"pipeline {algo} 1 process", f"{_check_result(result, steps, 1)}; on {expected}"))
    return rows


# ------------------------------------------------------------------------ (b) 2 ranks on one device, gloo
# case: (algorithm, optimizer, bucket_size_mb, delay_reduce, options, max |ours - DDP| allowed)
# Tolerances are docs/sync.md's (tests/sync/test_engine_multirank.py: PARAM_TOL); 0 means bitwise.
DDP_CASES: dict[str, tuple[str, str, float, bool, dict[str, Any], float]] = {
    "sgd": ("gradient_allreduce", "sgd", 25.0, False, {}, 0.0),
    "adam": ("gradient_allreduce", "adam", 25.0, False, {}, 0.0),
    "adam_tiny_buckets": ("gradient_allreduce", "adam", 0.002, False, {}, 0.0),
    "adam_delay_reduce": ("gradient_allreduce", "adam", 0.002, True, {}, 0.0),
    "fp16": ("fp16", "adam", 0.002, False, {}, 1e-3),
    "fp16_sg": ("fp16", "adam", 0.002, False, {"method": "scatter_gather"}, 1e-3),
    "bf16": ("bf16", "adam", 0.002, False, {}, 5e-3),
    "bytegrad": ("bytegrad", "adam", 0.002, False, {}, 0.1),
    "sg_allreduce": ("sg_allreduce", "adam", 0.002, False, {}, 1e-6),
}


def _optimizer(name: str, params) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9)
    return torch.optim.Adam(params, lr=1e-2)


def rank_engine_vs_ddp(device: str, steps: int) -> dict[str, Any]:
    """Every DDP_CASES case: our engine and torch DDP trained side by side on the same per-rank batches."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS (before CUDA starts)
    dev = _rank_device(device)
    rank = comm.get_rank()
    out: dict[str, Any] = {}
    for case, (algorithm, opt_name, bucket_mb, delay, options, _) in DDP_CASES.items():
        t0 = time.perf_counter()
        try:
            base = small_mlp(seed=rank).to(dev)  # different init per rank: the broadcast from rank 0 must fix it
            ddp = torch.nn.parallel.DistributedDataParallel(copy.deepcopy(base))
            opt_ddp = _optimizer(opt_name, ddp.parameters())
            model, opt = dd.distribute(
                base,
                _optimizer(opt_name, base.parameters()),
                algorithm,
                bucket_size_mb=bucket_mb,
                delay_reduce=delay,
                **options,
            )
            gen = torch.Generator().manual_seed(100 + rank)
            for _ in range(steps):
                x = torch.randn(16, 6, generator=gen).to(dev)
                y = torch.randn(16, 3, generator=gen).to(dev)
                for m, o in ((model, opt), (ddp, opt_ddp)):
                    o.zero_grad()
                    ((m(x) - y) ** 2).mean().backward()
                    o.step()
            devices = {str(p.device) for p in model.parameters()} | {str(p.device) for p in ddp.parameters()}
            out[case] = {
                "ours": flat(model.parameters()).cpu(),
                "ddp": flat(ddp.module.parameters()).cpu(),
                "devices": sorted(devices),
                "buckets": len(model.buckets),
                "seconds": time.perf_counter() - t0,
            }
        except Exception as exc:  # one case failing must not hide the others
            out[case] = {"error": one_line(exc), "seconds": time.perf_counter() - t0}
    return out


def engine_vs_ddp_rows(ctx: Ctx, results: list[dict[str, Any]]) -> list[dict[str, str]]:
    """b1, b2 from ``rank_engine_vs_ddp``'s results."""
    where = f"2 ranks, gloo, {'cuda:0' if ctx.cuda else 'cpu'}"
    rows = []
    for check_id, bitwise in (("b1", True), ("b2", False)):
        cases = [c for c, spec in DDP_CASES.items() if (spec[5] == 0.0) == bitwise]
        problems, figures = [], []
        for case in cases:
            tol = DDP_CASES[case][5]
            for rank, r in enumerate(results):
                got = r[case]
                if "error" in got:
                    problems.append(f"{case} rank {rank}: {got['error']}")
                    continue
                expected = "cuda:0" if ctx.cuda else "cpu"
                if got["devices"] != [expected]:
                    problems.append(f"{case}: parameters on {got['devices']}, expected {expected}")
                diff = (got["ours"] - got["ddp"]).abs().max().item()
                if not (torch.equal(got["ours"], got["ddp"]) if tol == 0.0 else diff <= tol):
                    problems.append(f"{case} rank {rank}: max |ours - DDP| {diff:.3g} > {tol:g}")
                if rank == 0:
                    figures.append(f"{case} {diff:.2g}")
            if all("error" not in r[case] for r in results) and not torch.equal(
                results[0][case]["ours"], results[1][case]["ours"]
            ):
                problems.append(f"{case}: the ranks' parameters differ")
        if bitwise:
            name = f"engine = torch DDP bitwise ({where})"
            figure = (
                f"{len(cases) - len(problems)}/{len(cases)} cases bit-identical after {ctx.size('ddp_steps')} steps"
            )
        else:
            name = f"compressed algorithms vs DDP ({where})"
            figure = "max |ours - DDP|: " + ", ".join(figures)
        if problems:
            rows.append(row(check_id, name, "; ".join(problems), "FAIL"))
        else:
            rows.append(row(check_id, name, figure))
    return rows


def rank_pipeline_collectives(device: str) -> dict[str, Any]:
    """The pipeline's own collectives on a group whose backend moves only ``device`` tensors."""
    from ding_dist.worker import reduce_log
    from ding_dist.worker.evaluator import Evaluator

    dev = _rank_device(device)

    class _Stub(Evaluator):
        def evaluate(self):
            return {"mean_return": 7.0}

    loss = torch.tensor(0.5, device=dev)
    return {
        "comm_device": str(dd.comm_device()),
        "reduce_log": reduce_log({"episodes": 1}, {"train/loss": 0.5}),
        "reduce_log_tensor": reduce_log({"episodes": 1}, {"train/loss": loss}),
        "evaluate_and_share": _Stub(None, None, n_episode=1, stop_value=5.0).evaluate_and_share(),
        "allreduce_data": dd.allreduce_data(2.0),
        "allreduce_data_tensor": dd.allreduce_data(torch.ones(3, device=dev)).cpu(),
        "broadcast_object": dd.broadcast_object({"a": 1} if dd.get_rank() == 0 else None),
    }


def pipeline_collectives_row(ctx: Ctx, results: list[dict[str, Any]], backend: str) -> dict[str, str]:
    """b3 from ``rank_pipeline_collectives``'s results (run in check h0's launch, on ``{device}:gloo``)."""
    expected = {
        "comm_device": "cuda:0" if ctx.cuda else "cpu",
        "reduce_log": {"episodes": 2.0, "train/loss": 0.5},
        "reduce_log_tensor": {"episodes": 2.0, "train/loss": 0.5},
        "evaluate_and_share": (7.0, True),
        "allreduce_data": 4.0,
        "broadcast_object": {"a": 1},
    }
    for rank, got in enumerate(results):
        for key, want in expected.items():
            assert got[key] == want, f"rank {rank} {key}: got {got[key]!r}, expected {want!r}"
        assert torch.equal(got["allreduce_data_tensor"], torch.full((3,), 2.0)), f"rank {rank} allreduce_data tensor"
    name = f"pipeline collectives, 2 ranks backend={backend}"
    figure = f"reduce_log, evaluate_and_share, allreduce_data, broadcast_object on {expected['comm_device']}"
    return row("b3", name, figure)


def _last_match(pattern: str, text: str) -> str | None:
    found = re.findall(pattern, text, flags=re.MULTILINE)
    return found[-1].strip() if found else None


def _error_line(text: str) -> str:
    """The most telling line of a failed command's output."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.search(r"Error|error:|FAILED|Duplicate GPU|failed", ln):
            return ln[:300]
    return lines[-1][:300] if lines else "(no output)"


class _Outcomes:
    """A pytest plugin that keeps the session's outcome counts (the terminal summary goes to the log)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.first_failure: str | None = None

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for key in ("passed", "failed", "error", "skipped", "deselected"):
            n = len(terminalreporter.stats.get(key, []))
            if n:
                self.counts[key] = n
        failed = terminalreporter.stats.get("failed", []) + terminalreporter.stats.get("error", [])
        self.first_failure = failed[0].nodeid if failed else None


def check_pytest_devices(ctx: Ctx) -> list[dict[str, str]]:
    """tests/comm/test_devices.py in this check's process (torch and ding_dist are imported already)."""
    name = "pytest tests/comm/test_devices.py" + (" (quick subset)" if ctx.quick else "")
    try:
        import pytest
    except ImportError:
        return [row("b4", name, "pytest is not installed here (b3 runs the same collectives)", "skipped: no pytest")]
    args = ["-q", "-p", "no:cacheprovider", "--rootdir", str(REPO), "-c", str(REPO / "pyproject.toml")]
    args.append(str(REPO / "tests" / "comm" / "test_devices.py"))
    if ctx.quick:  # the parts without process launches; the whole file runs in the CPU test suite anyway
        args += ["-k", "backend_config or resolve_device or without_cuda"]
    outcomes = _Outcomes()
    code = pytest.main(args, plugins=[outcomes])
    summary = ", ".join(f"{n} {key}" for key, n in outcomes.counts.items()) or "no tests ran"
    if code != 0:
        first = outcomes.first_failure
        return [row("b4", name, f"pytest exit {int(code)}: {summary}" + (f"; first: {first}" if first else ""), "FAIL")]
    if ctx.cuda and "skipped" in outcomes.counts:
        summary += " (the skipped ones are the CPU-only forms)"
    return [row("b4", name, summary)]


def _cli_args(ctx: Ctx, exp_dir: str, nproc: int) -> list[str]:
    args = ["train", str(CONFIGS["ppo"]), "--seed", "0", "--exp-dir", exp_dir, "--timeout", "120"]
    args += [
        "--max-env-steps",
        str(ctx.size("cli_steps")),
        "--set",
        f"policy.device={ctx.device}",
        *ctx.overrides("ppo"),
    ]
    return args + (["--nproc", str(nproc)] if nproc > 1 else [])


def _read_result(exp_dir: str) -> dict[str, Any]:
    path = Path(exp_dir) / "result.json"
    assert path.exists(), f"{path} was not written"
    return json.loads(path.read_text())


def cli_launch_row(ctx: Ctx, results: list[dict[str, Any]], exp_dir: str) -> dict[str, str]:
    """b5 from ``rank_cli_train``'s results."""
    expected = "cuda:0" if ctx.cuda else "cpu"
    for rank, r in enumerate(results):
        assert r["rc"] == 0, f"rank {rank}: ding-dist train returned {r['rc']}"
        assert r["devices"] == [expected], f"rank {rank}: policy on {r['devices']}, expected {expected}"
    figure = f"{_check_result(_read_result(exp_dir), ctx.size('cli_steps'), 2)}; policy on {expected} on both ranks"
    return row("b5", CLI_LAUNCH_NAME.format(device=ctx.device), figure)


CLI_LAUNCH_NAME = "ding-dist train, 2 ranks gloo (launch), policy.device={device}"


def _run_cmd(cmd: list[str], timeout: float) -> tuple[int | None, str]:
    """Run ``cmd`` in its own process group; on a timeout (or this check being stopped) end the whole group
    (torchrun's workers too). Returns (exit code or None on a timeout, stdout + stderr)."""
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
        return proc.returncode, output
    except subprocess.TimeoutExpired:
        output = ""
        return None, output
    finally:
        if proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue


def check_cli_torchrun(ctx: Ctx) -> list[dict[str, str]]:
    exp_dir = os.path.join(ctx.scratch("b6"), "run")
    exe = os.path.join(os.path.dirname(sys.executable), "ding-dist")  # this environment's, not one on PATH
    cmd = [exe] if os.access(exe, os.X_OK) else [sys.executable, "-m", "ding_dist.entry.cli"]
    timeout = ctx.size("launch_timeout")
    code, output = _run_cmd(cmd + _cli_args(ctx, exp_dir, 2), timeout)
    print(output)
    name = f"ding-dist train --nproc 2 (torchrun, default backend), policy.device={ctx.device}"
    if code is None:
        return [row("b6", name, f"timed out after {timeout} s", "FAIL")]
    if code != 0:
        figure = f"exit {code}: {_error_line(output)}"
        if "Duplicate GPU" in output:
            figure += " (the default backend on a GPU is nccl, one GPU per rank; the CLI has no backend option)"
        return [row("b6", name, figure, "FAIL")]
    backend = _last_match(r"backend (\S+), device", output) or "?"
    figure = f"{_check_result(_read_result(exp_dir), ctx.size('cli_steps'), 2)}; backend {backend.rstrip(',')}"
    return [row("b6", name, figure)]


# ------------------------------------------------------------- (f) actor-learner: CPU actors, learners on device
AL_BACKEND = "cpu:gloo,cuda:nccl"  # host tensors (weights, experience) over gloo, the learners' CUDA ones over nccl
AL_SHARED_GPU = "cpu:gloo,cuda:gloo"  # learners sharing one GPU: their CUDA gradients over gloo

# row id: (config, actors, learners, policy.device (None: the default, auto), backend with CUDA, GPUs it needs).
# f2 is on-policy into a CUDA learner with auto (the learner must resolve it to its GPU under the mixed backend);
# f3 needs a GPU per learner (nccl); f4 runs the same with both learners on one GPU over gloo; f5 adds an inference
# rank on the device (actor_learner.inference=1, actor_device={device}) that acts for 2 CPU actors.
AL_RUNS: dict[str, tuple[str, int, int, str | None, str, int]] = {
    "f1": ("dqn", 1, 1, "{device}", AL_BACKEND, 1),
    "f2": ("impala", 1, 1, None, AL_BACKEND, 1),
    "f3": ("ppo", 2, 2, "{device}", AL_BACKEND, 2),
    "f4": ("ppo", 2, 2, "{device}", AL_SHARED_GPU, 1),
    "f5": ("impala", 2, 1, "{device}", AL_BACKEND, 1),
}
AL_INFERENCE = {"f5"}  # rows with an inference rank (the last rank) on the device


def rank_cli_train(argv: list[str]) -> dict[str, Any]:
    """``ding-dist train`` (the CLI's ``main``) as one rank of the launch's group; also whether this process
    started CUDA (an actor on the CPU must not)."""
    from ding_dist.entry.cli import main

    with policy_device_log() as seen:
        rc = main(argv)
    return {"rc": rc, "devices": seen.devices, "cuda_started": torch.cuda.is_initialized()}


def _actor_learner_run(ctx: Ctx, rid: str) -> dict[str, str]:
    algo, actors, learners, spec, cuda_backend, gpus = AL_RUNS[rid]
    spec = spec.format(device=ctx.device) if spec else None
    backend = cuda_backend if ctx.cuda else "gloo"
    inference = rid in AL_INFERENCE
    world = actors + learners + inference
    device_text = f"policy.device={spec}" if spec else "policy.device=auto (default)"
    name = f"ding-dist train {algo.upper()} --actors {actors} --learners {learners} (launch, {backend}), {device_text}"
    if inference:
        name += f", inference rank on {ctx.device}"
    visible = torch.cuda.device_count() if ctx.cuda else 0
    if ctx.cuda and visible < gpus:
        why = f"needs {gpus} GPUs, {visible} visible: nccl takes one GPU per learner; f4 shares one GPU over gloo"
        return row(rid, name, why, f"skipped: needs {gpus} GPUs")
    if not ctx.cuda and cuda_backend == AL_BACKEND and learners > 1:
        return row(rid, name, "an nccl row; f4 runs the same on gloo", f"skipped: {_no_cuda_reason()}")
    exp_dir = os.path.join(ctx.scratch(rid), "run")
    steps = ctx.size("al_steps")
    argv = ["train", str(CONFIGS[algo]), "--actors", str(actors), "--learners", str(learners), "--seed", "0",
            "--exp-dir", exp_dir, "--timeout", "120", "--max-env-steps", str(steps),
            "--set", "actor_learner.actor_device=cpu", *ctx.overrides(algo)]  # fmt: skip
    if inference:  # the actors' own copy stays on the CPU whatever actor_device says
        argv += ["actor_learner.inference=1", f"actor_learner.actor_device={ctx.device}"]
    if spec:
        argv += [f"policy.device={spec}"]
    results = dd.launch(rank_cli_train, world, argv, backend=backend, timeout=ctx.size("launch_timeout"),
                        comm_timeout=120)  # fmt: skip
    learner_device = "cuda:0" if ctx.cuda else "cpu"  # one GPU: every learner on it; with more, rank i on GPU i
    for rank, r in enumerate(results):
        on_device = rank < learners or (inference and rank == world - 1)
        want = (f"cuda:{rank % max(visible, 1)}" if ctx.cuda else "cpu") if rank < learners else "cpu"
        if inference and rank == world - 1:
            want = "cuda:0" if ctx.cuda else "cpu"
        assert r["rc"] == 0, f"rank {rank}: ding-dist train returned {r['rc']}"
        assert r["devices"] == [want], f"rank {rank}: policy on {r['devices']}, expected {want}"
        if not on_device:
            assert not r["cuda_started"], f"rank {rank} (an actor on the CPU) started CUDA"
    result = _read_result(exp_dir)
    al = result["actor_learner"]
    assert al["finished_cleanly"] and al["versions"] > 0, f"actor_learner: {al}"
    assert al["lag_max"] <= al["max_lag"], f"lag {al['lag_max']} above the maximum {al['max_lag']}"
    served = ""
    if inference:
        info = json.loads(Path(exp_dir, "inference.json").read_text())
        assert info["lost"] == [] and info["rows"] > 0, f"inference: {info}"
        served = f"; inference rank on {want}: {info['rows']} rows in {info['batches']} forward passes"
    figure = (f"{_check_result(result, steps, world)}; learners on {learner_device}, actors on cpu"
              f"{' (CUDA never started there)' if ctx.cuda else ''}; {al['versions']} weight versions, "
              f"lag max {al['lag_max']}{served}")  # fmt: skip
    return row(rid, name, figure)


def check_actor_learner(ctx: Ctx) -> list[dict[str, str]]:
    """f1-f5: ``ding-dist train --actors N --learners M`` on ``launch``ed ranks, actors on the CPU, learners on the
    device: DQN, IMPALA with ``policy.device=auto`` under ``cpu:gloo,cuda:nccl``, PPO with 2 learners over nccl
    (2 GPUs) and sharing one GPU over gloo, IMPALA with an inference rank on the device. Weights cross from the
    device to the actors, experience back."""
    rows = []
    for rid in AL_RUNS:
        try:
            rows.append(_actor_learner_run(ctx, rid))
        except Exception as exc:  # one run failing must not hide the others
            traceback.print_exc()
            algo, actors, learners, *_ = AL_RUNS[rid]
            rows.append(row(rid, f"ding-dist train {algo.upper()} --actors {actors} --learners {learners}",
                            one_line(exc), "FAIL"))  # fmt: skip
    return rows


# ---------------------------------------------------------------------------------- (c) nccl world of one
@contextmanager
def world_of_one(ctx: Ctx) -> Iterator[str]:
    backend = "nccl" if ctx.cuda else "gloo"
    dd.dist_init(backend=backend, addr="127.0.0.1", port=dd.free_port(), rank=0, world_size=1, timeout=60)
    try:
        yield backend
    finally:
        dd.dist_finalize()


def _no_cuda_reason() -> str:
    return "no CUDA" if not torch.cuda.is_available() else "--device cpu"


def _stand_in(ctx: Ctx, check_id: str, name: str, figure: str) -> dict[str, str]:
    if ctx.cuda:
        return row(check_id, name, figure)
    return row(check_id, name, f"gloo stand-in on cpu ok: {figure}", f"skipped: {_no_cuda_reason()}")


def collectives_world_of_one(dev: torch.device, backend: str) -> list[str]:
    """Every collective helper of ding_dist.comm on a world of one; returns what was checked."""
    done: list[str] = []

    def same(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
        assert got.device == want.device, f"{what}: result on {got.device}, expected {want.device}"
        assert torch.equal(got, want), f"{what}: got {got.tolist()}, expected {want.tolist()}"
        done.append(what)

    x = torch.arange(1.0, 7.0, device=dev)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64):
        for op in ("sum", "avg", "max", "min", "product"):
            if op == "avg" and dtype == torch.int64:
                continue
            t = x.to(dtype)
            dd.allreduce(t, op=op)
            same(t, x.to(dtype), f"allreduce {op} {dtype}")
    t = x.clone()
    dd.allreduce(t, op=torch.distributed.ReduceOp.MAX)
    same(t, x, "allreduce ReduceOp.MAX")
    t = x.clone()
    dd.allreduce(t, async_op=True).wait()
    same(t, x, "allreduce async_op")
    t = x.clone()
    dd.allreduce_async(t).wait()
    same(t, x, "allreduce_async avg")
    t = x.clone()
    dd.broadcast(t, src=0)
    same(t, x, "broadcast")
    t = x.clone()
    dd.broadcast(t, src=0, async_op=True).wait()
    same(t, x, "broadcast async_op")
    gathered = dd.allgather(x)
    assert len(gathered) == 1, f"allgather returned {len(gathered)} tensors"
    same(gathered[0], x, "allgather")
    out = torch.empty_like(x)
    dd.allgather_into_tensor(out, x)
    same(out, x, "allgather_into_tensor")
    out = torch.empty_like(x)
    dd.all_to_all_single(out, x)
    same(out, x, "all_to_all_single")
    assert dd.reduce_data(2.5) == 2.5 and dd.reduce_data(3) == 3, "reduce_data of numbers"
    same(dd.reduce_data(x), x, "reduce_data tensor")
    assert dd.allreduce_data(2.0) == 2.0 and dd.allreduce_data(3, op="avg") == 3.0, "allreduce_data of numbers"
    same(dd.allreduce_data(x, op="max"), x, "allreduce_data tensor")
    host = torch.tensor([1.0, 2.0])
    same(dd.allreduce_data(host), host, "allreduce_data host tensor (moved for the backend and back)")
    g = x.clone()
    same(dd.allreduce_with_indicator(g, 1), x, "allreduce_with_indicator 1")
    g = x.clone()
    same(dd.allreduce_with_indicator(g, torch.tensor(1.0, device=dev)), x, "allreduce_with_indicator tensor")
    g = x.clone()
    same(dd.allreduce_with_indicator(g, 0), torch.zeros_like(x), "allreduce_with_indicator 0")
    dd.barrier()
    done.append("barrier")
    obj = {"a": [1, 2], "b": "x"}
    assert dd.broadcast_object(obj) == obj, "broadcast_object"
    assert dd.broadcast_object_list([obj, 3]) == [obj, 3], "broadcast_object_list"
    assert dd.allgather_object(obj) == [obj], "allgather_object"
    assert dd.allreduce_object(5) == 5, "allreduce_object"
    assert dd.allreduce_object_async(5).result(timeout=30) == 5, "allreduce_object_async"
    done += [
        "broadcast_object",
        "broadcast_object_list",
        "allgather_object",
        "allreduce_object",
        "allreduce_object_async",
    ]
    dd.health_check(timeout=30)
    done.append("health_check")
    net = nn.Linear(3, 2).to(dev)
    dd.check_consistency(net)
    dd.check_consistency([p.detach() for p in net.parameters()])
    done.append("check_consistency")
    dd.set_debug(True)  # the debug link checks every collective across ranks first
    try:
        t = x.clone()
        dd.allreduce(t, op="avg")
        same(t, x, "allreduce under set_debug(True)")
        assert dd.broadcast_object(obj) == obj, "broadcast_object under set_debug(True)"
    finally:
        dd.set_debug(False)
    assert dd.comm_device() == dev, f"comm_device() is {dd.comm_device()}, expected {dev}"
    done.append("comm_device")
    if backend == "nccl":
        assert dd.resolve_device("auto") == dev, f"resolve_device('auto') is {dd.resolve_device('auto')} under nccl"
        assert dd.backend_device_types() == frozenset({"cuda"}), f"nccl moves {dd.backend_device_types()}"
        try:
            dd.allreduce(torch.ones(2))
        except dd.DeviceMismatchError:
            done.append("host tensor refused")
        else:
            raise AssertionError("a host tensor on nccl was not refused with DeviceMismatchError")
    return done


def check_nccl_collectives(ctx: Ctx) -> list[dict[str, str]]:
    with world_of_one(ctx) as backend:
        dev = _rank_device(ctx.device)
        done = collectives_world_of_one(dev, backend)
    name = "nccl world of one: every ding_dist.comm collective, CUDA tensors"
    return [_stand_in(ctx, "c1", name, f"{len(done)} checks ok on {dev} ({backend})")]


def distribute_world_of_one(dev: torch.device) -> tuple[list[str], float]:
    """Each sync algorithm on a world of one against plain local training; returns (algorithms, max diff).

    Every algorithm must build on a world of one (each is local training there): one that raises fails the row.
    """
    ok, worst = [], 0.0
    x, y = torch.randn(16, 6, device=dev), torch.randn(16, 3, device=dev)
    for algorithm in dd.available_algorithms():
        net = small_mlp(seed=1).to(dev)
        local = copy.deepcopy(net)
        make_opt = (
            (lambda ps: dd.QAdamOptimizer(ps, lr=1e-2, warmup_steps=2))
            if algorithm == "qadam"
            else (lambda ps: torch.optim.Adam(ps, lr=1e-2))
        )
        model, opt = dd.distribute(net, make_opt(net.parameters()), algorithm)
        opt_local = make_opt(local.parameters())
        for _ in range(4):
            for m, o in ((model, opt), (local, opt_local)):
                o.zero_grad()
                ((m(x) - y) ** 2).mean().backward()
                o.step()
        diff = (flat(model.parameters()) - flat(local.parameters())).abs().max().item()
        assert diff <= 1e-6, f"{algorithm}: max |distributed - local| {diff:.3g} on a world of one"
        assert {p.device for p in model.parameters()} == {dev}, f"{algorithm}: parameters left {dev}"
        worst = max(worst, diff)
        ok.append(algorithm)
    # non-finite gradients: the step is skipped and counted
    net = small_mlp(seed=2).to(dev)
    model, opt = dd.distribute(net, torch.optim.SGD(net.parameters(), lr=0.1))
    before = flat(model.parameters())
    model(x).sum().backward()
    next(model.parameters()).grad.view(-1)[0] = float("nan")
    opt.step()
    assert model.nonfinite_skips == 1, f"nonfinite_skips {model.nonfinite_skips} after a NaN gradient"
    assert torch.equal(flat(model.parameters()), before), "a step with a NaN gradient changed the parameters"
    model.switch_to("fp16")
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    assert not torch.equal(flat(model.parameters()), before), "no update after switch_to('fp16')"
    # functional forms
    net(x).sum().backward()
    assert dd.sync_gradients(net) == 0, "sync_gradients on a world of one issued collectives"
    dd.broadcast_parameters(net)
    dd.allreduce_parameters(net)
    return ok, worst


def check_nccl_distribute(ctx: Ctx) -> list[dict[str, str]]:
    with world_of_one(ctx) as backend:
        dev = _rank_device(ctx.device)
        ok, worst = distribute_world_of_one(dev)
    figure = (f"ran: {', '.join(ok)}; each = local training (max diff {worst:.2g}); nonfinite skip, switch_to, "
              f"sync_gradients, broadcast/allreduce_parameters ok on {dev} ({backend})")  # fmt: skip
    return [_stand_in(ctx, "c2", "nccl world of one: distribute, each algorithm", figure)]


# ------------------------------------------------------------------------------- (d) learner updates/s
def _dqn_update(net: nn.Module, target: nn.Module, opt: torch.optim.Optimizer, batch: dict[str, torch.Tensor]):
    """One double-DQN update (the DQN policy's learn step, without the replay buffer)."""
    with torch.no_grad():
        next_action = net(batch["next_obs"]).argmax(dim=-1, keepdim=True)
        next_q = target(batch["next_obs"]).gather(1, next_action).squeeze(1)
        y = batch["reward"] + 0.99 * (1.0 - batch["done"]) * next_q
    q = net(batch["obs"]).gather(1, batch["action"].unsqueeze(1)).squeeze(1)
    loss = nn.functional.smooth_l1_loss(q, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(net.parameters(), 10.0)
    opt.step()
    return loss


def _make_learner(kind: str, dev: torch.device):
    gen = torch.Generator().manual_seed(0)
    if kind == "conv":
        torch.manual_seed(0)
        net, batch_size, n_act, lr = NatureQ(6), 32, 6, 1e-4

        def obs() -> torch.Tensor:
            return torch.randint(0, 256, (batch_size, 4, 84, 84), generator=gen, dtype=torch.uint8)
    else:
        from ding_dist.policy.dqn import DQNPolicy, QNetwork

        m = DQNPolicy.default_config().model
        torch.manual_seed(0)
        net, batch_size, n_act, lr = QNetwork(4, 2, m.hidden_sizes, m.dueling, m.activation), 64, 2, 1e-3

        def obs() -> torch.Tensor:
            return torch.randn(batch_size, 4, generator=gen)

    batch = {
        "obs": obs(),
        "next_obs": obs(),
        "action": torch.randint(0, n_act, (batch_size,), generator=gen),
        "reward": torch.randn(batch_size, generator=gen),
        "done": (torch.rand(batch_size, generator=gen) < 0.1).float(),
    }
    net = net.to(dev)
    target = copy.deepcopy(net).requires_grad_(False)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    return net, target, opt, {k: v.to(dev) for k, v in batch.items()}


def check_learner_rate(ctx: Ctx, check_id: str, kind: str) -> list[dict[str, str]]:
    torch.set_num_threads(ctx.cpu_threads)
    devices = [torch.device("cpu")] + ([torch.device("cuda", 0)] if ctx.cuda else [])
    learners = {d.type: _make_learner(kind, d) for d in devices}
    n_updates = {
        "cpu": ctx.size(f"d_updates_{kind}_cpu"),
        "cuda": ctx.size(f"d_updates_{kind}_gpu"),
    }
    rates: dict[str, list[float]] = {d.type: [] for d in devices}
    for d in devices:
        net, target, opt, batch = learners[d.type]
        for _ in range(ctx.size("d_warmup")):
            _dqn_update(net, target, opt, batch)
        _sync(d)
    for _ in range(ctx.size("d_repeats")):  # interleaved: load drift hits both devices alike
        for d in devices:
            net, target, opt, batch = learners[d.type]
            _sync(d)
            t0 = time.perf_counter()
            for _ in range(n_updates[d.type]):
                loss = _dqn_update(net, target, opt, batch)
            _sync(d)
            rates[d.type].append(n_updates[d.type] / (time.perf_counter() - t0))
            assert math.isfinite(loss.item()), f"non-finite loss on {d}"
    med = {k: statistics.median(v) for k, v in rates.items()}
    what = "Nature-DQN conv 4x84x84 uint8, batch 32" if kind == "conv" else "CartPole DQN MLP 128-128, batch 64"
    cpu = f"cpu ({ctx.cpu_threads} thread{'s' if ctx.cpu_threads > 1 else ''}) {med['cpu']:.0f}/s"
    if "cuda" in med:
        figure = f"gpu {med['cuda']:.0f}/s, {cpu}, gpu/cpu {med['cuda'] / med['cpu']:.1f}x"
    else:
        figure = f"{cpu}; no GPU: ratio not measured"
    return [row(check_id, f"learner updates/s, {what}, Adam", figure)]


# ------------------------------------------------------------------------- (e) engine vs DDP step time
def rank_step_times(device: str, sizes: dict[str, int]) -> dict[str, Any]:
    """Median training-step time of our engine and torch DDP, interleaved in rounds, for the MLP and conv net."""
    dev = _rank_device(device)
    rank = comm.get_rank()
    out = {}
    for kind in ("mlp", "conv"):
        t_kind = time.perf_counter()
        if kind == "mlp":
            base, shape, n_out = wide_mlp(sizes["e_mlp_width"], sizes["e_mlp_layers"]), (sizes["e_mlp_width"],), None
        else:
            torch.manual_seed(0)
            base, shape, n_out = NatureQ(6), (4, 84, 84), 6
        n_out = n_out or sizes["e_mlp_width"]
        gen = torch.Generator().manual_seed(1000 + rank)
        if kind == "conv":
            xs = [torch.randint(0, 256, (sizes["e_batch"], *shape), generator=gen, dtype=torch.uint8) for _ in range(4)]
        else:
            xs = [torch.randn(sizes["e_batch"], *shape, generator=gen) for _ in range(4)]
        data = [(x.to(dev), torch.randn(sizes["e_batch"], n_out, generator=gen).to(dev)) for x in xs]
        ours_net = copy.deepcopy(base).to(dev)
        ours, opt_ours = dd.distribute(ours_net, torch.optim.Adam(ours_net.parameters(), lr=1e-4))
        ddp = torch.nn.parallel.DistributedDataParallel(copy.deepcopy(base).to(dev))
        opt_ddp = torch.optim.Adam(ddp.parameters(), lr=1e-4)
        variants = {"ours": (ours, opt_ours), "ddp": (ddp, opt_ddp)}
        times: dict[str, list[float]] = {k: [] for k in variants}

        def step(name: str, i: int, variants=variants, data=data) -> None:
            m, o = variants[name]
            x, y = data[i % len(data)]
            o.zero_grad()
            nn.functional.mse_loss(m(x), y).backward()
            o.step()

        for name in variants:
            for i in range(sizes["e_warmup"]):
                step(name, i)
        per_round = max(1, sizes["e_steps"] // sizes["e_rounds"])
        for _ in range(sizes["e_rounds"]):
            for name in variants:
                for i in range(per_round):
                    _sync(dev)
                    comm.barrier()
                    t0 = time.perf_counter()
                    step(name, i)
                    _sync(dev)
                    times[name].append(time.perf_counter() - t0)
        out[kind] = {
            "ours": statistics.median(times["ours"]),
            "ddp": statistics.median(times["ddp"]),
            "params": sum(p.numel() for p in base.parameters()),
            "seconds": time.perf_counter() - t_kind,
        }
    return out


def step_time_rows(ctx: Ctx, r: dict[str, Any]) -> list[dict[str, str]]:
    """e1, e2 from rank 0's ``rank_step_times`` result."""
    where = f"2 ranks gloo on {'cuda:0' if ctx.cuda else 'cpu'}"
    rows = []
    for check_id, kind, what in (("e1", "mlp", "MLP"), ("e2", "conv", "Nature-DQN conv")):
        m = r[kind]
        figure = (
            f"ours {m['ours'] * 1e3:.2f} ms, DDP {m['ddp'] * 1e3:.2f} ms, ours/DDP {m['ours'] / m['ddp']:.2f} "
            f"({m['params'] / 1e6:.2f}M params, batch {ctx.size('e_batch')}, Adam)"
        )
        rows.append(row(check_id, f"engine vs torch DDP step time, {what} ({where})", figure))
    return rows


def rank_parts(parts: list[tuple[str, Callable[..., Any], tuple]]) -> dict[str, Any]:
    """Each ``(name, fn, args)`` in turn on this rank: ``{name: fn(*args)}``, an exception as ``{"error": line}``
    (one launch for several checks: every launch costs seconds of process start on a small machine)."""
    out: dict[str, Any] = {}
    for name, fn, args in parts:
        t0 = time.perf_counter()
        try:
            out[name] = fn(*args)
        except Exception as exc:  # reported in the part's rows; the next part still runs
            traceback.print_exc()
            out[name] = {"error": one_line(exc)}
        print(f"part {name}: {time.perf_counter() - t0:.1f} s", flush=True)
    return out


def _part_rows(results: list[dict[str, Any]], part: str, ids: dict[str, str], make) -> list[dict[str, str]]:
    """``make()``'s rows, or one FAIL row per id (``ids``: id -> name) when a rank's part raised."""
    errors = [f"rank {rank}: {r[part]['error']}" for rank, r in enumerate(results)
              if isinstance(r[part], dict) and "error" in r[part]]  # fmt: skip
    if not errors:
        try:
            return make()
        except AssertionError as exc:
            errors = [str(exc)]
    return [row(rid, name, "; ".join(errors), "FAIL") for rid, name in ids.items()]


def check_gloo_pair(ctx: Ctx) -> list[dict[str, str]]:
    """b1, b2, e1, e2, b5 on one ``launch`` of 2 gloo ranks: engine vs torch DDP (results, then step times),
    then ``ding-dist train`` on both ranks."""
    sizes = SIZES["quick" if ctx.quick else "full"]
    exp_dir = os.path.join(ctx.scratch("b5"), "run")
    parts = [("ddp", rank_engine_vs_ddp, (ctx.device, ctx.size("ddp_steps"))),
             ("steps", rank_step_times, (ctx.device, sizes)),
             ("cli", rank_cli_train, (_cli_args(ctx, exp_dir, 1),))]  # fmt: skip
    results = dd.launch(rank_parts, 2, parts, backend="gloo", timeout=2 * ctx.size("launch_timeout"), comm_timeout=120)
    where = "cuda:0" if ctx.cuda else "cpu"
    rows = _part_rows(results, "ddp", {"b1": f"engine = torch DDP bitwise (2 ranks, gloo, {where})",
                                       "b2": f"compressed algorithms vs DDP (2 ranks, gloo, {where})"},
                      lambda: engine_vs_ddp_rows(ctx, [r["ddp"] for r in results]))  # fmt: skip
    rows += _part_rows(results, "cli", {"b5": CLI_LAUNCH_NAME.format(device=ctx.device)},
                       lambda: [cli_launch_row(ctx, [r["cli"] for r in results], exp_dir)])  # fmt: skip
    step = "engine vs torch DDP step time, {} (2 ranks gloo on " + where + ")"
    rows += _part_rows(results, "steps", {"e1": step.format("MLP"), "e2": step.format("Nature-DQN conv")},
                       lambda: step_time_rows(ctx, results[0]["steps"]))  # fmt: skip
    return rows


# ----------------------------------------------------- (g) image policies and observation normalization
def image_config(ctx: Ctx, algo: str) -> tuple[Any, Any]:
    """``configs/cartpole_<algo>_config.py`` on :class:`~ding_dist.envs.toy.FrameStackEnv` (84 x 84; 36 x 36
    with --quick): Atari's frame shapes and dtype on a machine without ale-py."""
    from ding_dist.config import read_config

    main, create = read_config(str(CONFIGS[algo]))
    main.exp_name = f"gpu_check_image_{algo}"
    envs, batch = ctx.size("image_envs"), ctx.size("image_batch")
    side = {"side": ctx.size("image_side")}
    main.env.update(id=None, entry_point="ding_dist.envs.toy:FrameStackEnv", env_kwargs=side,
                    max_episode_steps=50 if not ctx.quick else 12, collector_env_num=envs, evaluator_env_num=1,
                    n_evaluator_episode=1, stop_value=None)  # fmt: skip
    main.policy.eval.eval_freq = 10**9  # one evaluation, at the end
    main.policy.other = {**main.policy.get("other", {}), "log_freq": 10**9}
    if algo == "dqn":
        main.policy.model.hidden_sizes = [ctx.size("image_hidden")]  # on images: the CNN's features, then one layer
        main.policy.learn.update(batch_size=batch, update_per_collect=ctx.size("image_dqn_updates"),
                                 learning_starts=4 * batch)  # fmt: skip
        main.policy.collect.n_sample = 2 * batch
        main.policy.other.replay_buffer = dict(replay_buffer_size=ctx.size("image_steps"))
    else:  # PPO and IMPALA: rollouts of 32 (16 with --quick) steps per env, 2 minibatches per epoch
        main.policy.learn.update(epoch_per_collect=2, batch_size=2 * batch)
        main.policy.collect.n_sample = 4 * batch
    if algo == "ppo":
        create.env_manager.type = "async"  # the env processes start after the policy is on the device
    return main, create


class _Seen:
    """What the image networks and the frame replay did while a pipeline ran (class-level wrappers)."""

    def __init__(self) -> None:
        self.cnn_inputs: set[tuple[str, str]] = set()
        self.frame_samples = 0


@contextmanager
def watch_images() -> Iterator[_Seen]:
    from ding_dist.data.frame_replay import FrameReplayBuffer
    from ding_dist.policy.encoders import NatureCNN

    seen = _Seen()
    forward, sample = NatureCNN.forward, FrameReplayBuffer.sample

    def watched_forward(self, obs):
        seen.cnn_inputs.add((str(obs.device), str(obs.dtype).replace("torch.", "")))
        return forward(self, obs)

    def watched_sample(self, *args, **kwargs):
        seen.frame_samples += 1
        return sample(self, *args, **kwargs)

    NatureCNN.forward, FrameReplayBuffer.sample = watched_forward, watched_sample
    try:
        yield seen
    finally:
        NatureCNN.forward, FrameReplayBuffer.sample = forward, sample


def check_image_policies(ctx: Ctx) -> list[dict[str, str]]:
    """g1-g3: DQN (frame replay), PPO (async envs) and IMPALA on stacked uint8 frames, one process each."""
    from ding_dist.entry import train

    expected = "cuda:0" if ctx.cuda else "cpu"
    steps = ctx.size("image_steps")
    side = ctx.size("image_side")
    rows = []
    for rid, algo in (("g1", "dqn"), ("g2", "ppo"), ("g3", "impala")):
        extra = {"dqn": ", FrameReplayBuffer", "ppo": ", env_manager=async", "impala": ""}[algo]
        name = f"image {algo.upper()} 1 process, Nature-CNN on 4x{side}x{side} uint8{extra}, policy.device={ctx.device}"
        try:
            main, create = image_config(ctx, algo)
            main.policy.device = ctx.device
            with policy_device_log() as devices, watch_images() as seen:
                result = train((main, create), seed=0, exp_dir=ctx.scratch(f"{rid}_run"), max_env_steps=steps)
            assert devices.devices[:1] == [expected], f"policy on {devices.devices}, expected {expected}"
            assert seen.cnn_inputs == {(expected, "uint8")}, f"the Nature-CNN saw {sorted(seen.cnn_inputs)}"
            figure = f"{_check_result(result, steps, 1)}; CNN input uint8 on {expected}"
            if algo == "dqn":
                assert seen.frame_samples > 0, "the frame replay (FrameReplayBuffer) was never sampled"
                figure += f"; {seen.frame_samples} FrameReplayBuffer samples"
            rows.append(row(rid, name, figure))
        except Exception as exc:  # one policy failing must not hide the others
            traceback.print_exc()
            rows.append(row(rid, name, one_line(exc), "FAIL"))
    return rows


def _obs_norm_sync(dev: torch.device) -> dict[str, Any]:
    """RunningObsNorm on ``dev``: each rank observes its own batch; after ``sync()`` both hold the statistics of
    both batches (count, mean, m2 in float64)."""
    from ding_dist.policy.normalization import RunningObsNorm

    rank = comm.get_rank()
    norm = RunningObsNorm((3,)).to(dev)
    gen = torch.Generator().manual_seed(300 + rank)
    batch = torch.randn(5 + 3 * rank, 3, generator=gen, dtype=torch.float64) * (rank + 1) + rank
    norm.observe(batch.numpy())
    norm.sync()
    out = {"count": norm.count.item(), "mean": norm.mean.cpu(), "var": norm.var.cpu(), "batch": batch,
           "device": str(norm.mean.device), "out_device": str(norm(torch.zeros(2, 3, device=dev)).device)}  # fmt: skip
    return out


# ------------------------------------------------ (h) the looser sync algorithms, 2 ranks, CUDA tensors
# case: (row id, algorithm, options, optimizer, max |device run - CPU run| allowed on CUDA)
# The device run and a CPU run of the same algorithm on the same batches go side by side on each rank, the CPU
# one over a gloo subgroup; on the CPU form both are CPU runs and must agree bitwise. The tolerances on CUDA
# allow for CUDA's float kernels: the exact algorithms 1e-5, the 8-bit ones a few quantization steps.
SYNC_CASES: dict[str, tuple[str, str, dict[str, Any], str, float]] = {
    "decentralized": ("h1", "decentralized", {"topology": "ring"}, "sgd", 1e-5),
    "low_precision_decentralized": ("h2", "low_precision_decentralized", {}, "sgd", 2e-2),
    "low_precision_decentralized_hier": ("h2", "low_precision_decentralized", {"hierarchical": True}, "sgd", 2e-2),
    "local_sgd": ("h3", "local_sgd", {"warmup_steps": 1, "period": 2}, "sgd", 1e-5),
    "qadam": ("h4", "qadam", {}, "qadam", 2e-2),
}
SYNC_NAMES = {
    "h1": "decentralized (ring: isend/irecv)",
    "h2": "low_precision_decentralized (flat ring: isend/irecv; hierarchical=True: one node)",
    "h3": "local_sgd (warmup 1, period 2)",
    "h4": "qadam (QAdamOptimizer, warmup 2)",
    "h5": "async (warmup 2, sync_interval_ms 1)",
}
SYNC_LR = 0.05


def _sync_optimizer(kind: str, params) -> torch.optim.Optimizer:
    if kind == "qadam":
        return dd.QAdamOptimizer(params, lr=1e-2, warmup_steps=2)
    return torch.optim.SGD(params, lr=SYNC_LR)


def _train_side_by_side(case: str, dev: torch.device, ref_group: Any, steps: int) -> dict[str, Any]:
    _, algorithm, options, opt_kind, _ = SYNC_CASES[case]
    rank = comm.get_rank()
    runs = {}
    for where, device, group in (("device", dev, None), ("cpu", torch.device("cpu"), ref_group)):
        net = small_mlp(seed=rank).to(device)  # different init per rank: the broadcast from rank 0 must fix it
        model, opt = dd.distribute(net, _sync_optimizer(opt_kind, net.parameters()), algorithm, group=group, **options)
        runs[where] = (model, opt, device)
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x, y = torch.randn(16, 6, generator=gen), torch.randn(16, 3, generator=gen)
        for model, opt, device in runs.values():
            opt.zero_grad()
            ((model(x.to(device)) - y.to(device)) ** 2).mean().backward()
            opt.step()
    out = {where: flat(model.parameters()).cpu() for where, (model, _, _) in runs.items()}
    out["devices"] = sorted({str(p.device) for p in runs["device"][0].parameters()})
    for model, _, _ in runs.values():
        model.close()
    return out


def _async_invariant(dev: torch.device, steps: int) -> dict[str, Any]:
    """``async`` with plain SGD: after ``abort()`` the ranks hold the same weights, and their mean is the start
    minus lr / n times the sum of every gradient every rank applied (a round keeps the sum of the weights)."""
    rank = comm.get_rank()
    net = small_mlp(seed=rank).to(dev)
    model, opt = dd.distribute(net, torch.optim.SGD(net.parameters(), lr=SYNC_LR), "async", sync_interval_ms=1,
                               warmup_steps=2)  # fmt: skip
    w0 = flat(model.parameters()).double()
    grads = torch.zeros_like(w0)
    gen = torch.Generator().manual_seed(200 + rank)
    for _ in range(steps + 3 * rank):  # ranks run different numbers of steps
        x, y = torch.randn(16, 6, generator=gen).to(dev), torch.randn(16, 3, generator=gen).to(dev)
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        grads += torch.cat([p.grad.detach().reshape(-1) for p in model.parameters()]).double()
        opt.step()
    model.abort()
    devices = sorted({str(p.device) for p in model.parameters()})
    out = {"w0": w0.cpu(), "grads": grads.cpu(), "w": flat(model.parameters()).cpu(), "devices": devices}
    out["rounds"] = model.engine.state.rounds
    model.close()
    return out


def _p2p_exchange(dev: torch.device) -> dict[str, Any]:
    """``isend``/``irecv`` of a device tensor with the other rank, and the blocking ``send``/``recv``."""
    rank = comm.get_rank()
    peer = 1 - rank
    mine = torch.arange(6.0, device=dev) + 10 * rank
    got = torch.zeros(6, device=dev)
    handles = [comm.isend(mine, peer), comm.irecv(got, peer)]
    for h in handles:
        h.wait()
    back = torch.zeros(6, device=dev)
    if rank == 0:
        comm.send(mine * 2, peer)
        comm.recv(back, peer)
    else:
        comm.recv(back, peer)
        comm.send(mine * 2, peer)
    return {"async": got.cpu(), "blocking": back.cpu(), "device": str(got.device)}


def obs_norm_config(ctx: Ctx) -> tuple[Any, Any]:
    """``configs/cartpole_ppo_config.py`` with ``policy.model.obs_norm=True`` on the device (h6)."""
    from ding_dist.config import read_config

    main, create = read_config(str(CONFIGS["ppo"]))
    main.policy.model.obs_norm = True
    main.policy.device = ctx.device
    main.env.update(evaluator_env_num=2, n_evaluator_episode=2)
    if ctx.quick:
        main.policy.learn.epoch_per_collect = 2
    return main, create


def _obs_norm_pipeline(config: tuple[Any, Any], exp_dir: str, steps: int) -> dict[str, Any]:
    from ding_dist.entry import train

    with policy_device_log() as seen:
        result = train(config, seed=0, exp_dir=exp_dir, max_env_steps=steps)
    keys = ("env_steps", "train_iters", "world_size", "last_eval_return", "stopped_by")
    return {"devices": seen.devices, "result": {k: result.get(k) for k in keys}}


def rank_sync_algorithms(
    device: str, steps: int, cases: list[str], with_async: bool, obs_norm: tuple | None = None
) -> dict[str, Any]:
    """Point-to-point, each of ``cases`` side by side with its CPU run, then ``async``'s invariant, then (h6)
    observation normalization: its statistics' sync, and ``obs_norm`` = (config, exp_dir, env steps) through the
    pipeline; plus the CUDA device the library set for this rank before this function touched it."""
    out: dict[str, Any] = {}
    if device == "cuda":
        out["current_device"] = torch.cuda.current_device()  # before _rank_device sets it: the library's choice
        out["rank_cuda_index"] = dd.rank_cuda_index()
    dev = _rank_device(device)
    out["comm_device"] = str(dd.comm_device())
    ref_group = dd.new_group([0, 1], backend="gloo")
    jobs: dict[str, Callable[[], dict[str, Any]]] = {"p2p": lambda: _p2p_exchange(dev)}
    if obs_norm is not None:  # check h0 (not n1): b3's pipeline collectives too
        jobs["b3"] = lambda: rank_pipeline_collectives(device)
    jobs.update({case: functools.partial(_train_side_by_side, case, dev, ref_group, steps) for case in cases})
    if with_async:
        jobs["async"] = lambda: _async_invariant(dev, steps)
    if obs_norm is not None:
        jobs["obs_norm_sync"] = lambda: _obs_norm_sync(dev)
        jobs["obs_norm_pipeline"] = lambda: _obs_norm_pipeline(*obs_norm)
    for name, job in jobs.items():
        t0 = time.perf_counter()
        try:
            out[name] = job()
        except Exception as exc:  # one case failing must not hide the others
            out[name] = {"error": one_line(exc)}
        out[name]["seconds"] = time.perf_counter() - t0
    return out


def _p2p_problems(results: list[dict[str, Any]], dev_of: Callable[[int], str]) -> list[str]:
    problems = []
    for rank, r in enumerate(results):
        got = r["p2p"]
        if "error" in got:
            problems.append(f"p2p rank {rank}: {got['error']}")
            continue
        want = torch.arange(6.0) + 10 * (1 - rank)
        if not torch.equal(got["async"], want):
            problems.append(f"rank {rank}: irecv got {got['async'].tolist()}, expected {want.tolist()}")
        if not torch.equal(got["blocking"], want * 2):
            problems.append(f"rank {rank}: recv got {got['blocking'].tolist()}, expected {(want * 2).tolist()}")
        if got["device"] != dev_of(rank):
            problems.append(f"rank {rank}: received on {got['device']}, expected {dev_of(rank)}")
    return problems


def _device_problems(cuda: bool, results: list[dict[str, Any]], dev_of: Callable[[int], str]) -> list[str]:
    """The device each rank's collectives use, and (CUDA) the device the library set before the check did."""
    problems = []
    for rank, r in enumerate(results):
        if r["comm_device"] != dev_of(rank):
            problems.append(f"rank {rank}: comm_device() {r['comm_device']}, expected {dev_of(rank)}")
        if cuda and r["current_device"] != r["rank_cuda_index"]:
            problems.append(f"rank {rank}: current CUDA device {r['current_device']} is not rank_cuda_index() "
                            f"{r['rank_cuda_index']} (the process group's setup did not set it)")  # fmt: skip
    return problems


def _case_problems(
    cuda: bool, case: str, results: list[dict[str, Any]], dev_of: Callable[[int], str]
) -> tuple[list[str], float]:
    """The device run on the device, and within the case's tolerance of the CPU run (bitwise on the CPU form)."""
    tol = SYNC_CASES[case][4] if cuda else 0.0
    problems, worst = [], 0.0
    for rank, r in enumerate(results):
        got = r[case]
        if "error" in got:
            problems.append(f"{case} rank {rank}: {got['error']}")
            continue
        if got["devices"] != [dev_of(rank)]:
            problems.append(f"{case} rank {rank}: parameters on {got['devices']}, expected {dev_of(rank)}")
        diff = (got["device"] - got["cpu"]).abs().max().item()
        worst = max(worst, diff)
        if not (torch.equal(got["device"], got["cpu"]) if tol == 0.0 else diff <= tol):
            problems.append(f"{case} rank {rank}: max |device run - cpu run| {diff:.3g} > {tol:g}")
    return problems, worst


def _async_row(results: list[dict[str, Any]], dev: str, where: str) -> dict[str, str]:
    name = f"{SYNC_NAMES['h5']} ({where})"
    runs = [r["async"] for r in results]
    errors = [f"rank {rank}: {run['error']}" for rank, run in enumerate(runs) if "error" in run]
    if errors:
        return row("h5", name, "; ".join(errors), "FAIL")
    problems = []
    if not torch.equal(runs[0]["w"], runs[1]["w"]):
        diff = (runs[0]["w"] - runs[1]["w"]).abs().max().item()
        problems.append(f"the ranks' weights differ after abort() (max {diff:.3g})")
    expected = runs[0]["w0"] - SYNC_LR / len(runs) * sum(run["grads"] for run in runs)
    diff = (runs[0]["w"].double() - expected).abs().max().item()
    if diff > 1e-5:
        problems.append(f"max |mean weights - (w0 - lr/n * sum of all gradients)| {diff:.3g} > 1e-05")
    for rank, run in enumerate(runs):
        if run["devices"] != [dev]:
            problems.append(f"rank {rank}: parameters on {run['devices']}, expected {dev}")
    if problems:
        return row("h5", name, "; ".join(problems), "FAIL")
    figure = (f"weights identical after abort(), sum of the weights kept (max diff {diff:.2g}); "
              f"{runs[0]['rounds']} averaging rounds on rank 0")  # fmt: skip
    return row("h5", name, figure)


def _cases_row(cuda: bool, rid: str, name: str, cases: list[str], results, dev_of, steps: int) -> dict[str, str]:
    problems, worsts = [], []
    for case in cases:
        found, worst = _case_problems(cuda, case, results, dev_of)
        problems += found
        worsts.append(f"{case} {worst:.2g}")
    if problems:
        return row(rid, name, "; ".join(problems), "FAIL")
    what = "max |diff| from" if cuda else "bit-identical to"
    return row(rid, name, f"{steps} steps, {what} the same run on cpu: " + ", ".join(worsts))


def check_sync_algorithms(ctx: Ctx) -> list[dict[str, str]]:
    """b3, h0-h6: 2 ranks on one device, backend ``{device}:gloo`` (``cuda:gloo`` moves CUDA tensors only, as
    nccl does); the CPU runs of h1-h4 go over a gloo subgroup."""
    backend = f"{ctx.device}:gloo"
    dev = "cuda:0" if ctx.cuda else "cpu"
    where = f"2 ranks, backend={backend}, {dev}"
    steps = ctx.size("sync_steps")
    obs_norm = (obs_norm_config(ctx), os.path.join(ctx.scratch("h6"), "run"), ctx.size("cli_steps"))
    results = dd.launch(rank_sync_algorithms, 2, ctx.device, steps, list(SYNC_CASES), True, obs_norm,
                        backend=backend, timeout=ctx.size("launch_timeout"), comm_timeout=120)  # fmt: skip

    def dev_of(rank: int) -> str:
        return dev

    name = f"point-to-point and the ranks' devices ({where})"
    problems = _device_problems(ctx.cuda, results, dev_of) + _p2p_problems(results, dev_of)
    figure = f"isend/irecv and send/recv delivered the peer's values on {dev}; comm_device() {dev} on both ranks"
    rows = [row("h0", name, "; ".join(problems), "FAIL") if problems else row("h0", name, figure)]
    for rid in ("h1", "h2", "h3", "h4"):
        cases = [c for c, spec in SYNC_CASES.items() if spec[0] == rid]
        rows.append(_cases_row(ctx.cuda, rid, f"{SYNC_NAMES[rid]} ({where})", cases, results, dev_of, steps))
    rows.append(_async_row(results, dev, where))
    rows.append(_obs_norm_row(ctx, results, dev, where))
    errors = [f"rank {rank}: {r['b3']['error']}" for rank, r in enumerate(results) if "error" in r["b3"]]
    try:
        assert not errors, "; ".join(errors)
        rows.append(pipeline_collectives_row(ctx, [r["b3"] for r in results], backend))
    except AssertionError as exc:
        rows.append(row("b3", f"pipeline collectives, 2 ranks backend={backend}", str(exc), "FAIL"))
    return rows


def _obs_norm_row(ctx: Ctx, results: list[dict[str, Any]], dev: str, where: str) -> dict[str, str]:
    name = f"PPO policy.model.obs_norm=True: statistics synced, then the pipeline ({where})"
    problems = [f"rank {rank}: {r[job]['error']}" for rank, r in enumerate(results)
                for job in ("obs_norm_sync", "obs_norm_pipeline") if "error" in r[job]]  # fmt: skip
    if problems:
        return row("h6", name, "; ".join(problems), "FAIL")
    both = torch.cat([r["obs_norm_sync"]["batch"] for r in results])
    for rank, r in enumerate(results):
        d = r["obs_norm_sync"]
        if d["count"] != len(both):
            problems.append(f"rank {rank}: count {d['count']} after sync, expected {len(both)}")
        if not torch.allclose(d["mean"], both.mean(0), rtol=0, atol=1e-10):
            problems.append(f"rank {rank}: mean {d['mean'].tolist()}, expected {both.mean(0).tolist()}")
        if not torch.allclose(d["var"], both.var(0, unbiased=False), rtol=0, atol=1e-10):
            problems.append(f"rank {rank}: var {d['var'].tolist()}")
        if not d["device"] == d["out_device"] == dev:
            problems.append(f"rank {rank}: statistics on {d['device']}, output on {d['out_device']}, expected {dev}")
        if r["obs_norm_pipeline"]["devices"] != [dev]:
            problems.append(f"rank {rank}: policy on {r['obs_norm_pipeline']['devices']}, expected {dev}")
    try:
        figure = _check_result(results[0]["obs_norm_pipeline"]["result"], ctx.size("cli_steps"), 2)
    except AssertionError as exc:
        problems.append(f"pipeline: {exc}")
    if problems:
        return row("h6", name, "; ".join(problems), "FAIL")
    return row("h6", name, f"both ranks' statistics merged exactly on {dev}; pipeline: {figure}")


def check_nccl_p2p(ctx: Ctx) -> list[dict[str, str]]:
    """n1: 2 ranks on nccl (one GPU each): point-to-point and the decentralized algorithms over NCCL."""
    name = "nccl, 2 ranks on 2 GPUs: isend/irecv, decentralized, low_precision_decentralized"
    gpus = torch.cuda.device_count() if ctx.cuda else 0
    if gpus < 2:
        status = "skipped: needs 2 GPUs" if ctx.cuda else f"skipped: {_no_cuda_reason()}"
        figure = (f"{gpus} GPU(s) visible; NCCL refuses two ranks on one GPU ('Duplicate GPU detected'); h0-h2 run "
                  "the same code over gloo with CUDA tensors on one GPU")  # fmt: skip
        return [row("n1", name, figure, status)]
    cases = ["decentralized", "low_precision_decentralized"]
    steps = ctx.size("sync_steps")
    results = dd.launch(rank_sync_algorithms, 2, ctx.device, steps, cases, False, backend="nccl",
                        timeout=ctx.size("launch_timeout"), comm_timeout=60)  # fmt: skip

    def dev_of(rank: int) -> str:
        return f"cuda:{results[rank]['rank_cuda_index']}"

    problems = _device_problems(True, results, dev_of) + _p2p_problems(results, dev_of)
    got = _cases_row(True, "n1", name, cases, results, dev_of, steps)
    if problems or got["status"] != "ok":
        return [row("n1", name, "; ".join(problems + ([got["figure"]] if got["status"] != "ok" else [])), "FAIL")]
    return [row("n1", name, "isend/irecv, send/recv right on both GPUs; " + got["figure"])]


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
