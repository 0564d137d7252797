"""The sections every DI-engine file has, whatever its policy: ``create_config`` and the policy's common keys.

:func:`create_section` checks ``create_config`` (the policy type is one with a translator, the env manager,
replay buffer and collector types are ones ding_dist has) and refuses DI-engine's reward models and the kinds
of RL ding_dist does not do, by name; :func:`common_policy` translates the keys every policy section may hold
(``cuda``, ``on_policy``, hooks, the evaluator) and refuses those no policy here honours.

Example:
    >>> from ding_dist.config.ding import Translator
    >>> t = Translator({}, {"env": {"type": "cartpole"}, "policy": {"type": "dqn"}}, "demo")
    >>> create_section(t)
    ('dqn', 'cartpole')
"""

from __future__ import annotations

import difflib

from ding_dist.config.ding.core import MISSING, TRANSLATORS, Translator, policies_with
from ding_dist.config.ding.envs import ENV_MANAGERS
from ding_dist.config.errors import ConfigError
from ding_dist.config.rules import short_repr

__all__ = ["common_policy", "create_section"]

#: How alike two names must be (difflib's ratio) for one to be suggested for the other: a typo, not a neighbour.
_CLOSE = 0.75
#: DI-engine policy types of kinds ding_dist has none of (it trains single-agent, model-free, online policies).
_OTHER_KINDS = {
    "offline or imitation learning (from a dataset or demonstrations)": (
        "bc", "bco", "bcq", "cql", "discrete_cql", "td3_bc", "iql", "edac", "dt", "ibc", "IL", "dqfd", "sqil_sac",
        "r2d3", "qgpo", "pd",
    ),
    "multi-agent RL": ("qmix", "wqmix", "qtran", "coma", "collaq", "atoc", "madqn", "happo", "mappo", "masac"),
    "model-based RL": ("dreamer", "mbsac", "stevesac"),
}  # fmt: skip


def _refuse_reward_model(t: Translator, policy: str) -> None:
    """DI-engine's reward models (RND, ICM, TREX, GAIL, ...: ``reward_model`` in either config) are one line."""
    kind = t.create.get("reward_model.type") or t.main.get("reward_model.type")
    if kind is None and not any(k.startswith("reward_model.") for k in (*t.create, *t.main)):
        return
    where = "create_config.reward_model" if any(k.startswith("reward_model.") for k in t.create) else "reward_model"
    name = f"reward model {kind!r}" if kind else "reward model"
    raise ConfigError(
        f"DI-engine config key {where!r} cannot be honoured: ding_dist has no reward models (DI-engine's RND, ICM, "
        f"TREX, GAIL, ...), so its {name} would be left out; remove reward_model from the file (and from "
        f"create_config) to train the plain {policy!r} policy on the env's reward"
    )


def create_section(t: Translator) -> tuple[str, str | None]:
    c = t.create
    for path in list(c):
        if path.endswith("import_names"):
            t.report.add("ignored", f"create_config.{path}: imports for DI-engine's registries, not needed here")
    policy = c.get("policy.type")
    if policy is None:
        raise ConfigError("create_config.policy.type is missing; DI-engine configs name the policy there")
    _refuse_reward_model(t, policy)
    if policy not in TRANSLATORS:
        kind = next((kind for kind, names in _OTHER_KINDS.items() if policy in names), None)
        close = difflib.get_close_matches(str(policy), list(TRANSLATORS), n=1, cutoff=_CLOSE)
        hint = f" (closest: {close[0]!r})" if close and kind is None else ""
        what = f": {policy!r} is DI-engine's {kind}, which ding_dist does not have;" if kind else ":"
        raise ConfigError(
            f"DI-engine config key 'create_config.policy.type' = {policy!r} cannot be honoured{what} ding_dist has "
            f"the policies {sorted(TRANSLATORS)}{hint}"
        )
    manager = c.get("env_manager.type", "base")
    if manager not in ENV_MANAGERS:
        raise ConfigError(
            f"DI-engine config key 'create_config.env_manager.type' = {manager!r} cannot be honoured; "
            f"known: {sorted(ENV_MANAGERS)}"
        )
    t.create_out.update({"env.type": "gymnasium", "env_manager.type": ENV_MANAGERS[manager], "policy.type": policy})
    if "env_manager.type" in c:
        t.report.add("mapped", f"create_config.env_manager.type={manager!r} -> {ENV_MANAGERS[manager]!r}")
    rb = c.get("replay_buffer.type")
    if rb is not None:
        if rb not in ("naive", "deque", "advanced", "replay"):
            raise ConfigError(
                f"DI-engine config key 'create_config.replay_buffer.type' = {rb!r} cannot be honoured: ding_dist "
                "has a uniform replay buffer ('naive', 'deque' or 'advanced' without priority)"
            )
        t.create_out["replay_buffer.type"] = "replay"
        t.report.add("mapped", f"create_config.replay_buffer.type={rb!r} -> replay buffer (by policy.priority)")
    allowed = {"env.type", "env.import_names", "env_manager.type", "policy.type", "policy.import_names"}
    allowed |= {"replay_buffer.type", "replay_buffer.import_names"}
    for ring in ("policy", "value") if policy == "ppg_offpolicy" else ():  # PPG's two buffers, a type each
        kind = c.get(f"replay_buffer.{ring}.type")
        if kind is not None:
            if kind not in ("naive", "deque", "advanced"):
                raise ConfigError(f"DI-engine config key 'create_config.replay_buffer.{ring}.type' = {kind!r} cannot "
                                  "be honoured: PPG's rings are uniform ('naive', 'deque' or 'advanced')")  # fmt: skip
            allowed.add(f"replay_buffer.{ring}.type")
            t.report.add("mapped", f"create_config.replay_buffer.{ring}.type={kind!r} -> PPG's {ring} ring (uniform)")
    collector = c.get("collector.type")
    if collector is not None:  # DI-engine's sample collector, or its episode collector for whole-episode policies
        episodes = policies_with("episodes")
        if collector not in ("sample", *(("episode",) if policy in episodes else ())):
            raise ConfigError(
                f"DI-engine config key 'create_config.collector.type' = {collector!r} cannot be honoured: ding_dist "
                "collects n_sample env steps per iteration ('episode' only for policies that learn from whole "
                f"episodes: {episodes})"
            )
        allowed |= {"collector.type", "collector.import_names"}
        t.report.add("mapped", f"create_config.collector.type={collector!r} -> rollouts of n_sample env steps")
    for path in c:
        if path not in allowed:
            close = difflib.get_close_matches(path, sorted(allowed), n=1, cutoff=_CLOSE)
            hint = f" (did you mean 'create_config.{close[0]}'?)" if close else ""
            raise ConfigError(f"DI-engine config key 'create_config.{path}' cannot be honoured by ding_dist{hint}")
    return policy, c.get("env.type")


