"""Module-level functions run on every rank by the multi-rank sync tests (via ``ding_dist.comm.launch``).

Each returns small CPU tensors / numbers; the assertions live in the test files.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ding_dist import comm
from ding_dist.sync import Algorithm, QAdamOptimizer, distribute, register_algorithm, sync_gradients
from ding_dist.sync.algorithms import available_algorithms


def mlp(seed: int, n_in: int = 6, hidden: int = 32, n_out: int = 3) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(n_in, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, n_out)
    )


def flat(params) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).clone() for p in params])


def flat_grads(params) -> torch.Tensor:
    return torch.cat([(p.grad if p.grad is not None else torch.full_like(p, float("nan"))).reshape(-1) for p in params])


def _optimizer(name: str, params):
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9)
    return torch.optim.Adam(params, lr=1e-2)


def train_vs_ddp(algorithm: str, opt_name: str, bucket_size_mb: float, delay_reduce: bool, steps: int = 20, **options):
    """Train our engine and torch DDP side by side on the same per-rank data; return both parameter vectors."""
    rank = comm.get_rank()
    base = mlp(seed=rank)  # different init per rank: the broadcast from rank 0 must fix it
    ddp = torch.nn.parallel.DistributedDataParallel(copy.deepcopy(base))
    opt_ddp = _optimizer(opt_name, ddp.parameters())
    model, opt = distribute(
        base,
        _optimizer(opt_name, base.parameters()),
        algorithm,
        bucket_size_mb=bucket_size_mb,
        delay_reduce=delay_reduce,
    )
    gen = torch.Generator().manual_seed(100 + rank)
    model.reset_comm_stats()
    for _ in range(steps):
        x, y = torch.randn(16, 6, generator=gen), torch.randn(16, 3, generator=gen)
        for m, o in ((model, opt), (ddp, opt_ddp)):
            o.zero_grad()
            ((m(x) - y) ** 2).mean().backward()
            o.step()
    return {
        "ours": flat(model.parameters()),
        "ddp": flat(ddp.module.parameters()),
        "stats": model.comm_stats(),
        "n_buckets": len(model.buckets),
    }


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.trunk = nn.Linear(4, 8)
        self.head_a = nn.Linear(8, 2)
        self.head_b = nn.Linear(8, 2)
        self.head_never = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor, head: str) -> torch.Tensor:
        return getattr(self, head)(torch.relu(self.trunk(x)))


def unused_heads(algorithm: str, bucket_size_mb: float, **options):
    """Rank r trains head_a if r is even else head_b; head_never is used by nobody."""
    rank = comm.get_rank()
    net = TwoHeads()
    local = copy.deepcopy(net)
    model, _ = distribute(net, None, algorithm, bucket_size_mb=bucket_size_mb, **options)
    head = "head_a" if rank % 2 == 0 else "head_b"
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(rank))
    model(x, head).pow(2).sum().backward()
    local(x, head).pow(2).sum().backward()
    grads = {n: (p.grad.clone() if p.grad is not None else None) for n, p in model.named_parameters()}
    local_grads = {n: (p.grad.clone() if p.grad is not None else None) for n, p in local.named_parameters()}
    # A second step in which every rank uses both heads: the views must still work.
    model.zero_grad(set_to_none=False)
    (model(x, "head_a").sum() + model(x, "head_b").sum()).backward()
    second = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    local.zero_grad(set_to_none=False)
    (local(x, "head_a").sum() + local(x, "head_b").sum()).backward()
    second_local = {n: p.grad.clone() for n, p in local.named_parameters() if p.grad is not None}
    return {"head": head, "grads": grads, "local": local_grads, "second": second, "second_local": second_local}


class ActorCritic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.actor = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2))
        self.critic = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 1))

    def q(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        return self.critic(torch.cat([obs, act], dim=1))


def _sac_like_step(model, obs, act, target):
    critic_loss = (model.q(obs, act) - target).pow(2).mean()
    critic_loss.backward()
    critic_grads = [p.grad.clone() for p in model.critic.parameters()]
    for p in model.critic.parameters():
        p.requires_grad_(False)
    actor_loss = -model.q(obs, torch.tanh(model.actor(obs))).mean()
    actor_loss.backward()
    for p in model.critic.parameters():
        p.requires_grad_(True)
    after = [p.grad.clone() for p in model.critic.parameters()]
    return critic_grads, after, [p.grad.clone() for p in model.actor.parameters()]


def sac_like(bucket_size_mb: float, set_to_none: bool):
    """Critic backward, then actor backward with the critic frozen; twice, accumulating nothing."""
    rank = comm.get_rank()
    net = ActorCritic()
    local = copy.deepcopy(net)
    model, _ = distribute(net, None, "gradient_allreduce", bucket_size_mb=bucket_size_mb)
    gen = torch.Generator().manual_seed(10 + rank)
    out = []
    for _ in range(2):
        obs, act, target = (
            torch.randn(8, 3, generator=gen),
            torch.randn(8, 2, generator=gen),
            torch.randn(8, 1, generator=gen),
        )
        model.zero_grad(set_to_none=set_to_none)
        local.zero_grad(set_to_none=set_to_none)
        ours = _sac_like_step(model, obs, act, target)
        ref = _sac_like_step(local, obs, act, target)
        out.append({"ours": ours, "local": ref})
    return out


def accumulate(algorithm: str, bucket_size_mb: float):
    """Two backward passes before reading the gradient (gradient accumulation)."""
    rank = comm.get_rank()
    net = mlp(seed=3)
    local = copy.deepcopy(net)
    model, _ = distribute(net, None, algorithm, bucket_size_mb=bucket_size_mb)
    gen = torch.Generator().manual_seed(20 + rank)
    for _ in range(2):
        x = torch.randn(4, 6, generator=gen)
        model(x).pow(2).mean().backward()
        local(x).pow(2).mean().backward()
    return {"ours": flat_grads(model.parameters()), "local": flat_grads(local.parameters())}


def regression_loss(algorithm: str, steps: int = 60, opt_name: str = "adam", **options):
    """Train a small MLP regression with ``algorithm``; return the final full-data loss and parameters."""
    rank = comm.get_rank()
    gen = torch.Generator().manual_seed(7)
    x_all = torch.randn(512, 6, generator=gen)
    w_true = torch.randn(6, 3, generator=gen)
    y_all = torch.tanh(x_all @ w_true) + 0.05 * torch.randn(512, 3, generator=gen)
    net = mlp(seed=11)
    if opt_name == "qadam":
        opt = QAdamOptimizer(net.parameters(), lr=1e-2, warmup_steps=15)
    else:
        opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    model, opt = distribute(net, opt, algorithm, **options)
    world = comm.get_world_size()
    shard = torch.arange(rank, 512, world)
    batch_gen = torch.Generator().manual_seed(1000 + rank)
    for _ in range(steps):
        idx = shard[torch.randint(len(shard), (32,), generator=batch_gen)]
        opt.zero_grad()
        nn.functional.mse_loss(model(x_all[idx]), y_all[idx]).backward()
        opt.step()
    with torch.no_grad():
        loss = nn.functional.mse_loss(model(x_all), y_all).item()
    return {"loss": loss, "params": flat(model.parameters())}


def switch_mid_training():
    """Train, switch algorithms twice; params are averaged at each switch and ranks stay identical."""
    rank = comm.get_rank()
    net = mlp(seed=5)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    model, opt = distribute(net, opt, "gradient_allreduce")
    gen = torch.Generator().manual_seed(30 + rank)
    record = {}
    for phase, algorithm in enumerate(["bytegrad", "fp16", "gradient_allreduce"]):
        for _ in range(4):
            x, y = torch.randn(8, 6, generator=gen), torch.randn(8, 3, generator=gen)
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
        with torch.no_grad():  # make the ranks disagree on purpose: the switch must average them
            for p in model.parameters():
                p.add_(0.01 * (rank + 1))
        before = flat(model.parameters())
        model.switch_to(algorithm)
        record[phase] = {"before": before, "after": flat(model.parameters()), "algorithm": model.algorithm}
    return record


def bad_models():
    """Wrap models that differ across ranks; collect the error messages (every rank must raise)."""
    rank = comm.get_rank()
    errors = {}
    shape_net = nn.Sequential(nn.Linear(4, 8 if rank == 0 else 9), nn.Linear(8 if rank == 0 else 9, 2))
    count_net = nn.Sequential(*[nn.Linear(4, 4) for _ in range(2 if rank == 0 else 3)])
    for key, net in (("shape", shape_net), ("count", count_net)):
        try:
            distribute(net, None)
            errors[key] = None
        except ValueError as exc:
            errors[key] = str(exc)
    # The group still works afterwards.
    model, _ = distribute(mlp(seed=rank), None)
    return {"errors": errors, "params": flat(model.parameters())}


def functional_sync():
    """``sync_gradients`` against a per-parameter reference built from allgathered gradients."""
    rank, world = comm.get_rank(), comm.get_world_size()
    net = TwoHeads()
    head = "head_a" if rank % 2 == 0 else "head_b"
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(rank))
    net(x, head).pow(2).sum().backward()
    local = {n: (p.grad.clone() if p.grad is not None else None) for n, p in net.named_parameters()}
    gathered = comm.allgather_object(local)
    n_collectives = sync_gradients(net, bucket_size_mb=25)
    avg = {n: (p.grad.clone() if p.grad is not None else None) for n, p in net.named_parameters()}
    # op='sum' on a fresh backward
    net.zero_grad()
    net(x, head).pow(2).sum().backward()
    sync_gradients(list(net.parameters()), op="sum", bucket_size_mb=0.0005)
    summed = {n: (p.grad.clone() if p.grad is not None else None) for n, p in net.named_parameters()}
    return {"gathered": gathered, "avg": avg, "sum": summed, "n_collectives": n_collectives, "world": world}


def _weight_average_step(state, buckets) -> None:
    params = [p for b in buckets for p in b.params]
    with torch.no_grad():
        buf = torch.cat([p.reshape(-1) for p in params])
        state.link.allreduce(buf).wait()
        buf /= state.link.world_size
        offset = 0
        for p in params:
            p.copy_(buf[offset : offset + p.numel()].view_as(p))
            offset += p.numel()


class _WeightAvgState:
    __slots__ = ("link",)

    def __init__(self, link) -> None:
        self.link = link


def weight_averaging():
    """A test-only algorithm that keeps gradients local and averages weights after each step."""
    if "test_weight_avg" not in available_algorithms():
        register_algorithm(Algorithm("test_weight_avg", make_state=_WeightAvgState, step_hook=_weight_average_step))
    rank = comm.get_rank()
    net = mlp(seed=rank)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    model, opt = distribute(net, opt, "test_weight_avg")
    gen = torch.Generator().manual_seed(40 + rank)
    x, y = torch.randn(8, 6, generator=gen), torch.randn(8, 3, generator=gen)
    start = flat(model.parameters())
    opt.zero_grad()
    ((model(x) - y) ** 2).mean().backward()
    local_grad = flat_grads(model.parameters())
    opt.step()
    return {"start": start, "grad": local_grad, "after": flat(model.parameters())}


def frozen_at_wrap():
    """Parameters frozen when wrapped get hooks too: unfreezing them later synchronizes them."""
    rank = comm.get_rank()
    net = mlp(seed=9)
    for p in net[0].parameters():
        p.requires_grad_(False)
    local = copy.deepcopy(net)
    model, _ = distribute(net, None, bucket_size_mb=0.001)
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(50 + rank))
    model(x).sum().backward()
    local(x).sum().backward()
    first = {"ours": flat_grads(model.parameters()), "local": flat_grads(local.parameters())}
    for m in (model, local):
        m.zero_grad()
        for p in m[0].parameters():
            p.requires_grad_(True)
    model(x).sum().backward()
    local(x).sum().backward()
    return {"first": first, "second": {"ours": flat_grads(model.parameters()), "local": flat_grads(local.parameters())}}


TINY_BUCKET_MB = 0.002  # ~2 KB: the test MLP spreads over several buckets


def suite():
    """Everything the multi-rank tests check, in one launch per world size (process start-up is slow)."""
    out = {
        "ddp_sgd": train_vs_ddp("gradient_allreduce", "sgd", 25.0, False),
        "ddp_adam": train_vs_ddp("gradient_allreduce", "adam", 25.0, False),
        "ddp_adam_tiny": train_vs_ddp("gradient_allreduce", "adam", TINY_BUCKET_MB, False),
        "ddp_adam_delay": train_vs_ddp("gradient_allreduce", "adam", TINY_BUCKET_MB, True),
        "unused": unused_heads("gradient_allreduce", 25.0),
        "unused_tiny": unused_heads("gradient_allreduce", 0.0002),
        "unused_bf16": unused_heads("bf16", 25.0),
        "unused_bytegrad": unused_heads("bytegrad", 25.0),
        "unused_bytegrad_pieces": unused_heads("bytegrad", 25.0, piece_mb=0.0002),
        "unused_fp16_sg": unused_heads("fp16", 25.0, method="scatter_gather"),
        "sac": sac_like(25.0, set_to_none=True),
        "sac_tiny": sac_like(0.0005, set_to_none=False),
        "accumulate": accumulate("gradient_allreduce", TINY_BUCKET_MB),
        "accumulate_fp16": accumulate("fp16", 25.0),
        "switch": switch_mid_training(),
        "bad": bad_models(),
        "functional": functional_sync(),
        "weight_avg": weight_averaging(),
        "options": options_and_groups(),
        "frozen_at_wrap": frozen_at_wrap(),
    }
    for algorithm in ("fp16", "bf16", "bytegrad", "sg_allreduce"):
        out[f"ddp_{algorithm}"] = train_vs_ddp(algorithm, "adam", TINY_BUCKET_MB, False)
    out["ddp_fp16_sg"] = train_vs_ddp("fp16", "adam", TINY_BUCKET_MB, False, method="scatter_gather")
    out["ddp_bf16_sg"] = train_vs_ddp("bf16", "adam", TINY_BUCKET_MB, False, method="scatter_gather")
    out["ddp_bytegrad_pieces"] = train_vs_ddp("bytegrad", "adam", 25.0, False, piece_mb=0.002)
    out["loss"] = {
        name: regression_loss(algo, **opts)
        for name, algo, opts in (
            ("gradient_allreduce", "gradient_allreduce", {}),
            ("fp16", "fp16", {}),
            ("bf16", "bf16", {}),
            ("bytegrad", "bytegrad", {}),
            ("bytegrad_ef", "bytegrad", {"error_feedback": True}),
        )
    }
    out["loss"]["qadam"] = regression_loss("qadam", opt_name="qadam")
    out["loss"]["qadam_ref"] = regression_loss("gradient_allreduce", opt_name="qadam")
    return out


def options_and_groups():
    """Persia-style options inside a running group, and a subgroup of one rank (no communication)."""
    from ding_dist.sync import AlgorithmOption, DDPOption, get_default_distributed_option

    rank, world = comm.get_rank(), comm.get_world_size()
    ddp_model, _ = DDPOption(backend="gloo").convert2distributed_model(mlp(seed=rank), world, rank)
    default_backend = get_default_distributed_option().backend
    net = mlp(seed=rank)
    model, opt = AlgorithmOption("bytegrad", bucket_size_mb=0.001).convert(
        net, torch.optim.SGD(net.parameters(), lr=0.1)
    )
    start = flat(model.parameters())  # rank 0's, broadcast by the wrap
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(rank))
    model(x).sum().backward()
    grads = flat_grads(model.parameters())
    opt.step()  # the optimizer returned by convert steps the wrapped model's parameters
    alone, _ = distribute(mlp(seed=rank), None, group=comm.get_group(1))
    alone(x).sum().backward()
    return {
        "ddp_type": type(ddp_model).__name__,
        "ddp_params": flat(ddp_model.module.parameters()),
        "backend": default_backend,
        "algorithm": model.algorithm,
        "grads": grads,
        "start": start,
        "stepped": flat(model.parameters()),
        "alone_params": flat(alone.parameters()),
        "alone_stats": alone.comm_stats(),
    }
