"""DI-engine's actor-critic family on its VAC network: PPO, A2C, IMPALA, off-policy PPO and PPG.

They share DI-engine's VAC model (a shared encoder, actor and critic heads: our separate actor and critic
MLPs, :func:`vac_model`), rollouts of ``collect.n_sample`` env steps that DI-engine's files must give, and
PPO's gradient-clipping keys.

Example:
    >>> from ding_dist.config.ding import translate_ding_config
    >>> c = {"env": {"type": "cartpole"}, "policy": {"type": "ppo"}}
    >>> ours, *_ = translate_ding_config({"policy": {"collect": {"n_sample": 64}}}, c)
    >>> ours["policy"]["learn"]["epoch_per_collect"], ours["policy"]["learn"]["value_clip_ratio"]
    (10, 0.2)
"""

from __future__ import annotations

from typing import Any

from ding_dist.config.ding.core import (
    MISSING,
    NO_CLIP,
    Translator,
    encoder_sizes,
    int_at_least,
    iteration_counts,
    translates,
)
from ding_dist.config.errors import ConfigError
from ding_dist.config.rules import short_repr


@translates("ppo", on_policy=True)
def _ppo(t: Translator) -> None:
    d = "DI-engine's PPO default"
    t.ignore(
        "policy.learn.update_per_collect",
        "DI-engine's on-policy pipeline (serial_pipeline_onpolicy) trains once per collect, epoch_per_collect epochs; "
        "its PPO does not read update_per_collect",
    )
    _lr_scheduler(t)
    t.ignore("policy.collect.collector_env_num", "not read by DI-engine's PPO; the collector's envs are "
             "env.collector_env_num")  # fmt: skip
    _vac_model(t, "PPO")
    ppo_init = t.take("policy.learn.ppo_param_init", True)
    if ppo_init:
        t.put("policy.model.log_std_init", -0.5)
    for key, value in (
        ("epoch_per_collect", 10),
        ("learning_rate", 3e-4),
        ("value_weight", 0.5),
        ("entropy_weight", 0.0),
        ("clip_ratio", 0.2),
        ("adv_norm", True),
    ):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    clip = t.out["policy.learn.clip_ratio"]
    t.put("policy.learn.value_clip_ratio", clip)
    t.report.add(
        "default", f"policy.learn.value_clip_ratio={clip!r} (DI-engine's PPO clips the value loss by clip_ratio)"
    )
    clip_type = t.require("policy.learn.grad_clip_type", ("clip_norm", None), "only gradient-norm clipping")
    clip_value = t.take("policy.learn.grad_clip_value", 0.5)
    t.put("policy.learn.grad_clip_norm", NO_CLIP if clip_type is None else clip_value)
    t.report.add(
        "mapped", f"policy.learn.grad_clip_type/value -> grad_clip_norm={None if clip_type is None else clip_value!r}"
    )
    value_norm = t.take("policy.learn.value_norm", True)
    recompute = t.take("policy.recompute_adv", True)
    lacking = [name for name, on in (("value_norm", value_norm), ("recompute_adv", recompute)) if on]
    if lacking:
        t.report.add("differs", f"{', '.join(lacking)}=True: not implemented here (advantages once per collect)")
    if t.take("policy.learn.ignore_done", False):
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.require("policy.nstep_return", (False,), "ding_dist's PPO uses GAE returns")
    t.ignore("policy.transition_with_policy_data", "rollouts always keep log-probs and values")
    for key, value in (("discount_factor", 0.99), ("gae_lambda", 0.95)):
        t.default(f"policy.collect.{key}", f"policy.collect.{key}", value, d)
    n_sample = t.take("policy.collect.n_sample", MISSING)
    if n_sample is MISSING:
        raise ConfigError(
            "DI-engine config key 'policy.collect.n_sample' is required for PPO (DI-engine has no default)"
        )
    t.put("policy.collect.n_sample", int_at_least("policy.collect.n_sample", n_sample, 1))
    t.report.add("same", "policy.collect.n_sample")
    if "policy.learn.batch_size" not in t.out:
        t.put("policy.learn.batch_size", 64)
    iteration_counts(t, 1, n_sample, "1 train iter (all epochs)")


