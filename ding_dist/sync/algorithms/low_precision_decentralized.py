"""``low_precision_decentralized``: ring weight averaging with 8-bit compressed differences (Bagua's).

Rank ``i`` of a ring of ``n >= 2`` has a left peer ``L = (i - 1) mod n`` and a right peer
``R = (i + 1) mod n`` and keeps three replicas, all starting equal to the initial weights: its own
``w_i`` and its peers' ``w_L`` and ``w_R`` (on 2 ranks both peers are the other rank). Steps are counted
from 1; after ``optimizer.step()`` of step ``k`` with ``(k - 1) % communication_interval == 0``, with
``x`` the freshly updated weights:

- ``d = x + w_L/3 + w_R/3 - 5/3 w_i``, in Bagua's order of float32 operations: ``d = x``, ``d += w_L * (1/3)``,
  ``d += w_R * (1/3)``, ``d -= w_i * (5/3)``;
- ``q = Q(d)``: Bagua's 8-bit min-max quantization of the whole vector (:class:`BaguaMinMaxUInt8Codec`: float32
  min and max, then one byte per value, padded to a multiple of 4 values with copies of the first), sent to
  both peers; ``q_L``, ``q_R`` received;
- ``w_L += D(q_L)``, ``w_R += D(q_R)``, ``w_i += D(q)`` (``D`` decodes the bytes, the same on both
  ends of a link), and the parameters become ``x = w_i``.

So every rank's own replica equals, bitwise, its left peer's right replica and its right peer's left
replica, and ``x ~ (w_L + w_i + w_R) / 3 + (x - w_i)``: a 1/3-1/3-1/3 ring mix of the replicas plus the
local progress since the last communication. Other steps are local SGD. ``hierarchical=True``: the updated weights
are averaged within each node of ``get_local_size()`` consecutive ranks onto the node leader (a SUM reduce, then a
division, as Bagua does), the node leaders run the above on a ring of nodes and broadcast the result within their
node. On one node (Bagua's default, ``hierarchical=True``, on one machine) the leader is a ring of one, its own left
and right peer, as in Bagua: nothing is sent, the "received" messages are its own ``q``, so ``w_L += D(q)``,
``w_R += D(q)``, ``w_i += D(q)`` (the three replicas stay equal, ``d ~ x - w_i``) and every rank ends with ``w_i``,
the 8-bit-quantized node average. A world of one rank is local training.

On CPU this reproduces the float32 operations of the torch reference in Bagua's own test
(``tests/torch_api/test_low_precision_decentralized.py``) one by one, so the port of its ``test_compare`` is
bitwise (Bagua's CUDA kernels may fuse the multiply-adds, hence its test's tolerance).

Register: ``distribute(net, opt, algorithm='low_precision_decentralized', communication_interval=2)``
"""

from __future__ import annotations

import torch

from ding_dist.comm import CommHandle
from ding_dist.sync._primitives import MeteredLink, pieces
from ding_dist.sync.algorithms import Algorithm
from ding_dist.sync.algorithms.decentralized import FlatWeights, Layout, check_hierarchical, check_interval
from ding_dist.sync.bucket import Bucket

__all__ = ["BaguaMinMaxUInt8Codec", "LowPrecisionDecentralizedState"]


