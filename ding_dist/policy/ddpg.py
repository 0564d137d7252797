"""DDPG: deep deterministic policy gradient (Lillicrap et al. 2015, arXiv:1509.02971).

TD3 without its three additions (:mod:`ding_dist.policy.td3` has the update, written out): one critic
(``model.twin_critic=False``), no target policy smoothing (``learn.noise=False``), and the actor updated with the
critic on every update (``learn.actor_update_freq=1``). The critic learns ``y = r + discount * Q'(s', pi'(s'))`` by
MSE, the actor ``-mean Q(s, pi(s))``; both targets are Polyak-averaged by ``learn.target_theta`` after every update.
Exploration adds Gaussian noise (``collect.noise_sigma``; the paper's Ornstein-Uhlenbeck process is replaced by
Gaussian noise here, as in DI-engine and the TD3 paper's DDPG baseline).
"""

from __future__ import annotations

from ding_dist.policy.registry import register_policy
from ding_dist.policy.td3 import TD3Policy
from ding_dist.utils.keys import Key

__all__ = ["DDPGPolicy"]


@register_policy("ddpg")
class DDPGPolicy(TD3Policy):
    """DDPG for Box action spaces with finite bounds: :class:`~ding_dist.policy.td3.TD3Policy`'s keys, DDPG's
    defaults (DI-engine's): one critic, no smoothing noise, the actor on every update, a replay of 10^6.

    Example::

        cfg = DDPGPolicy.default_config()
        policy = DDPGPolicy(cfg, env.single_observation_space, env.single_action_space)
        stats = policy.learn(replay.sample(cfg.learn.batch_size))  # {"critic_loss": ..., "actor_loss": ...}

    Reference tests: tests/policy/test_td3.py (the critic target and the actor step, with DDPG's one critic and no
    smoothing).
    """

    algorithm = "DDPG"

    keys = TD3Policy.keys.plus(
        Key("model.twin_critic", False),
        Key("learn.actor_update_freq", 1),
        Key("learn.noise", False),
        Key("other.replay_buffer.replay_buffer_size", 1000000),
    )
