"""DD-PPO's rollout preemption (``policy.collect.preempt``): the counter, the weighted PPO update, the loop.

On 2 real gloo ranks: a rank slowed per env step is preempted (fewer than T vector steps, at least
``min_share * T``) while the global counters stay identical on both ranks; the update over unequal rollouts
equals a 1-process update over their union; ``preempt_fraction=1.0`` (never preempts) is bitwise the run
without preemption.
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import pytest
import torch

from ding_dist.comm import get_rank
from ding_dist.entry import pipeline
from ding_dist.entry.loops.data_parallel import DataParallelLoop
from ding_dist.policy.ppo import PPOPolicy, minibatch_plan
from ding_dist.utils.plan import Plan
from ding_dist.worker import Collector
from ding_dist.worker.collector import RolloutPreemption
from tests.entry.test_pipeline import tiny_ppo

SLOW_MS = 20.0  # rank 1's extra cost per vector step (rank 0's step is well under 1 ms)


# ---- the counter, on a fake store ---------------------------------------------------------------------
class FakeStore:
    def __init__(self) -> None:
        self.values: dict[str, int] = {}
        self.reads = 0

    def add(self, key: str, n: int) -> int:
        self.reads += n == 0
        self.values[key] = self.values.get(key, 0) + n
        return self.values[key]

    def delete_key(self, key: str) -> bool:
        return self.values.pop(key, None) is not None


def _preemption(fraction: float, world: int, store: FakeStore) -> RolloutPreemption:
    pre = RolloutPreemption(fraction, 0.25, store=store)
    pre.world, pre.needed = world, fraction * world  # as on `world` ranks
    return pre


def test_preempted_after_min_share_once_enough_ranks_finished():
    store = FakeStore()
    pre = _preemption(0.5, 4, store)
    pre.begin()
    assert not any(pre.preempted(done, 16) for done in range(16))  # nobody finished yet
    store.add(pre.key, 1)  # one of 4 ranks finished: 1 < 0.5 * 4
    assert not pre.preempted(4, 16)
    store.add(pre.key, 1)
    assert [done for done in range(16) if pre.preempted(done, 16)] == [4, 8, 12]  # min share 4, then every 4
    reads = store.reads
    assert not pre.preempted(5, 16) and store.reads == reads  # between two checks: no store round trip
    old = pre.key
    pre.begin()  # the next rollout: a fresh counter, the old one deleted
    assert pre.key != old and old not in store.values and not pre.preempted(4, 16)


def test_default_fraction_on_two_ranks_waits_for_both():
    store = FakeStore()
    pre = _preemption(0.6, 2, store)
    pre.begin()
    pre.finished()  # 1 >= 0.6 * 2 is False: DD-PPO's rule
    assert not pre.preempted(4, 16)


@pytest.mark.parametrize("bad", [0.0, 1.5, -1])
def test_bad_fraction_is_an_error(bad):
    with pytest.raises(ValueError, match="in \\(0, 1\\]"):
        RolloutPreemption(bad, 0.25, store=FakeStore())


# ---- the minibatch plan ------------------------------------------------------------------------------
def _policy(batch_size: int, epochs: int = 2) -> PPOPolicy:
    cfg = PPOPolicy.default_config()
    cfg.learn.update(batch_size=batch_size, epoch_per_collect=epochs)
    torch.manual_seed(0)
    return PPOPolicy(cfg, gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))


def test_minibatch_plan():
    policy = _policy(batch_size=32)
    assert policy.minibatch_plan(100, None) == (3, 32, None)  # today's plan
    assert policy.minibatch_plan(100, [100]) == (3, 32, None)  # one rank's count: the same, bitwise
    two = Plan(ranks=2, batch=64)  # learn.batch_size 64 over 2 ranks: 32 each
    assert minibatch_plan(two, 100, [100, 100]) == (3, 32, None)  # equal counts: the same, bitwise
    # 2 minibatches everywhere; shares 46 and 19 of each global minibatch of 65
    assert minibatch_plan(two, 100, [100, 40]) == (2, 46, 65)
    assert minibatch_plan(two, 40, [100, 40]) == (2, 19, 65)
    assert minibatch_plan(two, 3, [300, 3])[:2] == (3, 1)  # a tiny rollout still has a sample per minibatch
    with pytest.raises(ValueError, match="3 rank sample counts for a plan over 2 ranks"):
        minibatch_plan(two, 3, [300, 3, 5])


# ---- 2 ranks ----------------------------------------------------------------------------------------
def _rollout(steps: int, seed: int, envs: int = 4) -> dict[str, np.ndarray]:
    """A synthetic CartPole-shaped rollout whose last step ends every episode (so the union's GAE is the
    concatenation of the parts' GAE: no bootstrap crosses from one part into the next)."""
    rng = np.random.default_rng(seed)
    terminated = rng.random((steps, envs)) < 0.1
    terminated[-1] = True
    return {
        "obs": rng.normal(size=(steps, envs, 4)).astype(np.float32),
        "action": rng.integers(0, 2, size=(steps, envs)),
        "reward": rng.normal(size=(steps, envs)).astype(np.float32),
        "next_obs": rng.normal(size=(steps, envs, 4)).astype(np.float32),
        "terminated": terminated,
        "truncated": (rng.random((steps, envs)) < 0.05) & ~terminated,
        "logp": np.log(rng.uniform(0.3, 0.7, size=(steps, envs))).astype(np.float32),
        "value": rng.normal(size=(steps, envs)).astype(np.float32),
        "last_obs": rng.normal(size=(envs, 4)).astype(np.float32),
    }


STEPS = (12, 30)  # rank 0's and rank 1's vector steps (4 envs each)


def _flat(policy: PPOPolicy) -> np.ndarray:
    return torch.cat([p.detach().flatten() for p in policy.model.parameters()]).numpy()


def _weighted_update_on_rank() -> np.ndarray:
    rank = get_rank()
    policy = _policy(batch_size=512)  # per rank; global 1024 > 168 samples: one minibatch of all of them
    rollout = _rollout(STEPS[rank], seed=rank)
    rollout["rank_samples"] = np.array([4 * s for s in STEPS])
    policy.learn(rollout)
    return _flat(policy)


class _Slow:
    """Wrap a vector env's ``step`` with ``SLOW_MS`` of sleep."""

    def __init__(self, step) -> None:
        self.step = step

    def __call__(self, action):
        time.sleep(SLOW_MS / 1000)
        return self.step(action)


def _pipeline_on_rank(exp_dirs) -> dict:
    """Three PPO runs with rank 1 slowed: preempted, never preempted (fraction 1.0), no preemption."""
    rank = get_rank()
    lengths: list[int] = []
    params: list[np.ndarray] = []
    init, collect, run = Collector.__init__, Collector.collect, DataParallelLoop.run

    def slow_init(self, venv, *args, **kwargs):
        init(self, venv, *args, **kwargs)
        if rank == 1:
            self.venv.step = _Slow(self.venv.step)

    def counting_collect(self, *args, **kwargs):
        out = collect(self, *args, **kwargs)
        lengths.append(len(out["reward"]))
        return out

    def keeping_run(self):
        result = run(self)
        params.append(torch.cat([p.detach().flatten() for p in self.policy.model.parameters()]).numpy())
        return result

    Collector.__init__, Collector.collect, DataParallelLoop.run = slow_init, counting_collect, keeping_run
    out: dict = {"rank": rank}
    for name, sets, exp_dir in zip(
        ("preempt", "never", "off"),
        (("preempt=True", "preempt_fraction=0.5"), ("preempt=True", "preempt_fraction=1.0"), ()),
        exp_dirs,
    ):
        lengths.clear()
        overrides = [f"policy.collect.{s}" for s in sets]
        result = pipeline.train(tiny_ppo(), seed=0, exp_dir=exp_dir, max_env_steps=768, overrides=overrides)
        out[name] = {"result": result, "lengths": list(lengths), "params": params[-1]}
    return out


def test_weighted_update_equals_one_process_on_the_union(run_ranks):
    r0, r1 = run_ranks(_weighted_update_on_rank, 2)
    np.testing.assert_array_equal(r0, r1)
    parts = [_rollout(s, seed=r) for r, s in enumerate(STEPS)]
    union = {k: np.concatenate([p[k] for p in parts]) for k in parts[0] if k != "last_obs"}
    union["last_obs"] = parts[1]["last_obs"]
    one = _policy(batch_size=1024)
    before = _flat(one)
    one.learn(union)
    assert np.abs(_flat(one) - before).max() > 1e-4  # the update moved the weights
    np.testing.assert_allclose(r0, _flat(one), rtol=0, atol=1e-6)


def test_slow_rank_is_preempted_and_counters_stay_global(run_ranks, tmp_path):
    dirs = [tmp_path / n for n in ("preempt", "never", "off")]
    r0, r1 = run_ranks(_pipeline_on_rank, 2, dirs)
    # tiny_ppo: 128 global env steps of 4 envs, 2 envs per rank: 32 vector steps per rank (as on 1 process); 0.25 of it
    full, least = 32, 8
    pre0, pre1 = r0["preempt"], r1["preempt"]
    assert pre0["lengths"] == [full] * len(pre0["lengths"])  # the fast rank always collects its whole rollout
    assert all(least <= n <= full for n in pre1["lengths"])
    assert sum(n < full for n in pre1["lengths"]) >= len(pre1["lengths"]) - 1  # preempted (the first may race)
    env_steps = 2 * (sum(pre0["lengths"]) + sum(pre1["lengths"]))
    for r in (r0, r1):
        assert r["preempt"]["result"]["env_steps"] == env_steps >= 768
    paths_and_times = ("wall_time_s", "segment_wall_time_s", "phases_s", "exp_dir", "checkpoint")
    same = lambda r: {k: v for k, v in r.items() if k not in paths_and_times}  # noqa: E731
    assert same(pre0["result"]) == same(pre1["result"])
    np.testing.assert_array_equal(pre0["params"], pre1["params"])  # the ranks still apply the same update
    # preempt_fraction=1.0 never preempts: bitwise the run without preemption
    for r in (r0, r1):
        assert r["never"]["lengths"] == r["off"]["lengths"] == [full] * 6
        assert same(r["never"]["result"]) == same(r["off"]["result"])
    np.testing.assert_array_equal(r0["never"]["params"], r0["off"]["params"])
    np.testing.assert_array_equal(r0["off"]["params"], r1["off"]["params"])


def test_a_stop_signal_delivered_again_is_one_stop_and_a_later_one_stops_at_once(monkeypatch):
    """Real signals to this process: the first starts a checkpointed stop, copies within SAME_STOP_S (the process
    group's and the launcher's forwarded one) are the same stop, a signal after that exits at once with its code.
    Before, the forwarded copy was taken for a second signal (SystemExit at once, no checkpoint of the step)."""
    import os
    import signal

    from ding_dist.entry.services import failures

    monkeypatch.setattr(failures, "SAME_STOP_S", 0.3)
    for sig, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGUSR1, 138)):
        with failures.Preemption(world=1) as preempted:
            assert not preempted.requested()
            os.kill(os.getpid(), sig)
            time.sleep(0.01)  # the handler runs between bytecodes
            assert preempted.requested() and preempted.signal_name == signal.Signals(sig).name
            os.kill(os.getpid(), signal.SIGTERM)  # the launcher's forwarded copy, a few ms later
            time.sleep(0.01)
            assert preempted.requested()
            time.sleep(0.35)
            with pytest.raises(SystemExit) as stopped:
                os.kill(os.getpid(), signal.SIGTERM)  # a second signal, well after the first
                time.sleep(0.01)
            assert stopped.value.code == code  # the code of the stop under way
