"""``ding-dist --help`` answers without importing torch; a mistyped flag gets the closest one suggested."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ding_dist.entry.cli import main

_PROBE = """
import contextlib, io, sys
from ding_dist.entry.cli import build_parser
with contextlib.redirect_stdout(io.StringIO()):
    for argv in ({argvs}):
        try:
            build_parser().parse_args(argv)
        except SystemExit:
            pass
print(sorted(m for m in ("torch", "numpy", "gymnasium", "matplotlib") if m in sys.modules))
"""


def _heavy_modules_after(*argvs: list[str]) -> str:
    code = _PROBE.format(argvs=", ".join(repr(a) for a in argvs) + ",")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def test_help_does_not_import_torch():
    assert _heavy_modules_after(["--help"], ["train", "--help"], ["eval", "--help"], ["plot", "--help"]) == "[]"


def test_config_and_utils_do_not_import_torch():
    code = "import sys, ding_dist.config, ding_dist.utils, ding_dist.utils.exp_lock; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["train", "cfg.py", "--nprco", "2"], "did you mean --nproc?"),
        (["train", "cfg.py", "--max-env-step", "5"], "did you mean --max-env-steps?"),
        (["eval", "cfg.py", "--ckpt", "x", "--episode", "3"], "did you mean --episodes?"),
        (["train", "cfg.py", "--health-timout=3"], "did you mean --health-timeout?"),
    ],
)
def test_mistyped_flag_suggests_closest(argv, suggestion, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert suggestion in err


def test_unrelated_flag_gets_no_suggestion(capsys):
    with pytest.raises(SystemExit):
        main(["train", "cfg.py", "--zzzzzz"])
    assert "did you mean" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["eval", "--ckpt", "r", "--set", "a=1"], "unrecognized arguments: --set; eval takes no --set (train, resume "
         "and config show do) (see 'ding-dist eval --help')"),
        (["config", "show", "c.py", "--seed", "1"], "unrecognized arguments: --seed 1; config show takes no --seed "
         "(train, resume and eval do) (see 'ding-dist config show --help')"),
        (["plot", "r", "--episodes", "3"], "unrecognized arguments: --episodes 3; plot takes no --episodes (eval does) "
         "(see 'ding-dist plot --help')"),
        (["eval", "--ckpt", "r", "--sed", "1"], "unrecognized arguments: --sed; did you mean --seed? (see "
         "'ding-dist eval --help')"),  # close to one of eval's own flags
    ],
)  # fmt: skip
def test_another_commands_flag_is_named_as_such_not_suggested(argv, line, capsys):
    """Suggestions come from the command the flag was given to; a flag of other commands says which take it."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert capsys.readouterr().err == f"ding-dist: error: {line}\n"
