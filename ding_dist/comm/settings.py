"""Where a process learns its place in the job: arguments, torchrun's variables, SLURM's, or none.

Everything here is pure (it reads a mapping of environment variables), so every launcher's layout is
testable without the launcher.
"""

from __future__ import annotations

import difflib
import math
import os
import random
import re
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

DEFAULT_TIMEOUT_S = 30 * 60
DEFAULT_PORT = 29500
TIMEOUT_ENV = "DING_DIST_TIMEOUT"
BACKEND_ENV = "DING_DIST_BACKEND"
RETRIES_ENV = "DING_DIST_INIT_RETRIES"
DEBUG_ENV = "DING_DIST_DEBUG"
TRACK_ENV = "DING_DIST_TRACK"
HEARTBEAT_ENV = "DING_DIST_HEARTBEAT_S"
HEARTBEAT_GRACE_ENV = "DING_DIST_HEARTBEAT_GRACE_S"
START_METHOD_ENV = "DING_DIST_START_METHOD"
HEARTBEAT_STORE_ENV = "DING_DIST_HEARTBEAT_STORE"
STARTUP_GRACE_ENV = "DING_DIST_HEARTBEAT_STARTUP_GRACE_S"
OMP_DEFAULTED_ENV = "DING_DIST_OMP_DEFAULTED"
DING_REPORTED_ENV = "DING_DIST_DING_REPORTED"
ENV_CHECKED_ENV = "DING_DIST_ENV_CHECKED"
ENV_PREFIX = "DING_DIST_"


@dataclass(frozen=True)
class LaunchSettings:
    """One process's place in the job and how to reach the master.

    ``source`` is where the numbers came from: ``"arguments"``, ``"torchrun"``, ``"slurm"`` or ``"fake"``
    (no launcher: a world of one without a process group).
    """

    rank: int
    world_size: int
    local_rank: int
    local_size: int
    addr: str
    port: int
    source: str

    @property
    def is_fake(self) -> bool:
        return self.source == "fake"


FAKE_SETTINGS = LaunchSettings(0, 1, 0, 1, "127.0.0.1", 0, "fake")
_running: LaunchSettings = FAKE_SETTINGS  # what dist_init started the running process group with


def running_settings() -> LaunchSettings:
    """The settings ``dist_init`` started the running process group with; ``FAKE_SETTINGS`` when it started
    none (no group, or a group someone else started).

    Example:
        >>> running_settings().source
        'fake'
    """
    return _running


def set_running_settings(settings: LaunchSettings) -> None:
    """Record the settings of the process group ``dist_init`` just started (``FAKE_SETTINGS`` once it is gone)."""
    global _running
    _running = settings


def local_rank(group_running: bool, env: Mapping[str, str] | None = None) -> int:
    """This process's rank on its node: 0 when no process group runs, the local rank ``dist_init`` started the
    group with, else (a group someone else started) the launcher's ``LOCAL_RANK`` (0 when unset).

    Example:
        >>> local_rank(False), local_rank(True, env={"LOCAL_RANK": "3"})
        (0, 3)
    """
    if not group_running:
        return 0
    if _running.is_fake:
        return int((os.environ if env is None else env).get("LOCAL_RANK", 0))
    return _running.local_rank


def local_size(group_running: bool, env: Mapping[str, str] | None = None) -> int:
    """Number of processes on this node: 1 when no process group runs, else as :func:`local_rank` (from
    ``LOCAL_WORLD_SIZE`` for a group someone else started).

    Example:
        >>> local_size(False), local_size(True, env={"LOCAL_WORLD_SIZE": "4"})
        (1, 4)
    """
    if not group_running:
        return 1
    if _running.is_fake:
        return int((os.environ if env is None else env).get("LOCAL_WORLD_SIZE", 1))
    return _running.local_size


def _int_var(env: Mapping[str, str], name: str) -> int:
    value = env[name]
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer, got {value!r}") from None


def _check_rank(rank: int, world_size: int, what: str) -> None:
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size} ({what})")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size - 1}] for world_size {world_size}, got {rank} ({what})")


def _check_port(port: int, what: str) -> int:
    if not 0 < port < 65536:
        raise ValueError(f"port must be in [1, 65535], got {port} ({what})")
    return port


_EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def ephemeral_port_range(path: str = _EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The kernel's range of source ports for outgoing connections (Linux's default when it cannot be read).

    Example:
        >>> low, high = ephemeral_port_range()
        >>> 0 < low <= high < 65536
        True
    """
    try:
        with open(path) as f:
            low, high = (int(v) for v in f.read().split()[:2])
    except (OSError, ValueError):
        return 32768, 60999
    return (low, high) if 0 < low <= high < 65536 else (32768, 60999)


def free_port(host: str = "127.0.0.1", *, attempts: int = 64) -> int:
    """Return a TCP port that is free on ``host`` right now, chosen outside the kernel's ephemeral range.

    A port from the ephemeral range (what binding port 0 gives) can be taken before rank 0 listens on it by the
    source port of any outgoing connection, gloo's own mesh included; a port below (or above) that range is
    only ever taken by a listener. Falls back to port 0 when the range leaves no room.

    Example:
        >>> port = free_port()
        >>> 0 < port < 65536
        True
    """
    low, high = ephemeral_port_range()
    spans = [(lo, hi) for lo, hi in ((10000, low - 1), (high + 1, 65535)) if hi - lo >= 1000]
    rng = random.SystemRandom()
    for _ in range(attempts if spans else 0):
        lo, hi = rng.choices(spans, weights=[hi - lo + 1 for lo, hi in spans])[0]
        port = rng.randint(lo, hi)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def expand_slurm_nodelist(nodelist: str) -> list[str]:
    """Expand a SLURM host list such as ``"gpu[01-03,07],cpu5"`` into host names.

    Example:
        >>> expand_slurm_nodelist("node[01-02,5],login")
        ['node01', 'node02', 'node5', 'login']
    """
    hosts: list[str] = []
    for prefix, ranges, _, plain in re.findall(r"([^,\[]*)\[([^\]]*)\](,|$)|([^,\[\]]+)", nodelist):
        if plain:
            hosts.append(plain)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise ValueError(f"cannot parse SLURM node list {nodelist!r}: bad range {part!r}")
            for number in range(int(lo), int(hi or lo) + 1):
                hosts.append(f"{prefix}{number:0{len(lo)}d}")
    if not hosts:
        raise ValueError(f"cannot parse SLURM node list {nodelist!r}: no host found")
    return hosts


def _slurm_tasks_on_node(tasks_per_node: str, node_id: int) -> int:
    """Number of tasks on node ``node_id`` from SLURM_TASKS_PER_NODE, e.g. ``"2(x3),1"``."""
    counts: list[int] = []
    for item in tasks_per_node.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", item.strip())
        if not match:
            raise ValueError(f"cannot parse SLURM_TASKS_PER_NODE {tasks_per_node!r}")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    if not 0 <= node_id < len(counts):
        raise ValueError(f"SLURM_NODEID {node_id} is outside SLURM_TASKS_PER_NODE {tasks_per_node!r}")
    return counts[node_id]


def _from_torchrun(env: Mapping[str, str]) -> LaunchSettings:
    missing = [name for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if name not in env]
    if missing:
        raise ValueError(f"torchrun-style launch is missing environment variable(s) {', '.join(missing)}")
    rank, world_size = _int_var(env, "RANK"), _int_var(env, "WORLD_SIZE")
    _check_rank(rank, world_size, "from RANK/WORLD_SIZE")
    local_rank = _int_var(env, "LOCAL_RANK") if "LOCAL_RANK" in env else 0
    local_size = _int_var(env, "LOCAL_WORLD_SIZE") if "LOCAL_WORLD_SIZE" in env else 1
    port = _check_port(_int_var(env, "MASTER_PORT"), "from MASTER_PORT")
    return LaunchSettings(rank, world_size, local_rank, local_size, env["MASTER_ADDR"], port, "torchrun")


def _from_slurm(env: Mapping[str, str]) -> LaunchSettings:
    rank, world_size = _int_var(env, "SLURM_PROCID"), _int_var(env, "SLURM_NTASKS")
    _check_rank(rank, world_size, "from SLURM_PROCID/SLURM_NTASKS")
    local_rank = _int_var(env, "SLURM_LOCALID") if "SLURM_LOCALID" in env else 0
    if "SLURM_NTASKS_PER_NODE" in env:
        local_size = _int_var(env, "SLURM_NTASKS_PER_NODE")
    elif "SLURM_TASKS_PER_NODE" in env:
        node_id = _int_var(env, "SLURM_NODEID") if "SLURM_NODEID" in env else 0
        local_size = _slurm_tasks_on_node(env["SLURM_TASKS_PER_NODE"], node_id)
    else:
        local_size = 1
    if "MASTER_ADDR" in env:
        addr = env["MASTER_ADDR"]
    else:
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
        addr = expand_slurm_nodelist(nodelist)[0] if nodelist else "127.0.0.1"
    if "MASTER_PORT" in env:
        port = _int_var(env, "MASTER_PORT")
    else:  # every task of a job derives the same port; jobs sharing a node get different ones
        job_id = _int_var(env, "SLURM_JOB_ID") if "SLURM_JOB_ID" in env else 0
        port = 15000 + job_id % 20000
    return LaunchSettings(rank, world_size, local_rank, local_size, addr, _check_port(port, "SLURM"), "slurm")


def _local_from_arguments(rank: int, world_size: int, env: Mapping[str, str]) -> tuple[int, int]:
    """Local rank and size for explicit ``rank``/``world_size``: the launcher's variables when set
    (LOCAL_RANK, LOCAL_WORLD_SIZE, SLURM_LOCALID, SLURM_NTASKS_PER_NODE), else consecutive ranks per node
    with one rank per visible GPU (all ranks on one node without GPUs). Never the global rank on node > 0."""
    if world_size == 1:
        return 0, 1
    if "LOCAL_WORLD_SIZE" in env:
        local_size = _int_var(env, "LOCAL_WORLD_SIZE")
    elif "SLURM_NTASKS_PER_NODE" in env:
        local_size = _int_var(env, "SLURM_NTASKS_PER_NODE")
    else:
        import torch  # only here: settings stay importable without initializing CUDA

        gpus = torch.cuda.device_count()
        local_size = min(world_size, gpus) if gpus else world_size
    local_size = max(1, local_size)
    if "LOCAL_RANK" in env:
        return _int_var(env, "LOCAL_RANK"), local_size
    if "SLURM_LOCALID" in env:
        return _int_var(env, "SLURM_LOCALID"), local_size
    return rank % local_size, local_size


def resolve_launch_settings(
    rank: int | None = None,
    world_size: int | None = None,
    addr: str | None = None,
    port: int | None = None,
    env: Mapping[str, str] | None = None,
) -> LaunchSettings:
    """Decide rank, world size and master address: arguments, else torchrun, else SLURM, else fake link.

    Example:
        >>> s = resolve_launch_settings(env={"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
        ...     "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"})
        >>> (s.rank, s.world_size, s.addr, s.source)
        (1, 2, '10.0.0.1', 'torchrun')
    """
    env = os.environ if env is None else env
    if (rank is None) != (world_size is None):
        raise ValueError(f"give rank and world_size together, got rank={rank} and world_size={world_size}")
    if rank is not None and world_size is not None:
        _check_rank(rank, world_size, "from arguments")
        addr = addr or env.get("MASTER_ADDR", "127.0.0.1")
        if port is None:
            port = int(env["MASTER_PORT"]) if "MASTER_PORT" in env else None
        if port is None:
            port = free_port() if world_size == 1 else DEFAULT_PORT
        local_rank, local_size = _local_from_arguments(rank, world_size, env)
        return LaunchSettings(
            rank, world_size, local_rank, local_size, addr, _check_port(port, "argument"), "arguments"
        )
    if "RANK" in env or "WORLD_SIZE" in env:
        settings = _from_torchrun(env)
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env and env["SLURM_NTASKS"] != "1":
        settings = _from_slurm(env)
    else:
        return FAKE_SETTINGS
    if addr is not None or port is not None:  # explicit address beats the launcher's
        settings = LaunchSettings(
            settings.rank,
            settings.world_size,
            settings.local_rank,
            settings.local_size,
            addr or settings.addr,
            _check_port(port or settings.port, "argument"),
            settings.source,
        )
    return settings


def resolve_timeout(timeout: float | None = None, env: Mapping[str, str] | None = None) -> float:
    """Collective timeout in seconds: the argument, else ``$DING_DIST_TIMEOUT``, else 30 minutes.

    Example:
        >>> resolve_timeout(env={"DING_DIST_TIMEOUT": "90"})
        90.0
    """
    if timeout is None:
        timeout = env_value(TIMEOUT_ENV, env)  # a bad value: one line naming it (ENV_VARS)
    if timeout is None:
        return float(DEFAULT_TIMEOUT_S)
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout}")
    return float(timeout)


DEFAULT_HEARTBEAT_S = 2.0
DEFAULT_HEARTBEAT_GRACE_S = 10.0


def _seconds_from(value: float | str | None, name: str, env: Mapping[str, str]) -> float | None:
    """``value`` as seconds, else the variable ``name`` of ``env`` (:func:`env_value`), else None; a finite number
    >= 0."""
    if value is None:
        return env_value(name, env)
    what = "argument"
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number of seconds, got {value!r}") from None
    if isinstance(value, bool) or not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"{what} must be a finite number of seconds >= 0, got {value!r}")
    return seconds


def resolve_heartbeat(
    period: float | None = None, grace: float | None = None, env: Mapping[str, str] | None = None
) -> tuple[float, float]:
    """Heartbeat ``(period, grace)`` in seconds: the arguments, else ``$DING_DIST_HEARTBEAT_S`` and
    ``$DING_DIST_HEARTBEAT_GRACE_S``, else 2 s and 10 s (at least 5 periods). Period 0 turns it off.

    A rank whose heartbeat has not changed for ``grace`` seconds counts as frozen; the grace must be at
    least twice the period, so one late beat is never taken for a freeze.

    Example:
        >>> resolve_heartbeat(env={"DING_DIST_HEARTBEAT_S": "0.5", "DING_DIST_HEARTBEAT_GRACE_S": "3"})
        (0.5, 3.0)
        >>> resolve_heartbeat(env={})
        (2.0, 10.0)
    """
    env = os.environ if env is None else env
    period_s = _seconds_from(period, HEARTBEAT_ENV, env)
    period_s = DEFAULT_HEARTBEAT_S if period_s is None else period_s
    grace_s = _seconds_from(grace, HEARTBEAT_GRACE_ENV, env)
    if grace_s is None:
        grace_s = max(DEFAULT_HEARTBEAT_GRACE_S, 5 * period_s)
    if period_s > 0 and grace_s < 2 * period_s:
        raise ValueError(
            f"the heartbeat grace ({grace_s:g} s, {HEARTBEAT_GRACE_ENV}) must be at least twice its period "
            f"({period_s:g} s, {HEARTBEAT_ENV}): a rank would count as frozen between two beats"
        )
    return period_s, grace_s


# ---- the DING_DIST_* environment variables: one table, checked before any work ------------------------------------
BACKEND_NAMES = ("gloo", "nccl", "mpi")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class _Why(ValueError):
    """A parser's reason, said before what the variable takes (e.g. nccl on a machine without CUDA)."""


