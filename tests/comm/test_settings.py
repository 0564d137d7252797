"""Launch-settings parsing: arguments, torchrun, SLURM, fake link, timeouts."""

import socket

import pytest

from ding_dist.comm import settings
from ding_dist.comm.settings import (
    DEFAULT_TIMEOUT_S,
    FAKE_SETTINGS,
    expand_slurm_nodelist,
    local_rank,
    local_size,
    resolve_launch_settings,
    resolve_timeout,
    running_settings,
    set_running_settings,
)

TORCHRUN = {
    "RANK": "3",
    "WORLD_SIZE": "4",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "node0",
    "MASTER_PORT": "29400",
}
SLURM = {
    "SLURM_PROCID": "5",
    "SLURM_NTASKS": "8",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "2",
    "SLURM_TASKS_PER_NODE": "2(x4)",
    "SLURM_JOB_NODELIST": "gpu[07-10]",
    "SLURM_JOB_ID": "123456",
}


def test_no_launcher_is_the_fake_link():
    s = resolve_launch_settings(env={})
    assert s.is_fake and (s.rank, s.world_size, s.local_rank, s.local_size) == (0, 1, 0, 1)


def test_torchrun_variables():
    s = resolve_launch_settings(env=TORCHRUN)
    assert (s.rank, s.world_size, s.local_rank, s.local_size) == (3, 4, 1, 2)
    assert (s.addr, s.port, s.source) == ("node0", 29400, "torchrun")


def test_slurm_procid_is_the_global_rank_and_localid_the_local_rank():
    s = resolve_launch_settings(env=SLURM)
    assert (s.rank, s.world_size, s.local_rank, s.local_size) == (5, 8, 1, 2)
    assert s.addr == "gpu07" and s.source == "slurm"
    assert s.port == 15000 + 123456 % 20000


def test_slurm_master_from_env_and_ntasks_per_node():
    env = dict(SLURM, MASTER_ADDR="head", MASTER_PORT="1234", SLURM_NTASKS_PER_NODE="4")
    s = resolve_launch_settings(env=env)
    assert (s.addr, s.port, s.local_size) == ("head", 1234, 4)


def test_single_task_slurm_job_is_the_fake_link():
    assert resolve_launch_settings(env={"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}).is_fake


def test_torchrun_wins_over_slurm():
    assert resolve_launch_settings(env={**SLURM, **TORCHRUN}).source == "torchrun"


def test_arguments_win_over_environment():
    s = resolve_launch_settings(rank=1, world_size=2, addr="10.1.1.1", port=4000, env=TORCHRUN)
    assert (s.rank, s.world_size, s.addr, s.port, s.source) == (1, 2, "10.1.1.1", 4000, "arguments")


@pytest.mark.parametrize(
    "nodelist, hosts",
    [
        ("n1", ["n1"]),
        ("a[1-3]", ["a1", "a2", "a3"]),
        ("gpu[008-010,012],cpu5", ["gpu008", "gpu009", "gpu010", "gpu012", "cpu5"]),
        ("x[2],y[9-10]", ["x2", "y9", "y10"]),
    ],
)
def test_expand_slurm_nodelist(nodelist, hosts):
    assert expand_slurm_nodelist(nodelist) == hosts


@pytest.mark.parametrize(
    "kwargs, env, match",
    [
        ({"rank": 2, "world_size": 2}, {}, r"rank must be in \[0, 1\] for world_size 2, got 2"),
        ({"rank": -1, "world_size": 2}, {}, "got -1"),
        ({"rank": 0}, {}, "give rank and world_size together"),
        ({}, {"RANK": "0", "WORLD_SIZE": "2"}, "missing environment variable.*MASTER_ADDR"),
        ({}, dict(TORCHRUN, RANK="x"), "RANK must be an integer, got 'x'"),
        ({}, dict(TORCHRUN, RANK="4"), "got 4"),
        ({}, dict(SLURM, SLURM_PROCID="8"), "got 8"),
        ({"rank": 0, "world_size": 2, "port": 70000}, {}, "port must be in"),
    ],
)
def test_bad_settings_name_the_value(kwargs, env, match):
    with pytest.raises(ValueError, match=match):
        resolve_launch_settings(env=env, **kwargs)


def test_bad_nodelist():
    with pytest.raises(ValueError, match="node list"):
        expand_slurm_nodelist("n[a-b]")


def test_timeout_default_env_and_argument():
    assert resolve_timeout(env={}) == DEFAULT_TIMEOUT_S == 1800
    assert resolve_timeout(env={"DING_DIST_TIMEOUT": "45"}) == 45.0
    assert resolve_timeout(12, env={"DING_DIST_TIMEOUT": "45"}) == 12.0
    with pytest.raises(ValueError, match="DING_DIST_TIMEOUT must be a number of seconds, got 'soon'"):
        resolve_timeout(env={"DING_DIST_TIMEOUT": "soon"})
    with pytest.raises(ValueError, match="got -3"):
        resolve_timeout(-3, env={})


def test_local_place_of_the_running_group(monkeypatch):
    other = {"LOCAL_RANK": "7", "LOCAL_WORLD_SIZE": "9"}
    assert running_settings() is FAKE_SETTINGS
    assert (local_rank(False, env=other), local_size(False, env=other)) == (0, 1)  # no group runs
    assert (local_rank(True, env=other), local_size(True, env=other)) == (7, 9)  # a group someone else started
    assert (local_rank(True, env={}), local_size(True, env={})) == (0, 1)
    monkeypatch.setattr(settings, "_running", FAKE_SETTINGS)  # restored after the test
    set_running_settings(resolve_launch_settings(env=SLURM))  # the group dist_init started wins over the env
    assert (local_rank(True, env=other), local_size(True, env=other)) == (1, 2)
    set_running_settings(resolve_launch_settings(rank=2, world_size=8, env={"LOCAL_WORLD_SIZE": "4"}))
    assert (local_rank(True, env=other), local_size(True, env=other)) == (2, 4)
    assert (local_rank(False, env=other), local_size(False, env=other)) == (0, 1)


def test_ephemeral_port_range_reads_the_kernel_file_and_falls_back_on_garbage(tmp_path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_text("15000\t50000\n")
    bad.write_text("not ports\n")
    assert settings.ephemeral_port_range(str(good)) == (15000, 50000)
    assert settings.ephemeral_port_range(str(bad)) == (32768, 60999)
    assert settings.ephemeral_port_range(str(tmp_path / "missing")) == (32768, 60999)


def test_free_port_stays_out_of_the_ephemeral_range(monkeypatch) -> None:
    # A port the kernel hands to outgoing connections can be stolen before rank 0 listens (seen in CI: EADDRINUSE).
    monkeypatch.setattr(settings, "ephemeral_port_range", lambda: (20000, 60999))
    ports = {settings.free_port() for _ in range(200)}
    assert all(10000 <= p <= 19999 or 61000 <= p <= 65535 for p in ports)
    assert any(p <= 19999 for p in ports) and any(p >= 61000 for p in ports)
    for port in list(ports)[:5]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))  # free right now


def test_free_port_falls_back_to_the_kernel_when_the_range_leaves_no_room(monkeypatch) -> None:
    monkeypatch.setattr(settings, "ephemeral_port_range", lambda: (1024, 65000))
    port = settings.free_port()
    assert 1024 <= port <= 65000
