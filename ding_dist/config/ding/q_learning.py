"""DI-engine's Q-learning family: DQN, C51, QR-DQN, MDQN, IQN, Rainbow, SQL, FQF, SQN and BDQ.

They share DQN's keys (encoder and head, target network, epsilon-greedy exploration, replay and its priority),
each with its policy's DI-engine 0.5.3 defaults; :func:`q_family` maps them and the translators add what their
policy has of its own (atoms, quantiles, Munchausen terms, branches).

Example:
    >>> from ding_dist.config.ding import translate_ding_config
    >>> c = {"env": {"type": "cartpole"}, "policy": {"type": "c51"}}
    >>> ours, *_ = translate_ding_config({"policy": {"collect": {"n_sample": 8}}}, c)
    >>> ours["policy"]["model"]["n_atom"], ours["policy"]["discount_factor"]
    (51, 0.97)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ding_dist.config.ding.core import (
    NO_CLIP,
    Translator,
    encoder_sizes,
    int_at_least,
    iteration_counts,
    translates,
)
from ding_dist.config.errors import ConfigError
from ding_dist.config.rules import short_repr


@translates("dqn", on_policy=False, priority=True)
def _dqn(t: Translator) -> None:
    d = "DI-engine's DQN default"
    t.default("policy.discount_factor", "policy.discount_factor", 0.97, d)
    t.default("policy.nstep", "policy.nstep", 1, d)
    encoder = encoder_sizes(t)
    dueling = t.take("policy.model.dueling", True)
    head = t.take("policy.model.head_hidden_size", None) or encoder[-1]
    layers = t.take("policy.model.head_layer_num", 1)
    t.require("policy.model.dropout", (None,), "ding_dist's Q-network has no dropout")
    t.require("policy.model.norm_type", (None,), "ding_dist's Q-network has no normalization layers")
    if dueling:
        if layers != 1 or head != encoder[-1]:
            raise ConfigError(
                "DI-engine config keys 'policy.model.head_hidden_size'/'head_layer_num' cannot be honoured with "
                f"dueling: ding_dist's dueling head has one hidden layer of the encoder's width ({encoder[-1]})"
            )
        hidden = encoder
    else:  # DI-engine's plain head adds head_layer_num hidden layers before the output
        hidden = encoder + [head] * int_at_least("policy.model.head_layer_num", layers, 0)
    t.put("policy.model.hidden_sizes", hidden)
    t.put("policy.model.dueling", bool(dueling))
    t.put("policy.model.activation", "relu")
    t.report.add(
        "mapped",
        f"policy.model encoder_hidden_size_list={encoder}, dueling={dueling!r} -> policy.model.hidden_sizes={hidden}, "
        f"dueling={bool(dueling)!r} (ReLU)",
    )
    t.default("policy.learn.learning_rate", "policy.learn.learning_rate", 1e-3, d)
    upc = t.default("policy.learn.update_per_collect", "policy.learn.update_per_collect", 3, d)
    t.default("policy.learn.target_update_freq", "policy.learn.target_update_freq", 100, d)
    t.ignore(
        "policy.learn.target_theta",
        "DI-engine's DQN uses target_update_freq (hard copies) whenever it is set, and its default sets it",
    )
    t.put("policy.learn.target_theta", None)
    ignore_done = t.take("policy.learn.ignore_done", False)
    if ignore_done:
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.put("policy.learn.loss", "mse")
    t.put("policy.learn.grad_clip_norm", NO_CLIP)
    t.put("policy.learn.double", True)
    t.report.add(
        "default", f"policy.learn.loss='mse', double=True, grad_clip_norm={NO_CLIP:g} (DI-engine's DQN: no clipping)"
    )
    n_sample = t.default("policy.collect.n_sample", "policy.collect.n_sample", 8, d)
    batch = t.out.get("policy.learn.batch_size", 64)
    t.put("policy.learn.batch_size", batch)
    random_collect = t.take("policy.random_collect_size", 0)
    starts = max(int(batch), int(random_collect))
    t.put("policy.learn.learning_starts", starts)
    t.report.add("converted", f"policy.learn.learning_starts={starts} (DI-engine trains once the buffer holds a batch)")
    for key, value in (("type", "exp"), ("start", 0.95), ("end", 0.1), ("decay", 10000)):
        t.default(f"policy.other.eps.{key}", f"policy.other.eps.{key}", value, d)
    t.default(
        "policy.other.replay_buffer.replay_buffer_size", "policy.other.replay_buffer.replay_buffer_size", 10000, d
    )
    priority_replay(t, d)
    iteration_counts(t, int_at_least("policy.learn.update_per_collect", upc, 1), n_sample, f"{upc} train iters")


def priority_replay(t: Translator, d: str, on: bool = False) -> None:
    """DI-engine's prioritized replay keys, same meaning (its advanced buffer's alpha, beta and anneal_step, counted
    in sample calls as ours); ``on``: the policy's DI-engine default for ``priority`` and ``priority_IS_weight``."""
    t.default("policy.priority", "policy.priority", on, d)
    t.default("policy.priority_IS_weight", "policy.priority_IS_weight", on, d)
    for key, value in (("alpha", 0.6), ("beta", 0.4), ("anneal_step", 100_000)):
        path = f"policy.other.replay_buffer.{key}"
        t.default(path, path, value, "DI-engine's prioritized buffer default")


