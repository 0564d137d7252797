"""``local_sgd``: post-local SGD, torch's ``PostLocalSGDState`` + ``PeriodicModelAverager`` (or
``HierarchicalModelAverager`` with ``periods``), behind :func:`~ding_dist.sync.distribute`.

With ``s`` the number of ``optimizer.step()`` calls before the current one (0, 1, 2, ...: the averagers'
``step``, which they increment after ``average_parameters()``):

- the backward passes before step ``s < warmup_steps`` average gradients exactly as
  ``gradient_allreduce`` does (its hook, bitwise the same); later ones leave the gradients local;
- right after step ``s`` (a post-hook of the optimizer(s) passed to ``distribute``), if
  ``s >= warmup_steps`` and ``(s - warmup_steps) % period == 0``, the parameters are averaged over all
  ranks: flattened per dtype, divided by the group size, one SUM allreduce, copied back (torch's
  ``utils.average_parameters``). So ``warmup_steps=0, period=4`` averages after steps 0, 4, 8, ... (the
  1st, 5th, 9th call), and ``period=1`` averages after every step;
- ``periods={group_size: period, ...}`` (hierarchical SGD): groups of ``group_size`` consecutive ranks
  average every ``period`` steps; at a step ``s >= warmup_steps`` only the largest period dividing ``s``
  (``s % period == 0``: counted from 0, not from the warm-up, as in torch's
  ``HierarchicalModelAverager``) averages, in its group. E.g. on 8 ranks ``periods={2: 2, 8: 8}``:
  pairs average at ``s = 2, 6, 10, ...``, the world at ``s = 0, 8, 16, ...``. Torch's dict maps period
  to group size; here it is the other way round (a period per group size). The group sizes must
  divide each other, their periods grow with them, and the largest size is the world.

Only parameters are averaged (not the optimizer state, not buffers: they stay local after the warm-up,
as the non-finite gradient check does, which needs synchronized gradients). Every
``optimizer.step()`` of every optimizer passed to ``distribute`` counts as a step, so pass at least one.
``averages_weights`` is True: ranks differ between averagings.

Example:
    >>> model, opt = distribute(net, opt, "local_sgd", warmup_steps=100, period=4)  # doctest: +SKIP
    >>> model, opt = distribute(net, opt, "local_sgd", periods={2: 2, 8: 8})  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ding_dist.sync._primitives import MeteredLink, consecutive_link
from ding_dist.sync.algorithms import Algorithm
from ding_dist.sync.algorithms.gradient_allreduce import AllreduceState, allreduce_hook
from ding_dist.sync.bucket import Bucket, BucketStage

__all__ = ["LocalSGDState", "average_parameters", "check_steps"]

_DEFAULT_PERIOD = 4


def check_steps(name: str, value: Any, minimum: int) -> int:
    """``value`` as an int ``>= minimum`` (bools rejected), else ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def _check_periods(periods: Any, world: int) -> list[tuple[int, int]]:
    """``[(period, group_size), ...]`` sorted by group size, after checking ``periods``."""
    if not isinstance(periods, Mapping) or not periods:
        raise ValueError(f"periods must be a non-empty dict {{group_size: period}}, got {periods!r}")
    levels = sorted(
        (check_steps("a group size of periods", g, 1), check_steps("a period", p, 1)) for g, p in periods.items()
    )
    for (g1, p1), (g2, p2) in zip(levels, levels[1:]):
        if g2 % g1 or p2 <= p1:
            raise ValueError(
                f"periods {dict(periods)}: each group size must divide the next larger one and have a smaller "
                f"period (got {g1}: {p1} and {g2}: {p2})"
            )
    if world > 1 and levels[-1][0] != world:
        raise ValueError(f"periods {dict(periods)}: the largest group size must be the world size {world}")
    return [(p, g) for g, p in levels]


