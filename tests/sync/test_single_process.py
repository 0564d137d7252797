"""The sync package on the fake link (a world of one): wrapper behaviour, validation, buckets, codecs."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from ding_dist.sync import (
    AlgorithmOption,
    DDPOption,
    DistributedAlgorithm,
    DistributedModel,
    QAdamOptimizer,
    available_algorithms,
    distribute,
    get_algorithm,
    get_default_distributed_option,
    sync_gradients,
)
from ding_dist.sync.algorithms._scatter_gather import HalfCodec, MinMaxUInt8Codec, RawCodec
from ding_dist.sync.bucket import BucketStage, build_buckets, wait_all


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU())
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))

    def act(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x).argmax(-1)


def test_wrapped_model_behaves_as_the_original():
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    model, opt2 = distribute(net, opt)
    assert isinstance(model, DistributedModel) and opt2 is opt
    assert model.unwrap() is net
    assert list(model.state_dict()) == list(net.state_dict())  # original keys, no "module." prefix
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in net.named_parameters()]
    assert all(a is b for a, b in zip(model.parameters(), net.parameters()))
    assert [n for n, _ in model.named_buffers()] == [n for n, _ in net.named_buffers()]
    x = torch.randn(5, 4)
    net.eval()
    model.eval()
    assert torch.equal(model(x), net(x))
    assert torch.equal(model.act(x), net.act(x))  # attribute / method delegation
    assert model.body[0] is net.body[0] and len(model.body) == 3
    other = Net()
    with torch.no_grad():
        for p in other.parameters():
            p.add_(1.0)
    model.load_state_dict(other.state_dict())
    assert torch.equal(net.head.weight, other.head.weight)


def test_world_of_one_adds_no_hooks_and_keeps_local_gradients():
    net, ref = Net(), Net()
    model, _ = distribute(net, None, algorithm="bytegrad", error_feedback=True)
    assert model.engine is None and model.buckets == []
    assert all(not getattr(p, "_post_accumulate_grad_hooks", None) for p in net.parameters())
    x = torch.randn(6, 4)
    model(x).sum().backward()
    ref(x).sum().backward()
    for a, b in zip(net.parameters(), ref.parameters()):
        assert torch.equal(a.grad, b.grad)
    assert model.comm_stats() == {"bytes_sent": 0, "payload_bytes": 0, "collectives": 0}
    assert sync_gradients(net) == 0


def test_deepcopy_gives_a_plain_local_module():
    model, _ = distribute(Net(), None)
    target = copy.deepcopy(model)
    assert type(target) is Net
    assert torch.equal(target.head.weight, model.head.weight) and target.head.weight is not model.head.weight


def test_switch_to_on_a_world_of_one():
    model, _ = distribute(Net(), None)
    assert model.algorithm == "gradient_allreduce"
    assert model.switch_to("quantize").algorithm == "bytegrad"
    with pytest.raises(ValueError, match="unknown algorithm 'nope'"):
        model.switch_to("nope")
    with pytest.raises(ValueError, match="unknown option"):
        model.switch_to("fp16", error_feedback=True)


def test_unknown_algorithm_lists_the_valid_ones():
    with pytest.raises(ValueError) as info:
        distribute(Net(), None, algorithm="gradient_allredcue")
    message = str(info.value)
    assert "'gradient_allredcue'" in message
    for name in ("gradient_allreduce", "fp16", "bf16", "bytegrad", "qadam", "sg-allreduce"):
        assert name in message


@pytest.mark.parametrize("size", [0, -1, float("nan"), float("inf"), "25"])
def test_bad_bucket_size(size):
    with pytest.raises(ValueError, match="bucket_size_mb must be"):
        distribute(Net(), None, bucket_size_mb=size)
    with pytest.raises(ValueError, match="bucket_size_mb must be"):
        build_buckets(list(Net().parameters()), size)


def test_other_bad_inputs():
    with pytest.raises(TypeError, match="torch.nn.Module"):
        distribute("not a model", None)
    model, _ = distribute(Net(), None)
    with pytest.raises(ValueError, match="already distributed"):
        distribute(model, None)
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['error_feedbak'\]"):
        distribute(Net(), None, algorithm="bytegrad", error_feedbak=True)
    with pytest.raises(ValueError, match="QAdamOptimizer"):
        net = Net()
        distribute(net, torch.optim.Adam(net.parameters()), algorithm="qadam")
    with pytest.raises(ValueError, match="op must be 'avg' or 'sum'"):
        sync_gradients(Net(), op="mean")


def test_bagua_decentralize_names_the_decentralized_algorithm():
    for name in ("decentralized", DistributedAlgorithm.Decentralize, "decentralize"):
        model, _ = distribute(Net(), None, algorithm=name)
        assert model.algorithm == "decentralized" and model.averages_weights


def test_bagua_names_map_to_algorithms():
    assert get_algorithm(DistributedAlgorithm.GradientAllReduce).name == "gradient_allreduce"
    assert get_algorithm("allreduce").name == "gradient_allreduce"
    assert get_algorithm(DistributedAlgorithm.from_str("SG-AllReduce")).name == "sg_allreduce"
    assert get_algorithm("quantize").name == "bytegrad"
    assert {"gradient_allreduce", "fp16", "bf16", "bytegrad", "qadam", "sg_allreduce"} <= set(available_algorithms())


def test_buckets_reverse_order_size_and_grad_views():
    layers = [nn.Parameter(torch.randn(256)) for _ in range(5)]  # 1 KiB each
    layers[2].grad = torch.full((256,), 3.0)
    buckets = build_buckets(layers, bucket_size_mb=2.0 / 1024)  # 2 KiB
    assert [[id(p) for p in b.params] for b in buckets] == [
        [id(layers[4]), id(layers[3])],
        [id(layers[2]), id(layers[1])],
        [id(layers[0])],
    ]
    b = buckets[1]
    assert layers[2].grad.data_ptr() == b.grads.data_ptr()  # the gradient moved into the bucket
    assert torch.equal(b.grads[:256], torch.full((256,), 3.0))
    assert b.buffer.numel() == 512 + 2  # gradients plus one indicator slot per parameter
    mixed = build_buckets([nn.Parameter(torch.zeros(3)), nn.Parameter(torch.zeros(3, dtype=torch.float64))], 25)
    assert sorted(str(bk.buffer.dtype) for bk in mixed) == ["torch.float32", "torch.float64"]


def test_pending_stages_run_in_order():
    log = []
    first = BucketStage([], lambda: BucketStage([], lambda: log.append("a2") or [1.0]))
    second = BucketStage([], lambda: log.append("b1") or [2.0])
    assert wait_all([first, second.followed_by(lambda c: log.append("b-done") or c)]) == [[1.0], [2.0]]
    assert log == ["b1", "b-done", "a2"]  # stage 1 of every bucket before stage 2 of any


def test_minmax_codec_error_bound_and_raw_codec_exact():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 1000, generator=gen) * torch.tensor([[1.0], [1e-3], [50.0]])
    codec = MinMaxUInt8Codec()
    enc = torch.empty(3, codec.nbytes(1000, torch.float32), dtype=torch.uint8)
    assert enc.shape == (3, 1000 + 8)
    codec.encode_into(x, enc)
    back = codec.decode(enc, torch.float32)
    step = (x.amax(1) - x.amin(1)) / 255
    assert ((back - x).abs() <= step[:, None] / 2 + 1e-6 * x.abs().amax(1, keepdim=True)).all()
    const = torch.full((1, 16), 2.5)
    enc = torch.empty(1, 24, dtype=torch.uint8)
    codec.encode_into(const, enc)
    assert torch.equal(codec.decode(enc, torch.float32), const)
    raw = RawCodec()
    enc = torch.empty(3, raw.nbytes(1000, torch.float32), dtype=torch.uint8)
    raw.encode_into(x, enc)
    assert torch.equal(raw.decode(enc, torch.float32), x)


def test_qadam_optimizer_is_adam_during_warmup_then_freezes_variance():
    torch.manual_seed(0)
    a, b = nn.Linear(5, 3), nn.Linear(5, 3)
    b.load_state_dict(a.state_dict())
    qadam = QAdamOptimizer(a.parameters(), lr=1e-2, warmup_steps=5)
    adam = torch.optim.Adam(b.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(1)
    for step in range(8):
        x = torch.randn(4, 5, generator=gen)
        for net, opt in ((a, qadam), (b, adam)):
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()
        if step == 4:
            torch.testing.assert_close(a.weight, b.weight, rtol=1e-5, atol=1e-6)
            frozen = qadam.state[a.weight]["exp_avg_sq"].clone()
    assert torch.equal(qadam.state[a.weight]["exp_avg_sq"], frozen)
    assert not torch.allclose(a.weight, b.weight)
    with pytest.raises(ValueError, match="warmup_steps"):
        QAdamOptimizer(a.parameters(), warmup_steps=0)


def test_options():
    assert get_default_distributed_option().backend == "gloo"
    assert get_default_distributed_option(device_id=0).backend == "nccl"
    with pytest.raises(ValueError, match="backend must be"):
        DDPOption(backend="mpi")
    with pytest.raises(ValueError, match=r"unknown DDPOption option\(s\) \['find_unused'\]"):
        DDPOption(backend="gloo", find_unused=True)
    with pytest.raises(ValueError, match="master_port"):
        DDPOption(backend="gloo", master_port=70000)
    with pytest.raises(ValueError, match="unknown algorithm"):
        AlgorithmOption("bytegrd")
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['error_feedback'\]"):
        AlgorithmOption("fp16", error_feedback=True)
    net = Net()
    model, _ = DDPOption(backend="gloo", find_unused_parameters=True).convert(net)
    assert model is net  # a world of one: torch DDP needs a process group
    model, _ = AlgorithmOption("bf16", delay_reduce=True).convert2distributed_model(Net(), 1, 0)
    assert isinstance(model, DistributedModel) and model.algorithm == "bf16"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_codec_round_trip_and_fp16_clamp(dtype):
    codec = HalfCodec(dtype)
    x = torch.randn(2, 64, generator=torch.Generator().manual_seed(3))
    x[0, 0] = 1e6  # beyond float16's range
    enc = torch.empty(2, codec.nbytes(64, torch.float32), dtype=torch.uint8)
    codec.encode_into(x, enc)
    back = codec.decode(enc, torch.float32).float()
    assert torch.isfinite(back).all()
    if dtype == torch.float16:
        assert back[0, 0].item() == torch.finfo(torch.float16).max
    torch.testing.assert_close(back[:, 1:], x[:, 1:], rtol=torch.finfo(dtype).eps, atol=1e-3)
    with pytest.raises(ValueError, match="float16 or torch.bfloat16"):
        HalfCodec(torch.float32)
