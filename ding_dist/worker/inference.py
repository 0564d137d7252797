"""Batched inference across actors (the SEED RL / Sample Factory layout): one inference rank acts for several.

Each actor's collector acts through a :class:`RemotePolicy`: ``collect_action(obs, env_step)`` sends a header
``(rows, env_step)`` and the observations to the inference rank and receives the weight version that acted, the
actions and the policy's extras back. The inference rank's :class:`InferenceServer` batches the requests that
have arrived (one receiving thread per actor: gloo's point-to-point receives cannot be polled), runs **one**
``collect_action`` over them and each actor's thread sends it its rows. With a GPU this turns many small forward passes
into one; on a CPU it saves no arithmetic and adds a round trip per step, so it is off unless asked for.
Transport: point-to-point tensors of fixed dtypes (no pickling); the layout of the actions and extras comes from one
probe call of the policy on each side. A recurrent policy (``recurrent = True``) is refused (its per-env state
would have to live on the server per actor).

The batch uses the largest ``env_step`` of its requests for exploration schedules (actors' counters are close).
In a run (``actor_learner.inference=1``) the server's ``poll`` loads the learners' newest weights between batches
(:mod:`~ding_dist.entry.loops.inference_loop`), and each actor labels a chunk with the oldest version that acted in it.

Example::

    if rank == 0:
        stats = InferenceServer(policy, actors=[1, 2], obs_space=space, max_rows=8).serve()
    else:
        remote = RemotePolicy(policy, server=0, obs_space=space)
        rollout = Collector(venv, remote, seeds).collect(64, env_step=0)
        remote.stop()
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from ding_dist.comm import recv, send

__all__ = ["InferenceServer", "RemotePolicy"]

logger = logging.getLogger(__name__)


def _wire(dtype: np.dtype) -> torch.dtype:
    """The torch dtype an array of ``dtype`` travels as (bool as uint8: gloo moves no bools)."""
    return torch.uint8 if dtype == np.bool_ else torch.from_numpy(np.empty(0, dtype)).dtype


def _layout(policy: Any, obs_space: gym.Space) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """``{"action": (row shape, dtype), extra: ...}`` of ``policy.collect_action`` (one probe on a sampled row)."""
    if getattr(policy, "recurrent", False):
        raise ValueError("batched inference does not serve recurrent policies (their state lives per env)")
    action, extras = policy.collect_action(np.stack([obs_space.sample()]), 0)
    parts = {"action": action, **extras}
    return {k: (np.asarray(v).shape[1:], np.asarray(v).dtype) for k, v in parts.items()}


def _to_wire(value: np.ndarray) -> torch.Tensor:
    value = np.ascontiguousarray(value)
    return torch.from_numpy(value.view(np.uint8) if value.dtype == np.bool_ else value)


def _from_wire(tensor: torch.Tensor, dtype: np.dtype) -> np.ndarray:
    out = tensor.numpy()
    return out.view(np.bool_) if dtype == np.bool_ else out


class RemotePolicy:
    """A policy whose ``collect_action`` runs on the inference rank ``server``; every other attribute is the local
    ``policy``'s (``to_env_action``, exploration settings, ...).

    Example::

        remote = RemotePolicy(policy, server=0, obs_space=venv.single_observation_space)
        collector = Collector(venv, remote, seeds)
        remote.stop()  # after the last rollout: the server stops serving this actor
    """

    def __init__(self, policy: Any, server: int, obs_space: gym.Space, group: Any = None) -> None:
        self.policy, self.server, self.group = policy, server, group
        self.layout = _layout(policy, obs_space)
        self.obs_dtype = np.dtype(obs_space.dtype)
        self._version = torch.zeros(1, dtype=torch.int64)
        self._oldest: int | None = None  # the oldest weight version that acted since take_oldest_version

    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The server's actions and extras for ``obs`` (one batch, this actor's rows)."""
        rows = len(obs)
        send(torch.tensor([rows, int(env_step)], dtype=torch.int64), self.server, self.group)
        send(_to_wire(np.asarray(obs, dtype=self.obs_dtype)), self.server, self.group)
        recv(self._version, self.server, self.group)
        version = int(self._version[0])  # one int per step, beside the observations' transfer
        self._oldest = version if self._oldest is None else min(self._oldest, version)
        out = {}
        for key, (shape, dtype) in self.layout.items():
            buf = torch.empty((rows, *shape), dtype=_wire(dtype))
            recv(buf, self.server, self.group)
            out[key] = _from_wire(buf, dtype)
        action = out.pop("action")
        return action, out

    def take_oldest_version(self) -> int | None:
        """The oldest weight version that acted since the last call (None: no step since), and start anew."""
        oldest, self._oldest = self._oldest, None
        return oldest

    def stop(self) -> None:
        """Tell the server this actor asks no more."""
        send(torch.tensor([0, 0], dtype=torch.int64), self.server, self.group)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)


