"""``ding-dist train --resume RUN`` and ``ding-dist eval --ckpt RUN`` with the run's own saved config: a changed
config is a diff and a new file, a finished run is not trained again, a checkpoint of another policy is one
line. The tests run the real CLI on one tiny CartPole DQN run (512 env steps), in this process (``main``, the
console script's function: one process on the fake link, as a subprocess would run it)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from ding_dist.config import read_config, save_config
from ding_dist.utils import load_checkpoint, read_metrics, save_checkpoint

REPO = Path(__file__).resolve().parents[2]
DQN_CONFIG = REPO / "configs" / "cartpole_dqn_config.py"
PPO_CONFIG = REPO / "configs" / "cartpole_ppo_config.py"
FAST = ["policy.learn.learning_starts=0", "policy.learn.update_per_collect=4", "env.n_evaluator_episode=2"]


def _cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    """``ding-dist ARGS`` in this process (``main``, the console script's function), run from ``cwd``: its exit
    code and output as a subprocess would give them, without an interpreter start and torch import per call."""
    from ding_dist.entry.cli import main

    out, err, threads, here = io.StringIO(), io.StringIO(), torch.get_num_threads(), os.getcwd()
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(a) for a in args])
    finally:
        os.chdir(here)
        torch.set_num_threads(threads)
    return subprocess.CompletedProcess(["ding-dist", *map(str, args)], code, out.getvalue(), err.getvalue())


def _eval(capsys, *args: str | Path) -> subprocess.CompletedProcess:
    """``ding-dist eval ...`` in this process, its exit code and output as :func:`_cli` gives them."""
    from ding_dist.entry.cli import main

    capsys.readouterr()
    code = main(["eval", *map(str, args)])
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["ding-dist", "eval"], code, out.out, out.err)


def _ckpts(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "ckpt").glob("ckpt_*.pt"))


def _error_line(done: subprocess.CompletedProcess) -> str:
    """The one error line of a refused command (no traceback)."""
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if "ding-dist: error:" in line]
    assert len(lines) == 1, done.stderr[-2000:]
    return lines[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A finished DQN run of 512 env steps (its --max-env-steps); tests copy it before changing it."""
    cwd = tmp_path_factory.mktemp("trained")
    done = _cli("train", DQN_CONFIG, "--exp-dir", "run", "--max-env-steps", "512", "--set", *FAST, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return cwd / "run"


def test_resume_defaults_to_the_run_config_and_stops_when_already_done(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    config = (run / "config.py").read_bytes()

    # Already at its --max-env-steps: one line, exit 0, no iteration, nothing written.
    done = _cli("train", "--resume", run, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines() == [
        f"ding-dist: run '{run}' is already done at env step 512 with eval return "
        f"{load_checkpoint(run / 'ckpt' / 'ckpt_000000512.pt')['counters']['last_eval']:.2f}, at its "
        "--max-env-steps 512; to continue, give --max-env-steps above 512"
    ]
    assert _ckpts(run) == ["ckpt_000000512.pt"]

    # --set on resume: a diff of the resolved configs, a new file, the old one untouched; the run uses it.
    done = _cli("train", DQN_CONFIG, "--resume", run, "--max-env-steps", "1024", "--set", *FAST,
                "env.stop_value=1000", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("trained 1024 env steps")
    assert f"--- {run / 'config.py'}\n+++ {run / 'config_resume1.py'}\n" in done.stderr
    assert "\n-        'stop_value': 475,\n+        'stop_value': 1000,\n" in done.stderr
    changed = [
        line for line in done.stderr.splitlines() if line.startswith(("+", "-")) and line[:3] not in ("+++", "---")
    ]
    assert changed == ["-        'stop_value': 475,", "+        'stop_value': 1000,"]  # only that key
    assert (run / "config.py").read_bytes() == config
    assert read_config(run / "config_resume1.py")[0].env.stop_value == 1000

    # CONFIG omitted: the newest saved config, unchanged, so no diff and no new file (the resume sub-command).
    done = _cli("resume", run, "--max-env-steps", "1536", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("trained 1536 env steps")
    assert "another config" not in done.stderr
    assert sorted(p.name for p in run.glob("config*.py")) == ["config.py", "config_resume1.py"]

    # Done again: at the --max-env-steps the run was resumed with, and at a stop_value its last eval reached.
    ckpts = _ckpts(run)
    done = _cli("train", "--resume", run, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("at its --max-env-steps 1536; to continue, give --max-env-steps above 1536")
    done = _cli("train", "--resume", run, "--set", "env.stop_value=5", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.strip()
    assert line.startswith(f"ding-dist: run '{run}' is already done at env step 1536 with eval return ")
    assert line.endswith(">= env.stop_value=5; to train on past it, give a --max-env-steps above 1536: ding-dist "
                         f"resume {run} --max-env-steps 3072")  # fmt: skip
    assert _ckpts(run) == ckpts
    assert sorted(p.name for p in run.glob("config*.py")) == ["config.py", "config_resume1.py"]
    # The advice works as printed, and ends: at its budget.
    done = _cli(*shlex.split(line.split(": ding-dist ")[-1]), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("trained 3072 env steps")


def test_eval_defaults_to_the_run_config_and_names_a_checkpoint_of_another_policy(trained, tmp_path, capsys):
    ckpt = trained / "ckpt" / "ckpt_000000512.pt"
    for where in ([trained, "--which", "last"], [ckpt]):  # the run folder's newest, or a checkpoint file inside it
        done = _eval(capsys, "--ckpt", *where, "--episodes", "1")
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.splitlines()[-1].startswith(f"checkpoint {ckpt}: mean_return ")

    line = _error_line(_eval(capsys, PPO_CONFIG, "--ckpt", trained, "--which", "last", "--episodes", "1"))
    assert line == f"ding-dist: error: checkpoint '{ckpt}' was trained by policy 'dqn', the config asks for 'ppo'"

    main, _ = read_config(trained / "config.py")
    main.policy.model.hidden_sizes = [16]
    save_config(main, tmp_path / "small.py")
    line = _error_line(_eval(capsys, tmp_path / "small.py", "--ckpt", ckpt, "--episodes", "1"))
    assert line.startswith(f"ding-dist: error: checkpoint '{ckpt}' does not fit this config's policy 'dqn': ")
    assert "size mismatch" in line

    old = load_checkpoint(ckpt)  # a checkpoint from before they recorded their policy type, outside its run
    old.pop("policy_type")
    save_checkpoint(old, tmp_path / "old.pt")
    line = _error_line(_eval(capsys, PPO_CONFIG, "--ckpt", tmp_path / "old.pt", "--episodes", "1"))
    assert line.startswith(f"ding-dist: error: checkpoint '{tmp_path / 'old.pt'}' does not fit this config's "
                           "policy 'ppo': ")  # fmt: skip
    line = _error_line(_eval(capsys, "--ckpt", tmp_path / "old.pt"))
    assert line.endswith("is not in a run folder with a saved config.json: give CONFIG")


def test_a_larger_budget_continues_a_run_that_reached_its_stop_value(tmp_path):
    """README's first command, then ``train --resume RUN --max-env-steps N`` (train --help's example): the run trains
    on to N instead of "already done"; env.stop_value=None is said, shown as a diff and saved for later resumes."""
    done = _cli("train", DQN_CONFIG, "--exp-dir", "run", "--max-env-steps", "2048", "--set", *FAST,
                "env.stop_value=0", "policy.eval.eval_freq=256", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    run = tmp_path / "run"
    assert _ckpts(run) == ["ckpt_000000256.pt"]  # solved at its first evaluation
    done = _cli("train", "--resume", "run", "--max-env-steps", "768", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[0] == (
        "ding-dist: run 'run' reached env.stop_value=0 at env step 256; it continues to --max-env-steps 768 with "
        "env.stop_value=None (--set env.stop_value=V stops it at V instead)"
    )
    assert [line for line in done.stdout.splitlines() if line.startswith("trained ")][0].startswith("trained 768 ")
    assert "\n-        'stop_value': 0,\n+        'stop_value': None,\n" in done.stderr
    assert read_config(run / "config_resume1.json")[0].env.stop_value is None
    # the training clock of `plot --x wall_time` goes on across the resume, on result.json's clock
    clock = [(r["step"], r["time/wall_time_s"]) for r in read_metrics(run / "tb") if "time/wall_time_s" in r]
    assert [s for s, _ in clock] == sorted(s for s, _ in clock) and clock[-1][0] == 768
    assert all(b >= a for (_, a), (_, b) in zip(clock, clock[1:]))
    assert 0 < clock[-1][1] <= json.loads((run / "result.json").read_text())["wall_time_s"]
    # a stop value given with it is kept: the run is done at once, as before
    done = _cli("train", "--resume", "run", "--max-env-steps", "1024", "--set", "env.stop_value=0", cwd=tmp_path)
    assert done.returncode == 0 and "is already done at env step 768" in done.stdout, done.stdout
    # a budget it has reached already: done, the budget named
    done = _cli("train", "--resume", "run", "--max-env-steps", "512", cwd=tmp_path)
    assert done.stdout.strip().endswith("to continue, give --max-env-steps above 768"), done.stdout


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_checkpoint_with_non_finite_weights_is_refused_in_one_line_by_eval_and_resume(trained, tmp_path, capsys,
                                                                                        bad):  # fmt: skip
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    ckpt = run / "ckpt" / "ckpt_000000512.pt"
    state = load_checkpoint(ckpt)
    weight = next(k for k in state["policy"]["model"] if k.endswith("weight"))
    state["policy"]["model"][weight][0, :3] = bad
    save_checkpoint(state, ckpt)
    want = (f"ding-dist: error: checkpoint '{ckpt}' holds non-finite weights (NaN or inf): 'model.{weight}' has 3 of "
            f"{state['policy']['model'][weight].numel()} values non-finite")  # fmt: skip
    for where in ([run, "--which", "last"], [ckpt]):
        assert _error_line(_eval(capsys, "--ckpt", *where, "--episodes", "1")).startswith(want)
    assert _error_line(_eval(capsys, DQN_CONFIG, "--ckpt", ckpt, "--episodes", "1")).startswith(want)
    assert _error_line(_cli("resume", run, "--max-env-steps", "1024", cwd=tmp_path)).startswith(want)
    assert _ckpts(run) == ["ckpt_000000512.pt"]  # nothing trained, nothing written


def test_a_copied_run_folder_runs_no_code_on_eval_or_resume(trained, tmp_path, capsys):
    """A run folder from elsewhere whose config.py would write a marker: eval and resume read its config.json (data)
    and never execute that file, also when the user names a trusted CONFIG of their own."""
    run, marker = tmp_path / "run", tmp_path / "ran"
    shutil.copytree(trained, run)
    assert sorted(p.name for p in run.glob("config*")) == ["config.json", "config.py"]
    with (run / "config.py").open("a") as f:
        f.write(f"open({str(marker)!r}, 'w').close()\n")
    ckpt = run / "ckpt" / "ckpt_000000512.pt"
    assert _eval(capsys, "--ckpt", run, "--episodes", "1").returncode == 0  # the run's config.json
    done = _cli("resume", run, "--max-env-steps", "768", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    done = _cli("train", DQN_CONFIG, "--resume", run, "--max-env-steps", "1024", "--set", *FAST, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]  # compared with the run's config as data: no diff, no new file
    assert "another config" not in done.stderr and not (run / "config_resume1.json").exists()
    old = load_checkpoint(ckpt)  # no policy type recorded, and it does not fit PPO: the run's type is looked up
    old.pop("policy_type")
    save_checkpoint(old, ckpt)
    line = _error_line(_eval(capsys, PPO_CONFIG, "--ckpt", ckpt, "--episodes", "1"))
    assert line.startswith(f"ding-dist: error: checkpoint '{ckpt}' was trained by policy 'dqn' (its run's config)")
    assert not marker.exists()
    (run / "config.json").unlink()  # a run of an older ding_dist: its config.py is read only when named
    line = _error_line(_cli("resume", run, cwd=tmp_path))
    assert line == (f"ding-dist: error: --resume '{run}' has no saved config.json: give CONFIG; its config.py (written "
                    "by an older ding_dist) is Python and runs as code, so it is read only when you name it, if you "
                    f"trust it: ding-dist train {run / 'config.py'} --resume {run}")  # fmt: skip
    assert _error_line(_eval(capsys, "--ckpt", run)).endswith(f"ding-dist eval {run / 'config.py'} --ckpt {run}")
    assert not marker.exists()
    assert _cli("train", run / "config.py", "--resume", run, "--max-env-steps", "1280", cwd=tmp_path).returncode == 0
    assert marker.exists()  # named on the command line: run as code, as the user asked
