"""Skipping optimizer steps whose synchronized gradient holds NaN or inf, identically on every rank.

How the decision is reached without an extra collective: ``gradient_allreduce`` counts the ranks that
saw a NaN/inf inside its own allreduce (``bucket.nonfinite_ranks``, see that algorithm), which costs
nothing here. For the other algorithms, a NaN or inf in any rank's gradient survives the reduction
(``nan + x = nan``, ``inf + x = inf``, ``inf - inf = nan``; the 16-bit and 8-bit codecs keep a
non-finite value non-finite), so the *synchronized* gradient, which is the same on every rank, is
non-finite exactly when some rank's local one was: the engine sums each such bucket once (the exact
per-parameter check only runs when a sum is not finite). The verdict goes to a :class:`NonfiniteGuard`.

The verdict stays on the device until it is needed: backward leaves one flag tensor per bucket with
the guard (:meth:`NonfiniteGuard.defer`) and reads nothing back, so the host never waits for the
collectives in backward (as in torch DDP). The guard reads the flags of all backward passes of a step
at once, in a pre-hook of ``optimizer.step()`` (one device-to-host read per step). Without an
optimizer bound there is no step to wait for, and each backward pass is judged at its end.

Where that read would make the host wait for an accelerator and every bound optimizer is a fused torch
optimizer (``fused=True``, which takes a ``found_inf`` flag as ``torch.amp.GradScaler`` uses it), the
verdict never leaves the device: the pre-hook hands the optimizer a 0-dim flag, its kernel leaves
parameters, moments and step counts untouched when the flag is 1, and the skip counters are sums on the
device. They are read every ``_READ_EVERY`` steps and whenever ``model.nonfinite_skips`` is asked for (the
learner asks once per log line), so the warning and :class:`NonFiniteGradientError` come at that read, at
most ``_READ_EVERY`` steps late; the skipped steps changed nothing meanwhile. An algorithm that must act on
a skip (``on_skip``) keeps the host verdict.

On a non-finite step the guard sets every parameter's ``.grad`` to ``None``, so ``optimizer.step()``
leaves parameters and optimizer state untouched (torch optimizers, ``FusedOptimizer`` and
``QAdamOptimizer`` skip parameters without a gradient), counts the skip, logs a warning on rank 0,
and raises :class:`NonFiniteGradientError` on every rank when ``max_nonfinite_skips`` steps in a row
were skipped. On a world of one (no engine) the same check runs in a pre-hook of ``optimizer.step()``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import nn

from ding_dist.sync.bucket import read_host

__all__ = ["NonFiniteGradientError", "NonfiniteGuard", "check_nonfinite_options"]

logger = logging.getLogger(__name__)

_NAMES_SHOWN = 5
_MAX_DEFERRED = 64  # backward passes without an optimizer step before the verdict is read anyway
_READ_EVERY = 64  # optimizer steps between reads of the device-side skip counters


class NonFiniteGradientError(FloatingPointError):
    """Raised on every rank after ``max_nonfinite_skips`` consecutive steps with a NaN/inf gradient.

    Example:
        >>> raise NonFiniteGradientError("gradients were non-finite in 10 consecutive steps")
        Traceback (most recent call last):
        ...
        ding_dist.sync.nonfinite.NonFiniteGradientError: gradients were non-finite in 10 consecutive steps
    """


def check_nonfinite_options(skip_nonfinite: Any, max_nonfinite_skips: Any) -> None:
    """Raise ``TypeError``/``ValueError`` naming the value unless the two options are valid.

    Example:
        >>> check_nonfinite_options(True, 10)
        >>> check_nonfinite_options(True, -1)
        Traceback (most recent call last):
        ...
        ValueError: max_nonfinite_skips must be an int >= 0 or None (0 and None: never stop), got -1
    """
    if not isinstance(skip_nonfinite, bool):
        raise TypeError(f"skip_nonfinite must be True or False, got {skip_nonfinite!r}")
    k = max_nonfinite_skips
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
        raise ValueError(f"max_nonfinite_skips must be an int >= 0 or None (0 and None: never stop), got {k!r}")


def reads_wait_for_device(device: torch.device) -> bool:
    """True where reading a value of ``device`` back makes the host wait for the work queued on it.

    Example:
        >>> reads_wait_for_device(torch.device("cpu"))
        False
    """
    return device.type != "cpu"


def takes_found_inf(optimizer: Any) -> bool:
    """True for a torch optimizer whose step skips itself on a device flag ``optimizer.found_inf`` (the
    fused ones, as ``torch.amp.GradScaler`` drives them).

    Example:
        >>> params = list(nn.Linear(2, 1).parameters())
        >>> takes_found_inf(torch.optim.Adam(params, fused=True)), takes_found_inf(torch.optim.SGD(params))
        (True, False)
    """
    fused = getattr(optimizer, "_step_supports_amp_scaling", False)
    return isinstance(optimizer, torch.optim.Optimizer) and bool(fused)


def _float_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum as float32 (NaN/inf anywhere make it non-finite); float16 data cannot overflow it."""
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.sum(dtype=torch.float32)


