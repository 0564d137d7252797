"""DI-engine's off-policy actor-critic family: SAC (and its discrete twin), TD3, DDPG and D4PG.

They share actor and critic heads of ``*_head_hidden_size`` x (1 + ``*_head_layer_num``) layers, random
actions before learning starts (``random_collect_size``), no gradient clipping and one-step-per-collect
defaults; :func:`heads`, :func:`replay_schedule` and :func:`replay_size_and_counts` hold what they share.

Example:
    >>> from ding_dist.config.ding import translate_ding_config
    >>> c = {"env": {"type": "pendulum"}, "policy": {"type": "td3"}}
    >>> ours, *_ = translate_ding_config({}, c)
    >>> ours["policy"]["learn"]["actor_update_freq"], ours["policy"]["learn"]["learning_starts"]
    (2, 25000)
"""

from __future__ import annotations

from ding_dist.config.ding.core import (
    Translator,
    int_at_least,
    iteration_counts,
    translates,
)
from ding_dist.config.ding.q_learning import priority_replay


def heads(t: Translator) -> None:
    """DI-engine's actor and critic heads, ``*_head_hidden_size`` x (1 + ``*_head_layer_num``) layers each, as
    ``actor_hidden_sizes`` and ``critic_hidden_sizes`` (ReLU)."""
    actor = (t.take("policy.model.actor_head_hidden_size", 64), t.take("policy.model.actor_head_layer_num", 1))
    critic = (t.take("policy.model.critic_head_hidden_size", 64), t.take("policy.model.critic_head_layer_num", 1))
    actor_hidden, critic_hidden = [actor[0]] * (1 + actor[1]), [critic[0]] * (1 + critic[1])
    t.put("policy.model.actor_hidden_sizes", actor_hidden)
    t.put("policy.model.critic_hidden_sizes", critic_hidden)
    t.put("policy.model.activation", "relu")
    t.report.add(
        "mapped",
        f"policy.model head sizes -> actor_hidden_sizes={actor_hidden}, critic_hidden_sizes={critic_hidden} (ReLU)",
    )


def replay_size_and_counts(t: Translator, d: str, upc: int, n_sample: int, buffer_size: int) -> None:
    """The replay's size (DI-engine's default ``buffer_size``) and the train iterations per collect."""
    path = "policy.other.replay_buffer.replay_buffer_size"
    t.default(path, path, buffer_size, d)
    iteration_counts(t, int_at_least("policy.learn.update_per_collect", upc, 1), n_sample, f"{upc} train iters")


def replay_schedule(t: Translator, d: str, random_collect: int, buffer_size: int | None = None) -> tuple[int, int]:
    """What the family's learning schedule shares: discount, ``update_per_collect`` per ``n_sample`` env steps,
    the batch, random actions before learning (``random_collect_size``, DI-engine's default ``random_collect``, as
    ``learn.learning_starts``), time-limit bootstrapping, no gradient clipping; with ``buffer_size``, the replay
    size and counts too. Returns ``(update_per_collect, n_sample)``."""
    t.default("policy.learn.discount_factor", "policy.discount_factor", 0.99, d)
    upc = t.default("policy.learn.update_per_collect", "policy.learn.update_per_collect", 1, d)
    n_sample = t.default("policy.collect.n_sample", "policy.collect.n_sample", 1, d)
    batch = t.out.get("policy.learn.batch_size", 256)
    t.put("policy.learn.batch_size", batch)
    taken = t.take("policy.random_collect_size", random_collect)
    starts = max(int(batch), int(taken))
    t.put("policy.learn.learning_starts", starts)
    t.report.add(
        "converted", f"policy.random_collect_size={taken} -> policy.learn.learning_starts={starts} (random actions)"
    )
    if t.take("policy.learn.ignore_done", False):
        t.report.add("mapped", "policy.learn.ignore_done=True: time-limit ends bootstrap here (gymnasium truncation)")
    t.put("policy.learn.grad_clip_norm", None)
    if buffer_size is not None:
        replay_size_and_counts(t, d, upc, n_sample, buffer_size)
    return upc, n_sample


@translates("sac", on_policy=False)
def _sac(t: Translator) -> None:
    d = "DI-engine's SAC default"
    t.require("policy.model.twin_critic", (True,), "ding_dist's SAC always has twin critics")
    t.require("policy.model.action_space", ("reparameterization",), "ding_dist's SAC samples reparameterized")
    t.require("policy.model.actor_head_type", ("reparameterization",), "ding_dist's SAC samples reparameterized")
    t.require("policy.model.value_network", (False,), "ding_dist's SAC has no separate value network")
    t.require("policy.learn.value_network", (False,), "ding_dist's SAC has no separate value network")
    t.require("policy.learn.reparameterization", (True,), "ding_dist's SAC samples reparameterized")
    t.require("policy.learn.log_space", (True,), "ding_dist tunes log(alpha)")
    heads(t)
    t.report.add("differs", "log-std bounds: squashed into [-5, 2] here, clamped to [-20, 2] in DI-engine")
    t.ignore("policy.learn.init_w", "the last layers keep torch's default initialization")
    t.ignore("policy.collect.noise_sigma", "SAC explores by sampling its policy")
    t.ignore("policy.collect.collector_logit", "SAC stores actions only")
    for key, value in (
        ("learning_rate_q", 3e-4),
        ("learning_rate_policy", 3e-4),
        ("learning_rate_alpha", 3e-4),
        ("target_theta", 0.005),
        ("alpha", 0.2),
        ("auto_alpha", True),
    ):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    if t.has("policy.learn.target_entropy"):
        t.same("policy.learn.target_entropy")
    replay_schedule(t, d, random_collect=10000, buffer_size=1_000_000)


