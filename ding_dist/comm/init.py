"""Start and stop the process group: ``dist_init``, ``dist_finalize``, ``@dist_mode``, ``DistContext``."""

from __future__ import annotations

import atexit
import functools
import logging
import os
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from .devices import clear_cache as _clear_device_cache
from .devices import cuda_only, rank_cuda_index
from .link import clear_host_groups, current_link, lacks_host_backend, register_host_group
from .settings import (
    BACKEND_ENV,
    BACKEND_NAMES,
    ENV_CHECKED_ENV,
    FAKE_SETTINGS,
    RETRIES_ENV,
    LaunchSettings,
    check_env_values,
    env_value,
    local_rank,
    local_size,
    resolve_launch_settings,
    resolve_timeout,
    set_running_settings,
    warn_unknown_env,
)

logger = logging.getLogger(__name__)

_BACKENDS = BACKEND_NAMES
_finalizers: list[Callable[[], None]] = []  # caches tied to the group (e.g. subgroups), cleared on finalize

F = TypeVar("F", bound=Callable[..., Any])
_exit_hook: list[bool] = []  # whether dist_finalize is registered to run at interpreter exit


def on_finalize(callback: Callable[[], None]) -> None:
    """Register ``callback`` to run when the process group is destroyed (used for group caches)."""
    _finalizers.append(callback)


def _backend_parts(backend: str) -> list[tuple[str | None, str]]:
    """``'gloo'`` -> [(None, 'gloo')]; ``'cpu:gloo,cuda:nccl'`` -> [('cpu', 'gloo'), ('cuda', 'nccl')]."""
    parts = []
    for part in backend.split(","):
        device, _, name = part.strip().rpartition(":")
        parts.append((device or None, name))
    return parts


def _pick_backend(backend: str | None) -> str:
    """Validate ``backend``: a name (``gloo``, ``nccl``, ``mpi``), a per-device list such as
    ``'cpu:gloo,cuda:nccl'`` (host tensors over gloo, GPU tensors over nccl) or ``None`` (nccl with CUDA, else gloo)."""
    if backend is None:
        return "nccl" if torch.cuda.is_available() else "gloo"
    expected = (
        f"one of {list(_BACKENDS)}, a per-device list such as 'cpu:gloo,cuda:nccl', or None (auto), got {backend!r}"
    )
    if not isinstance(backend, str) or not backend.strip():
        raise ValueError(f"backend must be {expected}")
    for device, name in _backend_parts(backend):
        if name not in _BACKENDS or device not in (None, "cpu", "cuda"):
            raise ValueError(f"backend must be {expected}")
        if name == "nccl" and not torch.cuda.is_available():
            raise RuntimeError(
                f"backend {backend!r} needs CUDA GPUs for nccl and this machine has none; use backend='gloo'"
            )
    return backend


