"""Checks (b) and (e): 2 ranks on one device over gloo: engine vs torch DDP results (b1, b2) and step times
(e1, e2), ``ding-dist train`` on ``launch``ed ranks (b5) and torchrun (b6), tests/comm/test_devices.py (b4)."""

from __future__ import annotations

import copy
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch
from gpu_check_common import (
    CONFIGS,
    REPO,
    SIZES,
    Ctx,
    NatureQ,
    _check_result,
    _rank_device,
    _read_result,
    _sync,
    flat,
    one_line,
    rank_cli_train,
    row,
    small_mlp,
    wide_mlp,
)
from torch import nn

import ding_dist as dd
from ding_dist import comm

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


def _pytest_row(ctx: Ctx, check_id: str, test_file: str, quick: str, absent: str) -> dict[str, str]:
    """``pytest test_file`` in this check's process (torch and ding_dist are imported already); ``quick``: the ``-k``
    subset of ``--quick``; ``absent``: what covers the same where pytest is not installed."""
    name = f"pytest {test_file}" + (" (quick subset)" if ctx.quick else "")
    try:
        import pytest
    except ImportError:
        return row(check_id, name, f"pytest is not installed here ({absent})", "skipped: no pytest")
    args = ["-q", "-p", "no:cacheprovider", "--rootdir", str(REPO), "-c", str(REPO / "pyproject.toml")]
    args.append(str(REPO / test_file))
    if ctx.quick:  # the whole file runs in the CPU test suite anyway
        args += ["-k", quick]
    outcomes = _Outcomes()
    code = pytest.main(args, plugins=[outcomes])
    summary = ", ".join(f"{n} {key}" for key, n in outcomes.counts.items()) or "no tests ran"
    if code != 0:
        first = outcomes.first_failure
        failed = f"pytest exit {int(code)}: {summary}" + (f"; first: {first}" if first else "")
        return row(check_id, name, failed, "FAIL")
    if ctx.cuda and "skipped" in outcomes.counts:
        summary += " (the skipped ones are the CPU-only forms)"
    return row(check_id, name, summary)


def check_pytest_devices(ctx: Ctx) -> list[dict[str, str]]:
    """tests/comm/test_devices.py: the quick subset is the part without process launches."""
    quick = "backend_config or resolve_device or without_cuda"
    return [_pytest_row(ctx, "b4", "tests/comm/test_devices.py", quick, "b3 runs the same collectives")]


def check_pytest_learn_reads(ctx: Ctx) -> list[dict[str, str]]:
    """tests/policy/test_no_host_reads.py: with a GPU every policy type's learn step on CUDA, counting what it reads
    back from the device (none expected); the quick subset is DQN, the PPO family and SAC."""
    quick = "cartpole_dqn or cartpole_ppo or pendulum_sac"
    return [_pytest_row(ctx, "d3", "tests/policy/test_no_host_reads.py", quick, "nothing else counts them")]


def check_pytest_priorities(ctx: Ctx) -> list[dict[str, str]]:
    """tests/data/test_prioritized.py: on CUDA, an update's priorities reach the tree without a synchronizing call
    at the update (the rest of the file is the CPU suite's; it runs whole, ``--quick`` too: a few seconds)."""
    return [_pytest_row(ctx, "d4", "tests/data/test_prioritized.py", "priorit", "the CPU suite runs the same file")]


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
