"""The small base every policy shares (DQN, PPO, SAC, ...).

A policy owns its networks and optimizers and exposes four things to the workers:

- ``collect_action(obs, env_step)`` -> ``(actions, extras)``: exploratory actions for a batch of
  observations (one row per vector-env slot) plus per-step arrays the learner needs later
  (PPO: ``logp`` and ``value``; DQN: none).
- ``eval_action(obs)`` -> greedy actions, computed with the raw (unwrapped) networks so that
  evaluating on rank 0 never waits on a collective.
- ``learn(data)`` -> ``dict[str, float | Tensor]`` of statistics (0-dim tensors stay on the device: the
  learner reads them back once per log interval, not per update); ``data`` is a replay batch (off-policy) or a
  rollout (on-policy). Every optimizer step goes through the sync engine, so gradients are averaged
  across ranks before the step.
- ``state_dict()`` / ``load_state_dict()``: every module and optimizer the policy names in
  ``_state_attrs``, plus the ``train_iter`` counter.

Distributed training: call :meth:`Policy.distribute` on every ``(model, optimizer)`` pair the policy
trains. It returns the wrapped model used for the training forward pass; keep the raw module
for target networks, acting and evaluation.

Example::

    class MyPolicy(Policy):
        on_policy = False
        _state_attrs = ("model", "optimizer")

        @classmethod
        def default_config(cls):
            cfg = super().default_config()  # device, collect, learn, eval, other keys of the pipelines
            cfg.model = EasyDict(hidden_sizes=[64])
            return cfg

        def __init__(self, cfg, obs_space, action_space, device="cpu"):
            super().__init__(cfg, obs_space, action_space, device)
            self.model = mlp([obs_dim(obs_space), *cfg.model.hidden_sizes, action_space.n]).to(self.device)
            self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.learn.learning_rate)
            self.train_model, self.optimizer = self.distribute(self.model, self.optimizer)
"""

from __future__ import annotations

import abc
import contextlib
import contextvars
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from easydict import EasyDict
from torch import nn

from ding_dist.comm import get_world_size, resolve_device
from ding_dist.data.replay import to_device
from ding_dist.optim import eager
from ding_dist.sync import distribute, get_algorithm
from ding_dist.utils.keys import Key, KeySet
from ding_dist.utils.plan import Plan

__all__ = [
    "Policy",
    "policy_sync_group",
    "acting_only",
    "mlp",
    "obs_dim",
    "action_info",
    "soft_update",
    "hard_update",
]


_SYNC_GROUP: contextvars.ContextVar[Any] = contextvars.ContextVar("policy_sync_group", default=None)


@contextlib.contextmanager
def policy_sync_group(group: Any) -> Iterator[None]:
    """Policies built inside it take ``group`` as their :attr:`Policy.sync_group` (set before their
    constructor distributes the networks, so gradients and statistics are synchronized within ``group``).

    Example::

        with policy_sync_group(learner_group):  # e.g. the learners of an actor-learner run
            policy = DQNPolicy(cfg, obs_space, action_space)
    """
    token = _SYNC_GROUP.set(group)
    try:
        yield
    finally:
        _SYNC_GROUP.reset(token)


_ACTING_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("policy_acting_only", default=False)


@contextlib.contextmanager
def acting_only() -> Iterator[None]:
    """Policies built inside it act but never learn: :meth:`Policy.make_optimizer` returns None and
    :meth:`Policy.distribute` leaves the model as it is. The actors of an actor-learner run and the launcher's
    config check build theirs so: no optimizer state, no gradient synchronization.

    Example::

        with acting_only():
            policy = DQNPolicy(cfg, obs_space, action_space)  # a ValueError names what does not fit
        actions, _ = policy.collect_action(obs, env_step=0)
    """
    token = _ACTING_ONLY.set(True)
    try:
        yield
    finally:
        _ACTING_ONLY.reset(token)


