"""R2D2: value rescaling, burn-in without gradient, the n-step rescaled target, the recurrent state of acting,
2 ranks vs 1 process (one launch); quality-marked: short runs in one process and with an actor and a learner,
and training to 475."""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import ding_dist as dd
from ding_dist.data.sequence_replay import SequenceReplayBuffer
from ding_dist.entry import pipeline
from ding_dist.policy.r2d2 import (
    R2D2Policy,
    RecurrentQNetwork,
    inverse_value_rescale,
    rescaled_n_step_target,
    value_rescale,
)

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "cartpole_r2d2_config.py"
OBS, ACT = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(2)
L, BATCH = 5, 4


def _policy(seed: int = 0, **learn) -> R2D2Policy:
    torch.manual_seed(seed)
    cfg = R2D2Policy.default_config()
    cfg.device = "cpu"
    cfg.model.update(hidden_sizes=[8], lstm_size=6)
    cfg.sequence.update(seq_len=L, burnin=2, overlap=2)
    cfg.nstep = 2
    cfg.learn.update(batch_size=BATCH, learning_rate=1e-2, target_update_freq=2, **learn)
    return R2D2Policy(cfg, OBS, ACT)


def _batch(seed: int = 0) -> dict[str, torch.Tensor]:
    """Sequences of 5 steps: two full (one with burn-in), one padded after a termination, one short."""
    g = torch.Generator().manual_seed(seed)
    valid = torch.tensor([5, 5, 3, 4])
    mask = torch.arange(L).unsqueeze(0) < valid.unsqueeze(1)
    terminated = torch.zeros(BATCH, L, dtype=torch.bool)
    terminated[2, 2] = True
    return {
        "obs": torch.randn(BATCH, L + 1, 3, generator=g),
        "action": torch.randint(0, 2, (BATCH, L), generator=g) * mask,
        "reward": torch.randn(BATCH, L, generator=g) * mask,
        "terminated": terminated,
        "mask": mask,
        "burnin": torch.tensor([2, 0, 0, 2]),
        "h": torch.randn(BATCH, 6, generator=g),
        "c": torch.randn(BATCH, 6, generator=g),
        "weight": torch.rand(BATCH, generator=g) + 0.5,
    }


def _flat(net: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in net.parameters()])


def _params(policy: R2D2Policy) -> torch.Tensor:
    return _flat(policy.model)


def test_value_rescaling_and_its_inverse_are_exact():
    x = torch.linspace(-1e4, 1e4, 20_001, dtype=torch.float64)
    torch.testing.assert_close(inverse_value_rescale(value_rescale(x)), x, rtol=1e-12, atol=1e-9)
    torch.testing.assert_close(value_rescale(inverse_value_rescale(x)), x, rtol=1e-12, atol=1e-9)
    three = torch.tensor([3.0, -3.0], dtype=torch.float64)
    torch.testing.assert_close(value_rescale(three), torch.tensor([1.003, -1.003], dtype=torch.float64))


def test_n_step_rescaled_target_matches_a_hand_computation():
    gamma, n, eps = 0.9, 3, 1e-3
    reward = torch.tensor([[1.0, 2.0], [0.5, -1.0], [2.0, 0.0], [-1.0, 3.0]], dtype=torch.float64)  # [L=4, B=2]
    boot = torch.tensor([[4.0, 1.0], [3.0, -2.0], [2.0, 5.0], [1.0, 6.0], [7.0, 8.0]], dtype=torch.float64)
    valid, ended = torch.tensor([4, 3]), torch.tensor([False, True])

    def h(x):
        return math.copysign(math.sqrt(abs(x) + 1) - 1, x) + eps * x

    def h_inv(x):
        return math.copysign(((math.sqrt(1 + 4 * eps * (abs(x) + 1 + eps)) - 1) / (2 * eps)) ** 2 - 1, x)

    want = torch.zeros(4, 2, dtype=torch.float64)
    for b in range(2):
        v = int(valid[b])
        for t in range(v):
            m = min(n, v - t)
            ret = sum(gamma**k * float(reward[t + k, b]) for k in range(m))
            bootstraps = not (t + m == v and bool(ended[b]))
            want[t, b] = h(ret + (gamma**m * h_inv(float(boot[t + m, b])) if bootstraps else 0.0))
    got = rescaled_n_step_target(reward, boot, valid, ended, gamma, n, eps)
    torch.testing.assert_close(got * (torch.arange(4).unsqueeze(1) < valid), want, rtol=1e-12, atol=1e-12)
    assert want[2, 1] == pytest.approx(h(0.0))  # sequence 1's last step terminated: its reward (0) only


