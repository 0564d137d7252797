"""One-line meanings of config keys and the resolved-config table of ``ding-dist config show``.

:data:`KEY_MEANINGS` is the one source of what each key means: ``ding-dist config show CONFIG`` prints
it next to every key's value, type and default, and docs/rl.md's key tables can be generated from it
with :func:`markdown_table`. A key is looked up as ``"<policy type>:<dotted key>"`` first (keys whose
meaning depends on the algorithm), then as ``"<dotted key>"``.

Example:
    >>> rows = describe({"policy": {"learn": {"batch_size": 128}}}, {"policy": {"learn": {"batch_size": 64}}})
    >>> rows[0].key, rows[0].value, rows[0].default, rows[0].type
    ('policy.learn.batch_size', 128, 64, 'int')
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["KEY_MEANINGS", "KeyRow", "describe", "format_rows", "markdown_table", "meaning"]

KEY_MEANINGS: dict[str, str] = {
    "exp_name": "experiment name; the run goes to runs/<exp_name> unless --exp-dir is given",
    "seed": "random seed of envs, networks and sampling (rank r adds 1000 r)",
    # env
    "env.id": "gymnasium id; 'module:Id' imports module first",
    "env.entry_point": "'module:callable' returning an env (gymnasium or old-gym style) instead of env.id",
    "env.env_kwargs": "keyword arguments for the env's constructor",
    "env.max_episode_steps": "episode step limit (None: the env's own)",
    "env.collector_env_num": "training envs, the run's total (each of N ranks steps collector_env_num / N)",
    "env.evaluator_env_num": "evaluation envs (on rank 0)",
    "env.n_evaluator_episode": "episodes per evaluation",
    "env.stop_value": "stop once the evaluation return reaches this (None: never)",
    "env.atari": "Atari preprocessing options (None: the defaults for ALE ids)",
    "env.channels_first": "uint8 (H, W, C) image observations as (C, H, W), the CNN encoder's layout (e.g. CarRacing)",
    "env.reward_clip": "[low, high] (either None: unbounded): collector envs' rewards clipped into it; logged "
    "returns stay true (None: off)",
    "env.step_cost_ms": "artificial cost per env step in ms (benchmarks; 0: none)",
    "env.max_restarts": "restarts of one crashed collector env allowed within env.restart_window_s (then an error; "
    "0: no restarts, gymnasium's own vector env)",
    "env.restart_window_s": "window in seconds over which env.max_restarts counts one env's restarts",
    "env.sample_groups": "double-buffered sampling: collector envs in this many groups, one steps while the policy "
    "acts for the next (1: off; must divide each rank's collector envs)",
    # shared by every policy
    "policy.device": "'auto' (the rank's GPU when there is one, else CPU), 'cpu', 'cuda', 'cuda:N'",
    "policy.sync.algorithm": "gradient synchronization algorithm across ranks (docs/sync.md)",
    "policy.sync.options": "options of the synchronization algorithm",
    "policy.model": "network options (each policy defines its own keys)",
    "policy.collect.n_sample": "env steps per iteration, the run's total (each rank: n_sample / N)",
    "policy.learn.batch_size": "batch per update, the run's total (each rank: batch_size / N)",
    "policy.learn.learning_rate": "Adam learning rate",
    "policy.eval.eval_freq": "evaluate every this many global env steps (0: only at the end)",
    "policy.other.log_freq": "write metrics every this many global env steps",
    "policy.other.checkpoint.freq": "checkpoint every this many global env steps (0: off; always at the end)",
    "policy.other.checkpoint.every_minutes": "checkpoint every this many minutes of wall time (0: off)",
    "policy.other.checkpoint.keep_last": "checkpoints kept",
    # dqn
    "policy.discount_factor": "gamma",
    "policy.nstep": "n-step return length",
    "policy.model.hidden_sizes": "hidden layer sizes of the network(s)",
    "policy.model.dueling": "dueling Q-network head",
    "policy.model.activation": "activation of the hidden layers",
    "policy.learn.update_per_collect": "updates per collect.n_sample global env steps",
    "policy.learn.learning_starts": "global env steps before the first update",
    "policy.learn.target_update_freq": "hard target copy every K updates (when target_theta is None)",
    "policy.learn.target_theta": "soft target update rate per update (None: hard copies)",
    "policy.learn.double": "double DQN (online net picks, target net scores)",
    "policy.learn.loss": "'huber' or 'mse'",
    "policy.learn.grad_clip_norm": "gradient norm clip, applied after the sync (None: off)",
    "policy.other.eps.type": "epsilon-greedy schedule shape",
    "policy.other.eps.start": "epsilon at the first env step",
    "policy.other.eps.end": "epsilon after the decay",
    "policy.other.eps.decay": "global env steps of the decay",
    "policy.other.replay_buffer.replay_buffer_size": "replay capacity, the run's total (each rank keeps size / N)",
    "policy.other.replay_buffer.save_in_checkpoint": "each rank also writes ckpt/replay_rank{r}.pt",
    "policy.other.replay_buffer.frame_dedup": "store each frame once (None: for stacked uint8 frames; False: never)",
    "policy.other.replay_buffer.alpha": "prioritized replay: priority exponent (0: uniform)",
    "policy.other.replay_buffer.beta": "prioritized replay: initial importance-weight exponent",
    "policy.other.replay_buffer.anneal_step": "prioritized replay: draws over which beta rises to 1 (0: constant)",
    "policy.priority": "prioritized replay: sample by |TD error|, one replay over every rank's (or actor's) shard",
    "policy.priority_IS_weight": "weight each sample's loss by its importance weight (needs priority)",
    "policy.other.eps_ladder.enable": "Ape-X: actor i of N explores with base**(1 + alpha i / (N-1)), not the schedule",
    "policy.other.eps_ladder.base": "Ape-X: the base epsilon (actor 0's)",
    "policy.other.eps_ladder.alpha": "Ape-X: the ladder's exponent",
    # r2d2
    "policy.model.lstm_size": "R2D2: units of the LSTM between the encoder and the Q head",
    "policy.sequence.seq_len": "R2D2: steps per replayed sequence, its burn-in prefix included",
    "policy.sequence.burnin": "R2D2: first steps of a sequence that only rebuild the recurrent state (no gradient)",
    "policy.sequence.overlap": "R2D2: steps consecutive sequences of an episode share",
    "policy.priority_eta": "R2D2: a sequence's priority is eta max|d| + (1 - eta) mean|d|",
    "policy.value_rescale_eps": "R2D2: eps of the value rescaling h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x",
    "policy.other.replay_buffer.type": "R2D2: 'sequence', the replay of sequences with their recurrent start states",
    "r2d2:policy.learn.batch_size": "sequences per update, the run's total (each rank: batch_size / N)",
    "r2d2:policy.other.replay_buffer.replay_buffer_size": "replay capacity in steps (seq_len each sequence), the "
    "run's total",
    # ppo
    "ppo:policy.collect.n_sample": "rollout length per iteration, the run's total (each rank: n_sample / N)",
    "ppo:policy.learn.batch_size": "minibatch, the run's total (each rank: batch_size / N; the ragged tail of a "
    "shuffled rollout is dropped)",
    "policy.model.conv_channels": "on images: the three convolutions' channels (None: the Nature CNN's 32, 64, 64)",
    "policy.model.log_std_init": "initial Gaussian log-std for Box actions",
    "policy.model.obs_norm": "normalize vector observations with running statistics synchronized across ranks",
    "policy.collect.discount_factor": "gamma of GAE",
    "policy.collect.gae_lambda": "lambda of GAE",
    "policy.collect.preempt": "DD-PPO's straggler preemption: ranks slower than the others cut their rollout short",
    "policy.collect.preempt_fraction": "preempt once this fraction of the ranks finished a rollout (finished >= f N)",
    "policy.collect.preempt_min_share": "a preempted rank still collects at least this share of its rollout",
    "policy.learn.epoch_per_collect": "epochs over each rollout",
    "policy.learn.clip_ratio": "policy ratio clip",
    "policy.learn.value_clip_ratio": "value clip (None: off)",
    "policy.learn.value_weight": "value loss weight",
    "policy.learn.entropy_weight": "entropy bonus weight",
    "policy.learn.adv_norm": "normalize advantages with the statistics of the global minibatch (all ranks)",
    "policy.learn.lr_decay_collects": "linear learning-rate decay over this many collects, then "
    "lr_decay_min_factor x learning_rate (None: constant)",
    "policy.learn.lr_decay_min_factor": "the learning rate's final factor with lr_decay_collects",
    "policy.learn.betas": "Adam's betas",
    "policy.learn.eps": "Adam's eps",
    # sac
    "policy.model.actor_hidden_sizes": "hidden layer sizes of the actor",
    "policy.model.critic_hidden_sizes": "hidden layer sizes of each Q critic",
    "policy.model.log_std_min": "lower clamp of the actor's log-std",
    "policy.model.log_std_max": "upper clamp of the actor's log-std",
    "policy.learn.learning_rate_q": "Adam learning rate of the critics",
    "policy.learn.learning_rate_policy": "Adam learning rate of the actor",
    "policy.learn.learning_rate_alpha": "Adam learning rate of the entropy temperature",
    "policy.learn.alpha": "entropy temperature (initial value when auto_alpha)",
    "policy.learn.auto_alpha": "tune alpha so the policy entropy tracks target_entropy",
    "policy.learn.target_entropy": "entropy target of auto_alpha (None: -action dimensions)",
    # impala
    "policy.learn.rho_bar": "V-trace clip of the importance weights in the value targets",
    "policy.learn.c_bar": "V-trace clip of the trace coefficients",
    "policy.learn.vtrace_lambda": "V-trace lambda",
    # value-based: c51, qrdqn, mdqn, iqn, rainbow
    "policy.model.n_atom": "C51, Rainbow: atoms of the value distribution's support",
    "policy.model.v_min": "C51, Rainbow: the smallest atom of the support",
    "policy.model.v_max": "C51, Rainbow: the largest atom of the support",
    "policy.model.num_quantiles": "QR-DQN: quantiles per action, at the fractions (2i + 1) / (2N)",
    "iqn:policy.model.num_quantiles": "IQN: fractions drawn per sample for the prediction and for the target",
    "policy.model.quantile_embedding_size": "IQN: cosines cos(pi i tau) embedding each fraction",
    "policy.model.head_hidden_sizes": "IQN: hidden layer sizes after the product of features and fraction embedding",
    "policy.learn.kappa": "threshold of the quantile Huber loss",
    "policy.model.noisy_sigma0": "Rainbow: initial noise scale of the noisy layers (sigma = sigma0 / sqrt(inputs))",
    "policy.entropy_tau": "Munchausen DQN: temperature of the softmax policy of the Q-values",
    "policy.m_alpha": "Munchausen DQN: weight of the clipped tau * log pi(a|s) added to the reward",
    # fqf, sqn, bdq, d4pg
    "fqf:policy.model.num_quantiles": "FQF: fractions proposed per state (their midpoints' quantile values)",
    "fqf:policy.learn.learning_rate": "FQF: Adam learning rate of the quantile network (trunk, embedding, head)",
    "policy.learn.learning_rate_fraction": "FQF: Adam learning rate of the fraction proposal network",
    "policy.learn.ent_coef": "FQF: weight of the proposal's entropy, subtracted from the fraction loss",
    "sqn:policy.learn.target_entropy": "SQN: entropy target of the temperature (of the next state's Boltzmann policy)",
    "sqn:policy.other.eps.decay": "SQN: DI-engine's rule: uniform actions until decay - 1000 updates, then samples",
    "policy.model.action_bins_per_branch": "BDQ: values per action dimension, evenly spaced between its bounds",
    "policy.model.head_layer_num": "BDQ: hidden layers of the value stream and of each branch",
    "policy.model.num_branches": "BDQ: action dimensions, one branch each (None: the Box's size)",
    "d4pg:policy.model.n_atom": "D4PG: atoms of the critic's return distribution",
    "d4pg:policy.model.v_min": "D4PG: the smallest atom of the critic's support",
    "d4pg:policy.model.v_max": "D4PG: the largest atom of the critic's support",
    # actor-critic: td3, ddpg, a2c, pg
    "policy.model.twin_critic": "two Q critics, the target from their minimum (TD3); one critic (DDPG)",
    "policy.learn.learning_rate_actor": "Adam learning rate of the actor",
    "policy.learn.learning_rate_critic": "Adam learning rate of the critic(s)",
    "policy.learn.actor_update_freq": "update the actor on every K-th critic update (TD3's delayed policy updates)",
    "policy.learn.noise": "target policy smoothing: clipped Gaussian noise on the target action",
    "policy.learn.noise_sigma": "std of the target-smoothing noise (actions in [-1, 1])",
    "policy.learn.noise_range.min": "lower clip of the target-smoothing noise",
    "policy.learn.noise_range.max": "upper clip of the target-smoothing noise",
    "policy.collect.noise_sigma": "std of the Gaussian exploration noise added to the actor's action (in [-1, 1])",
    "policy.collect.n_episode": "PG, PPO-PG: complete episodes per learn call, the run's total (each rank: n_episode "
    "/ N; learned on all of them)",
    "policy.learn.ppo_param_init": "PPO-PG: orthogonal initial weights and zero biases (DI-engine's ppo_param_init)",
    # PPG (ppg_offpolicy)
    "policy.learn.aux_freq": "PPG: an auxiliary phase after every this many policy-phase steps",
    "policy.learn.aux_train_epoch": "PPG: epochs of the auxiliary phase over the value batches kept since the last",
    "policy.learn.aux_bc_weight": "PPG: weight of KL(pi_old || pi) in the auxiliary phase's joint loss",
    "policy.other.replay_buffer.policy.replay_buffer_size": "PPG: policy ring capacity, the run's total (each rank: "
    "size / N)",
    "policy.other.replay_buffer.value.replay_buffer_size": "PPG: value ring capacity, the run's total (each rank: "
    "size / N)",
    # ACER
    "acer:policy.learn.unroll_len": "ACER: steps per replayed chunk (each env's rollout is cut into chunks of it)",
    "acer:policy.learn.discount_factor": "ACER: gamma of the Retrace targets",
    "policy.learn.c_clip_ratio": "ACER: truncation c of the importance weights (bias correction beyond it)",
    "policy.learn.trust_region": "ACER: project the actor's gradient against the average policy (trust region)",
    "policy.learn.trust_region_value": "ACER: the trust region's delta",
    "a2c:policy.learn.adv_norm": "normalize advantages with the statistics of the whole global rollout (all ranks)",
    # actor_learner (ding_dist/entry/roles.py)
    "actor_learner.actors": "actor processes; 0: the data-parallel mode",
    "actor_learner.learners": "learner processes",
    "actor_learner.weight_sync_every": "learner updates between two weight versions sent to the actors",
    "actor_learner.max_lag": "most versions a trained chunk may lag behind the learners' weights",
    "actor_learner.lag_mode": "'block': actors wait for slow learners; 'drop': newer chunks replace unconsumed ones",
    "actor_learner.queue": "chunks per actor the learner receives ahead while it learns (0: on demand, least lag)",
    "actor_learner.actor_buffers": "chunks an actor may have in flight",
    "actor_learner.learner_threads": "torch threads of a learner; 'auto': a CNN takes the cores actors leave (>= 2)",
    "actor_learner.actor_threads": "torch threads of an actor; 'auto': 1 (or OMP_NUM_THREADS when you set it)",
    "actor_learner.on_actor_death": "'continue' with the actors left, or 'stop'",
    "actor_learner.actor_device": "where actors (or the inference rank) run their policy",
    "actor_learner.inference": "1: one more process acts for every actor in one batch (for a GPU); 0: actors act",
}


def meaning(key: str, policy_type: str | None = None, own: Mapping[str, str] | None = None) -> str:
    """The one-line meaning of dotted ``key`` (``""`` when it has none yet); ``own``: the policy class's
    ``key_meanings`` (keys relative to ``policy.``), which win.

    Example:
        >>> meaning("policy.learn.batch_size", "ppo")
        "minibatch, the run's total (each rank: batch_size / N; the ragged tail of a shuffled rollout is dropped)"
    """
    if own and key.startswith("policy.") and key[len("policy.") :] in own:
        return own[key[len("policy.") :]]
    if policy_type and f"{policy_type}:{key}" in KEY_MEANINGS:
        return KEY_MEANINGS[f"{policy_type}:{key}"]
    return KEY_MEANINGS.get(key, "")


@dataclass(frozen=True)
class KeyRow:
    """One key of a resolved config: its value, default, the default's type and its meaning."""

    key: str
    value: Any
    default: Any
    type: str
    meaning: str


