"""``async``: Bagua's asynchronous model average. A background thread averages the weights of all ranks
every ``sync_interval_ms`` while each rank trains at its own pace (ranks may run different numbers of
steps).

- **Warm-up.** The first ``warmup_steps`` optimizer steps (default 0) are synchronous
  ``gradient_allreduce`` (its hook: bitwise the same); every rank runs them. Afterwards gradients stay
  local and the thread starts (at the wrap, ``switch_to`` or ``resume`` when there is no warm-up).
- **A round** of the thread: under the weight lock, snapshot ``T`` (a flat copy of the parameters of the
  optimizer(s) passed to ``distribute``, one buffer per dtype); outside it, ``R = allreduce-sum(T)`` on a
  process group of its own, created with the state (gloo groups do not take concurrent collectives from
  two threads; the training thread's group is never touched); under the lock again
  ``w = R/n + (w - T)``: the average, plus what this rank's optimizer did meanwhile (Bagua's update).
  Then it sleeps ``sync_interval_ms`` (default 500; 0: back to back).
- **The weight lock.** The training thread holds it from the start of a forward with grad enabled to
  the end of its backward, and from the start to the end of ``optimizer.step()``, so gradients are
  computed on, and steps applied to, weights no round is writing. A forward without a backward keeps it
  until the next backward ends, the next step, or ``abort()``/``close()`` (never taken twice, so
  nothing deadlocks). Forwards under ``no_grad`` (collection, evaluation) do not lock: they may see a
  round half-written. Between the end of backward and the step a round may land, so the step applies
  the gradient of the pre-round weights to the averaged ones (as in Bagua).
- **Stopping.** Each round's message carries one extra element, 1 when this rank asked to stop
  (``model.abort()``, ``close()``, ``switch_to``, ``dist_finalize``, interpreter exit), packed in the
  same tensor as the weights. The thread exits after the first round whose sum is ``n``: every rank
  asked; until then a rank that asked keeps taking part in rounds (at once, without sleeping), so the
  others never wait on a missing peer. ``abort()`` blocks until that round, so it returns when every
  rank has called it. In the last round no rank trains, ``w == T`` and every rank sets the same ``R/n``:
  after ``abort()`` the ranks' weights are bitwise identical if no step ran after it on any rank.
  ``resume()`` restarts the thread (every rank calls it). No thread outlives ``abort()``,
  ``close()``/``switch_to``, ``dist_finalize()`` or the interpreter (``atexit``), and no collective is
  issued after them. A peer that died ends the thread with the collective timeout; the error is raised
  by the next forward/step or by ``abort()``.

Only parameters are averaged (not buffers, not the optimizer state); the non-finite gradient check
applies to the warm-up only. Every ``optimizer.step()`` counts towards ``warmup_steps``.

Example:
    >>> model, opt = distribute(net, opt, "async", sync_interval_ms=100, warmup_steps=50)  # doctest: +SKIP
    >>> model.abort()   # e.g. before evaluation; every rank calls it  # doctest: +SKIP
    >>> model.resume()  # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import logging
import math
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

import torch

from ding_dist.comm.init import on_finalize
from ding_dist.sync._primitives import MeteredLink, MeteredSubLink, dedicated_link
from ding_dist.sync.algorithms import Algorithm
from ding_dist.sync.algorithms.gradient_allreduce import AllreduceState, allreduce_hook
from ding_dist.sync.algorithms.local_sgd import check_steps
from ding_dist.sync.bucket import Bucket, BucketStage, exact_integer_limit

__all__ = ["THREAD_NAME", "AsyncState"]

logger = logging.getLogger(__name__)

THREAD_NAME = "ding_dist-async-average"
_YIELD_S = 0.01  # how long a training forward/step lets a waiting round take the weights first, at most


class _Flat:
    """The parameters of one (device, dtype): the snapshot ``T`` and the message (``T``, then ``R``),
    each with per-parameter views; ``extra`` trailing elements of the message hold the stop flag."""

    __slots__ = ("params", "numel", "snapshot", "snap_views", "message", "avg_views")

    def __init__(self, params: list[torch.Tensor], extra: int) -> None:
        self.params = params
        sizes = [p.numel() for p in params]
        self.numel = sum(sizes)
        like = params[0]
        self.snapshot = torch.empty(self.numel, dtype=like.dtype, device=like.device)
        self.message = torch.zeros(self.numel + extra, dtype=like.dtype, device=like.device)
        self.snap_views = [v.view_as(p) for v, p in zip(self.snapshot.split(sizes), params)]
        self.avg_views = [v.view_as(p) for v, p in zip(self.message[: self.numel].split(sizes), params)]


class AsyncState:
    """State of ``async``: options, step counter, weight lock, the thread and its dedicated link.

    Example:
        >>> state = make_state(MeteredLink(), warmup_steps=2)
        >>> state.local_gradients, state.running   # in the warm-up: gradient allreduce, no thread
        (False, False)
    """

    __slots__ = (
        "link",
        "thread_link",
        "allreduce",
        "interval_s",
        "warmup_steps",
        "steps",
        "params",
        "lock",
        "held",
        "wake",
        "stopping",
        "thread",
        "paused",
        "closed",
        "error",
        "rounds",
        "want",
        "__weakref__",
    )

    def __init__(
        self, link: MeteredLink, thread_link: MeteredSubLink | None, interval_ms: float, warmup_steps: int
    ) -> None:
        self.link = link
        self.thread_link = thread_link
        self.allreduce = AllreduceState(link)
        self.interval_s = interval_ms / 1000.0
        self.warmup_steps = warmup_steps
        self.steps = 0
        self.params: list[torch.Tensor] | None = None
        self.lock = threading.Lock()
        self.held = False  # the training thread holds ``lock``
        self.wake = threading.Event()
        self.stopping = False  # this rank asked the thread to stop (read under ``lock`` with the snapshot)
        self.thread: threading.Thread | None = None
        self.paused = False
        self.closed = False
        self.error: BaseException | None = None
        self.rounds = 0
        self.want = False  # a round waits for the weight lock (the training thread lets it go first)

    @property
    def local_gradients(self) -> bool:
        """True past the warm-up: the engine then leaves gradients local (no gradient collective)."""
        return self.steps >= self.warmup_steps

    @property
    def running(self) -> bool:
        """True while the averaging thread runs."""
        return self.thread is not None


_live: weakref.WeakSet[AsyncState] = weakref.WeakSet()


def _stop_all() -> None:
    """Stop every live averaging thread (before the process group goes, and at interpreter exit)."""
    for state in list(_live):
        try:
            close(state)
        except Exception as exc:  # noqa: BLE001 - shutting down: report, do not mask the caller's exit
            logger.warning("ding_dist.sync async: the averaging thread ended with an error: %s", exc)


on_finalize(_stop_all)
atexit.register(_stop_all)


def make_state(
    link: MeteredLink, sync_interval_ms: float = 500, warmup_steps: int = 0, peer_selection_mode: str = "all"
) -> AsyncState:
    """State for ``async``; creates the thread's own process group (collective, every rank, here).

    Example:
        >>> make_state(MeteredLink(), sync_interval_ms=100).interval_s
        0.1
    """
    ok = isinstance(sync_interval_ms, (int, float)) and not isinstance(sync_interval_ms, bool)
    if not ok or not math.isfinite(sync_interval_ms) or sync_interval_ms < 0:
        raise ValueError(f"sync_interval_ms must be a finite number >= 0, got {sync_interval_ms!r}")
    warmup_steps = check_steps("warmup_steps", warmup_steps, 0)
    if peer_selection_mode != "all":
        raise ValueError(f"peer_selection_mode must be 'all' (the only mode of Bagua's), got {peer_selection_mode!r}")
    thread_link = dedicated_link(link) if link.world_size > 1 else None
    return AsyncState(link, thread_link, float(sync_interval_ms), warmup_steps)


# ---- the averaging thread ------------------------------------------------------------------------
def _layout(params: Sequence[torch.Tensor], world: int) -> tuple[list[_Flat], list[torch.Tensor], torch.Tensor]:
    """Flat buffers per (device, dtype), the messages to allreduce and the stop flag: the flag is the last
    element of the first message whose dtype counts to ``world`` exactly, else a float32 message of its own."""
    groups: dict[tuple[Any, Any], list[torch.Tensor]] = {}
    for p in params:
        groups.setdefault((p.device, p.dtype), []).append(p.detach())
    keys = list(groups)
    host = next((k for k in keys if k[1].is_floating_point and exact_integer_limit(k[1]) >= world), None)
    flats = [_Flat(groups[k], 1 if k == host else 0) for k in keys]
    messages = [f.message for f in flats]
    if host is None:
        messages.append(torch.zeros(1, device=keys[0][0]))
        return flats, messages, messages[-1]
    return flats, messages, flats[keys.index(host)].message[-1:]


def _round(
    state: AsyncState, flats: list[_Flat], messages: list[torch.Tensor], flag: torch.Tensor
) -> tuple[bool, bool]:
    """One averaging round; returns (every rank asked to stop, this rank asked)."""
    link = state.thread_link
    state.want = True
    with state.lock:
        state.want = False
        state.wake.clear()
        stopping = state.stopping
        for f in flats:
            torch._foreach_copy_(f.snap_views, f.params)
    for f in flats:
        f.message[: f.numel].copy_(f.snapshot)
    flag.fill_(1.0 if stopping else 0.0)
    works = [link.allreduce(m) for m in messages]
    for w in works:
        w.wait()
    everyone = round(flag.item()) >= link.world_size
    with state.lock:
        for f in flats:
            f.message[: f.numel].div_(link.world_size)  # R / n
            merged = torch._foreach_sub(f.params, f.snap_views)  # progress made since the snapshot ...
            torch._foreach_add_(merged, f.avg_views)  # ... kept on top of the average
            torch._foreach_copy_(f.params, merged)
    state.rounds += 1
    return everyone, stopping


def _loop(state: AsyncState, flats: list[_Flat], messages: list[torch.Tensor], flag: torch.Tensor) -> None:
    try:
        with torch.no_grad():
            while True:
                everyone, stopping = _round(state, flats, messages, flag)
                if everyone:
                    return
                if not stopping:  # a rank that asked goes on at once: its peers' rounds need it
                    state.wake.wait(state.interval_s)
    except BaseException as exc:  # noqa: BLE001 - handed to the training thread
        state.error = exc


def _start(state: AsyncState) -> None:
    """Start the thread if averaging is due: past the warm-up, not aborted or closed, not running."""
    if (
        state.thread_link is None
        or state.params is None
        or state.thread is not None
        or state.paused
        or state.closed
        or not state.local_gradients
    ):
        return
    flats, messages, flag = _layout(state.params, state.thread_link.world_size)
    state.stopping = False
    state.thread = threading.Thread(target=_loop, args=(state, flats, messages, flag), name=THREAD_NAME, daemon=True)
    _live.add(state)
    state.thread.start()
    logger.debug("ding_dist.sync async: averaging thread started after %d steps", state.steps)


def _hold(state: AsyncState) -> None:
    if state.thread is None or state.held:
        return
    deadline = time.monotonic() + _YIELD_S
    while state.want and time.monotonic() < deadline:  # a round is waiting: it goes first (no starvation)
        time.sleep(0)
    state.lock.acquire()
    state.held = True


def _release(state: AsyncState) -> None:
    if state.held:
        state.held = False
        state.lock.release()


def _raise_if_failed(state: AsyncState) -> None:
    error = state.error
    if error is None:
        return
    state.error = None
    if state.thread is not None:
        state.thread.join()
        state.thread = None
    raise RuntimeError(f"ding_dist.sync async: the background weight averaging failed: {error}") from error


def _stop(state: AsyncState) -> None:
    """Ask the thread to stop and wait until it has (the round in which every rank asked)."""
    _release(state)
    thread = state.thread
    if thread is not None:
        with state.lock:
            state.stopping = True
        state.wake.set()
        thread.join()
        state.thread = None
        state.stopping = False
        logger.debug("ding_dist.sync async: averaging thread stopped after %d rounds", state.rounds)
    _raise_if_failed(state)


# ---- the algorithm's hooks -----------------------------------------------------------------------
def async_hook(state: AsyncState, bucket: Bucket) -> BucketStage:
    """Warm-up: ``gradient_allreduce``'s hook (the engine stops calling it once gradients are local)."""
    return allreduce_hook(state.allreduce, bucket)