def _seconds(positive: bool) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        value = float(raw)
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise ValueError(raw)
        return value

    return parse


def _count(raw: str) -> int:
    value = int(raw.strip())
    if value < 0:
        raise ValueError(raw)
    return value


def _flag(raw: str) -> bool:
    value = raw.strip().lower()
    if value not in _TRUE + _FALSE:
        raise ValueError(raw)
    return value in _TRUE


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw not in choices:
            raise ValueError(raw)
        return raw

    return parse


def _backend(raw: str) -> str:
    names = []
    for part in raw.split(","):
        device, _, name = part.strip().rpartition(":")
        if name not in BACKEND_NAMES or device not in ("", "cpu", "cuda"):
            raise ValueError(raw)
        names.append(name)
    if "nccl" in names:
        import torch  # only for a value that names nccl; device_count asks NVML first, which leaves fork safe

        if not (torch.backends.cuda.is_built() and torch.cuda.device_count() > 0):
            raise _Why("nccl needs CUDA GPUs and this machine has none")
    return raw.strip()


def _address(raw: str) -> str:
    host, sep, port = raw.strip().rpartition(":")
    if not (sep and host and port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(raw)
    return raw.strip()


@dataclass(frozen=True)
class EnvVar:
    """One environment variable ding_dist reads: its ``name``, what it ``takes``, what it means, its parser (the
    raw string to the value; ``ValueError`` when bad) and who sets it: ``"you"``, or ``"ding-dist"`` for those a
    launcher hands the processes it starts.

    Example:
        >>> ENV_VARS[0].name, ENV_VARS[0].takes
        ('DING_DIST_TIMEOUT', 'a number of seconds > 0')
    """

    name: str
    takes: str
    meaning: str
    parse: Callable[[str], Any]
    set_by: str = "you"


_BOOL = "1 or 0 (or true/false, yes/no, on/off)"
#: Every ``DING_DIST_*`` variable ding_dist reads (docs/reliability.md, "Environment variables", lists them).
ENV_VARS: tuple[EnvVar, ...] = (
    EnvVar(TIMEOUT_ENV, "a number of seconds > 0", "how long every collective waits on a peer before it fails "
           "(default 1800; `ding-dist train --timeout` sets it)", _seconds(positive=True)),
    EnvVar(BACKEND_ENV, "gloo, nccl (with CUDA GPUs), mpi, or a per-device list such as cpu:gloo,cuda:nccl",
           "the process group's backend when `dist_init` is given none (default: nccl when every rank of the node "
           "has a GPU of its own, else gloo)", _backend),
    EnvVar(RETRIES_ENV, "an integer >= 0", "how often a tcp:// rendezvous that fails fast is retried, with backoff "
           "(default 2)", _count),
    EnvVar(DEBUG_ENV, _BOOL, "check every collective across ranks before it runs (`--debug` sets it; slower)", _flag),
    EnvVar(TRACK_ENV, _BOOL, "log the run to Weights & Biases (`--track` sets it)", _flag),
    EnvVar(HEARTBEAT_ENV, "a number of seconds >= 0 (0 turns the heartbeat off)", "how often every rank beats "
           "(default 2)", _seconds(positive=False)),
    EnvVar(HEARTBEAT_GRACE_ENV, f"a number of seconds >= 0, at least twice {HEARTBEAT_ENV}", "how long a rank may "
           "stay silent before it counts as frozen and is killed (default 10, and at least 5 periods)",
           _seconds(positive=False)),
    EnvVar(START_METHOD_ENV, "'fork' or 'subprocess'", "how `ding-dist train --nproc N` starts its local ranks "
           "(default: fork with a CPU-only torch, else subprocess)", _choice("fork", "subprocess")),
    EnvVar(HEARTBEAT_STORE_ENV, "host:port", "the store a launcher's heartbeat watch serves", _address, "ding-dist"),
    EnvVar(STARTUP_GRACE_ENV, "a number of seconds >= 0", "the heartbeat grace of a rank still starting",
           _seconds(positive=False), "ding-dist"),
    EnvVar(OMP_DEFAULTED_ENV, "0 or 1", "OMP_NUM_THREADS was set by the launcher, not by you", _choice("0", "1"),
           "ding-dist"),
    EnvVar(DING_REPORTED_ENV, "a report's key", "the DI-engine translation report the job printed (not again in "
           "its ranks)", str, "ding-dist"),
    EnvVar(ENV_CHECKED_ENV, "1", "the job's environment was checked and its unknown DING_DIST_ names reported (not "
           "again in its ranks)", _choice("1"), "ding-dist"),
)  # fmt: skip
_BY_NAME = {var.name: var for var in ENV_VARS}


def env_value(name: str, env: Mapping[str, str] | None = None) -> Any:
    """The variable ``name`` of :data:`ENV_VARS` in ``env`` (default ``os.environ``), parsed; None when it is unset
    or empty. A bad value is a ``ValueError`` of one line naming the variable, its value and what it takes.

    Example:
        >>> env_value("DING_DIST_TIMEOUT", {"DING_DIST_TIMEOUT": "90"}), env_value("DING_DIST_TIMEOUT", {})
        (90.0, None)
        >>> env_value("DING_DIST_TIMEOUT", {"DING_DIST_TIMEOUT": "-5"})
        Traceback (most recent call last):
        ...
        ValueError: DING_DIST_TIMEOUT='-5': expected a number of seconds > 0
    """
    var = _BY_NAME[name]
    raw = (os.environ if env is None else env).get(name, "")
    if raw == "":
        return None
    try:
        return var.parse(raw)
    except ValueError as e:
        why = f"{e}; " if isinstance(e, _Why) else ""
        raise ValueError(f"{name}={raw!r}: {why}expected {var.takes}") from None


def check_env_values(env: Mapping[str, str] | None = None) -> None:
    """Check every variable of :data:`ENV_VARS` set in ``env`` (default ``os.environ``), and the heartbeat's grace
    against its period: one ``ValueError`` line naming each bad one. ``ding-dist`` and ``dist_init`` call it before
    any work.

    Example:
        >>> check_env_values({"DING_DIST_TIMEOUT": "abc", "DING_DIST_INIT_RETRIES": "-1"})
        Traceback (most recent call last):
        ...
        ValueError: DING_DIST_TIMEOUT='abc': expected a number of seconds > 0; DING_DIST_INIT_RETRIES='-1': ...
    """
    env = os.environ if env is None else env
    errors = []
    for var in ENV_VARS:
        try:
            env_value(var.name, env)
        except ValueError as e:
            errors.append(str(e))
    if not errors:
        try:
            resolve_heartbeat(env=env)
        except ValueError as e:
            errors.append(str(e))
    if errors:
        raise ValueError("; ".join(errors))


def unknown_env_vars(env: Mapping[str, str] | None = None) -> list[tuple[str, str | None]]:
    """``(name, the closest name ding_dist reads, or None)`` for each ``DING_DIST_*`` name in ``env`` (default
    ``os.environ``) that is not in :data:`ENV_VARS`: a typo ding_dist would otherwise ignore without a word.

    Example:
        >>> unknown_env_vars({"DING_DIST_TIMOUT": "5", "DING_DIST_DEBUG": "1", "HOME": "/root"})
        [('DING_DIST_TIMOUT', 'DING_DIST_TIMEOUT')]
    """
    env = os.environ if env is None else env
    known = {name.removeprefix(ENV_PREFIX): name for name in _BY_NAME}  # compared without the prefix they share
    names = sorted(n for n in env if n.startswith(ENV_PREFIX) and n not in _BY_NAME)
    close = {n: difflib.get_close_matches(n.removeprefix(ENV_PREFIX), list(known), n=1, cutoff=0.6) for n in names}
    return [(n, known[close[n][0]] if close[n] else None) for n in names]


def warn_unknown_env(env: Mapping[str, str] | None = None, prog: str = "ding_dist", stream: TextIO | None = None
                     ) -> list[str]:  # fmt: skip
    """Write one warning line to ``stream`` (default stderr) for each unknown ``DING_DIST_*`` name in ``env``
    (:func:`unknown_env_vars`), naming the closest known one; the lines written. Its callers say it once per job:
    ``ding-dist`` in the process the user started (its ranks inherit ``DING_DIST_ENV_CHECKED``), ``dist_init`` on
    rank 0 of a job that no ``ding-dist`` checked.

    Example:
        >>> warn_unknown_env({"DING_DIST_DEBG": "1"}, stream=sys.stdout)
        ding_dist: warning: unknown variable DING_DIST_DEBG (ignored); did you mean DING_DIST_DEBUG?
        ['ding_dist: warning: unknown variable DING_DIST_DEBG (ignored); did you mean DING_DIST_DEBUG?']
    """
    users = ", ".join(var.name for var in ENV_VARS if var.set_by == "you")
    lines = [
        f"{prog}: warning: unknown variable {name} (ignored); "
        + (f"did you mean {close}?" if close else f"ding_dist reads {users}")
        for name, close in unknown_env_vars(env)
    ]
    if lines:
        stream = sys.stderr if stream is None else stream
        stream.write("".join(f"{line}\n" for line in lines))
        stream.flush()
    return lines
