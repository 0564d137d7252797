"""FusedOptimizer must give the same parameters and state as the optimizer it wraps."""

import copy
import io
import logging

import pytest
import torch
from torch import nn

from ding_dist.optim import FusedOptimizer

# Tight: the fused update runs the same elementwise kernels, only on longer tensors.
TOL = dict(rtol=1e-6, atol=1e-7)

OPTIMIZERS = {
    "sgd": (torch.optim.SGD, dict(lr=0.05)),
    "sgd_momentum": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=1e-3)),
    "sgd_nesterov": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True)),
    "adam": (torch.optim.Adam, dict(lr=1e-2, weight_decay=1e-3)),
    "adam_amsgrad": (torch.optim.Adam, dict(lr=1e-2, amsgrad=True)),
    "adamw": (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    "rmsprop": (torch.optim.RMSprop, dict(lr=1e-2, momentum=0.5, centered=True)),
    "adadelta": (torch.optim.Adadelta, dict(lr=1.0, weight_decay=1e-3)),
    "adagrad": (torch.optim.Adagrad, dict(lr=0.1, initial_accumulator_value=0.1)),
    "adamax": (torch.optim.Adamax, dict(lr=1e-2)),
    "nadam": (torch.optim.NAdam, dict(lr=1e-2)),
    "radam": (torch.optim.RAdam, dict(lr=1e-2)),
    "rprop": (torch.optim.Rprop, dict(lr=1e-2)),
    "asgd": (torch.optim.ASGD, dict(lr=1e-2, t0=3)),
}
CORE = ["sgd_momentum", "adam", "adamw", "rmsprop", "adadelta"]


