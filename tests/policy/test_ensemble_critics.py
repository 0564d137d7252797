"""Twin critics as one batched network: the same numbers as two separate MLPs (up to float rounding), member views
sharing its storage, and checkpoints of the former two-network layout loading into it (optimizer state too)."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ding_dist.policy.base import mlp, soft_update
from ding_dist.policy.discrete_sac import DiscreteSACPolicy, TwinQValues
from ding_dist.policy.networks import EnsembleLinear, EnsembleMLP, stack_member_state, stack_optimizer_state
from ding_dist.policy.sac import SACPolicy, TwinQCritic
from ding_dist.policy.td3 import TD3Policy

BOX_OBS, BOX_ACT = gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Box(-1.0, 1.0, (2,))


def test_ensemble_mlp_is_its_members_up_to_rounding_forward_and_backward():
    torch.manual_seed(0)
    members = [mlp([5, 16, 16, 3]), mlp([5, 16, 16, 3])]
    net = EnsembleMLP(copy.deepcopy(members))
    x = torch.randn(7, 5, requires_grad=True)
    out = net(x)
    assert out.shape == (2, 7, 3)
    expected = torch.stack([m(x) for m in members])
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(net(x, members=1), expected[:1], rtol=1e-6, atol=1e-6)  # the first member alone
    grads = torch.autograd.grad(out.square().sum(), [x, *net.parameters()])
    ref = torch.autograd.grad(expected.square().sum(), [x, *(p for m in members for p in m.parameters())])
    torch.testing.assert_close(grads[0], ref[0], rtol=1e-5, atol=1e-6)
    per_member = len(list(members[0].parameters()))
    for i, g in enumerate(grads[1:]):  # the stacked gradient is the two members' gradients, stacked
        torch.testing.assert_close(g, torch.stack([ref[1 + i], ref[1 + per_member + i]]), rtol=1e-5, atol=1e-6)


def test_twin_critic_starts_from_the_weights_two_separate_mlps_would_have():
    torch.manual_seed(3)
    q1, q2 = mlp([5, 8, 1]), mlp([5, 8, 1])  # the former layout, drawn in the same order
    torch.manual_seed(3)
    critic = TwinQCritic(3, 2, [8])
    for (name, p), a, b in zip(critic.q.named_parameters(), q1.parameters(), q2.parameters()):
        assert torch.equal(p, torch.stack([a.detach(), b.detach()])), name
    q = critic(torch.ones(4, 3), torch.zeros(4, 2))
    assert q.shape == (2, 4)
    x = torch.cat([torch.ones(4, 3), torch.zeros(4, 2)], -1)
    torch.testing.assert_close(q, torch.stack([q1(x).squeeze(-1), q2(x).squeeze(-1)]), rtol=1e-6, atol=1e-6)


def test_member_views_share_the_ensembles_storage():
    critic = TwinQCritic(3, 2, [8])
    with torch.no_grad():
        critic.q2[-1].bias.fill_(5.0)  # editing the view edits the ensemble
        for p in critic.q1.parameters():
            p.zero_()
    q = critic(torch.randn(6, 3), torch.randn(6, 2))
    assert torch.equal(q[0], torch.zeros(6))
    assert not torch.equal(q[1], torch.zeros(6))
    assert critic.q.member(1)[-1].bias.data_ptr() == critic.q[-1].bias[1].data_ptr()
    with pytest.raises(ValueError, match="one shape"):
        EnsembleLinear.stack([nn.Linear(2, 3), nn.Linear(2, 4)])


def test_soft_update_moves_every_parameter_and_copies_buffers():
    source, target = nn.BatchNorm1d(3), nn.BatchNorm1d(3)
    with torch.no_grad():
        source.weight.fill_(2.0)
        source.running_mean.fill_(7.0)
    soft_update(target, source, 0.25)
    assert torch.equal(target.weight, torch.full((3,), 1.25)) and torch.equal(target.running_mean, source.running_mean)


# --- checkpoints of the two-network layout --------------------------------------------------------------------------
class _TwoMLPs(nn.Module):
    """The former twin critic: two separate MLPs named q1 and q2."""

    def __init__(self, sizes: list[int]) -> None:
        super().__init__()
        self.q1, self.q2 = mlp(sizes), mlp(sizes)


def _old_layout_state(policy: SACPolicy | TD3Policy) -> dict:
    """The policy's state as the former layout saved it: critics as two MLPs, their Adam state per MLP parameter;
    made by training a two-MLP critic with Adam from the policy's own stacked weights."""
    state = copy.deepcopy(policy.state_dict())
    for name in ("critic", "critic_target"):
        stacked = state[name]
        state[name] = {f"q{m + 1}.{k[2:]}": v[m].clone() for k, v in stacked.items() for m in range(2)}
    old = _TwoMLPs([5, 8, 1])
    old.load_state_dict(state["critic"])
    lr = policy.critic_optimizer.param_groups[0]["lr"]
    opt = torch.optim.Adam(old.parameters(), lr=lr)
    for p in old.parameters():
        p.grad = torch.full_like(p, 0.1)
    opt.step()  # real Adam state in the two-network layout (its step moved the weights: the state takes them)
    state["critic"] = old.state_dict()
    state["critic_optimizer"] = opt.state_dict()
    return state


