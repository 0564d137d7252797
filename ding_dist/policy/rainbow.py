"""Rainbow (Hessel et al. 2018, "Rainbow: Combining Improvements in Deep Reinforcement Learning",
arXiv:1710.02298), as DI-engine's: C51's distributional loss with n-step returns, double action selection, a
dueling head and noisy layers (factorized Gaussian noise, Fortunato et al. 2018).

Reading order: the network (:class:`~ding_dist.policy.networks.CategoricalQNetwork` with a dueling head of
:class:`~ding_dist.policy.networks.NoisyLinear` layers), then ``learn``: fresh noise in the online and the target
network, the next action picked by the online network, then another fresh draw for the online network's
prediction and C51's loss (see :mod:`ding_dist.policy.c51`). The noise is drawn from a generator seeded by the
update number, so every rank draws the same. Acting and evaluation use the mean network (no noise), as
DI-engine's collect and eval modes do; exploration is epsilon-greedy (DI-engine's default: 0.05 throughout).
Prioritized replay with importance weights is on by default (``priority``, ``priority_IS_weight``; each sample's
cross-entropy is its new priority), as in DI-engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import torch

from ding_dist.policy.losses import categorical_projection
from ding_dist.policy.networks import CategoricalQNetwork
from ding_dist.policy.q_learning import QLearningPolicy, init_q_learning
from ding_dist.policy.registry import register_policy
from ding_dist.policy.rng import parameter_seed, step_generator
from ding_dist.utils.keys import Key

__all__ = ["RainbowPolicy"]


@register_policy("rainbow")
class RainbowPolicy(QLearningPolicy):
    """Rainbow for discrete actions.

    Config: the keys listed below (generated from ``keys``): C51's, the noisy layers' and QLearningPolicy's; ``nstep``
    defaults to 3, ``priority`` and ``priority_IS_weight`` to True.

    Example::

        cfg = RainbowPolicy.default_config()
        policy = RainbowPolicy(cfg, env.single_observation_space, env.single_action_space)
        stats = policy.learn(replay.sample(cfg.learn.batch_size))  # {"loss": ..., "q_mean": ...}

    Reference tests: tests/policy/test_rainbow.py, tests/policy/test_q_references.py (C51's loss on the double-Q
    target under the update's noise).
    """

    algorithm = "Rainbow"

    keys = QLearningPolicy.keys.plus(
        Key("model.n_atom", 51, "C51, Rainbow: atoms of the value distribution's support"),
        Key("model.v_min", -10.0, "C51, Rainbow: the smallest atom of the support"),
        Key("model.v_max", 10.0, "C51, Rainbow: the largest atom of the support"),
        Key(
            "model.noisy_sigma0",
            0.5,
            "Rainbow: initial noise scale of the noisy layers (sigma = sigma0 / sqrt(inputs))",
        ),
        Key("nstep", 3),
        Key("priority", True),
        Key("priority_IS_weight", True),
    )

    def __init__(
        self, cfg: Mapping[str, Any], obs_space: gym.Space, action_space: gym.Space, device: str | torch.device = "cpu"
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)
        m = self.cfg.model
        net = CategoricalQNetwork(
            obs_space,
            self.n_actions,
            m.n_atom,
            m.v_min,
            m.v_max,
            hidden_sizes=m.hidden_sizes,
            activation=m.activation,
            dueling=True,
            noisy=True,
            sigma0=m.noisy_sigma0,
            conv_channels=m.conv_channels,
        )
        init_q_learning(self, net, lr=self.cfg.learn.learning_rate)
        self.noise_seed = parameter_seed(self.model)  # the same on every rank

    def learn(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient step on a replay batch (keys ``obs, action, reward, next_obs, discount``)."""
        g = step_generator(self.noise_seed, self.train_iter)
        self.model.sample_noise(g)
        self.target_model.sample_noise(g)
        rows = torch.arange(batch["action"].shape[0], device=batch["action"].device)
        with torch.no_grad():
            next_action = self.model(batch["next_obs"]).argmax(dim=-1)  # the online net picks a*, under its own noise
            next_probs = self.target_model(batch["next_obs"], full=True).softmax(dim=-1)[rows, next_action]
            target = categorical_projection(next_probs, batch["reward"], batch["discount"], self.model.support)
        self.model.sample_noise(g)  # fresh noise for the prediction (drawn before the forward that needs it)
        logits = self.train_model(batch["obs"], full=True)[rows, batch["action"].long()]  # [batch, n_atom]
        stats = self.apply_loss(-(target * logits.log_softmax(dim=-1)).sum(dim=-1), batch)  # cross-entropy
        q = (logits.detach().softmax(dim=-1) * self.model.support).sum(dim=-1)
        stats["q_mean"] = q.mean()
        self.model.clear_noise()  # acting and evaluation use the mean network
        self.target_model.clear_noise()
        return stats
