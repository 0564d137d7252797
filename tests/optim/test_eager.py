"""eager(): torch's optimizers, bit for bit, without importing torch._dynamo until something else has."""

from __future__ import annotations

import copy
import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from ding_dist.optim import eager

eager_module = importlib.import_module("ding_dist.optim.eager")  # the module (the package's `eager` is the function)

CASES = [
    (torch.optim.Adam, {"lr": 1e-2, "fused": True}),
    (torch.optim.Adam, {"lr": 1e-2, "amsgrad": True, "weight_decay": 0.1}),
    (torch.optim.AdamW, {"lr": 1e-2}),
    (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    (torch.optim.RMSprop, {"lr": 1e-2, "centered": True}),
]


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 2))


def _train(net: nn.Module, opt: torch.optim.Optimizer, steps: int = 6) -> None:
    gen = torch.Generator().manual_seed(1)
    for i in range(steps):
        x = torch.randn(16, 5, generator=gen)
        opt.zero_grad()
        if i % 2:
            net(x).pow(2).mean().backward()
            opt.step()
        else:  # the closure form: it runs with grad enabled inside the step
            opt.step(lambda x=x: (net(x).pow(2).mean().backward(), None)[1])


def _same_state(a: dict, b: dict) -> bool:
    sa, sb = a["state"], b["state"]
    return (
        a["param_groups"] == b["param_groups"]
        and sa.keys() == sb.keys()
        and all(sa[k].keys() == sb[k].keys() and all(torch.equal(sa[k][n], sb[k][n]) for n in sa[k]) for k in sa)
    )


@pytest.fixture(params=["undecorated", "torch's wrapped"])
def path(request, monkeypatch):
    """Either path of the methods, whatever this process imported: the undecorated bodies (no dynamo yet), or
    torch's wrapped methods (dynamo imported)."""
    loaded = request.param == "torch's wrapped"
    if loaded:
        import torch._dynamo  # noqa: F401
    monkeypatch.setattr(eager_module, "_dynamo_loaded", lambda: loaded)
    return request.param


@pytest.mark.parametrize("cls,kwargs", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_steps_and_state_are_torchs_bit_for_bit(path, cls, kwargs):
    ours_net, torch_net = _net(), _net()
    ours, theirs = eager(cls)(ours_net.parameters(), **kwargs), cls(torch_net.parameters(), **kwargs)
    _train(ours_net, ours)
    _train(torch_net, theirs)
    assert isinstance(ours, cls) and type(ours) is not cls
    assert all(torch.equal(a, b) for a, b in zip(ours_net.parameters(), torch_net.parameters()))
    assert _same_state(ours.state_dict(), theirs.state_dict())
    # a state_dict moves between the two classes both ways, and training goes on alike
    ours.load_state_dict(copy.deepcopy(theirs.state_dict()))
    theirs.load_state_dict(copy.deepcopy(ours.state_dict()))
    _train(ours_net, ours, 3)
    _train(torch_net, theirs, 3)
    assert all(torch.equal(a, b) for a, b in zip(ours_net.parameters(), torch_net.parameters()))


def test_hooks_schedulers_and_param_groups_still_work(path):
    net = _net()
    opt = eager(torch.optim.Adam)(net[0].parameters(), lr=0.1)
    opt.add_param_group({"params": net[2].parameters(), "lr": 0.05})
    calls = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    net(torch.ones(1, 5)).sum().backward()
    opt.step()
    sched.step()
    assert calls == ["pre", "post"]
    assert [g["lr"] for g in opt.param_groups] == [0.05, 0.025]
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        opt.add_param_group({"params": net[2].weight})  # torch's own checks still run


def test_a_process_that_trains_never_imports_dynamo():
    code = textwrap.dedent(
        """
        import sys, torch
        from ding_dist.optim import eager
        from tests.optim.test_eager import CASES, _net, _train, _same_state
        ours = []
        for cls, kwargs in CASES:
            net = _net()
            opt = eager(cls)(net.parameters(), **kwargs)
            _train(net, opt)
            opt.load_state_dict(opt.state_dict())
            ours.append((net, opt.state_dict()))
        assert "torch._dynamo" not in sys.modules, "imported"
        for (cls, kwargs), (net, state) in zip(CASES, ours):  # torch's own classes import it
            twin = _net()
            opt = cls(twin.parameters(), **kwargs)
            _train(twin, opt)
            assert all(torch.equal(a, b) for a, b in zip(net.parameters(), twin.parameters())), cls
            assert _same_state(state, opt.state_dict()), cls
        assert "torch._dynamo" in sys.modules, "not imported by torch's classes"
        """
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]


def test_under_torch_compile_the_step_is_torchs_decorated_one():
    import torch._dynamo  # noqa: F401  (loaded: the methods go through torch's own wrappers)

    ours_net, torch_net = _net(), _net()
    ours = eager(torch.optim.SGD)(ours_net.parameters(), lr=0.1, momentum=0.9)
    theirs = torch.optim.SGD(torch_net.parameters(), lr=0.1, momentum=0.9)
    for net, opt in ((ours_net, ours), (torch_net, theirs)):
        net(torch.ones(4, 5)).sum().backward()
        torch.compile(opt.step, backend="eager")()
        torch.compile(opt.step, backend="eager")()
    assert all(torch.equal(a, b) for a, b in zip(ours_net.parameters(), torch_net.parameters()))


def test_an_optimizer_without_torchs_wrappers_keeps_its_methods():
    class Plain(torch.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {"lr": 0.5})

        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    p.data.add_(p.grad, alpha=-group["lr"])

    cls = eager(Plain)
    assert "step" not in vars(cls) and "zero_grad" in vars(cls)  # zero_grad is torch.optim.Optimizer's, wrapped
    p = nn.Parameter(torch.tensor([1.0, 2.0]))
    opt = cls([p])
    p.sum().backward()
    opt.step()
    assert p.tolist() == [0.5, 1.5]
    assert eager(Plain) is cls


def test_a_non_optimizer_is_refused():
    with pytest.raises(TypeError, match=r"eager\(\) takes a torch.optim.Optimizer subclass, got <class 'int'>"):
        eager(int)


def test_pickles_and_copies_as_torchs_optimizer_does(path):
    import pickle

    net = _net()
    opt = eager(torch.optim.Adam)(net.parameters(), lr=1e-2, fused=True)
    _train(net, opt, 2)
    twin_net, twin = pickle.loads(pickle.dumps((net, opt)))  # together, as a pickled policy holds them
    copied_net, copied = copy.deepcopy((net, opt))
    assert type(twin) is type(opt) and type(copied) is type(opt)
    for other_net, other in ((twin_net, twin), (copied_net, copied), (net, opt)):
        _train(other_net, other, 3)
    assert all(torch.equal(a, b) and torch.equal(a, c) for a, b, c in
               zip(net.parameters(), twin_net.parameters(), copied_net.parameters()))  # fmt: skip
    assert _same_state(opt.state_dict(), twin.state_dict())
