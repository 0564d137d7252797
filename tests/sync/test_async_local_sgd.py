"""``local_sgd`` and ``async`` (asynchronous model average) over real gloo ranks.

References (float64 numpy, computed here from the data each rank returns):

- ``local_sgd``: 10 SGD steps of a linear regression per rank, with torch's post-local-SGD schedule
  written out independently (gradient average before step ``warmup``, parameter average after step
  ``s >= warmup`` with ``(s - warmup) % period == 0``); every rank within 1e-5.
- ``async``: the loss is linear (``model(x).mean()``), so each gradient is independent of the weights
  and a round ``w += R/n - T`` keeps the sum of the ranks' weights: once every rank has aborted, every
  rank must hold ``w0 - lr / n * (sum of all gradients of all ranks)``, whatever the timing, within 1e-5
  (float32 rounding over the rounds), and the ranks must be bitwise equal.

Regression: 60 SGD steps on a noisy linear regression; the held-out loss (mean over ranks) within
``LOSS_REL_TOL`` of ``gradient_allreduce``'s (docs/sync.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import torch
from torch import nn

from ding_dist import comm
from ding_dist.comm import launch
from ding_dist.sync import distribute
from ding_dist.sync.algorithms.async_model_average import THREAD_NAME

WORLD = 3
LR = 0.1
LOSS_REL_TOL = {"local_sgd": 0.05, "async": 0.05}


def _flat(params) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).clone() for p in params])


def _async_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == THREAD_NAME and t.is_alive())


def _linear(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Linear(4, 1)


# ---- local_sgd against numpy ---------------------------------------------------------------------
def _local_sgd_run(steps: int = 10, **options) -> dict:
    rank = comm.get_rank()
    net = _linear(seed=rank)  # rank 0's init wins (broadcast at wrap)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    model, opt = distribute(net, opt, "local_sgd", **options)
    model.reset_comm_stats()  # count the training's collectives only
    w0 = _flat(model.parameters())
    gen = torch.Generator().manual_seed(10 + rank)
    xs, ys = [], []
    for _ in range(steps):
        x, y = torch.randn(8, 4, generator=gen), torch.randn(8, 1, generator=gen)
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        xs.append(x)
        ys.append(y)
    stats = model.comm_stats()
    model.close()
    return {"w0": w0, "w": _flat(net.parameters()), "x": torch.stack(xs), "y": torch.stack(ys), "stats": stats}


def _mse_grad(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Gradient of mean((x @ a + b - y)^2) for w = [a (4), b]."""
    residual = x @ w[:4] + w[4] - y[:, 0]
    d = 2.0 * residual / len(residual)
    return np.concatenate([x.T @ d, [d.sum()]])


def local_sgd_reference(results: list[dict], warmup: int, schedule) -> list[np.ndarray]:
    """Post-local SGD in float64; ``schedule(s)`` gives the groups averaging after step ``s`` (or [])."""
    n = len(results)
    w = [results[0]["w0"].double().numpy() for _ in range(n)]
    xs = [r["x"].double().numpy() for r in results]
    ys = [r["y"].double().numpy() for r in results]
    for s in range(xs[0].shape[0]):
        grads = [_mse_grad(w[r], xs[r][s], ys[r][s]) for r in range(n)]
        if s < warmup:
            mean = sum(grads) / n
            grads = [mean] * n
        w = [w[r] - LR * grads[r] for r in range(n)]
        for group in schedule(s):
            avg = sum(w[r] for r in group) / len(group)
            for r in group:
                w[r] = avg
    return w


def _periodic(n: int, warmup: int, period: int):
    def schedule(s: int) -> list[list[int]]:
        return [list(range(n))] if s >= warmup and (s - warmup) % period == 0 else []

    return schedule


# ---- async ---------------------------------------------------------------------------------------
def _linear_steps(model, opt, gen, steps: int, pause_s: float) -> torch.Tensor:
    """``steps`` SGD steps on the linear loss ``model(x).mean()``; returns the sum of the gradients."""
    total = torch.zeros(5, dtype=torch.float64)
    for _ in range(steps):
        x = torch.randn(8, 4, generator=gen)
        opt.zero_grad()
        model(x).mean().backward()
        opt.step()
        total += torch.cat([x.double().mean(0), torch.ones(1, dtype=torch.float64)])
        time.sleep(pause_s)
    return total


