"""The run's sections beyond the policy (``exp_name``/``seed``, ``env``, ``actor_learner``, ``pbt``) are declared once
(``ding_dist/config/sections.py``): their defaults, ``config show`` meanings, value checks and docs tables come from
the declarations, and the code reads exactly the keys they declare.

Pipeline code reads these sections by name (``env_cfg.get("id")``, ``cfg.env.stop_value``, ``al.max_lag``,
``pbt.quantile``), so the reads are found in its source: every read key must be declared, and every declared key
must be read outside the config layer (which only declares and checks them).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ding_dist.config import ConfigError, load_config, run_defaults
from ding_dist.config.actor_learner import check_actor_learner_config
from ding_dist.config.describe import DOC_PAGES, describe, render_docs
from ding_dist.config.describe import main as describe_main
from ding_dist.config.pbt import check_pbt_config
from ding_dist.config.sections import ACTOR_LEARNER_KEYS, ENV_KEYS, PBT_KEYS, SECTIONS, TOP_KEYS, run_key
from ding_dist.policy import PPOPolicy
from ding_dist.utils.keys import Key, KeySet

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "ding_dist"
#: How pipeline code names each section's mapping (``env_cfg`` is the section a vector env is built from).
READERS = {"env": r"(?:\benv_cfg|\bcfg\.env)", "actor_learner": r"(?<!config\.)(?:\bactor_learner|\bal)",
           "pbt": r"(?<!config\.)\bpbt", "": r"\bcfg"}  # fmt: skip
ACCESS = r"(?:\.get\(\s*[\"']|\[[\"']|\.)([A-Za-z_]\w*)"
#: Names after a section's name that are no keys: methods, and file names such as docs/pbt.md.
NOT_KEYS = {"get", "items", "keys", "values", "md", "png", "py"}


def _reads(section: str, skip_config: bool) -> dict[str, set[str]]:
    """``{key: files}`` of every read of ``section``'s keys in the package (DI-engine's translator, which reads
    DI-engine's keys, aside; ``skip_config``: only the code that uses the keys, not the config layer)."""
    out: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("config/ding/") or (skip_config and rel.startswith("config/")):
            continue
        for found in re.finditer(READERS[section] + ACCESS, path.read_text()):
            if found.group(1) not in NOT_KEYS:
                out.setdefault(found.group(1), set()).add(rel)
    return out


def undeclared(section: str, keys: KeySet) -> list[str]:
    reads = _reads(section, skip_config=False)
    if not section:  # cfg.<x> at the top: only the top-level keys and sections are ours
        reads = {k: v for k, v in reads.items() if k in ("exp_name", "seed")}
    return sorted(k for k in reads if k not in keys)


def unread(section: str, keys: KeySet) -> list[str]:
    reads = _reads(section, skip_config=True)
    return sorted(k for k in keys if k.split(".")[0] not in reads)


@pytest.mark.parametrize("section", list(SECTIONS))
def test_the_code_reads_exactly_the_keys_a_section_declares(section):
    keys = SECTIONS[section]
    assert undeclared(section, keys) == [], f"section {section or 'top'!r} is read for keys it does not declare"
    assert unread(section, keys) == [], f"section {section or 'top'!r} declares keys no code reads"


def test_the_read_check_fails_both_ways():
    assert undeclared("actor_learner", ACTOR_LEARNER_KEYS.minus("max_lag")) == ["max_lag"]
    assert unread("env", ENV_KEYS.plus(Key("frame_skip", 4, "never read"))) == ["frame_skip"]


def test_section_defaults_are_the_declarations():
    defaults = run_defaults("dqn")
    assert defaults["env"] == ENV_KEYS.defaults()
    assert defaults["actor_learner"] == ACTOR_LEARNER_KEYS.defaults()
    assert defaults["pbt"] == PBT_KEYS.defaults()
    cfg = load_config("cartpole_dqn")
    assert (cfg.actor_learner.lag_mode, cfg.pbt.quantile, cfg.env.max_restarts) == ("block", 0.25, 5)
    assert load_config({"policy": {}, "create_config": {"policy": {"type": "dqn"}}}).exp_name == "default_experiment"


@pytest.mark.parametrize("section", list(SECTIONS))
def test_every_declared_key_has_a_meaning_and_a_default_its_rule_accepts(section):
    keys = SECTIONS[section]
    assert [p for p, k in keys.items() if not k.meaning] == []
    assert [p for p, k in keys.items() if k.error(k.default) is not None] == []


