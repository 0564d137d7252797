"""Launch-settings parsing: arguments, torchrun, SLURM, fake link, timeouts."""

import ast
import io
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

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
    for bad in ("soon", "-5", "0", "inf", "nan"):
        with pytest.raises(ValueError, match=f"^DING_DIST_TIMEOUT='{bad}': expected a number of seconds > 0$"):
            resolve_timeout(env={"DING_DIST_TIMEOUT": bad})
    assert resolve_timeout(env={"DING_DIST_TIMEOUT": ""}) == DEFAULT_TIMEOUT_S  # empty: unset
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


# ---- the DING_DIST_* variables: one table, every value checked, unknown names named -----------------------------
REPO = Path(__file__).resolve().parents[2]


def test_the_table_holds_every_variable_the_code_reads():
    """Every ``DING_DIST_*`` name the package's code holds (a string that is the name, as ``os.environ`` is read with)
    is a row of ENV_VARS: a new variable cannot skip the checks."""
    read = set()
    for path in (REPO / "ding_dist").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                read |= set(re.findall(r"^DING_DIST_[A-Z0-9_]*[A-Z0-9]$", node.value))
    assert {"DING_DIST_TIMEOUT", "DING_DIST_OMP_DEFAULTED", "DING_DIST_DING_REPORTED"} <= read
    assert read - {v.name for v in settings.ENV_VARS} == set()
    assert len({v.name for v in settings.ENV_VARS}) == len(settings.ENV_VARS) == 13


def test_the_docs_list_every_variable_as_the_table_does():
    text = (REPO / "docs" / "reliability.md").read_text()
    for var in settings.ENV_VARS:
        assert f"| `{var.name}` | {var.takes} | {var.meaning} |" in text, var.name


@pytest.mark.parametrize(
    ("name", "raw", "value"),
    [
        ("DING_DIST_TIMEOUT", "90", 90.0),
        ("DING_DIST_TIMEOUT", "0.5", 0.5),
        ("DING_DIST_BACKEND", "gloo", "gloo"),
        ("DING_DIST_BACKEND", " cpu:gloo, cuda:gloo ", "cpu:gloo, cuda:gloo"),
        ("DING_DIST_INIT_RETRIES", "0", 0),
        ("DING_DIST_DEBUG", "1", True),
        ("DING_DIST_DEBUG", "off", False),
        ("DING_DIST_TRACK", "True", True),
        ("DING_DIST_TRACK", "0", False),
        ("DING_DIST_HEARTBEAT_S", "0", 0.0),
        ("DING_DIST_START_METHOD", "subprocess", "subprocess"),
        ("DING_DIST_HEARTBEAT_STORE", "node0:29400", "node0:29400"),
        ("DING_DIST_HEARTBEAT_STARTUP_GRACE_S", "12.0", 12.0),
    ],
)
def test_good_values_parse(name, raw, value):
    assert settings.env_value(name, {name: raw}) == value
    assert settings.env_value(name, {name: ""}) is None and settings.env_value(name, {}) is None  # empty: unset


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("DING_DIST_TIMEOUT", "abc", "DING_DIST_TIMEOUT='abc': expected a number of seconds > 0"),
        ("DING_DIST_TIMEOUT", "-5", "DING_DIST_TIMEOUT='-5': expected a number of seconds > 0"),
        ("DING_DIST_BACKEND", "glooo", "DING_DIST_BACKEND='glooo': expected gloo, nccl (with CUDA GPUs), mpi, or a "
         "per-device list such as cpu:gloo,cuda:nccl"),
        ("DING_DIST_BACKEND", "gpu:gloo", "DING_DIST_BACKEND='gpu:gloo': expected gloo, nccl"),
        ("DING_DIST_INIT_RETRIES", "1.5", "DING_DIST_INIT_RETRIES='1.5': expected an integer >= 0"),
        ("DING_DIST_INIT_RETRIES", "-1", "DING_DIST_INIT_RETRIES='-1': expected an integer >= 0"),
        ("DING_DIST_DEBUG", "2", "DING_DIST_DEBUG='2': expected 1 or 0 (or true/false, yes/no, on/off)"),
        ("DING_DIST_TRACK", "maybe", "DING_DIST_TRACK='maybe': expected 1 or 0 (or true/false, yes/no, on/off)"),
        ("DING_DIST_HEARTBEAT_GRACE_S", "inf", "DING_DIST_HEARTBEAT_GRACE_S='inf': expected a number of seconds >= 0"),
        ("DING_DIST_START_METHOD", "spawn", "DING_DIST_START_METHOD='spawn': expected 'fork' or 'subprocess'"),
        ("DING_DIST_HEARTBEAT_STORE", "node0", "DING_DIST_HEARTBEAT_STORE='node0': expected host:port"),
    ],
)  # fmt: skip
def test_bad_values_are_one_line_naming_the_variable_its_value_and_what_it_takes(name, raw, message):
    with pytest.raises(ValueError) as info:
        settings.env_value(name, {name: raw})
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
    with pytest.raises(ValueError) as every:
        settings.check_env_values({name: raw, "HOME": "/root"})
    assert str(every.value) == str(info.value)


