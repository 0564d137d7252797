"""Torch threads per process: one for small networks, the cores shared by local processes for images, and the
governor that gives wide networks the cores other processes leave idle."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest
import torch

import ding_dist.entry.threads as threads_module
from ding_dist.entry.threads import ThreadGovernor, adaptive_threads, default_threads

IMAGE = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
VECTOR = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
GRID = gym.spaces.Box(0, 1, (6, 10, 10), np.uint8)  # MinAtar's: too small for threads to pay


@pytest.fixture(autouse=True)
def _restore_threads(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(("local_world", "space", "threads"), [(1, IMAGE, 4), (2, IMAGE, 2), (3, IMAGE, 1),
                                                                (1, VECTOR, 1), (1, None, 1),
                                                                (1, GRID, 1)])  # fmt: skip
def test_threads_follow_observations_and_local_processes(monkeypatch, local_world, space, threads):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local_world))
    default_threads(space)
    assert torch.get_num_threads() == threads


def test_omp_num_threads_wins(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    default_threads(VECTOR)
    assert torch.get_num_threads() == 3
    default_threads(IMAGE)
    assert torch.get_num_threads() == 3


def test_actor_learner_roles_share_the_cores_and_take_their_config(monkeypatch):
    from ding_dist.config import ConfigError
    from ding_dist.config.actor_learner import check_actor_learner_config
    from ding_dist.entry.roles import Roles, role_threads
    from ding_dist.entry.threads import OMP_DEFAULTED_ENV

    one_one, two_one = Roles(learners=1, actors=1), Roles(learners=1, actors=2)
    # One host of 8 cores: a learner's CNN takes the cores the actors leave, an actor takes 1.
    assert role_threads({}, one_one, 0, cores=8, local_world=2) == {"threads": None, "image_threads": 7}
    assert role_threads({"actor_threads": 2}, two_one, 0, cores=8, local_world=3)["image_threads"] == 4
    assert role_threads({}, two_one, 2, cores=8, local_world=3) == {"threads": None, "image_threads": 1}
    assert role_threads({}, two_one, 0, cores=8, local_world=1)["image_threads"] is None  # another host's roles
    assert role_threads({"learner_threads": 5}, one_one, 0, cores=8, local_world=2)["threads"] == 5
    # On 2 cores a lone learner left one takes a second, shared with its actor; two learners keep one each
    assert role_threads({}, one_one, 0, cores=2, local_world=2)["image_threads"] == 2
    assert role_threads({}, Roles(learners=2, actors=2), 0, cores=2, local_world=4)["image_threads"] == 1
    # On 4 cores (the fixture) under the launcher's default OMP_NUM_THREADS=1: the learner takes 3 ...
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv(OMP_DEFAULTED_ENV, "1")
    default_threads(IMAGE, **role_threads({}, one_one, 0, cores=4, local_world=2))
    assert torch.get_num_threads() == 3
    default_threads(VECTOR, **role_threads({}, one_one, 0, cores=4, local_world=2))  # vectors: one
    assert torch.get_num_threads() == 1
    monkeypatch.delenv(OMP_DEFAULTED_ENV)  # ... an OMP_NUM_THREADS you set wins over "auto" ...
    default_threads(IMAGE, **role_threads({}, one_one, 0, cores=4, local_world=2))
    assert torch.get_num_threads() == 1
    default_threads(VECTOR, **role_threads({"learner_threads": 2}, one_one, 0, cores=4, local_world=2))
    assert torch.get_num_threads() == 2  # ... and a number in the config over both
    with pytest.raises(ConfigError, match="'actor_learner.learner_threads' must be \"auto\" or an int >= 1"):
        check_actor_learner_config({"learner_threads": 0})
    check_actor_learner_config({"learner_threads": "2"})  # as --set actor_learner.learner_threads=2 leaves it
    with pytest.raises(ConfigError, match="must be \"auto\" or an int >= 1, got 'two'"):
        check_actor_learner_config({"actor_threads": "two"})


def _fake_samples():
    """A sample function and ``step(others, own)``: one second passes, the other processes take ``others`` cores."""
    state = {"t": 0.0, "busy": 0.0, "own": 0.0}

    def sample():
        return state["t"], state["busy"], state["own"]

    def step(others, own=1.0):
        state["t"] += 1.0
        state["busy"] += others + own
        state["own"] += own

    return sample, step


@pytest.mark.parametrize(("others", "threads"), [(0.0, 4), (0.1, 4), (0.2, 3), (1.0, 3), (1.3, 2), (2.9, 1), (8.0, 1)])
def test_governor_takes_the_cores_the_other_processes_leave(others, threads):
    # 4 cores (the fixture's affinity); others' share above the 0.15 margin costs a whole core
    sample, step = _fake_samples()
    torch.set_num_threads(1)
    governor = ThreadGovernor(4, interval_s=0.0, sample=sample)
    step(others, own=2.0)
    assert governor.tick() == threads
    assert torch.get_num_threads() == threads


def test_governor_drops_to_one_when_other_work_starts_and_rises_when_it_ends():
    sample, step = _fake_samples()
    torch.set_num_threads(1)
    governor = ThreadGovernor(2, interval_s=0.0, sample=sample)
    counts = []
    for others in (0.02, 0.05, 3.5, 3.9, 0.0):
        step(others, own=1.7)
        counts.append(governor.tick())
    assert counts == [2, 2, 1, 1, 2]
    assert governor.seconds_at == {1: 3.0, 2: 2.0}  # 1 s at the start, 2 s while the others ran; 2 s at 2
    assert set(governor.split()) == {"1", "2"}


def test_each_phase_gets_the_count_its_own_load_leaves():
    # 4 cores (the fixture's affinity); env workers of this run busy while it collects (3.5 cores) and idle while
    # it learns: over the iteration they average 1.75 cores, which would cost the learning its second thread
    sample, step = _fake_samples()
    torch.set_num_threads(1)
    governor = ThreadGovernor(2, interval_s=0.0, sample=sample)
    governor.tick("collect")
    counts = []
    for _ in range(3):
        step(3.5, own=0.3)  # collecting: the workers step, this process mostly waits for them
        counts.append(governor.tick("learn"))
        step(0.0, own=1.8)  # learning
        counts.append(governor.tick("collect"))
    assert counts == [1, 1, 2, 1, 2, 1]  # the first learn phase starts at the count in use; then learn 2, collect 1
    assert torch.get_num_threads() == 1
    assert governor.seconds_at == {1: 4.0, 2: 2.0}


def test_governor_waits_its_interval():
    sample, step = _fake_samples()
    torch.set_num_threads(1)
    governor = ThreadGovernor(2, interval_s=3600.0, sample=sample)
    step(0.0)
    assert governor.tick() == 1  # an hour has not passed: no new decision
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize(
    ("omp", "space", "work", "local_world", "device", "governed"),
    [
        (None, VECTOR, 352_000 * 256, 1, "cpu", True),  # Hopper SAC's 256-256 networks, batch 256
        (None, GRID, 133_000 * 1024, 1, "cpu", True),  # MinAtar PPO, minibatch 1,024
        (None, GRID, 266_000 * 32, 1, "cpu", False),  # MinAtar DQN, batch 32: too little work
        (None, IMAGE, 1_000, 1, "cpu", True),  # Atari frames, whatever the batch
        (None, VECTOR, 17_000 * 64, 1, "cpu", False),  # CartPole-sized: one thread
        ("2", VECTOR, 352_000 * 256, 1, "cpu", False),  # your OMP_NUM_THREADS fixes it
        (None, VECTOR, 352_000 * 256, 4, "cpu", False),  # one core per local process
        (None, VECTOR, 352_000 * 256, 2, "cpu", True),  # two each
        (None, VECTOR, 352_000 * 256, 1, "meta", False),  # a policy off the CPU
    ],
)
def test_which_runs_are_governed(monkeypatch, omp, space, work, local_world, device, governed):
    if omp is not None:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local_world))
    monkeypatch.setattr(threads_module, "_cpu_sample", lambda cores: (0.0, 0.0, 0.0))
    governor = adaptive_threads(space, work, device)
    assert (governor is not None) == governed


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two cores")  # fmt: skip
def test_governor_sees_a_real_busy_process(monkeypatch):
    # the governor's process on two cores, a busy loop pinned to one of them: one thread
    two = sorted(os.sched_getaffinity(0))[:2]
    monkeypatch.undo()  # the real affinity
    before = os.sched_getaffinity(0)
    spin = f"import os\nos.sched_setaffinity(0, {{{two[0]}}})\nwhile True: pass"
    busy = subprocess.Popen([sys.executable, "-c", spin])
    try:
        os.sched_setaffinity(0, set(two))
        time.sleep(0.5)
        torch.set_num_threads(2)
        governor = ThreadGovernor(2, interval_s=0.0)
        time.sleep(1.0)
        assert governor.tick() == 1
    finally:
        busy.kill()
        busy.wait(timeout=10)
        os.sched_setaffinity(0, before)


@pytest.mark.parametrize(
    ("files", "cores"),
    [
        ({"cpu.max": "150000 100000"}, 2),  # docker --cpus=1.5: two threads' worth, rounded up
        ({"cpu.max": "max 100000"}, 4),  # no quota: the affinity (the fixture's 4)
        ({"quota": "300000", "period": "100000"}, 3),  # cgroup v1
        ({"quota": "-1", "period": "100000"}, 4),
        ({"cpu.max": "800000 100000"}, 4),  # a quota above the affinity does not add cores
        ({}, 4),  # no cgroup files at all
    ],
)
def test_cpu_cores_follow_a_containers_quota(monkeypatch, tmp_path, files, cores):
    for name, text in files.items():
        (tmp_path / name).write_text(text + "\n")
    v2, v1 = (str(tmp_path / "cpu.max"),), (str(tmp_path / "quota"), str(tmp_path / "period"))
    monkeypatch.setattr(threads_module, "CGROUP_CPU_FILES", (v2, v1))
    assert threads_module.cpu_cores() == cores


def test_a_learner_is_governed_up_to_the_cores_its_actors_leave(monkeypatch):
    from ding_dist.entry.roles import Roles, role_threads

    monkeypatch.setattr(threads_module, "_cpu_sample", lambda cores: (0.0, 0.0, 0.0))
    hopper = 350_000 * 256
    # 8 cores, 1 learner + 3 actors on one host: up to 5 threads; 2 cores, 1 + 1: the 2 a lone learner shares
    for cores, roles, most in ((8, Roles(learners=1, actors=3), 5), (2, Roles(learners=1, actors=1), 2)):
        role = role_threads({}, roles, 0, cores=cores, local_world=roles.world_size)
        governor = adaptive_threads(VECTOR, hopper, "cpu", most=role["image_threads"])
        assert governor.most == most
    two_learners = Roles(learners=2, actors=2)  # 4 cores: one thread each, nothing to govern
    role = role_threads({}, two_learners, 0, cores=4, local_world=two_learners.world_size)
    assert adaptive_threads(VECTOR, hopper, "cpu", most=role["image_threads"]) is None


def test_update_work_is_weights_times_the_ranks_batch():
    from types import SimpleNamespace

    from ding_dist.entry.threads import update_work

    net = torch.nn.Linear(10, 3)  # 33 weights
    policy = SimpleNamespace(named_weights=lambda: {"model.weight": net.weight, "model.bias": net.bias})
    assert update_work(policy, SimpleNamespace(rank_batch=64, rank_n_sample=512)) == 33 * 64
    assert update_work(policy, SimpleNamespace(rank_batch=None, rank_n_sample=512)) == 33 * 512  # a whole rollout


def _local_processes_and_env():
    from ding_dist.entry.threads import local_processes

    return local_processes(), os.environ.get("LOCAL_WORLD_SIZE")


def test_ranks_of_launch_count_each_other_without_local_world_size():
    from ding_dist.comm import launch

    # two ranks on this machine share its cores, though nothing set LOCAL_WORLD_SIZE
    assert launch(_local_processes_and_env, 2, timeout=120) == [(2, None), (2, None)]
