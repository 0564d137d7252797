"""Code written against DI-engine's ``ding.utils.pytorch_ddp_dist_helper``, calling it the way DI-engine's own
learner, policies, collector, evaluator and DDP entry scripts do. The only change from DI-engine-style code
is the import line::

    from ding.utils import DDPContext, allreduce, ...                                  # DI-engine
    from ding_dist.compat.pytorch_ddp_dist_helper import DDPContext, allreduce, ...    # here

(DI-engine's log-reduce hook also moves each value to ``cuda:<rank>`` before its ``allreduce``; that CUDA
move is DI-engine's own code, not the helper's, so it is left out and this runs on CPU.)
"""

from __future__ import annotations

import numbers
from typing import Any

import torch
from easydict import EasyDict
from torch import nn

from ding_dist.compat.pytorch_ddp_dist_helper import (
    DDPContext,
    allreduce,
    allreduce_data,
    broadcast,
    broadcast_object_list,
    get_rank,
    get_world_size,
    to_ddp_config,
)


def init_multi_gpu_setting(model: nn.Module) -> None:
    """As a DI-engine policy with ``multi_gpu``: every rank starts from rank 0's parameters."""
    for _, param in model.state_dict().items():
        broadcast(param.data, 0)
    for _, param in model.named_parameters():
        param.grad = torch.zeros_like(param)


def sync_gradients(model: nn.Module) -> None:
    """As DI-engine's ``Policy.sync_gradients``: one ``allreduce`` (an average) per parameter gradient."""
    for _, param in model.named_parameters():
        if param.requires_grad:
            allreduce(param.grad.data)


def aggregate(data: Any) -> Any:
    """As DI-engine's log-reduce learner hook: average every logged number and tensor over the ranks."""
    if isinstance(data, dict):
        return {k: aggregate(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [aggregate(v) for v in data]
    if isinstance(data, torch.Tensor):
        new_data = data.clone().detach()
        allreduce(new_data)
        return new_data
    if isinstance(data, numbers.Real):
        new_data = torch.scalar_tensor(data).reshape([1])
        allreduce(new_data)
        return new_data.item()
    raise TypeError(f"invalid type in reduce: {type(data)}")


def collector_totals(collected_step: int, collected_episode: int, collected_duration: float) -> tuple:
    """As DI-engine's serial collectors: sum the per-rank counts."""
    if get_world_size() > 1:
        collected_step = allreduce_data(collected_step, "sum")
        collected_episode = allreduce_data(collected_episode, "sum")
        collected_duration = allreduce_data(float(collected_duration), "sum")
    return collected_step, collected_episode, collected_duration


def evaluator_share(stop_flag: bool, episode_info: Any) -> tuple:
    """As DI-engine's evaluator: rank 0 evaluates, the others receive its decision."""
    if get_world_size() > 1:
        objects = [stop_flag, episode_info]
        broadcast_object_list(objects, src=0)
        stop_flag, episode_info = objects
    return stop_flag, episode_info


def learner_loop(cfg: EasyDict, iterations: int) -> tuple[nn.Module, dict]:
    """A learner's loop with ``multi_gpu``: sync the initial weights, then sync every gradient."""
    torch.manual_seed(cfg.seed + 17 * get_rank())  # ranks start apart; init_multi_gpu_setting aligns them
    model = nn.Linear(4, 2)
    init_multi_gpu_setting(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.policy.learn.learning_rate)
    data = torch.Generator().manual_seed(100 + get_rank())
    log: dict = {}
    for _ in range(iterations):
        x = torch.randn(cfg.policy.learn.batch_size, 4, generator=data)
        loss = (model(x) - 1.0).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        sync_gradients(model)
        optimizer.step()
        log = aggregate({"total_loss": loss.item(), "count": torch.tensor([1.0])})
    return model, log


def ddp_entry(cfg: EasyDict, iterations: int = 5) -> dict:
    """As DI-engine's DDP config scripts: ``with DDPContext(): serial_pipeline(to_ddp_config(cfg))``."""
    with DDPContext():
        cfg = to_ddp_config(cfg)
        model, log = learner_loop(cfg, iterations)
        totals = collector_totals(cfg.policy.collect.n_sample, 2, 0.5 * (get_rank() + 1))
        shared = evaluator_share(get_rank() == 0, {"eval_episode_return": 195.0} if get_rank() == 0 else None)
        return {
            "rank": get_rank(),
            "world_size": get_world_size(),
            "batch_size": cfg.policy.learn.batch_size,
            "n_sample": cfg.policy.collect.n_sample,
            "weight": model.weight.detach().clone(),
            "bias": model.bias.detach().clone(),
            "log": log,
            "totals": totals,
            "shared": shared,
        }