def _lr_scheduler(t: Translator) -> None:
    """DI-engine's PPO ``learn.lr_scheduler`` (``epoch_num``, ``min_lr_lambda``): a LambdaLR stepped once per train
    call, i.e. per collect, ``lr * max(1 - k * (1 - min_lr_lambda) / epoch_num, min_lr_lambda)`` at collect ``k``."""
    if t.take("policy.learn.lr_scheduler", None) is None and not t.under("policy.learn.lr_scheduler"):
        return
    given = {key: t.take(f"policy.learn.lr_scheduler.{key}", None) for key in ("epoch_num", "min_lr_lambda")}
    if given["epoch_num"] is None or given["min_lr_lambda"] is None:
        raise ConfigError("DI-engine config key 'policy.learn.lr_scheduler' needs epoch_num and min_lr_lambda "
                          "(DI-engine's PPO reads both)")  # fmt: skip
    n = int_at_least("policy.learn.lr_scheduler.epoch_num", given["epoch_num"], 1)
    low = given["min_lr_lambda"]
    if isinstance(low, bool) or not isinstance(low, (int, float)) or not 0 <= low <= 1:
        raise ConfigError(f"DI-engine config key 'policy.learn.lr_scheduler.min_lr_lambda' must be in [0, 1], got "
                          f"{short_repr(low)}")  # fmt: skip
    t.put("policy.learn.lr_decay_collects", n)
    t.put("policy.learn.lr_decay_min_factor", float(low))
    t.report.add("mapped", f"policy.learn.lr_scheduler(epoch_num={n}, min_lr_lambda={low!r}) -> "
                 f"policy.learn.lr_decay_collects={n}, lr_decay_min_factor={float(low)!r} (linear, once per collect, "
                 "as DI-engine's LambdaLR)")  # fmt: skip


#: DI-engine files give activations as torch modules (``nn.Tanh()``): their class names -> ours.
_ACTIVATION_NAMES = {"ReLU": "relu", "Tanh": "tanh", "ELU": "elu", "GELU": "gelu"}


def _activation_name(t: Translator, value: Any) -> str:
    """``policy.model.activation`` of a DI-engine file (None: DI-engine's ReLU) as one of our activation names."""
    if value is None:
        return "relu"
    name = _ACTIVATION_NAMES.get(type(value).__name__) if type(value).__module__.startswith("torch.nn") else None
    if name is None:
        raise ConfigError(
            f"DI-engine config key 'policy.model.activation' = {short_repr(value)} cannot be honoured by ding_dist: "
            f"expected one of nn.{'(), nn.'.join(_ACTIVATION_NAMES)}()"
        )
    return name


def _vac_model(t: Translator, name: str) -> None:
    """DI-engine's VAC network (a shared encoder, actor and critic heads) -> our separate actor and critic MLPs."""
    t.require(
        "policy.action_space", ("discrete", "continuous"), f"ding_dist's {name} has Categorical and Gaussian heads"
    )
    t.require("policy.model.action_space", ("discrete", "continuous"), "only discrete and continuous actions")
    t.ignore("policy.continuous", "taken from the env's action space")
    encoder = encoder_sizes(t)
    actor = (t.take("policy.model.actor_head_hidden_size", 64), t.take("policy.model.actor_head_layer_num", 1))
    critic = (t.take("policy.model.critic_head_hidden_size", 64), t.take("policy.model.critic_head_layer_num", 1))
    share = t.take("policy.model.share_encoder", True)
    t.ignore("policy.model.sigma_type", "a learned state-independent log-std")
    t.ignore("policy.model.bound_type", "Gaussian samples are clipped to the env's bounds")
    hidden = encoder + [actor[0]] * actor[1]
    t.put("policy.model.hidden_sizes", hidden)
    activation = _activation_name(t, t.take("policy.model.activation", None))
    t.put("policy.model.activation", activation)
    t.report.add(
        "mapped",
        f"policy.model encoder={encoder} + actor head {actor[0]} x {actor[1]} -> hidden_sizes={hidden}, "
        f"activation={activation!r}",
    )
    if critic != actor:
        t.report.add("differs", f"critic head {critic[0]} x {critic[1]}: the critic uses hidden_sizes={hidden} too")
    if t.image_obs:  # PPO's image network: CleanRL's, whatever the head sizes
        t.report.add("differs", "on images: one CNN trunk with a 512-unit layer and linear actor and critic heads "
                     f"here; DI-engine's VAC: a {encoder[-1]}-unit layer, heads {actor[0]} x {actor[1]}")  # fmt: skip
    elif share:
        t.report.add("differs", "share_encoder=True: actor and critic are separate MLPs of hidden_sizes here")


