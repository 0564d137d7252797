"""Collector envs in groups that step one after another (double-buffered sampling, ``env.sample_groups``).

:class:`GroupedVectorEnv` holds ``G`` vector envs (the groups) of ``num_envs / G`` envs each, in env order: group
``g`` holds envs ``g * n / G`` to ``(g + 1) * n / G - 1``. :meth:`~GroupedVectorEnv.step_async` /
:meth:`~GroupedVectorEnv.step_wait` start and finish one group's step: with the async manager its envs step in their
worker processes while this process computes the next group's actions (the collector's double-buffered loop, see
:class:`~ding_dist.worker.collector.Collector`). A group without ``step_async`` (a ``SyncVectorEnv``) steps inside
:meth:`~GroupedVectorEnv.step_wait`: same results, no overlap. :meth:`~GroupedVectorEnv.step` steps every group and
returns one vector env's results, so anything that does not know the groups sees a plain vector env.

Example::

    groups = [make_vec_env(cfg, 4, "async", training=True) for _ in range(2)]
    venv = GroupedVectorEnv(groups)                 # 8 envs: 0-3 in group 0, 4-7 in group 1
    obs, info = venv.reset(seed=list(range(8)))
    venv.step_async(0, actions[:4])                 # group 0 steps in its workers ...
    a1 = policy(obs[4:])                            # ... while this process computes group 1's actions
    obs0, reward0, terminated0, truncated0, info0 = venv.step_wait(0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import concatenate, create_empty_array, iterate

from ding_dist.envs.restarting import adopt_spaces, env_info

__all__ = ["GroupedVectorEnv", "sample_groups_error"]


def sample_groups_error(groups: Any, num_envs: int) -> str | None:
    """The one-line error of ``env.sample_groups=groups`` for a rank of ``num_envs`` collector envs; None when fine.

    Example::

        sample_groups_error(3, 8)  # "env.sample_groups=3 must divide the collector envs of each rank (8): ..."
        sample_groups_error(2, 8)  # None
    """
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        return f"env.sample_groups must be an int >= 1, got {groups!r:.80}"
    if num_envs % groups:
        return (
            f"env.sample_groups={groups} must divide the collector envs of each rank ({num_envs}): "
            f"choose a divisor of {num_envs} or change env.collector_env_num"
        )
    return None


class GroupedVectorEnv(gym.vector.VectorEnv):
    """The envs of ``groups`` (vector envs, in env order) as one vector env that can also step one group at a time.

    :attr:`group_slices` names each group's envs; ``step_async(g, actions)`` takes group ``g``'s actions only
    (a batch of its size) and ``step_wait(g)`` returns its results, a batch of its size, with its own info;
    :meth:`step_one` steps env ``i`` (a global index) alone in its group (a
    :class:`~ding_dist.envs.restarting.RestartingVectorEnv`'s restart path); :attr:`restarts` sums the groups'.

    Example::

        venv = GroupedVectorEnv([make_vec_env({"id": "CartPole-v1"}, 2) for _ in range(2)])
        venv.reset(seed=[0, 1, 2, 3])
        venv.step_async(1, np.array([0, 1]))
        obs, reward, terminated, truncated, info = venv.step_wait(1)   # envs 2 and 3
    """

    def __init__(self, groups: Sequence[gym.vector.VectorEnv]) -> None:
        if not groups:
            raise ValueError("GroupedVectorEnv needs at least one group")
        self.groups = list(groups)
        self.group_slices: list[slice] = []
        lo = 0
        for g in self.groups:
            self.group_slices.append(slice(lo, lo + g.num_envs))
            lo += g.num_envs
        adopt_spaces(self, self.groups[0], lo)
        self._pending: list[Any] = [None] * len(self.groups)

    @property
    def restarts(self) -> int:
        """Envs recreated after a crash so far, all groups together."""
        return sum(int(getattr(g, "restarts", 0)) for g in self.groups)

    # --- one group at a time --------------------------------------------------------------------------
    def step_async(self, g: int, actions: Any) -> None:  # type: ignore[override]
        """Start group ``g``'s step with its ``actions`` (a batch of the group's size)."""
        if self._pending[g] is not None:
            raise RuntimeError(f"group {g} already has a step in flight: call step_wait({g}) first")
        group = self.groups[g]
        if callable(getattr(group, "step_async", None)):
            group.step_async(actions)
            self._pending[g] = True
        else:  # a SyncVectorEnv: the step runs in step_wait
            self._pending[g] = (actions,)

    def step_wait(self, g: int) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:  # type: ignore[override]
        """Finish group ``g``'s step: its ``obs, reward, terminated, truncated, info`` (batches of its size)."""
        pending, self._pending[g] = self._pending[g], None
        if pending is None:
            raise RuntimeError(f"group {g} has no step in flight: call step_async({g}, actions) first")
        if pending is True:
            return self.groups[g].step_wait()
        return self.groups[g].step(pending[0])

    def step_one(self, i: int, action: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step env ``i`` (global index) alone with ``action`` (a batch of one) in its group's ``step_one``."""
        for g, sl in enumerate(self.group_slices):
            if sl.start <= i < sl.stop:
                return self.groups[g].step_one(i - sl.start, action)
        raise IndexError(f"env {i} out of range for {self.num_envs} envs")

    # --- the whole vector env -------------------------------------------------------------------------
    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if seed is None or isinstance(seed, int):
            seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
        results = []
        for g, sl in zip(self.groups, self.group_slices):
            part = seeds[sl]
            results.append(g.reset(seed=None if all(s is None for s in part) else part, options=options))
        return self._obs([r[0] for r in results]), self._infos([r[1] for r in results])

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        for g, sl in enumerate(self.group_slices):
            self.step_async(g, self._actions(actions, sl))
        results = [self.step_wait(g) for g in range(len(self.groups))]
        obs = self._obs([r[0] for r in results])
        reward = np.concatenate([np.asarray(r[1]) for r in results])
        terminated = np.concatenate([np.asarray(r[2]) for r in results]).astype(bool)
        truncated = np.concatenate([np.asarray(r[3]) for r in results]).astype(bool)
        return obs, reward, terminated, truncated, self._infos([r[4] for r in results])

    def _actions(self, actions: Any, sl: slice) -> Any:
        if isinstance(actions, np.ndarray):
            return actions[sl]
        space, n = self.single_action_space, sl.stop - sl.start
        items = list(iterate(self.action_space, actions))[sl]
        return concatenate(space, items, create_empty_array(space, n))

    def _obs(self, batches: list[Any]) -> Any:
        if all(isinstance(b, np.ndarray) for b in batches):
            return np.concatenate(batches)
        items = [o for g, b in zip(self.groups, batches) for o in iterate(g.observation_space, b)]
        space = self.single_observation_space
        return concatenate(space, items, create_empty_array(space, self.num_envs))

    def _infos(self, infos: list[dict]) -> dict:
        out: dict = {}
        for info, sl in zip(infos, self.group_slices):
            if not info:  # most steps: no info at all
                continue
            for j in range(sl.stop - sl.start):
                out = self._add_info(out, env_info(info, j), sl.start + j)
        return out

    def close_extras(self, **kwargs: Any) -> None:
        for g in self.groups:  # close_vec_env's timeout reaches every async group
            g.close(**kwargs)
