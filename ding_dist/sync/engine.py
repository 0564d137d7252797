"""The synchronization engine: bucketed, overlapped gradient averaging behind a module wrapper.

``distribute(model, optimizer)`` returns a :class:`DistributedModel` (behaves as the original
module) and the optimizer. Each parameter gets a post-accumulate-grad hook; when the last
gradient of a bucket is ready the bucket's collective starts at once (buckets are launched
strictly in index order, so every rank issues the same collectives in the same order), and a
callback queued on the autograd engine waits for all buckets at the end of ``backward()``. When
``loss.backward()`` returns, every ``param.grad`` holds the synchronized gradient. Nothing is read
back to the host in backward (counts and the non-finite verdict stay device tensors; see
``bucket`` and ``nonfinite``), and rank 0's optimizer state is broadcast at wrap time
(``optimizer_state``).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from ding_dist.comm import get_rank as comm_rank
from ding_dist.sync._primitives import MeteredLink
from ding_dist.sync.algorithms import Algorithm, DistributedAlgorithm, get_algorithm
from ding_dist.sync.bucket import Bucket, BucketStage, build_buckets, check_bucket_size, read_host, wait_all
from ding_dist.sync.nonfinite import NonfiniteGuard, check_nonfinite_options, nonfinite_flag, nonfinite_params
from ding_dist.sync.optimizer_state import broadcast_optimizer_state
from ding_dist.sync.parameters import allreduce_parameters, broadcast_coalesced, broadcast_parameters, check_same_model

__all__ = ["DistributedModel", "SyncEngine", "distribute"]

logger = logging.getLogger(__name__)

AlgorithmLike = str | DistributedAlgorithm | Algorithm


def _as_optimizer_list(optimizer: Any) -> list[Any]:
    if optimizer is None:
        return []
    if isinstance(optimizer, (list, tuple)):
        return list(optimizer)
    return [optimizer]


class SyncEngine:
    """Buckets, hooks and the backward-end callback for one module (used by :class:`DistributedModel`).

    Example:
        >>> engine = SyncEngine(nn.Linear(2, 2), [], "gradient_allreduce")  # doctest: +SKIP
    """

    def __init__(
        self,
        module: nn.Module,
        optimizers: list[Any],
        algorithm: AlgorithmLike,
        group: Any = None,
        bucket_size_mb: float = 25.0,
        delay_reduce: bool = False,
        broadcast_buffers: bool = True,
        options: dict[str, Any] | None = None,
        guard: NonfiniteGuard | None = None,
    ) -> None:
        self.module = module
        self.guard = guard
        self.optimizers = optimizers
        self.delay_reduce = bool(delay_reduce)
        self.broadcast_buffers = bool(broadcast_buffers)
        self.link = MeteredLink(group)
        self.algorithm, self.state = self._make_algorithm(algorithm, options or {})
        check_same_model(module, self.link, optimizers)
        broadcast_parameters(module, broadcast_buffers, self.link)
        broadcast_optimizer_state(optimizers, self.link)
        self.buckets: list[Bucket] = build_buckets(list(module.parameters()), bucket_size_mb)
        self._buffers = list(module.buffers()) if broadcast_buffers else []
        self._armed = False
        self._next = 0
        self.grad_weight = 1.0  # this rank's gradients count this many times in the average (gradient_weight)
        self._hook_handles: list[Any] = []
        self._step_handles: list[Any] = []
        self._bind_optimizers()  # validates the optimizers before any hook is attached
        if guard is not None:
            guard.bind_engine(optimizers)
        self._register_grad_hooks()

    # ---- algorithm -----------------------------------------------------------------------------
    def _make_algorithm(self, algorithm: AlgorithmLike, options: dict[str, Any]) -> tuple[Algorithm, Any]:
        algo = get_algorithm(algorithm)
        unknown = sorted(set(options) - set(algo.options))
        if unknown:
            valid = ", ".join(algo.options) or "none"
            raise ValueError(f"unknown option(s) {unknown} for algorithm {algo.name!r}; valid options: {valid}")
        return algo, algo.make_state(self.link, **options)

    def _bind_optimizers(self) -> None:
        for h in self._step_handles:
            h.remove()
        self._step_handles = []
        if self.algorithm.check_optimizers is not None:
            self.algorithm.check_optimizers(self.state, self.optimizers)
        if self.algorithm.step_hook is not None:
            step_hook, state = self.algorithm.step_hook, self.state

            def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
                step_hook(state, self.buckets)

            for opt in self.optimizers:
                self._step_handles.append(opt.register_step_post_hook(after_step))
        if self.algorithm.pre_step_hook is not None:
            pre_step_hook, pre_state = self.algorithm.pre_step_hook, self.state

            def before_step(optimizer: Any, args: Any, kwargs: Any) -> None:
                pre_step_hook(pre_state, self.buckets)

            for opt in self.optimizers:
                self._step_handles.append(opt.register_step_pre_hook(before_step))

    def _close_algorithm(self) -> None:
        if self.algorithm.close is not None:
            self.algorithm.close(self.state)

    def on_forward(self) -> None:
        """A training forward starts: the algorithm's ``forward_hook`` (weight-averaging algorithms)."""
        if self.algorithm.forward_hook is not None:
            self.algorithm.forward_hook(self.state, self.buckets)

    def switch_to(self, algorithm: AlgorithmLike, options: dict[str, Any]) -> None:
        """Average parameters across ranks and continue with ``algorithm``."""
        if self._armed:
            raise RuntimeError("switch_to() called during a backward pass; call it between steps")
        algo, state = self._make_algorithm(algorithm, options)
        self._close_algorithm()  # e.g. stop an asynchronous averaging thread before the final average
        allreduce_parameters(self.module, self.link)
        self.algorithm, self.state = algo, state
        self._bind_optimizers()

    # ---- hooks -----------------------------------------------------------------------------------
    def _register_grad_hooks(self) -> None:
        for b in self.buckets:
            for i, p in enumerate(b.params):
                frozen = not p.requires_grad
                if frozen:
                    p.requires_grad_(True)
                self._hook_handles.append(p.register_post_accumulate_grad_hook(self._make_hook(b, i, p)))
                if frozen:
                    p.requires_grad_(False)

    def _make_hook(self, bucket: Bucket, i: int, param: torch.Tensor) -> Any:
        def on_grad_ready(p: torch.Tensor) -> None:
            if p is param:  # a deep copy of the parameter may carry this hook along: ignore it there
                self._mark_ready(bucket, i)

        return on_grad_ready

    def remove_hooks(self) -> None:
        """Detach the engine from the module's parameters and optimizers (and stop the algorithm)."""
        self._close_algorithm()
        for h in self._hook_handles + self._step_handles:
            h.remove()
        self._hook_handles, self._step_handles = [], []
        if self.guard is not None:
            self.guard.remove_hooks()

    def _arm(self) -> None:
        self._armed = True
        if self.guard is not None:
            self.guard.new_pass()
        self._next = 0
        for b in self.buckets:
            b.reset_pass()
        torch.autograd.Variable._execution_engine.queue_callback(self._finalize)

    def _mark_ready(self, bucket: Bucket, i: int) -> None:
        # The algorithm leaves gradients local (weight averaging), for good or (``state.local_gradients``,
        # e.g. local_sgd / async past their gradient-allreduce warm-up) for now.
        if self.algorithm.hook is None or getattr(self.state, "local_gradients", False):
            if self.algorithm.backward_end_hook is not None and not self._armed:
                self._armed = True
                torch.autograd.Variable._execution_engine.queue_callback(self._end_local_backward)
            return
        if not self._armed:
            self._arm()
        if bucket.launched:
            raise RuntimeError(
                f"gradient of parameter #{i} in bucket {bucket.index} arrived after its bucket was sent "
                "(reentrant backward or a parameter used by two backward graphs at once?)"
            )
        if bucket.ready[i]:
            raise RuntimeError(f"gradient of parameter #{i} in bucket {bucket.index} marked ready twice")
        bucket.ready[i] = True  # the gradient moves into the bucket when the bucket is launched
        bucket.n_ready += 1
        if not self.delay_reduce and bucket.n_ready == bucket.expected:
            self._launch_in_order()

    def _launch_in_order(self) -> None:
        buckets = self.buckets
        while self._next < len(buckets) and buckets[self._next].n_ready >= buckets[self._next].expected:
            self._launch(buckets[self._next])
            self._next += 1

    def _launch(self, bucket: Bucket) -> None:
        if bucket.expected == 0:  # every parameter frozen on this pass (identically on all ranks)
            return
        bucket.prepare_launch()
        if self.grad_weight != 1.0:
            bucket.grads.mul_(self.grad_weight)
        bucket.stage = self.algorithm.hook(self.state, bucket)
        bucket.launched = True

    def _end_local_backward(self) -> None:
        try:
            self.algorithm.backward_end_hook(self.state, self.buckets)
        finally:
            self._armed = False

    def _finalize(self) -> None:
        try:
            while self._next < len(self.buckets):
                self._launch(self.buckets[self._next])
                self._next += 1
            launched = [b for b in self.buckets if b.launched]
            if len(launched) == 1 and not launched[0].partial:  # one bucket (a small network): no bookkeeping
                b = launched[0]
                result = b.stage.wait()
                while isinstance(result, BucketStage):
                    result = result.wait()
                b.finish(None)
                b.stage = None
            else:
                results = wait_all([b.stage for b in launched])
                partial = [c for b, c in zip(launched, results) if b.partial]
                host = iter(read_host(partial)) if partial else iter(())  # the only read-back, partial passes only
                for b in launched:
                    b.finish(next(host) if b.partial else None)
                    b.stage = None
            if self._buffers:
                broadcast_coalesced(self._buffers, self.link)
            if self.guard is not None and launched:
                self._check_finite(launched)
        finally:
            self._armed = False

    def _check_finite(self, launched: list[Bucket]) -> None:
        """Hand the guard this pass's verdict as device flags, one per bucket (see ``nonfinite``).

        Buckets whose algorithm counted the ranks with a NaN/inf in its own collective
        (``nonfinite_ranks``) cost nothing here; the others get one sum each. The guard reads the
        flags once, before the optimizer step, and only then calls back to name the parameters.
        """
        flags = [b.nonfinite_ranks if b.nonfinite_ranks is not None else nonfinite_flag(b.grads) for b in launched]
        on_skip, state, names = self.algorithm.on_skip, self.state, self.guard.names

        def judge(values: list[float]) -> tuple[list[str], int | None]:
            flagged = [b for b, v in zip(launched, values) if v > 0]
            suspects = flagged + [b for b, v in zip(launched, values) if v < 0]
            bad = nonfinite_params(suspects, names)
            if flagged and not bad:  # cannot happen with a SUM (NaN/inf propagate); stay consistent anyway
                bad = [f"<a parameter of bucket {b.index}>" for b in flagged]
            if bad and on_skip is not None:
                on_skip(state)
            return bad, (int(max(values)) if flagged else None)

        self.guard.defer(flags, judge, self.link.world_size, host=on_skip is not None)

    def reset(self) -> None:
        """Forget a backward pass that died half-way (e.g. an exception inside backward)."""
        self._armed = False
        for b in self.buckets:
            b.reset_pass()