@translates("a2c", on_policy=True)
def _a2c(t: Translator) -> None:
    d = "DI-engine's A2C default"
    _vac_model(t, "A2C")
    t.require("policy.learn.update_per_collect", (1,), "DI-engine's A2C takes one step per collect")
    t.ignore("policy.learn.epoch_per_collect", "DI-engine's A2C never reads it (one pass over each collect)")
    if "policy.learn.batch_size" in t.out:  # DI-engine's on-policy pipeline trains once on the whole collect
        t.out.pop("policy.learn.batch_size")
        t.report.add("ignored", "policy.learn.batch_size: A2C takes one step on the whole rollout, as DI-engine's")
    for key, value in (("learning_rate", 1e-3), ("value_weight", 0.5), ("entropy_weight", 0.01)):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    if t.has("policy.learn.adv_norm"):  # DI-engine 0.5.3's name; older files: normalize_advantage
        t.same("policy.learn.adv_norm")
        t.ignore("policy.learn.normalize_advantage", "DI-engine 0.5.3's A2C reads learn.adv_norm")
    else:
        t.default("policy.learn.normalize_advantage", "policy.learn.adv_norm", False, d)
    t.default("policy.learn.grad_norm", "policy.learn.grad_clip_norm", 0.5, d)
    betas = t.take("policy.learn.betas", (0.9, 0.999))
    if not (isinstance(betas, (list, tuple)) and len(betas) == 2 and all(0 <= float(b) < 1 for b in betas)):
        raise ConfigError(f"DI-engine config key 'policy.learn.betas' must be two numbers in [0, 1), got "
                          f"{short_repr(betas)}")  # fmt: skip
    t.put("policy.learn.betas", [float(b) for b in betas])
    t.put("policy.learn.eps", float(t.take("policy.learn.eps", 1e-8)))
    t.report.add("mapped" if t.has("policy.learn.betas") else "default", f"policy.learn.betas={list(betas)}, "
                 f"eps={t.out['policy.learn.eps']!r}: Adam's (DI-engine's A2C optimizer)")  # fmt: skip
    if t.take("policy.learn.ignore_done", False):
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.require("policy.collect.nstep_return", (False,), "ding_dist's A2C uses GAE returns")
    t.ignore("policy.collect.nstep", "used only with nstep_return")
    t.ignore("policy.learn.discount_factor", "DI-engine's A2C reads policy.collect.discount_factor")
    t.ignore_under("policy.other.replay_buffer", "DI-engine's on-policy buffer; rollouts go straight to the learner")
    for key, value in (("discount_factor", 0.9), ("gae_lambda", 0.95)):
        t.default(f"policy.collect.{key}", f"policy.collect.{key}", value, d)
    n_sample = t.take("policy.collect.n_sample", MISSING)
    if n_sample is MISSING:
        raise ConfigError(
            "DI-engine config key 'policy.collect.n_sample' is required for A2C (DI-engine has no default)"
        )
    t.put("policy.collect.n_sample", int_at_least("policy.collect.n_sample", n_sample, 1))
    t.report.add("same", "policy.collect.n_sample")
    iteration_counts(t, 1, n_sample, "1 train iter per collect")