def common_policy(t: Translator, policy: str) -> None:
    cuda = t.take("policy.cuda", False)
    device = "auto" if cuda else "cpu"
    t.put("policy.device", device)
    why = "the rank's GPU when there is one, else the CPU" if cuda else "DI-engine's default: no GPU"
    t.report.add(
        "mapped" if t.has("policy.cuda") else "default", f"policy.cuda={cuda!r} -> policy.device={device!r} ({why})"
    )
    for path in ("policy.multi_gpu", "policy.learn.multi_gpu"):
        if t.take(path, MISSING) is not MISSING:
            t.report.add("ignored", f"{path}: gradients are always synchronized when there is more than one process")
    entry = TRANSLATORS[policy]
    on_policy = t.take("policy.on_policy", entry.on_policy)
    if on_policy != entry.on_policy:
        raise ConfigError(f"DI-engine config key 'policy.on_policy' = {on_policy!r} cannot be honoured for {policy}")
    for path in ("policy.priority", "policy.priority_IS_weight"):
        if not entry.priority:
            t.require(path, (False,), f"prioritized replay is implemented for {policies_with('priority')} only")
    t.require("policy.multi_agent", (False,), "ding_dist has no multi-agent policies")
    if not entry.trajectories:  # IMPALA's unroll_len is its V-trace horizon (its translator)
        t.require("policy.collect.unroll_len", (1,), "ding_dist learns from single transitions (unroll_len=1)")
    if t.has("policy.collect.n_episode") and not entry.episodes:
        raise ConfigError(
            "DI-engine config key 'policy.collect.n_episode' cannot be honoured: ding_dist collects a fixed number "
            "of env steps per iteration (did you mean 'policy.collect.n_sample'?)"
        )
    t.require("policy.learn.resume_training", (False,), "resume a ding_dist run with --resume EXP_DIR")
    t.require("policy.learn.learner.hook.load_ckpt_before_run", ("",), "continue a run with --resume EXP_DIR")
    t.require("policy.learn.lr_scheduler", (None,), "ding_dist uses a constant learning rate")
    t.ignore("policy.load_path", "used by DI-engine's eval entry; here: ding-dist eval CONFIG --ckpt PATH")
    t.ignore("policy.type", "the policy is create_config.policy.type")
    t.ignore("policy.model.obs_shape", "taken from the env's observation space")
    t.ignore("policy.model.action_shape", "taken from the env's action space")
    t.ignore("policy.learn.learner.hook.save_ckpt_after_run", "a checkpoint is always written at the end")
    t.ignore_under("policy.other.commander", "DI-engine's serial commander has nothing to do here")
    t.ignore_under("policy.eval.evaluator.render", "no rendering")
    t.ignore("policy.eval.evaluator.figure_path", "no rendering")
    t.require("policy.eval.evaluator.type", ("interaction",), "ding_dist evaluates by playing episodes")
    t.require("policy.collect.collector.type", ("sample",), "ding_dist collects samples (n_sample)")
    t.ignore("policy.collect.collector.collect_print_freq", "progress is logged every other.log_freq env steps")
    for key in ("monitor", "periodic_thruput_seconds", "deepcopy", "enable_track_used_data", "type"):
        t.ignore_under(f"policy.other.replay_buffer.{key}", "replay-buffer bookkeeping, not sampling")
    max_use = t.take("policy.other.replay_buffer.max_use", float("inf"))
    if max_use != float("inf"):  # DI-engine's pendulum DDPG file sets 16, which its sampling rate rarely reaches
        t.report.add(
            "differs",
            f"policy.other.replay_buffer.max_use={short_repr(max_use)}: no per-sample use limit here; a sample "
            "leaves the buffer when it is overwritten",
        )
    t.same("policy.learn.batch_size")
    if t.has("policy.eval.evaluator.n_episode"):
        t.same("policy.eval.evaluator.n_episode", "env.n_evaluator_episode")
    if t.has("policy.eval.evaluator.stop_value"):
        t.same("policy.eval.evaluator.stop_value", "env.stop_value")
    for path in list(t.main):  # DI-engine's compiled configs carry a cfg_type marker per section
        if path.endswith("cfg_type"):
            t.used.add(path)