def _auto_backend(settings: LaunchSettings) -> str:
    """nccl when every rank of the node can have a GPU of its own, else gloo (NCCL refuses two ranks on one GPU)."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus and settings.local_size > gpus:
        if settings.rank == 0:
            logger.warning(
                "ding_dist: %d ranks per node but %d visible GPU(s): NCCL needs one GPU per rank, so the backend "
                "is gloo (set %s=nccl to insist, or policy.device=cuda to keep the networks on the GPU over gloo)",
                settings.local_size,
                gpus,
                BACKEND_ENV,
            )
        return "gloo"
    return "nccl" if gpus else "gloo"


def _check_same(name: str, asked: Any, running: Any) -> None:
    if asked is not None and asked != running:
        raise RuntimeError(
            f"dist_init: a process group is already running with {name}={running!r}, "
            f"cannot re-initialize with {name}={asked!r}; call dist_finalize() first"
        )


def dist_init(
    backend: str | None = None,
    addr: str | None = None,
    port: int | None = None,
    rank: int | None = None,
    world_size: int | None = None,
    timeout: float | None = None,
) -> tuple[int, int]:
    """Initialize the process group and return ``(rank, world_size)``.

    Rank and world size come from the arguments, else torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,
    MASTER_ADDR, MASTER_PORT, ...), else SLURM's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, the node
    list), else no process group is made and every helper runs on the fake link (a world of one).
    ``backend=None`` takes ``$DING_DIST_BACKEND`` if set, else nccl when each rank of the node can have a GPU
    of its own, else gloo (with a warning when GPUs exist but are fewer than the ranks per node); with nccl
    a backend that moves CUDA tensors only (nccl, ``cuda:gloo``) sets the CUDA device to
    :func:`~ding_dist.comm.devices.rank_cuda_index`; under a mixed one (``cpu:gloo,cuda:nccl``) CUDA is left
    alone until the rank builds its networks on a GPU (CPU actors never touch it).
    ``timeout`` (seconds) defaults to ``$DING_DIST_TIMEOUT`` or 30 minutes. Calling it again while a group
    runs is a no-op returning the running ``(rank, world_size)``; asking for different settings is an error.
    A tcp:// rendezvous that fails fast (e.g. a port still held by a previous run) is retried with backoff
    (1 s, 2 s, ...; ``$DING_DIST_INIT_RETRIES`` times, default 2); under torchrun the elastic agent owns the
    rendezvous and restarts the workers itself (``--max-restarts``).

    Example:
        >>> dist_init()            # plain `python script.py`: the fake link
        (0, 1)
        >>> dist_finalize()
    """
    if current_link().is_fake is False:
        running = dist.get_rank(), dist.get_world_size()
        _check_same("rank", rank, running[0])
        _check_same("world_size", world_size, running[1])
        _check_same("backend", backend, str(dist.get_backend()))
        logger.debug("dist_init: process group already running as rank %d of %d", *running)
        return running
    check_env_values()  # every DING_DIST_* variable, before any work: a bad one is one line naming it
    timeout_s = resolve_timeout(timeout)
    settings = resolve_launch_settings(rank=rank, world_size=world_size, addr=addr, port=port)
    if settings.rank == 0 and ENV_CHECKED_ENV not in os.environ:  # ding-dist said it in the process it started
        warn_unknown_env()
    if settings.is_fake:
        if backend is not None:
            _pick_backend(backend)  # still reject a bad name
        logger.info("ding_dist: rank 0 of 1, fake link (no launcher settings found: a single process)")
        return 0, 1
    backend = _pick_backend(backend or env_value(BACKEND_ENV) or _auto_backend(settings))
    device = "cpu"
    if cuda_only(backend) and torch.cuda.is_available():  # every rank of this world computes on its GPU
        index = rank_cuda_index(settings.local_rank)
        torch.cuda.set_device(index)
        device = f"cuda:{index}"
    init_method = "env://" if settings.source == "torchrun" else f"tcp://{settings.addr}:{settings.port}"
    _init_with_retries(backend, init_method, settings, timeout_s)
    if lacks_host_backend(backend):  # cuda:gloo: host-staged point-to-point travels on a gloo twin of the world
        register_host_group(None, dist.new_group(backend="gloo"))
    set_running_settings(settings)
    if not _exit_hook:  # a script that ends without dist_finalize: its threads stop and the group goes before
        atexit.register(_finalize_at_exit)  # torch's own teardown (a live gloo group there can abort the process)
        _exit_hook.append(True)
    logger.info(
        "ding_dist: rank %d of %d (local %d of %d), backend %s, device %s, settings from %s (%s:%d), timeout %gs",
        settings.rank,
        settings.world_size,
        settings.local_rank,
        settings.local_size,
        backend,
        device,
        settings.source,
        settings.addr,
        settings.port,
        timeout_s,
    )
    return settings.rank, settings.world_size


def _init_retries() -> int:
    retries = env_value(RETRIES_ENV)
    return 2 if retries is None else retries


def _init_with_retries(backend: str, init_method: str, settings: LaunchSettings, timeout_s: float) -> None:
    """``init_process_group``, retried with backoff when our tcp:// rendezvous fails fast (a port still held
    after a restart); an attempt that used up the timeout is not retried."""
    retries = _init_retries()
    for attempt in range(retries + 1):
        start = time.monotonic()
        try:
            dist.init_process_group(
                backend,
                init_method=init_method,
                rank=settings.rank,
                world_size=settings.world_size,
                timeout=timedelta(seconds=timeout_s),
            )
            return
        except (RuntimeError, ValueError, OSError) as exc:  # torch's DistError subclasses RuntimeError
            if dist.is_initialized():
                dist.destroy_process_group()
            # Retry only our own tcp:// rendezvous: under torchrun the agent owns the store (and restarts
            # the workers itself), and a retry there could meet keys of the failed attempt.
            retryable = init_method.startswith("tcp://") and time.monotonic() - start < timeout_s / 2
            if attempt < retries and retryable:
                delay = 2.0**attempt
                logger.warning(
                    "rank %d: process-group rendezvous failed (%s); retry %d of %d in %.0f s",
                    settings.rank,
                    exc,
                    attempt + 1,
                    retries,
                    delay,
                )
                time.sleep(delay)
                continue
            role = "listen on" if settings.rank == 0 else "reach the master at"
            raise ConnectionError(
                f"rank {settings.rank} of {settings.world_size} could not {role} {settings.addr}:{settings.port} "
                f"within {timeout_s:g} s (settings from {settings.source}; backend {backend}; "
                f"{attempt + 1} attempt(s)): {exc}"
            ) from exc


#: seconds the exiting interpreter lets go of the GIL after the group is gone (see ``_finalize_at_exit``)
_EXIT_GIL_GAP_S = 0.05


def _finalize_at_exit() -> None:
    try:
        dist_finalize()
    except Exception as exc:  # noqa: BLE001 - exiting: report, do not replace the exit status
        logger.warning("ding_dist: destroying the process group at exit failed: %s", exc)
    # A gloo worker thread that frees a finished work frees its tensors, and that takes the GIL. Should it get the
    # GIL only once Python's finalization has begun, Python ends that thread and the process aborts ('terminate
    # called without an active exception'). A short sleep here lets such a thread finish first.
    time.sleep(_EXIT_GIL_GAP_S)


def dist_finalize() -> None:
    """Destroy the process group and the caches tied to it; safe to call when nothing was initialized.

    Example:
        >>> dist_finalize()
    """
    _clear_device_cache()
    clear_host_groups()
    for callback in _finalizers:
        callback()
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    set_running_settings(FAKE_SETTINGS)


def get_rank(group: Any = None) -> int:
    """This process's rank in ``group`` (the world by default); 0 outside a process group.

    Example:
        >>> get_rank()
        0
    """
    return current_link(group).rank(group)


def get_world_size(group: Any = None) -> int:
    """Number of processes in ``group`` (the world by default); 1 outside a process group.

    Example:
        >>> get_world_size()
        1
    """
    return current_link(group).world_size(group)


def get_local_rank() -> int:
    """This process's rank on its node; 0 outside a process group.

    Example:
        >>> get_local_rank()
        0
    """
    return local_rank(not current_link().is_fake)


def get_local_size() -> int:
    """Number of processes on this node; 1 outside a process group.

    Example:
        >>> get_local_size()
        1
    """
    return local_size(not current_link().is_fake)


def is_fake() -> bool:
    """True when no process group runs and every helper acts as a world of one.

    Example:
        >>> is_fake()
        True
    """
    return current_link().is_fake


class DistContext:
    """Context manager: ``dist_init`` on entry, ``dist_finalize`` on exit (even on an exception).

    It only finalizes a group it started itself. ``DDPContext`` is the same class (DI-engine's name).

    Example:
        >>> with DistContext() as ctx:
        ...     print(ctx.rank, ctx.world_size)
        0 1
    """

    def __init__(self, **init_kwargs: Any) -> None:
        self._init_kwargs = init_kwargs
        self._started = False
        self.rank, self.world_size = 0, 1

    def __enter__(self) -> DistContext:
        self._started = is_fake()
        self.rank, self.world_size = dist_init(**self._init_kwargs)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._started:
            dist_finalize()


DDPContext = DistContext


def dist_mode(func: F | None = None, **init_kwargs: Any) -> Any:
    """Decorator: initialize, run ``func``, finalize even if it raises, and return ``func``'s value.

    Use bare (``@dist_mode``) or with ``dist_init`` arguments (``@dist_mode(backend="gloo")``).

    Example:
        >>> @dist_mode
        ... def main():
        ...     return get_world_size()
        >>> main()
        1
    """
    if func is None:
        return functools.partial(dist_mode, **init_kwargs)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with DistContext(**init_kwargs):
            return func(*args, **kwargs)

    return wrapper
