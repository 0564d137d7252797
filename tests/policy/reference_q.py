"""By-hand references for the Q-learning and off-policy estimators: each written out as plain loops over float64
numpy values, never calling the code under test (tests/policy/test_q_references.py compares them with the real
``learn`` steps, samplers and target functions).

The on-policy half (GAE, advantage normalization, PPO's clipped losses) lives in ``tests/policy/reference.py``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from tests.policy.reference import perturb  # noqa: F401  (re-exported: the Q tests perturb target nets too)


def f64(x) -> np.ndarray:
    """A tensor (detached) or array as a float64 numpy array."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x, np.float64)


def huber(d: float, kappa: float = 1.0) -> float:
    """``d^2 / 2`` inside ``|d| <= kappa``, else ``kappa (|d| - kappa / 2)``."""
    return 0.5 * d * d if abs(d) <= kappa else kappa * (abs(d) - 0.5 * kappa)


def n_step(reward, terminated, truncated, gamma: float, n: int, t: int) -> tuple[float, int, float]:
    """The n-step return from row ``t`` of one env stream (rows in time order, newest last): ``(sum_k gamma^k r,
    last row, discount)``; the sum stops after a termination, a truncation, ``n`` rows or the newest row, and the
    discount is ``gamma^m``, 0 when the last row terminated."""
    ret, m = 0.0, 0
    for k in range(n):
        row = t + k
        if row >= len(reward):
            break
        ret += gamma**k * float(reward[row])
        m = k + 1
        if terminated[row] or truncated[row]:
            break
    last = t + m - 1
    return ret, last, 0.0 if terminated[last] else gamma**m


def double_q_target(reward, discount, q_next_online, q_next_target, double: bool = True) -> np.ndarray:
    """``r + d Q_target(s', a*)`` per row, ``a*`` the online net's greedy action (double) or the target's."""
    out = np.zeros(len(reward))
    for b in range(len(reward)):
        chooser = q_next_online[b] if double else q_next_target[b]
        a_star = max(range(len(chooser)), key=lambda a: chooser[a])
        out[b] = reward[b] + discount[b] * q_next_target[b][a_star]
    return out


def project(probs, reward, discount, support) -> np.ndarray:
    """C51's projection of ``r + d z`` onto ``support`` (Bellemare et al. 2017, Algorithm 1), atom by atom."""
    v_min, v_max, n = float(support[0]), float(support[-1]), len(support)
    dz = (v_max - v_min) / (n - 1)
    out = np.zeros((len(probs), n))
    for b in range(len(probs)):
        for j in range(n):
            tz = min(max(float(reward[b]) + float(discount[b]) * float(support[j]), v_min), v_max)
            pos = (tz - v_min) / dz
            lo, hi = math.floor(pos), math.ceil(pos)
            if lo == hi:
                out[b, lo] += probs[b][j]
            else:
                out[b, lo] += probs[b][j] * (hi - pos)
                out[b, hi] += probs[b][j] * (pos - lo)
    return out


def quantile_huber(pred, target, tau, kappa: float = 1.0) -> np.ndarray:
    """Per-row ``sum_i mean_j |tau_i - 1{target_j < pred_i}| huber(target_j - pred_i) / kappa``."""
    out = np.zeros(len(pred))
    for b in range(len(pred)):
        for i in range(len(pred[b])):
            for j in range(len(target[b])):
                d = float(target[b][j]) - float(pred[b][i])
                out[b] += abs(float(tau[b][i]) - (d < 0)) * huber(d, kappa) / kappa / len(target[b])
    return out


def fqf_fraction_loss(tau, values_hat, values_inner) -> np.ndarray:
    """FQF's fraction loss per row as in the paper (Yang et al. 2019, Proposition 1):
    ``sum_{i=1}^{N-1} (2 F^-1(tau_i) - F^-1(hat tau_{i-1}) - F^-1(hat tau_i)) tau_i``."""
    out = np.zeros(len(tau))
    for b in range(len(tau)):
        for i in range(1, len(tau[b]) - 1):
            grad = 2 * values_inner[b][i - 1] - values_hat[b][i - 1] - values_hat[b][i]
            out[b] += grad * tau[b][i]
    return out


def h(x: float, eps: float = 1e-3) -> float:
    """R2D2's value rescaling ``sign(x) (sqrt(|x| + 1) - 1) + eps x``."""
    return math.copysign(math.sqrt(abs(x) + 1) - 1, x) + eps * x


def h_inv(y: float, eps: float = 1e-3) -> float:
    """The inverse of :func:`h`, found by bisection (no closed form used), to 1e-12."""
    lo, hi = -1e9, 1e9
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if h(mid, eps) < y else (lo, mid)
    return 0.5 * (lo + hi)


def r2d2_targets(reward, bootstrap, valid: int, ended: bool, gamma: float, n: int, eps: float = 1e-3) -> list[float]:
    """R2D2's rescaled n-step targets of one sequence's first ``valid`` steps: ``h(sum_{k<m} gamma^k r[t+k] +
    gamma^m h^-1(bootstrap[t+m]))``, ``m = min(n, valid - t)``; no bootstrap from the end of a terminated one."""
    out = []
    for t in range(valid):
        m = min(n, valid - t)
        ret = sum(gamma**k * float(reward[t + k]) for k in range(m))
        if not (ended and t + m == valid):
            ret += gamma**m * h_inv(float(bootstrap[t + m]), eps)
        out.append(h(ret, eps))
    return out


def retrace(q_taken, v, reward, rho, terminated, cut, v_next, gamma: float) -> np.ndarray:
    """Retrace targets of one chunk (Munos et al. 2016; ACER): backwards, ``Q_ret = r + gamma Q'`` with
    ``Q' = min(1, rho) (Q_ret - Q) + V`` carried from the next step, ``V(next obs)`` where the chunk is cut, 0 after a
    termination."""
    steps = len(reward)
    out = np.zeros(steps)
    carry = 0.0
    for t in reversed(range(steps)):
        if cut[t] or t == steps - 1:
            carry = float(v_next[t])
        out[t] = float(reward[t]) + (0.0 if terminated[t] else gamma * carry)
        carry = min(1.0, float(rho[t])) * (out[t] - float(q_taken[t])) + float(v[t])
    return out


def per_probabilities(priority, alpha: float, eps: float) -> np.ndarray:
    """Proportional prioritized replay's ``P(i) = (|delta_i| + eps)^alpha / sum_k (|delta_k| + eps)^alpha``."""
    scaled = [(abs(float(p)) + eps) ** alpha for p in priority]
    total = sum(scaled)
    return np.array([s / total for s in scaled])


def per_weights(probs, beta: float) -> np.ndarray:
    """Importance weights ``(N P(i))^-beta / max_j (N P(j))^-beta`` over all ``N`` stored transitions."""
    n = len(probs)
    raw = [(n * float(p)) ** -beta for p in probs]
    top = max(raw)
    return np.array([r / top for r in raw])


def squashed_log_prob(mean, log_std, noise) -> float:
    """``log N(u; mean, std) - sum_j log(1 - tanh(u_j)^2)`` of ``u = mean + std * noise`` (one row)."""
    out = 0.0
    for m, s, e in zip(mean, log_std, noise):
        u = float(m) + math.exp(float(s)) * float(e)
        out += -0.5 * float(e) ** 2 - float(s) - 0.5 * math.log(2 * math.pi) - math.log(1 - math.tanh(u) ** 2)
    return out