class Policy(abc.ABC):
    """Base class of all policies; see the module docstring for the protocol.

    Example::

        policy = DQNPolicy(cfg.policy, env.single_observation_space, env.single_action_space)
        actions, extras = policy.collect_action(obs, env_step=0)
        stats = policy.learn(batch)
    """

    #: True for policies that learn from fresh rollouts (PPO), False for replay-based ones (DQN, SAC).
    on_policy: ClassVar[bool] = False
    #: Attribute names of the modules/optimizers saved by ``state_dict`` (raw modules, not wrapped ones).
    _state_attrs: ClassVar[tuple[str, ...]] = ("model", "optimizer")
    #: Every ``policy.*`` key this policy (or the pipeline running it) reads, declared once: default, meaning, value
    #: rule (:class:`~ding_dist.utils.keys.Key`). :meth:`default_config`, ``ding-dist config show``, the config's
    #: range checks, docs/rl.md's tables and the class docstring's key list are generated from it; a subclass derives
    #: its own with ``Parent.keys.plus(Key(...), ...)`` (and ``.minus("learn.x")``).
    keys: ClassVar[KeySet] = KeySet(
        Key(
            "device",
            "auto",
            "'auto' (the rank's GPU when there is one, else CPU), 'cpu', 'cuda', 'cuda:N'",
            "device",
            reader="pipeline",
        ),
        Key("sync.algorithm", "gradient_allreduce", "gradient synchronization algorithm across ranks (docs/sync.md)"),
        Key("sync.options", {}, "options of the synchronization algorithm"),
        Key("model", {}, "network options (each policy defines its own keys)"),
        Key(
            "learn.batch_size",
            64,
            "batch per update, the run's total (each rank: batch_size / N)",
            ">= 1",
            reader="pipeline",
        ),
        Key("learn.learning_rate", 1e-3, "Adam learning rate", "> 0"),
        Key("learn.compile", False, "torch.compile the trained networks (acting stays eager; on a CPU no faster)"),
        Key(
            "collect.n_sample",
            64,
            "env steps per iteration, the run's total (each rank: n_sample / N)",
            ">= 1",
            reader="pipeline",
        ),
        Key(
            "eval.eval_freq",
            2000,
            "evaluate every this many global env steps (0: only at the end)",
            ">= 0",
            reader="pipeline",
        ),
        Key("other.log_freq", 1000, "write metrics every this many global env steps", ">= 0", reader="pipeline"),
        Key(
            "other.checkpoint.freq",
            0,
            "checkpoint every this many global env steps (0: off; always at the end)",
            ">= 0",
            reader="pipeline",
        ),
        Key(
            "other.checkpoint.every_minutes",
            10.0,
            "checkpoint every this many minutes of wall time (0: off)",
            "number >= 0",
            reader="pipeline",
        ),
        Key("other.checkpoint.keep_last", 3, "checkpoints kept", ">= 1", reader="pipeline"),
    )
    #: Config keys (relative to ``policy.``) this policy reads anew at every update, so population-based training
    #: may change them mid-run (:meth:`set_hyperparams`); ``pbt.hyperparams`` may name only these.
    pbt_keys: ClassVar[tuple[str, ...]] = ()
    #: The optimizer attributes whose learning rate a learning-rate key of :attr:`pbt_keys` sets.
    pbt_optimizers: ClassVar[dict[str, tuple[str, ...]]] = {"learn.learning_rate": ("optimizer",)}

    @classmethod
    def default_config(cls) -> EasyDict:
        """A fresh EasyDict of every ``policy.*`` key this policy reads, with its default: :attr:`keys`' defaults.

        Example::

            DQNPolicy.default_config().learn.batch_size  # 64
        """
        return cls.keys.defaults()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__doc__ and "keys" in cls.__dict__:  # the docstring lists the keys the class declares
            head = "Config keys (``policy.*``) besides the shared ones of :class:`Policy` (``ding-dist config show``):"
            cls.__doc__ = f"{cls.__doc__.rstrip()}\n\n    {head}\n\n{cls.keys.doc(skip=Policy.keys)}\n"

    def __init__(
        self,
        cfg: Mapping[str, Any],
        obs_space: gym.Space,
        action_space: gym.Space,
        device: str | torch.device = "cpu",
    ) -> None:
        self.cfg = type(cfg)(cfg) if isinstance(cfg, EasyDict) else EasyDict(cfg)  # a copy, of the caller's kind
        self.obs_space = obs_space
        self.action_space = action_space
        self.device = resolve_device(device)
        self.train_iter = 0  # optimizer updates applied so far (identical on every rank)
        #: The ranks that learn together (None: the world; see :func:`policy_sync_group`); statistics that must
        #: be global use it.
        self.sync_group: Any = _SYNC_GROUP.get()

    @property
    def plan(self) -> Plan:
        """The config's run totals and this rank's share of each, over the ranks of :attr:`sync_group` (read from
        the config when asked, so a changed config counts; the config itself always holds the totals).

        Example::

            policy.plan.batch, policy.plan.rank_batch  # (64, 32) with learn.batch_size=64 on 2 ranks
        """
        return Plan.of(self.cfg, get_world_size(self.sync_group))

    # --- distributed training -------------------------------------------------------------------
    def make_optimizer(self, params: Any, lr: float, **adam_kwargs: Any) -> torch.optim.Optimizer:
        """Adam over ``params``, or the optimizer the algorithm ``policy.sync`` names needs (its ``optimizer``
        in the registry, e.g. Bagua's :class:`~ding_dist.sync.QAdamOptimizer` for ``qadam``), which takes the
        algorithm's ``optimizer_options`` from ``policy.sync.options`` (qadam's ``warmup_steps``).

        Example::

            self.optimizer = self.make_optimizer(self.model.parameters(), lr=1e-3)
        """
        sync = self.cfg.get("sync") or {}
        algorithm = get_algorithm(sync.get("algorithm", "gradient_allreduce"))  # an unknown name fails here
        if _ACTING_ONLY.get():
            return None  # type: ignore[return-value]
        if algorithm.optimizer is not None:
            options = sync.get("options") or {}
            own = {k: options[k] for k in algorithm.optimizer_options if k in options}
            make = algorithm.optimizer
            if isinstance(make, type) and issubclass(make, torch.optim.Optimizer):
                make = eager(make)  # torch.optim.Optimizer's own methods without the dynamo import, as below
            return make(params, lr=lr, **own, **adam_kwargs)
        # fused: one kernel per tensor (on the CPU too), where torch's default on the CPU steps one tensor at a time
        # with about ten small operations each; the same update up to float rounding, 2.9-3.6x faster steps here.
        # eager: torch's Adam without its torch._dynamo import (seconds of every process's start-up)
        return eager(torch.optim.Adam)(params, lr=lr, **{"fused": True, **adam_kwargs})

    def distribute(self, model: nn.Module, optimizer: torch.optim.Optimizer, **options: Any):
        """Wrap a trained ``(model, optimizer)`` pair with the sync engine, as ``policy.sync`` says.

        ``policy.sync.algorithm`` (default ``gradient_allreduce``) and ``policy.sync.options`` choose the
        synchronization; ``options`` given here win. After ``loss.backward()`` through the returned model
        the algorithm has synchronized the step. Returns ``(wrapped_model, optimizer)``; keep using the
        raw ``model`` for no-grad work. ``learn.compile=True`` in the policy's config (not a default key: off
        unless set from Python) makes the wrapped model run ``torch.compile(model)`` (the same parameters); the
        raw ``model`` stays eager. On the CPU it measured no faster (``benchmarks/bench_updates.py --compile``).
        """
        if _ACTING_ONLY.get():
            return model, optimizer
        sync = self.cfg.get("sync") or {}
        algorithm = sync.get("algorithm", "gradient_allreduce")
        to_optimizer = get_algorithm(algorithm).optimizer_options  # given to make_optimizer, not to the algorithm
        merged = {k: v for k, v in (sync.get("options") or {}).items() if k not in to_optimizer}
        merged.update(options)
        if (self.cfg.get("learn") or {}).get("compile", False):
            model = torch.compile(model)  # an nn.Module holding the same parameters (named _orig_mod.*)
        return distribute(model, optimizer, algorithm=algorithm, group=self.sync_group, **merged)

    # --- acting ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Exploratory actions for a batch of observations and per-step extras (may be empty)."""

    @abc.abstractmethod
    def eval_action(self, obs: np.ndarray) -> np.ndarray:
        """Greedy (deterministic) actions for a batch of observations, using the raw networks."""

    def to_env_action(self, action: np.ndarray) -> np.ndarray:
        """Map stored actions to what the env accepts (PPO clips Gaussian samples to the bounds)."""
        return action

    # --- learning -------------------------------------------------------------------------------
    @abc.abstractmethod
    def learn(self, data: Any) -> dict[str, float | torch.Tensor]:
        """Apply one learning step (DQN: one update; PPO: all epochs over a rollout); return statistics
        (Python numbers or detached 0-dim tensors, which the learner reads back once per log interval)."""

    # --- checkpointing --------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume learning: each attribute in ``_state_attrs`` and ``train_iter``."""
        state: dict[str, Any] = {name: getattr(self, name).state_dict() for name in self._state_attrs}
        state["train_iter"] = self.train_iter
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` produced; a missing entry raises ``KeyError`` naming it."""
        missing = [name for name in (*self._state_attrs, "train_iter") if name not in state]
        if missing:
            raise KeyError(f"policy state is missing {missing}; it has {sorted(state)}")
        for name in self._state_attrs:
            target = getattr(self, name)
            if target is None:  # an optimizer of a policy built acting_only()
                continue
            if isinstance(target, torch.optim.Optimizer):
                _load_optimizer_keeping_kernels(target, state[name])
            else:
                target.load_state_dict(state[name])
        self.train_iter = int(state["train_iter"])

    def set_hyperparams(self, values: Mapping[str, float]) -> None:
        """Change keys of :attr:`pbt_keys` mid-run: each is set in the policy's config (read anew at every update),
        and a learning rate in the optimizers :attr:`pbt_optimizers` names too. A key outside :attr:`pbt_keys`
        raises ``ValueError`` naming it.

        Example::

            policy.set_hyperparams({"learn.learning_rate": 5e-4, "learn.entropy_weight": 0.01})  # PPO
        """
        for key, value in values.items():
            if key not in self.pbt_keys:
                raise ValueError(f"{type(self).__name__} cannot change {key!r} mid-run; it can change: "
                                 f"{', '.join(self.pbt_keys) or 'none'}")  # fmt: skip
            *path, name = key.split(".")
            section = self.cfg
            for part in path:
                section = section[part]
            section[name] = float(value)
            for attr in self.pbt_optimizers.get(key, ()):
                optimizer = getattr(self, attr, None)
                for group in optimizer.param_groups if optimizer is not None else ():
                    group["lr"] = float(value)

    def schedule_values(self, env_step: int) -> dict[str, float]:
        """The policy's schedules at global ``env_step`` for the logs (``{"train/epsilon": ...}`` for DQN); none
        by default.

        Example::

            policy.schedule_values(env_step=10_000)  # {} for PPO
        """
        return {}

    def named_weights(self) -> dict[str, torch.Tensor]:
        """The floating tensors (parameters and buffers) of the networks in ``_state_attrs``, by
        ``"<attr>.<key>"``, in a fixed order: what an acting copy of the policy needs (the weights learners
        publish to actors) and what ranks must agree on (the debug mode's consistency check).

        Example::

            sum(t.numel() for t in policy.named_weights().values())  # floats sent per weight version
        """
        out: dict[str, torch.Tensor] = {}
        for name in self._state_attrs:
            obj = getattr(self, name)
            if isinstance(obj, nn.Module):
                for key, t in obj.state_dict(keep_vars=True).items():
                    if t.is_floating_point():
                        out[f"{name}.{key}"] = t
            elif isinstance(obj, torch.Tensor) and obj.is_floating_point():
                out[name] = obj
        return out

    # --- small helpers --------------------------------------------------------------------------
    def as_tensor(self, x: np.ndarray, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``x`` as a tensor on the policy's device (to a CUDA device without waiting for its queued work:
        :func:`~ding_dist.data.replay.to_device`)."""
        return to_device(torch.as_tensor(x, dtype=dtype), self.device)


def _load_optimizer_keeping_kernels(optimizer: torch.optim.Optimizer, state: Mapping[str, Any]) -> None:
    """``optimizer.load_state_dict(state)``, keeping how it was built to compute (``fused``, ``foreach``): a
    checkpoint of an unfused optimizer would otherwise switch it back to the slow path. A fused step counter lives
    on its parameter's device as float32, where the unfused one may have been saved on the CPU."""
    kept = [{k: g[k] for k in ("fused", "foreach") if k in g} for g in optimizer.param_groups]
    optimizer.load_state_dict(state)
    for group, own in zip(optimizer.param_groups, kept):
        group.update(own)
        if not group.get("fused"):
            continue
        for p in group["params"]:
            entry = optimizer.state.get(p)
            step = entry.get("step") if entry else None
            if isinstance(step, torch.Tensor) and (step.device != p.device or step.dtype != torch.float32):
                entry["step"] = step.to(device=p.device, dtype=torch.float32)


def obs_dim(space: gym.Space) -> int:
    """Flat size of a Box observation space; a clear error for other spaces.

    Example::

        obs_dim(gym.spaces.Box(-1, 1, (4,)))  # 4
    """
    if isinstance(space, gym.spaces.Box):
        return int(np.prod(space.shape))
    if isinstance(space, gym.spaces.Discrete):
        raise ValueError(f"Discrete observation spaces need one-hot encoding; got {space}")
    raise ValueError(f"expected a Box observation space, got {space}")


def action_info(space: gym.Space) -> tuple[bool, int]:
    """``(is_discrete, size)``: number of actions for Discrete, flat action size for Box.

    Example::

        action_info(gym.spaces.Discrete(2))  # (True, 2)
    """
    if isinstance(space, gym.spaces.Discrete):
        return True, int(space.n)
    if isinstance(space, gym.spaces.Box):
        return False, int(np.prod(space.shape))
    raise ValueError(f"expected a Discrete or Box action space, got {space}")


_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU, "gelu": nn.GELU}


def mlp(
    sizes: Sequence[int],
    activation: str = "relu",
    *,
    out_activation: bool = False,
    out_gain: float | None = None,
) -> nn.Sequential:
    """Fully connected net ``sizes[0] -> ... -> sizes[-1]`` with ``activation`` between layers.

    ``out_activation``: also apply the activation after the last layer (for feature trunks).
    ``out_gain`` (optional) re-initializes the last layer orthogonally with that gain (PPO heads).

    Example::

        net = mlp([4, 64, 64, 2], activation="tanh")
    """
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
    if len(sizes) < 2:
        raise ValueError(f"mlp needs at least input and output sizes, got {list(sizes)}")
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(int(sizes[i]), int(sizes[i + 1])))
        if i < len(sizes) - 2 or out_activation:
            layers.append(_ACTIVATIONS[activation]())
    if out_gain is not None:
        last = [layer for layer in layers if isinstance(layer, nn.Linear)][-1]
        nn.init.orthogonal_(last.weight, gain=out_gain)
        nn.init.zeros_(last.bias)
    return nn.Sequential(*layers)


@torch.no_grad()
def hard_update(target: nn.Module, source: nn.Module) -> None:
    """Copy ``source``'s parameters and buffers into ``target``.

    Example::

        hard_update(target_net, online_net)
    """
    target.load_state_dict(source.state_dict())


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Polyak averaging ``target = (1 - tau) * target + tau * source``.

    Example::

        soft_update(target_net, online_net, tau=0.005)
    """
    if not 0.0 < tau <= 1.0:
        raise ValueError(f"tau must be in (0, 1], got {tau}")
    params = list(target.parameters())
    if params:  # one fused call for all of them (each tensor gets what lerp_ gives it)
        torch._foreach_lerp_(params, list(source.parameters()), tau)
    buffers = list(target.buffers())
    if buffers:
        torch._foreach_copy_(buffers, list(source.buffers()))
