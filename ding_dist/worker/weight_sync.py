"""Versioned weights from learner rank 0 to the actors, sent asynchronously.

The message is one flat ``uint8`` CPU buffer: a header (version, train iteration, the learners' global
env-step count, a stop flag) and every floating tensor of the policy's networks as float32, in
``state_dict`` order (both sides build the same policy, so the order matches).

- :class:`WeightPublisher` (learner rank 0): :meth:`~WeightPublisher.publish` copies the weights into a
  staging buffer and returns at once; a thread sends the newest staged version to every actor. A version
  published while the previous one is still being sent replaces the one waiting, so the learner never
  waits and an actor may skip versions, never see them out of order.
- :class:`WeightSubscriber` (actor): a thread keeps a receive posted; :meth:`~WeightSubscriber.poll` swaps
  the newest complete version into the policy (versions only increase) and tells when the learners said stop.

Example::

    publisher = WeightPublisher(policy, actor_ranks=[1, 2], group=weights_group)   # learner rank 0
    publisher.publish(version=1, train_iter=policy.train_iter, env_steps=4096)
    subscriber = WeightSubscriber(policy, source=0, group=weights_group)          # each actor
    if subscriber.poll():
        print("now acting with version", subscriber.version)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import torch

from ding_dist.comm import irecv, isend
from ding_dist.worker.experience import ChunkLayout

__all__ = ["WeightPublisher", "WeightSubscriber", "weight_tensors"]

VERSION, TRAIN_ITER, ENV_STEPS, STOP = range(4)


def weight_tensors(policy: Any) -> list[torch.Tensor]:
    """The floating tensors (parameters and buffers) of the policy's networks, in a fixed order
    (:meth:`~ding_dist.policy.base.Policy.named_weights`).

    Example::

        sum(t.numel() for t in weight_tensors(policy))  # floats sent per version
    """
    return list(policy.named_weights().values())


def _layout(tensors: Sequence[torch.Tensor]) -> ChunkLayout:
    return ChunkLayout({"weights": ((sum(t.numel() for t in tensors),), torch.float32)})


class WeightPublisher:
    """Learner rank 0's side: stage the newest weights, a thread sends them to every live actor.

    Example::

        publisher = WeightPublisher(policy, [1, 2], group)
        publisher.publish(version=0, train_iter=0, env_steps=0)
        publisher.publish(version=1, train_iter=20, env_steps=256, stop=True)  # the last one
        publisher.join(timeout=10)
    """

    def __init__(self, policy: Any, actor_ranks: Sequence[int], group: Any) -> None:
        self._tensors = weight_tensors(policy)
        self.layout = _layout(self._tensors)
        self._staged, self._sending = self.layout.new_buffer(), self.layout.new_buffer()
        self._staged_views, self._sending_views = self.layout.views(self._staged), self.layout.views(self._sending)
        self.actors = list(actor_ranks)
        self.group = group
        self.lost: dict[int, str] = {}  # actor rank -> why sending to it failed
        self.sent_versions = 0  # messages sent to every live actor
        self._cv = threading.Condition()
        self._fresh = False
        self._thread = threading.Thread(target=self._send_loop, name="weight-publisher", daemon=True)
        self._thread.start()

    @torch.no_grad()
    def publish(self, version: int, train_iter: int, env_steps: int, stop: bool = False) -> None:
        """Stage these weights as ``version`` (replacing a staged one not sent yet) and return."""
        with self._cv:
            flat, offset = self._staged_views["weights"], 0
            for t in self._tensors:
                flat[offset : offset + t.numel()].copy_(t.detach().reshape(-1))
                offset += t.numel()
            self._staged_views["meta"][:4] = torch.tensor([version, train_iter, env_steps, int(stop)])
            self._fresh = True
            self._cv.notify_all()

    def _send_loop(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._fresh)
                self._staged, self._sending = self._sending, self._staged
                self._staged_views, self._sending_views = self._sending_views, self._staged_views
                self._fresh = False
            stop = bool(self._sending_views["meta"][STOP])
            targets = [a for a in self.actors if a not in self.lost]
            handles = []
            for actor in targets:
                try:
                    handles.append((actor, isend(self._sending, actor, self.group)))
                except BaseException as e:
                    self.lost[actor] = str(e)
            for actor, handle in handles:
                try:
                    handle.wait()
                except BaseException as e:  # that actor went away; the others still get their weights
                    self.lost[actor] = " ".join(str(e).split())[:300]
            with self._cv:
                self.sent_versions += 1
                self._cv.notify_all()
            if stop:
                return

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the thread to send the stop version; True when it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()


class WeightSubscriber:
    """An actor's side: a thread receives versions; :meth:`poll` loads the newest one into the policy.

    Example::

        subscriber = WeightSubscriber(policy, source=0, group=group)
        subscriber.wait_first(timeout=60)   # the learners' initial weights
        subscriber.poll()                   # later: True when a newer version was loaded
    """

    def __init__(self, policy: Any, source: int, group: Any) -> None:
        self._tensors = weight_tensors(policy)
        self.layout = _layout(self._tensors)
        self._recv, self._ready = self.layout.new_buffer(), self.layout.new_buffer()
        self.source, self.group = source, group
        self.version = -1  # the version acting now
        self.train_iter = 0
        self.env_steps = 0  # the learners' global env steps when this version was sent
        self.stop = threading.Event()  # set when the learners said stop (or went away)
        self.error: BaseException | None = None
        self.received = 0  # versions received (some may never be loaded: a newer one came first)
        self._ready_version = -1
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._receive_loop, name="weight-subscriber", daemon=True)
        self._thread.start()

    def _receive_loop(self) -> None:
        while True:
            try:
                irecv(self._recv, self.source, self.group).wait()
            except BaseException as e:  # the learner went away
                self.error = e
                self.stop.set()
                return
            meta = self.layout.views(self._recv)["meta"]
            version, stop = int(meta[VERSION]), bool(meta[STOP])
            with self._lock:
                self._recv, self._ready = self._ready, self._recv
                self._ready_version = version
                self.received += 1
            if stop:
                self.stop.set()
                return

    @torch.no_grad()
    def poll(self) -> bool:
        """Load the newest received version if it is newer than the one acting; True when it loaded one."""
        with self._lock:
            if self._ready_version <= self.version:
                return False
            views = self.layout.views(self._ready)
            flat, offset = views["weights"], 0
            for t in self._tensors:
                t.copy_(flat[offset : offset + t.numel()].view_as(t))
                offset += t.numel()
            meta = views["meta"].tolist()
        self.version, self.train_iter, self.env_steps = meta[VERSION], meta[TRAIN_ITER], meta[ENV_STEPS]
        return True

    def wait_first(self, timeout: float) -> float:
        """Wait for the first version and load it; returns the seconds waited."""
        start = time.perf_counter()
        while not self.poll():
            if self.error is not None:
                raise ConnectionError(f"receiving weights from learner rank {self.source} failed: {self.error}")
            if self.stop.is_set() and self._ready_version < 0:
                raise ConnectionError("the learners stopped before sending weights")
            if time.perf_counter() - start > timeout:
                raise TimeoutError(f"no weights from learner rank {self.source} within {timeout:g} s")
            time.sleep(0.005)
        return time.perf_counter() - start

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()
