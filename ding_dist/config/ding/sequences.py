"""DI-engine's policies that replay sequences: R2D2 (a recurrent Q-network) and ACER (trajectories).

Both count their replay and collection in sequences of ``unroll_len`` (or ``burnin_step + learn_unroll_len``)
steps where ding_dist counts env steps; their translators convert one into the other.

Example:
    >>> from ding_dist.config.ding import translate_ding_config
    >>> c = {"env": {"type": "cartpole"}, "policy": {"type": "r2d2"}}
    >>> ours, *_ = translate_ding_config({}, c)
    >>> ours["policy"]["sequence"]["seq_len"], ours["policy"]["collect"]["n_sample"]
    (100, 3200)
"""

from __future__ import annotations

from ding_dist.config.ding.core import (
    NO_CLIP,
    Translator,
    encoder_sizes,
    int_at_least,
    iteration_counts,
    translates,
)
from ding_dist.config.ding.q_learning import priority_replay
from ding_dist.config.errors import ConfigError
from ding_dist.config.rules import short_repr


@translates("r2d2", on_policy=False, priority=True, trajectories=True)
def _r2d2(t: Translator) -> None:
    """DI-engine's R2D2 (a DRQN, sequences of ``burnin_step + learn_unroll_len`` steps, ``n_sample`` sequences per
    collect, a replay of ``replay_buffer_size`` sequences) onto ours, which counts env steps: the same sequences,
    the same env steps per collect and per replay."""
    d = "DI-engine's R2D2 default"
    t.default("policy.discount_factor", "policy.discount_factor", 0.997, d)
    t.default("policy.nstep", "policy.nstep", 5, d)
    burnin = int_at_least("policy.burnin_step", t.take("policy.burnin_step", 20), 0)
    unroll = int_at_least("policy.learn_unroll_len", t.take("policy.learn_unroll_len", 80), 1)
    seq_len = burnin + unroll
    t.put("policy.sequence.seq_len", seq_len)
    t.put("policy.sequence.burnin", burnin)
    t.put("policy.sequence.overlap", 0)
    t.report.add("converted", f"policy.burnin_step={burnin}, learn_unroll_len={unroll} -> policy.sequence.seq_len="
                 f"{seq_len}, burnin={burnin}, overlap=0 (DI-engine cuts each env's trajectory into consecutive "
                 "sequences)")  # fmt: skip
    t.report.add("differs", "a sequence that starts an episode learns from its first step (its zero state is exact) "
                 "and the last nstep steps of a sequence learn from shorter returns; DI-engine burns in every sequence "
                 "and leaves its last nstep steps out of the loss")  # fmt: skip
    given = t.take("policy.collect.unroll_len", seq_len)
    t.report.add("ignored", f"policy.collect.unroll_len={short_repr(given)}: DI-engine's R2D2 replaces it by "
                 f"burnin_step + learn_unroll_len = {seq_len}")  # fmt: skip
    t.ignore("policy.collect.traj_len_inf", "each env's stream is cut into sequences across rollouts")
    t.ignore("policy.collect.env_num", "the collector's envs are env.collector_env_num")
    t.ignore("policy.eval.env_num", "the evaluator's envs are env.evaluator_env_num")
    encoder = encoder_sizes(t)
    dueling = bool(t.take("policy.model.dueling", True))
    head = t.take("policy.model.head_hidden_size", None) or encoder[-1]
    layers = t.take("policy.model.head_layer_num", 1)
    if head != encoder[-1] or layers != 1:
        raise ConfigError(
            "DI-engine config keys 'policy.model.head_hidden_size'/'head_layer_num' cannot be honoured: ding_dist's "
            f"DRQN head has the LSTM's width ({encoder[-1]}) and one hidden layer when dueling (else none)"
        )
    t.require("policy.model.lstm_type", ("normal",), "ding_dist's DRQN has torch's LSTM")
    t.require("policy.model.res_link", (False,), "ding_dist's DRQN has no residual link")
    t.require("policy.model.norm_type", (None,), "ding_dist's DRQN has no normalization layers")
    t.put("policy.model.hidden_sizes", encoder)
    t.put("policy.model.lstm_size", encoder[-1])
    t.put("policy.model.dueling", dueling)
    t.put("policy.model.activation", "relu")
    t.report.add("mapped", f"policy.model encoder_hidden_size_list={encoder}, dueling={dueling!r} -> policy.model."
                 f"hidden_sizes={encoder}, lstm_size={encoder[-1]}, dueling={dueling!r} (ReLU)")  # fmt: skip
    t.default("policy.learn.learning_rate", "policy.learn.learning_rate", 1e-4, d)
    upc = t.default("policy.learn.update_per_collect", "policy.learn.update_per_collect", 1, d)
    t.default("policy.learn.target_update_theta", "policy.learn.target_theta", 0.001, d)
    t.require("policy.learn.value_rescale", (True,), "ding_dist's R2D2 always rescales values")
    if t.take("policy.learn.ignore_done", False):
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.put("policy.value_rescale_eps", 0.01)
    t.put("policy.priority_eta", 0.9)
    t.put("policy.learn.loss", "mse")
    t.put("policy.learn.double", True)
    t.put("policy.learn.grad_clip_norm", NO_CLIP)
    t.report.add("default", f"policy.value_rescale_eps=0.01, priority_eta=0.9, learn.loss='mse', double=True, "
                 f"grad_clip_norm={NO_CLIP:g} (DI-engine's R2D2)")  # fmt: skip
    sequences = int_at_least("policy.collect.n_sample", t.take("policy.collect.n_sample", 32), 1)
    n_sample = sequences * seq_len
    t.put("policy.collect.n_sample", n_sample)
    batch = int(t.out.get("policy.learn.batch_size", 64))
    t.put("policy.learn.batch_size", batch)
    t.put("policy.learn.learning_starts", batch * seq_len)
    size = int_at_least("policy.other.replay_buffer.replay_buffer_size",
                         t.take("policy.other.replay_buffer.replay_buffer_size", 10000), 1)  # fmt: skip
    t.put("policy.other.replay_buffer.replay_buffer_size", size * seq_len)
    t.put("policy.other.replay_buffer.type", "sequence")
    t.report.add("converted", f"policy.collect.n_sample={sequences} sequences -> {n_sample} env steps, "
                 f"policy.other.replay_buffer.replay_buffer_size={size} sequences -> {size * seq_len} steps, "
                 f"policy.learn.learning_starts={batch * seq_len} (DI-engine trains once it holds a batch of "
                 "sequences); policy.learn.batch_size counts sequences, as DI-engine's")  # fmt: skip
    for key, value in (("type", "exp"), ("start", 0.95), ("end", 0.05), ("decay", 10000)):
        t.default(f"policy.other.eps.{key}", f"policy.other.eps.{key}", value, d)
    priority_replay(t, d, True)
    iteration_counts(t, int_at_least("policy.learn.update_per_collect", upc, 1), n_sample, f"{upc} train iters")


