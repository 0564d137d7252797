"""What the checks of ``benchmarks/gpu/gpu_check.py`` share: :class:`Ctx`, the sizes, the row helpers, the test
models, and the helpers that more than one check module uses (the pipeline's device log, a run's result,
``rank_cli_train``)."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

import ding_dist as dd

REPO = Path(__file__).resolve().parents[2]
CONFIGS = {
    "dqn": REPO / "configs" / "cartpole_dqn_config.py",
    "ppo": REPO / "configs" / "cartpole_ppo_config.py",
    "impala": REPO / "configs" / "cartpole_impala_config.py",
    "sac": REPO / "configs" / "pendulum_sac_config.py",
}

# Sizes of the full run (one GPU, <= 8 minutes for everything with the wheel install) and of --quick (CPU CI, tiny).
SIZES: dict[str, dict[str, int]] = {
    "full": dict(
        zoo_steps=1024,
        dqn_steps=4096,
        ppo_steps=4096,
        sac_steps=3072,
        impala_steps=4096,
        auto_steps=2048,
        cli_steps=2048,
        al_steps=4096,
        ddp_steps=20,
        d_repeats=5,
        d_warmup=10,
        d_updates_conv_gpu=100,
        d_updates_conv_cpu=5,
        d_updates_mlp_gpu=200,
        d_updates_mlp_cpu=100,
        e_steps=24,
        e_rounds=4,
        e_warmup=3,
        e_batch=32,
        e_mlp_width=408,
        e_mlp_layers=30,
        sync_steps=20,
        image_side=84,
        image_hidden=512,
        image_dqn_updates=8,
        image_steps=2048,
        image_envs=4,
        image_batch=32,
        launch_timeout=140,
    ),
    "quick": dict(
        zoo_steps=128,
        dqn_steps=512,
        ppo_steps=512,
        sac_steps=256,
        impala_steps=512,
        auto_steps=256,
        cli_steps=256,
        al_steps=512,
        ddp_steps=4,
        d_repeats=3,
        d_warmup=1,
        d_updates_conv_gpu=3,
        d_updates_conv_cpu=2,
        d_updates_mlp_gpu=10,
        d_updates_mlp_cpu=10,
        e_steps=4,
        e_rounds=2,
        e_warmup=1,
        e_batch=4,
        e_mlp_width=64,
        e_mlp_layers=4,
        sync_steps=6,
        image_side=36,
        image_hidden=32,
        image_dqn_updates=2,
        image_steps=64,
        image_envs=2,
        image_batch=8,
        launch_timeout=120,
    ),
}

# --quick: fewer updates and evaluation episodes, so a CPU-only CI run stays short; same code paths.
_QUICK_EVAL = ["env.evaluator_env_num=2", "env.n_evaluator_episode=2"]
QUICK_OVERRIDES = {
    "dqn": ["policy.learn.learning_starts=128", "policy.learn.update_per_collect=8", *_QUICK_EVAL],
    "ppo": ["policy.learn.epoch_per_collect=2", *_QUICK_EVAL],
    "impala": ["policy.learn.epoch_per_collect=2", *_QUICK_EVAL],
    "sac": [
        "policy.learn.learning_starts=128",
        "policy.learn.update_per_collect=8",
        "env.collector_env_num=2",
        *_QUICK_EVAL,
    ],
}


@dataclasses.dataclass
class Ctx:
    """What every check needs: the device under test (``"cuda"`` or ``"cpu"``), sizes and a scratch folder."""

    device: str
    quick: bool
    workdir: str
    cpu_threads: int = 1
    nvml_check: str | None = None  # the caller's PYTORCH_NVML_BASED_CUDA_CHECK, restored in each check

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    def size(self, key: str) -> int:
        return SIZES["quick" if self.quick else "full"][key]

    def overrides(self, algo: str) -> list[str]:
        return list(QUICK_OVERRIDES[algo]) if self.quick else []

    def scratch(self, name: str) -> str:
        path = os.path.join(self.workdir, name)
        os.makedirs(path, exist_ok=True)
        return path


def row(check_id: str, name: str, figure: str, status: str = "ok") -> dict[str, str]:
    return {"id": check_id, "name": name, "status": status, "figure": figure}


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (a LaunchError's first line names the rank and its error)."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    if isinstance(exc, dd.comm.LaunchError):
        # "rank 0 raised AssertionError: ..." is the useful part; the traceback follows on later lines
        return first
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _rank_device(device: str) -> torch.device:
    """This rank's device for ``device`` (``"cuda"``: its GPU, as the library decides it)."""
    if device == "cuda":
        index = dd.comm.rank_cuda_index()
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device("cpu")