def test_burn_in_steps_get_no_gradient():
    net = RecurrentQNetwork(3, 2, hidden_sizes=[8], lstm_size=6)
    obs = torch.randn(5, 2, 3, requires_grad=True)
    q, _ = net(obs, net.zero_state(2), burnin=2, burnin_mask=torch.tensor([True, False]))
    q[2:].sum().backward()
    assert (obs.grad[:2, 0] == 0).all() and (obs.grad[2:, 0] != 0).any()  # sequence 0: burned in
    assert (obs.grad[:2, 1] != 0).all()  # sequence 1 (an episode's start): learns through its first steps
    # in learn: what a burned-in sequence's first steps did, or a padded step's action, changes no update
    batch = _batch()
    before = _params(policy := _policy())
    policy.learn(batch)
    changed = dict(batch, action=batch["action"].clone())
    changed["action"][0, :2] ^= 1  # burn-in of sequence 0
    changed["action"][2, 4] ^= 1  # padding of sequence 2
    policy_b = _policy()
    policy_b.learn(changed)
    assert torch.equal(_params(policy), _params(policy_b)) and not torch.equal(_params(policy), before)
    changed["action"][1, 0] ^= 1  # a learned step (sequence 1 has no burn-in)
    policy_c = _policy()
    policy_c.learn(changed)
    assert not torch.equal(_params(policy), _params(policy_c))


def test_acting_carries_the_state_and_resets_it_at_episode_ends():
    policy = _policy()
    obs = np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32)
    _, first = policy.collect_action(obs, env_step=0)
    assert not first["h"].any() and first["h"].shape == (3, 6)  # fresh episodes: the zero state
    policy.collect_action(obs, env_step=0)  # a dry run (chunk_layout's) moves no state
    policy.reset_state(np.array([False, True, False]))
    _, second = policy.collect_action(obs, env_step=0)
    assert second["h"][0].any() and not second["h"][1].any() and second["c"][2].any()
    policy.reset_state(np.zeros(3, dtype=bool))
    _, third = policy.collect_action(obs, env_step=0)
    assert not np.array_equal(third["h"][0], second["h"][0]) and third["h"][1].any()
    greedy = policy.eval_action(obs)  # its own state: the collector's is untouched
    policy.reset_state(None, eval=True)
    assert np.array_equal(policy.eval_action(obs), greedy)


def _updates() -> tuple[np.ndarray, np.ndarray]:
    """Three learn calls on this rank's half of the global batch: parameters, per-sequence priorities [3, B/N]."""
    rank, world = dd.get_rank(), dd.get_world_size()
    rows = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
    policy = _policy(seed=rank)  # different initial draws: distribute() gives every rank rank 0's parameters
    priorities = [policy.learn({k: v[rows] for k, v in _batch(step).items()})["priority"] for step in range(3)]
    return _params(policy).numpy(), torch.stack(priorities).numpy()


def test_two_ranks_on_halves_of_the_batch_update_as_one_process(run_ranks):
    params, priorities = _updates()
    (p0, q0), (p1, q1) = run_ranks(_updates, 2)
    np.testing.assert_array_equal(p0, p1)  # same parameters on both ranks
    np.testing.assert_allclose(p0, params, rtol=1e-5, atol=1e-6 * np.abs(params).max())
    np.testing.assert_allclose(np.concatenate([q0, q1], axis=1), priorities, rtol=1e-5, atol=1e-6)