class BaguaMinMaxUInt8Codec:
    """Bagua's 8-bit min-max quantization of one row: ``scale = 255 / (max - min + 1e-7)``, codes
    ``min(round(x * scale), round(max * scale)) - (round(max * scale) - 255)``, decoded as
    ``(code + round(max * scale) - 255) / scale``.

    A row travels as 8 header bytes (float32 min and max) and one byte per value; every float32 operation is
    the one Bagua's reference makes, in its order (``255 / t`` as ``reciprocal(t) * 255``, as torch computes
    it). Quantizing and decoding are elementwise once the header is known, so a row may go in pieces.

    Example::

        codec = BaguaMinMaxUInt8Codec()
        msg = torch.empty(1, codec.nbytes(4), dtype=torch.uint8)
        codec.write_header(x.view(1, -1), msg)
        codec.quantize_into(x.view(1, -1), msg[:, :8], msg[:, 8:])
        codec.decode_values(msg[:, :8], msg[:, 8:])  # x to within (max - min) / 255
    """

    __slots__ = ()
    header = 8
    eps = 1e-7
    levels = 255.0

    def nbytes(self, n: int) -> int:
        return self.header + n

    def write_header(self, x: torch.Tensor, out: torch.Tensor) -> None:
        """Write the float32 min and max of ``x`` (``[1, n]`` float32) into ``out[:, :header]``."""
        out[:, : self.header].view(torch.float32).copy_(torch.stack([x.min(), x.max()]).view(1, 2))

    def _bounds(self, header: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(scale, upper, lower)`` from a header: 0-dim float32 tensors, the same on every rank."""
        lo, hi = header.view(torch.float32)[0]
        scale = torch.reciprocal(hi - lo + self.eps) * self.levels
        upper = torch.round(hi * scale)
        return scale, upper, upper - self.levels

    def quantize_into(self, x: torch.Tensor, header: torch.Tensor, out: torch.Tensor) -> None:
        """The codes of float32 values ``x`` (any columns of the row) into ``out``, with the row's ``header``."""
        scale, upper, lower = self._bounds(header)
        out.copy_(torch.round(x * scale).clamp_(max=upper).sub_(lower))

    def decode_values(self, header: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        """Float32 values of ``codes`` (any columns of the row) under the row's ``header``."""
        scale, _, lower = self._bounds(header)
        return codes.float().add_(lower).div_(scale)


class LowPrecisionDecentralizedState:
    """Ring peers, step counter, the three replicas and the message buffers, per flat weight vector."""

    __slots__ = ("link", "layout", "interval", "steps", "codec", "left", "right", "weights", "replicas", "buffers")

    def __init__(self, link: MeteredLink, communication_interval: int = 1, hierarchical: bool = False) -> None:
        self.link = link
        self.interval = check_interval(communication_interval)
        self.layout = Layout(link, check_hierarchical(hierarchical), "low_precision_decentralized")
        n, i = len(self.layout.members), self.layout.index
        self.left = self.right = None  # no ring: a world of one rank (local training), or a non-leader
        if i is not None and link.world_size > 1:  # n == 1: hierarchical on one node, the leader's ring of one
            self.left, self.right = self.layout.members[(i - 1) % n], self.layout.members[(i + 1) % n]
        self.steps = 0
        self.codec = BaguaMinMaxUInt8Codec()
        self.weights: FlatWeights | None = None
        self.replicas: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # (own, left, right)
        # (padded diff, a product's scratch, sent, from left, from right)
        self.buffers: list[tuple[torch.Tensor, ...]] = []

    def ensure(self, buckets: list[Bucket]) -> FlatWeights:
        """Bind the parameters and start the replicas at their current (identical) values."""
        if self.weights is None:
            self.weights = FlatWeights.of_buckets(buckets)
            if self.left is not None:
                for flat in self.weights.read():
                    self.replicas.append((flat.clone(), flat.clone(), flat.clone()))
                    # rows of a multiple of 4 values, so the float32 header of the next row stays aligned
                    padded = torch.empty(-(-flat.numel() // 4) * 4, dtype=flat.dtype, device=flat.device)
                    msg = torch.empty(1, self.codec.nbytes(padded.numel()), dtype=torch.uint8, device=flat.device)
                    self.buffers.append((padded, torch.empty_like(flat), msg, torch.empty_like(msg),
                                         torch.empty_like(msg)))  # fmt: skip
        return self.weights

    def mix(self, x: list[torch.Tensor]) -> None:
        """The ring step on the flat weights ``x`` (leaders, or every rank when flat), in place.

        Pipelined, with the same bytes and values as one message: once the header (min and step of the
        whole ``d``) is known, each piece of the message (:func:`~ding_dist.sync._primitives.pieces`) is
        quantized and posted while the next one is quantized, and each received piece is decoded into the
        replicas while the later ones are still on the wire (every codec step is elementwise).
        """
        assert self.left is not None and self.right is not None
        alone = self.left == self.link.rank  # a ring of one: the messages "received" are this rank's own
        peers = [] if alone else [self.left] if self.right == self.left else [self.left, self.right]
        codec, h = self.codec, self.codec.header
        for xi, (own, left, right), (d, product, msg, from_left, from_right) in zip(x, self.replicas, self.buffers):
            n = xi.numel()
            d[:n] = xi  # Bagua's order, each product rounded before its sum (no fused multiply-add)
            d[:n].add_(torch.mul(left, 1.0 / 3.0, out=product))
            d[:n].add_(torch.mul(right, 1.0 / 3.0, out=product))
            d[:n].sub_(torch.mul(own, 5.0 / 3.0, out=product))
            d[n:] = d[0]  # padding inside [min, max]: the code of the real values is unchanged
            codec.write_header(d.view(1, -1), msg)
            inboxes = [msg] if alone else [from_left] if len(peers) == 1 else [from_left, from_right]
            for _ in peers:
                self.link.count_exchange(msg)
            sent, received = pieces(msg), [pieces(box) for box in inboxes]
            spans, works, start = [], [], 0
            for k, piece in enumerate(sent):  # byte span [start, stop) of the message -> values [a, b)
                stop = start + piece.numel()
                a, b = max(start, h) - h, stop - h
                if b > a:
                    codec.quantize_into(d[a:b].view(1, -1), msg[:, :h], msg[:, a + h : b + h])
                posted = [self.link.exchange_piece(piece, box[k], peer) for peer, box in zip(peers, received)]
                works.append(CommHandle([w for pair in posted for w in pair]))
                spans.append((a, min(b, n)))
                start = stop
            for a, b in spans:  # own first: it overlaps the transfer
                if b > a:
                    own[a:b].add_(codec.decode_values(msg[:, :h], msg[:, a + h : b + h]).view(-1))
            for (a, b), work in zip(spans, works):
                work.wait()
                if b > a:
                    got = [codec.decode_values(box[:, :h], box[:, a + h : b + h]).view(-1) for box in inboxes]
                    left[a:b].add_(got[0])
                    right[a:b].add_(got[-1])
            xi.copy_(own)


def make_state(
    link: MeteredLink, communication_interval: int = 1, hierarchical: bool = False
) -> LowPrecisionDecentralizedState:
    """Build the state (a ring of the ranks, or of the node leaders when ``hierarchical``)."""
    return LowPrecisionDecentralizedState(link, communication_interval, hierarchical)


def pre_step_hook(state: LowPrecisionDecentralizedState, buckets: list[Bucket]) -> None:
    """Before the first ``optimizer.step()``: the replicas start at the current weights."""
    state.ensure(buckets)


def step_hook(state: LowPrecisionDecentralizedState, buckets: list[Bucket]) -> None:
    """After ``optimizer.step()``: on a communicating step, the compressed ring exchange."""
    weights = state.ensure(buckets)
    communicates = state.steps % state.interval == 0
    state.steps += 1
    if not communicates:
        return
    x = weights.read()
    state.layout.node_leader_average(x)
    if state.left is not None:
        state.mix(x)
    state.layout.node_broadcast(x)
    weights.write(x)


ALGORITHMS = (
    Algorithm(
        "low_precision_decentralized",
        make_state=make_state,
        pre_step_hook=pre_step_hook,
        step_hook=step_hook,
        averages_weights=True,
        options=("communication_interval", "hierarchical"),
    ),
)