@translates("impala", on_policy=True, trajectories=True)
def _impala(t: Translator) -> None:
    """DI-engine's IMPALA (trajectories of ``unroll_len`` steps in a replay, ``update_per_collect`` V-trace updates
    on ``batch_size`` of them) onto ours (rollouts of ``unroll_len`` steps per env, learned ``epoch_per_collect``
    times): the same V-trace horizon and the same number of uses of each collected step."""
    d = "DI-engine's IMPALA default"
    _vac_model(t, "IMPALA")
    top = t.take("policy.unroll_len", 32)  # DI-engine 0.5.3's files name the trajectory length at the policy's top
    unroll = t.take("policy.collect.unroll_len", top)
    learn_unroll = t.take("policy.learn.unroll_len", unroll)
    if learn_unroll != unroll:
        raise ConfigError(
            f"DI-engine config keys 'policy.learn.unroll_len' = {short_repr(learn_unroll)} and "
            f"'policy.collect.unroll_len' = {short_repr(unroll)} cannot be honoured: one V-trace horizon here"
        )
    unroll = int_at_least("policy.collect.unroll_len", unroll, 1)
    envs = int(t.out.get("env.collector_env_num", 8))
    n_traj = int_at_least("policy.collect.n_sample", t.take("policy.collect.n_sample", 16), 1)
    upc = int_at_least("policy.learn.update_per_collect", t.take("policy.learn.update_per_collect", 4), 1)
    batch = int_at_least("policy.learn.batch_size", t.take("policy.learn.batch_size", 16), 1)
    n_sample = unroll * envs  # one rollout: unroll_len steps of every env
    epochs = max(1, round(upc * batch / n_traj))  # DI-engine: each trajectory used upc * batch / n_traj times
    minibatch = min(batch * unroll, n_sample)
    t.put("policy.collect.n_sample", n_sample)
    t.put("policy.learn.epoch_per_collect", epochs)
    t.put("policy.learn.batch_size", minibatch)
    t.report.add(
        "converted",
        f"policy.collect.unroll_len={unroll}, n_sample={n_traj} trajectories, learn.update_per_collect={upc}, "
        f"batch_size={batch} trajectories -> rollouts of {unroll} steps per env (policy.collect.n_sample={n_sample} "
        f"with {envs} envs), policy.learn.epoch_per_collect={epochs} passes (each step used {epochs} times, as "
        f"DI-engine's replay uses it on average), minibatches of policy.learn.batch_size={minibatch} steps",
    )
    t.report.add("differs", "DI-engine replays trajectories up to max_use times; here each rollout is learned "
                 "right after it is collected (with actors: V-trace corrects their lag)")  # fmt: skip
    t.ignore_under("policy.other.replay_buffer", "rollouts go straight to the learner (V-trace, no trajectory replay)")
    t.ignore(
        "policy.random_collect_size",
        "DI-engine's serial pipeline first puts that many random-action steps in its trajectory replay; with no "
        "replay here, training starts from the policy's own first rollout",
    )
    t.require("policy.nstep", (1,), "V-trace targets")
    gamma = t.take("policy.learn.discount_factor", t.take("policy.discount_factor", 0.99))
    collect_gamma = t.take("policy.collect.discount_factor", gamma)
    if collect_gamma != gamma:
        raise ConfigError(f"DI-engine config keys 'policy.learn.discount_factor' = {short_repr(gamma)} and "
                          f"'policy.collect.discount_factor' = {short_repr(collect_gamma)} cannot be honoured: one "
                          "discount here")  # fmt: skip
    t.put("policy.collect.discount_factor", gamma)
    t.report.add("same", f"policy.learn.discount_factor={gamma!r} -> policy.collect.discount_factor")
    t.ignore("policy.collect.gae_lambda", "IMPALA's targets are V-trace's (policy.learn.lambda_)")
    for key, ours, value in (("learning_rate", "learning_rate", 5e-4), ("entropy_weight", "entropy_weight", 1e-4),
                             ("lambda_", "vtrace_lambda", 0.95), ("rho_clip_ratio", "rho_bar", 1.0),
                             ("c_clip_ratio", "c_bar", 1.0)):  # fmt: skip
        t.default(f"policy.learn.{key}", f"policy.learn.{ours}", value, d)
    # DI-engine's critic loss is value_weight * MSE (ding/rl_utils/vtrace.py), ours value_weight * 0.5 * MSE
    # (DeepMind's): twice the weight here trains the critic as DI-engine does.
    given = t.has("policy.learn.value_weight")
    value_weight = t.take("policy.learn.value_weight", 0.5)
    if isinstance(value_weight, bool) or not isinstance(value_weight, (int, float)) or value_weight < 0:
        raise ConfigError(
            f"DI-engine config key 'policy.learn.value_weight' must be a number >= 0, got {short_repr(value_weight)}"
        )
    t.put("policy.learn.value_weight", 2 * value_weight)
    t.report.add(
        "converted",
        f"policy.learn.value_weight={short_repr(value_weight)}{'' if given else f' ({d})'} -> "
        f"policy.learn.value_weight={short_repr(2 * value_weight)} (DI-engine's critic loss is value_weight * MSE, "
        "ours value_weight * 0.5 * MSE: the same critic gradient)",
    )
    rho_pg = t.take("policy.learn.rho_pg_clip_ratio", 1.0)
    if rho_pg != t.out["policy.learn.rho_bar"]:
        raise ConfigError(
            f"DI-engine config key 'policy.learn.rho_pg_clip_ratio' = {short_repr(rho_pg)} cannot be honoured: the "
            "policy gradient's importance weights are clipped at rho_clip_ratio here"
        )
    # DI-engine's IMPALA hands learn.grad_clip_type (default None: no clipping) and learn.clip_value to its Adam
    clip_type = t.require("policy.learn.grad_clip_type", ("clip_norm", None), "only gradient-norm clipping")
    clip_value = t.take("policy.learn.clip_value", 0.5)
    clip_norm = clip_value if clip_type == "clip_norm" else None
    t.put("policy.learn.grad_clip_norm", NO_CLIP if clip_norm is None else clip_norm)
    t.report.add("mapped", f"policy.learn.grad_clip_type/clip_value -> grad_clip_norm={short_repr(clip_norm)}")
    t.put("policy.learn.adv_norm", False)
    iteration_counts(t, upc, n_sample, f"{upc} train iters per collect")