def nonfinite_flag(t: torch.Tensor) -> torch.Tensor:
    """0-dim float32 on ``t``'s device: 0 when the float32 sum of ``t`` is finite, -1 when not (nothing is read).

    -1 means a NaN/inf is present or, very rarely, finite values of ~1e38 overflowed the sum; the
    guard confirms with an exact check.

    Example:
        >>> nonfinite_flag(torch.ones(3)), nonfinite_flag(torch.tensor([1.0, float("nan")]))
        (tensor(0.), tensor(-1.))
    """
    total = _float_sum(t)
    return torch.where(torch.isfinite(total), 0.0, -1.0).to(torch.float32)


_fused_check = getattr(torch, "_amp_foreach_non_finite_check_and_unscale_", None)


def nonfinite_found(grads: Sequence[torch.Tensor], scratch: dict[torch.device, Any]) -> torch.Tensor | None:
    """A 0-dim float32 flag on the device of ``grads`` (all on one device): 1.0 when one of them holds a NaN/inf,
    from the fused multi-tensor check behind ``torch.amp.GradScaler`` (one launch, multiplying by exactly 1.0,
    which changes no value); nothing is read. ``None`` where that kernel does not take them (e.g. complex or sparse
    gradients). ``scratch`` caches the flag and the 1.0 per device: the next call on that device overwrites the
    flag (in stream order, after what the work queued in between read of it).

    Example:
        >>> nonfinite_found([torch.ones(2), torch.tensor([1.0, float("inf")])], {})
        tensor(1.)
    """
    device = grads[0].device
    if _fused_check is None:
        return None
    bufs = scratch.get(device)
    if bufs is None:
        bufs = scratch[device] = (torch.zeros((), device=device), torch.ones((), device=device))
    found, one = bufs
    found.zero_()
    try:
        _fused_check(grads, found, one)
    except (RuntimeError, TypeError):  # a dtype/layout the fused kernel does not take
        return None
    return found


def grads_are_finite(grads: Sequence[torch.Tensor], scratch: dict[torch.device, Any]) -> bool:
    """True when every value of ``grads`` is finite (exact), with as few kernel launches as possible:
    :func:`nonfinite_found` per device, an exact per-tensor check where it does not apply. ``scratch``: its cache.

    Example:
        >>> grads_are_finite([torch.ones(2), torch.tensor([1.0, float("inf")])], {})
        False
    """
    device = grads[0].device
    groups = [grads] if all(g.device == device for g in grads) else _by_device(grads)
    for group in groups:
        found = nonfinite_found(group, scratch)
        if found is None:
            if not all(bool(torch.isfinite(g).all()) for g in group):
                return False
        elif found.item() != 0.0:
            return False
    return True


def _by_device(tensors: Sequence[torch.Tensor]) -> list[list[torch.Tensor]]:
    groups: dict[torch.device, list[torch.Tensor]] = {}
    for t in tensors:
        groups.setdefault(t.device, []).append(t)
    return list(groups.values())


def _describe(names: Sequence[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:_NAMES_SHOWN])
    more = len(names) - _NAMES_SHOWN
    return f"{shown} (+{more} more)" if more > 0 else shown