def _async_run(warmup: int = 3) -> dict:
    """Different numbers of steps per rank; abort, resume, abort, close."""
    rank = comm.get_rank()
    net = _linear(seed=rank)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    model, opt = distribute(net, opt, "async", sync_interval_ms=1, warmup_steps=warmup)
    w0 = _flat(model.parameters())
    gen = torch.Generator().manual_seed(20 + rank)
    state = model.engine.state
    out: dict = {"w0": w0}
    grads = _linear_steps(model, opt, gen, warmup - 1, 0.0)
    out["grads_in_warmup"] = grads.clone()
    out["w_in_warmup"] = _flat(model.parameters())  # (after the last warm-up step a round may be landing)
    out["threads_in_warmup"] = _async_threads()
    grads += _linear_steps(model, opt, gen, 1, 0.0)
    out["threads_started"] = _async_threads()
    grads += _linear_steps(model, opt, gen, 10 + 5 * rank, 0.002)  # ranks run different numbers of steps
    out["rounds_training"] = state.rounds
    model.abort()
    out["threads_after_abort"] = _async_threads()
    out["w_abort"] = _flat(model.parameters())
    # paused: steps stay local, nothing is averaged, nothing hangs
    rounds = state.rounds
    grads_paused = _linear_steps(model, opt, gen, 2, 0.0)
    out["rounds_paused"] = state.rounds - rounds
    model.resume()
    out["threads_resumed"] = _async_threads()
    grads += grads_paused + _linear_steps(model, opt, gen, 6 - 2 * rank, 0.002)
    model.abort()
    out["w_abort2"] = _flat(model.parameters())
    out["grads"] = grads
    model.close()
    out["threads_after_close"] = _async_threads()
    # a forward without backward, then abort: the lock it held is released, no deadlock
    model2, opt2 = distribute(net, torch.optim.SGD(net.parameters(), lr=LR), "async", sync_interval_ms=1)
    x = torch.randn(2, 4, generator=gen)
    model2(x)  # forward with grad, no backward: the lock stays held ...
    model2(x).sum().backward()  # ... a second forward does not take it twice; backward releases it
    opt2.step()
    with torch.no_grad():
        model2(x)  # no lock under no_grad
    model2(x)  # held again, released by abort
    time.sleep(0.01 * rank)
    model2.abort()
    out["forward_only_abort_ok"] = True
    model2.close()
    return out


def _async_reference(results: list[dict]) -> np.ndarray:
    """``w0 - lr / n * sum of every gradient of every rank`` (the rounds keep the sum of the weights)."""
    total = sum(r["grads"].numpy() for r in results)
    return results[0]["w0"].double().numpy() - LR / len(results) * total


# ---- switch_to -----------------------------------------------------------------------------------
def _switch_run() -> dict:
    rank = comm.get_rank()
    net = _linear(seed=rank)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    model, opt = distribute(net, opt, "gradient_allreduce")
    gen = torch.Generator().manual_seed(30 + rank)
    out: dict = {}
    plan = [
        ("async", {"sync_interval_ms": 1}),
        ("gradient_allreduce", {}),
        ("local_sgd", {"period": 3}),
        ("async", {"sync_interval_ms": 1, "warmup_steps": 2}),
        ("local_sgd", {"warmup_steps": 1, "period": 2}),
        ("gradient_allreduce", {}),
    ]
    previous = "gradient_allreduce"
    for i, (name, options) in enumerate(plan):
        free = previous == "async" and i == 1  # plain async (no warm-up): ranks may run different step counts
        _linear_steps(model, opt, gen, 5 + rank if free else 5, 0.001)
        model.switch_to(name, **options)
        out[f"{i}_{name}"] = (_flat(model.parameters()), _async_threads())
        previous = name
    model.close()
    out["threads_after_close"] = _async_threads()
    return out


# ---- regression ----------------------------------------------------------------------------------
def _regression_run(algorithm: str, steps: int = 60, **options) -> float:
    rank = comm.get_rank()
    torch.manual_seed(0)
    true_w = torch.randn(4, 1)
    net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    model, opt = distribute(net, opt, algorithm, **options)
    gen = torch.Generator().manual_seed(40 + rank)
    for _ in range(steps):
        x = torch.randn(32, 4, generator=gen)
        y = x @ true_w + 0.1 * torch.randn(32, 1, generator=gen)
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        if algorithm == "async":
            time.sleep(0.002)
    model.abort()
    model.close()
    gen_eval = torch.Generator().manual_seed(99)
    x = torch.randn(512, 4, generator=gen_eval)
    y = x @ true_w + 0.1 * torch.randn(512, 1, generator=gen_eval)
    with torch.no_grad():
        loss = ((net(x) - y) ** 2).mean()
    comm.allreduce(loss, op="avg")
    return float(loss)


def suite() -> dict:
    n = comm.get_world_size()
    out = {
        "local_p1": _local_sgd_run(period=1),
        "local_p2": _local_sgd_run(period=2),
        "local_p2_w3": _local_sgd_run(warmup_steps=3, period=2),
        "local_default": _local_sgd_run(),
        "async": _async_run(),
        "switch": _switch_run(),
    }
    out["loss"] = {
        "gradient_allreduce": _regression_run("gradient_allreduce"),
        "local_sgd": _regression_run("local_sgd", period=4),
        "async": _regression_run("async", sync_interval_ms=5, warmup_steps=5),
    }
    out["world"] = n
    return out


@pytest.fixture(scope="module")
def results():
    return launch(suite, WORLD, timeout=240, comm_timeout=30)


