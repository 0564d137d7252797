"""Every example of docs/, README.md and ``ding-dist``'s ``--help`` is checked (``tools/check_doc_examples.py``).

Default run (a second or two): every ``ding-dist`` command of the three sources parses with the CLI's own parser
(real sub-commands and flags; ``torchrun``/``srun``/``torchx`` lines from their ``ding-dist`` part on) and
names a config that exists (a shipped one by name or path, a file of the clone), except the reader's own files
in ``READER_FILES``, and ends on its own, by its budget or its config's stop value (:func:`why_it_would_not_end`);
plus the tool's own checks of how it finds and shortens examples.

``slow`` (CI): the Python examples of docs/ run, each page as one script (1-3 minutes, mostly interpreter and
torch start-up). ``quality`` (``python -m pytest -m quality tests/test_doc_examples.py``): everything runs,
each shell block and the --help and README commands as a ``set -e`` script (each exit code checked), every
``ding-dist train`` bounded to a few hundred env steps: many minutes.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ding_dist.config.shipped import find_config

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO / "tools" / "check_doc_examples.py"

_spec = importlib.util.spec_from_file_location("check_doc_examples", TOOL)
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)

# the tool's own checks (collected here too, so the default run has them)
test_every_block_is_found = tool.test_every_block_is_found
test_shorten_cuts_training_runs = tool.test_shorten_cuts_training_runs
test_help_and_readme_examples_are_found = tool.test_help_and_readme_examples_are_found

#: configs an example takes from the reader, not from the clone -> where they come from.
READER_FILES: dict[str, str] = {
    "dizoo/classic_control/cartpole/config/cartpole_dqn_config.py": "a DI-engine checkout",
    "cartpole_dqn_ddp_config.py": "DI-engine's DDP file, copied by the reader",
    "my_ding_config.py": "the reader's DI-engine file (HELP_GIVEN copies one)",
}


def test_every_documented_command_parses_and_names_a_real_config(tmp_path, monkeypatch):
    commands = tool.command_lines()
    sources = {where for where, _ in commands}
    assert {f"ding-dist {c} --help" for c in ("train", "resume", "eval", "plot", "config", "ckpt")} <= sources
    assert {"README.md", "docs/training.md", "docs/launching.md", "docs/reliability.md"} <= sources
    bad = []
    for where, command in commands:
        try:
            args = tool.parse_command(command)
        except SystemExit:
            bad.append(f"{where}: does not parse: {command}")
            continue
        config = getattr(args, "config", None)
        if config is None or config in READER_FILES:
            continue
        # --help and README: a user's empty folder; docs' shell blocks run beside the clone's folders
        monkeypatch.chdir(REPO if where.startswith("docs/") else tmp_path)
        try:
            found = find_config(config).is_file()
        except Exception:  # a bare name that is not shipped
            found = False
        if not found:
            bad.append(f"{where}: names no config: {config!r} in {command}")
    assert not bad, "\n".join(bad)


def _stop_value(config: str) -> float | None:
    """``env.stop_value`` of the config a command names (a shipped one by name, a file of the clone)."""
    from ding_dist.config import read_config

    main_config, _ = read_config(find_config(config))
    return (main_config.get("env") or {}).get("stop_value")


def why_it_would_not_end(command: str) -> str | None:
    """Why a ``ding-dist`` command would train until Ctrl-C, else None. A ``train`` without ``--max-env-steps`` ends
    at its config's ``env.stop_value`` (so the config must have one, and no ``--set`` may take it away); a resume
    without one keeps its run's budget and stop value, unless ``--set env.stop_value=None`` drops the stop value."""
    from ding_dist.config.presets import shipped_config

    args = tool.parse_command(command)
    if args.command not in ("train", "resume") or args.max_env_steps is not None:
        return None
    stops = [o.split("=", 1)[1].strip() for o in args.overrides if o.split("=", 1)[0].strip() == "env.stop_value"]
    if stops and stops[-1] == "None":
        return "--set env.stop_value=None and no --max-env-steps"
    if stops or args.command == "resume" or args.resume is not None or getattr(args, "config", None) in READER_FILES:
        return None  # a stop value given; the run's own budget and stop value; a DI-engine file's stop value
    if args.algo is not None:
        shipped = shipped_config(args.algo, args.env)  # else a generated config: the defaults, no stop value
        stop = None if shipped is None else _stop_value(str(shipped))
    else:
        stop = _stop_value(args.config)
    return None if stop is not None else "its config has no env.stop_value and there is no --max-env-steps"


def test_every_documented_run_ends_on_its_own(monkeypatch):
    """Every ``ding-dist train``/``resume`` of the docs, README and --help ends without Ctrl-C: by its budget or its
    config's stop value (the bounded runs of ``quality`` would not show it: they force a budget on every run);
    every training call of the docs' Python examples gives ``max_env_steps``."""
    monkeypatch.chdir(REPO)
    endless = [f"{where}: {why}: {command}" for where, command in tool.command_lines()
               if (why := why_it_would_not_end(command)) is not None]  # fmt: skip
    calls = re.compile(r"\b(train|serial_pipeline\w*|Experiment\.open)\((.*)")
    for page in [*tool.DOCS, tool.README]:
        for m in tool.BLOCK.finditer(page.read_text()):
            for line in m.group(2).splitlines() if m.group(1) == "python" else ():
                call = calls.search(line)
                if call and "max_env_steps" not in call.group(2):
                    endless.append(f"{page.name}: a training call without max_env_steps: {line.strip()}")
    assert not endless, "\n".join(endless)


def test_an_example_that_would_not_end_is_caught(monkeypatch):
    monkeypatch.chdir(REPO)
    assert why_it_would_not_end("ding-dist resume runs/cartpole_ppo --set env.stop_value=None") == (
        "--set env.stop_value=None and no --max-env-steps"
    )
    no_stop = "its config has no env.stop_value and there is no --max-env-steps"
    assert why_it_would_not_end("ding-dist train halfcheetah_sac") == no_stop  # the config has none
    assert why_it_would_not_end("ding-dist train --algo ppo --env MountainCar-v0") == no_stop  # the defaults
    assert why_it_would_not_end("ding-dist train cartpole_ppo --set env.stop_value=None") is not None
    for ends in ("ding-dist train cartpole_ppo --nproc 2", "ding-dist resume runs/x",
                 "ding-dist resume runs/x --set env.stop_value=None --max-env-steps 300000",
                 "ding-dist train halfcheetah_sac --max-env-steps 1000", "ding-dist plot runs/x",
                 "ding-dist train --algo ppo --env CartPole-v1"):  # fmt: skip
        assert why_it_would_not_end(ends) is None, ends


def test_a_wrong_flag_or_config_is_caught():
    with pytest.raises(SystemExit):
        tool.parse_command("ding-dist train cartpole_ppo --max-env-step 10")
    with pytest.raises(SystemExit):
        tool.parse_command("ding-dist trian cartpole_ppo")
    args = tool.parse_command("torchx run -s local_cwd dist.ddp -j 1x2 -m ding_dist.entry.cli -- train c --seed $S")
    assert (args.command, args.config, args.seed) == ("train", "c", 1)
    with pytest.raises(Exception, match="not a shipped config"):
        find_config("cartpole_ppp")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_docs_python_examples_run():
    done = subprocess.run([sys.executable, str(TOOL), "--fast"], cwd=REPO, capture_output=True, text=True, timeout=850)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


@pytest.mark.quality
@pytest.mark.timeout(7200)
def test_every_example_runs_bounded():
    done = subprocess.run([sys.executable, str(TOOL)], cwd=REPO, capture_output=True, text=True, timeout=7000)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
