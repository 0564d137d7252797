"""Break one line of the Q-learning / off-policy math at a time and check that a test fails (issue 30, item 1).

Each entry of :data:`BREAKS` replaces one exact, unique piece of a source file with a wrong version (the kind of
slip a review makes: the target net picking double DQN's action, a dropped clip, a sign, a missing mask); the script
writes it, runs the by-hand reference tests, and restores the file whatever happens. A break is *caught* when the
tests fail. Not in CI (about 10 s per break on 2 cores); run it after changing a loss or a reference::

    python tools/q_breaks.py                       # every break against tests/policy/test_q_references.py
    python tools/q_breaks.py -k r2d2 -t tests/policy/test_r2d2.py   # breaks whose label has "r2d2", other tests

Exits 1 when a break survives (no test failed), 2 when a break no longer applies (the source moved on).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
P = "ding_dist/policy/"
ONLINE_PICKS = 'next_action = self.model(batch["next_obs"]).argmax(dim=-1)'  # double Q: the online net picks a*
TARGET_PICKS = 'next_action = self.target_model(batch["next_obs"]).argmax(dim=-1)'

# (label, file, exact original text, broken text)
BREAKS: list[tuple[str, str, str, str]] = [
    ("dqn: double DQN picks a* with the target net", P + "dqn.py",
     'next_action = self.model(batch["next_obs"]).argmax(dim=-1, keepdim=True)',
     "next_action = next_q_target.argmax(dim=-1, keepdim=True)"),
    ("dqn: target without the discount", P + "dqn.py",
     'target = batch["reward"] + batch["discount"] * next_q', 'target = batch["reward"] + next_q'),
    ("dqn: importance weights dropped", P + "dqn.py",
     'per_sample = per_sample * batch["weight"]', "per_sample = per_sample"),
    ("dqn: priority is the signed TD error", P + "dqn.py",
     'stats["priority"] = (q.detach() - target).abs()', 'stats["priority"] = q.detach() - target'),
    ("dqn: initial priority sums across episode ends", P + "dqn.py",
     "alive = active & ~done[row, env]", "alive = active"),
    ("dqn: initial priority bootstraps terminations", P + "dqn.py",
     'discount = gamma**n * ~np.asarray(rollout["terminated"])[last, env]', "discount = gamma**n + 0 * last"),
    ("dqn: initial priority picks a* with the target net", P + "dqn.py",
     "(self.model(next_obs) if self.cfg.learn.double else next_q_target)", "next_q_target"),
    ("replay: n-step sum crosses truncations", "ding_dist/data/replay.py",
     'alive = active & ~(d["terminated"][row, env] | d["truncated"][row, env])',
     'alive = active & ~d["terminated"][row, env]'),
    ("replay: truncation does not bootstrap", "ding_dist/data/replay.py",
     'discount = self.gamma**steps * (~d["terminated"][last % cap, env])',
     'discount = self.gamma**steps * (~(d["terminated"] | d["truncated"])[last % cap, env])'),
    ("replay: reward k discounted by gamma^(k+1)", "ding_dist/data/replay.py",
     'ret += np.where(active, self.gamma**k * d["reward"][row, env], 0.0)',
     'ret += np.where(active, self.gamma ** (k + 1) * d["reward"][row, env], 0.0)'),
    ("replay: n-step sum runs past the newest row", "ding_dist/data/replay.py",
     "active = alive & (k < remaining)", "active = alive"),
    ("c51: a* from the target net", P + "c51.py",
     ONLINE_PICKS, TARGET_PICKS),
    ("qrdqn: a* from the target net", P + "qrdqn.py",
     ONLINE_PICKS, TARGET_PICKS),
    ("iqn: a* from the target net", P + "iqn.py",
     ONLINE_PICKS, TARGET_PICKS),
    ("fqf: a* from the target net", P + "fqf.py",
     ONLINE_PICKS, TARGET_PICKS),
    ("rainbow: a* from the target net", P + "rainbow.py",
     ONLINE_PICKS, TARGET_PICKS),
    ("rainbow: prediction reuses the target's noise draw", P + "rainbow.py",
     "        self.model.sample_noise(g)  # fresh noise", "        pass  # fresh noise"),
    ("projection: an exact atom loses its mass", P + "losses.py",
     "to_lower = (upper - b) + (lower == upper).to(b.dtype)", "to_lower = upper - b"),
    ("projection: mass to the wrong neighbours", P + "losses.py",
     "to_upper = b - lower\n", "to_upper = upper - b\n"),
    ("quantile huber: indicator reversed", P + "losses.py",
     "weight = (tau - (delta.detach() < 0).to(pred.dtype)).abs()",
     "weight = (tau - (delta.detach() > 0).to(pred.dtype)).abs()"),
    ("quantile huber: mean over i instead of sum", P + "losses.py",
     "return (weight * huber / kappa).sum(dim=1).mean(dim=1)",
     "return (weight * huber / kappa).mean(dim=1).mean(dim=1)"),
    ("quantile huber: no kappa/2 in the linear part", P + "losses.py",
     "kappa * (abs_delta - 0.5 * kappa)", "kappa * abs_delta"),
    ("quantile huber: not divided by kappa", P + "losses.py",
     "(weight * huber / kappa)", "(weight * huber)"),
    ("qrdqn: fractions i/N instead of midpoints", P + "qrdqn.py",
     "self.tau = (torch.arange(n, dtype=torch.float32, device=self.device) + 0.5) / n",
     "self.tau = torch.arange(n, dtype=torch.float32, device=self.device) / n"),
    ("iqn: prediction at the target's fractions", P + "iqn.py",
     'values = self.train_model(batch["obs"], tau)', 'values = self.train_model(batch["obs"], tau_next)'),
    ("fqf: fraction gradient without the 2 F^-1(tau_i)", P + "fqf.py",
     "grad = 2 * values_inner.detach() -", "grad = values_inner.detach() -"),
    ("fqf: fraction loss on the wrong fractions", P + "fqf.py",
     "return (grad * tau[:, 1:-1]).sum(dim=-1)", "return (grad * tau[:, :-2]).sum(dim=-1)"),
    ("fqf: entropy bonus with the wrong sign", P + "fqf.py",
     "- self.cfg.learn.ent_coef * entropy", "+ self.cfg.learn.ent_coef * entropy"),
    ("fqf: quantile loss at tau instead of tau_hat", P + "fqf.py",
     "quantile_huber_loss(taken, target, tau_hat,", "quantile_huber_loss(taken, target, tau[:, 1:],"),
    ("r2d2: a* from the target net", P + "r2d2.py",
     "online = q_all.detach() if lc.double else q_target_all", "online = q_target_all"),
    ("r2d2: burn-in steps in the loss", P + "r2d2.py",
     "learned = mask & (t >= burnin.unsqueeze(0))", "learned = mask"),
    ("r2d2: padding in the loss", P + "r2d2.py",
     "learned = mask & (t >= burnin.unsqueeze(0))", "learned = t >= burnin.unsqueeze(0)"),
    ("r2d2: h without eps x", P + "r2d2.py",
     "return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0) + eps * x",
     "return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0)"),
    ("r2d2: h^-1 without the eps inside", P + "r2d2.py",
     "(x.abs() + 1.0 + eps)", "(x.abs() + 1.0)"),
    ("r2d2: bootstraps a terminated sequence end", P + "r2d2.py",
     "discount = (gamma ** m.to(reward.dtype)) * ~((last == valid.unsqueeze(0)) & ended.unsqueeze(0))",
     "discount = gamma ** m.to(reward.dtype)"),
    ("r2d2: n-step length past the sequence end", P + "r2d2.py",
     "m = torch.clamp(valid.unsqueeze(0) - t, 1, n)", "m = torch.clamp(valid.unsqueeze(0) - t + 1, 1, n)"),
    ("r2d2: per-sequence mean over all steps", P + "r2d2.py",
     "per_seq = per_step.sum(0) / learned.sum(0).clamp(min=1)", "per_seq = per_step.mean(0)"),
    ("r2d2: priority eta swapped", "ding_dist/data/sequence_replay.py",
     "eta * top + (1.0 - eta) * mean", "eta * mean + (1.0 - eta) * top"),
    ("td3: twin maximum", P + "td3.py", ".min(dim=0).values", ".max(dim=0).values"),
    ("td3: smoothed action not clipped to the bounds", P + "td3.py",
     "next_action = (next_action + self.smoothing_noise(obs.shape[0])).clamp(-1.0, 1.0)",
     "next_action = next_action + self.smoothing_noise(obs.shape[0])"),
    ("td3: smoothing noise not clipped", P + "continuous.py",
     "return noise if clip is None else noise.clamp(float(clip[0]), float(clip[1]))", "return noise"),
    ("td3: actor every update", P + "td3.py",
     "if (self.train_iter + 1) % int(lc.actor_update_freq) == 0:", "if True:"),
    ("td3: actor maximizes Q2", P + "td3.py",
     "actor_loss = -self._q(self.critic, obs, self.train_actor(obs))[0].mean()",
     "actor_loss = -self._q(self.critic, obs, self.train_actor(obs))[-1].mean()"),
    ("sac: target from Q1 only", P + "sac.py",
     "next_v = torch.min(next_q1, next_q2) - alpha * next_logp", "next_v = next_q1 - alpha * next_logp"),
    ("sac: entropy term with the wrong sign", P + "sac.py",
     "next_v = torch.min(next_q1, next_q2) - alpha * next_logp",
     "next_v = torch.min(next_q1, next_q2) + alpha * next_logp"),
    ("sac: actor on Q1 only", P + "sac.py",
     "actor_loss = (alpha * logp - torch.min(pi_q1, pi_q2)).mean()", "actor_loss = (alpha * logp - pi_q1).mean()"),
    ("sac: alpha loss with - target entropy", P + "sac.py",
     "(logp.detach() + self.target_entropy)", "(logp.detach() - self.target_entropy)"),
    ("sac: no tanh correction in log pi", P + "sac.py",
     "return torch.tanh(u), gaussian_logp - log_det_tanh", "return torch.tanh(u), gaussian_logp"),
    ("sac: target entropy -|A|/2", P + "sac.py",
     "float(-self.action_size if", "float(-self.action_size / 2 if"),
    ("retrace: trace not cut at 1", P + "acer.py",
     "carry = rho_taken[t].clamp(max=1.0) * (q_ret[t] - q_taken[t]) + v[t]",
     "carry = rho_taken[t] * (q_ret[t] - q_taken[t]) + v[t]"),
    ("retrace: truncations ignored", P + "acer.py",
     "carry = torch.where(cut[t], v_next[t], carry)", "carry = carry"),
    ("retrace: terminations bootstrap", P + "acer.py",
     "q_ret[t] = reward[t] + gamma * (~terminated[t]) * carry", "q_ret[t] = reward[t] + gamma * carry"),
    ("per: weights not normalized by the max", "ding_dist/data/prioritized.py",
     "weights = (self.tree.leaves(index) / self.tree.min) ** -self.beta",
     "weights = (self.tree.leaves(index) / self.tree.total * len(self.storage)) ** -self.beta"),
    ("per: weights with +beta", "ding_dist/data/prioritized.py",
     "weights = (self.tree.leaves(index) / self.tree.min) ** -self.beta",
     "weights = (self.tree.leaves(index) / self.tree.min) ** self.beta"),
    ("per: priorities without alpha", "ding_dist/data/prioritized.py",
     "self.tree.update(row * self.num_envs + slots, p[t] ** self.alpha)",
     "self.tree.update(row * self.num_envs + slots, p[t])"),
    ("per: beta annealed one draw ahead", "ding_dist/data/prioritized.py",
     "min(1.0, self.draws / self.anneal_step)", "min(1.0, (self.draws + 1) / self.anneal_step)"),
    ("per: no eps in priorities", "ding_dist/data/prioritized.py", "return p + self.eps", "return p"),
]  # fmt: skip


def run_break(label: str, path: str, old: str, new: str, tests: list[str]) -> str:
    """``"caught"``, ``"SURVIVED"`` or ``"stale"`` (``old`` is not exactly once in ``path``)."""
    file = ROOT / path
    original = file.read_text()
    if original.count(old) != 1:
        return "stale"
    try:
        file.write_text(original.replace(old, new))
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
        rc = subprocess.run(cmd, cwd=ROOT, capture_output=True, timeout=600).returncode
    finally:
        file.write_text(original)
    return "caught" if rc != 0 else "SURVIVED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only the breaks whose label contains this text")
    parser.add_argument("-t", "--tests", nargs="+", default=["tests/policy/test_q_references.py"])
    args = parser.parse_args(argv)
    outcomes = []
    for label, path, old, new in BREAKS:
        if args.k in label:
            outcome = run_break(label, path, old, new, args.tests)
            outcomes.append(outcome)
            print(f"{outcome:9s} {label}", flush=True)
    print(f"{outcomes.count('caught')} caught, {outcomes.count('SURVIVED')} survived, {outcomes.count('stale')} stale")
    return 2 if "stale" in outcomes else 1 if "SURVIVED" in outcomes else 0


if __name__ == "__main__":
    sys.exit(main())
