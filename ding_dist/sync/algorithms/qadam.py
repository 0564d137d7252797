"""``qadam``: Adam whose variance freezes after warm-up, with 8-bit compressed momentum (Bagua's QAdam).

Relative to ``gradient_allreduce``: during the first ``warmup_steps`` optimizer steps gradients
are averaged in full precision and :class:`QAdamOptimizer` runs plain Adam. Afterwards the second
moment is frozen, so only the momentum matters: each rank forms its local momentum
``m_local = beta1 * m + (1 - beta1) * g`` and the ranks average it with ByteGrad's 8-bit
scatter-gather. The hook hands the optimizer the gradient that reproduces that averaged momentum,
``(m_avg - beta1 * m) / (1 - beta1)``, so the optimizer's own update lands on ``m_avg``: every
rank takes the identical step and the optimizer works unchanged on a world of one. Weight decay
(L2 by default, as Bagua's and torch's Adam) is added by the optimizer to that gradient, so after
warm-up the momentum becomes ``m_avg + (1 - beta1) * weight_decay * p`` on every rank. Which step's
gradient enters which moment at the warm-up boundary: see :class:`QAdamOptimizer`.

Register::

    opt = QAdamOptimizer(net.parameters(), lr=1e-3, warmup_steps=100)
    model, opt = ding_dist.distribute(net, opt, algorithm='qadam')
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from ding_dist.sync._primitives import MeteredLink
from ding_dist.sync.algorithms import Algorithm
from ding_dist.sync.algorithms._scatter_gather import MinMaxUInt8Codec, ScatterGatherState, scatter_gather
from ding_dist.sync.algorithms.gradient_allreduce import AllreduceState, allreduce_hook
from ding_dist.sync.bucket import Bucket, BucketStage

_WEIGHT_DECAY_MODES = ("l2", "decoupled")


class QAdamOptimizer(torch.optim.Optimizer):
    """Adam whose second moment is frozen after ``warmup_steps`` steps (Bagua's ``QAdamOptimizer``).

    Weight decay: ``weight_decay_mode='l2'`` (default, Bagua's and ``torch.optim.Adam``'s) adds
    ``weight_decay * p`` to the gradient before it enters the moments; ``'decoupled'`` shrinks
    the parameter by ``lr * weight_decay`` instead (``torch.optim.AdamW``'s).

    Warm-up boundary, with ``N = warmup_steps`` and ``t`` the optimizer step (1, 2, ...):

    - steps ``t <= N`` are ``torch.optim.Adam`` (or ``AdamW``) bit for bit: the step's gradient
      (averaged in full precision by ``qadam``) enters both moments, bias corrections
      ``1 - beta1**t`` and ``1 - beta2**t``;
    - steps ``t > N``: the step's gradient enters only the momentum (under ``qadam``, through the
      8-bit average of the ranks' local momenta); the variance keeps its step-``N`` value and is
      corrected by the constant ``1 - beta2**N`` (the correction of the updates it received), the
      momentum still by ``1 - beta1**t``.

    Bagua differs at the boundary: it updates the moments for ``t < N`` only (step ``N``'s
    gradient is averaged but enters neither moment), keeps correcting the frozen variance with
    ``1 - beta2**t``, and after warm-up forms the momentum from the raw gradient, so its weight
    decay stops acting.

    Example:
        >>> net = torch.nn.Linear(2, 1)
        >>> opt = QAdamOptimizer(net.parameters(), lr=0.01, warmup_steps=10)
        >>> net(torch.ones(1, 2)).sum().backward()
        >>> opt.step()
        >>> opt.steps_done
        1
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        warmup_steps: int = 100,
        *,
        weight_decay_mode: str = "l2",
    ) -> None:
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr!r}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"betas must be in [0, 1), got {betas!r}")
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps!r}")
        if not weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}")
        if weight_decay_mode not in _WEIGHT_DECAY_MODES:
            raise ValueError(f"weight_decay_mode must be one of {_WEIGHT_DECAY_MODES}, got {weight_decay_mode!r}")
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 1:
            raise ValueError(f"warmup_steps must be an int >= 1, got {warmup_steps!r}")
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            "weight_decay_mode": weight_decay_mode,
        }
        super().__init__(params, defaults)
        self.warmup_steps = warmup_steps
        self.steps_done = 0

    @property
    def frozen(self) -> bool:
        """True when the coming step uses the frozen variance (warm-up is over)."""
        return self.steps_done >= self.warmup_steps

    def state_dict(self) -> dict[str, Any]:
        """torch's state dict plus ``steps_done`` and ``warmup_steps`` (so a resumed run keeps its phase)."""
        sd = super().state_dict()
        sd["steps_done"] = self.steps_done
        sd["warmup_steps"] = self.warmup_steps
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict of :meth:`state_dict` (one without the two counters keeps the current ones)."""
        super().load_state_dict(state_dict)
        self.steps_done = int(state_dict.get("steps_done", self.steps_done))
        self.warmup_steps = int(state_dict.get("warmup_steps", self.warmup_steps))

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        frozen = self.frozen
        stepped = False
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                stepped = True
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["variance_steps"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                grad = p.grad
                if wd and group.get("weight_decay_mode", "l2") == "decoupled":
                    p.mul_(1 - lr * wd)
                elif wd:
                    grad = grad.add(p, alpha=wd)
                state["exp_avg"].lerp_(grad, 1 - beta1)
                if not frozen:
                    state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    state["variance_steps"] += 1
                bias1 = 1 - beta1 ** state["step"]
                bias2_sqrt = (1 - beta2 ** max(1, state["variance_steps"])) ** 0.5
                denom = (state["exp_avg_sq"].sqrt() / bias2_sqrt).add_(group["eps"])
                p.addcdiv_(state["exp_avg"], denom, value=-(lr / bias1))
        if stepped:  # a step without any gradient (e.g. skipped as non-finite) does not count
            self.steps_done += 1
        return loss


class QAdamState:
    """State of ``qadam``: the link, the bound optimizer and the 8-bit scatter-gather scratch."""

    __slots__ = ("link", "optimizer", "beta1", "plain", "compressed")

    def __init__(self, link: MeteredLink) -> None:
        self.link = link
        self.optimizer: QAdamOptimizer | None = None
        self.beta1 = 0.9
        self.plain = AllreduceState(link)
        self.compressed = ScatterGatherState(link, MinMaxUInt8Codec())


def make_state(link: MeteredLink) -> QAdamState:
    """State for ``qadam`` (the optimizer is bound by :func:`check_optimizers`)."""
    return QAdamState(link)


def check_optimizers(state: QAdamState | None, optimizers: list[Any]) -> None:
    """``qadam`` needs exactly one :class:`QAdamOptimizer` with one ``beta1`` for all groups."""
    if len(optimizers) != 1 or not isinstance(optimizers[0], QAdamOptimizer):
        got = [type(o).__name__ for o in optimizers]
        raise ValueError(f"algorithm 'qadam' needs one ding_dist QAdamOptimizer, got {got}")
    opt = optimizers[0]
    beta1s = {g["betas"][0] for g in opt.param_groups}
    if len(beta1s) != 1:
        raise ValueError(f"algorithm 'qadam' needs the same beta1 in every param group, got {sorted(beta1s)}")
    if state is not None:
        state.optimizer = opt
        state.beta1 = beta1s.pop()


def qadam_hook(state: QAdamState, bucket: Bucket) -> BucketStage:
    """Full-precision gradients during warm-up; afterwards 8-bit averaged local momentum."""
    opt = state.optimizer
    if opt is None or not opt.frozen:
        return allreduce_hook(state.plain, bucket)
    beta1 = state.beta1
    momentum = torch.cat(
        [
            (opt.state[p]["exp_avg"] if "exp_avg" in opt.state.get(p, {}) else torch.zeros_like(p)).reshape(-1)
            for p in bucket.params
        ]
    )
    local = momentum * beta1 + bucket.grads * (1 - beta1)

    def to_gradient(counts: list[float]) -> list[float]:
        bucket.grads.sub_(momentum, alpha=beta1).div_(1 - beta1)
        return counts

    return scatter_gather(state.compressed, bucket, values=local).followed_by(to_gradient)


ALGORITHMS = (
    Algorithm(
        "qadam",
        make_state=make_state,
        hook=qadam_hook,
        check_optimizers=check_optimizers,
        optimizer=QAdamOptimizer,
        optimizer_options=("warmup_steps",),
    ),
)
