"""Every stop signal, however delivered, checkpoints the step it stopped at on every rank, and ``resume`` goes on.

Real ``ding-dist train`` jobs (1 and 2 processes over gloo) in a session of their own, hurt the way schedulers and
terminals do: the signal to every process of the job at once (SLURM's ``scancel``/``--signal``, a container stop:
the launcher, each rank and each env worker get it), Ctrl-C (SIGINT to the terminal's process group), or SIGTERM to
one rank only. Helpers come from ``tests/entry/test_reliability.py``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.entry.test_reliability import DQN_CONFIG, FAST, _ckpt_steps, _Job, _no_leftovers

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds processes through /proc")


#: Periodic checkpoints off (the stop's is the only one), no early stop, and iterations of about a second (400
#: updates each), as with a real model: the launcher's forwarded copy of a signal then reaches a rank mid-stop.
SLOW_NO_CKPT = [s for s in FAST if "checkpoint.freq" not in s and "update_per_collect" not in s]
SLOW_NO_CKPT += ["policy.other.checkpoint.freq=0", "env.stop_value=1e9", "policy.learn.update_per_collect=100"]


def _sigint_as_from_a_terminal() -> None:
    """The child starts with SIGINT's default action, as under a terminal: a suite started in the background of a
    non-interactive shell hands its children SIGINT ignored, and Python then leaves it so (no KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _signal_every_process(job: _Job, sig: int) -> int:
    """``sig`` to every process of the job, as SLURM (``scancel``, ``--signal``), a container stop or a terminal's
    Ctrl-C deliver it: the ranks and env workers, then the launcher (which forwards it to the ranks once more, a few
    ms later); how many processes got it."""
    pids = [p for p in job.leftovers() if p != job.proc.pid]
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    job.proc.send_signal(sig)
    return len(pids) + 1


def _stopped_step(job: _Job, name: str) -> int:
    (step,) = re.findall(rf"stopped by {name} at env step (\d+), checkpointed", job.output())
    return int(step)


def _resumes_at(tmp_path, exp, step: int) -> None:
    done = subprocess.run([sys.executable, "-m", "ding_dist.entry.cli", "resume", str(exp), "--max-env-steps",
                           str(step + 256), "--set", "policy.learn.update_per_collect=16"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resumed at env step {step}" in done.stderr
    assert json.loads((exp / "result.json").read_text())["env_steps"] == step + 256


@pytest.mark.parametrize(
    "nproc, sig",
    [
        pytest.param(1, signal.SIGINT, marks=pytest.mark.quality),
        (2, signal.SIGINT),
        pytest.param(2, signal.SIGTERM, marks=pytest.mark.quality),
    ],
)
def test_a_stop_signal_to_every_process_of_the_job_checkpoints_the_step_and_resume_goes_on(tmp_path, nproc, sig):
    """Before: Ctrl-C on one process exited 130 with no checkpoint (resume then refused), and on 2 processes each
    rank took the launcher's forwarded copy for a second signal and exited at once ("newest checkpoint: None")."""
    exp, name = tmp_path / "exp", signal.Signals(sig).name
    extra = ["--nproc", "2"] if nproc == 2 else []
    job = _Job(tmp_path, DQN_CONFIG, *extra, "--max-env-steps", "400000", "--exp-dir", exp, "--set", *SLOW_NO_CKPT)
    job.wait_for(lambda: "exp dir" in job.output(), timeout=120)
    time.sleep(1.0)  # a few iterations in
    assert _signal_every_process(job, sig) == 1 + (nproc if nproc == 2 else 0)  # launcher, ranks (sync envs)
    assert job.wait(60) == 128 + sig, job.output()[-3000:]
    step = _stopped_step(job, name)
    assert _ckpt_steps(exp) == [step], job.output()[-3000:]  # periodic checkpoints are off: the stop wrote it
    assert "stopping at once" not in job.output() and "Traceback" not in job.output()
    assert _no_leftovers(job, within=5) == []
    _resumes_at(tmp_path, exp, step)


@pytest.mark.parametrize(
    "to, sig", [("rank 1", signal.SIGTERM), pytest.param("launcher", signal.SIGUSR1, marks=pytest.mark.quality)]
)
def test_a_stop_signal_to_one_process_of_two_is_a_stop_with_its_code(tmp_path, to, sig):
    """Before: SIGTERM to rank 1 ended as "rank 1 of 2 failed with exit code 143", exit 1; SIGUSR1 to the launcher
    exited 143 "stopped by SIGTERM" where the docs say 138. Now both are stops: 128 + the signal, checkpointed."""
    exp, name = tmp_path / "exp", signal.Signals(sig).name
    job = _Job(tmp_path, DQN_CONFIG, "--nproc", "2", "--max-env-steps", "400000", "--exp-dir", exp,
               "--set", *SLOW_NO_CKPT)  # fmt: skip
    job.wait_for(lambda: "exp dir" in job.output(), timeout=120)
    time.sleep(1.0)
    os.kill(job.rank_pid(1) if to == "rank 1" else job.proc.pid, sig)
    assert job.wait(60) == 128 + sig, job.output()[-3000:]
    assert _ckpt_steps(exp) == [_stopped_step(job, name)]
    last = job.stderr_lines()[-1]
    assert last == f"ding-dist: stopped by {name}{' to a rank' if to == 'rank 1' else ''}; all 2 rank(s) were stopped"
    assert "failed" not in job.output() and "Traceback" not in job.output()
    assert _no_leftovers(job, within=5) == []


#: The shipped DQN config on a CartPole whose envs take 0.25 s each to build: the run's start-up lasts seconds after
#: the rank's first line, whatever the machine's speed.
SLOW_TO_BUILD = """
import time
import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class SlowToBuild(CartPoleEnv):
    def __init__(self, **kwargs):
        time.sleep(0.25)
        super().__init__(**kwargs)


gym.register("SlowToBuildCartPole-v1", entry_point=SlowToBuild, max_episode_steps=500)
main_config.env.id = "SlowToBuildCartPole-v1"
"""


@pytest.mark.parametrize("after", ["start", "the rank's start-up line"])
def test_ctrl_c_during_start_up_is_one_line_and_exit_130(tmp_path, after):
    """Before: a Ctrl-C while the CLI imported torch or built the run printed a traceback."""
    config = tmp_path / "slow_to_build_config.py"
    config.write_text(DQN_CONFIG.read_text() + SLOW_TO_BUILD)
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", str(config), "--exp-dir", str(tmp_path / "exp")]
    log = tmp_path / "out.txt"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_sigint_as_from_a_terminal)  # fmt: skip
        end = time.monotonic() + 60
        while after != "start" and "rank 0 of 1" not in log.read_text() and time.monotonic() < end:
            time.sleep(0.01)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(60)
        finally:
            proc.kill()
    text = log.read_text()
    assert code == 130, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert text.splitlines()[-1] == "ding-dist: interrupted (SIGINT)", text[-3000:]
    assert not (tmp_path / "exp" / ".lock").exists()
