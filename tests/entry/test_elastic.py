"""An elastic job (``ding-dist train --nnodes 1:2``: torchrun's c10d rendezvous, no etcd) across two nodes: the
first node trains alone; a second node joins and the job re-forms at 2 processes from the checkpoint of the step
where it stopped; then the second node is killed (agent and worker, SIGKILL) and the job re-forms at 1 process from
its newest checkpoint and trains to the end. On localhost, and across the two network namespaces of
``../shared/tools/two-hosts`` when it is there and we are root.

Quality-marked: about a minute of training and three rendezvous rounds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ding_dist.comm.settings import free_port
from ding_dist.utils import CheckpointManager, load_checkpoint

pytestmark = pytest.mark.quality

REPO = Path(__file__).resolve().parents[2]
# the two-hosts network tool sits in shared/tools beside the checkout, or two levels up
_TOOL = Path("shared") / "tools" / "two-hosts"
TWO_HOSTS = next((p / _TOOL for p in REPO.parents[:2] if (p / _TOOL).is_file()), REPO.parent / _TOOL)
STEPS = 6_144  # a multiple of the 64 env steps per iteration
SETS = ["env.collector_env_num=4", "env.evaluator_env_num=1", "env.n_evaluator_episode=1", "env.stop_value=1e9",
        "env.step_cost_ms=1", "policy.model.hidden_sizes=[16]", "policy.learn.learning_starts=64",
        "policy.learn.update_per_collect=1", "policy.collect.n_sample=64", "policy.eval.eval_freq=1024",
        "policy.other.log_freq=256", "policy.other.checkpoint.freq=256", "policy.other.checkpoint.keep_last=4",
        "policy.other.replay_buffer.save_in_checkpoint=True"]  # fmt: skip


def _agent(host: str, port: int, exp_dir: Path, log: Path, node: int | None, hosts_store: bool) -> subprocess.Popen:
    """One node: ``ding-dist train --nnodes 1:2`` (its torchrun agent and one worker). ``--rdzv-host``: which node
    serves the rendezvous store (on one machine both would guess they do); ``--node-addr``: where peers reach it."""
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", "cartpole_dqn", "--nnodes", "1:2",
           "--rdzv-endpoint", f"{host}:{port}", "--rdzv-id", "elastic_test",
           "--rdzv-host", "yes" if hosts_store else "no",
           "--node-addr", "127.0.0.1" if node is None else f"10.77.0.{node + 1}", "--max-restarts", "3",
           "--exp-dir", str(exp_dir), "--seed", "0", "--max-env-steps", str(STEPS), "--timeout", "60",
           "--set", *SETS]  # fmt: skip
    if node is not None:
        cmd = [str(TWO_HOSTS), "run", str(node), *cmd]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def _newest(ckpt_dir: Path) -> tuple[int, int] | None:
    """(env step, world size) of the newest complete checkpoint."""
    newest = CheckpointManager(ckpt_dir).latest()
    if newest is None:
        return None
    state = load_checkpoint(newest)
    return int(state["counters"]["env_steps"]), len(state["rng"])


def _wait(what: str, until, procs: list[subprocess.Popen], timeout: float = 180.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = until()
        if found:
            return found
        if procs[0].poll() is not None:
            raise AssertionError(f"the first node ended (code {procs[0].returncode}) before {what}")
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _hosts() -> list[str]:
    hosts = ["localhost"]
    if TWO_HOSTS.is_file() and os.geteuid() == 0 and shutil.which("ip"):
        hosts.append("two-hosts")
    return hosts


@pytest.mark.timeout(900)
@pytest.mark.parametrize("hosts", _hosts())
def test_a_node_joins_then_dies_and_the_job_reforms_each_time(tmp_path, hosts):
    exp, logs = tmp_path / "run", [tmp_path / "node0.log", tmp_path / "node1.log"]
    port = free_port()
    if hosts == "two-hosts":
        subprocess.run([str(TWO_HOSTS), "up", "1gbit"], check=True, capture_output=True)
    procs: list[subprocess.Popen] = []
    try:
        addr, nodes = ("10.77.0.1", (0, 1)) if hosts == "two-hosts" else ("127.0.0.1", (None, None))
        procs.append(_agent(addr, port, exp, logs[0], nodes[0], True))
        alone = _wait("a checkpoint of one process", lambda: _newest(exp / "ckpt"), procs)
        assert alone[1] == 1

        procs.append(_agent(addr, port, exp, logs[1], nodes[1], False))
        joined = _wait("a checkpoint of two processes", lambda: (n := _newest(exp / "ckpt")) and n[1] == 2 and n,
                       procs)  # fmt: skip
        assert joined[0] > alone[0]
        before_kill = _newest(exp / "ckpt")
        for pid in _descendants(procs[1].pid):  # the second node dies: its agent and its worker at once
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        procs[1].wait(10)
        code = procs[0].wait(300)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        if hosts == "two-hosts":
            subprocess.run([str(TWO_HOSTS), "down"], capture_output=True)
    text = logs[0].read_text() + logs[1].read_text()
    assert code == 0, text[-3000:]
    result = json.loads((exp / "result.json").read_text())
    assert (result["env_steps"], result["world_size"]) == (STEPS, 1)
    # the join stopped the lone process at a step it checkpointed (SIGTERM from its agent): nothing was lost
    reform = r"(?:job re-formed with 2 process\(es\)|restart 1): continuing from \S*ckpt_(\d+)"
    rejoins = [int(s) for s in re.findall(reform, text)]
    assert len(rejoins) == 2, text[-3000:]
    assert "checkpoint was written by 1 rank(s), running 2" in text
    stopped = [int(s) for s in re.findall(r"stopped by SIGTERM at env step (\d+), checkpointed", text)]
    assert stopped[0] == rejoins[0]  # the join: the lone process's step, checkpointed on its agent's SIGTERM
    failed = [int(s) for s in re.findall(r"a collective failed at env step (\d+)", text)]
    # the node's death: the survivor continued from a checkpoint no older than the newest one seen before the kill
    assert rejoins[1] >= before_kill[0]
    print(f"{hosts}: alone to {alone[0]}, joined at {rejoins[0]}, 2 processes to {before_kill[0]}, node killed, "
          f"the survivor's collective failed at {failed}, continued from {rejoins[1]}; checkpoint interval 256 env "
          "steps")  # fmt: skip


@pytest.mark.timeout(600)
@pytest.mark.parametrize("how", ["leave", "kill-agent"])
def test_a_node_that_leaves_lets_the_other_continue_alone_and_every_process_exits(tmp_path, how):
    """``leave``: SIGTERM to the second node's agent (a pod eviction); ``kill-agent``: SIGKILL of that agent only
    (its worker must not stay as an orphan). The first node continues at one process to the end; the second node's
    processes are gone within 30 s. Localhost (two agents on one machine)."""
    exp, logs = tmp_path / "run", [tmp_path / "node0.log", tmp_path / "node1.log"]
    port = free_port()
    procs: list[subprocess.Popen] = []
    try:
        procs.append(_agent("127.0.0.1", port, exp, logs[0], None, True))
        _wait("a checkpoint of one process", lambda: _newest(exp / "ckpt"), procs)
        procs.append(_agent("127.0.0.1", port, exp, logs[1], None, False))
        _wait("a checkpoint of two processes", lambda: (n := _newest(exp / "ckpt")) and n[1] == 2 and n, procs)
        second = _descendants(procs[1].pid)
        procs[1].send_signal(signal.SIGTERM if how == "leave" else signal.SIGKILL)
        procs[1].wait(60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and [p for p in second if _alive(p)]:
            time.sleep(0.2)
        assert [p for p in second if _alive(p)] == [], "the second node's processes outlived it"
        code = procs[0].wait(300)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    text = logs[0].read_text() + logs[1].read_text()
    assert code == 0, text[-3000:]
    result = json.loads((exp / "result.json").read_text())
    assert (result["env_steps"], result["world_size"]) == (STEPS, 1), text[-3000:]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.timeout(600)
@pytest.mark.parametrize("how", ["leave", "kill-agent", "cut"])
def test_across_two_namespaces_a_node_that_leaves_is_killed_or_cut_off_lets_the_other_continue(tmp_path, how):
    """Two network namespaces (``two-hosts``): after the job re-formed at 2, the second node's agent gets SIGTERM
    (``leave``), SIGKILL (``kill-agent``), or its link goes down (``cut``). The first node continues at one process
    to the end; every process of the second node is gone within 60 s (a cut: STORE_LOST_S = 30 s plus detection)."""
    if "two-hosts" not in _hosts():
        pytest.skip(f"needs root and {TWO_HOSTS} (ip netns): CI has no network namespaces")
    exp, logs = tmp_path / "run", [tmp_path / "node0.log", tmp_path / "node1.log"]
    port = free_port()
    subprocess.run([str(TWO_HOSTS), "up", "1gbit"], check=True, capture_output=True, timeout=30)
    procs: list[subprocess.Popen] = []
    try:
        procs.append(_agent("10.77.0.1", port, exp, logs[0], 0, True))
        _wait("a checkpoint of one process", lambda: _newest(exp / "ckpt"), procs)
        procs.append(_agent("10.77.0.1", port, exp, logs[1], 1, False))
        _wait("a checkpoint of two processes", lambda: (n := _newest(exp / "ckpt")) and n[1] == 2 and n, procs)
        second = _descendants(procs[1].pid)
        t0 = time.monotonic()
        if how == "cut":
            subprocess.run(["ip", "-n", "ding-h1", "link", "set", "veth-h1", "down"], check=True, timeout=10)
        else:
            procs[1].send_signal(signal.SIGTERM if how == "leave" else signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and [p for p in second if _alive(p)]:
            time.sleep(0.2)
        gone = time.monotonic() - t0
        assert [p for p in second if _alive(p)] == [], "the second node's processes outlived it"
        code = procs[0].wait(300)
        print(f"two-hosts {how}: the second node's processes gone {gone:.1f} s after the stop")
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        subprocess.run([str(TWO_HOSTS), "down"], capture_output=True, timeout=30)
    text = logs[0].read_text() + logs[1].read_text()
    assert code == 0, text[-3000:]
    result = json.loads((exp / "result.json").read_text())
    assert (result["env_steps"], result["world_size"]) == (STEPS, 1), text[-3000:]
    if how == "cut":
        assert "cannot reach the job's rendezvous store" in logs[1].read_text()
