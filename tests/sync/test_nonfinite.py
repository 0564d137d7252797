"""Skipping optimizer steps whose synchronized gradient holds NaN/inf (real gloo ranks and the fake link).

A NaN or inf is injected into one element of one parameter's gradient on one rank (a tensor hook on
that parameter). Every rank must then skip the same step: parameters and optimizer state unchanged,
identical across ranks, the counter at 1, and training afterwards exactly as if the step had never
been attempted (checked against a run that leaves the step out).
"""

from __future__ import annotations

import copy
import logging
import math

import pytest
import torch
from torch import nn

from ding_dist import comm
from ding_dist.optim import FusedOptimizer
from ding_dist.sync import AlgorithmOption, Bucket, NonFiniteGradientError, QAdamOptimizer, distribute, nonfinite
from ding_dist.sync._primitives import MeteredLink
from ding_dist.sync.algorithms import get_algorithm
from ding_dist.sync.algorithms._scatter_gather import HalfCodec, MinMaxUInt8Codec
from ding_dist.sync.algorithms.gradient_allreduce import allreduce_hook
from ding_dist.sync.bucket import host_reads
from ding_dist.worker import Learner

from .test_host_syncs import _ScalarReads

NAN, INF = float("nan"), float("inf")
POISONED = "2.weight"  # the parameter whose gradient gets the injected value


# ---- per-rank code (module level: run by ding_dist.comm.launch in fresh processes) ---------------------
def _net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def _optimizer(name: str, net: nn.Module):
    if name == "sgd":
        return torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=0.01)
    if name == "adam":
        return torch.optim.Adam(net.parameters(), lr=1e-2, weight_decay=0.01)
    if name == "adam_fused":  # takes the device-side verdict (found_inf)
        return torch.optim.Adam(net.parameters(), lr=1e-2, weight_decay=0.01, fused=True)
    if name == "fused":
        return FusedOptimizer(torch.optim.Adam(net.parameters(), lr=1e-2), do_flatten=True)
    if name == "qadam":
        return QAdamOptimizer(net.parameters(), lr=1e-2, warmup_steps=2)
    raise ValueError(name)


def _flat(net: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).clone() for p in net.parameters()])