class LocalSGDState:
    """State of ``local_sgd``: the warm-up's allreduce state, the step counter and the averaging levels
    ``[(period, link), ...]`` (one level, the world, without ``periods``).

    Example:
        >>> s = make_state(MeteredLink(), periods={1: 2})   # on the fake link: the world is one rank
        >>> [s.group_at(k) is not None for k in range(4)]
        [True, False, True, False]
    """

    __slots__ = ("link", "allreduce", "warmup_steps", "step", "period", "levels", "hierarchical")

    def __init__(
        self,
        link: MeteredLink,
        warmup_steps: int,
        period: int,
        levels: list[tuple[int, MeteredLink]],
        hierarchical: bool,
    ):
        self.link = link
        self.allreduce = AllreduceState(link)
        self.warmup_steps = warmup_steps
        self.step = 0
        self.period = period
        self.levels = levels
        self.hierarchical = hierarchical

    @property
    def local_gradients(self) -> bool:
        """True past the warm-up: the engine then leaves gradients local (no gradient collective)."""
        return self.step >= self.warmup_steps

    def group_at(self, step: int) -> MeteredLink | None:
        """The link that averages after optimizer step ``step`` (0-based), or ``None``."""
        if step < self.warmup_steps:
            return None
        if not self.hierarchical:
            return self.levels[0][1] if (step - self.warmup_steps) % self.period == 0 else None
        for period, link in reversed(self.levels):
            if step % period == 0:
                return link
        return None


def make_state(
    link: MeteredLink, warmup_steps: int = 0, period: int | None = None, periods: Mapping[int, int] | None = None
) -> LocalSGDState:
    """State for ``local_sgd``; with ``periods`` the subgroups are created here (collective, once).

    Example:
        >>> s = make_state(MeteredLink(), warmup_steps=2, period=3)
        >>> [s.group_at(k) is not None for k in range(6)]
        [False, False, True, False, False, True]
    """
    warmup_steps = check_steps("warmup_steps", warmup_steps, 0)
    if periods is None:
        period = check_steps("period", _DEFAULT_PERIOD if period is None else period, 1)
        return LocalSGDState(link, warmup_steps, period, [(period, link)], hierarchical=False)
    if period is not None:
        raise ValueError("local_sgd takes either period or periods, not both")
    levels = _check_periods(periods, link.world_size)
    if link.world_size == 1:
        return LocalSGDState(link, warmup_steps, levels[0][0], [(p, link) for p, _ in levels], hierarchical=True)
    return LocalSGDState(
        link, warmup_steps, levels[0][0], [(p, consecutive_link(link, g)) for p, g in levels], hierarchical=True
    )


def average_parameters(params: Sequence[torch.Tensor], link: MeteredLink) -> None:
    """Average ``params`` in place over ``link``'s ranks: one flat buffer per (device, dtype), divided by
    the group size, SUM-allreduced and copied back (torch's ``model_averaging.utils.average_parameters``).

    Example:
        >>> p = torch.nn.Parameter(torch.ones(2))
        >>> average_parameters([p], MeteredLink())
        >>> p.data
        tensor([1., 1.])
    """
    groups: dict[tuple[Any, Any], list[torch.Tensor]] = {}
    for p in params:
        groups.setdefault((p.device, p.dtype), []).append(p.detach())
    for tensors in groups.values():
        flat = torch.cat([t.reshape(-1) for t in tensors]).div_(link.world_size)
        link.allreduce(flat).wait()
        torch._foreach_copy_(tensors, [v.view_as(t) for v, t in zip(flat.split([t.numel() for t in tensors]), tensors)])


def local_sgd_hook(state: LocalSGDState, bucket: Bucket) -> BucketStage:
    """Warm-up: ``gradient_allreduce``'s hook (the engine stops calling it once gradients are local)."""
    return allreduce_hook(state.allreduce, bucket)


def step_hook(state: LocalSGDState, buckets: list[Bucket]) -> None:
    """After each ``optimizer.step()``: average the parameters if this step is due, then count it."""
    link = state.group_at(state.step)
    state.step += 1
    if link is not None:
        average_parameters([p for b in buckets for p in b.params], link)


def check_optimizers(state: LocalSGDState | None, optimizers: list[Any]) -> None:
    """The steps are counted in post-hooks of the optimizers passed to ``distribute``: at least one."""
    if not optimizers:
        raise ValueError("local_sgd counts optimizer.step() calls: pass the optimizer(s) to distribute")


ALGORITHMS = (
    Algorithm(
        "local_sgd",
        make_state=make_state,
        hook=local_sgd_hook,
        step_hook=step_hook,
        check_optimizers=check_optimizers,
        averages_weights=True,
        options=("warmup_steps", "period", "periods"),
        aliases=("post_local_sgd",),
    ),
)