@pytest.mark.parametrize("cls", [SACPolicy, TD3Policy])
def test_a_checkpoint_of_two_separate_critics_loads_and_continues(cls):
    torch.manual_seed(0)
    cfg = cls.default_config()
    cfg.model.update(actor_hidden_sizes=[8], critic_hidden_sizes=[8])
    policy = cls(cfg, BOX_OBS, BOX_ACT)
    state = _old_layout_state(policy)
    assert any(k.startswith("q1.") for k in state["critic"])
    fresh = cls(cfg, BOX_OBS, BOX_ACT)
    fresh.load_state_dict(state)
    w = fresh.critic.q[0].weight
    assert torch.equal(w[0], state["critic"]["q1.0.weight"]) and torch.equal(w[1], state["critic"]["q2.0.weight"])
    adam = fresh.critic_optimizer.state[w]
    assert adam["exp_avg"].shape == w.shape and float(adam["step"]) == 1.0
    assert fresh.critic_optimizer.param_groups[0]["fused"] is True  # loading kept the fast path
    # the stacked state is what the converters give, and learning goes on from it
    again = stack_optimizer_state(state["critic_optimizer"], members=2)
    assert torch.equal(again["state"][0]["exp_avg"], adam["exp_avg"])
    rng = np.random.default_rng(0)
    sizes = {"obs": 3, "next_obs": 3, "action": 2}
    batch = {k: torch.as_tensor(rng.uniform(-1, 1, (8, n)).astype(np.float32)) for k, n in sizes.items()}
    batch.update(reward=torch.ones(8), discount=torch.full((8,), 0.99))
    stats = fresh.learn(batch)
    assert np.isfinite(float(stats["critic_loss"]))


def test_stack_member_state_leaves_other_keys_and_the_stacked_layout_alone():
    sd = {"q.0.weight": torch.zeros(2, 4, 3), "other.bias": torch.ones(1)}
    stack_member_state(sd, "", {"q1": 0, "q2": 1}, lambda rest: rest, "q")
    assert set(sd) == {"q.0.weight", "other.bias"}


def test_discrete_critic_old_layout_loads_and_image_critics_keep_theirs():
    torch.manual_seed(0)
    critic = TwinQValues(gym.spaces.Box(-1, 1, (4,)), 2, [8, 8])
    old = {}
    for m in range(2):  # the former member: Sequential(trunk [Linear, ReLU, Linear, ReLU], head Linear)
        net = critic.q.member(m)
        for j in (0, 2):
            old[f"q{m + 1}.0.{j}.weight"], old[f"q{m + 1}.0.{j}.bias"] = net[j].weight.clone(), net[j].bias.clone()
        old[f"q{m + 1}.1.weight"], old[f"q{m + 1}.1.bias"] = net[4].weight.clone(), net[4].bias.clone()
    fresh = TwinQValues(gym.spaces.Box(-1, 1, (4,)), 2, [8, 8])
    fresh.load_state_dict(old)
    x = torch.randn(5, 4)
    assert torch.equal(fresh(x), critic(x))
    image = TwinQValues(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), 3, [32])
    assert {k.split(".")[0] for k in image.state_dict()} == {"q1", "q2"}
    assert image(torch.zeros(2, 4, 84, 84, dtype=torch.uint8)).shape == (2, 2, 3)


def test_discrete_sac_critic_loss_is_both_critics_at_the_taken_actions():
    torch.manual_seed(0)
    cfg = DiscreteSACPolicy.default_config()
    cfg.model.update(actor_hidden_sizes=[8], critic_hidden_sizes=[8])
    cfg.learn.update(learning_starts=0)
    policy = DiscreteSACPolicy(cfg, gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(3))
    critic, target_critic, actor = (copy.deepcopy(m) for m in (policy.critic, policy.critic_target, policy.actor))
    b = {"obs": torch.randn(6, 4), "next_obs": torch.randn(6, 4), "action": torch.tensor([0, 1, 2, 0, 1, 2]),
         "reward": torch.randn(6), "discount": torch.full((6,), 0.99)}  # fmt: skip
    alpha = policy.alpha
    with torch.no_grad():
        q1n, q2n = target_critic.q1(b["next_obs"]), target_critic.q2(b["next_obs"])
        log_pi = F.log_softmax(actor(b["next_obs"]), -1)
        y = b["reward"] + b["discount"] * (log_pi.exp() * (torch.min(q1n, q2n) - alpha * log_pi)).sum(-1)
        q1 = critic.q1(b["obs"]).gather(1, b["action"].view(-1, 1)).squeeze(1)
        q2 = critic.q2(b["obs"]).gather(1, b["action"].view(-1, 1)).squeeze(1)
    stats = policy.learn(b)
    assert float(stats["critic_loss"]) == pytest.approx(float(F.mse_loss(q1, y) + F.mse_loss(q2, y)), rel=1e-5)