def _same(a, b) -> bool:
    """Deep equality of optimizer state dicts (tensors bitwise)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _poison(value: float):
    def hook(grad: torch.Tensor) -> torch.Tensor:
        grad = grad.clone()
        grad[1, 2] = value
        return grad

    return hook


def train(algorithm="gradient_allreduce", opt_name="sgd", inject=None, steps=5, leave_out=(), accumulate=1, **options):
    """Train ``steps`` steps; ``inject[step][rank]`` poisons that rank's gradient at that step.

    ``leave_out``: steps whose data is drawn but that are not run at all (the reference for a skip).
    Returns a record per step and the final parameters.
    """
    rank = comm.get_rank()
    inject = inject or {}
    net = _net(seed=rank)  # differs per rank: distribute broadcasts rank 0's
    model, opt = distribute(net, _optimizer(opt_name, net), algorithm, **options)
    gen = torch.Generator().manual_seed(100 + rank)
    record, error = [], None
    for step in range(steps):
        batches = [(torch.randn(8, 6, generator=gen), torch.randn(8, 3, generator=gen)) for _ in range(accumulate)]
        if step in leave_out:
            continue
        params, state = _flat(net), copy.deepcopy(opt.state_dict())
        steps_done = getattr(opt, "steps_done", None)
        opt.zero_grad()
        try:
            for i, (x, y) in enumerate(batches):
                value = inject.get(step, {}).get(rank) if i == 0 else None
                handle = net[2].weight.register_hook(_poison(value)) if value is not None else None
                try:
                    ((model(x) - y) ** 2).mean().backward()
                finally:
                    if handle is not None:
                        handle.remove()
            opt.step()
        except NonFiniteGradientError as exc:
            error = {"step": step, "message": str(exc), "params_same": torch.equal(params, _flat(net))}
            break
        record.append(
            {
                "params_same": torch.equal(params, _flat(net)),
                "state_same": _same(state, opt.state_dict()),
                "steps_done_same": steps_done == getattr(opt, "steps_done", None),
                "skips": model.nonfinite_skips,
                "consecutive": model.consecutive_nonfinite_skips,
                "finite": bool(torch.isfinite(_flat(net)).all()),
                # ranks that saw a NaN/inf, as counted inside gradient_allreduce's own collective
                "flag_ranks": max((int(b.nonfinite_ranks or 0) for b in model.buckets), default=0),
            }
        )
    on_device = getattr(model._guard, "on_device", False)  # the verdict stayed on the device
    return {"record": record, "params": _flat(net), "error": error, "on_device": on_device}


def no_optimizer() -> list[dict]:
    """distribute(model, None): the verdict applies per backward pass (grads dropped at once)."""
    rank = comm.get_rank()
    net = _net(seed=0)
    model, _ = distribute(net, None)
    out = []
    for value in (NAN, None):
        net.zero_grad()
        handle = net[2].weight.register_hook(_poison(value)) if value is not None and rank == 0 else None
        model(torch.ones(2, 6)).sum().backward()
        if handle is not None:
            handle.remove()
        out.append(
            {
                "grads_none": all(p.grad is None for p in net.parameters()),
                "skips": model.nonfinite_skips,
                "consecutive": model.consecutive_nonfinite_skips,
            }
        )
    return out


CASES = {
    # name: (train kwargs, step poisoned first)
    "sgd": ({"opt_name": "sgd"}, 2),
    "adam": ({"opt_name": "adam"}, 2),
    "fused": ({"opt_name": "fused"}, 2),
    "fp16": ({"algorithm": "fp16", "opt_name": "adam"}, 2),
    "bf16": ({"algorithm": "bf16", "opt_name": "adam"}, 2),
    "fp16_sg": ({"algorithm": "fp16", "opt_name": "adam", "method": "scatter_gather"}, 2),
    "bytegrad_ef": ({"algorithm": "bytegrad", "opt_name": "adam", "error_feedback": True}, 2),
    "sg_allreduce": ({"algorithm": "sg_allreduce", "opt_name": "adam"}, 2),
    "qadam": ({"algorithm": "qadam", "opt_name": "qadam"}, 3),  # after warm-up: the 8-bit momentum path
}
REFERENCE = ("sgd", "adam", "fused")  # compared with a run that leaves the poisoned step out


def suite() -> dict:
    world, last = comm.get_world_size(), comm.get_world_size() - 1
    out = {}
    for name, (kwargs, k) in CASES.items():
        value = NAN if name in REFERENCE else INF  # inf must survive 16-bit clamping and 8-bit quantization
        out[name] = train(inject={k: {last: value}}, steps=k + 3, **kwargs)
        if name in REFERENCE:
            out[name + "_ref"] = train(leave_out=(k,), steps=k + 3, **kwargs)
    # +inf on rank 0 and -inf on rank 1 sum to NaN; then a lone inf.
    out["inf"] = train(opt_name="adam", inject={1: {0: INF, 1: -INF}, 3: {0: INF}}, steps=5)
    out["consecutive"] = train(inject={s: {last: NAN} for s in range(1, 9)}, steps=9, max_nonfinite_skips=3)
    out["unlimited"] = train(inject={s: {last: NAN} for s in range(1, 6)}, steps=7, max_nonfinite_skips=None)
    out["off"] = train(inject={1: {last: NAN}}, steps=3, skip_nonfinite=False)
    out["accumulate"] = train(inject={1: {0: NAN}}, steps=3, accumulate=2)
    out["no_optimizer"] = no_optimizer()
    out["world"] = world
    return out


# ---- the tests -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=[2, 3], ids=lambda n: f"world{n}")
def world(request):
    results = comm.launch(suite, request.param, timeout=240, comm_timeout=30)
    return request.param, results


def _identical_across_ranks(results, name):
    first = results[0][name]["params"]
    return all(torch.equal(r[name]["params"], first) for r in results[1:])


@pytest.mark.parametrize("name", list(CASES))
def test_poisoned_step_is_skipped_on_every_rank(world, name):
    _, results = world
    k = CASES[name][1]
    for r in results:
        rec = r[name]["record"]
        assert all(not s["params_same"] for s in rec[:k]), "ordinary steps change the parameters"
        skipped = rec[k]
        assert skipped["params_same"] and skipped["state_same"] and skipped["steps_done_same"]
        assert (skipped["skips"], skipped["consecutive"]) == (1, 1)
        after = rec[k + 1 :]
        assert all(not s["params_same"] and s["finite"] for s in after), "training goes on normally"
        assert [(s["skips"], s["consecutive"]) for s in after] == [(1, 0)] * len(after)
    assert _identical_across_ranks(results, name)


@pytest.mark.parametrize("name", REFERENCE)
def test_skipped_step_leaves_no_trace(world, name):
    nproc, results = world
    for r in results:  # as if the step had never been attempted (same collectives, same data)
        torch.testing.assert_close(r[name]["params"], r[name + "_ref"]["params"], rtol=0, atol=0)


def test_inf_and_opposite_infs(world):
    _, results = world
    for r in results:
        rec = r["inf"]["record"]
        assert rec[1]["params_same"] and rec[3]["params_same"]
        assert [s["flag_ranks"] for s in rec] == [0, 2, 0, 1, 0], "every rank knows how many ranks saw one"
        assert [s["skips"] for s in rec] == [0, 1, 1, 2, 2]
        assert [s["consecutive"] for s in rec] == [0, 1, 0, 1, 0]
    assert _identical_across_ranks(results, "inf")


def test_consecutive_skips_raise_on_every_rank(world):
    _, results = world
    for r in results:
        err = r["consecutive"]["error"]
        assert err is not None and err["step"] == 3, "the third consecutive non-finite step raises"
        assert err["params_same"], "the step that raises is skipped too"
        assert "3 consecutive" in err["message"] and "max_nonfinite_skips=3" in err["message"]
        assert repr(POISONED) in err["message"]
        assert "\n" not in err["message"]


def test_unlimited_skips_never_raise(world):
    _, results = world
    for r in results:
        rec = r["unlimited"]["record"]
        assert r["unlimited"]["error"] is None
        assert [s["skips"] for s in rec] == [0, 1, 2, 3, 4, 5, 5]
        assert rec[5]["consecutive"] == 5 and rec[6]["consecutive"] == 0 and not rec[6]["params_same"]


def test_skip_nonfinite_false_keeps_the_old_behaviour(world):
    _, results = world
    for r in results:
        rec = r["off"]["record"]
        assert rec[0]["finite"] and not rec[1]["finite"], "the NaN reaches the parameters on every rank"
        assert all(s["skips"] == 0 for s in rec)


def test_gradient_accumulation_skips_the_whole_step(world):
    _, results = world
    for r in results:
        rec = r["accumulate"]["record"]
        assert rec[1]["params_same"] and rec[1]["state_same"] and rec[1]["skips"] == 1
        assert not rec[2]["params_same"] and rec[2]["consecutive"] == 0


def test_without_optimizer_each_backward_is_judged(world):
    _, results = world
    for r in results:
        poisoned, clean = r["no_optimizer"]
        assert poisoned == {"grads_none": True, "skips": 1, "consecutive": 1}
        assert clean == {"grads_none": False, "skips": 1, "consecutive": 0}


# ---- the fake link (one process, no engine): the check runs in optimizer.step() ---------------------------
@pytest.mark.parametrize("opt_name", ["sgd", "adam", "fused"])
def test_fake_link_skips_too(opt_name):
    rec = train(opt_name=opt_name, inject={2: {0: NAN}}, steps=4)["record"]
    assert rec[2]["params_same"] and rec[2]["state_same"] and rec[2]["skips"] == 1
    assert not rec[3]["params_same"] and rec[3]["finite"] and rec[3]["consecutive"] == 0
    ref = train(opt_name=opt_name, leave_out=(2,), steps=4)
    assert torch.equal(train(opt_name=opt_name, inject={2: {0: INF}}, steps=4)["params"], ref["params"])


def test_fake_link_consecutive_error_and_off_switch(caplog):
    with caplog.at_level(logging.WARNING, logger="ding_dist.sync.nonfinite"):
        out = train(inject={s: {0: NAN} for s in range(1, 5)}, steps=5, max_nonfinite_skips=2)
    assert out["error"]["step"] == 2 and out["error"]["params_same"]
    assert "2 consecutive" in out["error"]["message"] and repr(POISONED) in out["error"]["message"]
    warnings = [r.getMessage() for r in caplog.records if "skipping this optimizer step" in r.getMessage()]
    assert len(warnings) == 2 and repr(POISONED) in warnings[0]
    off = train(inject={1: {0: NAN}}, steps=2, skip_nonfinite=False)["record"]
    assert not off[1]["finite"] and off[1]["skips"] == 0


def test_learner_reports_the_skip_count():
    class TinyPolicy:
        def __init__(self) -> None:
            self.net = _net(seed=0)
            self.train_model, self.opt = distribute(self.net, torch.optim.SGD(self.net.parameters(), lr=0.1))

        def learn(self, data: float) -> dict:
            self.opt.zero_grad()
            (self.train_model(torch.ones(2, 6)).sum() * data).backward()
            self.opt.step()
            return {"loss": 1.0}

    learner = Learner(TinyPolicy())
    learner.train_rollout(1.0)
    assert learner.pop_stats() == {"train/loss": 1.0}, "no key before the first skip"
    learner.train_rollout(NAN)
    learner.train_rollout(1.0)
    assert learner.pop_stats() == {"train/loss": 1.0, "train/nonfinite_skips": 1.0}


def test_options_are_validated_and_accepted_by_algorithm_option():
    with pytest.raises(ValueError, match="max_nonfinite_skips must be an int >= 0 or None .* got -1"):
        distribute(_net(0), None, max_nonfinite_skips=-1)
    with pytest.raises(ValueError, match="got 2.5"):
        distribute(_net(0), None, max_nonfinite_skips=2.5)
    with pytest.raises(TypeError, match="skip_nonfinite must be True or False, got 'yes'"):
        distribute(_net(0), None, skip_nonfinite="yes")
    model, _ = AlgorithmOption("bf16", skip_nonfinite=False, max_nonfinite_skips=0).convert(_net(0))
    assert model.algorithm == "bf16" and model.nonfinite_skips == 0


@pytest.mark.parametrize("value", [None, NAN, INF])
def test_allreduce_flag_leaves_counts_and_scaling_exact(value):
    params = [nn.Parameter(torch.zeros(3)), nn.Parameter(torch.zeros(2))]
    bucket = Bucket(0, params)
    bucket.grads.copy_(torch.tensor([1.0, -2.0, 3.0, 0.5, 4.0]))
    if value is not None:
        bucket.grads[1] = value
    expected = bucket.grads.clone()
    bucket.ready, bucket.n_ready = [True, True], 2  # as after the gradient hooks of a backward pass
    bucket.prepare_launch()
    state = get_algorithm("gradient_allreduce").make_state(MeteredLink())
    counts = allreduce_hook(state, bucket).wait()  # the fake link: a world of one
    assert counts.tolist() == [1.0, 1.0] and bucket.nonfinite_ranks.item() == (0 if value is None else 1)
    torch.testing.assert_close(bucket.grads, expected, equal_nan=True, rtol=0, atol=0)


# ---- codecs keep a non-finite value non-finite ---------------------------------------------------------
@pytest.mark.parametrize("value", [NAN, INF, -INF])
def test_codecs_keep_non_finite_values_non_finite(value):
    row = torch.linspace(-1.0, 1.0, 16).reshape(1, 16)
    row[0, 5] = value
    half = HalfCodec(torch.float16)
    out = torch.empty(1, half.nbytes(16, torch.float32), dtype=torch.uint8)
    half.encode_into(row, out)
    decoded = half.decode(out, torch.float32).float()
    assert not math.isfinite(decoded[0, 5].item())
    assert torch.equal(decoded[0, :5], row[0, :5].half().float()), "finite values still travel as float16"
    byte = MinMaxUInt8Codec()
    out = torch.empty(1, byte.nbytes(16, torch.float32), dtype=torch.uint8)
    byte.encode_into(row, out)
    assert not torch.isfinite(byte.decode(out, torch.float32)).any(), "the whole quantized row is non-finite"


# ---- the verdict on the device (an accelerator with fused optimizers; forced here on the CPU) ------------
def _on_device(device: torch.device) -> bool:
    return True  # as on an accelerator, where a read would wait for the queued work


def _reads_per_step(poisoned: int, steps: int) -> list[int]:
    """Host reads (``read_host``'s and ``.item()``-like scalar reads) in backward and step, per step."""
    rank = comm.get_rank()
    net = _net(seed=0)
    model, opt = distribute(net, _optimizer("adam_fused", net))
    out = []
    for step in range(steps):
        x = torch.full((4, 6), float(rank + step))
        opt.zero_grad()
        before = host_reads()
        with _ScalarReads() as scalars:
            handle = net[2].weight.register_hook(_poison(NAN)) if step == poisoned and rank == 0 else None
            model(x).sum().backward()
            if handle is not None:
                handle.remove()
            opt.step()
        out.append(scalars.count + host_reads() - before)
    assert model.nonfinite_skips == 1  # the read the learner makes once per log line
    return out


def device_suite() -> dict:
    nonfinite.reads_wait_for_device = _on_device  # this rank's process only
    last = comm.get_world_size() - 1
    return {
        "skip": train(opt_name="adam_fused", inject={2: {last: NAN}}, steps=5),
        "ref": train(opt_name="adam_fused", leave_out=(2,), steps=5),
        "consecutive": train(
            opt_name="adam_fused", inject={s: {last: INF} for s in range(1, 9)}, steps=9, max_nonfinite_skips=3
        ),
        "accumulate": train(opt_name="adam_fused", inject={1: {0: NAN}}, steps=3, accumulate=2),
        "bytegrad_ef": train("bytegrad", "adam_fused", inject={2: {last: INF}}, steps=4, error_feedback=True),
        "reads": _reads_per_step(poisoned=2, steps=4),
    }


@pytest.fixture(scope="module")
def device_world():
    return comm.launch(device_suite, 2, timeout=240, comm_timeout=30)


def test_device_verdict_skips_the_step_on_every_rank(device_world):
    for r in device_world:
        assert r["skip"]["on_device"]
        rec = r["skip"]["record"]
        assert [s["params_same"] for s in rec] == [False, False, True, False, False]
        assert rec[2]["state_same"], "moments and the step count stay as they were"
        assert [(s["skips"], s["consecutive"]) for s in rec] == [(0, 0), (0, 0), (1, 1), (1, 0), (1, 0)]
        torch.testing.assert_close(r["skip"]["params"], r["ref"]["params"], rtol=0, atol=0)
    assert _identical_across_ranks(device_world, "skip")


def test_device_verdict_reads_nothing_in_a_step(device_world):
    for r in device_world:
        assert r["reads"] == [0, 0, 0, 0], "neither backward nor the step waits for the host"


def test_device_verdict_raises_after_the_read_that_finds_the_limit(device_world):
    for r in device_world:
        err = r["consecutive"]["error"]
        # steps 1-3 skipped; the read after step 3 (model.nonfinite_skips) finds 3 in a row; step 4 raises
        assert err is not None and err["step"] == 4 and err["params_same"]
        assert "4 consecutive" in err["message"] and repr(POISONED) in err["message"]


def test_device_verdict_accumulation_and_host_only_algorithms(device_world):
    for r in device_world:
        rec = r["accumulate"]["record"]
        assert rec[1]["params_same"] and rec[1]["state_same"] and rec[1]["skips"] == 1
        assert not rec[2]["params_same"] and rec[2]["consecutive"] == 0
        rec = r["bytegrad_ef"]["record"]  # its error feedback must forget the step: judged on the host
        assert r["bytegrad_ef"]["on_device"] and rec[2]["params_same"] and rec[2]["skips"] == 1
    assert _identical_across_ranks(device_world, "bytegrad_ef")


def test_device_verdict_on_one_process(monkeypatch, caplog):
    monkeypatch.setattr(nonfinite, "reads_wait_for_device", _on_device)
    out = train(opt_name="adam_fused", inject={2: {0: NAN}}, steps=4)
    assert out["on_device"]
    rec = out["record"]
    assert rec[2]["params_same"] and rec[2]["state_same"] and rec[2]["skips"] == 1
    assert not rec[3]["params_same"] and rec[3]["finite"] and rec[3]["consecutive"] == 0
    assert torch.equal(out["params"], train(opt_name="adam_fused", leave_out=(2,), steps=4)["params"])
    assert _reads_per_step(poisoned=1, steps=3) == [0, 0, 0]
    assert not train(opt_name="adam", steps=1)["on_device"], "an unfused optimizer keeps the host verdict"
    # Nobody asks for the count: the counters are read every _READ_EVERY steps, and that read raises.
    net = _net(seed=0)
    model, opt = distribute(net, _optimizer("adam_fused", net), max_nonfinite_skips=3)
    net[2].weight.register_hook(_poison(NAN))
    done = []
    with caplog.at_level(logging.WARNING, logger="ding_dist.sync.nonfinite"):
        with pytest.raises(NonFiniteGradientError, match=f"in {nonfinite._READ_EVERY} consecutive"):
            for step in range(nonfinite._READ_EVERY + 1):
                opt.zero_grad()
                model(torch.ones(2, 6)).sum().backward()
                opt.step()
                done.append(step)
    assert len(done) == nonfinite._READ_EVERY - 1, "the step at the read raises before it runs"
    assert torch.equal(_flat(net), _flat(_net(seed=0)))
    assert caplog.records[-1].getMessage().startswith(f"ding_dist.sync: {nonfinite._READ_EVERY} optimizer")
    assert not hasattr(opt, "found_inf"), "the flag is the optimizer's only for the step"


def test_device_verdict_beside_a_grad_scaler(monkeypatch):
    monkeypatch.setattr(nonfinite, "reads_wait_for_device", _on_device)
    net = _net(seed=0)
    model, opt = distribute(net, _optimizer("adam_fused", net))
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    before = _flat(net)
    handle = net[2].weight.register_hook(_poison(NAN))
    scaler.scale(model(torch.ones(2, 6)).sum()).backward()
    handle.remove()
    scaler.step(opt)
    scaler.update()
    assert torch.equal(_flat(net), before) and model.nonfinite_skips == 1 and not hasattr(opt, "found_inf")
    opt.zero_grad()
    scaler.scale(model(torch.ones(2, 6)).sum()).backward()
    scaler.step(opt)
    assert not torch.equal(_flat(net), before) and model.nonfinite_skips == 1
