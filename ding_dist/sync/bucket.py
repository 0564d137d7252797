"""Buckets: parameters grouped into flat, contiguous gradient buffers.

A bucket owns one flat tensor laid out as ``[grad_0 | grad_1 | ... | grad_{P-1} | ind_0 ... ind_{P-1}]``:
the gradients of its ``P`` parameters (each ``param.grad`` is a view into it, so no copy is needed
when autograd accumulates in place) followed by one indicator slot per parameter (1 when this rank
produced a gradient for that parameter in the current backward pass, else 0). Summing the whole
buffer across ranks therefore yields, in one collective, both the gradient sum and the number of
ranks that contributed to each parameter.

Nothing here reads a device value back to the host in the usual case: producer counts stay a
tensor on the bucket's device and the average divides by them there (:func:`average_by_counts`),
as torch DDP never waits for its collectives in backward. Only a *partial* pass (a parameter that
requires a gradient produced none on this rank) needs the counts on the host, to tell "another
rank produced it" from "nobody did, keep ``.grad`` as it was"; the engine reads those buckets'
counts together, once (:func:`read_host`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

__all__ = ["Bucket", "BucketStage", "build_buckets"]


class Bucket:
    """A group of parameters whose gradients travel together.

    Attributes an algorithm reads: ``index`` (launch order, identical on every rank), ``params``,
    ``numel`` (gradient elements, indicators excluded), ``buffer`` (gradients then indicators),
    ``grads`` (``buffer[:numel]``), ``indicators`` (``buffer[numel:]``), ``offsets``/``sizes``
    (per-parameter slice of ``grads``), ``all_ready`` (every parameter produced a gradient on
    this rank in this pass). An algorithm that learns, in its own collective, how many ranks had a
    NaN/inf in this bucket stores that number in ``nonfinite_ranks``, a 0-dim float32 tensor on
    the bucket's device (``None``: not known, so the engine checks the synchronized gradient itself).

    Example:
        >>> p = torch.nn.Parameter(torch.zeros(3))
        >>> b = Bucket(0, [p])
        >>> b.numel, b.buffer.numel()
        (3, 4)
    """

    __slots__ = (
        "index",
        "params",
        "offsets",
        "sizes",
        "numel",
        "buffer",
        "grads",
        "indicators",
        "views",
        "ready",
        "n_ready",
        "expected",
        "launched",
        "stage",
        "stash",
        "all_ready",
        "nonfinite_ranks",
    )

    def __init__(self, index: int, params: Sequence[torch.Tensor], grad_views: bool = True) -> None:
        if not params:
            raise ValueError("a bucket needs at least one parameter, got none")
        dtypes = {p.dtype for p in params}
        devices = {p.device for p in params}
        if len(dtypes) != 1 or len(devices) != 1:
            raise ValueError(f"a bucket holds one dtype on one device, got {dtypes} on {devices}")
        self.index = index
        self.params = list(params)
        self.sizes = [p.numel() for p in self.params]
        self.offsets = []
        total = 0
        for n in self.sizes:
            self.offsets.append(total)
            total += n
        self.numel = total
        self.buffer = torch.zeros(total + len(self.params), dtype=params[0].dtype, device=params[0].device)
        self.grads = self.buffer[:total]
        self.indicators = self.buffer[total:]
        self.views = [self.grads[o : o + n].view_as(p) for o, n, p in zip(self.offsets, self.sizes, self.params)]
        for p, view in zip(self.params, self.views):
            if grad_views and p.grad is not None:
                view.copy_(p.grad)
                p.grad = view
        self.ready = [False] * len(self.params)
        self.n_ready = 0
        self.expected = len(self.params)
        self.launched = False
        self.stage: BucketStage | None = None  # the synchronization in flight (set by the engine)
        self.stash: dict[int, torch.Tensor] = {}
        self.all_ready = False
        self.nonfinite_ranks: torch.Tensor | None = None

    @property
    def nbytes(self) -> int:
        """Size of the gradient part in bytes."""
        return self.numel * self.grads.element_size()

    def reset_pass(self) -> None:
        """Forget the readiness of the previous backward pass."""
        self.ready = [False] * len(self.params)
        self.n_ready = 0
        self.expected = sum(1 for p in self.params if p.requires_grad)
        self.launched = False
        self.stage = None
        self.stash = {}
        self.all_ready = False
        self.nonfinite_ranks = None

    def adopt_grad(self, i: int) -> None:
        """Make ``params[i].grad`` the bucket view, copying a freshly allocated gradient in."""
        p, view = self.params[i], self.views[i]
        g = p.grad
        if g is not None and g.is_sparse:
            raise RuntimeError(
                f"parameter #{i} of bucket {self.index} has a sparse gradient; ding_dist.sync supports dense "
                "gradients only (use nn.Embedding(sparse=False))"
            )
        if g is not None and g.data_ptr() != view.data_ptr():
            view.copy_(g)
            p.grad = view

    def adopt_ready(self) -> None:
        """:meth:`adopt_grad` for every parameter that produced a gradient this pass, with one batched copy.

        Example:
            >>> p = torch.nn.Parameter(torch.zeros(2))
            >>> b = Bucket(0, [p])
            >>> p.grad, b.ready = torch.ones(2), [True]
            >>> b.adopt_ready()
            >>> p.grad.data_ptr() == b.grads.data_ptr(), b.grads.tolist()
            (True, [1.0, 1.0])
        """
        dsts, srcs = [], []
        for i, ok in enumerate(self.ready):
            if not ok:
                continue
            p, view = self.params[i], self.views[i]
            g = p.grad
            if g is None:
                continue
            if g.is_sparse:
                self.adopt_grad(i)  # raises, naming the parameter
            if g.data_ptr() != view.data_ptr():
                dsts.append(view)
                srcs.append(g)
                p.grad = view
        if dsts:
            torch._foreach_copy_(dsts, srcs)

    def prepare_launch(self) -> None:
        """Move this pass's gradients into the bucket (:meth:`adopt_ready`), zero the slices of parameters
        without a gradient this pass and write the indicators.

        A parameter whose ``.grad`` already is the bucket view (e.g. kept from an earlier backward
        pass of the same step) is stashed first so :meth:`finish` can restore it if no rank
        produces a new gradient for it.
        """
        self.adopt_ready()
        if self.n_ready == len(self.params):
            self.indicators.fill_(1)
            self.all_ready = True
            return
        for i, ok in enumerate(self.ready):
            if ok:
                continue
            p, view = self.params[i], self.views[i]
            if p.grad is not None and p.grad.data_ptr() == view.data_ptr():
                self.stash[i] = view.clone()
            view.zero_()
        self.indicators.copy_(torch.tensor(self.ready, dtype=self.buffer.dtype))
        self.all_ready = False

    @property
    def partial(self) -> bool:
        """True when a parameter that requires a gradient produced none on this rank in this pass."""
        return self.n_ready < self.expected

    def finish(self, counts: Sequence[float] | None = None) -> None:
        """Point every gradient that some rank produced at the bucket; restore the others.

        ``counts`` (host numbers) are only needed for a :attr:`partial` pass. Otherwise every
        parameter that requires a gradient produced one here, and the others are frozen on every
        rank (count 0 everywhere), so nothing has to be read back.
        """
        if self.all_ready:
            return
        if counts is None:
            if self.partial:
                raise RuntimeError(f"bucket {self.index}: a partial pass needs the producer counts on the host")
            counts = [1.0 if ok else 0.0 for ok in self.ready]
        for i, c in enumerate(counts):
            if c > 0:
                self.adopt_view(i)
            elif i in self.stash:
                self.views[i].copy_(self.stash[i])
        self.stash = {}

    def adopt_view(self, i: int) -> None:
        """Set ``params[i].grad`` to the bucket view (no copy)."""
        p, view = self.params[i], self.views[i]
        if p.grad is None or p.grad.data_ptr() != view.data_ptr():
            p.grad = view

    def segments(self, start: int, stop: int) -> tuple[list[int], list[int]]:
        """The parameters covering gradient elements ``[start, stop)`` and how many elements each covers.

        Elements past ``numel`` (padding) belong to index ``P`` (one past the last parameter).

        Example:
            >>> b = Bucket(0, [torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(2))])
            >>> b.segments(2, 8)
            ([0, 1, 2], [1, 2, 3])
        """
        ids, lengths = [], []
        for i, (o, n) in enumerate(zip(self.offsets + [self.numel], self.sizes + [stop])):
            lo, hi = max(start, o), min(stop, o + n)
            if hi > lo:
                ids.append(i)
                lengths.append(hi - lo)
        return ids, lengths


def _scale_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def average_by_counts(bucket: Bucket, counts: torch.Tensor | Sequence[float], scaled_by: int) -> None:
    """Turn a summed (and pre-scaled by ``1/scaled_by``) gradient into the producers' average.

    Each parameter's slice is multiplied by ``scaled_by / count`` (exactly 1 where every rank
    produced it; a slice with count 0 is all zeros and stays so). ``counts`` as a device tensor:
    computed on the device, nothing is read back; as host numbers: only slices that need it.
    """
    if isinstance(counts, torch.Tensor):
        exact = torch.float32 if counts.device.type == "mps" else torch.float64  # scaled_by / c rounded once
        scale = (scaled_by / counts.to(exact).clamp(min=1)).to(_scale_dtype(bucket.grads))
        torch._foreach_mul_(bucket.views, list(scale.unbind()))
        return
    for i, c in enumerate(counts):
        if 0 < c != scaled_by:
            o, n = bucket.offsets[i], bucket.sizes[i]
            bucket.grads[o : o + n].mul_(scaled_by / c)


def exact_integer_limit(dtype: torch.dtype) -> int:
    """The largest ``n`` such that every integer ``0..n`` is exact in floating ``dtype`` (``2 / eps``).

    Example:
        >>> exact_integer_limit(torch.bfloat16), exact_integer_limit(torch.float16)
        (256, 2048)
    """
    return int(2 / torch.finfo(dtype).eps)


_host_reads = 0


def host_reads() -> int:
    """How many device-to-host reads :func:`read_host` made so far in this process (for tests, profiling)."""
    return _host_reads


def read_host(tensors: Sequence[torch.Tensor]) -> list[list[float]]:
    """The values of ``tensors`` (as float32) as Python lists, with one device-to-host read per device.

    The sync package reads tensors in bulk only through here, so :func:`host_reads` counts them.

    Example:
        >>> read_host([torch.tensor(1.0), torch.tensor([2.0, 3.0])])
        [[1.0], [2.0, 3.0]]
    """
    global _host_reads
    out: list[list[float]] = [[] for _ in tensors]
    for indices, flat in _flat_per_device(tensors):
        values = flat.tolist()
        _host_reads += 1
        if not isinstance(values, list):  # a single 0-dim tensor
            values = [values]
        offset = 0
        for i in indices:
            n = tensors[i].numel()
            out[i] = values[offset : offset + n]
            offset += n
    return out


def _flat_per_device(tensors: Sequence[torch.Tensor]) -> list[tuple[list[int], torch.Tensor]]:
    """``tensors`` as one flat float32 tensor per device, with the indices of the tensors it holds."""
    if len(tensors) == 1:  # the usual step: one bucket's flag (no grouping, no concatenation)
        t = tensors[0]
        t = t if t.dim() <= 1 else t.reshape(-1)
        return [([0], t if t.dtype == torch.float32 else t.float())]
    groups: dict[torch.device, list[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault(t.device, []).append(i)
    return [(indices, torch.cat([tensors[i].reshape(-1).float() for i in indices])) for indices in groups.values()]


def counts_of(indicator_sums: torch.Tensor) -> list[float]:
    """Round summed indicator slots to exact integer counts (robust to low-precision transport)."""
    return [float(round(c)) for c in read_host([indicator_sums])[0]]


class BucketStage:
    """One stage of a bucket's synchronization, what an algorithm hook returns: ``wait()`` ends the stage.

    Not another communication handle: ``works`` are the stage's transfers (:class:`ding_dist.comm.CommHandle`
    or torch works); ``wait()`` blocks on them and then calls ``then()``, which returns either the
    per-parameter counts (number of ranks that produced each gradient, a float32 tensor on the
    bucket's device that nothing reads back: the bucket is final) or the bucket's next
    :class:`BucketStage` (e.g. the allreduce among node leaders after the reduce within the node). The engine
    waits on all buckets stage by stage in bucket order, so every rank issues its collectives in the same order.

    Example:
        >>> BucketStage([], lambda: [1.0]).wait()
        [1.0]
    """

    __slots__ = ("works", "then")

    def __init__(self, works: Iterable[Any], then: Callable[[], Any]) -> None:
        self.works = list(works)
        self.then = then

    def wait(self) -> Any:
        for w in self.works:
            w.wait()
        return self.then()

    def followed_by(self, fn: Callable[[Any], Any]) -> BucketStage:
        """A stage that runs ``fn(counts)`` once this one (all its stages) has finished."""

        def then() -> Any:
            result = self.then()
            if isinstance(result, BucketStage):
                return result.followed_by(fn)
            return fn(result)

        return BucketStage(self.works, then)


def wait_all(stages: Sequence[Any]) -> list[torch.Tensor]:
    """Drive several buckets' stages to completion stage by stage, in order; return their counts (device tensors)."""
    results: list[Any] = list(stages)
    while any(isinstance(r, BucketStage) for r in results):
        results = [r.wait() if isinstance(r, BucketStage) else r for r in results]
    return results


def check_bucket_size(bucket_size_mb: float) -> None:
    """Raise ``ValueError`` unless ``bucket_size_mb`` is a finite number > 0."""
    ok = isinstance(bucket_size_mb, (int, float)) and not isinstance(bucket_size_mb, bool)
    if not ok or not math.isfinite(bucket_size_mb) or bucket_size_mb <= 0:
        raise ValueError(f"bucket_size_mb must be a finite number > 0, got {bucket_size_mb!r}")


def build_buckets(params: Sequence[torch.Tensor], bucket_size_mb: float, grad_views: bool = True) -> list[Bucket]:
    """Group ``params`` in reverse order into buckets of about ``bucket_size_mb`` megabytes.

    Parameters of different dtype or device never share a bucket. A bucket is closed as soon as
    it reaches the cap, so one large parameter gets a bucket of its own. With ``grad_views``
    existing gradients move into the buckets and ``param.grad`` becomes a view of them.

    Example:
        >>> ps = [torch.nn.Parameter(torch.zeros(1000)) for _ in range(4)]
        >>> [len(b.params) for b in build_buckets(ps, bucket_size_mb=0.0075)]
        [2, 2]
    """
    check_bucket_size(bucket_size_mb)
    cap = bucket_size_mb * 1024 * 1024
    open_groups: dict[tuple[Any, Any], list[torch.Tensor]] = {}
    open_bytes: dict[tuple[Any, Any], int] = {}
    groups: list[list[torch.Tensor]] = []
    for p in reversed(list(params)):
        key = (p.device, p.dtype)
        group = open_groups.setdefault(key, [])
        group.append(p)
        open_bytes[key] = open_bytes.get(key, 0) + p.numel() * p.element_size()
        if open_bytes[key] >= cap:
            groups.append(group)
            del open_groups[key], open_bytes[key]
    groups.extend(g for g in open_groups.values() if g)
    return [Bucket(i, g, grad_views) for i, g in enumerate(groups)]