class DistributedModel(nn.Module):
    """The module returned by :func:`distribute`: the original module plus gradient sync.

    ``forward``, attribute access, ``state_dict``/``load_state_dict`` (original keys, no
    ``module.`` prefix), ``parameters()``/``named_parameters()`` and ``buffers()`` behave as on
    the wrapped module; ``unwrap()`` returns it. ``copy.deepcopy`` gives a plain local copy of the
    wrapped module (handy for target networks).

    Example:
        >>> model, _ = distribute(nn.Linear(4, 2), None)
        >>> sorted(model.state_dict())
        ['bias', 'weight']
    """

    def __init__(
        self,
        module: nn.Module,
        engine: SyncEngine | None,
        algorithm: Algorithm,
        guard: NonfiniteGuard | None = None,
    ) -> None:
        super().__init__()
        self.module = module
        self._engine = engine
        self._algorithm = algorithm
        self._guard = guard

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        engine = self._engine
        if engine is not None and engine._armed:  # the previous backward died before its end callback
            logger.warning("ding_dist.sync: the previous backward pass did not finish; its sync state is reset")
            engine.reset()
        if engine is not None and torch.is_grad_enabled():
            engine.on_forward()
        return self.module(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            module = self.__dict__.get("_modules", {}).get("module")
            if module is None:
                raise
            return getattr(module, name)

    # Container protocol of the wrapped module (dunder lookups skip __getattr__).
    def __getitem__(self, key: Any) -> Any:
        return self.module[key]

    def __len__(self) -> int:
        return len(self.module)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.module)

    def __bool__(self) -> bool:
        return True

    def __deepcopy__(self, memo: dict[int, Any]) -> nn.Module:
        return copy.deepcopy(self.module, memo)

    def unwrap(self) -> nn.Module:
        """The original module (its parameters stay synchronized while this wrapper lives)."""
        return self.module

    # The original module's views, so keys and names carry no "module." prefix.
    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        return self.module.load_state_dict(state_dict, strict=strict, assign=assign)

    def named_parameters(self, *args: Any, **kwargs: Any) -> Iterator[tuple[str, nn.Parameter]]:
        return self.module.named_parameters(*args, **kwargs)

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]:
        return self.module.parameters(recurse)

    def named_buffers(self, *args: Any, **kwargs: Any) -> Iterator[tuple[str, torch.Tensor]]:
        return self.module.named_buffers(*args, **kwargs)

    def buffers(self, recurse: bool = True) -> Iterator[torch.Tensor]:
        return self.module.buffers(recurse)

    # ---- engine-facing API -------------------------------------------------------------------
    @property
    def algorithm(self) -> str:
        """Name of the current synchronization algorithm."""
        return self._algorithm.name

    @property
    def engine(self) -> SyncEngine | None:
        """The engine, or ``None`` on a world of one (no communication at all)."""
        return self._engine

    @property
    def buckets(self) -> list[Bucket]:
        """The communication buckets (empty on a world of one)."""
        return self._engine.buckets if self._engine is not None else []

    @property
    def nonfinite_skips(self) -> int:
        """Optimizer steps skipped so far because the synchronized gradient held a NaN/inf (0 if the
        check is off).

        Example:
            >>> model, _ = distribute(nn.Linear(4, 2), None)
            >>> model.nonfinite_skips
            0
        """
        if self._guard is None:
            return 0
        self._guard.read_counters()  # where the verdict stays on the device: one read, here
        return self._guard.skips

    @property
    def consecutive_nonfinite_skips(self) -> int:
        """Skipped steps in a row up to now (0 after a step with a finite gradient)."""
        if self._guard is None:
            return 0
        self._guard.read_counters()
        return self._guard.consecutive

    def comm_stats(self) -> dict[str, int]:
        """Counters since the last :meth:`reset_comm_stats`: ``bytes_sent`` (wire estimate),
        ``payload_bytes`` and ``collectives``.

        Example:
            >>> model, _ = distribute(nn.Linear(4, 2), None)
            >>> model.comm_stats()["bytes_sent"]
            0
        """
        if self._engine is None:
            return {"bytes_sent": 0, "payload_bytes": 0, "collectives": 0}
        link = self._engine.link
        return {
            "bytes_sent": link.bytes_sent,
            "payload_bytes": link.payload_bytes,
            "collectives": link.collectives,
        }

    def reset_comm_stats(self) -> None:
        """Zero the counters of :meth:`comm_stats`."""
        if self._engine is not None:
            self._engine.link.reset_counters()

    def switch_to(self, algorithm: AlgorithmLike, **options: Any) -> DistributedModel:
        """Change the algorithm between steps; parameters are averaged across ranks first.

        Example:
            >>> model, _ = distribute(nn.Linear(4, 2), None)
            >>> model.switch_to("bytegrad").algorithm
            'bytegrad'
        """
        if self._engine is None:
            algo = get_algorithm(algorithm)
            _check_options(algo, options)
            self._algorithm = algo
        else:
            self._engine.switch_to(algorithm, options)
            self._algorithm = self._engine.algorithm
        return self

    @contextlib.contextmanager
    def gradient_weight(self, weight: float) -> Iterator[DistributedModel]:
        """Within it, this rank's gradients count ``weight`` times in the average of gradient-averaging algorithms.

        For ranks whose batches differ in size (``n_r`` of ``B`` samples in all, e.g. a prioritized draw over the
        ranks' shards), ``weight = N * n_r / B`` turns the average of the ranks' mean losses' gradients into the
        gradient of the mean over all ``B`` samples: the update of one process on the whole batch. No effect in a
        world of one (its only rank's weight is 1) or with an algorithm that averages weights.

        Example::

            with model.gradient_weight(world * len(my_part) / global_batch):
                loss_on(my_part).backward()
        """
        weight = float(weight)
        if not (math.isfinite(weight) and weight >= 0.0):
            raise ValueError(f"gradient weight must be a finite number >= 0, got {weight!r}")
        engine = self._engine
        if engine is None:
            yield self
            return
        before, engine.grad_weight = engine.grad_weight, weight
        try:
            yield self
        finally:
            engine.grad_weight = before

    @property
    def averages_weights(self) -> bool:
        """True when the algorithm averages weights now and then, so ranks' weights may differ in between."""
        return self._algorithm.averages_weights

    def abort(self) -> DistributedModel:
        """Pause background communication (asynchronous averaging), e.g. around evaluation; a no-op for
        the other algorithms. Every rank calls it.

        Example:
            >>> model, _ = distribute(nn.Linear(4, 2), None)
            >>> model.abort().resume().algorithm
            'gradient_allreduce'
        """
        if self._engine is not None and self._algorithm.abort is not None:
            self._algorithm.abort(self._engine.state)
        return self

    def resume(self) -> DistributedModel:
        """Restart what :meth:`abort` paused (a no-op for the other algorithms)."""
        if self._engine is not None and self._algorithm.resume is not None:
            self._algorithm.resume(self._engine.state)
        return self

    def close(self) -> nn.Module:
        """Stop synchronizing (remove all hooks) and return the original module."""
        if self._engine is not None:
            self._engine.remove_hooks()
            self._engine = None
        if self._guard is not None:
            self._guard.remove_hooks()
        return self.module