def _q_family(
    t: Translator,
    name: str,
    defaults: Mapping[str, Any],
    dueling: bool = False,
    split_head: bool = False,
    always_dueling: bool = False,
    lr_key: str = "policy.learn.learning_rate",
) -> None:
    """The keys DI-engine's value-based policies (C51, QR-DQN, MDQN, IQN) share with its DQN, with the policy's
    own ``defaults`` (``discount_factor``, ``nstep``, ``learning_rate``, ``update_per_collect``,
    ``target_update_freq``, ``replay_buffer_size``, ``n_sample``: None where DI-engine has none); ``dueling``:
    DI-engine's default for ``model.dueling`` (its DQN network), else the model has a plain head; ``split_head``:
    the head's hidden layers go to ``model.head_hidden_sizes`` (IQN: they follow the quantile embedding);
    ``always_dueling``: a dueling head with no ``model.dueling`` key (Rainbow); ``lr_key``: the DI-engine key of the
    learning rate (FQF's ``learning_rate_quantile``). ``defaults`` may also hold ``eps``
    (type, start, end, decay), ``batch_size`` and ``random_collect_size`` where they differ from DQN's."""
    d = f"DI-engine's {name} default"
    t.default("policy.discount_factor", "policy.discount_factor", defaults["discount_factor"], d)
    t.default("policy.nstep", "policy.nstep", defaults["nstep"], d)
    encoder = encoder_sizes(t)
    head = t.take("policy.model.head_hidden_size", None) or encoder[-1]
    layers = int_at_least("policy.model.head_layer_num", t.take("policy.model.head_layer_num", 1), 0)
    t.require("policy.model.dropout", (None,), f"ding_dist's {name} network has no dropout")
    t.require("policy.model.norm_type", (None,), f"ding_dist's {name} network has no normalization layers")
    if always_dueling or (dueling and t.take("policy.model.dueling", True)):
        if layers != 1 or head != encoder[-1]:
            raise ConfigError(
                "DI-engine config keys 'policy.model.head_hidden_size'/'head_layer_num' cannot be honoured with "
                f"dueling: ding_dist's dueling head has one hidden layer of the encoder's width ({encoder[-1]})"
            )
        hidden, head_text = encoder, "a dueling head"
        if not always_dueling:
            t.put("policy.model.dueling", True)
    elif split_head:  # IQN: the encoder's features times the quantile embedding, then the head's layers
        if head != encoder[-1]:
            raise ConfigError(
                "DI-engine config key 'policy.model.head_hidden_size' cannot be honoured: the quantile embedding "
                f"multiplies the encoder's features, so the head has the encoder's width ({encoder[-1]})"
            )
        hidden, head_text = encoder, f"the quantile embedding, then {layers} hidden layer(s) of {head}"
        t.put("policy.model.head_hidden_sizes", [head] * layers)
    else:  # the head's hidden layers follow the encoder's
        hidden, head_text = encoder + [head] * layers, f"a plain head of {layers} hidden layer(s)"
        if dueling:
            t.put("policy.model.dueling", False)
    t.put("policy.model.hidden_sizes", hidden)
    t.put("policy.model.activation", "relu")
    t.report.add("mapped", f"policy.model encoder={encoder}, {head_text} -> policy.model.hidden_sizes={hidden} (ReLU)")
    t.default(lr_key, "policy.learn.learning_rate", defaults["learning_rate"], d)
    upc = t.default("policy.learn.update_per_collect", "policy.learn.update_per_collect", defaults["upc"], d)
    t.default("policy.learn.target_update_freq", "policy.learn.target_update_freq", defaults["target_update_freq"], d)
    t.put("policy.learn.target_theta", None)
    if t.take("policy.learn.ignore_done", False):
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.put("policy.learn.grad_clip_norm", NO_CLIP)
    t.report.add("default", f"policy.learn.grad_clip_norm={NO_CLIP:g} (DI-engine's {name}: no clipping)")
    if defaults["n_sample"] is None and not t.has("policy.collect.n_sample"):
        raise ConfigError(f"DI-engine config key 'policy.collect.n_sample' is required for {name} (no default)")
    n_sample = t.default("policy.collect.n_sample", "policy.collect.n_sample", defaults["n_sample"], d)
    batch = t.out.get("policy.learn.batch_size", defaults.get("batch_size", 64))
    t.put("policy.learn.batch_size", batch)
    starts = max(int(batch), int(t.take("policy.random_collect_size", defaults.get("random_collect_size", 0))))
    t.put("policy.learn.learning_starts", starts)
    t.report.add(
        "converted",
        f"policy.learn.learning_starts={starts} (DI-engine trains once the buffer holds a batch and "
        "its random_collect_size)",
    )
    for key, value in zip(("type", "start", "end", "decay"), defaults.get("eps", ("exp", 0.95, 0.1, 10000))):
        t.default(f"policy.other.eps.{key}", f"policy.other.eps.{key}", value, d)
    size = defaults["replay_buffer_size"]
    t.default("policy.other.replay_buffer.replay_buffer_size", "policy.other.replay_buffer.replay_buffer_size", size, d)
    priority_replay(t, d, defaults.get("priority", False))
    iteration_counts(t, int_at_least("policy.learn.update_per_collect", upc, 1), n_sample, f"{upc} train iters")


