"""DI-engine's policy-gradient family on whole episodes: PG and PPO-PG (its episode collector, ``n_episode``).

Example:
    >>> from ding_dist.config.ding import translate_ding_config
    >>> c = {"env": {"type": "cartpole"}, "policy": {"type": "pg"}}
    >>> ours, *_ = translate_ding_config({"policy": {"collect": {"n_episode": 4}}}, c)
    >>> ours["policy"]["collect"]["n_episode"], ours["policy"]["learn"]["grad_clip_norm"]
    (4, 5.0)
"""

from __future__ import annotations

import math

from ding_dist.config.ding.core import (
    DING_CKPT_FREQ,
    DING_EVAL_FREQ,
    MISSING,
    NO_CLIP,
    Translator,
    int_at_least,
    translates,
)


def _pg_model(t: Translator, name: str) -> None:
    """DI-engine's PG network (an encoder and a policy head) -> our policy MLP."""
    heads = f"ding_dist's {name} has Categorical and Gaussian heads"
    t.require("policy.action_space", ("discrete", "continuous"), heads)
    t.ignore("policy.model.action_space", "taken from the env's action space")
    encoder = list(t.take("policy.model.encoder_hidden_size_list", [128, 128, 64]))
    head = t.take("policy.model.head_hidden_size", None) or encoder[-1]
    layers = int_at_least("policy.model.head_layer_num", t.take("policy.model.head_layer_num", 1), 0)
    hidden = encoder + [head] * layers
    t.put("policy.model.hidden_sizes", hidden)
    t.put("policy.model.activation", "relu")
    t.report.add("mapped", f"policy.model encoder={encoder} + head {head} x {layers} -> hidden_sizes={hidden} (ReLU)")


def _episode_rollouts(t: Translator, d: str, what: str) -> tuple[int, int]:
    """DI-engine's ``collect.n_episode`` (its episode collector) -> ours, collected in rollouts of ``n_sample``."""
    n_episode = t.default("policy.collect.n_episode", "policy.collect.n_episode", 8, f"{d} (in its comments)")
    int_at_least("policy.collect.n_episode", n_episode, 1)
    envs = int(t.out.get("env.collector_env_num", 8))
    n_sample = t.take("policy.collect.n_sample", 16 * envs)
    t.put("policy.collect.n_sample", int_at_least("policy.collect.n_sample", n_sample, 1))
    t.report.add(
        "converted",
        f"policy.collect.n_episode={n_episode}: {what} once that many episodes are complete, on all of them; "
        f"collected in rollouts of policy.collect.n_sample={n_sample} env steps",
    )
    return n_episode, n_sample


@translates("pg", on_policy=True, episodes=True)
def _pg(t: Translator) -> None:
    d = "DI-engine's PG default"
    _pg_model(t, "PG")
    t.require("policy.deterministic_eval", (True,), "ding_dist evaluates greedy actions")
    if "policy.learn.batch_size" not in t.out:  # DI-engine's PG loops over minibatches of it (ding/policy/pg.py)
        t.put("policy.learn.batch_size", 64)
        t.report.add("default", f"policy.learn.batch_size=64 ({d})")
    t.report.add(
        "differs",
        f"policy.learn.batch_size={t.out['policy.learn.batch_size']}: one pass over the episodes in shuffled "
        "minibatches of it, the last one the order's final batch_size, as DI-engine's; with fewer samples than that, "
        "one step on all of them (DI-engine's loop would take only part)",
    )
    for key, value in (("learning_rate", 1e-3), ("entropy_weight", 0.01)):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    t.default("policy.learn.grad_norm", "policy.learn.grad_clip_norm", 5.0, d)
    t.require("policy.learn.ignore_done", (False,), "DI-engine's PG does not implement ignore_done")
    t.ignore("policy.collect.collector.get_train_sample", "complete episodes are always the training samples")
    t.default("policy.collect.discount_factor", "policy.collect.discount_factor", 0.99, d)
    n_episode, n_sample = _episode_rollouts(t, d, "a step")
    given = t.take("policy.eval.evaluator.eval_freq")
    iters = DING_EVAL_FREQ if given is MISSING else int_at_least("policy.eval.evaluator.eval_freq", given, 0)
    steps = max(1, iters) * n_sample
    t.put("policy.eval.eval_freq", steps)
    given = t.take("policy.learn.learner.hook.save_ckpt_after_iter")
    ckpt_iters = DING_CKPT_FREQ if given is MISSING else int_at_least("save_ckpt_after_iter", given, 1)
    t.put("policy.other.checkpoint.freq", ckpt_iters * n_sample)
    t.report.add("converted", f"save_ckpt_after_iter={ckpt_iters} train iters -> policy.other.checkpoint.freq="
                              f"{ckpt_iters * n_sample} env steps ({ckpt_iters} rollouts of {n_sample})")  # fmt: skip
    t.report.add(
        "differs",
        f"policy.eval.evaluator.eval_freq={iters} train iters (of {n_episode} episodes each in DI-engine) -> "
        f"policy.eval.eval_freq={steps} env steps ({iters} rollouts of {n_sample}): episode lengths vary",
    )


@translates("ppo_pg", on_policy=True, episodes=True)
def _ppo_pg(t: Translator) -> None:
    """DI-engine's PPOPGPolicy: PG's network and whole episodes, PPO's clipped epochs on Monte-Carlo returns."""
    d = "DI-engine's PPO-PG default"
    _pg_model(t, "PPO-PG")
    if "policy.learn.batch_size" not in t.out:
        t.put("policy.learn.batch_size", 64)
        t.report.add("default", f"policy.learn.batch_size=64 ({d})")
    for key, value in (("epoch_per_collect", 10), ("learning_rate", 3e-4), ("entropy_weight", 0.0), ("clip_ratio", 0.2),
                       ("ppo_param_init", True)):  # fmt: skip
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    clip_type = t.require("policy.learn.grad_clip_type", ("clip_norm", None), "only gradient-norm clipping")
    clip_value = t.take("policy.learn.grad_clip_value", 0.5)
    t.put("policy.learn.grad_clip_norm", NO_CLIP if clip_type is None else clip_value)
    t.report.add(
        "mapped", f"policy.learn.grad_clip_type/value -> grad_clip_norm={None if clip_type is None else clip_value!r}"
    )
    t.require("policy.learn.ignore_done", (False,), "DI-engine's PPO-PG does not implement ignore_done")
    t.ignore("policy.transition_with_policy_data", "rollouts always keep the actions' log-probs")
    t.ignore("policy.collect.collector.get_train_sample", "complete episodes are always the training samples")
    t.default("policy.collect.discount_factor", "policy.collect.discount_factor", 0.99, d)
    _, n_sample = _episode_rollouts(t, d, "PPO epochs")
    given = t.take("policy.eval.evaluator.eval_freq")
    iters = DING_EVAL_FREQ if given is MISSING else int_at_least("policy.eval.evaluator.eval_freq", given, 0)
    epochs, batch = int(t.out["policy.learn.epoch_per_collect"]), int(t.out["policy.learn.batch_size"])
    steps = max(1, math.ceil(iters * batch / max(1, epochs) / n_sample)) * n_sample
    t.put("policy.eval.eval_freq", steps)
    t.report.add(
        "converted",
        f"policy.eval.evaluator.eval_freq={iters} train iters (minibatches of {batch}, epoch_per_collect={epochs}) -> "
        f"policy.eval.eval_freq={steps} env steps (whole rollouts of {n_sample})",
    )