@pytest.mark.parametrize(
    ("case", "warmup", "period"),
    [("local_p1", 0, 1), ("local_p2", 0, 2), ("local_p2_w3", 3, 2), ("local_default", 0, 4)],
)
def test_local_sgd_matches_numpy_reference(results, case, warmup, period):
    runs = [r[case] for r in results]
    expected = local_sgd_reference(runs, warmup, _periodic(len(runs), warmup, period))
    for rank, run in enumerate(runs):
        np.testing.assert_allclose(run["w"].double().numpy(), expected[rank], rtol=0, atol=1e-5)
    if period == 1:  # averaged after the last step: identical on every rank
        assert all(torch.equal(run["w"], runs[0]["w"]) for run in runs)


def test_local_sgd_sends_weights_only_when_due(results):
    # 10 steps, period 2, no warm-up: averages after steps 0, 2, 4, 6, 8 -> 5 collectives, no gradient ones
    assert results[0]["local_p2"]["stats"]["collectives"] == 5
    # warm-up 3, period 2: 3 gradient allreduces (one bucket) + averages after steps 3, 5, 7, 9
    assert results[0]["local_p2_w3"]["stats"]["collectives"] == 3 + 4


def test_async_warmup_is_gradient_allreduce_and_starts_the_thread_after(results):
    runs = [r["async"] for r in results]
    assert all(torch.equal(run["w_in_warmup"], runs[0]["w_in_warmup"]) for run in runs)
    mean_grads = sum(run["grads_in_warmup"].numpy() for run in runs) / len(runs)  # gradient allreduce
    expected = runs[0]["w0"].double().numpy() - LR * mean_grads
    np.testing.assert_allclose(runs[0]["w_in_warmup"].double().numpy(), expected, rtol=0, atol=1e-6)
    assert [run["threads_in_warmup"] for run in runs] == [0] * len(runs)
    assert [run["threads_started"] for run in runs] == [1] * len(runs)
    assert min(run["rounds_training"] for run in runs) > 1  # rounds ran while the ranks trained


def test_async_abort_leaves_identical_weights_and_no_thread(results):
    runs = [r["async"] for r in results]
    for key in ("w_abort", "w_abort2"):
        assert all(torch.equal(run[key], runs[0][key]) for run in runs), key
    assert [run["threads_after_abort"] for run in runs] == [0] * len(runs)
    assert [run["rounds_paused"] for run in runs] == [0] * len(runs)
    assert [run["threads_resumed"] for run in runs] == [1] * len(runs)
    assert [run["threads_after_close"] for run in runs] == [0] * len(runs)
    assert all(run["forward_only_abort_ok"] for run in runs)


def test_async_keeps_local_progress_numpy_reference(results):
    runs = [r["async"] for r in results]
    expected = _async_reference(runs)
    np.testing.assert_allclose(runs[0]["w_abort2"].double().numpy(), expected, rtol=0, atol=1e-5)


def test_switch_to_keeps_ranks_identical(results):
    runs = [r["switch"] for r in results]
    for key in runs[0]:
        if key == "threads_after_close":
            continue
        weights, threads = runs[0][key]
        assert all(torch.equal(run[key][0], weights) for run in runs), key
        threads = 1 if key == "0_async" else 0  # "3_async" is in its warm-up: no thread yet
        assert all(run[key][1] == threads for run in runs), key
    assert all(run["threads_after_close"] == 0 for run in runs)


@pytest.mark.parametrize("algorithm", sorted(LOSS_REL_TOL))
def test_regression_loss_close_to_gradient_allreduce(results, algorithm):
    losses = results[0]["loss"]
    base = losses["gradient_allreduce"]
    assert abs(losses[algorithm] - base) <= LOSS_REL_TOL[algorithm] * base, losses


# ---- process exit without abort ------------------------------------------------------------------
EXIT_SCRIPT = textwrap.dedent(
    """
    import sys, threading, time
    import torch
    import ding_dist as dd
    from ding_dist.sync import distribute
    from ding_dist.sync.algorithms.async_model_average import THREAD_NAME

    dd.dist_init(backend="gloo")
    rank = dd.get_rank()
    net = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    model, opt = distribute(net, opt, "async", sync_interval_ms=1)
    for _ in range(5 + 10 * rank):
        opt.zero_grad()
        model(torch.randn(8, 4)).mean().backward()
        opt.step()
        time.sleep(0.002)
    if rank == 0:  # rank 0 finalizes (its thread keeps averaging until rank 1 stops too)
        dd.dist_finalize()
        print("THREADS", sum(t.name == THREAD_NAME for t in threading.enumerate()), flush=True)
    print("EXITING", rank, flush=True)  # rank 1 just exits: atexit stops the thread
    """
)


def test_process_exit_without_abort_leaves_no_thread_and_no_hang():
    port = str(comm.free_port())
    procs = []
    for rank in range(2):
        env = dict(
            os.environ,
            RANK=str(rank),
            WORLD_SIZE="2",
            LOCAL_RANK=str(rank),
            LOCAL_WORLD_SIZE="2",
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
            DING_DIST_TIMEOUT="30",
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", EXIT_SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    try:
        outputs = [p.communicate(timeout=90) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert "THREADS 0" in outputs[0][0], outputs[0]
    assert "EXITING 1" in outputs[1][0], outputs[1]