def _to_host(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, dict):
        return {k: _to_host(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_to_host(v) for v in x)
    return x


def flat(params) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).clone() for p in params])


def small_mlp(seed: int) -> nn.Module:
    """The sync tests' MLP (6-32-32-3, tanh)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 3))


# ------------------------------------------------------------------------------------------------ models
class NatureQ(nn.Module):
    """The Nature-DQN Q-network on 4x84x84 uint8 frames, scaled by 1/255 inside forward."""

    def __init__(self, actions: int = 6) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(4, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(3136, 512),
            nn.ReLU(),
            nn.Linear(512, actions),
        )

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.net(frames.float() / 255.0)


def wide_mlp(width: int, layers: int) -> nn.Module:
    """benchmarks/bench_sync.py's MLP: ``layers`` Linear width x width (30 x 408: 5.0M parameters)."""
    torch.manual_seed(0)
    mods: list[nn.Module] = []
    for i in range(layers):
        mods.append(nn.Linear(width, width))
        if i < layers - 1:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


# ------------------------------------------------------------ helpers of more than one check module
class _PolicyDeviceLog(logging.Handler):
    """Collects the device of the pipeline's start line ("... policy on cuda:0, exp dir ...")."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.devices: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "policy on" in str(record.msg) and isinstance(record.args, tuple):
            self.devices += [str(a) for a in record.args if isinstance(a, torch.device)]


@contextmanager
def policy_device_log() -> Iterator[_PolicyDeviceLog]:
    log = logging.getLogger("ding_dist.entry")
    handler, level = _PolicyDeviceLog(), log.level
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def _expected_device(spec: str) -> str:
    if spec == "auto":  # one process: the GPU whenever there is one
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    return "cuda:0" if spec == "cuda" else "cpu"


def _check_result(result: dict[str, Any], steps: int, world: int) -> str:
    ret = result.get("last_eval_return")
    assert ret is not None and math.isfinite(ret), f"last_eval_return is {ret!r}"
    reached = result.get("stopped_by") == "stop_value"  # e.g. SAC on Pendulum reaches -200 after ~2.5k steps
    if not reached:
        got = result["env_steps"]
        assert got >= steps, f"stopped at {got} env steps ({result.get('stopped_by')}), asked for {steps}"
    assert result["train_iters"] > 0, "no policy update was applied"
    assert result["world_size"] == world, f"world_size {result['world_size']}, expected {world}"
    figure = f"last_eval_return {ret:.1f} after {result['env_steps']} env steps, {result['train_iters']} updates"
    return figure + (" (reached the config's stop_value)" if reached else "")


def _read_result(exp_dir: str) -> dict[str, Any]:
    path = Path(exp_dir) / "result.json"
    assert path.exists(), f"{path} was not written"
    return json.loads(path.read_text())


def rank_cli_train(argv: list[str]) -> dict[str, Any]:
    """``ding-dist train`` (the CLI's ``main``) as one rank of the launch's group; also whether this process
    started CUDA (an actor on the CPU must not)."""
    from ding_dist.entry.cli import main

    with policy_device_log() as seen:
        rc = main(argv)
    return {"rc": rc, "devices": seen.devices, "cuda_started": torch.cuda.is_initialized()}


def _no_cuda_reason() -> str:
    return "no CUDA" if not torch.cuda.is_available() else "--device cpu"