@translates(
    "acer", on_policy=False, trajectories=True
)  # DI-engine's on_policy=False; ours hands it rollouts, it replays chunks
def _acer(t: Translator) -> None:
    """DI-engine's ACER: trajectories of ``unroll_len`` steps in a replay, ``update_per_collect`` steps on
    ``batch_size`` of them; here each env's rollout is cut into chunks of ``unroll_len`` steps."""
    d = "DI-engine's ACER default"
    encoder = encoder_sizes(t)
    actor = (t.take("policy.model.actor_head_hidden_size", 64), t.take("policy.model.actor_head_layer_num", 1))
    critic = (t.take("policy.model.critic_head_hidden_size", 64), t.take("policy.model.critic_head_layer_num", 1))
    hidden = encoder + [actor[0]] * actor[1]
    t.put("policy.model.hidden_sizes", hidden)
    t.put("policy.model.activation", "relu")
    t.report.add("mapped", f"policy.model encoder={encoder} + head {actor[0]} x {actor[1]} -> hidden_sizes={hidden}")
    if critic != actor:
        t.report.add("differs", f"critic head {critic[0]} x {critic[1]}: the critic uses hidden_sizes={hidden} too")
    unroll = t.take("policy.unroll_len", 32)
    for path in ("policy.learn.unroll_len", "policy.collect.unroll_len"):
        other = t.take(path, unroll)
        if other != unroll:
            raise ConfigError(f"DI-engine config keys 'policy.unroll_len' = {short_repr(unroll)} and {path!r} = "
                              f"{short_repr(other)} cannot be honoured: one trajectory length here")  # fmt: skip
    unroll = int_at_least("policy.unroll_len", unroll, 1)
    t.put("policy.learn.unroll_len", unroll)
    for key, value in (("update_per_collect", 4), ("learning_rate_actor", 5e-4), ("learning_rate_critic", 5e-4),
                       ("entropy_weight", 1e-4), ("c_clip_ratio", 10), ("trust_region", True),
                       ("trust_region_value", 1.0), ("target_theta", 0.01)):  # fmt: skip
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    upc = int_at_least("policy.learn.update_per_collect", t.out["policy.learn.update_per_collect"], 1)
    gamma = t.default("policy.learn.discount_factor", "policy.learn.discount_factor", 0.9, d)
    collect_gamma = t.take("policy.collect.discount_factor", gamma)
    if collect_gamma != gamma:
        raise ConfigError(f"DI-engine config keys 'policy.learn.discount_factor' = {short_repr(gamma)} and "
                          f"'policy.collect.discount_factor' = {short_repr(collect_gamma)} cannot be honoured: one "
                          "discount here")  # fmt: skip
    t.ignore("policy.collect.gae_lambda", "ACER's targets are Retrace's")
    t.ignore("policy.discount_factor", "DI-engine's ACER reads policy.learn.discount_factor")
    t.ignore("policy.nstep", "not read by DI-engine's ACER (Retrace over the whole trajectory)")
    t.ignore("policy.learn.lambda_", "not read by DI-engine's ACER (Retrace's traces are min(1, rho))")
    t.ignore("policy.learn.value_weight", "not read by DI-engine's ACER (the critic has its own optimizer)")
    t.require("policy.learn.grad_clip_type", (None,), "DI-engine's ACER file clips no gradients; nor does ours")
    t.ignore("policy.learn.clip_value", "used only with grad_clip_type")
    if "policy.learn.batch_size" not in t.out:
        t.put("policy.learn.batch_size", 16)
    t.default("policy.other.replay_buffer.replay_buffer_size", "policy.other.replay_buffer.replay_buffer_size",
              1000, d)  # fmt: skip
    envs = int(t.out.get("env.collector_env_num", 8))
    n_traj = int_at_least("policy.collect.n_sample", t.take("policy.collect.n_sample", 16), 1)
    per_env = -(-n_traj // envs)  # whole chunks per env
    n_sample = per_env * envs * unroll
    t.put("policy.collect.n_sample", n_sample)
    t.report.add("converted", f"policy.collect.n_sample={n_traj} trajectories of {unroll} steps -> "
                 f"policy.collect.n_sample={n_sample} env steps ({per_env} chunk(s) of {unroll} steps per env, "
                 f"{envs} envs)")  # fmt: skip
    t.report.add("differs", "DI-engine's ACER masks only the step after an episode end inside a trajectory; here "
                 "Retrace restarts at every episode end and bootstraps truncations")  # fmt: skip
    iteration_counts(t, upc, n_sample, f"{upc} train iters per collect")
