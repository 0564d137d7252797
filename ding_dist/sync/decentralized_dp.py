"""decent-dp's entry point, ``DecentralizedDataParallel``, over ``distribute(..., 'decentralized')``.

decent-dp builds the optimizer (and LR scheduler) itself from ``optim_fn`` and steps it from inside
backward (fused with the communication). Here the optimizer is built the same way but stepped by
:meth:`DecentralizedDataParallel.step` (or ``model.optimizer.step()``) after ``loss.backward()``: the
exchange still overlaps forward and backward, and the mixed weights are put in place right before the
step, so the update is the same ``x' = mix(x) - lr g(x)``.

Example::

    model = DecentralizedDataParallel(net, lambda ps: torch.optim.SGD([p for p, _ in ps], lr=0.1), topology="ring")
    for x, y in batches:
        model.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        model.step()  # optimizer.step(), then lr_scheduler.step() if one was built
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from ding_dist.sync.engine import DistributedModel, distribute
from ding_dist.sync.parameters import allreduce_parameters

__all__ = ["DecentralizedDataParallel"]

OptimFn = Callable[[list[tuple[torch.Tensor, str]]], torch.optim.Optimizer]
SchedulerFn = Callable[[torch.optim.Optimizer], Any]


class DecentralizedDataParallel(nn.Module):
    """Wrap ``model`` for decentralized training (decent-dp's signature).

    ``optim_fn`` gets the trainable parameters as ``(param, name)`` pairs and returns the optimizer;
    ``lr_scheduler_fn`` (optional) gets the optimizer and returns a scheduler. ``topology`` is a name of
    :mod:`ding_dist.sync.topology` (decent-dp's ``complete``, ``ring``, ``one-peer-exp``,
    ``alternating-exp-ring``, or Bagua's ``shift_one``); ``options`` go to the ``decentralized`` algorithm
    (``communication_interval``, ``hierarchical``) and to :func:`~ding_dist.sync.distribute` (``group``).

    Example:
        >>> net = nn.Linear(3, 1)
        >>> model = DecentralizedDataParallel(net, lambda ps: torch.optim.SGD([p for p, _ in ps], lr=0.1))
        >>> model(torch.zeros(2, 3)).sum().backward()
        >>> model.step()
        >>> type(model.optimizer).__name__
        'SGD'
    """

    def __init__(
        self,
        model: nn.Module,
        optim_fn: OptimFn,
        lr_scheduler_fn: SchedulerFn | None = None,
        topology: str = "ring",
        **options: Any,
    ) -> None:
        super().__init__()
        if not callable(optim_fn):
            raise TypeError(f"optim_fn must be callable (list of (param, name)) -> Optimizer, got {optim_fn!r}")
        named = [(p, name) for name, p in model.named_parameters() if p.requires_grad]
        optimizer = optim_fn(named)
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optim_fn must return a torch.optim.Optimizer, got {type(optimizer).__name__}")
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler_fn(optimizer) if lr_scheduler_fn is not None else None
        self.model: DistributedModel
        self.model, _ = distribute(model, optimizer, algorithm="decentralized", topology=topology, **options)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.model(*args, **kwargs)

    def step(self) -> None:
        """``optimizer.step()`` (the mixed weights go in place first), then ``lr_scheduler.step()``."""
        self.optimizer.step()
        if self.lr_scheduler is not None:
            self.lr_scheduler.step()

    def global_avg(self) -> None:
        """Average the parameters (and floating buffers) over all ranks, e.g. before evaluating.

        Every rank calls it between steps.
        """
        engine = self.model.engine
        allreduce_parameters(self.model.unwrap(), engine.link if engine is not None else None)

    def unwrap(self) -> nn.Module:
        """The original module."""
        return self.model.unwrap()

    # The original module's views (no "model." prefix).
    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self.model.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        return self.model.load_state_dict(state_dict, strict=strict, assign=assign)

    def named_parameters(self, *args: Any, **kwargs: Any) -> Iterator[tuple[str, nn.Parameter]]:
        return self.model.named_parameters(*args, **kwargs)

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]:
        return self.model.parameters(recurse)