class Net(nn.Module):
    """A trunk, a head used only on some steps (its grads are None then) and a 0-dim parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh())
        self.head_a = nn.Linear(16, 3)
        self.head_b = nn.Linear(16, 3)
        self.temperature = nn.Parameter(torch.tensor(0.7))

    def forward(self, x: torch.Tensor, use_b: bool) -> torch.Tensor:
        h = self.trunk(x)
        out = self.head_a(h)
        if use_b:
            out = out + self.head_b(h)
        return out * self.temperature


def make_net(seed: int = 0) -> Net:
    torch.manual_seed(seed)
    return Net()


def train(net: Net, opt: torch.optim.Optimizer, steps: int, seed: int = 1, set_to_none: bool = True) -> None:
    gen = torch.Generator().manual_seed(seed)
    for step in range(steps):
        x = torch.randn(8, 6, generator=gen)
        opt.zero_grad(set_to_none=set_to_none)
        net(x, use_b=step % 3 == 0).pow(2).mean().backward()
        opt.step()


def assert_same_params(a: nn.Module, b: nn.Module) -> None:
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(pa, pb, **TOL, msg=lambda m, name=name: f"{name}: {m}")


def assert_same_state(sd_a: dict, sd_b: dict) -> None:
    assert sd_a["state"].keys() == sd_b["state"].keys()
    for index, state in sd_a["state"].items():
        other = sd_b["state"][index]
        assert state.keys() == other.keys(), index
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                assert value.shape == other[key].shape, (index, key)
                torch.testing.assert_close(value, other[key], **TOL)
            else:
                assert value == other[key], (index, key)
    for group_a, group_b in zip(sd_a["param_groups"], sd_b["param_groups"]):
        assert group_a == group_b


def pair(name: str, do_flatten: bool, seed: int = 0):
    cls, kwargs = OPTIMIZERS[name]
    ref, net = make_net(seed), make_net(seed)
    return ref, cls(ref.parameters(), **kwargs), net, FusedOptimizer(cls(net.parameters(), **kwargs), do_flatten)


@pytest.mark.parametrize("do_flatten", [True, False])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_matches_unfused_with_none_grads(name, do_flatten):
    ref, ref_opt, net, opt = pair(name, do_flatten)
    train(ref, ref_opt, 10)
    train(net, opt, 10)
    assert_same_params(ref, net)
    assert_same_state(ref_opt.state_dict(), opt.state_dict())


@pytest.mark.parametrize("do_flatten", [True, False])
@pytest.mark.parametrize("name", CORE)
def test_zero_instead_of_none_grads_matches(name, do_flatten):
    # set_to_none=False: the unused head gets zero grads (not None) and is stepped, like unfused.
    ref, ref_opt, net, opt = pair(name, do_flatten)
    train(ref, ref_opt, 8, set_to_none=False)
    train(net, opt, 8, set_to_none=False)
    assert_same_params(ref, net)
    assert_same_state(ref_opt.state_dict(), opt.state_dict())


def test_skipped_parameters_keep_their_own_step_count():
    ref, ref_opt, net, opt = pair("adam", do_flatten=True)
    train(ref, ref_opt, 7)
    train(net, opt, 7)
    steps = {i: s["step"].item() for i, s in opt.state_dict()["state"].items()}
    head_b = {i for i, p in enumerate(net.parameters()) if any(p is q for q in net.head_b.parameters())}
    # Steps 0, 3, 6 use head_b: it was stepped 3 times, everything else 7 times.
    assert {steps[i] for i in head_b} == {3.0}
    assert {s for i, s in steps.items() if i not in head_b} == {7.0}
    head_before = [p.detach().clone() for p in net.head_b.parameters()]
    opt.zero_grad()
    net(torch.randn(4, 6), use_b=False).sum().backward()
    opt.step()
    for before, p in zip(head_before, net.head_b.parameters()):
        assert torch.equal(before, p)  # no grad, no update (not even Adam's momentum)


@pytest.mark.parametrize("name", ["adam", "sgd_momentum", "asgd"])
def test_wrapping_an_optimizer_that_already_stepped(name):
    # Existing per-parameter state is taken over (and merged where the step counts agree).
    cls, kwargs = OPTIMIZERS[name]
    ref, net = make_net(), make_net()
    ref_opt, inner = cls(ref.parameters(), **kwargs), cls(net.parameters(), **kwargs)
    train(ref, ref_opt, 4)
    train(net, inner, 4)
    opt = FusedOptimizer(inner, do_flatten=True)
    seen = count_units(opt)
    train(ref, ref_opt, 4, seed=3)
    train(net, opt, 4, seed=3)
    assert_same_params(ref, net)
    assert_same_state(ref_opt.state_dict(), opt.state_dict())
    # Step 0 of the second run uses every parameter. The 0-dim temperature is always separate. SGD's
    # state has no scalars, so all matrices and vectors merge into one run; Adam and ASGD count steps,
    # and head_b was stepped less often than its neighbours, so it stays a run of its own.
    assert seen[0] == (2 if name == "sgd_momentum" else 3)


def count_units(opt: FusedOptimizer) -> list[int]:
    """Number of tensors the wrapped optimizer sees per step, through its public step pre-hook."""
    seen: list[int] = []
    opt.optimizer.register_step_pre_hook(
        lambda inner, args, kwargs: seen.append(sum(len(g["params"]) for g in inner.param_groups))
    )
    return seen


def test_fuses_into_few_tensors():
    net = make_net()
    opt = FusedOptimizer(torch.optim.Adam(net.parameters(), lr=1e-3), do_flatten=True)
    seen = count_units(opt)
    opt.zero_grad()
    net(torch.randn(4, 6), use_b=True).sum().backward()
    opt.step()
    # All 10 matrices and vectors in one flat buffer, plus the 0-dim temperature on its own.
    assert seen == [2]
    opt.zero_grad()
    net(torch.randn(4, 6), use_b=False).sum().backward()
    opt.step()
    # head_b has no grad and is skipped: trunk+head_a form one run, temperature another.
    assert seen[-1] == 2
    opt.zero_grad()
    net(torch.randn(4, 6), use_b=True).sum().backward()
    opt.step()
    # head_b's step count now differs from its neighbours: it is stepped as its own run.
    assert seen[-1] == 3


def test_unflattened_independent_params_are_not_fused():
    net = make_net()
    opt = FusedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), do_flatten=False)
    seen = count_units(opt)
    opt.zero_grad()
    net(torch.randn(4, 6), use_b=True).sum().backward()
    opt.step()
    assert seen == [len(list(net.parameters()))]


def test_do_flatten_false_fuses_params_already_contiguous():
    # Parameters that already share one storage back to back (as a bucketing engine leaves them).
    ref, net = make_net(), make_net()
    params = [p for p in net.parameters() if p.dim() > 0]
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    offset = 0
    for p in params:
        p.data = flat[offset : offset + p.numel()].view(p.shape)
        offset += p.numel()
    ref_opt = torch.optim.Adam(ref.parameters(), lr=1e-2)
    opt = FusedOptimizer(torch.optim.Adam(net.parameters(), lr=1e-2), do_flatten=False)
    seen = count_units(opt)
    train(ref, ref_opt, 1, set_to_none=False)
    train(net, opt, 1, set_to_none=False)
    assert seen == [2]
    train(ref, ref_opt, 5)
    train(net, opt, 5)
    assert_same_params(ref, net)


def test_do_flatten_repoints_data_and_grad_into_one_buffer():
    net = make_net()
    before = copy.deepcopy(net)
    x = torch.randn(5, 6)
    net(x, use_b=True).sum().backward()
    grads_before = [p.grad.clone() for p in net.parameters()]
    opt = FusedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), do_flatten=True)
    torch.testing.assert_close(net(x, use_b=True), before(x, use_b=True), rtol=0, atol=0)
    tensors = [p for p in net.parameters() if p.dim() > 0]
    for attr in ("data", "grad"):
        views = [getattr(p, attr) for p in tensors]
        for a, b in zip(views, views[1:]):
            assert b.data_ptr() == a.data_ptr() + a.numel() * a.element_size(), attr
            assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr(), attr
    for p, g in zip(net.parameters(), grads_before):
        assert torch.equal(p.grad, g)
    opt.step()
    for p, g in zip(net.parameters(), grads_before):
        assert torch.equal(p.grad, g)  # step does not modify .grad


def test_zero_grad():
    net = make_net()
    opt = FusedOptimizer(torch.optim.Adam(net.parameters(), lr=1e-3), do_flatten=True)
    net(torch.randn(4, 6), use_b=True).sum().backward()
    opt.step()
    opt.zero_grad(set_to_none=False)
    for p in net.parameters():
        assert p.grad is not None and not p.grad.any()
    net(torch.randn(4, 6), use_b=True).sum().backward()
    assert all(p.grad.abs().sum() > 0 for p in net.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in net.parameters())


@pytest.mark.parametrize("do_flatten", [True, False])
@pytest.mark.parametrize("name", CORE)
def test_state_dict_round_trip(name, do_flatten):
    ref, ref_opt, net, opt = pair(name, do_flatten)
    train(ref, ref_opt, 5)
    train(net, opt, 5)
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    buffer.seek(0)
    saved = torch.load(buffer)
    assert_same_state(saved, ref_opt.state_dict())

    # Fused state -> a fresh fused optimizer, and unfused state -> a fresh fused optimizer.
    cls, kwargs = OPTIMIZERS[name]
    net2 = copy.deepcopy(net)
    opt2 = FusedOptimizer(cls(net2.parameters(), **kwargs), do_flatten)
    opt2.load_state_dict(saved)
    net3 = copy.deepcopy(net)
    opt3 = FusedOptimizer(cls(net3.parameters(), **kwargs), do_flatten)
    opt3.load_state_dict(copy.deepcopy(ref_opt.state_dict()))
    # Fused state -> a fresh unfused optimizer.
    ref4 = copy.deepcopy(ref)
    ref_opt4 = cls(ref4.parameters(), **kwargs)
    ref_opt4.load_state_dict(copy.deepcopy(opt.state_dict()))
    for model, optimizer in ((ref, ref_opt), (net2, opt2), (net3, opt3), (ref4, ref_opt4)):
        train(model, optimizer, 6, seed=7)
    for model in (net2, net3, ref4):
        assert_same_params(ref, model)
    assert_same_state(ref_opt.state_dict(), opt2.state_dict())


def test_load_state_dict_rejects_wrong_layout():
    net = make_net()
    opt = FusedOptimizer(torch.optim.Adam(net.parameters()), do_flatten=True)
    other = torch.optim.Adam([nn.Parameter(torch.zeros(3))])
    with pytest.raises(ValueError):
        opt.load_state_dict(other.state_dict())


def test_state_property_is_per_parameter():
    ref, ref_opt, net, opt = pair("adam", do_flatten=True)
    train(ref, ref_opt, 4)
    train(net, opt, 4)
    for p, q in zip(ref.parameters(), net.parameters()):
        assert opt.state[q]["exp_avg"].shape == q.shape
        torch.testing.assert_close(opt.state[q]["exp_avg"], ref_opt.state[p]["exp_avg"], **TOL)


def test_lr_scheduler_and_closure():
    ref, ref_opt, net, opt = pair("sgd_momentum", do_flatten=True)
    calls = []
    opt.register_step_post_hook(lambda optimizer, args, kwargs: calls.append(optimizer))
    scheds = [torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5) for o in (ref_opt, opt)]
    x = torch.randn(8, 6)
    for _ in range(5):
        for model, optimizer, sched in zip((ref, net), (ref_opt, opt), scheds):

            def closure(model=model, optimizer=optimizer):
                optimizer.zero_grad()
                loss = model(x, use_b=True).pow(2).mean()
                loss.backward()
                return loss

            loss = optimizer.step(closure)
            assert isinstance(loss, torch.Tensor)
            sched.step()
    assert opt.param_groups[0]["lr"] == ref_opt.param_groups[0]["lr"] == pytest.approx(0.05 * 0.25)
    assert len(calls) == 5 and calls[0] is opt
    assert_same_params(ref, net)


def test_add_param_group_and_mixed_dtypes():
    torch.manual_seed(0)
    body, head = nn.Linear(4, 5), nn.Linear(5, 2).double()
    ref_body, ref_head = copy.deepcopy(body), copy.deepcopy(head)
    extra = nn.Parameter(torch.randn(3))
    ref_extra = nn.Parameter(extra.detach().clone())
    ref_opt = torch.optim.Adam([*ref_body.parameters(), *ref_head.parameters()], lr=1e-2)
    opt = FusedOptimizer(torch.optim.Adam([*body.parameters(), *head.parameters()], lr=1e-2), do_flatten=True)
    seen = count_units(opt)
    ref_opt.add_param_group({"params": [ref_extra], "lr": 0.1})
    opt.add_param_group({"params": [extra], "lr": 0.1})
    x = torch.randn(6, 4)
    for _ in range(4):
        for b, h, e, o in ((ref_body, ref_head, ref_extra, ref_opt), (body, head, extra, opt)):
            o.zero_grad()
            (h(b(x).double()).sum() + e.pow(2).sum()).backward()
            o.step()
    assert seen[-1] == 3  # float32 buffer, float64 buffer, the added group
    for a, b in ((ref_body, body), (ref_head, head)):
        assert_same_params(a, b)
    torch.testing.assert_close(ref_extra, extra, **TOL)


def test_sparse_gradients_step_unfused():
    torch.manual_seed(0)
    emb, lin = nn.Embedding(10, 4, sparse=True), nn.Linear(4, 1)
    ref_emb, ref_lin = copy.deepcopy(emb), copy.deepcopy(lin)
    ref_opt = torch.optim.SGD([*ref_emb.parameters(), *ref_lin.parameters()], lr=0.1, momentum=0.9)
    opt = FusedOptimizer(torch.optim.SGD([*emb.parameters(), *lin.parameters()], lr=0.1, momentum=0.9), do_flatten=True)
    for step in range(4):
        idx = torch.tensor([step, step + 1, 3])
        for e, lyr, o in ((ref_emb, ref_lin, ref_opt), (emb, lin, opt)):
            o.zero_grad()
            lyr(e(idx)).sum().backward()
            o.step()
    torch.testing.assert_close(ref_emb.weight, emb.weight, **TOL)
    assert_same_params(ref_lin, lin)


def test_unknown_optimizer_passes_through(caplog):
    torch.manual_seed(0)
    ref, net = nn.Linear(3, 1), None
    net = copy.deepcopy(ref)
    x, y = torch.randn(10, 3), torch.randn(10, 1)
    ref_opt = torch.optim.LBFGS(ref.parameters(), max_iter=5)
    with caplog.at_level(logging.WARNING, logger="ding_dist.optim.fused"):
        opt = FusedOptimizer(torch.optim.LBFGS(net.parameters(), max_iter=5), do_flatten=True)
    assert "LBFGS" in caplog.text and not opt.fused
    for model, optimizer in ((ref, ref_opt), (net, opt)):
        for _ in range(3):

            def closure(model=model, optimizer=optimizer):
                optimizer.zero_grad()
                loss = (model(x) - y).pow(2).mean()
                loss.backward()
                return loss

            optimizer.step(closure)
    assert_same_params(ref, net)
    assert opt.state_dict()["state"].keys() == ref_opt.state_dict()["state"].keys()


def test_bad_arguments():
    net = make_net()
    with pytest.raises(TypeError, match="torch.optim.Optimizer"):
        FusedOptimizer(net)
    opt = FusedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1))
    with pytest.raises(TypeError, match="already"):
        FusedOptimizer(opt)
    with pytest.raises(TypeError, match="do_flatten"):
        FusedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), do_flatten="yes")
    assert isinstance(opt, torch.optim.Optimizer)