class NonfiniteGuard:
    """Counters and skip logic for one distributed model (see the module docstring).

    The engine hands each backward pass's device flags to :meth:`defer`; with optimizers bound
    (:meth:`bind_engine`) they are read and judged in a pre-hook of ``optimizer.step()``, all passes
    of the step together, so a step with a non-finite pass (gradient accumulation) is skipped whole.
    ``after_backward(bad)`` acts on a verdict already on the host (``bad``: names of the parameters
    whose synchronized gradient is non-finite, empty when all are finite); :meth:`bind_local`
    installs the world-of-one check in ``optimizer.step()``. With :attr:`on_device` the verdict stays
    on the device (module docstring); :meth:`read_counters` brings the counts to the host.

    Example:
        >>> net = nn.Linear(2, 1)
        >>> guard = NonfiniteGuard(net, max_skips=3, log=False)
        >>> net.weight.grad = torch.full((1, 2), float("nan"))
        >>> guard.after_backward(["weight"])
        >>> guard.skips, net.weight.grad is None
        (1, True)
    """

    __slots__ = (
        "names",
        "max_skips",
        "log",
        "skips",
        "consecutive",
        "pending",
        "first_bad",
        "sticky",
        "on_device",
        "_handles",
        "_scratch",
        "_deferred",
        "_pass_flag",
        "_step_flag",
        "_counters",
        "_unread",
        "_limit_hit",
        "_armed",
    )

    def __init__(self, module: nn.Module, max_skips: int | None, log: bool) -> None:
        self.names: dict[torch.Tensor, str] = {p: n for n, p in module.named_parameters()}
        self.max_skips = max_skips or None
        self.log = log
        self.skips = 0
        self.consecutive = 0
        self.pending = False  # the current step was found non-finite; cleared when an optimizer steps
        self.first_bad: list[str] = []
        self.sticky = False
        self.on_device = False  # the verdict stays on the device (set when optimizers are bound)
        self._handles: list[Any] = []
        self._scratch: dict[torch.device, Any] = {}
        self._deferred: list[tuple[list[torch.Tensor], Any, int]] = []
        self._pass_flag: torch.Tensor | None = None  # device mode: 1 when a pass since the last step was bad
        self._step_flag: torch.Tensor | None = None  # device mode: the verdict of the current step
        self._counters: torch.Tensor | None = None  # device mode: [skips since the read, run, longest run]
        self._unread = 0
        self._limit_hit = 0  # the longest run a read found at or over max_skips (raised at the next step)
        self._armed: set[int] = set()  # optimizers whose found_inf this guard set

    # ---- decisions -----------------------------------------------------------------------------------
    def after_backward(self, bad: Sequence[str], ranks: int | None = None, world: int | None = None) -> None:
        """Act on the verdict of one synchronized backward pass (the same on every rank); ``ranks``: how
        many of the ``world`` ranks had a NaN/inf, when the algorithm counted them."""
        if bad:
            self._drop_grads(self.names)
            if not self.pending:
                self._count(bad, f" (on {ranks} of {world} ranks)" if ranks else "")
        elif self.pending:
            self._drop_grads(self.names)  # a further backward into a step that is already skipped
        else:
            self.consecutive = 0
        self.pending = self.sticky and (self.pending or bool(bad))

    def _count(self, bad: Sequence[str], where: str = "") -> None:
        self.pending = True
        self.skips += 1
        self.consecutive += 1
        if self.consecutive == 1:
            self.first_bad = list(bad)
        if self.log:
            limit = f" of at most {self.max_skips}" if self.max_skips else ""
            logger.warning(
                "ding_dist.sync: non-finite (NaN/inf) gradient in %s%s; skipping this optimizer step on every "
                "rank (%d in a row%s, %d skipped in all)",
                _describe(list(bad)),
                where,
                self.consecutive,
                limit,
                self.skips,
            )
        if self.max_skips and self.consecutive >= self.max_skips:
            self._raise(self.consecutive, self.first_bad)

    def _raise(self, run: int, names: Sequence[str]) -> None:
        raise NonFiniteGradientError(
            f"gradients were non-finite (NaN or inf) in {run} consecutive optimizer steps "
            f"(max_nonfinite_skips={self.max_skips}; {self.skips} steps skipped in all); first non-finite "
            f"parameter(s) of this run: {_describe(names) if names else '(not recorded)'}. Check the loss and the "
            "inputs for NaN/inf or lower the learning rate (max_nonfinite_skips=None skips without stopping)"
        )

    @staticmethod
    def _drop_grads(params: Iterable[torch.Tensor]) -> None:
        for p in params:
            p.grad = None

    def defer(self, flags: list[torch.Tensor], judge: Any, world: int, host: bool = False) -> None:
        """Keep one backward pass's verdict: ``flags`` (0-dim device tensors, one per bucket: ``k > 0``
        ranks saw a NaN/inf, ``-1`` the sum is not finite, ``0`` finite) and ``judge(values) ->
        (bad names, ranks)``, called with the flags' values only when one of them is not 0.

        Judged before the next step of a bound optimizer, or now when none is bound. In device mode the
        flags are folded into one device flag for the step, unless ``host`` (the algorithm acts on a skip).
        """
        if self.on_device and not host:
            bad = (torch.stack([f.reshape(()).to(torch.float32) for f in flags]) != 0).any().to(torch.float32)
            self._pass_flag = bad if self._pass_flag is None else torch.maximum(self._pass_flag, bad)
            return
        self._step_flag = None
        self.read_counters()  # the host counters must be current before the host judges
        self._deferred.append((flags, judge, world))
        if not self.sticky or len(self._deferred) > _MAX_DEFERRED:
            self.resolve()

    def new_pass(self) -> None:
        """A backward pass begins: the verdict of the last step no longer applies (device mode)."""
        self._step_flag = None

    def resolve(self) -> None:
        """Read the deferred flags of all passes (one host read per device) and act on the verdict."""
        if not self._deferred:
            return
        deferred, self._deferred = self._deferred, []
        if len(deferred) == 1 and len(deferred[0][0]) == 1:  # the usual step: one pass, one bucket
            host = read_host(deferred[0][0])
            if not host[0][0]:
                self.after_backward((), None, deferred[0][2])
                return
        else:
            host = read_host([f for flags, _, _ in deferred for f in flags])
        values = iter(host)
        bad: dict[str, None] = {}
        ranks: list[int] = []
        for flags, judge, _ in deferred:
            vals = [next(values)[0] for _ in flags]
            if any(vals):
                names, k = judge(vals)
                bad.update(dict.fromkeys(names))
                ranks += [] if k is None else [k]
        self.after_backward(list(bad), max(ranks) if bad and ranks else None, deferred[-1][2])

    # ---- the device-side verdict -----------------------------------------------------------------------
    def _count_on_device(self, found: torch.Tensor) -> None:
        """Add one step's device flag (1.0: skipped) to the device counters; read them when due."""
        c = self._counters
        if c is None:
            c = self._counters = torch.tensor([0.0, self.consecutive, self.consecutive], device=found.device)
        run = (c[1] + 1.0) * found
        c.copy_(torch.stack((c[0] + found, run, torch.maximum(c[2], run))))
        self._unread += 1
        if self._unread >= _READ_EVERY or self._limit_hit:
            self.read_counters()
            if self._limit_hit:
                run, self._limit_hit = self._limit_hit, 0
                self._raise(run, self._current_bad())

    def read_counters(self) -> None:
        """Bring the device-side skip counters to the host (one read); log new skips on rank 0."""
        c = self._counters
        if c is None or not self._unread:
            return
        new, run, longest = (int(v) for v in read_host([c])[0])
        c.copy_(torch.tensor([0.0, run, run]))
        self._unread = 0
        self.skips += new
        self.consecutive = run
        if new and self.log:
            logger.warning(
                "ding_dist.sync: %d optimizer step(s) skipped on every rank for a non-finite (NaN/inf) gradient "
                "since the last check (%d in a row now, %d skipped in all)",
                new,
                run,
                self.skips,
            )
        if self.max_skips and longest >= self.max_skips:
            self._limit_hit = longest

    def _current_bad(self) -> list[str]:
        return [self.names[p] for p in self.names if p.grad is not None and not torch.isfinite(p.grad).all()]

    def _arm(self, optimizer: Any, found: torch.Tensor) -> None:
        """Make ``optimizer``'s coming step skip itself where ``found`` is 1 (kept with a GradScaler's flag)."""
        theirs = getattr(optimizer, "found_inf", None)
        if theirs is not None and id(optimizer) not in self._armed:  # a GradScaler's: it removes it itself
            optimizer.found_inf = torch.maximum(theirs.to(found.device).reshape(()), found)
            return
        optimizer.found_inf = found
        self._armed.add(id(optimizer))

    def _disarm(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if id(optimizer) in self._armed:
            self._armed.discard(id(optimizer))
            optimizer.__dict__.pop("found_inf", None)

    def _device_mode(self, optimizers: Sequence[Any]) -> bool:
        devices = {p.device for p in self.names}
        return (
            bool(optimizers)
            and len(devices) == 1
            and reads_wait_for_device(next(iter(devices)))
            and all(takes_found_inf(o) for o in optimizers)
        )

    # ---- optimizer hooks -----------------------------------------------------------------------------
    def bind_engine(self, optimizers: Sequence[Any]) -> None:
        """Engine mode: the verdict is read before a step of any of ``optimizers``; that step ends a skip."""
        self.remove_hooks()
        self.sticky = bool(optimizers)
        self.on_device = self._device_mode(optimizers)
        for opt in optimizers:
            self._handles.append(opt.register_step_pre_hook(self._before_step))
            if self.on_device:
                self._handles.append(opt.register_step_post_hook(self._disarm))

    def _before_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.resolve()
        if self._pass_flag is not None:  # device mode: the passes since the last step decide this one
            self._step_flag, self._pass_flag = self._pass_flag, None
            self._count_on_device(self._step_flag)
        if self._step_flag is not None:  # every optimizer of the model skips the same step
            self._arm(optimizer, self._step_flag)
        self.pending = False  # the step about to run (with every .grad None if skipped) ends this step

    def bind_local(self, optimizers: Sequence[Any]) -> None:
        """World-of-one mode: check the gradients of the model's parameters in each ``optimizer.step()``."""
        self.remove_hooks()
        self.on_device = self._device_mode(optimizers)
        for opt in optimizers:
            mine = [p for group in opt.param_groups for p in group["params"] if p in self.names]
            self._handles.append(opt.register_step_pre_hook(self._local_check(mine)))
            if self.on_device:
                self._handles.append(opt.register_step_post_hook(self._disarm))

    def _local_check(self, params: list[torch.Tensor]) -> Any:
        def before_step(optimizer: Any, args: Any, kwargs: Any) -> None:
            grads = [p.grad for p in params if p.grad is not None]
            if not grads:
                return
            one_device = all(g.device == grads[0].device for g in grads)
            found = nonfinite_found(grads, self._scratch) if self.on_device and one_device else None
            if found is not None:
                self._count_on_device(found)
                self._arm(optimizer, found)
                return
            self.read_counters()
            if grads_are_finite(grads, self._scratch):
                self.consecutive = 0
                return
            bad = [self.names[p] for p in params if p.grad is not None and not torch.isfinite(p.grad).all()]
            self._drop_grads(params)
            self._count(bad)
            self.pending = False

        return before_step

    def remove_hooks(self) -> None:
        """Detach from the optimizers (the device counters are read first)."""
        self.read_counters()
        for h in self._handles:
            h.remove()
        self._handles = []


def nonfinite_params(buckets: Sequence[Any], names: dict[Any, str]) -> list[str]:
    """Names of the parameters of ``buckets`` whose current gradient is non-finite (exact).

    Only called when a bucket's flag says non-finite, so this per-parameter scan (and its host
    read) stays off the usual path.
    """
    params = [(b, p) for b in buckets for p in b.params if p.grad is not None]
    if not params:
        return []
    finite = read_host([torch.isfinite(p.grad).all() for _, p in params])  # one read per device
    return [
        names.get(p, f"<bucket {b.index} parameter of shape {tuple(p.shape)}>")
        for (b, p), (ok,) in zip(params, finite)
        if not ok
    ]
