"""R2D2 (Kapturowski et al. 2019): a recurrent (LSTM) Q-network learned from replayed sequences.

Reading order: the value rescaling pair, the recurrent Q-network, then :class:`R2D2Policy` — acting with the
recurrent state carried across steps, and ``learn``, where the burn-in, the n-step rescaled double-DQN target and
the sequence priorities are computed in plain sight.

Acting: the policy keeps one ``(h, c)`` state per env slot. :meth:`R2D2Policy.collect_action` acts from it and
returns it as the step's extras ``h`` and ``c`` (``[num_envs, lstm_size]``, the state *before* the step), so
rollouts and actor chunks carry it; the state after the step is held back until the collector calls
:meth:`R2D2Policy.reset_state` with the step's ``terminated | truncated``, which keeps it and zeroes the slots
whose episode ended (a dry run, e.g. ``chunk_layout``'s, never moves the state). The evaluator does the same
with ``eval=True`` for its own state.

Learning (a batch of :class:`~ding_dist.data.sequence_replay.SequenceReplayBuffer` sequences): the online
network runs from each sequence's stored start state; over the first ``burnin`` steps of a sequence that does
not start an episode the state is carried without gradient (its start state is stale: burn-in), a sequence that
starts an episode starts from its exact zero state and learns from its first step. The target of step ``t`` is
``h(sum_k gamma^k r_{t+k} + gamma^m h^-1(Q_target(s_{t+m}, argmax_a Q(s_{t+m}, a))))`` with ``m = min(n, steps
left in the sequence)`` (no bootstrap after a termination). Each sequence's loss is the mean over its learned
steps, weighted by its importance weight, and the batch loss is the mean over sequences (so ranks learning on
equal halves of a batch average to the whole batch's update); its priority is ``eta max|d| + (1 - eta) mean|d|``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ding_dist.data.sequence_replay import sequence_priority
from ding_dist.policy.base import mlp, obs_dim
from ding_dist.policy.encoders import is_image_space, obs_tensor
from ding_dist.policy.networks import features
from ding_dist.policy.q_learning import QLearningPolicy, init_q_learning, update_target
from ding_dist.policy.registry import register_policy
from ding_dist.utils.keys import Key

__all__ = ["R2D2Policy", "RecurrentQNetwork", "inverse_value_rescale", "rescaled_n_step_target", "value_rescale"]


def value_rescale(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """R2D2's value rescaling ``h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x``.

    Example::

        value_rescale(torch.tensor([3.0]))  # tensor([1.0030])
    """
    return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0) + eps * x


def inverse_value_rescale(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """The exact inverse of :func:`value_rescale`:
    ``sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1)``.

    Example::

        inverse_value_rescale(value_rescale(torch.tensor([3.0])))  # tensor([3.0000])
    """
    root = (torch.sqrt(1.0 + 4.0 * eps * (x.abs() + 1.0 + eps)) - 1.0) / (2.0 * eps)
    return torch.sign(x) * (root * root - 1.0)


def rescaled_n_step_target(
    reward: torch.Tensor,
    bootstrap: torch.Tensor,
    valid: torch.Tensor,
    ended: torch.Tensor,
    gamma: float,
    n: int,
    eps: float = 1e-3,
) -> torch.Tensor:
    """R2D2's n-step target of each step of a batch of sequences (time-major):
    ``h(sum_{k<m} gamma^k r[t+k] + gamma^m h^-1(bootstrap[t+m]))`` with ``m = min(n, valid - t)``, and no bootstrap
    term when ``t + m`` is the end of a sequence whose last valid step terminated.

    ``reward [L, B]``; ``bootstrap [L+1, B]``: the target network's value of each position's observation (position
    ``valid`` holds the last valid step's next observation); ``valid [B]``: valid steps per sequence; ``ended [B]``:
    its last valid step terminated. Steps at or past ``valid`` get a value too (mask them out).

    Example::

        rescaled_n_step_target(torch.ones(3, 1), torch.zeros(4, 1), torch.tensor([3]), torch.tensor([True]), 0.9, 2)
    """
    steps = reward.shape[0]
    t = torch.arange(steps, device=reward.device).unsqueeze(1)  # [L, 1]
    m = torch.clamp(valid.unsqueeze(0) - t, 1, n)  # n-step length of each step, within the sequence
    padded = F.pad(reward, (0, 0, 0, n))  # [L+n, B]
    ret = torch.zeros_like(reward)
    for k in range(n):
        ret += (gamma**k) * padded[k : k + steps] * (k < m)
    last = t + m  # the position bootstrapped from
    discount = (gamma ** m.to(reward.dtype)) * ~((last == valid.unsqueeze(0)) & ended.unsqueeze(0))
    boot = bootstrap.gather(0, last.clamp(max=steps))
    return value_rescale(ret + discount * inverse_value_rescale(boot, eps), eps)


class RecurrentQNetwork(nn.Module):
    """DRQN: an MLP encoder, an LSTM, then a Q head (``dueling``: ``V + A - mean A``); time-major.

    ``forward(obs [T, B, ...], (h, c) [B, H] each, burnin, burnin_mask)`` returns ``q [T, B, A]`` and the state
    after the last step. With ``burnin > 0`` the state after the first ``burnin`` steps is detached for the
    sequences where ``burnin_mask`` ([B] bool) is set: no gradient flows into those steps.

    Example::

        net = RecurrentQNetwork(obs_size=4, n_actions=2, hidden_sizes=[64], lstm_size=32)
        q, (h, c) = net(torch.zeros(5, 3, 4), net.zero_state(3))  # q: (5, 3, 2)
    """

    def __init__(
        self,
        obs_size: int | gym.Space,
        n_actions: int,
        hidden_sizes: Sequence[int] = (128, 128, 64),
        lstm_size: int = 64,
        dueling: bool = True,
        activation: str = "relu",
        conv_channels: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        if not hidden_sizes:
            raise ValueError("model.hidden_sizes must name at least one encoder layer, got []")
        self.encoder, width = features(obs_size, hidden_sizes, activation, conv_channels)
        self.obs_shape = tuple(obs_size.shape) if isinstance(obs_size, gym.Space) else (-1,)
        self.lstm = nn.LSTM(int(width), int(lstm_size))
        self.lstm_size = int(lstm_size)
        self.dueling = dueling
        if dueling:
            self.value = mlp([lstm_size, lstm_size, 1], activation)
            self.advantage = mlp([lstm_size, lstm_size, n_actions], activation)
        else:
            self.head = nn.Linear(lstm_size, n_actions)

    def zero_state(self, batch: int, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """The state of a fresh episode for ``batch`` sequences."""
        z = torch.zeros(batch, self.lstm_size, device=device)
        return z, z.clone()

    def forward(
        self,
        obs: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor],
        burnin: int = 0,
        burnin_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        steps, batch = obs.shape[:2]
        x = self.encoder(obs.reshape(steps * batch, *self.obs_shape)).reshape(steps, batch, -1)
        h, c = state[0].unsqueeze(0), state[1].unsqueeze(0)
        if burnin > 0:
            first, (h, c) = self.lstm(x[:burnin], (h, c))
            if burnin_mask is not None:
                keep = burnin_mask.view(1, -1, 1)
                h, c = torch.where(keep, h.detach(), h), torch.where(keep, c.detach(), c)
            rest, (h, c) = self.lstm(x[burnin:], (h, c))
            out = torch.cat([first, rest])
        else:
            out, (h, c) = self.lstm(x, (h, c))
        if self.dueling:
            adv = self.advantage(out)
            q = self.value(out) + adv - adv.mean(dim=-1, keepdim=True)
        else:
            q = self.head(out)
        return q, (h.squeeze(0), c.squeeze(0))


@register_policy("r2d2")
class R2D2Policy(QLearningPolicy):
    """R2D2: recurrent double DQN on replayed sequences, with burn-in, n-step rescaled targets and priorities.

    Config: the keys listed below (generated from ``keys``) (the paper's values, DI-engine's names): sequences of
    ``seq_len`` steps including the ``burnin`` prefix, consecutive ones of an episode sharing ``overlap`` steps
    (80/40/40 as in the paper).

    Example::

        policy = R2D2Policy(R2D2Policy.default_config(), env.single_observation_space, env.single_action_space)
        actions, extras = policy.collect_action(obs, env_step=0)   # extras: h, c before the step
        policy.reset_state(terminated | truncated)                 # the collector, after the env step
        batch, weights, index = buffer.sample(8)
        stats = policy.learn({**batch, "weight": weights})         # stats["priority"]: one per sequence

    Reference tests: tests/policy/test_r2d2.py (the rescaled n-step target), tests/policy/test_q_references.py
    (value rescaling and its inverse, the masked rescaled n-step double-Q loss after burn-in).
    """

    algorithm = "R2D2"
    #: Acts from a recurrent state: the collector calls :meth:`reset_state` after each step, the replay stores
    #: sequences (:class:`~ding_dist.data.sequence_replay.SequenceReplayBuffer`).
    recurrent = True
    #: The collect extras that hold the recurrent state at each step.
    state_keys = ("h", "c")

    keys = QLearningPolicy.keys.plus(
        Key("model.hidden_sizes", [128, 128, 64]),
        Key("model.lstm_size", 64, "R2D2: units of the LSTM between the encoder and the Q head"),
        Key("model.dueling", True, "dueling Q-network head"),
        Key("learn.batch_size", 64, "sequences per update, the run's total (each rank: batch_size / N)"),
        Key("learn.learning_rate", 0.0001),
        Key("learn.target_update_freq", 2500),
        Key("learn.grad_clip_norm", 40.0),
        Key("learn.double", True, "double DQN (online net picks, target net scores)"),
        Key("learn.loss", "mse", "the TD loss: 'huber' or 'mse'", "in ('huber', 'mse')"),
        Key("collect.n_sample", 64),
        Key("other.eps.type", "exp"),
        Key("other.eps.start", 0.95),
        Key(
            "other.replay_buffer.type",
            "sequence",
            "R2D2: 'sequence', the replay of sequences with their recurrent start states",
        ),
        Key(
            "other.replay_buffer.replay_buffer_size",
            100000,
            "replay capacity in steps (seq_len each sequence), the run's total",
        ),
        Key("other.replay_buffer.alpha", 0.9),
        Key("other.replay_buffer.beta", 0.6),
        Key("other.replay_buffer.anneal_step", 0),
        Key("discount_factor", 0.997),
        Key("nstep", 5),
        Key("priority", True),
        Key("priority_IS_weight", True),
        Key("priority_eta", 0.9, "R2D2: a sequence's priority is eta max|d| + (1 - eta) mean|d|", "[0, 1]"),
        Key(
            "value_rescale_eps",
            0.001,
            "R2D2: eps of the value rescaling h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x",
            "> 0",
        ),
        Key("sequence.seq_len", 80, "R2D2: steps per replayed sequence, its burn-in prefix included", ">= 2"),
        Key(
            "sequence.burnin",
            40,
            "R2D2: first steps of a sequence that only rebuild the recurrent state (no gradient)",
            ">= 0",
        ),
        Key("sequence.overlap", 40, "R2D2: steps consecutive sequences of an episode share", ">= 0"),
    ).minus("other.replay_buffer.frame_dedup")

    @classmethod
    def recurrent_state_shapes(cls, cfg: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        """The per-slot shape of each state field in :attr:`state_keys` (what the sequence replay stores).

        Example::

            R2D2Policy.recurrent_state_shapes(R2D2Policy.default_config())  # {"h": (64,), "c": (64,)}
        """
        return {k: (int(cfg["model"]["lstm_size"]),) for k in cls.state_keys}

    @staticmethod
    def check_sequence_config(cfg: Mapping[str, Any]) -> None:
        """Refuse what cannot make sequences (one line each): ``seq_len`` not longer than ``burnin``, an overlap
        not shorter than ``seq_len``, a replay that does not store sequences.

        Example::

            R2D2Policy.check_sequence_config(R2D2Policy.default_config())  # fine
        """
        s = cfg["sequence"]
        if not s["seq_len"] > s["burnin"]:
            raise ValueError(
                f"policy.sequence.seq_len={s['seq_len']} must be longer than policy.sequence.burnin={s['burnin']} "
                "(the sequence includes its burn-in prefix; the rest is learned)"
            )
        if not 0 <= s["overlap"] < s["seq_len"]:
            raise ValueError(
                f"policy.sequence.overlap={s['overlap']} must be in [0, seq_len={s['seq_len']}) (sequences advance "
                "by seq_len - overlap steps)"
            )
        kind = cfg["other"]["replay_buffer"].get("type", "sequence")
        if kind != "sequence":
            raise ValueError(
                f"policy.other.replay_buffer.type={kind!r}: a recurrent policy needs a sequence replay ('sequence'), "
                "which stores each sequence with its recurrent start state"
            )

    def __init__(
        self,
        cfg: Mapping[str, Any],
        obs_space: gym.Space,
        action_space: gym.Space,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__(cfg, obs_space, action_space, device)  # n_actions (Discrete only), the priority check
        if self.cfg.learn.loss not in ("huber", "mse"):
            raise ValueError(f"learn.loss must be 'huber' or 'mse', got {self.cfg.learn.loss!r}")
        self.check_sequence_config(self.cfg)
        n_actions = self.n_actions
        m = self.cfg.model
        obs = obs_space if is_image_space(obs_space) else obs_dim(obs_space)  # images: a CNN encoder
        model = RecurrentQNetwork(obs, n_actions, m.hidden_sizes, m.lstm_size, m.dueling, m.activation, m.conv_channels)
        init_q_learning(self, model, self.cfg.learn.learning_rate)  # optimizer, distribute, then the target copy
        # (h, c) per env slot of the collector and of the evaluator, and the state after the last action of each
        # (kept by reset_state).
        self._state: dict[bool, tuple[torch.Tensor, torch.Tensor] | None] = {False: None, True: None}
        self._pending: dict[bool, tuple[torch.Tensor, torch.Tensor] | None] = {False: None, True: None}

    # --- acting with a recurrent state ---------------------------------------------------------------------
    def _act(self, obs: np.ndarray, evaluating: bool) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        x = obs_tensor(obs, self.obs_space, self.device)
        batch = x.shape[0]
        state = self._state[evaluating]
        if state is None or state[0].shape[0] != batch:
            state = self.model.zero_state(batch, self.device)
            if self._state[evaluating] is None:
                self._state[evaluating] = state
        q, after = self.model(x.unsqueeze(0), state)
        if state is self._state[evaluating]:  # a slice (a restarted env's single step) moves no state
            self._pending[evaluating] = after
        return q[0], state

    @torch.no_grad()
    def collect_action(self, obs: np.ndarray, env_step: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        q, (h, c) = self._act(obs, evaluating=False)
        actions = q.argmax(dim=-1)
        explore = torch.rand(actions.shape, device=actions.device) < self._epsilon(env_step)
        actions = torch.where(explore, torch.randint_like(actions, self.n_actions), actions)
        return actions.cpu().numpy(), {"h": h.cpu().numpy(), "c": c.cpu().numpy()}

    @torch.no_grad()
    def eval_action(self, obs: np.ndarray) -> np.ndarray:
        q, _ = self._act(obs, evaluating=True)
        return q.argmax(dim=-1).cpu().numpy()

    def reset_state(self, done: np.ndarray | None, *, eval: bool = False) -> None:
        """After an env step: keep the state the last action computed and zero the slots whose episode ended
        (``done``: ``terminated | truncated`` per slot); ``done=None`` forgets the state (fresh episodes).
        ``eval``: the evaluator's state, else the collector's.

        Example::

            actions, extras = policy.collect_action(obs, env_step)
            obs, reward, terminated, truncated, info = venv.step(actions)
            policy.reset_state(terminated | truncated)
        """
        if done is None:
            self._state[eval] = self._pending[eval] = None
            return
        after = self._pending[eval]
        if after is None:
            return
        keep = ~torch.as_tensor(np.asarray(done, dtype=bool), device=self.device).unsqueeze(1)
        self._state[eval] = (after[0] * keep, after[1] * keep)
        self._pending[eval] = None

    # --- learning ------------------------------------------------------------------------------------------
    def learn(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient step on a batch of sequences (keys ``obs [B, L+1, ...], action, reward, terminated, mask
        [B, L], h, c [B, H], burnin [B]``; ``weight [B]`` with ``priority_IS_weight``). With ``priority`` the
        stats hold ``"priority"``: one per sequence."""
        lc, gamma, n = self.cfg.learn, float(self.cfg.discount_factor), int(self.cfg.nstep)
        eps = float(self.cfg.value_rescale_eps)
        obs = batch["obs"].transpose(0, 1)  # [L+1, B, ...]
        steps = batch["action"].shape[1]
        mask = batch["mask"].transpose(0, 1).bool()  # [L, B]
        burnin = batch["burnin"].long()
        start = (batch["h"].float(), batch["c"].float())
        # A sequence's burn-in is 0 or sequence.burnin (the replay's rule): split the recurrence there for all of them,
        # detaching only where the burn-in is not 0 (a split where all are 0 changes nothing), without reading the
        # batch's longest burn-in back from the device.
        longest = min(int(self.cfg.sequence.burnin), steps)
        q_all, _ = self.train_model(obs, start, burnin=longest, burnin_mask=burnin > 0)  # [L+1, B, A]
        with torch.no_grad():
            q_target_all, _ = self.target_model(obs, start)
            online = q_all.detach() if lc.double else q_target_all
            bootstrap = q_target_all.gather(2, online.argmax(dim=2, keepdim=True)).squeeze(2)  # [L+1, B]
            valid = mask.sum(0)  # [B] steps in each sequence
            ended = batch["terminated"].bool().gather(1, (valid - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
            reward = batch["reward"].transpose(0, 1).float()
            target = rescaled_n_step_target(reward, bootstrap, valid, ended, gamma, n, eps)
            t = torch.arange(steps, device=obs.device).unsqueeze(1)  # [L, 1]
            learned = mask & (t >= burnin.unsqueeze(0))  # [L, B]
        q = q_all[:steps].gather(2, batch["action"].transpose(0, 1).long().unsqueeze(2)).squeeze(2)
        criterion = F.smooth_l1_loss if lc.loss == "huber" else F.mse_loss
        per_step = criterion(q, target, reduction="none") * learned
        per_seq = per_step.sum(0) / learned.sum(0).clamp(min=1)
        if self.cfg.priority_IS_weight:
            per_seq = per_seq * batch["weight"]
        loss = per_seq.mean()

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if lc.grad_clip_norm is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), lc.grad_clip_norm)
        self.optimizer.step()
        self.train_iter += 1
        update_target(self.target_model, self.model, self.train_iter, lc.target_update_freq, lc.target_theta)
        stats = {"loss": loss.detach(), "q_mean": (q.detach() * learned).sum() / learned.sum().clamp(min=1)}
        if self.cfg.priority:
            td = (q.detach() - target).abs().transpose(0, 1)
            stats["priority"] = sequence_priority(td, learned.transpose(0, 1), float(self.cfg.priority_eta))
        return stats
