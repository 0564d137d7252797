"""The book-keeping of :class:`~ding_dist.optim.fused.FusedOptimizer`: segments of optimizer state shared by
parameters always stepped together, flat parameter buckets, one slot per original parameter, a param group's plan,
and the helpers that slice, copy and compare that state.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor


class _Segment:
    """Optimizer state of parameters that were always stepped together.

    ``flat=True``: entries named in ``elem_keys`` are 1-D tensors of length ``numel`` covering the
    parameters in order; other entries are scalars shared by all of them. ``flat=False``: the state of a
    single parameter in the parameter's own shape (0-dim or non-contiguous parameters, sparse gradients).
    """

    __slots__ = ("flat", "state", "elem_keys", "numel")

    def __init__(self, flat: bool, state: dict[str, Any], numel: int) -> None:
        self.flat = flat
        self.state = state
        self.numel = numel
        self.elem_keys = _elem_keys(state, numel) if flat else frozenset()


class _Bucket:
    """A flat parameter buffer made by ``do_flatten=True`` and its lazily allocated gradient twin."""

    __slots__ = ("data", "grad", "slots")

    def __init__(self, data: Tensor) -> None:
        self.data = data
        self.grad: Tensor | None = None
        self.slots: list[_Slot] = []


class _Slot:
    """Book-keeping for one original parameter."""

    __slots__ = ("param", "numel", "seg", "off", "bucket", "boff", "grad_view", "in_bucket", "fusable")

    def __init__(self, param: Tensor) -> None:
        self.param = param
        self.numel = param.numel()
        self.seg: _Segment | None = None  # None: no optimizer state yet
        self.off = 0  # element offset of this parameter inside seg's flat state
        self.bucket: _Bucket | None = None
        self.boff = 0  # element offset inside bucket.data
        self.grad_view: Tensor | None = None
        self.in_bucket = False  # param.data still is our view into bucket.data
        self.fusable = False


# (unit tensor handed to the wrapped optimizer, kind "whole" | "new" | "solo", its slots, their segment)
_Unit = tuple[Tensor, str, list[_Slot], _Segment | None]


class _GroupPlan:
    """Slots of one param group, plus the memory order used to form runs (cached per layout)."""

    __slots__ = ("slots", "layout_key", "order", "joins")

    def __init__(self, params: list[Tensor]) -> None:
        self.slots = [_Slot(p) for p in params]
        self.layout_key: tuple[int, ...] | None = None
        self.order: list[_Slot] = []
        self.joins: list[bool] = []  # joins[j]: order[j] directly follows order[j-1] in one storage


def _elem_keys(state: dict[str, Any], numel: int) -> frozenset[str]:
    return frozenset(k for k, v in state.items() if isinstance(v, Tensor) and v.dim() == 1 and len(v) == numel)


def _copy_scalar(value: Any) -> Any:
    return value.clone() if isinstance(value, Tensor) else copy.deepcopy(value)


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
            return False
        return a.shape == b.shape and a.dtype == b.dtype and a.device == b.device and torch.equal(a, b)
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # values without a usable ==: never merge
        return False


def _slice_state(seg: _Segment, off: int, numel: int, shape: torch.Size | None = None) -> dict[str, Any]:
    """State of ``numel`` elements from ``off``: per-element entries as views, scalars copied."""
    out: dict[str, Any] = {}
    for key, value in seg.state.items():
        if key in seg.elem_keys:
            part = value.narrow(0, off, numel)
            out[key] = part if shape is None else part.view(shape)
        else:
            out[key] = _copy_scalar(value)
    return out


def _copy_all(dst: list[Tensor], src: list[Tensor]) -> None:
    """``d.copy_(s)`` for each pair, as one multi-tensor call where torch offers it."""
    foreach_copy = getattr(torch, "_foreach_copy_", None)
    if foreach_copy is not None:
        foreach_copy(dst, src)
    else:
        for d, s in zip(dst, src):
            d.copy_(s)


def _span(tensors: list[Tensor], numel: int) -> Tensor | None:
    """A 1-D view covering ``tensors`` if they lie back to back in one storage, else None."""
    first = tensors[0]
    ptr = first.data_ptr()
    size = first.element_size()
    for t in tensors:
        if t.data_ptr() != ptr or not t.is_contiguous() or t.layout != torch.strided:
            return None
        ptr += t.numel() * size
    if (first.storage_offset() + numel) * size > first.untyped_storage().nbytes():
        return None
    return first.detach().as_strided((numel,), (1,))