@pytest.mark.parametrize(
    "override, message",
    [
        ("env.sample_groups=0", "config key 'env.sample_groups' must be >= 1, got 0"),
        ("env.max_restarts=-1", "config key 'env.max_restarts' must be >= 0, got -1"),
        ("env.restart_window_s=0", "config key 'env.restart_window_s' must be a finite number > 0, got 0"),
        ("env.step_cost_ms=-1.5", "config key 'env.step_cost_ms' must be a number >= 0, got -1.5"),
        ("actor_learner.queue=-1", "config key 'actor_learner.queue' must be an int >= 0, got -1"),
        ("actor_learner.lag_mode=wait",
         "config key 'actor_learner.lag_mode' must be one of ['block', 'drop'], got 'wait'"),
        ("actor_learner.actor_threads=0",
         "config key 'actor_learner.actor_threads' must be \"auto\" or an int >= 1, got '0'"),
        ("pbt.interval=0", "config key 'pbt.interval' must be an int >= 1, got 0"),
        ("pbt.quantile=0.75", "config key 'pbt.quantile' must be a number in (0, 0.5], got 0.75"),
        ("seed=-1", "config key 'seed' must be an int in [0, 2**32), got -1"),
    ],
)  # fmt: skip
def test_compiling_checks_each_declared_rule(override, message):
    with pytest.raises(ConfigError) as exc:
        load_config("cartpole_dqn", overrides=[override])
    assert str(exc.value) == message


def test_every_problem_of_the_sections_in_one_error():
    with pytest.raises(ConfigError) as exc:
        load_config("cartpole_dqn", overrides=["env.sample_groups=0", "actor_learner.max_lag=-2", "pbt.seed=-1"])
    assert str(exc.value) == (
        "3 config errors: config key 'env.sample_groups' must be >= 1, got 0; config key 'actor_learner.max_lag' must "
        "be an int >= 0, got -2; config key 'pbt.seed' must be an int >= 0, got -1"
    )


def test_the_section_checks_called_directly_give_the_same_messages():
    with pytest.raises(ConfigError) as exc:
        check_actor_learner_config({"actors": 1, "inference": 2})
    assert str(exc.value) == "config key 'actor_learner.inference' must be 0 or 1 (inference ranks), got 2"
    with pytest.raises(ConfigError) as exc:
        check_actor_learner_config({"actors": 1, "learners": 2})
    assert str(exc.value) == "actor_learner.actors=1 < actor_learner.learners=2: every learner needs at least one actor"
    with pytest.raises(ConfigError) as exc:
        check_pbt_config({"population": True}, PPOPolicy)
    assert str(exc.value) == "config key 'pbt.population' must be an int >= 1, got True"


def test_config_show_describes_every_key_of_the_sections_from_its_declaration():
    schema = {**TOP_KEYS.defaults(), **run_defaults("ppo")}
    rows = {r.key: r for r in describe(schema, schema, "ppo")}
    for section, keys in SECTIONS.items():
        for path, key in keys.items():
            dotted = f"{section}.{path}" if section else path
            assert (rows[dotted].meaning, rows[dotted].rule, rows[dotted].default) == (
                key.meaning, key.expected, key.default)  # fmt: skip
    assert run_key("env.nope") is None and run_key("policy.learn.batch_size") is None
    assert rows["actor_learner.lag_mode"].rule == "one of ['block', 'drop']"


def test_section_tables_in_the_docs_are_generated_and_current(capsys):
    for page in DOC_PAGES:
        text = (REPO / page).read_text()
        assert render_docs(text) == text, f"{page} is stale: python -m ding_dist.config.describe --write {page}"
    text = (REPO / "docs" / "config_keys.md").read_text()
    for name in ("run", "env", "actor_learner", "pbt"):
        assert f"<!-- keys:{name} -->" in text
    assert "<!-- keys:actor_learner -->" in (REPO / "docs" / "actor_learner.md").read_text()
    assert "| `env.sample_groups` | 1 | >= 1 | double-buffered sampling" in (REPO / "docs" / "rl.md").read_text()
    assert describe_main(["--markdown", "pbt"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| key | default | must be | meaning |" and len(lines) == 2 + len(PBT_KEYS)
    assert lines[2].startswith("| `pbt.population` | 1 | an int >= 1 | members")
    assert TOP_KEYS["seed"].default == 0