def _check_optimizer_types(optimizers: list[Any]) -> None:
    for opt in optimizers:
        if not isinstance(opt, torch.optim.Optimizer):
            raise TypeError(
                f"optimizer must be a torch.optim.Optimizer, a list of them, or None; got {type(opt).__name__} "
                f"({opt!r:.80})"
            )


def _check_options(algo: Algorithm, options: dict[str, Any]) -> None:
    unknown = sorted(set(options) - set(algo.options))
    if unknown:
        valid = ", ".join(algo.options) or "none"
        raise ValueError(f"unknown option(s) {unknown} for algorithm {algo.name!r}; valid options: {valid}")


def distribute(
    model: nn.Module,
    optimizer: Any = None,
    algorithm: AlgorithmLike = "gradient_allreduce",
    *,
    broadcast_buffers: bool = True,
    delay_reduce: bool = False,
    bucket_size_mb: float = 25.0,
    group: Any = None,
    skip_nonfinite: bool = True,
    max_nonfinite_skips: int | None = 10,
    **options: Any,
) -> tuple[DistributedModel, Any]:
    """Wrap ``model`` so its gradients are averaged across the ranks of ``group`` (default: world).

    Rank 0's parameters (and buffers if ``broadcast_buffers``) and the optimizer state of
    ``optimizer`` (one, a list, or ``None``; tensors, scalars and param-group hyper-parameters) are
    broadcast first, after checking that every rank has the same parameter names, shapes and
    dtypes and the same optimizer types and group sizes. After each ``loss.backward()`` every
    ``param.grad`` holds the average over the ranks that produced it; backward never waits for
    the collectives on the host. ``delay_reduce=True`` sends everything at the end of backward
    instead of overlapping. ``options`` go to the algorithm (e.g. ``error_feedback=True`` for
    ``bytegrad``). On a world of one no gradient hook is installed. Returns the optimizer passed in.

    ``skip_nonfinite=True``: when the synchronized gradient holds a NaN/inf (on any rank), every rank
    drops it (``.grad = None``) in a pre-hook of ``optimizer.step()`` (the one host read of the step;
    on an accelerator with fused torch optimizers the flag goes to the optimizer's ``found_inf`` instead
    and nothing is read, see :mod:`ding_dist.sync.nonfinite`),
    so the step changes nothing, counts the skip in ``model.nonfinite_skips`` and, after
    ``max_nonfinite_skips`` skips in a row (0 or ``None``: never), raises
    :class:`~ding_dist.sync.nonfinite.NonFiniteGradientError` on every rank. Without an optimizer each
    backward pass is judged at its end. On a world of one the check runs in ``optimizer.step()`` of
    the optimizer(s) passed here.

    Example:
        >>> net = nn.Linear(4, 2)
        >>> opt = torch.optim.SGD(net.parameters(), lr=0.1)
        >>> model, opt = distribute(net, opt, algorithm="gradient_allreduce")
        >>> model(torch.zeros(1, 4)).shape
        torch.Size([1, 2])
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(model, DistributedModel):
        raise ValueError("model is already distributed; call model.switch_to(...) to change the algorithm")
    check_bucket_size(bucket_size_mb)
    check_nonfinite_options(skip_nonfinite, max_nonfinite_skips)
    for name, flag in (("broadcast_buffers", broadcast_buffers), ("delay_reduce", delay_reduce)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False, got {flag!r}")
    optimizers = _as_optimizer_list(optimizer)
    _check_optimizer_types(optimizers)
    algo = get_algorithm(algorithm)
    _check_options(algo, options)
    link = MeteredLink(group)
    guard = NonfiniteGuard(model, max_nonfinite_skips, log=link.rank == 0) if skip_nonfinite else None
    if link.world_size == 1:
        algo.make_state(link, **options)  # surfaces "not implemented" and bad option values
        if algo.check_optimizers is not None:
            algo.check_optimizers(None, optimizers)
        if guard is not None:
            guard.log = comm_rank() == 0
            guard.bind_local(optimizers)
        return DistributedModel(model, None, algo, guard), optimizer
    engine = SyncEngine(
        model,
        optimizers,
        algo,
        group=group,
        bucket_size_mb=bucket_size_mb,
        delay_reduce=delay_reduce,
        broadcast_buffers=broadcast_buffers,
        options=options,
        guard=guard,
    )
    return DistributedModel(model, engine, algo, guard), optimizer