def _train_short(exp_dir: str) -> dict:
    """384 env steps of the CartPole config, updates from env step 256: one process, or 1 actor + 1 learner."""
    overrides = ["policy.learn.learning_starts=256", "policy.eval.eval_freq=0", "policy.learn.update_per_collect=1"]
    if dd.get_world_size() == 2:
        overrides += ["actor_learner.actors=1", "actor_learner.learners=1"]
    cfg = pipeline.load_config(str(CONFIG), overrides=overrides)
    result = pipeline.train(cfg, max_env_steps=384, exp_dir=f"{exp_dir}/world{dd.get_world_size()}")
    return {k: result.get(k) for k in ("env_steps", "train_iters", "world_size")}


@pytest.mark.quality  # 10-40 s: the pipelines' own tests cover the loops; this one runs them with R2D2
@pytest.mark.timeout(600)
def test_r2d2_trains_in_one_process_and_with_an_actor_and_a_learner(run_ranks, tmp_path):
    assert _train_short(str(tmp_path)) == {"env_steps": 384, "train_iters": 3, "world_size": 1}  # 3 collects
    learner, _actor = run_ranks(_train_short, 2, str(tmp_path))
    assert learner["env_steps"] == 384 and learner["world_size"] == 2 and learner["train_iters"] > 0


def test_sequence_replay_is_what_a_recurrent_policy_gets():
    cfg = pipeline.load_config(str(CONFIG))
    from ding_dist.entry.factories import make_replay_buffer

    buffer = make_replay_buffer(cfg, gym.spaces.Box(-1, 1, (4,)), ACT, num_envs=8, capacity=1000, seed=0)
    assert isinstance(buffer, SequenceReplayBuffer)
    assert (buffer.seq_len, buffer.burnin, buffer.overlap, buffer.state_shapes) == (20, 4, 10, {"h": (64,), "c": (64,)})


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["policy.sequence.seq_len=4", "policy.sequence.burnin=4"], "policy.sequence.seq_len=4 must be longer than"),
        (["policy.other.replay_buffer.type=uniform"], "a recurrent policy needs a sequence replay ('sequence')"),
    ],
    ids=["seq_len_not_longer_than_burnin", "non_recurrent_replay"],
)
def test_bad_sequence_config_is_one_line_and_exit_2_before_any_process(tmp_path, capsys, flags, message):
    from tests.entry.test_cli_args import _run

    argv = ["train", str(CONFIG), "--actors", "1", "--learners", "1", "--exp-dir", str(tmp_path / "run"), "--set"]
    code, err = _run([*argv, *flags], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()  # nothing started


@pytest.mark.quality
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", ["cartpole_r2d2_config.py", "cartpole_masked_r2d2_config.py"])
def test_r2d2_reaches_475_on_cartpole(tmp_path, name):
    result = pipeline.train(str(REPO / "configs" / name), seed=0, exp_dir=tmp_path / "run", max_env_steps=150_000)
    assert result["stopped_by"] == "stop_value" and result["best_eval_return"] >= 475


def test_double_q_switch_and_the_hard_target_copy_every_k_updates():
    batch = _batch(3)
    losses = {}
    for double in (True, False):
        policy = _policy(double=double)
        policy.cfg.learn.target_update_freq = 3
        with torch.no_grad():  # a target that disagrees with the online net: the two targets differ
            for p in policy.target_model.parameters():
                p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(7)))
        losses[double] = float(policy.learn(batch)["loss"])
        assert not torch.equal(_flat(policy.target_model), _params(policy))  # update 1 of 3: no copy
        policy.learn(batch)
        assert not torch.equal(_flat(policy.target_model), _params(policy))  # update 2 of 3: no copy
        policy.learn(batch)
        # update 3: the online net, copied
        torch.testing.assert_close(_flat(policy.target_model), _params(policy), rtol=0, atol=0)
    assert abs(losses[True] - losses[False]) > 1e-3  # online-net argmax vs the target's own max