@translates("ppo_offpolicy", on_policy=False)  # DI-engine's on_policy=False; ours hands it rollouts, it replays
def _ppo_offpolicy(t: Translator) -> None:
    """DI-engine's ``PPOOffPolicy``: GAE at collection, ``update_per_collect`` clipped steps on replayed samples."""
    d = "DI-engine's PPOOffPolicy default"
    _vac_model(t, "off-policy PPO")
    t.ignore("policy.learn.ppo_param_init", "orthogonal initialization always (PPO's network)")
    for key, value in (("update_per_collect", 5), ("learning_rate", 1e-3), ("value_weight", 0.5),
                       ("entropy_weight", 0.01), ("clip_ratio", 0.2), ("adv_norm", False)):  # fmt: skip
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    upc = int_at_least("policy.learn.update_per_collect", t.out["policy.learn.update_per_collect"], 1)
    clip = t.out["policy.learn.clip_ratio"]
    t.put("policy.learn.value_clip_ratio", clip)
    t.report.add("default", f"policy.learn.value_clip_ratio={clip!r} (DI-engine's ppo_error clips the value by it)")
    clip_type = t.require("policy.learn.grad_clip_type", ("clip_norm", None), "only gradient-norm clipping")
    clip_value = t.take("policy.learn.grad_clip_value", 0.5)
    t.put("policy.learn.grad_clip_norm", NO_CLIP if clip_type is None else clip_value)
    t.report.add(
        "mapped", f"policy.learn.grad_clip_type/value -> grad_clip_norm={None if clip_type is None else clip_value!r}"
    )
    t.require("policy.learn.weight_decay", (0, 0.0), "Adam without weight decay")
    if t.take("policy.learn.value_norm", True):
        t.report.add("differs", "value_norm=True (DI-engine's default): values are learned unnormalized here")
    if t.take("policy.learn.ignore_done", False):
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.require("policy.nstep_return", (False,), "ding_dist's off-policy PPO uses GAE returns")
    t.ignore("policy.nstep", "used only with nstep_return")
    t.ignore("policy.learn.nstep", "not read by DI-engine's PPOOffPolicy (its nstep is policy.nstep)")
    t.ignore("policy.learn.nstep_return", "not read by DI-engine's PPOOffPolicy (it reads policy.nstep_return)")
    t.ignore("policy.transition_with_policy_data", "rollouts always keep log-probs and values")
    for key, value in (("discount_factor", 0.99), ("gae_lambda", 0.95)):
        t.default(f"policy.collect.{key}", f"policy.collect.{key}", value, d)
    t.default("policy.other.replay_buffer.replay_buffer_size", "policy.other.replay_buffer.replay_buffer_size",
              10000, d)  # fmt: skip
    n_sample = t.take("policy.collect.n_sample", MISSING)
    if n_sample is MISSING:
        raise ConfigError("DI-engine config key 'policy.collect.n_sample' is required for off-policy PPO")
    t.put("policy.collect.n_sample", int_at_least("policy.collect.n_sample", n_sample, 1))
    t.report.add("same", "policy.collect.n_sample")
    if "policy.learn.batch_size" not in t.out:
        t.put("policy.learn.batch_size", 64)
    iteration_counts(t, upc, n_sample, f"{upc} train iters per collect")


