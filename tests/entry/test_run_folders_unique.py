"""One run per folder: default folders never collide (runs started together each claim their own), a new run moves
aside the files of a run that stopped before its first checkpoint instead of appending to them, and the messages
about folders say what is true."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from ding_dist.entry import exp_folder
from ding_dist.entry.cli import main as cli_main
from ding_dist.entry.cli.run_folders import find_runs
from ding_dist.utils import read_metrics
from ding_dist.utils.exp_lock import LOCK_NAME, ExperimentLock

REPO = Path(__file__).resolve().parents[2]
DQN = str(REPO / "configs" / "cartpole_dqn_config.py")
PPO = str(REPO / "configs" / "cartpole_ppo_config.py")
FAST = ["policy.learn.learning_starts=0", "env.n_evaluator_episode=1"]
STAMP = "250101_120000"


def _steps(tb: Path) -> list[int]:
    return [r["step"] for r in read_metrics(tb)]


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def _choose(start, chosen, done) -> None:
    """A process that chooses a default folder the moment all have started, and lives on until all have chosen
    (as a launcher does until its ranks lock the folder)."""
    start.wait()
    chosen.put(str(exp_folder.default_exp_dir("x", 0)))
    done.wait()


def test_processes_that_choose_in_the_same_second_claim_different_folders(tmp_path, monkeypatch):
    """Six processes, one clock second: runs/x for one, the seed and time for the next, then _2 ... _5."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(exp_folder.time, "strftime", lambda fmt, *t: STAMP)  # the same second for every process
    ctx, n = multiprocessing.get_context("fork"), 6
    start, done, chosen = ctx.Barrier(n), ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_choose, args=(start, chosen, done)) for _ in range(n)]
    for p in procs:
        p.start()
    names = sorted(Path(chosen.get(timeout=60)).name for _ in range(n))
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * n
    stamped = f"x_seed0_{STAMP}"
    assert names == ["x", stamped, *(f"{stamped}_{k}" for k in range(2, n))]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == names


def _train(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ding_dist.entry.cli", "train", "cartpole_dqn", "--max-env-steps", "256", *args,
         "--set", *FAST],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_three_runs_started_together_without_exp_dir_end_in_three_folders(tmp_path):
    """The same config and seed three times at once, one of them on two ranks (its launcher claims the folder,
    its rank 0 locks it): three runs to the end, each in its own folder, each saying where it went."""
    procs = [_train("--nproc", "2", cwd=tmp_path), _train(cwd=tmp_path), _train(cwd=tmp_path)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err[-2000:] for _, err in outs]
    folders = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(folders) == 3 and folders[0] == "cartpole_dqn", folders
    assert all(re.fullmatch(r"cartpole_dqn_seed0_\d{6}_\d{6}(_\d+)?", f) for f in folders[1:]), folders
    written = sorted(re.search(r"result: runs/(\S+)/result\.json", out).group(1) for out, _ in outs)
    assert written == folders
    for out, err in outs:
        folder = re.search(r"result: (runs/\S+)/result\.json", out).group(1)
        if folder != "runs/cartpole_dqn":  # taken by a run still going, or (on a slow machine) ended already
            ended = r"already holds a run \(ding-dist resume runs/cartpole_dqn continues the old one\)"
            said = rf"runs/cartpole_dqn (is in use by another run|{ended}); this one goes to {folder}\n"
            assert len(re.findall(said, err)) == 1, err[-2000:]
        assert "stale lock" not in err
    for f in folders:
        run = tmp_path / "runs" / f
        assert json.loads((run / "result.json").read_text())["env_steps"] == 256
        assert _steps(run / "tb")[-1] == 256 and not (run / LOCK_NAME).exists()


def test_a_new_run_moves_aside_a_run_that_stopped_before_its_first_checkpoint(tmp_path, monkeypatch, capsys):
    """A run killed before its first checkpoint leaves its config, tb/ and a lock of a dead process: a new run in the
    folder starts clean (its own rows, one event file) and the old files are where its log line says."""
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "k9"
    assert cli_main(["train", DQN, "--exp-dir", "runs/k9", "--max-env-steps", "512", "--set", *FAST]) == 0
    for gone in ("ckpt", "result.json"):  # what a kill before the first checkpoint would not have written
        subprocess.run(["rm", "-r", str(run / gone)], check=True)
    (run / LOCK_NAME).write_text(json.dumps({"pid": _dead_pid(), "host": socket.gethostname(), "started": "x"}))
    old_rows, (old_events,) = _steps(run / "tb"), [p.name for p in (run / "tb").glob("events.out.tfevents.*")]
    capsys.readouterr()

    assert cli_main(["train", DQN, "--exp-dir", "runs/k9", "--max-env-steps", "256", "--set", *FAST]) == 0
    err = capsys.readouterr().err
    moved = re.findall(r"runs/k9 held a run that stopped before its first checkpoint \(no ckpt, no result\.json\); "
                       r"its files are moved to (\S+)\n", err)  # fmt: skip
    assert len(moved) == 1 and re.fullmatch(r"runs/k9/aborted/\d{6}_\d{6}", moved[0]), err
    aside = tmp_path / moved[0]
    assert sorted(p.name for p in aside.iterdir()) == ["config.json", "config.py", "tb"]
    assert _steps(aside / "tb") == old_rows and old_rows[-1] == 512
    assert [p.name for p in (aside / "tb").glob("events.out.tfevents.*")] == [old_events]
    assert max(_steps(run / "tb")) == 256 and _steps(run / "tb")[-1] == 256
    assert len(list((run / "tb").glob("events.out.tfevents.*"))) == 1
    assert find_runs(run) == [run] and find_runs(tmp_path / "runs") == [Path(tmp_path / "runs" / "k9")]


