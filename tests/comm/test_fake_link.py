"""Every helper in a plain single process (no process group): a world of one."""

import operator
import pickle
import threading

import pytest
import torch

import ding_dist as dd


def test_rank_and_sizes_are_those_of_a_world_of_one():
    assert dd.is_fake()
    assert (dd.get_rank(), dd.get_world_size(), dd.get_local_rank(), dd.comm.get_local_size()) == (0, 1, 0, 1)


@pytest.mark.parametrize("op", ["sum", "avg", "max", "min", "product", torch.distributed.ReduceOp.SUM])
def test_allreduce_leaves_data_correct(op):
    t = torch.tensor([1.5, -2.0, 3.0])
    assert dd.allreduce(t, op=op) is None
    assert torch.equal(t, torch.tensor([1.5, -2.0, 3.0]))
    handle = dd.allreduce(t, op=op, async_op=True)
    assert handle.wait() is t and handle.is_completed()


def test_one_handle_completes_several_works_in_order():
    log: list = []

    class Work:  # what torch returns for an asynchronous transfer
        def __init__(self, name: str) -> None:
            self.name = name

        def wait(self, *timeout) -> None:
            log.append((self.name, *(type(t).__name__ for t in timeout)))

    t = torch.ones(2)
    inner = dd.comm.CommHandle([Work("a"), Work("b")], t)
    handle = dd.comm.CommHandle([inner, Work("c")], t, finish=lambda: log.append("finish"))
    assert not handle.is_completed() and len(handle.works) == 2
    assert handle.wait(timeout=5.0) is t
    assert log == [("a", "timedelta"), ("b", "timedelta"), ("c", "timedelta"), "finish"]
    assert handle.wait() is t and handle.is_completed() and len(log) == 4  # once
    assert dd.comm.CommHandle(None, t).is_completed() and dd.comm.CommHandle([]).wait() is None


def test_broadcast_allgather_barrier_all_to_all():
    t = torch.arange(4)
    dd.broadcast(t, src=0)
    assert torch.equal(t, torch.arange(4))
    assert dd.broadcast(t, async_op=True).wait() is t
    (only,) = dd.allgather(t)
    assert torch.equal(only, t) and only is not t
    dd.barrier()
    out = torch.empty(4, dtype=torch.long)
    dd.comm.all_to_all_single(out, t)
    assert torch.equal(out, t)


def test_data_helpers():
    assert dd.allreduce_data(3) == 3 and isinstance(dd.allreduce_data(3), int)
    assert dd.allreduce_data(3, op="avg") == 3.0 and isinstance(dd.allreduce_data(3, op="avg"), float)
    x = torch.tensor([1.0, 2.0])
    y = dd.allreduce_data(x, op="sum")
    assert torch.equal(x, y) and y is not x
    assert dd.comm.reduce_data(2.5, dst=0) == 2.5
    g = torch.tensor([2.0, 4.0])
    assert torch.equal(dd.comm.allreduce_with_indicator(g, 1), torch.tensor([2.0, 4.0]))
    assert torch.equal(dd.comm.allreduce_with_indicator(g, 0), torch.zeros(2))


def test_object_collectives_return_the_local_value():
    obj = {"a": [1, 2]}
    assert dd.broadcast_object(obj) is obj
    assert dd.comm.broadcast_object_list([1, "x"]) == [1, "x"]
    assert dd.comm.allgather_object(obj) == [obj]
    assert dd.comm.allreduce_object(5, reduce_fn=operator.mul) == 5
    future = dd.comm.allreduce_object_async({"k": 1})
    assert future.done() and future.result() == {"k": 1}


def test_group_of_one():
    group = dd.get_group(1)
    assert group.size() == 1 and group.rank() == 0
    dd.allreduce(torch.ones(2), group=group)
    assert dd.comm.simple_group_split(1, 0, 1) is group


