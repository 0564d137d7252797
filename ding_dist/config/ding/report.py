"""The report of one DI-engine translation: what was mapped, converted, defaulted, ignored; printed once per job.

Example:
    >>> r = TranslationReport("cartpole_dqn_config.py", "dqn", "CartPole-v0")
    >>> r.add("default", "policy.discount_factor=0.97 (DI-engine's DQN default)")
    >>> r.of("default")
    ["policy.discount_factor=0.97 (DI-engine's DQN default)"]
"""

from __future__ import annotations

import hashlib
import os
import sys
import textwrap
from dataclasses import dataclass, field

__all__ = ["REPORTED_ENV", "TranslationReport", "emit"]

REPORTED_ENV = "DING_DIST_DING_REPORTED"  # inherited by the ranks a launcher starts: one report per job
#: The reports this process printed (their keys); tests reset it.
reported: set[str] = set()


@dataclass
class TranslationReport:
    """What the translation of one DI-engine config did, key by key.

    ``lines`` holds ``(kind, text)`` pairs; kinds: ``mapped`` (same meaning, maybe renamed), ``converted``
    (value changed to keep DI-engine's meaning), ``default`` (DI-engine's default where ours differs),
    ``ignored`` (accepted, no effect here, with why), ``differs`` (DI-engine behaviour ding_dist does not
    reproduce exactly), ``set`` (a ``--set`` override).

    Example:
        >>> r = TranslationReport("cartpole_dqn_config.py", "dqn", "CartPole-v0")
        >>> r.add("ignored", "env.replay_path: no video recorder")
        >>> print(r.render())  # doctest: +NORMALIZE_WHITESPACE
        ding-dist: cartpole_dqn_config.py is a DI-engine config (policy dqn, env CartPole-v0); translated:
          ignored    env.replay_path: no video recorder
    """

    source: str
    policy: str
    env_id: str
    lines: list[tuple[str, str]] = field(default_factory=list)

    def add(self, kind: str, text: str) -> None:
        self.lines.append((kind, text))

    def of(self, kind: str) -> list[str]:
        """The texts of one kind, in order."""
        return [text for k, text in self.lines if k == kind]

    def render(self) -> str:
        """The report as printed: a header, then one line per decision (same-name mappings on one line)."""
        head = f"ding-dist: {self.source} is a DI-engine config (policy {self.policy}, env {self.env_id}); translated:"
        same = [text for kind, text in self.lines if kind == "same"]
        out = [head]
        if same:
            out += textwrap.wrap(", ".join(same), 116, initial_indent=f"  {'same':<10} ", subsequent_indent=" " * 13)
        out += [f"  {kind:<10} {text}" for kind, text in self.lines if kind != "same"]
        return "\n".join(out)


def _is_rank0() -> bool:
    for name in ("RANK", "SLURM_PROCID"):
        if os.environ.get(name, "0") not in ("0", ""):
            return False
    from ding_dist.comm import get_rank

    return get_rank() == 0


def emit(report: TranslationReport) -> None:
    """Print the report to stderr, once per job (per process, and not again in the ranks a launcher starts).

    Example::

        emit(report)  # on rank 0, the first time this translation is seen in the job
    """
    text = report.render()
    key = hashlib.sha1(repr(report.lines).encode()).hexdigest()[:16]  # the same translation, whatever its source
    if key in reported or os.environ.get(REPORTED_ENV) == key:
        return
    reported.add(key)
    if _is_rank0():
        print(text, file=sys.stderr, flush=True)
        os.environ[REPORTED_ENV] = key
