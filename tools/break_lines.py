"""Break one line of the on-policy learning math at a time, run the tests that guard it, restore it.

    python tools/break_lines.py            # every break below; prints CAUGHT / MISSED per break and a count
    python tools/break_lines.py impala pg  # only the breaks of these policy files

Each break replaces one exact piece of a line of ``ding_dist/policy/<file>.py`` (it must occur there) and runs
that policy's default-run tests (``-x``, ``not quality``); the file is restored afterwards, even on Ctrl-C. A break
is CAUGHT when the tests fail. Exits 1 if any break is MISSED. Not in CI: a hand check next to mutmut
(docs/contributing.md, "Mutation testing"). Commit or stash first: the runner edits the checkout in place.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = {
    "ppo": ["tests/policy/test_ppo.py"],
    "impala": ["tests/policy/test_impala.py"],
    "a2c": ["tests/policy/test_a2c.py"],
    "pg": ["tests/policy/test_pg.py"],
    "ppo_pg": ["tests/policy/test_ppo_pg.py"],
    "ppo_offpolicy": ["tests/policy/test_ppo_offpolicy.py"],
    "ppg": ["tests/policy/test_ppg.py"],
}

# (policy file, what the break does, the exact text, its replacement)
BREAKS: list[tuple[str, str, str, str]] = [
    # PPO
    ("ppo", "GAE lambda dropped", "gamma * gae_lambda * nonterminal * last", "gamma * nonterminal * last"),
    ("ppo", "GAE done cut dropped from delta", "next_value[t] * nonterminal - value[t]", "next_value[t] - value[t]"),
    ("ppo", "GAE done cut dropped from the recursion", "gae_lambda * nonterminal * last", "gae_lambda * last"),
    ("ppo", "GAE returns without the value", "return adv, adv + value", "return adv, adv"),
    ("ppo", "truncation bootstrap dropped", "reward[truncated] += cc.discount_factor *", "reward[truncated] += 0 *"),
    ("ppo", "surrogate max -> min", "return mean(torch.max(-adv * ratio", "return mean(torch.min(-adv * ratio"),
    ("ppo", "surrogate clamp dropped", "-adv * ratio.clamp(1.0 - clip_ratio, 1.0 + clip_ratio)", "-adv * ratio"),
    (
        "ppo",
        "surrogate lower clip dropped",
        "ratio.clamp(1.0 - clip_ratio, 1.0 + clip_ratio)",
        "ratio.clamp(0.0, 1.0 + clip_ratio)",
    ),
    ("ppo", "ratio inverted", "ratio = (logp - old_logp).exp()", "ratio = (old_logp - logp).exp()"),
    (
        "ppo",
        "adv_norm std division dropped",
        "a = (a - adv_mean[epoch, mb]) / (adv_std[epoch, mb] + 1e-8)",
        "a = a - adv_mean[epoch, mb]",
    ),
    (
        "ppo",
        "adv_norm mean dropped",
        "a = (a - adv_mean[epoch, mb]) / (adv_std[epoch, mb] + 1e-8)",
        "a = a / (adv_std[epoch, mb] + 1e-8)",
    ),
    ("ppo", "adv_norm biased std", "/ max(n - 1, 1)", "/ max(n, 1)"),
    (
        "ppo",
        "value clip dropped",
        "(v - old_value[idx]).clamp(-lc.value_clip_ratio, lc.value_clip_ratio)",
        "(v - old_value[idx])",
    ),
    ("ppo", "value clip max -> min", "0.5 * mean(torch.max((v - r) ** 2", "0.5 * mean(torch.min((v - r) ** 2"),
    ("ppo", "value loss half dropped", "value_loss = 0.5 * mean((v - r) ** 2)", "value_loss = mean((v - r) ** 2)"),
    ("ppo", "value weight dropped", "policy_loss + lc.value_weight * value_loss", "policy_loss + value_loss"),
    ("ppo", "entropy sign", "- lc.entropy_weight * mean(entropy)", "+ lc.entropy_weight * mean(entropy)"),
    # IMPALA
    ("impala", "rho_bar clip dropped", "rho = ratio.clamp(max=rho_bar)", "rho = ratio"),
    ("impala", "c_bar clip dropped", "c = lam * ratio.clamp(max=c_bar)", "c = lam * ratio"),
    ("impala", "c clipped by rho_bar", "c = lam * ratio.clamp(max=c_bar)", "c = lam * ratio.clamp(max=rho_bar)"),
    ("impala", "lambda dropped", "c = lam * ratio.clamp(max=c_bar)", "c = ratio.clamp(max=c_bar)"),
    ("impala", "rho dropped from delta", "delta = rho * (reward", "delta = (reward"),
    ("impala", "c dropped from the recursion", "discount[t] * c[t] * acc", "discount[t] * acc"),
    ("impala", "discount dropped from the recursion", "discount[t] * c[t] * acc", "c[t] * acc"),
    ("impala", "rho dropped from the advantage", "advantage = rho * (reward", "advantage = (reward"),
    (
        "impala",
        "advantage bootstraps from V not v",
        "reward + discount * next_vs - value",
        "reward + discount * next_value - value",
    ),
    (
        "impala",
        "log_rho inverted",
        "log_rho = logp.detach() - behavior_logp[:, cols]",
        "log_rho = behavior_logp[:, cols] - logp.detach()",
    ),
    ("impala", "truncation bootstrap dropped", "reward[truncated] += gamma *", "reward[truncated] += 0 *"),
    ("impala", "truncation does not cut", "(~(terminated | truncated))", "(~terminated)"),
    ("impala", "adv_norm std division dropped", "adv = (adv - adv_mean) / (adv_std + 1e-8)", "adv = adv - adv_mean"),
    ("impala", "adv_norm mean dropped", "adv = (adv - adv_mean) / (adv_std + 1e-8)", "adv = adv / (adv_std + 1e-8)"),
    ("impala", "value loss half dropped", "value_loss = 0.5 * ((vs - value)", "value_loss = ((vs - value)"),
    ("impala", "value weight dropped", "policy_loss + lc.value_weight * value_loss", "policy_loss + value_loss"),
    ("impala", "entropy sign", "- lc.entropy_weight * entropy_mean", "+ lc.entropy_weight * entropy_mean"),
    ("impala", "policy loss sign", "policy_loss = -(adv * logp)", "policy_loss = (adv * logp)"),
    # A2C
    ("a2c", "adv_norm std division dropped", "a = (a - adv_mean[0]) / (adv_std[0] + 1e-8)", "a = a - adv_mean[0]"),
    ("a2c", "adv_norm mean dropped", "a = (a - adv_mean[0]) / (adv_std[0] + 1e-8)", "a = a / (adv_std[0] + 1e-8)"),
    ("a2c", "policy loss sign", "policy_loss = -mean(logp * a)", "policy_loss = mean(logp * a)"),
    ("a2c", "value loss with a half", "value_loss = mean((r - v) ** 2)", "value_loss = 0.5 * mean((r - v) ** 2)"),
    ("a2c", "value target is the advantage", "a, r = flat(adv), flat(ret)", "a, r = flat(adv), flat(adv)"),
    ("a2c", "value weight dropped", "policy_loss + lc.value_weight * value_loss", "policy_loss + value_loss"),
    ("a2c", "entropy sign", "- lc.entropy_weight * entropy_mean", "+ lc.entropy_weight * entropy_mean"),
    # PG
    ("pg", "return undiscounted", "g = float(reward[t]) + gamma * g", "g = float(reward[t]) + g"),
    ("pg", "policy loss sign", "policy_loss = -(logp * ret[idx])", "policy_loss = (logp * ret[idx])"),
    ("pg", "entropy sign", "loss = policy_loss - lc.entropy_weight", "loss = policy_loss + lc.entropy_weight"),
    ("pg", "last minibatch not DI-engine's overlap", "order[min(start, total - batch_size) :]", "order[start:]"),
    ("pg", "minibatch mean over all samples", "world / len(idx)", "world / sum(rank_samples)"),
    # PPO-PG
    (
        "ppo_pg",
        "ratio to the current policy",
        "clipped_surrogate(logp, old_logp[idx], ret[idx]",
        "clipped_surrogate(logp, logp.detach(), ret[idx]",
    ),
    ("ppo_pg", "entropy sign", "loss = policy_loss - lc.entropy_weight", "loss = policy_loss + lc.entropy_weight"),
    ("ppo_pg", "clip ratio ignored", "ret[idx], lc.clip_ratio, mean)", "ret[idx], 10.0, mean)"),
    # PPO off-policy
    ("ppo_offpolicy", "value target is the advantage", "ret = adv + old_value", "ret = adv"),
    (
        "ppo_offpolicy",
        "adv_norm std division dropped",
        "adv = (adv - mean[0, 0]) / (std[0, 0] + 1e-8)",
        "adv = adv - mean[0, 0]",
    ),
    (
        "ppo_offpolicy",
        "adv_norm mean dropped",
        "adv = (adv - mean[0, 0]) / (std[0, 0] + 1e-8)",
        "adv = adv / (std[0, 0] + 1e-8)",
    ),
    (
        "ppo_offpolicy",
        "value clip dropped",
        "(v - old_value).clamp(-lc.value_clip_ratio, lc.value_clip_ratio)",
        "(v - old_value)",
    ),
    ("ppo_offpolicy", "value clip max -> min", "0.5 * torch.max((v - ret) ** 2", "0.5 * torch.min((v - ret) ** 2"),
    (
        "ppo_offpolicy",
        "unclipped value loss half dropped",
        "value_loss = 0.5 * ((v - ret) ** 2).mean()",
        "value_loss = ((v - ret) ** 2).mean()",
    ),
    ("ppo_offpolicy", "value weight dropped", "policy_loss + lc.value_weight * value_loss", "policy_loss + value_loss"),
    ("ppo_offpolicy", "entropy sign", "- lc.entropy_weight * entropy", "+ lc.entropy_weight * entropy"),
    ("ppo_offpolicy", "stored advantage is the return", '"adv": flat(adv)}', '"adv": flat(adv + rollout["value"])}'),
    # PPG
    ("ppg", "value clip dropped", "v_clip = v_old + (v - v_old).clamp(-clip, clip)", "v_clip = v"),
    ("ppg", "value clip max -> min", "return 0.5 * torch.max(", "return 0.5 * torch.min("),
    ("ppg", "value loss half dropped", "return 0.5 * torch.max(", "return torch.max("),
    ("ppg", "adv_norm std division dropped", "adv = (adv - mean[0, 0]) / (std[0, 0] + 1e-8)", "adv = adv - mean[0, 0]"),
    ("ppg", "adv_norm mean dropped", "adv = (adv - mean[0, 0]) / (std[0, 0] + 1e-8)", "adv = adv / (std[0, 0] + 1e-8)"),
    (
        "ppg",
        "policy ratio to the current policy",
        'clipped_surrogate(dist.log_prob(batch["action"]), batch["logp"]',
        'clipped_surrogate(dist.log_prob(batch["action"]), dist.log_prob(batch["action"]).detach()',
    ),
    (
        "ppg",
        "policy entropy sign",
        "policy_loss - lc.entropy_weight * entropy",
        "policy_loss + lc.entropy_weight * entropy",
    ),
    ("ppg", "value step weight dropped", "loss = lc.value_weight * clipped_value_loss", "loss = clipped_value_loss"),
    (
        "ppg",
        "value step target is the advantage",
        'batch["adv"] + batch["value"], lc.clip_ratio)',
        'batch["adv"], lc.clip_ratio)',
    ),
    ("ppg", "aux target is the advantage", 'ret = batch["adv"] + batch["value"]', 'ret = batch["adv"]'),
    (
        "ppg",
        "KL direction reversed",
        "kl = (old.exp() * (old - torch.log_softmax(logits, -1))).sum(-1).mean()",
        "kl = (logits.softmax(-1) * (torch.log_softmax(logits, -1) - old)).sum(-1).mean()",
    ),
    (
        "ppg",
        "KL on the taken action only",
        "kl = (old.exp() * (old - torch.log_softmax(logits, -1))).sum(-1).mean()",
        "kl = (old - torch.log_softmax(logits, -1)).max(-1).values.mean()",
    ),
    ("ppg", "aux_bc_weight dropped", "aux_loss + lc.aux_bc_weight * kl", "aux_loss + kl"),
    (
        "ppg",
        "aux value clip dropped",
        'aux_loss = clipped_value_loss(aux_v, batch["value"], ret, lc.clip_ratio)',
        'aux_loss = clipped_value_loss(aux_v, batch["value"], ret, 1e9)',
    ),
    (
        "ppg",
        "old logits not frozen",
        'data["old_logits"] = self.model.policy(data["obs"])[0]',
        'data["old_logits"] = torch.zeros_like(self.model.policy(data["obs"])[0])',
    ),
]


def run(policy: str, what: str, old: str, new: str) -> bool:
    """Apply one break, run its tests, restore; True when a test failed."""
    path = ROOT / "ding_dist" / "policy" / f"{policy}.py"
    src = path.read_text()
    if old not in src:
        raise SystemExit(f"break {policy}: {what!r}: text not found: {old!r}")
    path.write_text(src.replace(old, new, 1))
    try:
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-x",
            "-p",
            "no:cacheprovider",
            "-m",
            "not quality",
            *TESTS[policy],
        ]
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    finally:
        path.write_text(src)
    last = (out.stdout.strip().splitlines() or [""])[-1]
    caught = out.returncode != 0
    print(f"{'CAUGHT' if caught else 'MISSED'} {policy}: {what} | {last}", flush=True)
    return caught


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # a `timeout` or kill still restores the broken file (run's finally)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    chosen = [b for b in BREAKS if not argv or b[0] in argv]
    missed = [b for b in chosen if not run(*b)]
    print(f"{len(chosen) - len(missed)} of {len(chosen)} breaks caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