#: DI-engine 0.5.3's defaults (its ding/policy/<name>.py) for the keys :func:`_q_family` reads.
_Q_DEFAULTS = dict(
    discount_factor=0.97, nstep=1, learning_rate=1e-3, upc=3, target_update_freq=100, replay_buffer_size=10000
)


@translates("c51", on_policy=False, priority=True)
def _c51(t: Translator) -> None:
    for key, value in (("v_min", -10), ("v_max", 10), ("n_atom", 51)):
        t.default(f"policy.model.{key}", f"policy.model.{key}", value, "DI-engine's C51 default")
    _q_family(t, "C51", {**_Q_DEFAULTS, "n_sample": None})


@translates("qrdqn", on_policy=False, priority=True)
def _qrdqn(t: Translator) -> None:
    t.default("policy.model.num_quantiles", "policy.model.num_quantiles", 32, "DI-engine's QR-DQN default")
    kappa = t.take("policy.learn.kappa", 1.0)
    t.put("policy.learn.kappa", 1.0)
    if kappa != 1.0:
        t.report.add("differs", f"policy.learn.kappa={short_repr(kappa)}: DI-engine's QR-DQN loss uses 1; so does this")
    _q_family(t, "QR-DQN", {**_Q_DEFAULTS, "n_sample": None})


@translates("mdqn", on_policy=False, priority=True)
def _mdqn(t: Translator) -> None:
    d = "DI-engine's MDQN default"
    t.default("policy.entropy_tau", "policy.entropy_tau", 0.03, d)
    t.default("policy.m_alpha", "policy.m_alpha", 0.9, d)
    t.require("policy.nstep", (1,), "Munchausen DQN learns from 1-step transitions (DI-engine's MDQN too)")
    if t.has("policy.learn.target_theta") and not t.has("policy.learn.target_update_freq"):
        raise ConfigError(
            "DI-engine config key 'policy.learn.target_theta' cannot be honoured: DI-engine's MDQN config always "
            "holds target_update_freq (default 100), which wins over target_theta; set target_update_freq instead"
        )
    t.ignore("policy.learn.target_theta", "DI-engine's MDQN uses target_update_freq (hard copies) whenever it is set")
    _q_family(t, "MDQN", {**_Q_DEFAULTS, "n_sample": 4}, dueling=True)