def test_dist_init_without_launcher_is_fake(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    assert dd.dist_init() == (0, 1)
    assert dd.is_fake()
    dd.dist_finalize()
    dd.dist_finalize()  # twice is fine


def test_dist_mode_runs_the_function_and_returns_its_value():
    @dd.dist_mode
    def main(x, y=1):
        return x + y + dd.get_world_size()

    assert main(1, y=2) == 4
    assert main.__name__ == "main"

    @dd.dist_mode(backend="gloo")
    def other():
        return "ok"

    assert other() == "ok"


def test_context_manager_alias():
    assert dd.comm.DDPContext is dd.DistContext
    with dd.comm.DDPContext() as ctx:
        assert (ctx.rank, ctx.world_size) == (0, 1)


def test_top_level_leaves_di_engine_aliases_to_comm_and_compat():
    from ding_dist.compat import pytorch_ddp_dist_helper as ding_helper

    for name in ("DDPContext", "to_ddp_config", "AlgorithmOption", "DistributedAlgorithm"):
        assert not hasattr(dd, name) and name not in dd.__all__
    assert ding_helper.DDPContext is dd.comm.DDPContext and ding_helper.error_wrapper is dd.comm.error_wrapper


def test_top_level_serves_the_ding_utils_helper_list():
    """The helper list DI-engine serves from ``ding.utils`` is importable from ``ding_dist`` itself."""
    names = "get_rank get_world_size broadcast allreduce get_group dist_init dist_finalize dist_mode error_wrapper"
    for name in names.split():
        assert getattr(dd, name) is getattr(dd.comm, name) and name in dd.__all__
    from ding_dist import error_wrapper

    assert error_wrapper(int, default_ret=-1)("twelve") == -1


def test_error_wrapper_returns_default_and_logs(caplog):
    wrapped = dd.comm.error_wrapper(lambda: 1 / 0, default_ret="fallback", warning_msg="[test]")
    with caplog.at_level("WARNING"):
        assert wrapped() == "fallback"
    assert "ZeroDivisionError" in caplog.text and "[test]" in caplog.text
    assert dd.comm.error_wrapper(lambda a: a * 2, None)(4) == 8
    with pytest.raises(TypeError, match="expects a callable"):
        dd.comm.error_wrapper(3, None)


def test_to_ddp_config_with_one_process_changes_nothing():
    from easydict import EasyDict

    cfg = EasyDict(policy=dict(learn=dict(batch_size=64), collect=dict(n_sample=96)))
    assert dd.config.to_ddp_config(cfg) == cfg


def test_to_ddp_config_divides_per_process_sizes(caplog):
    from easydict import EasyDict

    cfg = EasyDict(policy=dict(batch_size=10, learn=dict(batch_size=64, lr=0.1), collect=dict(n_sample=98)))
    with caplog.at_level("INFO"):
        out = dd.config.to_ddp_config(cfg, world_size=2)
    assert out.policy.learn.batch_size == 32 and out.policy.batch_size == 5
    assert out.policy.collect.n_sample == 49 and out.policy.learn.lr == 0.1
    assert cfg.policy.learn.batch_size == 64  # the input is not modified
    assert "policy.learn.batch_size 64 -> 32" in caplog.text


def test_to_ddp_config_refuses_a_size_the_world_cannot_split():
    from easydict import EasyDict

    from ding_dist.config import ConfigError

    cfg = EasyDict(policy=dict(learn=dict(batch_size=256), collect=dict(n_sample=99)))
    with pytest.raises(ConfigError) as info:  # a ValueError: never rounded up to a larger global batch
        dd.config.to_ddp_config(cfg, world_size=3)
    assert str(info.value) == (
        "policy.learn.batch_size=256 cannot be split over 3 processes: --set policy.learn.batch_size=255 or 258; "
        "or --nproc 1, which split every size"
    )
    with pytest.raises(ValueError, match=r"2 config errors: policy.learn.batch_size=257 .*n_sample=99 cannot be "
                       r"split over 2 processes: --set policy.collect.n_sample=98 or 100"):  # fmt: skip
        dd.config.to_ddp_config(EasyDict(policy=dict(learn=dict(batch_size=256 + 1), collect=dict(n_sample=99))), 2)


# ---- bad input: every error names the bad value and what was expected ----


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: dd.allreduce(torch.ones(1), op="mean"), ValueError, "op must be one of .* got 'mean'"),
        (lambda: dd.allreduce([1.0], op="sum"), TypeError, "expects a torch.Tensor, got list"),
        (lambda: dd.allreduce(torch.ones(2, dtype=torch.long), op="avg"), TypeError, "torch.int64"),
        (lambda: dd.broadcast(torch.ones(1), src=1), ValueError, r"src must be a rank in \[0, 0\].* got 1"),
        (lambda: dd.broadcast(3.0), TypeError, "got float"),
        (lambda: dd.comm.reduce_data(1.0, dst=2), ValueError, "dst must be a rank .* got 2"),
        (lambda: dd.allreduce_data("7"), TypeError, "got str"),
        (lambda: dd.comm.allreduce_with_indicator(torch.ones(2), 0.5), ValueError, "indicator must be 0 or 1, got 0.5"),
        (lambda: dd.get_group(2), ValueError, "group_size 2 does not divide the world size 1"),
        (lambda: dd.get_group(0), ValueError, "positive int, got 0"),
        (lambda: dd.comm.simple_group_split(2, 0, 1), ValueError, "world_size 2 differs"),
        (lambda: dd.comm.send(torch.ones(1), peer=1), RuntimeError, "no peer on the fake link"),
        (lambda: dd.dist_init(rank=1, world_size=1), ValueError, "got 1"),
        (lambda: dd.dist_init(backend="tcp"), ValueError, "backend must be one of .* got 'tcp'"),
        (lambda: dd.comm.allreduce_object(1, reduce_fn=3), TypeError, "reduce_fn must be a callable"),
        (lambda: dd.launch(lambda: 0, 2), TypeError, "module-level"),
        (lambda: dd.launch(print, 0), ValueError, "nproc must be a positive int, got 0"),
    ],
)
def test_bad_input_is_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only error")
def test_nccl_without_cuda_is_a_clear_error():
    with pytest.raises(RuntimeError, match="needs CUDA.*use backend='gloo'"):
        dd.dist_init(backend="nccl", rank=0, world_size=1)


def test_unpicklable_object_is_a_clear_error():
    lock = threading.Lock()
    with pytest.raises(TypeError, match="could not pickle its value of type lock"):
        dd.broadcast_object(lock)
    with pytest.raises(TypeError, match="type lock"):
        dd.comm.allgather_object(lock)
    pickle.dumps(1)


def test_group_of_the_wrong_kind_is_a_clear_error():
    with pytest.raises(TypeError, match="group must be None or get_group\\(\\)'s group on the fake link, got 'world'"):
        dd.allreduce(torch.ones(1), group="world")
    with pytest.raises(TypeError, match="got 'world'"):
        dd.get_world_size("world")