def _leaves(node: Mapping, path: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in node.items():
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, f"{path}{key}.")
        else:
            yield f"{path}{key}", value


def _type_of(default: Any) -> str:
    if default is None:
        return "any"
    if isinstance(default, Mapping):
        return "dict"
    if isinstance(default, (list, tuple)):
        return "list"
    return type(default).__name__


def describe(
    cfg: Mapping, schema: Mapping, policy_type: str | None = None, own: Mapping[str, str] | None = None
) -> list[KeyRow]:
    """A row per leaf key of ``schema`` (the defaults) with its value in ``cfg``; ``create_config`` skipped; ``own``:
    the policy class's ``key_meanings``."""
    rows = []
    for key, default in _leaves({k: v for k, v in schema.items() if k != "create_config"}):
        value: Any = cfg
        for part in key.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        rows.append(KeyRow(key, value, default, _type_of(default), meaning(key, policy_type, own)))
    return rows


def format_rows(rows: Sequence[KeyRow], width: int = 60) -> str:
    """Aligned text columns key / value / type / default / meaning; ``*`` marks values that differ from it."""

    def cut(value: Any) -> str:
        text = repr(value)
        return text if len(text) <= width // 2 else text[: width // 2 - 3] + "..."

    table = [("key", "value", "type", "default", "meaning")]
    table += [(r.key, ("* " if r.value != r.default else "") + cut(r.value), r.type, cut(r.default), r.meaning or "-")
              for r in rows]  # fmt: skip
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4] for row in table)


