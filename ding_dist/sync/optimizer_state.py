"""Copy rank 0's optimizer state to every rank when a model is wrapped (``distribute`` calls this).

Broadcasting the parameters alone is not enough: momentum buffers, Adam moments, step counters and
the param groups' hyper-parameters (``lr``, ``momentum``, ``betas``, ``weight_decay``, ...) that
differ across ranks make synchronized steps drift apart without any error. Each optimizer's
``state_dict()`` on rank 0 is split into its tensors and everything else: one object broadcast
carries the rest (scalars, hyper-parameters, the tensors' shapes and dtypes), then one broadcast
per (device, dtype) carries all tensors of all optimizers, flattened. The other ranks rebuild the
state dict and ``load_state_dict()`` it, so they end with rank 0's state exactly, "no state yet"
included; any optimizer with a faithful ``state_dict``/``load_state_dict`` pair works.
"""

from __future__ import annotations

from itertools import chain
from typing import Any, NamedTuple

import torch

from ding_dist.sync._primitives import MeteredLink

__all__ = ["broadcast_optimizer_state", "optimizer_signature"]


class _Ref(NamedTuple):
    """Stands in for a tensor sent in a flat group: ``group`` index, ``offset`` in it, ``shape``."""

    group: int
    offset: int
    shape: tuple[int, ...]


def optimizer_signature(optimizers: list[Any]) -> list[tuple[str, list[int]]]:
    """Type and param-group sizes of each optimizer: what must agree across ranks before a broadcast.

    Example:
        >>> net = torch.nn.Linear(2, 1)
        >>> optimizer_signature([torch.optim.SGD(net.parameters(), lr=0.1)])
        [('SGD', [2])]
    """
    return [(type(opt).__name__, [len(g["params"]) for g in opt.param_groups]) for opt in optimizers]


def _params_by_id(state_dict: dict[str, Any], optimizer: Any) -> dict[Any, torch.Tensor]:
    saved = chain.from_iterable(g["params"] for g in state_dict["param_groups"])
    local = chain.from_iterable(g["params"] for g in optimizer.param_groups)
    return dict(zip(saved, local))


def _first_param(group: dict[str, Any]) -> torch.Tensor | None:
    return group["params"][0] if group["params"] else None


class _Packer:
    """Rank 0's side: replaces tensors by :class:`_Ref` and collects them per (device, dtype)."""

    def __init__(self) -> None:
        self.keys: list[tuple[torch.device, torch.dtype]] = []
        self.tensors: list[list[torch.Tensor]] = []
        self.numels: list[int] = []

    def pack(self, value: Any, owner: torch.Tensor | None) -> Any:
        if isinstance(value, torch.Tensor):
            on_owner = owner is not None and value.device == owner.device
            if not on_owner or value.layout != torch.strided:  # e.g. a CPU ``step`` of a GPU parameter
                return value.detach().to("cpu", copy=True)  # travels inside the object, stays on the CPU
            key = (value.device, value.dtype)
            if key not in self.keys:
                self.keys.append(key)
                self.tensors.append([])
                self.numels.append(0)
            g = self.keys.index(key)
            ref = _Ref(g, self.numels[g], tuple(value.shape))
            self.tensors[g].append(value.detach().reshape(-1))
            self.numels[g] += value.numel()
            return ref
        if isinstance(value, dict):
            return {k: self.pack(v, owner) for k, v in value.items()}
        if isinstance(value, list):
            return [self.pack(v, owner) for v in value]
        if isinstance(value, tuple) and type(value) is tuple:
            return tuple(self.pack(v, owner) for v in value)
        return value


def _pack_state_dict(packer: _Packer, sd: dict[str, Any], optimizer: Any) -> dict[str, Any]:
    params = _params_by_id(sd, optimizer)
    out = {k: v for k, v in sd.items() if k not in ("state", "param_groups")}
    out["state"] = {k: packer.pack(v, params.get(k)) for k, v in sd["state"].items()}
    groups = []
    for group, local in zip(sd["param_groups"], optimizer.param_groups):
        owner = _first_param(local)
        groups.append({k: (v if k == "params" else packer.pack(v, owner)) for k, v in group.items()})
    out["param_groups"] = groups
    return out


def _unpack(value: Any, flats: list[torch.Tensor], owner: torch.Tensor | None) -> Any:
    if isinstance(value, _Ref):
        n = 1
        for d in value.shape:
            n *= d
        t = flats[value.group][value.offset : value.offset + n].view(value.shape).clone()
        return t.to(owner.device) if owner is not None and t.device != owner.device else t
    if isinstance(value, dict):
        return {k: _unpack(v, flats, owner) for k, v in value.items()}
    if isinstance(value, list):
        return [_unpack(v, flats, owner) for v in value]
    if isinstance(value, tuple) and type(value) is tuple:
        return tuple(_unpack(v, flats, owner) for v in value)
    return value


def _group_owners(packed: list[dict[str, Any]], optimizers: list[Any], n_groups: int) -> list[torch.Tensor | None]:
    """A local tensor whose device each flat group is received on: the parameter of its first member."""
    owners: list[torch.Tensor | None] = [None] * n_groups

    def visit(value: Any, owner: torch.Tensor | None) -> None:
        if isinstance(value, _Ref):
            if owners[value.group] is None:
                owners[value.group] = owner
        elif isinstance(value, dict):
            for v in value.values():
                visit(v, owner)
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v, owner)

    for sd, opt in zip(packed, optimizers):
        params = _params_by_id(sd, opt)
        for k, v in sd["state"].items():
            visit(v, params.get(k))
        for group, local in zip(sd["param_groups"], opt.param_groups):
            visit({k: v for k, v in group.items() if k != "params"}, _first_param(local))
    return owners


def broadcast_optimizer_state(optimizers: list[Any], link: MeteredLink | None = None) -> None:
    """Give every rank rank 0's optimizer state: one object broadcast plus one per (device, dtype).

    Every rank must pass optimizers of the same types and param-group sizes (``distribute`` checks
    this first, on every rank). Rank 0's optimizers are left untouched.

    Example:
        >>> net = torch.nn.Linear(2, 1)
        >>> broadcast_optimizer_state([torch.optim.SGD(net.parameters(), lr=0.1)])  # no-op on the fake link
    """
    link = link or MeteredLink()
    if link.world_size == 1 or not optimizers:
        return
    if link.rank == 0:
        packer = _Packer()
        packed = [_pack_state_dict(packer, opt.state_dict(), opt) for opt in optimizers]
        header = (packed, [(dtype, n) for (_, dtype), n in zip(packer.keys, packer.numels)])
        link.broadcast_object(header)
        for group in packer.tensors:
            link.broadcast(torch.cat(group), src=0)
        return
    packed, groups = link.broadcast_object(None)
    owners = _group_owners(packed, optimizers, len(groups))
    flats = []
    for (dtype, n), owner in zip(groups, owners):
        flat = torch.empty(n, dtype=dtype, device=owner.device if owner is not None else "cpu")
        link.broadcast(flat, src=0)
        flats.append(flat)
    for sd, opt in zip(packed, optimizers):
        params = _params_by_id(sd, opt)
        state = {k: _unpack(v, flats, params.get(k)) for k, v in sd["state"].items()}
        groups = [
            {k: (v if k == "params" else _unpack(v, flats, _first_param(local))) for k, v in group.items()}
            for group, local in zip(sd["param_groups"], opt.param_groups)
        ]
        opt.load_state_dict({**sd, "state": state, "param_groups": groups})
