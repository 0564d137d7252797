"""Every example of docs/, README.md and ``ding-dist``'s ``--help`` is checked (``tools/check_doc_examples.py``).

Default run (a second or two): every ``ding-dist`` command of the three sources parses with the CLI's own parser
(real sub-commands and flags; ``torchrun``/``srun``/``torchx`` lines from their ``ding-dist`` part on) and
names a config that exists (a shipped one by name or path, a file of the clone), except the reader's own files
in ``READER_FILES``; plus the tool's own checks of how it finds and shortens examples.

``slow`` (CI): the Python examples of docs/ run, each page as one script (1-3 minutes, mostly interpreter and
torch start-up). ``quality`` (``python -m pytest -m quality tests/test_doc_examples.py``): everything runs,
each shell block and the --help and README commands as a ``set -e`` script (each exit code checked), every
``ding-dist train`` bounded to a few hundred env steps: many minutes.
"""

from __future__ import annotations

import importlib.util
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