def markdown_table(rows: Sequence[KeyRow], strip: str = "", values: bool = False) -> str:
    """The ``| key | default | meaning |`` table of docs/rl.md (``strip``: a prefix such as ``"policy."``);
    ``values``: with the resolved config's value column too (``ding-dist config show --markdown``)."""
    lines = ["| key | value | default | meaning |", "|---|---|---|---|"] if values else [
        "| key | default | meaning |", "|---|---|---|"]  # fmt: skip
    for r in rows:
        key = r.key[len(strip) :] if strip and r.key.startswith(strip) else r.key
        value = f" {r.value!r} |" if values else ""
        lines.append(f"| `{key}` |{value} {r.default!r} | {r.meaning or '-'} |")
    return "\n".join(lines)


#: The key tables of docs/rl.md: ``<!-- keys:NAME -->`` ... ``<!-- /keys -->`` holds the generated table.
DOC_TABLE = "<!-- keys:{name} -->\n{table}\n<!-- /keys -->"


def docs_tables() -> dict[str, str]:
    """The markdown key tables of docs/rl.md: ``shared`` (every policy), then each shipped policy's own keys."""
    from ding_dist.policy import Policy, get_policy_cls  # torch: only when docs are generated or checked

    shared = {"policy": Policy.default_config()}
    shared_keys = {r.key for r in describe(shared, shared)}
    tables = {"shared": markdown_table(describe(shared, shared), strip="policy.")}
    for name in ("dqn", "ppo"):
        cls = get_policy_cls(name)
        schema = {"policy": cls.default_config()}
        own = [
            r
            for r in describe(schema, schema, name, cls.key_meanings)
            if r.key not in shared_keys or f"{name}:{r.key}" in KEY_MEANINGS
        ]
        tables[name] = markdown_table(own, strip="policy.")
    return tables


def render_docs(text: str) -> str:
    """``text`` (docs/rl.md) with every generated table replaced by its current version.

    Regenerate with ``python -c "from ding_dist.config.describe import write_docs; write_docs('docs/rl.md')"``.
    """
    for name, table in docs_tables().items():
        start, end = f"<!-- keys:{name} -->", "<!-- /keys -->"
        i = text.find(start)
        if i < 0:
            continue
        j = text.index(end, i)
        text = text[:i] + DOC_TABLE.format(name=name, table=table) + text[j + len(end) :]
    return text


def write_docs(path: str) -> None:
    """Rewrite the generated tables of the markdown file at ``path`` in place."""
    from pathlib import Path

    page = Path(path)
    page.write_text(render_docs(page.read_text()))