@pytest.mark.skipif(torch.cuda.device_count() > 0, reason="this machine has CUDA GPUs: nccl is a good value")
def test_nccl_without_cuda_says_there_is_none():
    with pytest.raises(ValueError) as info:
        settings.env_value("DING_DIST_BACKEND", {"DING_DIST_BACKEND": "cpu:gloo,cuda:nccl"})
    assert str(info.value).startswith("DING_DIST_BACKEND='cpu:gloo,cuda:nccl': nccl needs CUDA GPUs and this "
                                      "machine has none; expected gloo, nccl (with CUDA GPUs)")  # fmt: skip


def test_every_bad_value_in_one_line_and_the_heartbeat_checked_as_a_whole():
    with pytest.raises(ValueError) as info:
        settings.check_env_values({"DING_DIST_TIMEOUT": "abc", "DING_DIST_DEBUG": "yes please"})
    assert str(info.value) == ("DING_DIST_TIMEOUT='abc': expected a number of seconds > 0; DING_DIST_DEBUG='yes "
                               "please': expected 1 or 0 (or true/false, yes/no, on/off)")  # fmt: skip
    with pytest.raises(ValueError, match=r"^the heartbeat grace \(1 s, DING_DIST_HEARTBEAT_GRACE_S\) must be at"):
        settings.check_env_values({"DING_DIST_HEARTBEAT_S": "2", "DING_DIST_HEARTBEAT_GRACE_S": "1"})
    settings.check_env_values({"DING_DIST_TIMEOUT": "30", "DING_DIST_TIMOUT": "x", "DING_DIST_DEBUG": ""})


def test_unknown_names_get_the_closest_known_name_in_one_warning_line_each():
    env = {"DING_DIST_TIMOUT": "5", "DING_DIST_DEBG": "1", "DING_DIST_XYZ": "1", "DING_DIST_DEBUG": "1", "PATH": "/"}
    assert settings.unknown_env_vars(env) == [
        ("DING_DIST_DEBG", "DING_DIST_DEBUG"),
        ("DING_DIST_TIMOUT", "DING_DIST_TIMEOUT"),
        ("DING_DIST_XYZ", None),
    ]
    out = io.StringIO()
    lines = settings.warn_unknown_env(env, prog="ding-dist", stream=out)
    assert out.getvalue().splitlines() == lines
    assert lines == [
        "ding-dist: warning: unknown variable DING_DIST_DEBG (ignored); did you mean DING_DIST_DEBUG?",
        "ding-dist: warning: unknown variable DING_DIST_TIMOUT (ignored); did you mean DING_DIST_TIMEOUT?",
        "ding-dist: warning: unknown variable DING_DIST_XYZ (ignored); ding_dist reads DING_DIST_TIMEOUT, "
        "DING_DIST_BACKEND, DING_DIST_INIT_RETRIES, DING_DIST_DEBUG, DING_DIST_TRACK, DING_DIST_HEARTBEAT_S, "
        "DING_DIST_HEARTBEAT_GRACE_S, DING_DIST_START_METHOD",
    ]
    assert settings.warn_unknown_env({"DING_DIST_TIMEOUT": "5"}, stream=out) == []


_DIST_INIT = """
import ding_dist as dd
try:
    dd.dist_init()
except ValueError as e:
    print("ValueError:", e)
"""


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DING_DIST_", "RANK", "WORLD_SIZE", "SLURM"))}
    return subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def test_the_python_api_checks_the_variables_before_any_work():
    """``dist_init`` (so ``train()``, ``launch``, every rank): a bad value is one ValueError line; a typo is one
    warning line on stderr, and nothing when ding-dist has checked the job already."""
    done = _python(_DIST_INIT, DING_DIST_TIMEOUT="-5")
    assert done.stdout == "ValueError: DING_DIST_TIMEOUT='-5': expected a number of seconds > 0\n", done.stderr
    done = _python(_DIST_INIT, DING_DIST_TIMOUT="5")
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr == "ding_dist: warning: unknown variable DING_DIST_TIMOUT (ignored); did you mean " \
                          "DING_DIST_TIMEOUT?\n"  # fmt: skip
    done = _python(_DIST_INIT, DING_DIST_TIMOUT="5", DING_DIST_ENV_CHECKED="1")
    assert done.returncode == 0 and done.stderr == ""