class InferenceServer:
    """Serve ``actors`` (ranks, each acting through a :class:`RemotePolicy`) with ``policy``: one
    ``collect_action`` per batch; requests of up to ``max_rows`` observations.

    A thread per actor receives its requests and sends its replies; a batch holds every request that has arrived
    when the previous batch is done (at least one: an actor that waits for its learner never holds up the others).
    :meth:`serve` returns when every actor has called :meth:`RemotePolicy.stop` or is gone (a broken connection:
    it is named in the log and in ``stats["lost"]``). ``group`` is one group for every actor or a mapping actor
    rank -> its group (each actor's pair group in a run).

    Example::

        stats = InferenceServer(policy, [1, 2], venv.single_observation_space, max_rows=8).serve()
        stats["batches"], stats["rows"]
    """

    def __init__(self, policy: Any, actors: Sequence[int], obs_space: gym.Space, max_rows: int,
                 group: Any = None) -> None:  # fmt: skip
        if not actors:
            raise ValueError("InferenceServer needs at least one actor rank")
        self.policy, self.actors = policy, list(actors)
        self.groups = dict(group) if isinstance(group, Mapping) else {a: group for a in self.actors}
        self.layout = _layout(policy, obs_space)
        self.obs_dtype = np.dtype(obs_space.dtype)
        shape = tuple(obs_space.shape)
        self._obs = {a: torch.empty((max_rows, *shape), dtype=_wire(self.obs_dtype)) for a in self.actors}
        self._reply: dict[int, list[torch.Tensor]] = {}
        self._answered = {a: threading.Event() for a in self.actors}
        self.max_rows = max_rows

    def _serve_actor(self, actor: int, requests: queue.SimpleQueue) -> None:
        """One actor's thread: receive a request, hand it to the batcher, send the reply; until it stops."""
        group, header = self.groups[actor], torch.zeros(2, dtype=torch.int64)
        try:
            while True:
                recv(header, actor, group)
                rows, step = (int(x) for x in header)
                if rows == 0:  # this actor stopped
                    requests.put((actor, 0, 0, None))
                    return
                if rows > self.max_rows:
                    error = ValueError(f"actor {actor} sent {rows} observations; the server takes at most "
                                       f"{self.max_rows}")  # fmt: skip
                    requests.put((actor, -1, 0, error))
                    return
                recv(self._obs[actor][:rows], actor, group)
                self._answered[actor].clear()
                requests.put((actor, rows, step, None))
                self._answered[actor].wait()
                for tensor in self._reply.pop(actor):
                    send(tensor, actor, group)
        except RuntimeError as e:  # its connection broke: the actor is gone
            requests.put((actor, -1, 0, e))

    def serve(self, poll: Callable[[], int] | None = None) -> dict[str, Any]:
        """Serve until every actor stopped or is gone; ``{"batches", "requests", "rows", "lost"}``. ``poll`` runs
        before each batch and returns the weight version acting now (e.g. it loads the newest weights); without it
        the version sent back is 0."""
        stats: dict[str, Any] = {"batches": 0, "requests": 0, "rows": 0, "lost": []}
        requests: queue.SimpleQueue = queue.SimpleQueue()
        for a in self.actors:
            threading.Thread(target=self._serve_actor, args=(a, requests), name=f"inference-{a}", daemon=True).start()
        active = set(self.actors)
        while active:
            arrived = [requests.get()]  # waits for one; then takes whatever else has arrived
            while True:
                try:
                    arrived.append(requests.get_nowait())
                except queue.Empty:
                    break
            batch, env_step = [], 0
            for a, rows, step, error in arrived:
                if rows > 0:
                    batch.append((a, rows))
                    env_step = max(env_step, step)
                    continue
                active.discard(a)
                if isinstance(error, ValueError):
                    raise error
                if error is not None:
                    logger.error("inference: actor rank %d is gone (%s); serving the others", a, error)
                    stats["lost"].append(a)
            if not batch:
                continue
            version = torch.tensor([poll() if poll is not None else 0], dtype=torch.int64)
            obs = np.concatenate([_from_wire(self._obs[a][:rows], self.obs_dtype) for a, rows in batch])
            action, extras = self.policy.collect_action(obs, env_step)
            parts = {"action": action, **extras}
            lo = 0
            for a, rows in batch:
                self._reply[a] = [version] + [_to_wire(np.asarray(parts[k])[lo : lo + rows]) for k in self.layout]
                self._answered[a].set()
                lo += rows
            stats["batches"] += 1
            stats["requests"] += len(batch)
            stats["rows"] += lo
        return stats