def check_optimizers(state: AsyncState | None, optimizers: list[Any]) -> None:
    """Take the parameters to average from the optimizer(s) (at least one); start if there is no warm-up."""
    if not optimizers:
        raise ValueError("async averages the parameters the optimizer(s) update: pass them to distribute")
    if state is None:
        return
    seen: set[int] = set()
    params = []
    for opt in optimizers:
        for group in opt.param_groups:
            for p in group["params"]:
                if id(p) not in seen:
                    seen.add(id(p))
                    params.append(p)
    state.params = params
    _start(state)


def forward_hook(state: AsyncState, buckets: list[Bucket]) -> None:
    """A training forward starts: hold the weights until its backward ends."""
    _raise_if_failed(state)
    _hold(state)


def backward_end_hook(state: AsyncState, buckets: list[Bucket]) -> None:
    """The backward pass ended: let the thread average."""
    _release(state)


def pre_step_hook(state: AsyncState, buckets: list[Bucket]) -> None:
    """Hold the weights during ``optimizer.step()`` (no round writes them half-way through)."""
    _raise_if_failed(state)
    _hold(state)


def step_hook(state: AsyncState, buckets: list[Bucket]) -> None:
    """Count the step, release the weights; the thread starts when the warm-up ends."""
    state.steps += 1
    _release(state)
    if state.steps == state.warmup_steps:
        _start(state)


def abort(state: AsyncState) -> None:
    """Stop averaging until :func:`resume`; returns once every rank has called it (weights then agree)."""
    state.paused = True
    _stop(state)


def resume(state: AsyncState) -> None:
    """Restart averaging after :func:`abort` (every rank calls it; a no-op during the warm-up)."""
    _raise_if_failed(state)
    state.paused = False
    _start(state)


def close(state: AsyncState) -> None:
    """Stop averaging for good (``model.close()``, ``switch_to``, ``dist_finalize``, interpreter exit)."""
    state.closed = True
    try:
        _stop(state)
    finally:
        _live.discard(state)


ALGORITHMS = (
    Algorithm(
        "async",
        make_state=make_state,
        hook=async_hook,
        forward_hook=forward_hook,
        backward_end_hook=backward_end_hook,
        pre_step_hook=pre_step_hook,
        step_hook=step_hook,
        check_optimizers=check_optimizers,
        close=close,
        abort=abort,
        resume=resume,
        averages_weights=True,
        options=("sync_interval_ms", "warmup_steps", "peer_selection_mode"),
        aliases=("async_model_average",),
    ),
)