def test_a_claim_is_taken_over_by_the_run_that_locks_the_folder(tmp_path, caplog):
    """A launcher's claim (a live process, not holding the lock) keeps other choosers out but not its ranks; a
    claim whose process is gone is free."""
    claimer = subprocess.Popen(
        [sys.executable, "-c", "import sys; from ding_dist.utils.exp_lock import ExperimentLock; "
         f"print(ExperimentLock({str(tmp_path)!r}).claim(), flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert claimer.stdout.readline() == "True\n"
        assert json.loads((tmp_path / LOCK_NAME).read_text())["claimed"] is True
        assert ExperimentLock(tmp_path).claim() is False, "claimed by a live process"
        lock = ExperimentLock(tmp_path).acquire()
        assert ExperimentLock(tmp_path).claim() is False, "locked by a live run"
        lock.release()
    finally:
        claimer.communicate("", timeout=60)
    assert "stale lock" not in caplog.text and not (tmp_path / LOCK_NAME).exists()
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": _dead_pid(), "host": socket.gethostname(), "claimed": True}))
    assert ExperimentLock(tmp_path).claim() is True


def test_a_folder_with_a_checkpoint_or_a_live_run_is_still_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with ExperimentLock(tmp_path / "live"):
        assert cli_main(["train", DQN, "--exp-dir", "live", "--max-env-steps", "64"]) == 2
    assert f"ding-dist: error: exp_dir 'live' is in use by pid {os.getpid()} on host " in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "live").iterdir()) == []
    (tmp_path / "done" / "ckpt").mkdir(parents=True)
    (tmp_path / "done" / "ckpt" / "ckpt_000000512.pt").write_bytes(b"x")
    assert cli_main(["train", DQN, "--exp-dir", "done", "--max-env-steps", "64"]) == 2
    assert capsys.readouterr().err == ("ding-dist: error: --exp-dir 'done' already holds a run: add --resume done to "
                                       "continue it, or choose another folder\n")  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "done").iterdir()) == ["ckpt"]


def test_resume_of_a_folder_that_never_was_a_run_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notarun_dir").mkdir()
    line = ("ding-dist: error: --resume 'notarun_dir' is not a run folder (no config.json, no ckpt/): resume "
            "continues a folder that ding-dist train wrote\n")  # fmt: skip
    for argv in (["resume", "notarun_dir"], ["train", DQN, "--resume", "notarun_dir"]):
        assert cli_main(argv) == 2
        assert capsys.readouterr().err == line
    assert cli_main(["resume", "missing_dir"]) == 2
    missing = "ding-dist: error: --resume 'missing_dir' is not an experiment folder: it does not exist\n"
    assert capsys.readouterr().err == missing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notarun_dir"]


def test_a_refused_run_names_no_folder_and_a_taken_default_names_the_resume_command(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    base = tmp_path / "runs" / "cartpole_ppo"
    (base / "ckpt").mkdir(parents=True)
    (base / "ckpt" / "ckpt_000000512.pt").write_bytes(b"x")
    assert cli_main(["train", PPO, "--nproc", "3"]) == 2  # refused after the folder was chosen once
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be split over 3 processes" in err
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["cartpole_ppo"]

    assert cli_main(["train", DQN, "--exp-dir", "runs/cartpole_dqn", "--max-env-steps", "64", "--set", *FAST]) == 0
    assert cli_main(["train", DQN, "--max-env-steps", "64", "--seed", "4", "--set", *FAST]) == 0
    err = capsys.readouterr().err
    (chosen,) = [p.name for p in (tmp_path / "runs").iterdir() if p.name.startswith("cartpole_dqn_")]
    assert re.fullmatch(r"cartpole_dqn_seed4_\d{6}_\d{6}", chosen)
    assert (f"runs/cartpole_dqn already holds a run (ding-dist resume runs/cartpole_dqn continues the old one); this "
            f"one goes to runs/{chosen}\n") in err  # fmt: skip
    assert "resume=" not in err


def test_an_exp_dir_in_proc_says_why_it_cannot_be_created(tmp_path, capsys):
    assert cli_main(["train", DQN, "--exp-dir", "/proc/x", "--max-env-steps", "64"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ding-dist: error: --exp-dir '/proc/x' ")
    assert "(no file or folder can be created in the kernel's proc file system at '/proc')" in err
    assert "No such file" not in err and not os.path.exists("/proc/x")
