"""IMPALA: actor-critic learning from lagged actors with V-trace off-policy correction.

Actors act with older weights than the learner's (the behavior policy ``mu``); the learner corrects for the
lag with truncated importance weights, V-trace (Espeholt et al., 2018). For a rollout ``[T, N]`` with
``rho_t = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t))`` and ``c_t = lambda * min(c_bar, pi / mu)``:

    delta_t = rho_t * (r_t + gamma_t * V(x_{t+1}) - V(x_t))
    v_t     = V(x_t) + delta_t + gamma_t * c_t * (v_{t+1} - V(x_{t+1}))          (v_T = V(x_T))
    loss    = -mean(rho_t * (r_t + gamma_t * v_{t+1} - V(x_t)) * log pi(a_t|x_t))
              + value_weight * 0.5 * mean((v_t - V(x_t))^2) - entropy_weight * mean(entropy)

``gamma_t`` is 0 after a termination; a truncated step adds ``gamma * V(final obs)`` to its reward and cuts
the recursion, as PPO does. The network is PPO's (:class:`~ding_dist.policy.ppo.ActorCritic`, or
:class:`~ding_dist.policy.ppo.ImageActorCritic` on uint8 images; acting, extras ``logp`` and ``value``,
evaluation are PPO's). ``learn`` runs ``epoch_per_collect`` passes over the rollout in minibatches of whole
env columns (so every minibatch keeps its time order), planned over the global columns (every learner's, as one
process holds them): ``max(1, min(columns, batch_size // T))`` columns each, ``columns // that`` per pass
(:func:`column_minibatches`), every learner taking its columns of each, so N learners take the updates one process
takes. In each minibatch ``V(x_t)`` and ``pi`` (hence ``rho``,
``c``, the targets and the advantages) come from the current network; the bootstrap ``V(x_T)`` and the
truncation values ``V(final obs)`` are computed once per ``learn`` call, with the network before its first
update. With ``learn.adv_norm`` the advantages are normalized with the statistics of the global minibatch
(every learner's columns of it, as one process would compute them): one small allreduce per minibatch, since
the advantages depend on the network the previous minibatch updated. A learner's loss is its columns' sum
times ``N / (global minibatch size)`` (it may hold none of a minibatch), so after the sync engine's average (the
learner group) the gradient is that of the mean over the global minibatch; the shuffle of the columns is seeded by
rank 0 (one small broadcast per ``learn`` call).

Example::

    cfg = IMPALAPolicy.default_config()
    policy = IMPALAPolicy(cfg, env.single_observation_space, env.single_action_space)
    stats = policy.learn(rollout)  # rollout from a collector or an actor, fields [T, N, ...]
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

from ding_dist.comm import broadcast, comm_device, get_rank, get_world_size
from ding_dist.data.replay import to_device
from ding_dist.policy.base import Policy
from ding_dist.policy.ppo import PPOPolicy
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key

__all__ = ["IMPALAPolicy", "column_minibatches", "vtrace"]


def column_minibatches(columns: int, steps: int, batch_size: int, epochs: int, seed: int) -> list[np.ndarray]:
    """The env columns of every minibatch of one IMPALA ``learn`` call over ``columns`` global columns of ``steps``
    steps: ``epochs`` passes, each a fresh shuffle (``numpy`` generator of ``seed``) cut into ``columns // c``
    minibatches of ``c = max(1, min(columns, batch_size // steps))`` whole columns (the ragged tail left out);
    ``batch_size`` is the global minibatch in steps.

    Example::

        [len(mb) for mb in column_minibatches(8, 32, 96, epochs=1, seed=0)]  # 8 minibatches of 1 column
    """
    per = max(1, min(columns, int(batch_size) // steps))
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(epochs):
        order = rng.permutation(columns)
        out += [order[i * per : (i + 1) * per] for i in range(columns // per)]
    return out


def vtrace(
    log_rho: torch.Tensor,
    reward: torch.Tensor,
    discount: torch.Tensor,
    value: torch.Tensor,
    bootstrap: torch.Tensor,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    lam: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace targets ``v_t`` and policy-gradient advantages over a time-major ``[T, N]`` rollout.

    ``log_rho = log pi - log mu``; ``discount[t] = gamma`` (0 where step ``t`` ended the episode);
    ``bootstrap``: ``V(x_T)`` ``[N]``. With ``pi == mu`` and ``lam = 1`` the targets are n-step returns.

    Example::

        vs, adv = vtrace(torch.zeros(3, 1), torch.ones(3, 1), torch.full((3, 1), 0.9), torch.zeros(3, 1),
                         torch.zeros(1))
        vs[:, 0]  # tensor([2.7100, 1.9000, 1.0000])
    """
    with torch.no_grad():
        ratio = log_rho.exp()
        rho = ratio.clamp(max=rho_bar)
        c = lam * ratio.clamp(max=c_bar)
        next_value = torch.cat([value[1:], bootstrap[None]], dim=0)
        delta = rho * (reward + discount * next_value - value)
        acc = torch.zeros_like(bootstrap)
        corrections = torch.empty_like(value)
        for t in reversed(range(value.shape[0])):
            acc = delta[t] + discount[t] * c[t] * acc
            corrections[t] = acc
        vs = value + corrections
        next_vs = torch.cat([vs[1:], bootstrap[None]], dim=0)
        advantage = rho * (reward + discount * next_vs - value)
    return vs, advantage


@register_policy("impala")
class IMPALAPolicy(PPOPolicy):
    """Actor-critic with V-trace (discrete or continuous actions), for lagged actors.

    Config: the keys listed below (generated from ``keys``). Vector or uint8 image observations (PPO's networks; images
    need a Discrete action space); ``learn.batch_size`` is rounded down to whole env columns of every learner.

    Example::

        policy = IMPALAPolicy(IMPALAPolicy.default_config(), obs_space, action_space)
        stats = policy.learn(rollout)  # {"loss": ..., "policy_loss": ..., "value_loss": ..., "rho_mean": ...}

    Reference tests: tests/policy/test_impala.py (one update against a numpy V-trace: clipped weights, episode ends,
    truncation, advantage normalization).
    """

    on_policy = True
    pbt_keys = ("learn.learning_rate", "learn.entropy_weight")  # PPO's but clip_ratio, which V-trace has not

    keys = Policy.keys.plus(
        Key("model.hidden_sizes", [64, 64], "hidden layer sizes of the network(s)", "sizes"),
        Key("model.activation", "tanh", "activation of the hidden layers"),
        Key("model.log_std_init", 0.0, "initial Gaussian log-std for Box actions"),
        Key("model.obs_norm", False, "normalize vector observations with running statistics synchronized across ranks"),
        Key(
            "model.conv_channels",
            None,
            "on images: the three convolutions' channels (None: the Nature CNN's 32, 64, 64)",
        ),
        Key("learn.batch_size", 256),
        Key("learn.epoch_per_collect", 1, "epochs over each rollout", ">= 1"),
        Key("learn.rho_bar", 1.0, "V-trace clip of the importance weights in the value targets"),
        Key("learn.c_bar", 1.0, "V-trace clip of the trace coefficients"),
        Key("learn.vtrace_lambda", 1.0, "V-trace lambda"),
        Key("learn.value_weight", 0.5, "value loss weight"),
        Key("learn.entropy_weight", 0.01, "entropy bonus weight"),
        Key("learn.adv_norm", False, "normalize advantages with the statistics of the global minibatch (all ranks)"),
        Key("learn.grad_clip_norm", 0.5, "gradient norm clip, applied after the sync (None: off)", "> 0 or None"),
        Key("learn.betas", [0.9, 0.999], "Adam's betas"),
        Key("learn.eps", 1e-05, "Adam's eps"),
        Key("collect.n_sample", 256),
        Key("collect.discount_factor", 0.99, "gamma of GAE", "[0, 1]"),
    )

    def _forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The trained network on ``[T, columns, ...]`` observations: ``[T, columns]`` folded into the batch
        (the image network takes ``[B, C, H, W]``), outputs unfolded to ``[T, columns, ...]``."""
        head, value = self.train_model(obs.flatten(0, 1))
        return head.unflatten(0, obs.shape[:2]), value.unflatten(0, obs.shape[:2])

    def learn(self, rollout: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """``epoch_per_collect`` passes of V-trace actor-critic updates over one rollout (``[T, N, ...]``)."""
        lc, gamma = self.cfg.learn, self.cfg.collect.discount_factor
        obs = self._obs(rollout["obs"])  # [T, N, ...]; uint8 images stay uint8
        action = self.as_tensor(rollout["action"], torch.long if self.discrete else torch.float32)
        behavior_logp = self.as_tensor(rollout["logp"])
        reward = self.as_tensor(rollout["reward"])
        terminated = self.as_tensor(rollout["terminated"], torch.bool)
        truncated_np = np.asarray(rollout["truncated"], dtype=bool)
        truncated = self.as_tensor(truncated_np, torch.bool)
        steps, n_envs = reward.shape
        # Once per call, with the network before this call's first update (V(x_t) and pi are recomputed below).
        with torch.no_grad():  # a truncated episode did not end in the MDP: bootstrap from its final observation
            if truncated_np.any():
                reward = reward.clone()
                reward[truncated] += gamma * self.model(self._obs(rollout["next_obs"][truncated_np]))[1]
            bootstrap = self.model(self._obs(rollout["last_obs"]))[1]
        discount = gamma * (~(terminated | truncated)).float()

        world, rank = get_world_size(self.sync_group), get_rank(self.sync_group)
        seed = torch.randint(0, 2**62, (1,))  # rank 0's seeds every learner's shuffle of the global columns
        if world > 1:
            seed = seed.to(comm_device(self.sync_group, like=seed))
            broadcast(seed, 0, group=self.sync_group)
        plan = column_minibatches(n_envs * world, steps, int(self.plan.batch), lc.epoch_per_collect,
                                  int(seed.cpu()))  # fmt: skip
        global_batch = len(plan[0]) * steps  # steps in every global minibatch
        scale = world / global_batch  # this learner's sums -> its part of the global minibatch's mean, times N
        first = rank * n_envs  # this learner's first global column (every learner holds n_envs)
        parts = [mb[(mb >= first) & (mb < first + n_envs)] - first for mb in plan]
        # A learner with none of a minibatch still steps with the others: on one column whose terms count 0 times.
        plan = [(to_device(torch.as_tensor(c if len(c) else [0]), self.device), scale if len(c) else 0.0)
                for c in parts]  # fmt: skip
        stats = dict.fromkeys(("loss", "policy_loss", "value_loss", "entropy", "rho_mean"),
                              torch.zeros((), device=self.device))  # fmt: skip
        for cols, part in plan:
            head, value = self._forward(obs[:, cols])
            dist = self.model.distribution(head)
            logp = self._log_prob(dist, action[:, cols])
            entropy = dist.entropy() if self.discrete else dist.entropy().sum(-1)

            log_rho = logp.detach() - behavior_logp[:, cols]
            vs, adv = vtrace(log_rho, reward[:, cols], discount[:, cols], value.detach(), bootstrap[cols],
                             lc.rho_bar, lc.c_bar, lc.vtrace_lambda)  # fmt: skip
            if lc.adv_norm:  # statistics of the global minibatch (every learner's columns), as on one process
                mine = adv.reshape(-1) if part else torch.zeros(0, device=adv.device)
                adv_mean, adv_std = self.global_minibatch_stats(mine, global_batch)
                adv = (adv - adv_mean) / (adv_std + 1e-8)
            policy_loss = -(adv * logp).sum() * part
            value_loss = 0.5 * ((vs - value) ** 2).sum() * part
            entropy_mean = entropy.sum() * part
            loss = policy_loss + lc.value_weight * value_loss - lc.entropy_weight * entropy_mean

            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()  # through the wrapped model: gradients are averaged across the learners
            if lc.grad_clip_norm is not None:
                nn.utils.clip_grad_norm_(self.model.parameters(), lc.grad_clip_norm)
            self.optimizer.step()
            self.train_iter += 1

            with torch.no_grad():
                step_stats = {
                    "loss": loss,
                    "policy_loss": policy_loss,
                    "value_loss": value_loss,
                    "entropy": entropy_mean,
                    "rho_mean": log_rho.exp().sum() * part,
                }
            for k, val in step_stats.items():
                stats[k] = stats[k] + val.detach() / len(plan)
        return stats