@translates("iqn", on_policy=False, priority=True)
def _iqn(t: Translator) -> None:
    d = "DI-engine's IQN default"
    t.default("policy.model.num_quantiles", "policy.model.num_quantiles", 32, d)
    t.default("policy.model.quantile_embedding_size", "policy.model.quantile_embedding_size", 128, d)
    t.require("policy.model.beta_function_type", ("uniform",), "ding_dist's IQN draws its fractions uniformly")
    t.default("policy.learn.kappa", "policy.learn.kappa", 1.0, d)
    t.ignore("policy.kappa", "DI-engine's IQN reads learn.kappa")
    t.report.add("differs", "acting: the mean over evenly spaced fractions here, over random ones in DI-engine")
    _q_family(t, "IQN", {**_Q_DEFAULTS, "n_sample": None}, split_head=True)


@translates("rainbow", on_policy=False, priority=True)
def _rainbow(t: Translator) -> None:
    d = "DI-engine's Rainbow default"
    for key, value in (("v_min", -10), ("v_max", 10), ("n_atom", 51)):
        t.default(f"policy.model.{key}", f"policy.model.{key}", value, d)
    t.report.add("differs", "noisy layers: acting and evaluation use their means, as DI-engine's collect/eval modes")
    t.ignore("policy.learn.iqn", "not read by DI-engine 0.5.3's Rainbow (C51's distributional loss, as here)")
    defaults = dict(
        discount_factor=0.99,
        nstep=3,
        learning_rate=1e-3,
        upc=1,
        target_update_freq=100,
        replay_buffer_size=100000,
        n_sample=None,
        batch_size=32,
        random_collect_size=0,  # 0.5.3's RainbowDQNPolicy leaves it out (commented): no random collect
        eps=("exp", 0.05, 0.05, 100000),
        priority=True,
    )
    _q_family(t, "Rainbow", defaults, always_dueling=True)


@translates("sql", on_policy=False, priority=True)
def _sql(t: Translator) -> None:
    t.default("policy.learn.alpha", "policy.learn.alpha", 0.1, "DI-engine's SQL default")
    if t.has("policy.learn.target_theta") and not t.has("policy.learn.target_update_freq"):
        raise ConfigError(
            "DI-engine config key 'policy.learn.target_theta' cannot be honoured: DI-engine's SQL copies its target "
            "every target_update_freq updates (default 100); set target_update_freq instead"
        )
    t.ignore("policy.learn.target_theta", "DI-engine's SQL copies its target every target_update_freq updates")
    t.report.add("differs", "an overflowing soft value is not replaced by +-20 (DI-engine's guard against inf)")
    _q_family(t, "SQL", {**_Q_DEFAULTS, "n_sample": None}, dueling=True)


@translates("fqf", on_policy=False, priority=True)
def _fqf(t: Translator) -> None:
    d = "DI-engine's FQF default"
    t.default("policy.model.num_quantiles", "policy.model.num_quantiles", 32, d)
    t.default("policy.model.quantile_embedding_size", "policy.model.quantile_embedding_size", 128, d)
    for key, value in (("learning_rate_fraction", 2.5e-9), ("ent_coef", 0.0), ("kappa", 1.0)):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    t.ignore("policy.kappa", "DI-engine's FQF reads learn.kappa")
    t.report.add("differs", "the fraction network steps with Adam here (a parameter group), RMSprop in DI-engine")
    t.report.add("differs", "Q-values weight each quantile by its fraction's width (the paper), DI-engine's average")
    _q_family(t, "FQF", {**_Q_DEFAULTS, "learning_rate": 5e-5, "n_sample": None}, split_head=True,
              lr_key="policy.learn.learning_rate_quantile")  # fmt: skip


