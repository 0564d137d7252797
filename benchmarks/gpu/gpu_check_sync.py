"""Check (h): the looser sync algorithms on 2 ranks with CUDA tensors over ``cuda:gloo`` (h0-h5), observation
normalization (h6) and the pipeline's collectives (b3) in the same launch; nccl on 2 GPUs (n1)."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any

import torch
from gpu_check_common import (
    CONFIGS,
    Ctx,
    _check_result,
    _no_cuda_reason,
    _rank_device,
    flat,
    one_line,
    policy_device_log,
    row,
    small_mlp,
)

import ding_dist as dd
from ding_dist import comm

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
        return dd.sync.QAdamOptimizer(params, lr=1e-2, warmup_steps=2)
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


# b3, run in check h0's launch (see check_sync_algorithms)
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
        "comm_device": str(dd.comm.comm_device()),
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


def rank_sync_algorithms(
    device: str, steps: int, cases: list[str], with_async: bool, obs_norm: tuple | None = None
) -> dict[str, Any]:
    """Point-to-point, each of ``cases`` side by side with its CPU run, then ``async``'s invariant, then (h6)
    observation normalization: its statistics' sync, and ``obs_norm`` = (config, exp_dir, env steps) through the
    pipeline; plus the CUDA device the library set for this rank before this function touched it."""
    out: dict[str, Any] = {}
    if device == "cuda":
        out["current_device"] = torch.cuda.current_device()  # before _rank_device sets it: the library's choice
        out["rank_cuda_index"] = dd.comm.rank_cuda_index()
    dev = _rank_device(device)
    out["comm_device"] = str(dd.comm.comm_device())
    ref_group = dd.comm.new_group([0, 1], backend="gloo")
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
