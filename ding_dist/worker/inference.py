"""Batched inference across actors (the SEED RL / Sample Factory layout): one inference rank acts for several.

Each actor's collector acts through a :class:`RemotePolicy`: ``collect_action(obs, env_step)`` sends a header
``(rows, env_step)`` and the observations to the inference rank and receives the actions and the policy's extras
back. The inference rank's :class:`InferenceServer` gathers one request of every active actor into one batch, runs
**one** ``collect_action`` over it and sends each actor its rows. With a GPU this turns many small forward passes
into one; on a CPU it saves no arithmetic and adds a round trip per step, so it is off unless asked for.
Transport: point-to-point tensors of fixed dtypes (no pickling); the layout of the actions and extras comes from one
probe call of the policy on each side. A recurrent policy (``recurrent = True``) is refused (its per-env state
would have to live on the server per actor).

The batch uses the largest ``env_step`` of its requests for exploration schedules (actors' counters are close).

Example::

    if rank == 0:
        stats = InferenceServer(policy, actors=[1, 2], obs_space=space, max_rows=8).serve()
    else:
        remote = RemotePolicy(policy, server=0, obs_space=space)
        rollout = Collector(venv, remote, seeds).collect(64, env_step=0)
        remote.stop()
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from ding_dist.comm import irecv, isend, recv, send

__all__ = ["InferenceServer", "RemotePolicy"]


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

    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The server's actions and extras for ``obs`` (one batch, this actor's rows)."""
        rows = len(obs)
        send(torch.tensor([rows, int(env_step)], dtype=torch.int64), self.server, self.group)
        send(_to_wire(np.asarray(obs, dtype=self.obs_dtype)), self.server, self.group)
        out = {}
        for key, (shape, dtype) in self.layout.items():
            buf = torch.empty((rows, *shape), dtype=_wire(dtype))
            recv(buf, self.server, self.group)
            out[key] = _from_wire(buf, dtype)
        action = out.pop("action")
        return action, out

    def stop(self) -> None:
        """Tell the server this actor asks no more."""
        send(torch.tensor([0, 0], dtype=torch.int64), self.server, self.group)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)


class InferenceServer:
    """Serve ``actors`` (ranks, each acting through a :class:`RemotePolicy`) with ``policy``: one
    ``collect_action`` per batch; requests of up to ``max_rows`` observations.

    Batches are lockstep: each holds one request of every active actor (the slowest actor paces the others;
    gloo's point-to-point receives cannot be polled, so a batch of "whatever has arrived" would need a waiting
    thread per actor or another transport). :meth:`serve` returns when every actor has called
    :meth:`RemotePolicy.stop`.

    Example::

        stats = InferenceServer(policy, [1, 2], venv.single_observation_space, max_rows=8).serve()
        stats["batches"], stats["rows"]
    """

    def __init__(self, policy: Any, actors: Sequence[int], obs_space: gym.Space, max_rows: int,
                 group: Any = None) -> None:  # fmt: skip
        if not actors:
            raise ValueError("InferenceServer needs at least one actor rank")
        self.policy, self.actors, self.group = policy, list(actors), group
        self.layout = _layout(policy, obs_space)
        self.obs_dtype = np.dtype(obs_space.dtype)
        shape = tuple(obs_space.shape)
        self._obs = {a: torch.empty((max_rows, *shape), dtype=_wire(self.obs_dtype)) for a in self.actors}
        self._header = {a: torch.zeros(2, dtype=torch.int64) for a in self.actors}
        self.max_rows = max_rows

    def serve(self) -> dict[str, int]:
        """Serve until every actor stopped; ``{"batches", "requests", "rows"}`` served."""
        stats = {"batches": 0, "requests": 0, "rows": 0}
        posted = {a: irecv(self._header[a], a, self.group) for a in self.actors}
        while posted:
            ready = list(posted)  # lockstep: one request of every active actor per batch
            batch, env_step = [], 0
            for a in ready:
                posted.pop(a).wait()
                rows, step = (int(x) for x in self._header[a])
                if rows == 0:  # this actor stopped
                    continue
                if rows > self.max_rows:
                    raise ValueError(f"actor {a} sent {rows} observations; the server takes at most {self.max_rows}")
                recv(self._obs[a][:rows], a, self.group)
                batch.append((a, rows))
                env_step = max(env_step, step)
            if not batch:
                continue
            obs = np.concatenate([_from_wire(self._obs[a][:rows], self.obs_dtype) for a, rows in batch])
            action, extras = self.policy.collect_action(obs, env_step)
            parts = {"action": action, **extras}
            sends, lo = [], 0
            for a, rows in batch:
                for key in self.layout:
                    sends.append(isend(_to_wire(np.asarray(parts[key])[lo : lo + rows]), a, self.group))
                lo += rows
                posted[a] = irecv(self._header[a], a, self.group)
            for handle in sends:
                handle.wait()
            stats["batches"] += 1
            stats["requests"] += len(batch)
            stats["rows"] += lo
        return stats