@translates("ppg_offpolicy", on_policy=False)  # DI-engine's on_policy=False; ours hands it rollouts, it replays
def _ppg_offpolicy(t: Translator) -> None:
    """DI-engine's ``PPGOffPolicy``: a policy ring and a value ring, a policy phase and a periodic auxiliary phase."""
    d = "DI-engine's PPGOffPolicy default"
    _vac_model(t, "PPG")
    for key, value in (("update_per_collect", 5), ("learning_rate", 1e-3), ("value_weight", 0.5),
                       ("entropy_weight", 0.01), ("clip_ratio", 0.2), ("adv_norm", False), ("aux_freq", 5),
                       ("aux_train_epoch", 6), ("aux_bc_weight", 1.0)):  # fmt: skip
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    upc = int_at_least("policy.learn.update_per_collect", t.out["policy.learn.update_per_collect"], 1)
    t.report.add("default", "policy.learn.grad_clip_norm=None (DI-engine's PPG does not clip gradients)")
    t.ignore("policy.learn.beta_weight", "not read by DI-engine 0.5.3's PPG")
    t.ignore("policy.learn.epochs_aux", "not read by DI-engine 0.5.3's PPG (its auxiliary epochs: aux_train_epoch)")
    t.report.add("differs", "the auxiliary phase's KL is the full KL(pi_old || pi) over the actions (the paper's); "
                 "DI-engine's ppg_joint_error takes kl_div of the taken action's log-probabilities")  # fmt: skip
    if t.take("policy.learn.ignore_done", False):
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.ignore("policy.transition_with_policy_data", "rollouts always keep log-probs and values")
    for key, value in (("discount_factor", 0.99), ("gae_lambda", 0.95)):
        t.default(f"policy.collect.{key}", f"policy.collect.{key}", value, d)
    t.ignore("policy.other.replay_buffer.multi_buffer", "PPG always keeps a policy ring and a value ring")
    for ring in ("policy", "value"):
        key = f"policy.other.replay_buffer.{ring}.replay_buffer_size"
        t.default(key, key, 1000, d)
        max_use = t.take(f"policy.other.replay_buffer.{ring}.max_use", float("inf"))
        if max_use != float("inf"):
            t.report.add("differs", f"policy.other.replay_buffer.{ring}.max_use={short_repr(max_use)}: no per-sample "
                         "use limit here; a sample leaves its ring when it is overwritten")  # fmt: skip
    n_sample = t.take("policy.collect.n_sample", MISSING)
    if n_sample is MISSING:
        raise ConfigError("DI-engine config key 'policy.collect.n_sample' is required for PPG")
    t.put("policy.collect.n_sample", int_at_least("policy.collect.n_sample", n_sample, 1))
    t.report.add("same", "policy.collect.n_sample")
    if "policy.learn.batch_size" not in t.out:
        t.put("policy.learn.batch_size", 64)
    iteration_counts(t, upc, n_sample, f"{upc} train iters per collect")
