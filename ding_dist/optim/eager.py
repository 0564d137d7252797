"""Torch optimizers that do not import ``torch._dynamo`` until something else has.

Torch keeps ``torch.compile`` out of its optimizers by wrapping ``add_param_group``, ``zero_grad``,
``state_dict``, ``load_state_dict`` and ``step`` in small decorators, and each of those imports ``torch._dynamo``
(with sympy and the tracing machinery) on its first call: 1.3-2.5 s of every training process's start-up, about
as long as ``import torch`` itself. The decorators matter only while dynamo can trace, and it cannot before it is
imported. So :func:`eager` subclasses a torch optimizer whose five methods call torch's undecorated bodies while
``torch._dynamo`` is absent from ``sys.modules``, and torch's decorated methods from the moment it is there (a
``torch.compile`` anywhere in the process). The steps, state and ``state_dict`` are torch's own, bit for bit, and
the class is still a subclass of the torch optimizer (learning-rate schedulers, ``isinstance``, hooks).

A torch version whose methods are wrapped differently keeps its own methods: the undecorated body is used only
where the wrapper is the one described above (found by its code's name, with ``__wrapped__`` set).

Example::

    from ding_dist.optim import eager

    opt = eager(torch.optim.Adam)(model.parameters(), lr=1e-3, fused=True)
    loss.backward(); opt.step(); opt.zero_grad()   # torch's Adam; torch._dynamo is not imported
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import torch

__all__ = ["eager"]

OptimizerT = TypeVar("OptimizerT", bound=torch.optim.Optimizer)

#: torch's optimizer methods wrapped to keep dynamo out, with the code name of the wrapper around each.
_WRAPPED = {
    "add_param_group": "inner",  # torch._disable_dynamo
    "zero_grad": "inner",
    "state_dict": "inner",
    "load_state_dict": "inner",
    "step": "_use_grad",  # torch.optim.optimizer._use_grad_for_differentiable: grad mode, then the body
}


def _dynamo_loaded() -> bool:
    return "torch._dynamo" in sys.modules


def _torch_method(base: type, name: str) -> Callable[..., Any]:
    """``base.name`` as torch defines it: without the profiling wrapper torch puts around a class's ``step`` once
    the class is first instantiated (each class gets its own, ours too)."""
    func = getattr(base, name)
    return func.__wrapped__ if getattr(func, "hooked", False) else func


def _bypass(base: type, name: str) -> Callable[..., Any] | None:
    """``name`` calling torch's undecorated body while dynamo is not imported, or None where torch's method is not
    wrapped the expected way."""
    decorated = _torch_method(base, name)
    code, body = getattr(decorated, "__code__", None), getattr(decorated, "__wrapped__", None)
    if code is None or code.co_name != _WRAPPED[name] or not callable(body):
        return None
    wraps = functools.wraps(body, updated=())  # not the wrapper's attributes (torch's "hooked" mark)
    if name == "step":

        @wraps
        def step(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _dynamo_loaded():
                return decorated(self, *args, **kwargs)
            with torch.set_grad_enabled(self.defaults.get("differentiable", False)):
                return body(self, *args, **kwargs)

        return step

    @wraps
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return (decorated if _dynamo_loaded() else body)(self, *args, **kwargs)

    return method


@functools.cache
def eager(base: type[OptimizerT]) -> type[OptimizerT]:
    """A subclass of the torch optimizer ``base`` that imports ``torch._dynamo`` only once something else has.

    Example:
        >>> Adam = eager(torch.optim.Adam)
        >>> issubclass(Adam, torch.optim.Adam), Adam.__name__
        (True, 'Adam')
    """
    if not (isinstance(base, type) and issubclass(base, torch.optim.Optimizer)):
        raise TypeError(f"eager() takes a torch.optim.Optimizer subclass, got {base!r}")
    methods = {name: fn for name in _WRAPPED if (fn := _bypass(base, name)) is not None}
    doc = f"torch's {base.__qualname__}, importing ``torch._dynamo`` only once something else has (ding_dist.optim)."
    cls = type(base.__name__, (base,), {**methods, "__doc__": doc, "__module__": __name__})

    def __reduce_ex__(self: Any, protocol: Any) -> Any:  # noqa: N807  (pickled as "eager(base)", not by its name)
        if type(self) is not cls:
            return super(cls, self).__reduce_ex__(protocol)
        return _remake, (base,), self.__getstate__()

    cls.__reduce_ex__ = __reduce_ex__  # type: ignore[method-assign]
    return cls


def _remake(base: type[OptimizerT]) -> OptimizerT:
    """An empty ``eager(base)`` for unpickling (its state comes next, through ``__setstate__``)."""
    cls = eager(base)
    return cls.__new__(cls)