@translates("sqn", on_policy=False)
def _sqn(t: Translator) -> None:
    d = "DI-engine's SQN default"
    encoder = encoder_sizes(t)
    dueling = t.take("policy.model.dueling", True)
    head = t.take("policy.model.head_hidden_size", None) or encoder[-1]
    layers = int_at_least("policy.model.head_layer_num", t.take("policy.model.head_layer_num", 1), 0)
    t.require("policy.model.dropout", (None,), "ding_dist's SQN networks have no dropout")
    t.require("policy.model.norm_type", (None,), "ding_dist's SQN networks have no normalization layers")
    if dueling and (layers != 1 or head != encoder[-1]):
        raise ConfigError(
            "DI-engine config keys 'policy.model.head_hidden_size'/'head_layer_num' cannot be honoured with "
            f"dueling: ding_dist's dueling head has one hidden layer of the encoder's width ({encoder[-1]})"
        )
    hidden = encoder if dueling else encoder + [head] * layers
    t.put("policy.model.hidden_sizes", hidden)
    t.put("policy.model.dueling", bool(dueling))
    t.put("policy.model.activation", "relu")
    t.report.add(
        "mapped", f"policy.model encoder={encoder}, dueling={dueling!r} -> two Q-networks, hidden_sizes={hidden}"
    )
    t.default("policy.learn.learning_rate_q", "policy.learn.learning_rate", 1e-3, d)
    for key, value in (("learning_rate_alpha", 1e-3), ("alpha", 0.2), ("target_entropy", 0.2), ("target_theta", 0.005)):
        t.default(f"policy.learn.{key}", f"policy.learn.{key}", value, d)
    t.default("policy.learn.discount_factor", "policy.discount_factor", 0.99, d)
    t.require("policy.collect.nstep", (1,), "DI-engine's SQN learns from 1-step transitions")
    t.put("policy.nstep", 1)
    upc = t.default("policy.learn.update_per_collect", "policy.learn.update_per_collect", 16, d)
    if not t.has("policy.collect.n_sample"):
        raise ConfigError("DI-engine config key 'policy.collect.n_sample' is required for SQN (no default)")
    n_sample = t.same("policy.collect.n_sample")
    batch = t.out.get("policy.learn.batch_size", 64)
    t.put("policy.learn.batch_size", batch)
    starts = max(int(batch), int(t.take("policy.random_collect_size", 0)))
    t.put("policy.learn.learning_starts", starts)
    t.report.add("converted", f"policy.learn.learning_starts={starts} (DI-engine trains once the buffer holds a batch)")
    if t.take("policy.learn.ignore_done", False):
        t.report.add("differs", "policy.learn.ignore_done=True: time-limit ends bootstrap here; terminations do not")
    t.put("policy.learn.grad_clip_norm", None)
    t.default("policy.other.eps.decay", "policy.other.eps.decay", 2000, d)
    for key in ("type", "start", "end"):
        t.ignore(f"policy.other.eps.{key}", "DI-engine's SQN reads only eps.decay (its Boltzmann-or-uniform rule)")
    t.report.add("converted", "acting: DI-engine's rule on its update count, here counted from env steps")
    size = "policy.other.replay_buffer.replay_buffer_size"
    t.default(size, size, 100_000, d)
    iteration_counts(t, int_at_least("policy.learn.update_per_collect", upc, 1), n_sample, f"{upc} train iters")


@translates("bdq", on_policy=False, priority=True)
def _bdq(t: Translator) -> None:
    d = "DI-engine's BDQ default"
    t.require("env.continuous", (False,), "DI-engine's BDQ acts on the discretized env (continuous=False)")
    t.default("policy.model.action_bins_per_branch", "policy.model.action_bins_per_branch", 2, d)
    if t.env_action_bins is not None:
        bins = t.out["policy.model.action_bins_per_branch"]
        if t.env_action_bins != bins:
            raise ConfigError(
                f"DI-engine config key 'env.action_bins_per_branch' = {short_repr(t.env_action_bins)} cannot be "
                f"honoured with policy.model.action_bins_per_branch = {short_repr(bins)}: one discretization here"
            )
        t.report.add("mapped", f"env.action_bins_per_branch={bins}: DI-engine's MujocoEnv maps bin i to "
                     f"2 i / {bins - 1} - 1 in [-1, 1]; here BDQ spaces its bins evenly over the Box bounds (the same "
                     "actions for [-1, 1] bounds)")  # fmt: skip
    t.same("policy.model.num_branches")
    layers = t.take("policy.model.layer_num", 3)
    for path in ("policy.model.a_layer_num", "policy.model.v_layer_num"):
        t.require(path, (None, layers), "the value stream and every branch have layer_num hidden layers here")
    t.put("policy.model.head_layer_num", int_at_least("policy.model.layer_num", layers, 0))
    t.report.add("mapped", f"policy.model.layer_num={layers} -> policy.model.head_layer_num (value and branches)")
    t.report.add("differs", "epsilon-greedy draws each branch's exploration separately")
    _q_family(t, "BDQ", {**_Q_DEFAULTS, "n_sample": None}, always_dueling=True)