def _deterministic_actor_critic(t: Translator, name: str, twin: bool, actor_every: int, noise: bool) -> None:
    """TD3 and DDPG (DI-engine's DDPG policy with TD3's or DDPG's defaults): the same keys, different defaults."""
    d = f"DI-engine's {name} default"
    t.require("policy.action_space", ("continuous",), f"ding_dist's {name} acts on Box action spaces")
    for path in ("policy.model.action_space", "policy.model.actor_head_type"):
        t.require(path, ("regression",), f"ding_dist's {name} actor is deterministic (tanh regression)")
    for path in ("policy.use_reward_batch_norm", "policy.reward_batch_norm"):
        t.require(path, (False,), "rewards are not normalized here")
    t.default("policy.model.twin_critic", "policy.model.twin_critic", twin, d)
    heads(t)
    for key, value in (
        ("learning_rate_actor", 1e-3),
        ("learning_rate_critic", 1e-3),
        ("target_theta", 0.005),
        ("actor_update_freq", actor_every),
        ("noise", noise),
    ):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    if t.out["policy.learn.noise"]:  # target policy smoothing
        t.default("policy.learn.noise_sigma", "policy.learn.noise_sigma", 0.2, d)
        for key, value in (("min", -0.5), ("max", 0.5)):
            t.default(f"policy.learn.noise_range.{key}", f"policy.learn.noise_range.{key}", value, d)
    else:
        for key in ("noise_sigma", "noise_range.min", "noise_range.max"):
            t.ignore(f"policy.learn.{key}", "no target policy smoothing (learn.noise=False)")
    t.default("policy.collect.noise_sigma", "policy.collect.noise_sigma", 0.1, d)
    replay_schedule(t, d, random_collect=25000, buffer_size=100_000 if name == "TD3" else 1_000_000)


@translates("td3", on_policy=False)
def _td3(t: Translator) -> None:
    _deterministic_actor_critic(t, "TD3", twin=True, actor_every=2, noise=True)


@translates("ddpg", on_policy=False)
def _ddpg(t: Translator) -> None:
    _deterministic_actor_critic(t, "DDPG", twin=False, actor_every=1, noise=False)


@translates("sac_discrete", on_policy=False)  # the name in older DI-engine files
@translates("discrete_sac", on_policy=False)
def _discrete_sac(t: Translator) -> None:
    d = "DI-engine's discrete SAC default"
    t.require("policy.model.twin_critic", (True,), "ding_dist's discrete SAC always has twin critics")
    t.require("policy.learn.log_space", (True,), "ding_dist tunes log(alpha)")
    for path in ("policy.model.agent_obs_shape", "policy.model.global_obs_shape"):
        t.ignore(path, "multi-agent observation shapes; taken from the env's observation space")
    heads(t)
    t.ignore("policy.learn.init_w", "the last layers keep torch's default initialization")
    t.ignore("policy.transition_with_policy_data", "the learner recomputes the policy; the replay stores actions")
    t.ignore("policy.collect.env_num", "the collector's envs are env.collector_env_num")
    t.ignore("policy.eval.env_num", "the evaluator's envs are env.evaluator_env_num")
    t.ignore_under("policy.command", "DI-engine's serial commander has nothing to do here")
    for key, value in (
        ("learning_rate_q", 3e-4),
        ("learning_rate_policy", 3e-4),
        ("learning_rate_alpha", 3e-4),
        ("target_theta", 0.005),
        ("alpha", 0.2),
        ("auto_alpha", True),
    ):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    if t.has("policy.learn.target_entropy"):
        t.same("policy.learn.target_entropy")
    else:
        t.report.add("default", "policy.learn.target_entropy=None: -n_actions (DI-engine's discrete SAC default)")
    upc, n_sample = replay_schedule(t, d, random_collect=10000)
    if t.under("policy.other.eps"):
        for key in ("type", "start", "end", "decay"):
            t.same(f"policy.other.eps.{key}")
    else:
        t.report.add("default", "policy.other.eps: none (actions sampled from the policy only)")
    replay_size_and_counts(t, d, upc, n_sample, 1_000_000)


@translates("d4pg", on_policy=False, priority=True)
def _d4pg(t: Translator) -> None:
    d = "DI-engine's D4PG default"
    for key, value in (("v_min", -10), ("v_max", 10), ("n_atom", 51)):
        t.default(f"policy.model.{key}", f"policy.model.{key}", value, d)
    t.require("policy.model.twin_critic", (False,), "D4PG has one distributional critic")
    t.require("policy.model.critic_head_type", ("categorical",), "D4PG's critic is categorical (DI-engine's only one)")
    t.default("policy.nstep", "policy.nstep", 3, d)
    t.ignore("policy.discount_factor", "DI-engine's D4PG reads policy.learn.discount_factor (default 0.99)")
    priority_replay(t, d, on=True)
    t.ignore("policy.transition_with_policy_data", "the replay stores actions; the learner recomputes the policy")
    _deterministic_actor_critic(t, "D4PG", twin=False, actor_every=1, noise=False)
    t.put("policy.model.twin_critic", False)
