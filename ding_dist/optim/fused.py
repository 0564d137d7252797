"""FusedOptimizer: run any elementwise torch optimizer on flat buffers instead of one tensor at a time.

How it works
------------
A torch optimizer such as Adam launches roughly ten small kernels per parameter tensor. A model made of
many small tensors (typical RL networks) spends most of ``optimizer.step()`` on launch and Python
overhead. ``FusedOptimizer`` hands the wrapped optimizer one 1-D *unit* tensor per run of parameters that
lie back to back in memory, so the same update runs as a few large kernels.

* Memory layout. With ``do_flatten=True`` the parameters of every param group are copied, per
  (device, dtype), into one contiguous buffer and each parameter's ``.data`` becomes a view into it
  (gradients likewise, into a twin gradient buffer). With ``do_flatten=False`` nothing is moved: only
  parameters that already sit back to back in one storage (for example because a bucketing engine
  flattened them) are fused; ordinary, separately allocated parameters are stepped one by one.
* Optimizer state. The wrapper owns the state. Parameters stepped together share one *segment*: its
  per-element entries (``exp_avg``, ``momentum_buffer``, ...) are flat 1-D tensors, its scalar entries
  (``step``, ``mu_product``, ...) are shared, which is exact because those scalars are equal for all
  parameters that were always stepped together.
* Parameters without a gradient. A torch optimizer skips a parameter whose ``.grad`` is None (no state
  update, no weight decay, its ``step`` counter does not advance). The wrapper does the same: a run is cut
  at every parameter without a gradient, and a segment that is only partly stepped is split (per-element
  state as views, scalars copied), so each part keeps its own exact step counter. Fusion is therefore
  exactly as wide as the unfused semantics allow.
* ``state_dict()`` has the format of the wrapped optimizer, per original parameter, so checkpoints move
  freely between the fused and the unfused optimizer.

Only optimizers whose update is elementwise can be fused. The torch optimizers SGD, Adam, AdamW, Adamax,
NAdam, RAdam, RMSprop, Adadelta, Adagrad, Rprop and ASGD are known to be; any other optimizer (LBFGS,
Adafactor, Muon, SparseAdam, your own) is passed through unchanged with a logged warning, unless you
promise ``elementwise=True``.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

from ding_dist.optim._fused_layout import (
    _Bucket,
    _copy_all,
    _copy_scalar,
    _elem_keys,
    _GroupPlan,
    _same_scalar,
    _Segment,
    _slice_state,
    _Slot,
    _span,
    _Unit,
)

__all__ = ["FusedOptimizer"]

logger = logging.getLogger(__name__)

# Exact types whose per-parameter update is elementwise: every state entry is either shaped like the
# parameter (updated element by element) or a scalar that only depends on how often it was stepped.
_ELEMENTWISE_OPTIMIZERS: tuple[type[torch.optim.Optimizer], ...] = (
    torch.optim.SGD,
    torch.optim.Adam,
    torch.optim.AdamW,
    torch.optim.Adamax,
    torch.optim.NAdam,
    torch.optim.RAdam,
    torch.optim.RMSprop,
    torch.optim.Adadelta,
    torch.optim.Adagrad,
    torch.optim.Rprop,
    torch.optim.ASGD,
)


class FusedOptimizer(torch.optim.Optimizer):
    """Wrap a torch optimizer so that it updates many parameters with a few kernels on flat buffers.

    Numerically the same as the wrapped optimizer (elementwise optimizers only, see module docstring),
    including parameters whose gradient is None in a step. Use the wrapper, not the wrapped optimizer,
    after wrapping: the wrapper owns the optimizer state.

    Args:
        optimizer: any ``torch.optim.Optimizer``.
        do_flatten: copy each param group's parameters (per device and dtype) into one contiguous buffer
            and re-point every parameter's ``.data`` (and ``.grad``) at views into it. Without it only
            parameters that already lie back to back in memory are fused.
        elementwise: whether the optimizer's update is elementwise. None (default) trusts a list of
            known torch optimizers; other optimizers are passed through unfused with a warning.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
        >>> opt = FusedOptimizer(torch.optim.Adam(model.parameters(), lr=1e-3), do_flatten=True)
        >>> model(torch.randn(16, 4)).pow(2).mean().backward()
        >>> opt.step()
        >>> opt.zero_grad()
    """

    def __init__(
        self, optimizer: torch.optim.Optimizer, do_flatten: bool = False, *, elementwise: bool | None = None
    ) -> None:
        if isinstance(optimizer, FusedOptimizer):
            raise TypeError("optimizer is already a FusedOptimizer; wrap the plain torch optimizer once")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
        if not isinstance(do_flatten, bool):
            raise TypeError(f"do_flatten must be a bool, got {do_flatten!r}")
        if elementwise is not None and not isinstance(elementwise, bool):
            raise TypeError(f"elementwise must be None or a bool, got {elementwise!r}")
        # The hook tables torch.optim.Optimizer.__init__ would create (we do not call it: param_groups,
        # defaults and state belong to the wrapped optimizer and are exposed as properties).
        self._optimizer_step_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_step_post_hooks: OrderedDict = OrderedDict()
        self._optimizer_state_dict_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_state_dict_post_hooks: OrderedDict = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_load_state_dict_post_hooks: OrderedDict = OrderedDict()
        self._patch_step_function()

        self.optimizer = optimizer
        self.do_flatten = do_flatten
        if elementwise is None:
            elementwise = type(optimizer) in _ELEMENTWISE_OPTIMIZERS
            if not elementwise:
                logger.warning(
                    "FusedOptimizer: %s is not known to update parameters elementwise; stepping it "
                    "unfused and leaving parameter memory as is. Pass elementwise=True if its state is "
                    "only per-element tensors and scalars.",
                    type(optimizer).__name__,
                )
        self.fused = elementwise
        self._plans: list[_GroupPlan] = []
        if self.fused:
            for index in range(len(optimizer.param_groups)):
                self._add_plan(index)
            self._adopt_state()

    # ------------------------------------------------------------------ views of the wrapped optimizer
    @property
    def param_groups(self) -> list[dict[str, Any]]:  # type: ignore[override]
        """The wrapped optimizer's param groups (original parameters; lr schedulers edit these)."""
        return self.optimizer.param_groups

    @property
    def defaults(self) -> dict[str, Any]:  # type: ignore[override]
        """The wrapped optimizer's defaults."""
        return self.optimizer.defaults

    @property
    def state(self) -> defaultdict[Tensor, dict[str, Any]]:  # type: ignore[override]
        """Per-parameter state in the wrapped optimizer's format, built on access.

        Per-element entries are live views into the flat state; scalar entries are copies, so assigning
        into this dict does not change the optimizer.
        """
        if not self.fused:
            return self.optimizer.state
        return defaultdict(dict, self._param_states())

    def __repr__(self) -> str:
        return f"FusedOptimizer(do_flatten={self.do_flatten}, fused={self.fused}, {self.optimizer!r})"

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("FusedOptimizer cannot be pickled; save opt.state_dict() instead")

    # ---------------------------------------------------------------------------------- public API
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """Perform one optimization step (parameter update); ``.grad`` values are not modified.

        Example:
            >>> loss.backward()
            >>> opt.step()
        """
        if not self.fused:
            return self.optimizer.step(closure)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        inner = self.optimizer
        for index in range(len(self._plans), len(inner.param_groups)):  # groups added to the inner directly
            self._add_plan(index)
        units: list[_Unit] = []
        unit_state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        saved_params = []
        with torch.no_grad():
            group_units = [
                self._plan_units(plan, group["params"], units, unit_state)
                for plan, group in zip(self._plans, inner.param_groups)
            ]
        try:
            for group, params in zip(inner.param_groups, group_units):
                saved_params.append(group["params"])
                group["params"] = params
            inner.state = unit_state
            inner.step()
        finally:
            for group, params in zip(inner.param_groups, saved_params):
                group["params"] = params
            inner.state = defaultdict(dict)
            self._absorb(units, unit_state)
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset gradients like ``torch.optim.Optimizer.zero_grad``; flat gradient buffers are zeroed at once.

        Example:
            >>> opt.zero_grad()  # grads become None (the torch default)
            >>> opt.zero_grad(set_to_none=False)  # grads are zeroed in place, one kernel per flat buffer
        """
        if set_to_none or not self.fused:
            self.optimizer.zero_grad(set_to_none)
            return
        buckets: dict[int, Tensor] = {}
        for plan in self._plans:
            for slot in plan.slots:
                grad = slot.param.grad
                if grad is None:
                    continue
                if grad is slot.grad_view and slot.bucket is not None and slot.bucket.grad is not None:
                    buckets[id(slot.bucket)] = slot.bucket.grad
                    continue
                if grad.grad_fn is not None:
                    grad.detach_()
                else:
                    grad.requires_grad_(False)
                grad.zero_()
        for flat_grad in buckets.values():
            flat_grad.zero_()

    def state_dict(self) -> dict[str, Any]:
        """The wrapped optimizer's ``state_dict()``, per original parameter (loadable by either optimizer).

        Like torch's, tensors in it alias the live state: save or deep-copy it before further steps.

        Example:
            >>> torch.save(opt.state_dict(), "opt.pt")
        """
        if not self.fused:
            return self.optimizer.state_dict()
        inner = self.optimizer
        inner.state = defaultdict(dict, self._param_states())
        try:
            return inner.state_dict()
        finally:
            inner.state = defaultdict(dict)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict saved by this wrapper or by the unfused wrapped optimizer.

        Example:
            >>> opt.load_state_dict(torch.load("opt.pt"))
        """
        if not self.fused:
            self.optimizer.load_state_dict(state_dict)
            return
        inner = self.optimizer
        inner.state = defaultdict(dict)
        try:
            inner.load_state_dict(state_dict)
            for plan in self._plans:
                for slot in plan.slots:
                    slot.seg = None
                    slot.off = 0
            self._adopt_state()
        finally:
            inner.state = defaultdict(dict)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a param group to the wrapped optimizer (flattened too when ``do_flatten``).

        Example:
            >>> opt.add_param_group({"params": head.parameters(), "lr": 1e-4})
        """
        self.optimizer.add_param_group(param_group)
        if self.fused:
            self._add_plan(len(self.optimizer.param_groups) - 1)

    def register_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> Any:
        """Registered on the wrapped optimizer, which builds the state dict."""
        return self.optimizer.register_state_dict_pre_hook(hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> Any:
        """Registered on the wrapped optimizer, which builds the state dict."""
        return self.optimizer.register_state_dict_post_hook(hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> Any:
        """Registered on the wrapped optimizer, which loads the state dict."""
        return self.optimizer.register_load_state_dict_pre_hook(hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> Any:
        """Registered on the wrapped optimizer, which loads the state dict."""
        return self.optimizer.register_load_state_dict_post_hook(hook, prepend)

    # ----------------------------------------------------------------------------------- internals
    def _add_plan(self, index: int) -> None:
        params = self.optimizer.param_groups[index]["params"]
        plan = _GroupPlan(params)
        if self.do_flatten:
            self._flatten(plan)
        self._plans.append(plan)

    @torch.no_grad()
    def _flatten(self, plan: _GroupPlan) -> None:
        """Move the group's parameters (per device and dtype) into one buffer each; re-point .data/.grad."""
        by_kind: dict[tuple[torch.device, torch.dtype], list[_Slot]] = {}
        for slot in plan.slots:
            p = slot.param
            if p.dim() >= 1 and p.layout == torch.strided:  # 0-dim and sparse parameters stay as they are
                by_kind.setdefault((p.device, p.dtype), []).append(slot)
        for (device, dtype), slots in by_kind.items():
            total = sum(slot.numel for slot in slots)
            bucket = _Bucket(torch.empty(total, device=device, dtype=dtype))
            torch.cat([slot.param.detach().reshape(-1) for slot in slots], out=bucket.data)
            offset = 0
            for slot in slots:
                p = slot.param
                slot.bucket, slot.boff = bucket, offset
                bucket.slots.append(slot)
                p.data = bucket.data[offset : offset + slot.numel].view(p.shape)
                offset += slot.numel
            if any(slot.param.grad is not None and slot.param.grad.layout == torch.strided for slot in slots):
                self._grad_buffer(bucket)
                for slot in slots:
                    grad = slot.param.grad
                    if grad is not None and grad.layout == torch.strided:
                        slot.grad_view.copy_(grad)
                        slot.param.grad = slot.grad_view
        logger.debug("FusedOptimizer: flattened %d parameters into %d buffers", len(plan.slots), len(by_kind))

    @staticmethod
    def _grad_buffer(bucket: _Bucket) -> Tensor:
        if bucket.grad is None:
            bucket.grad = torch.zeros_like(bucket.data)
            offset = 0
            for slot in bucket.slots:
                slot.grad_view = bucket.grad[offset : offset + slot.numel].view(slot.param.shape)
                offset += slot.numel
        return bucket.grad

    @staticmethod
    def _relayout(plan: _GroupPlan, params: list[Tensor]) -> None:
        """Recompute which parameters are adjacent in memory (only when a data pointer changed)."""
        for slot in plan.slots:
            p = slot.param
            slot.fusable = p.dim() >= 1 and p.layout == torch.strided and p.is_contiguous()
            slot.in_bucket = (
                slot.bucket is not None
                and p.data_ptr() == slot.bucket.data.data_ptr() + slot.boff * p.element_size()
                and p.dtype == slot.bucket.data.dtype
            )
        fusable = [s for s in plan.slots if s.fusable]
        fusable.sort(key=lambda s: (str(s.param.device), str(s.param.dtype), s.param.data_ptr()))
        order = fusable + [s for s in plan.slots if not s.fusable]
        joins = [False] * len(order)
        for j in range(1, len(fusable)):
            a, b = order[j - 1].param, order[j].param
            joins[j] = (
                a.device == b.device
                and a.dtype == b.dtype
                and b.data_ptr() == a.data_ptr() + a.numel() * a.element_size()
                and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
            )
        plan.order, plan.joins = order, joins
        plan.layout_key = tuple(p.data_ptr() for p in params)

    def _plan_units(
        self,
        plan: _GroupPlan,
        params: list[Tensor],
        units: list[_Unit],
        unit_state: dict[Tensor, dict[str, Any]],
    ) -> list[Tensor]:
        """Cut the group into units (runs stepped as one tensor) for this step; returns the unit tensors."""
        if plan.layout_key != tuple(p.data_ptr() for p in params):
            self._relayout(plan, params)
        group_units: list[Tensor] = []
        run: list[_Slot] = []
        for slot, join in zip(plan.order, plan.joins):
            grad = slot.param.grad
            if grad is None:
                self._close_run(run, units, unit_state, group_units)
                continue
            seg = slot.seg
            if not slot.fusable or grad.layout != torch.strided or (seg is not None and not seg.flat):
                self._close_run(run, units, unit_state, group_units)
                p = slot.param
                if seg is None:
                    state: dict[str, Any] = {}
                elif seg.flat:
                    state = _slice_state(seg, slot.off, slot.numel, p.shape)
                else:
                    state = seg.state
                unit_state[p] = state
                units.append((p, "solo", [slot], seg))
                group_units.append(p)
                continue
            if run and join:
                prev = run[-1]
                if prev.seg is seg and (seg is None or slot.off == prev.off + prev.numel):
                    run.append(slot)
                    continue
            self._close_run(run, units, unit_state, group_units)
            run.append(slot)
        self._close_run(run, units, unit_state, group_units)
        return group_units

    def _close_run(
        self,
        run: list[_Slot],
        units: list[_Unit],
        unit_state: dict[Tensor, dict[str, Any]],
        group_units: list[Tensor],
    ) -> None:
        if not run:
            return
        slots = list(run)
        run.clear()
        numel = sum(slot.numel for slot in slots)
        # Adjacency in one storage was checked by _relayout; as_strided also bounds-checks the storage.
        unit = slots[0].param.detach().as_strided((numel,), (1,))
        unit.grad = self._gather_grad(slots, numel)
        seg = slots[0].seg
        if seg is None:
            state: dict[str, Any] = {}
            kind = "new"
        elif slots[0].off == 0 and numel == seg.numel:
            state, kind = seg.state, "whole"
        else:
            state, kind = _slice_state(seg, slots[0].off, numel), "new"
        unit_state[unit] = state
        units.append((unit, kind, slots, seg))
        group_units.append(unit)

    def _gather_grad(self, slots: list[_Slot], numel: int) -> Tensor:
        """The run's gradient as one 1-D tensor; copies into the flat gradient buffer only when needed."""
        bucket = slots[0].bucket
        if bucket is not None and all(slot.in_bucket and slot.bucket is bucket for slot in slots):
            flat_grad = self._grad_buffer(bucket).narrow(0, slots[0].boff, numel)
            misplaced = [slot for slot in slots if slot.param.grad is not slot.grad_view]
            if misplaced:
                _copy_all([slot.grad_view for slot in misplaced], [slot.param.grad for slot in misplaced])
                for slot in misplaced:
                    slot.param.grad = slot.grad_view
            return flat_grad
        grads = [slot.param.grad for slot in slots]
        if len(grads) == 1:
            return grads[0].reshape(-1)
        flat = _span(grads, numel)
        if flat is not None:
            return flat
        return torch.cat([g.reshape(-1) for g in grads])

    @staticmethod
    def _absorb(units: list[_Unit], unit_state: dict[Tensor, dict[str, Any]]) -> None:
        """Take the state the wrapped optimizer produced for each unit back into segments."""
        for unit, kind, slots, seg in units:
            state = unit_state.get(unit)
            if kind == "whole" and state:
                seg.state = state
                seg.elem_keys = _elem_keys(state, seg.numel)
                continue
            if not state:
                for slot in slots:
                    slot.seg, slot.off = None, 0
                continue
            if kind == "solo":
                slot = slots[0]
                if seg is not None and not seg.flat:
                    seg.state = state
                else:
                    slot.seg, slot.off = _Segment(False, state, slot.numel), 0
                continue
            new = _Segment(True, state, sum(slot.numel for slot in slots))
            offset = 0
            for slot in slots:
                slot.seg, slot.off = new, offset
                offset += slot.numel

    def _param_states(self) -> Iterator[tuple[Tensor, dict[str, Any]]]:
        """Per original parameter state in the wrapped optimizer's own format."""
        for plan in self._plans:
            for slot in plan.slots:
                seg = slot.seg
                if seg is None:
                    continue
                if seg.flat:
                    yield slot.param, _slice_state(seg, slot.off, slot.numel, slot.param.shape)
                else:
                    yield slot.param, seg.state

    def _adopt_state(self) -> None:
        """Turn per-parameter state held by the wrapped optimizer into segments, then clear it there.

        Adjacent parameters whose state has the same entries and equal scalars share one segment.
        """
        inner = self.optimizer
        with torch.no_grad():
            for plan, group in zip(self._plans, inner.param_groups):
                self._relayout(plan, group["params"])
                pending: list[tuple[_Slot, dict[str, Any], frozenset[str]]] = []
                for slot, join in zip(plan.order, plan.joins):
                    state = inner.state.get(slot.param)
                    if not state:
                        self._merge(pending)
                        continue
                    if not slot.fusable:
                        self._merge(pending)
                        slot.seg, slot.off = _Segment(False, dict(state), slot.numel), 0
                        continue
                    shape = slot.param.shape
                    elem = frozenset(k for k, v in state.items() if isinstance(v, Tensor) and v.shape == shape)
                    if not (join and pending and self._compatible(pending[-1], state, elem)):
                        self._merge(pending)
                    pending.append((slot, state, elem))
                self._merge(pending)
        inner.state = defaultdict(dict)

    @staticmethod
    def _compatible(last: tuple[_Slot, dict[str, Any], frozenset[str]], state: dict, elem: frozenset) -> bool:
        _, prev_state, prev_elem = last
        if prev_state.keys() != state.keys() or prev_elem != elem:
            return False
        for key, value in state.items():
            other = prev_state[key]
            if key in elem:
                if value.dtype != other.dtype or value.device != other.device:
                    return False
            elif not _same_scalar(value, other):
                return False
        return True

    @staticmethod
    def _merge(pending: list[tuple[_Slot, dict[str, Any], frozenset[str]]]) -> None:
        if not pending:
            return
        numel = sum(slot.numel for slot, _, _ in pending)
        first_state, elem = pending[0][1], pending[0][2]
        state: dict[str, Any] = {}
        for key, value in first_state.items():
            if key in elem:
                state[key] = torch.cat([st[key].reshape(-1) for _, st, _ in pending])
            else:
                state[key] = _copy_scalar(value)
        seg = _Segment(True, state, numel)
        offset = 0
        for slot, _, _ in pending:
            slot.seg, slot.off = seg, offset
            offset += slot.numel
        pending.clear()
