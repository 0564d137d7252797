"""Reliability with real processes: dead, stuck and frozen ranks, elastic restarts, SIGTERM, desync, bad input.

The CLI tests start ``ding-dist train --nproc 2`` (torchrun underneath) in its own session, wait for the
first checkpoint, then hurt it: SIGKILL or SIGSTOP one rank (found through /proc by its RANK variable), or
SIGTERM the launcher. Every process the job starts carries a unique variable in its environment, so "no
orphan is left" is checked over every descendant, whatever session or process group it moved to. Time
bounds are generous, for a loaded 2-core machine; the figures come from benchmarks/bench_reliability.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from ding_dist.comm import DeadRankError, get_rank
from ding_dist.entry import pipeline
from ding_dist.entry.cli import main
from ding_dist.entry.loops.data_parallel import DataParallelLoop
from ding_dist.entry.torchrun_job import RESTART_ENV
from ding_dist.utils import CheckpointManager, load_checkpoint, read_metrics
from tests.entry.test_pipeline import tiny_dqn

REPO = Path(__file__).resolve().parents[2]
DQN_CONFIG = REPO / "configs" / "cartpole_dqn_config.py"
STEPS_PER_ITER = 256  # the shipped DQN config's global n_sample
UPDATES = 16
CKPT_FREQ = 512
FAST = [
    "policy.learn.learning_starts=0",
    f"policy.learn.update_per_collect={UPDATES}",
    "env.n_evaluator_episode=2",
    f"policy.other.checkpoint.freq={CKPT_FREQ}",
    "policy.other.log_freq=256",
]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds processes through /proc")


# ------------------------------------------------------------------------------------------- helpers
def _environ(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().split(b"\0")
    except OSError:  # gone, or not ours
        return []


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _start_time(pid: int) -> int:
    """Clock ticks after boot at which ``pid`` started (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


_JOBS: list[_Job] = []


@pytest.fixture(autouse=True)
def _stop_jobs():
    """Whatever a test did, no job and none of its processes (ranks live in sessions of their own) outlive it."""
    yield
    while _JOBS:
        _JOBS.pop().stop()


class _Job:
    """``ding-dist train ...`` in its own session, output in a file, every descendant tagged."""

    def __init__(self, tmp_path: Path, *args: str | Path, env: dict[str, str] | None = None,
                 preexec_fn: Callable[[], None] | None = None) -> None:  # fmt: skip
        self.tag = f"DINGDIST_TEST_TAG={uuid.uuid4().hex}".encode()
        extra = env or {}
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
        env.update(OMP_NUM_THREADS="1", DINGDIST_TEST_TAG=self.tag.split(b"=")[1].decode(), **extra)
        self.log = tmp_path / f"job_{uuid.uuid4().hex[:6]}.txt"
        self._out = open(self.log, "w")  # noqa: SIM115 (closed in wait)
        cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", *map(str, args)]
        self.proc = subprocess.Popen(
            cmd,
            cwd=tmp_path,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec_fn,
        )
        _JOBS.append(self)

    def wait_for(self, predicate, timeout: float = 90.0) -> None:
        end = time.monotonic() + timeout
        while not predicate():
            if self.proc.poll() is not None:
                raise AssertionError(f"job ended (code {self.proc.returncode}) too early:\n{self.output()[-3000:]}")
            if time.monotonic() > end:
                self.dump_stacks()
                raise AssertionError(f"timed out waiting:\n{self.output()[-6000:]}")
            time.sleep(0.02)

    def dump_stacks(self) -> None:
        """Every rank prints its threads' stacks into the job's output (``kill -USR2``: faulthandler)."""
        for pid in self.leftovers():
            if _parent(pid) == self.proc.pid:
                os.kill(pid, signal.SIGUSR2)
        time.sleep(2.0)

    def rank_pid(self, rank: int, world: int = 2) -> int:
        """The launcher starts (forks or execs) local ranks 0, 1, ... in order: its children by start time."""
        children = sorted((_start_time(p), p) for p in _pids() if _parent(p) == self.proc.pid)
        assert len(children) == world, f"expected {world} ranks under {self.proc.pid}, found {children}"
        return children[rank][1]

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:  # never leave a job behind, even when the test fails
                self.stop()
            self._out.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.kill_leftovers()
        self._out.close()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stderr_lines(self) -> list[str]:
        return [line for line in self.output().splitlines() if line.strip() and "env steps:" not in line]

    def leftovers(self) -> list[int]:
        """Processes this job started (any depth, any session) that still run."""
        return [p for p in _pids() if self.tag in _environ(p)]

    def kill_leftovers(self) -> None:
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _ckpt_steps(exp: Path) -> list[int]:
    return [int(p.name[5:14]) for p in CheckpointManager(exp / "ckpt").checkpoints()]


def _no_leftovers(job: _Job, within: float = 10.0) -> list[int]:
    end = time.monotonic() + within
    while job.leftovers() and time.monotonic() < end:
        time.sleep(0.1)
    left = job.leftovers()
    job.kill_leftovers()
    return left


# -------------------------------------------------------------------------------------- dead ranks
@pytest.mark.slow
def test_killed_rank_ends_the_job_with_a_summary_naming_it(tmp_path):
    exp = tmp_path / "exp"
    job = _Job(tmp_path, DQN_CONFIG, "--nproc", "2", "--max-env-steps", "400000", "--exp-dir", exp,
               "--timeout", "30", "--set", *FAST)  # fmt: skip
    job.wait_for(lambda: _ckpt_steps(exp))
    victim = job.rank_pid(1)
    os.kill(victim, signal.SIGKILL)
    killed_at = time.monotonic()
    code = job.wait(60)
    elapsed = time.monotonic() - killed_at
    assert code == 1, job.output()[-3000:]
    assert elapsed < 30, f"the job took {elapsed:.1f} s to end after rank 1 died"
    last = job.stderr_lines()[-1]
    # torchrun's exit status, or (ranks forked by its agent report one failure) the heartbeat's silence
    assert re.match(r"ding-dist: error: rank 1 of 2 failed with signal (SIGKILL|\(unknown: it died without "
                    r"reporting\)) \(first failure\)", last), last  # fmt: skip
    assert f"pid {victim}" in last.lower()  # torchrun: "received by PID n"; the heartbeat's: "pid n"
    assert _no_leftovers(job) == []
    assert not (exp / "result.json").exists()


@pytest.mark.slow
def test_frozen_rank_is_killed_and_named_well_before_the_collective_timeout(tmp_path):
    """SIGSTOP: the rank closes no connection and cannot answer SIGTERM; the launcher's heartbeat watch
    SIGKILLs it after the grace (3 s here), far below the 300 s collective and health-check timeouts."""
    exp = tmp_path / "exp"
    job = _Job(tmp_path, DQN_CONFIG, "--nproc", "2", "--max-env-steps", "400000", "--exp-dir", exp,
               "--timeout", "300", "--health-timeout", "300", "--set", *FAST,
               env={"DING_DIST_HEARTBEAT_S": "0.5", "DING_DIST_HEARTBEAT_GRACE_S": "3"})  # fmt: skip
    job.wait_for(lambda: _ckpt_steps(exp))
    victim = job.rank_pid(1)
    os.kill(victim, signal.SIGSTOP)
    stopped_at = time.monotonic()
    code = job.wait(120)
    elapsed = time.monotonic() - stopped_at
    assert code == 1, job.output()[-3000:]
    assert elapsed < 60, f"the job took {elapsed:.1f} s to end after rank 1 froze"
    lines = job.stderr_lines()
    named = [line for line in lines if line.startswith("ding-dist: rank 1 of 2 stopped making progress")]
    assert len(named) == 1, lines[-10:]
    assert named[0].endswith(f"killing it (pid {victim}) with SIGKILL")
    assert lines[-1].startswith("ding-dist: error: rank 1 of 2 failed with signal SIGKILL (first failure)"), lines[-1]
    assert _no_leftovers(job) == []


def test_bad_heartbeat_setting_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DING_DIST_HEARTBEAT_GRACE_S", "0.5")  # shorter than two 2 s periods
    code = main(["train", str(DQN_CONFIG), "--nproc", "2", "--exp-dir", str(tmp_path / "exp")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("ding-dist: error: the heartbeat grace (0.5 s"), err
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_max_restarts_continue_from_the_newest_checkpoint(tmp_path):
    exp, steps = tmp_path / "exp", 8192
    job = _Job(tmp_path, DQN_CONFIG, "--nproc", "2", "--max-restarts", "3", "--max-env-steps", str(steps),
               "--exp-dir", exp, "--set", *FAST)  # fmt: skip
    job.wait_for(lambda: _ckpt_steps(exp))
    newest_before = max(_ckpt_steps(exp))
    logged_before = max((r["step"] for r in read_metrics(exp / "tb") if "time/env_steps" in r), default=0)
    os.kill(job.rank_pid(1), signal.SIGKILL)
    assert job.wait(120) == 0, job.output()[-3000:]

    out = job.output()
    resumed = re.search(r"restart 1: continuing from \S*ckpt_(\d+)\.pt", out)
    assert resumed, out[-3000:]
    at = int(resumed.group(1))
    # Every rank started again from that checkpoint, its counters intact: env steps and train iterations
    # (one iteration = 256 env steps and UPDATES updates, learning from step 0).
    assert f"resumed at env step {at}, train iter {at // STEPS_PER_ITER * UPDATES}" in out
    # No progress lost beyond one checkpoint interval: the checkpoint is at least the newest seen before the
    # kill, and the run had not logged more than one interval past it.
    assert at >= newest_before > 0
    assert logged_before - at <= CKPT_FREQ
    result = json.loads((exp / "result.json").read_text())
    assert result["env_steps"] == steps and result["world_size"] == 2
    assert result["train_iters"] == steps // STEPS_PER_ITER * UPDATES
    logged = [r["step"] for r in read_metrics(exp / "tb") if "time/env_steps" in r]
    assert logged == sorted(set(logged)) and logged[-1] == steps  # the restart's records replaced the lost ones
    assert _no_leftovers(job) == []


def _rank_stops_answering(exp_dir: str, how: str, stamp_file: str) -> str:
    """Rank 1 stops at env step 512 (hangs or dies); rank 0 must fail with DeadRankError."""
    from ding_dist.worker import Collector

    if get_rank() == 1:
        collect = Collector.collect

        def stop_at_512(self, n_vec, env_step, *args, **kwargs):
            if env_step >= 512:
                Path(stamp_file).write_text(str(time.time()))
                if how == "dies":
                    os.kill(os.getpid(), signal.SIGKILL)
                time.sleep(600)
            return collect(self, n_vec, env_step, *args, **kwargs)

        Collector.collect = stop_at_512
    main_cfg, create_cfg = tiny_dqn()
    main_cfg.policy.other.checkpoint.freq = 0
    try:
        pipeline.train((main_cfg, create_cfg), exp_dir=exp_dir, max_env_steps=10**7, health_timeout=3)
    except DeadRankError as e:
        raise RuntimeError(f"DeadRankError at {time.time()} ranks {e.ranks}: {e}") from None
    return "no error"


def test_survivor_names_a_hung_rank_after_the_timeout_and_the_health_check(tmp_path):
    from ding_dist.comm import LaunchError, launch

    stamp = tmp_path / "stopped_at"
    with pytest.raises(LaunchError) as info:  # grace: how long launch waits for rank 0's report after rank 1's
        launch(_rank_stops_answering, 2, str(tmp_path), "hangs", str(stamp), timeout=180, comm_timeout=5, grace=2)
    failures = dict(info.value.failures)
    message = failures[0]
    found = re.search(r"DeadRankError at ([\d.]+) ranks (\[[\d, ]*\])", message)
    assert found, failures
    # The collective times out (5 s: the error cannot come sooner), then the health check (3 s) names rank 1.
    assert found.group(2) == "[1]" and "rank(s) [1] are dead or stuck" in message
    waited = float(found.group(1)) - float(stamp.read_text())
    assert waited >= 4, waited  # rank 0 may have started its wait a little before rank 1 wrote the stamp
    assert waited < 120, waited


def test_survivor_of_a_dead_rank_fails_at_once_not_after_the_timeout(tmp_path):
    from ding_dist.comm import LaunchError, launch

    stamp = tmp_path / "stopped_at"
    with pytest.raises(LaunchError) as info:  # a 300 s collective timeout: only a closed connection ends it soon
        launch(_rank_stops_answering, 2, str(tmp_path), "dies", str(stamp), timeout=180, comm_timeout=300, grace=10)
    failures = dict(info.value.failures)
    assert "SIGKILL" in failures[1]
    message = failures[0]
    found = re.search(r"DeadRankError at ([\d.]+) ranks", message)
    assert found and "a collective failed at env step" in message, failures
    waited = float(found.group(1)) - float(stamp.read_text())
    assert waited < 120, (waited, message)


# ------------------------------------------------------------------------------------ clean stops
@pytest.mark.slow
def test_sigterm_stops_every_process_and_keeps_a_loadable_checkpoint(tmp_path):
    cfg = tmp_path / "async_envs_config.py"  # env workers in subprocesses: they must go too
    cfg.write_text(
        "from ding_dist.config import read_config\n"
        f"main_config, create_config = read_config({str(DQN_CONFIG)!r})\n"
        "create_config.env_manager.type = 'async'\n"
        "main_config.env.update(collector_env_num=4, evaluator_env_num=2)\n"  # 2 per rank
    )
    exp = tmp_path / "exp"
    job = _Job(tmp_path, cfg, "--nproc", "2", "--max-env-steps", "400000", "--exp-dir", exp, "--set", *FAST)
    job.wait_for(lambda: len(_ckpt_steps(exp)) >= 2, timeout=240)  # ~5 s alone; a loaded CI run once went past 90 s
    assert len(job.leftovers()) >= 1 + 2 * (1 + 2) + 2  # launcher, 2 ranks with 2 env workers each, evaluator
    seen = _ckpt_steps(exp)[-1]
    job.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    code = job.wait(60)
    assert code == 143, job.output()[-3000:]
    assert time.monotonic() - signalled < 30
    assert job.stderr_lines()[-1] == "ding-dist: stopped by SIGTERM; all 2 rank(s) were stopped"
    assert not re.search(r"death signal|via signal SIG", job.output())  # the agent's shutdown lines: ours only
    assert _no_leftovers(job, within=5) == []
    mgr = CheckpointManager(exp / "ckpt")
    files = mgr.checkpoints()
    assert mgr.latest() == files[-1]  # the newest checkpoint is complete
    assert load_checkpoint(files[-1])["counters"]["env_steps"] == int(files[-1].name[5:14])
    assert not [p for p in (exp / "ckpt").iterdir() if p.name.endswith(".tmp")]
    # SIGTERM is a stop request: every rank stopped after the same iteration and checkpointed that step
    assert "SIGTERM: stopping after this iteration with a checkpoint" in job.output()
    (step,) = re.findall(r"stopped by SIGTERM at env step (\d+), checkpointed", job.output())
    assert _ckpt_steps(exp)[-1] == int(step) > seen, (_ckpt_steps(exp), seen)


def test_sigusr2_prints_every_thread_stack_and_the_run_goes_on(tmp_path):
    exp = tmp_path / "exp"
    job = _Job(tmp_path, DQN_CONFIG, "--max-env-steps", "400000", "--exp-dir", exp, "--set", *FAST)
    job.wait_for(lambda: _ckpt_steps(exp))
    job.proc.send_signal(signal.SIGUSR2)  # one process: the job is the rank
    job.wait_for(lambda: "most recent call first" in job.output(), timeout=30)
    seen = _ckpt_steps(exp)[-1]
    job.wait_for(lambda: _ckpt_steps(exp)[-1] > seen)  # still training
    assert re.search(r'File ".*ding_dist/entry/loops/data_parallel\.py", line \d+ in run', job.output())
    job.proc.send_signal(signal.SIGTERM)
    assert job.wait(60) == 143, job.output()[-3000:]


FAKE_SCONTROL = """#!/bin/sh
echo "$@" >> "{log}"
"""


def test_sigusr1_checkpoints_and_requeues_the_slurm_job_which_resumes(tmp_path):
    bin_dir, log = tmp_path / "bin", tmp_path / "scontrol.log"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(FAKE_SCONTROL.format(log=log))
    (bin_dir / "scontrol").chmod(0o755)
    exp = tmp_path / "exp"
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "77"}
    argv = (DQN_CONFIG, "--max-env-steps", "400000", "--exp-dir", exp, "--requeue", "--set", *FAST)
    job = _Job(tmp_path, *argv, env=env)
    job.wait_for(lambda: len(_ckpt_steps(exp)) >= 1)
    seen = _ckpt_steps(exp)[-1]
    job.proc.send_signal(signal.SIGUSR1)  # sbatch --signal=USR1@90: the time limit is near
    assert job.wait(60) == 128 + signal.SIGUSR1, job.output()[-3000:]
    stopped = _ckpt_steps(exp)[-1]
    assert re.findall(r"stopped by SIGUSR1 at env step (\d+), checkpointed", job.output()) == [str(stopped)]
    # the step it stopped at (the line above): the signal can land before the first env step after `seen`
    assert stopped >= seen and "requeued SLURM job 77" in job.output()
    assert log.read_text() == "requeue 77\n"
    # the requeued job runs the same command: it resumes from that checkpoint (SLURM counts the restarts)
    again = _Job(tmp_path, DQN_CONFIG, "--max-env-steps", str(stopped + 256), "--exp-dir", exp, "--requeue",
                 "--set", *FAST, env={**env, "SLURM_RESTART_COUNT": "1"})  # fmt: skip
    assert again.wait(120) == 0, again.output()[-3000:]
    assert f"requeued job (SLURM_RESTART_COUNT=1): resuming {exp}" in again.output()
    assert f"resumed at env step {stopped}" in again.output()
    assert json.loads((exp / "result.json").read_text())["env_steps"] == stopped + 256


# ------------------------------------------------------------------------------------- debug mode
@pytest.mark.slow
def test_debug_mode_stops_ranks_that_drift_apart(tmp_path):
    # A config bug: rank 1 clips its gradients harder (a learning rate would not do: distribute gives every
    # rank rank 0's optimizer hyper-parameters), so its updates, and then its network, differ.
    cfg = tmp_path / "rank_dependent_config.py"
    cfg.write_text(
        "import os\n"
        "from ding_dist.config import read_config\n"
        f"main_config, create_config = read_config({str(DQN_CONFIG)!r})\n"
        "if os.environ.get('RANK') == '1':\n"
        "    main_config.policy.learn.grad_clip_norm = 1e-4\n"
    )
    job = _Job(tmp_path, cfg, "--nproc", "2", "--debug", "--max-env-steps", "2048", "--exp-dir", tmp_path / "exp",
               "--set", *FAST)  # fmt: skip
    assert job.wait(120) == 1, job.output()[-3000:]
    last = job.stderr_lines()[-1]
    assert last.startswith("ding-dist: error: rank ") and "DesyncError: ranks are out of sync at 'model." in last
    # Without --debug the same job runs to the end with silently different networks.
    job = _Job(tmp_path, cfg, "--nproc", "2", "--max-env-steps", "512", "--exp-dir", tmp_path / "quiet",
               "--set", *FAST)  # fmt: skip
    assert job.wait(120) == 0, job.output()[-3000:]


def _rank_1_calls_an_extra_collective(exp_dir: str) -> str:
    from ding_dist.comm import allreduce_data, set_debug

    set_debug(True)
    if get_rank() == 1:
        log = DataParallelLoop.log

        def log_after_an_extra_allreduce(self, *args):
            allreduce_data(1.0)  # the bug: a collective only rank 1 makes
            return log(self, *args)

        DataParallelLoop.log = log_after_an_extra_allreduce
    pipeline.train(tiny_dqn(), exp_dir=exp_dir, max_env_steps=1024)
    return "no error"


def test_debug_mode_names_both_call_sites_of_a_mismatched_collective(run_ranks, tmp_path):
    from ding_dist.comm import LaunchError

    with pytest.raises(LaunchError) as info:
        run_ranks(_rank_1_calls_an_extra_collective, 2, str(tmp_path))
    message = dict(info.value.failures)[info.value.rank]
    assert "ranks called mismatched collectives" in message
    assert re.search(r"rank 0: allreduce\(shape=\(\d+,\).* at \S*worker\S*\.py:\d+ in reduce_log", message), message
    assert re.search(r"rank 1: allreduce\(shape=\(\).* at \S*test_reliability\.py:\d+ in log_after", message), message


# ------------------------------------------------------------------------------ restarts in-process
def test_restarted_worker_continues_from_its_experiment_folder(tmp_path, monkeypatch, caplog):
    """What a rank restarted by torchrun does: no --resume, TORCHELASTIC_RESTART_COUNT=1."""
    main_cfg, create_cfg = tiny_dqn()
    main_cfg.policy.other.checkpoint = dict(freq=256, keep_last=3)
    first = pipeline.train((main_cfg, create_cfg), seed=0, exp_dir=tmp_path, max_env_steps=1024)
    # A crash while the checkpoint of step 1024 was written, after the replay file: ckpt_1024 never appeared.
    assert _ckpt_steps(tmp_path) == [512, 768, 1024]
    (tmp_path / "ckpt" / "ckpt_000001024.pt").unlink()
    assert load_checkpoint(tmp_path / "ckpt" / "replay_rank0.pt")["env_steps"] == 1024
    assert load_checkpoint(tmp_path / "ckpt" / "replay_rank0.prev.pt")["env_steps"] == 768

    monkeypatch.setenv(RESTART_ENV, "1")
    with caplog.at_level("INFO", logger="ding_dist.entry"):
        second = pipeline.train((main_cfg, create_cfg), seed=0, exp_dir=tmp_path, max_env_steps=1280)
    assert "restart 1: continuing from" in caplog.text and "ckpt_000000768.pt" in caplog.text
    assert "resumed at env step 768" in caplog.text
    assert "replay_rank0.prev.pt (768 transitions)" in caplog.text  # the buffer of step 768, not of 1024
    assert second["env_steps"] == 1280
    assert second["train_iters"] == first["train_iters"] - 4 * 4 + 8 * 4  # 768 -> 1280: 8 more iterations

    # A restart before any checkpoint starts over (and drops the failed attempt's metric records).
    fresh = tmp_path / "fresh"
    third = pipeline.train((main_cfg, create_cfg), seed=0, exp_dir=fresh, max_env_steps=256)
    assert third["env_steps"] == 256 and "no complete checkpoint" in caplog.text


def test_checkpoint_of_another_config_is_a_clear_error(tmp_path, capsys):
    small = tmp_path / "small"
    pipeline.train(tiny_dqn(), exp_dir=small, max_env_steps=256)
    saved_config = (small / "config.py").read_text()
    code = main(["train", str(DQN_CONFIG), "--resume", str(small), "--max-env-steps", "512"])
    assert code == 2  # hidden sizes differ: [32] there, [128, 128] here
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("ding-dist: error: checkpoint ") and "ckpt_000000256.pt' does not fit this config" in err
    assert "size mismatch" in err
    assert (small / "config.py").read_text() == saved_config  # the failed resume changed nothing


# --------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--set", "env.id=NoSuchEnv-v9"], "env.id 'NoSuchEnv-v9' cannot be made: unknown environment id"),
        (["--set", "env.id=nosuchmodule:Foo-v0"], "No module named 'nosuchmodule'"),
        (["--set", "env.entry_point=os:nothing_here"], "has no attribute 'nothing_here'"),
        (["--set", "env.env_kwargs={{'bogus_kwarg': 1}}"], "bogus_kwarg"),
        (["--set", "policy.learn.batch_size=-1"], "'policy.learn.batch_size' must be >= 1, got -1"),
        (["--set", "env.collector_env_num=0"], "'env.collector_env_num' must be >= 1, got 0"),
        (["--set", "env.n_evaluator_episode=-3"], "'env.n_evaluator_episode' must be >= 1, got -3"),
        (["--set", "policy.collect.n_sample=0"], "'policy.collect.n_sample' must be >= 1, got 0"),
        (["--set", "policy.other.replay_buffer.replay_buffer_size=-5"], "replay_buffer_size' must be >= 1"),
        (["--set", "policy.other.checkpoint.keep_last=0"], "'policy.other.checkpoint.keep_last' must be >= 1"),
        (["--set", "policy.other.checkpoint.freq=-1"], "'policy.other.checkpoint.freq' must be >= 0, got -1"),
        (["--set", "policy.learn.learning_starts=-10"], "'policy.learn.learning_starts' must be >= 0"),
        (["--set", "policy.learn.learning_rate=0"], "'policy.learn.learning_rate' must be a finite number > 0"),
        (["--set", "policy.discount_factor=1.5"], "'policy.discount_factor' must be in [0, 1], got 1.5"),
        (["--set", "policy.learn.update_per_collect=0"], "'policy.learn.update_per_collect' must be >= 1"),
        (["--timeout", "0"], "argument --timeout: must be a finite number of seconds > 0, got 0"),
        (["--timeout", "-5"], "argument --timeout: must be a finite number of seconds > 0, got -5"),
        (["--timeout", "nan"], "argument --timeout: must be a finite number of seconds > 0, got nan"),
        (["--timeout", "soon"], "argument --timeout: must be a number of seconds, got 'soon'"),
        (["--health-timeout", "inf"], "argument --health-timeout: must be a finite number of seconds > 0"),
        (["--max-restarts", "-1"], "argument --max-restarts: must be >= 0, got -1"),
        (["--max-restarts", "many"], "argument --max-restarts: must be an integer, got 'many'"),
        (["--debug=yes"], "ignored explicit argument 'yes'"),
        (["--exp-dir", "{cfg}"], "exists and is not a folder"),
        (["--resume", "{tmp}"], "is not a run folder (no config.json, no ckpt/)"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, needle, tmp_path, capsys):
    names = {"cfg": str(DQN_CONFIG), "tmp": str(tmp_path)}
    safe = ["--exp-dir", str(tmp_path / "exp"), "--max-env-steps", "64"]  # should a case not fail: stay small
    try:
        code = main(["train", str(DQN_CONFIG), *safe, *(a.format(**names) for a in argv)])
    except SystemExit as e:  # argparse errors
        code = e.code
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("ding-dist: error: ") and needle in lines[0], lines[0]
    assert "Traceback" not in captured.err
    assert not list(tmp_path.iterdir())  # nothing was started or written


@pytest.mark.slow
def test_max_restarts_with_one_process_runs_under_torchrun(tmp_path):
    exp = tmp_path / "exp"
    job = _Job(tmp_path, DQN_CONFIG, "--max-restarts", "1", "--max-env-steps", "512", "--exp-dir", "exp",
               "--timeout", "60", "--debug", "--set", *FAST)  # fmt: skip
    assert job.wait(120) == 0, job.output()[-3000:]
    assert "starting 1 local process(es) with torch.distributed.run" in job.output()
    result = json.loads((exp / "result.json").read_text())
    assert result["world_size"] == 1 and result["env_steps"] == 512
    assert result["exp_dir"] == "exp"  # the children got the folder as given, as one process without a launcher
