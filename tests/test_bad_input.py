"""Bad input, tried systematically: every case is ONE clear line that names the bad value, raised by
ding_dist itself, never a traceback from deep inside torch or gymnasium.

Tables (pytest.mark.parametrize) cover configs (wrong types, unknown keys, sizes <= 0, missing files,
broken overrides), environments, ``distribute()`` and its algorithm options, and the object
collectives over two real gloo ranks; hypothesis throws random override strings and junk values at
typed keys, which must only ever give a ConfigError or a valid config.
"""

from __future__ import annotations

import operator
import threading
import traceback
from collections.abc import Callable
from typing import Any

import pytest
import torch
from easydict import EasyDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from ding_dist import comm
from ding_dist.config import ConfigError, read_config
from ding_dist.config.compile import compile_config
from ding_dist.config.sections import ENV_KEYS
from ding_dist.envs import env_seeds, make_env, make_vec_env
from ding_dist.policy import DQNPolicy, PPOPolicy, SACPolicy
from ding_dist.sync import AlgorithmOption, DDPOption, QAdamOptimizer, distribute, sync_gradients

POLICIES = {"dqn": DQNPolicy, "ppo": PPOPolicy, "sac": SACPolicy}


def one_clear_line(exc: BaseException, *needles: str) -> str:
    """The message is one line holding every needle, and the innermost frame is ding_dist's own code."""
    message = str(exc)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    innermost = traceback.extract_tb(exc.__traceback__)[-1].filename
    assert "/ding_dist/" in innermost.replace("\\", "/"), f"raised from {innermost}, not from ding_dist"
    return message


# ---- configs ---------------------------------------------------------------------------------------------
def _compile(main: dict, policy: str = "dqn", overrides=(), **kw) -> EasyDict:
    defaults = {"env": ENV_KEYS.defaults(), "policy": POLICIES[policy].default_config()}
    return compile_config(main, {"policy": {"type": policy}}, defaults=defaults, overrides=overrides, **kw)


def _nested(dotted: str, value: Any) -> dict:
    out: Any = value
    for part in reversed(dotted.split(".")):
        out = {part: out}
    return out


# (dotted key, bad value, policy, words the message must contain)
CONFIG_VALUES = [
    # wrong types
    ("policy.learn.batch_size", "64", "dqn", ["'policy.learn.batch_size'", "'64'", "expected int"]),
    ("policy.learn.batch_size", 64.0, "dqn", ["'policy.learn.batch_size'", "64.0", "expected int"]),
    ("policy.learn.learning_rate", True, "dqn", ["'policy.learn.learning_rate'", "True", "expected float"]),
    ("policy.model.hidden_sizes", "128", "dqn", ["'policy.model.hidden_sizes'", "expected list or tuple"]),
    ("policy.learn", 5, "dqn", ["'policy.learn'", "expected dict"]),
    ("env.env_kwargs", [1], "dqn", ["'env.env_kwargs'", "expected dict"]),
    ("exp_name", 3, "dqn", ["'exp_name'", "expected str"]),
    ("seed", "1", "dqn", ["'seed'", "expected int"]),
    ("policy.learn.double", "yes", "dqn", ["'policy.learn.double'", "expected bool"]),
    # sizes, counts and rates out of range
    ("policy.learn.batch_size", 0, "dqn", ["'policy.learn.batch_size' must be >= 1, got 0"]),
    ("policy.learn.batch_size", -1, "ppo", ["'policy.learn.batch_size' must be >= 1, got -1"]),
    ("policy.collect.n_sample", 0, "ppo", ["'policy.collect.n_sample' must be >= 1, got 0"]),
    ("env.collector_env_num", 0, "dqn", ["'env.collector_env_num' must be >= 1, got 0"]),
    ("env.evaluator_env_num", -2, "dqn", ["'env.evaluator_env_num' must be >= 1, got -2"]),
    ("env.n_evaluator_episode", 0, "sac", ["'env.n_evaluator_episode' must be >= 1, got 0"]),
    ("policy.other.replay_buffer.replay_buffer_size", 0, "dqn", ["replay_buffer_size' must be >= 1, got 0"]),
    ("policy.learn.learning_rate", 0.0, "dqn", ["'policy.learn.learning_rate' must be a finite number > 0"]),
    ("policy.learn.learning_rate", -1e-3, "ppo", ["must be a finite number > 0, got -0.001"]),
    ("policy.learn.learning_rate", float("inf"), "dqn", ["must be a finite number > 0, got inf"]),
    ("policy.learn.learning_rate", float("nan"), "dqn", ["must be a finite number > 0, got nan"]),
    ("policy.learn.learning_rate_q", 0, "sac", ["'policy.learn.learning_rate_q' must be a finite number > 0"]),
    ("policy.learn.update_per_collect", 0, "sac", ["'policy.learn.update_per_collect' must be >= 1"]),
    ("policy.learn.epoch_per_collect", -1, "ppo", ["'policy.learn.epoch_per_collect' must be >= 1"]),
    ("policy.learn.target_update_freq", 0, "dqn", ["'policy.learn.target_update_freq' must be >= 1, got 0"]),
    ("policy.learn.learning_starts", -10, "dqn", ["'policy.learn.learning_starts' must be >= 0, got -10"]),
    ("policy.eval.eval_freq", -1, "dqn", ["'policy.eval.eval_freq' must be >= 0, got -1"]),
    ("policy.other.checkpoint.keep_last", 0, "dqn", ["'policy.other.checkpoint.keep_last' must be >= 1"]),
    ("policy.nstep", 0, "dqn", ["'policy.nstep' must be >= 1, got 0"]),
    ("policy.discount_factor", 1.5, "dqn", ["'policy.discount_factor' must be in [0, 1], got 1.5"]),
    ("policy.collect.gae_lambda", -0.1, "ppo", ["'policy.collect.gae_lambda' must be in [0, 1]"]),
    ("policy.learn.target_theta", 0.0, "sac", ["'policy.learn.target_theta' must be in (0, 1] or None"]),
    ("policy.learn.clip_ratio", -0.2, "ppo", ["'policy.learn.clip_ratio' must be a finite number > 0"]),
    ("policy.learn.grad_clip_norm", 0.0, "dqn", ["'policy.learn.grad_clip_norm' must be a finite number > 0 or"]),
    ("policy.model.hidden_sizes", [64, 0], "dqn", ["'policy.model.hidden_sizes' must be a non-empty list"]),
    ("policy.model.hidden_sizes", [], "ppo", ["'policy.model.hidden_sizes' must be a non-empty list", "got []"]),
    ("policy.model.critic_hidden_sizes", [256, -1], "sac", ["'policy.model.critic_hidden_sizes'"]),
    ("policy.other.eps.start", 2.0, "dqn", ["'policy.other.eps.start' must be in [0, 1], got 2.0"]),
    # prioritized replay's priority exponent, and Ape-X (the actors' epsilon ladder) without actors
    ("policy.other.replay_buffer.alpha", 1.5, "dqn", ["'policy.other.replay_buffer.alpha' must be in [0, 1], got 1.5"]),
    ("policy.other.replay_buffer.alpha", -0.1, "dqn", ["'policy.other.replay_buffer.alpha' must be in [0, 1]"]),
    ("policy.other.eps_ladder.enable", True, "dqn", ["'policy.other.eps_ladder.enable' is True", "actors=0"]),
    ("policy.device", "gpu", "dqn", ["'policy.device' must be 'auto', 'cpu', or 'cuda'", "got 'gpu'"]),
    pytest.param(
        "policy.device",
        "cuda",
        "ppo",
        ["'policy.device' must be", "'cuda'/'cuda:N' on a machine with CUDA", "got 'cuda'"],
        marks=pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only machine's error"),
    ),
    ("env.stop_value", "high", "dqn", ["'env.stop_value' must be a number or None, got 'high'"]),
    ("env.id", "", "dqn", ["'env.id' must be a gymnasium id"]),
    ("env.entry_point", "no_colon", "dqn", ["'env.entry_point' must be 'package.module:callable' or None"]),
    ("seed", -1, "dqn", ["'seed' must be an int in [0, 2**32), got -1"]),
    # unknown keys: the closest valid key is suggested
    ("policy.learn.batch_sise", 64, "dqn", ["unknown config key 'policy.learn.batch_sise'", "did you mean"]),
    ("policy.batch_size", 64, "dqn", ["unknown config key 'policy.batch_size'", "'policy.learn.batch_size'"]),
    ("env.collector_env_nums", 4, "dqn", ["did you mean 'env.collector_env_num'"]),
    ("polcy", {}, "dqn", ["unknown config key 'polcy'", "did you mean 'policy'"]),
    ("policy.learn.learning_rate", 1e-3, "sac", ["unknown config key 'policy.learn.learning_rate'"]),
]


@pytest.mark.parametrize(("key", "value", "policy", "needles"), CONFIG_VALUES, ids=lambda v: str(v)[:40])
def test_bad_config_value(key, value, policy, needles):
    with pytest.raises(ConfigError) as info:
        _compile(_nested(key, value), policy)
    one_clear_line(info.value, *needles)


@pytest.mark.parametrize(
    ("overrides", "needles"),
    [
        (["policy.learn.batch_size=-4"], ["'policy.learn.batch_size' must be >= 1, got -4"]),
        (["policy.learn.learning_rate=1e999"], ["'policy.learn.learning_rate' must be a finite number > 0, got inf"]),
        (["policy.learn.batch_size"], ["bad override 'policy.learn.batch_size'", "expected 'key.path=value'"]),
        (["=3"], ["bad override '=3'"]),
        (["policy..learn=1"], ["key path 'policy..learn' must be dot-separated identifiers"]),
        (["policy.learn.batch_size.x=1"], ["'policy.learn.batch_size' is 64, not a dict"]),
        (["seed=" + "[" * 300 + "]" * 300], ["'seed' = '[[[[", "has type str, expected int"]),
        (["seed=0x" + "f" * 4000], ["'seed' must be an int in [0, 2**32), got <int>"]),
        ("policy.learn.batch_size=4", ["overrides must be a sequence of 'key=value' strings, got 'policy"]),
        ([3], ["override must be a string 'key.path=value', got 3"]),
        (5, ["overrides must be a sequence of 'key=value' strings, got 5"]),
    ],
    ids=lambda v: str(v)[:30],
)
def test_bad_override(overrides, needles):
    with pytest.raises(ConfigError) as info:
        _compile({}, overrides=overrides)
    message = one_clear_line(info.value, *needles)
    assert len(message) < 400, "a huge value is cut, not printed whole"


def test_valid_configs_still_compile():
    assert _compile({}, overrides=None).policy.learn.batch_size == 64
    cfg = _compile({"env": {"id": "CartPole-v1", "env_kwargs": {"whatever_size": -1}}}, "ppo")
    assert cfg.env.env_kwargs.whatever_size == -1, "keys inside an open dict are the env's, not ours to judge"
    assert _compile({"policy": {"learn": {"target_theta": 1.0, "grad_clip_norm": None}}}, "sac").policy.learn


@pytest.mark.parametrize(
    ("content", "needles"),
    [
        (None, ["config file", "does not exist"]),
        ("raise RuntimeError('boom')\n", ["error while executing config file", "RuntimeError: boom"]),
        ("x = 1\n", ["does not define 'main_config'"]),
        ("main_config = [1, 2]\n", ["main_config must be a dict or EasyDict, got list"]),
        ("main_config = {}\ncreate_config = 3\n", ["create_config must be a dict or EasyDict, got int"]),
        ("main_config = dict(\n", ["error while executing config file", "SyntaxError"]),
    ],
    ids=["missing", "raises", "no_main", "main_list", "create_int", "syntax"],
)
def test_bad_config_file(tmp_path, content, needles):
    path = tmp_path / "my_config.py"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as info:
        read_config(path)
    one_clear_line(info.value, str(path), *needles)


@pytest.mark.parametrize(
    ("path", "needle"),
    [(None, "config path must be a str or os.PathLike, got NoneType"), (5, "got int 5"), ("{tmp}", "is a directory")],
)
def test_bad_config_path(tmp_path, path, needle):
    with pytest.raises(ConfigError) as info:
        read_config(path.format(tmp=tmp_path) if isinstance(path, str) else path)
    one_clear_line(info.value, needle)


# ---- environments ----------------------------------------------------------------------------------------
ENV_CASES = [
    ({"id": "CartPol-v1"}, 2, ValueError, ["unknown environment id 'CartPol-v1'", "'CartPole-v1'"]),
    ({"id": "NoSuchEnv-v9"}, 2, ValueError, ["unknown environment id 'NoSuchEnv-v9'"]),
    ({"id": "nosuchmodule:Foo-v0"}, 2, ValueError, ["cannot import module 'nosuchmodule'", "No module named"]),
    ({"id": ":"}, 2, ValueError, ["env.id ':' must be 'EnvId' or 'package.module:EnvId'"]),
    ({"id": 5}, 2, ValueError, ["env.id must be a gymnasium environment id", "got 5"]),
    ({}, 2, ValueError, ["env.id must be a gymnasium environment id", "got None"]),
    ({"entry_point": "no_colon"}, 2, ValueError, ["entry_point must look like 'package.module:callable'"]),
    ({"entry_point": "os:nothing_here"}, 2, ValueError, ["module 'os' has no attribute 'nothing_here'"]),
    ({"entry_point": "no.such.mod:f"}, 2, ValueError, ["cannot import module 'no.such.mod'"]),
    ({"entry_point": 5}, 2, TypeError, ["entry_point must be 'package.module:callable' or a callable, got 5"]),
    ({"id": "CartPole-v1", "env_kwargs": {"bogus": 1}}, 2, TypeError, ["rejected env_kwargs {'bogus': 1}"]),
    ({"id": "CartPole-v1", "env_kwargs": 5}, 2, TypeError, ["env.env_kwargs must be a dict", "got 5"]),
    ({"id": "CartPole-v1", "max_episode_steps": -1}, 2, ValueError, ["max_episode_steps must be an int >= 1"]),
    ({"id": "CartPole-v1", "max_episode_steps": "abc"}, 2, ValueError, ["got 'abc'"]),
    ({"id": "CartPole-v1", "max_episode_steps": 2.5}, 2, ValueError, ["got 2.5"]),
    ({"id": "CartPole-v1"}, 0, ValueError, ["number of envs must be an int >= 1, got 0"]),
    ({"id": "CartPole-v1"}, 2.5, ValueError, ["number of envs must be an int >= 1, got 2.5"]),
    ({"id": "CartPole-v1"}, "two", ValueError, ["number of envs must be an int >= 1, got 'two'"]),
    ({"id": "CartPole-v1"}, True, ValueError, ["got True"]),
    (None, 2, TypeError, ["env config must be a dict", "got None"]),
]


@pytest.mark.parametrize(("env_cfg", "num", "error", "needles"), ENV_CASES, ids=lambda v: str(v)[:30])
def test_bad_env(env_cfg, num, error, needles):
    with pytest.raises(error) as info:
        make_vec_env(env_cfg, num)
    one_clear_line(info.value, *needles)


def test_bad_env_through_the_config():
    cfg = _compile({"env": {"id": "CartPoleV1", "collector_env_num": 2}})  # any string is a valid id to the config
    with pytest.raises(ValueError) as info:
        make_vec_env(cfg.env, cfg.env.collector_env_num)
    one_clear_line(info.value, "unknown environment id 'CartPoleV1'", "'CartPole-v1'")
    with pytest.raises(ValueError) as info:
        make_vec_env({"id": "CartPole-v1"}, 2, manager="threads")
    one_clear_line(info.value, "env_manager.type must be one of", "got 'threads'")
    with pytest.raises(ValueError) as info:
        env_seeds(0, 0, "collector", "3")
    one_clear_line(info.value, "number of envs must be an int >= 1, got '3'")
    with pytest.raises(ValueError) as info:
        make_env(" ")
    one_clear_line(info.value, "env.id must be a gymnasium environment id")


@settings(max_examples=40, deadline=None)
@given(env_id=st.text(st.characters(blacklist_characters=":"), max_size=30))  # no "module:Id": nothing is imported
def test_random_env_ids_give_one_line(env_id):
    try:
        env = make_env(env_id)
    except ValueError as exc:
        one_clear_line(exc, repr(env_id)[:20])
    else:  # hypothesis found a registered id: fine
        env.close()


# ---- distribute() and the algorithm options ------------------------------------------------------------------
def _net() -> nn.Module:
    return nn.Linear(3, 2)


def _adam() -> torch.optim.Optimizer:
    return torch.optim.Adam(_net().parameters())


DISTRIBUTE_CASES: list[tuple[str, Callable[[], Any], type, list[str]]] = [
    ("unknown algorithm", lambda: distribute(_net(), None, "gradient_allredcue"), ValueError,
     ["unknown algorithm 'gradient_allredcue'", "gradient_allreduce"]),
    ("algorithm type", lambda: distribute(_net(), None, 3), TypeError, ["algorithm must be a name (str), got int"]),
    ("bucket 0", lambda: distribute(_net(), None, bucket_size_mb=0), ValueError, ["bucket_size_mb", "got 0"]),
    ("bucket -1", lambda: distribute(_net(), None, bucket_size_mb=-1), ValueError, ["got -1"]),
    ("bucket nan", lambda: distribute(_net(), None, bucket_size_mb=float("nan")), ValueError, ["got nan"]),
    ("bucket str", lambda: distribute(_net(), None, bucket_size_mb="25"), ValueError, ["got '25'"]),
    ("bucket bool", lambda: distribute(_net(), None, bucket_size_mb=True), ValueError, ["got True"]),
    ("delay_reduce", lambda: distribute(_net(), None, delay_reduce="yes"), TypeError,
     ["delay_reduce must be True or False, got 'yes'"]),
    ("broadcast_buffers", lambda: distribute(_net(), None, broadcast_buffers=1), TypeError,
     ["broadcast_buffers must be True or False, got 1"]),
    ("model None", lambda: distribute(None, None), TypeError, ["model must be a torch.nn.Module, got NoneType"]),
    ("optimizer str", lambda: distribute(_net(), "adam"), TypeError,
     ["optimizer must be a torch.optim.Optimizer", "got str ('adam')"]),
    ("optimizer list", lambda: distribute(_net(), [_adam(), 1]), TypeError, ["got int (1)"]),
    ("unknown option", lambda: distribute(_net(), None, "bytegrad", error_feedbak=True), ValueError,
     ["unknown option(s) ['error_feedbak'] for algorithm 'bytegrad'", "error_feedback"]),
    ("option of another algorithm", lambda: distribute(_net(), None, "gradient_allreduce", method="x"), ValueError,
     ["unknown option(s) ['method'] for algorithm 'gradient_allreduce'", "valid options: hierarchical"]),
    ("error_feedback str", lambda: distribute(_net(), None, "bytegrad", error_feedback="no"), TypeError,
     ["error_feedback must be True or False, got 'no'"]),
    ("piece_mb", lambda: distribute(_net(), None, "bytegrad", piece_mb=-1), ValueError,
     ["piece_mb must be a finite number > 0, got -1"]),
    ("piece_mb bool", lambda: distribute(_net(), None, "sg_allreduce", piece_mb=True), ValueError, ["got True"]),
    ("method", lambda: distribute(_net(), None, "fp16", method="ring"), ValueError,
     ["method must be one of ('allreduce', 'scatter_gather'), got 'ring'"]),
    ("qadam optimizer", lambda: distribute(_net(), _adam(), "qadam"), ValueError,
     ["algorithm 'qadam' needs one ding_dist QAdamOptimizer, got ['Adam']"]),
    ("topology", lambda: distribute(_net(), None, "decentralized", topology="star"), ValueError,
     ["unknown topology 'star'; valid names: "]),
    ("skip_nonfinite", lambda: distribute(_net(), None, skip_nonfinite=None), TypeError,
     ["skip_nonfinite must be True or False, got None"]),
    ("max_nonfinite_skips", lambda: distribute(_net(), None, max_nonfinite_skips="10"), ValueError,
     ["max_nonfinite_skips must be an int >= 0 or None", "got '10'"]),
    ("qadam lr", lambda: QAdamOptimizer(_net().parameters(), lr=0), ValueError, ["lr must be > 0, got 0"]),
    ("qadam warmup", lambda: QAdamOptimizer(_net().parameters(), warmup_steps=0), ValueError,
     ["warmup_steps must be an int >= 1, got 0"]),
    ("option object", lambda: AlgorithmOption("bytegrad", error_feedbak=True), ValueError,
     ["unknown option(s) ['error_feedbak'] for algorithm 'bytegrad'"]),
    ("option backend", lambda: AlgorithmOption(backend="mpi"), ValueError, ["got 'mpi'"]),
    ("ddp option", lambda: DDPOption(backend="gloo", bucket_cap=25), ValueError, ["unknown DDPOption option(s)"]),
    ("sync op", lambda: sync_gradients(_net(), op="mean"), ValueError, ["op must be 'avg' or 'sum', got 'mean'"]),
    ("sync bucket", lambda: sync_gradients(_net(), bucket_size_mb=0), ValueError, ["bucket_size_mb", "got 0"]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "call", "error", "needles"), DISTRIBUTE_CASES, ids=[c[0] for c in DISTRIBUTE_CASES])
def test_bad_distribute_option(name, call, error, needles):
    with pytest.raises(error) as info:
        call()
    one_clear_line(info.value, *needles)


# ---- object collectives over two real gloo ranks (and the fake link) -------------------------------------------
class _FailsToLoad:
    """Pickles fine, but rebuilding it raises (e.g. a class that changed between ranks)."""

    def __reduce__(self):
        return (_refuse, ())


def _refuse():
    raise RuntimeError("cannot rebuild this value")


def _attempt(fn: Callable[[], Any]) -> tuple[str, str]:
    try:
        return "ok", repr(fn())[:80]
    except Exception as exc:
        return type(exc).__name__, str(exc)


def object_collectives() -> dict[str, tuple[str, str]]:
    """Each collective with an unpicklable value on one rank; every rank must raise, none may hang."""
    rank = comm.get_rank()
    lock = threading.Lock()
    bad = lock if rank == 1 else 1
    out = {
        "allgather_object": _attempt(lambda: comm.allgather_object(bad)),
        "allreduce_object": _attempt(lambda: comm.allreduce_object((x for x in ()) if rank == 1 else 1)),
        "allreduce_object_async": _attempt(lambda: comm.allreduce_object_async(bad, operator.add).result()),
        "broadcast_object": _attempt(lambda: comm.broadcast_object((lambda: 0) if rank == 0 else None)),
        "broadcast_object_list": _attempt(lambda: comm.broadcast_object_list([1, lock] if rank == 0 else [0, 0])),
        "non_src_value_is_ignored": _attempt(lambda: comm.broadcast_object(lock if rank == 1 else "fine")),
        "fails_to_load": _attempt(lambda: comm.allgather_object(_FailsToLoad() if rank == 1 else 1)),
        "group_of_wrong_type": _attempt(lambda: comm.allgather_object(1, group="world")),
    }
    out["still_works"] = _attempt(lambda: comm.allgather_object(rank))
    return out


@pytest.fixture(scope="module")
def two_ranks():
    return comm.launch(object_collectives, 2, timeout=120, comm_timeout=30)


UNPICKLABLE = {
    "allgather_object": ["allgather_object: rank 1 could not pickle its value of type lock"],
    "allreduce_object": ["rank 1 could not pickle its value of type generator"],
    "allreduce_object_async": ["allreduce_object_async: rank 1 could not pickle its value of type lock"],
    "broadcast_object": ["rank 0 could not pickle its value of type function"],
    "broadcast_object_list": ["broadcast_object_list: rank 0 could not pickle its value of type lock"],
}


@pytest.mark.parametrize("name", list(UNPICKLABLE))
def test_unpicklable_object_is_a_type_error_on_every_rank(two_ranks, name):
    for rank, results in enumerate(two_ranks):
        kind, message = results[name]
        assert kind == "TypeError", (rank, kind, message)
        assert "\n" not in message and all(n in message for n in UNPICKLABLE[name]), message
        assert results["still_works"] == ("ok", "[0, 1]"), "the group is usable afterwards"


def test_value_of_a_non_source_rank_is_ignored(two_ranks):
    assert [r["non_src_value_is_ignored"] for r in two_ranks] == [("ok", "'fine'")] * 2


def test_value_that_fails_to_unpickle_is_a_clear_type_error(two_ranks):
    for results in two_ranks:
        kind, message = results["fails_to_load"]
        assert kind == "TypeError" and "rank 1" in message, (kind, message)


def test_group_of_wrong_type_is_a_clear_error(two_ranks):
    for results in two_ranks:
        kind, message = results["group_of_wrong_type"]
        assert kind in ("TypeError", "ValueError") and "'world'" in message, (kind, message)


def test_unpicklable_object_on_the_fake_link():
    for call in (
        lambda: comm.allgather_object(threading.Lock()),
        lambda: comm.broadcast_object(threading.Lock()),
        lambda: comm.allreduce_object(threading.Lock()),
        lambda: comm.allreduce_object_async(threading.Lock()).result(),
    ):
        with pytest.raises(TypeError) as info:
            call()
        one_clear_line(info.value, "rank 0 could not pickle its value of type lock")


# ---- environment variables: every DING_DIST_* of the table, a bad value is one line before any work ------------
BAD_ENV_VALUES = {
    "DING_DIST_TIMEOUT": "abc",
    "DING_DIST_BACKEND": "glooo",
    "DING_DIST_INIT_RETRIES": "two",
    "DING_DIST_DEBUG": "maybe",
    "DING_DIST_TRACK": "sure",
    "DING_DIST_HEARTBEAT_S": "-1",
    "DING_DIST_HEARTBEAT_GRACE_S": "nan",
    "DING_DIST_START_METHOD": "spawn",
    "DING_DIST_HEARTBEAT_STORE": "node0",
    "DING_DIST_HEARTBEAT_STARTUP_GRACE_S": "soon",
    "DING_DIST_OMP_DEFAULTED": "yes",
    "DING_DIST_ENV_CHECKED": "0",
}


def test_every_variable_with_a_value_check_has_a_bad_value_here():
    from ding_dist.comm.settings import ENV_VARS

    assert set(BAD_ENV_VALUES) == {v.name for v in ENV_VARS} - {"DING_DIST_DING_REPORTED"}  # that one takes any key


@pytest.mark.parametrize("name", sorted(BAD_ENV_VALUES))
def test_a_bad_environment_variable_stops_dist_init_and_launch_in_one_line(name, monkeypatch):
    from ding_dist.comm.settings import ENV_VARS

    takes = next(v.takes for v in ENV_VARS if v.name == name)
    monkeypatch.setenv(name, BAD_ENV_VALUES[name])
    for call in (comm.dist_init, lambda: comm.launch(abs, 2, 1)):
        with pytest.raises(ValueError) as info:
            call()
        one_clear_line(info.value, f"{name}={BAD_ENV_VALUES[name]!r}: expected {takes}")


# ---- hypothesis: random overrides and junk values -----------------------------------------------------------
def _typed_leaves(node: dict, path: str = "") -> list[str]:
    out = []
    for key, value in node.items():
        if isinstance(value, dict) and value:
            out += _typed_leaves(value, f"{path}{key}.")
        else:
            out.append(f"{path}{key}")
    return out


LEAVES = sorted(
    {("dqn", p) for p in _typed_leaves({"env": ENV_KEYS.defaults(), "policy": DQNPolicy.default_config(), "seed": 0})}
    | {("ppo", p) for p in _typed_leaves({"policy": PPOPolicy.default_config()})}
    | {("sac", p) for p in _typed_leaves({"policy": SACPolicy.default_config()})}
)
JUNK = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
KEY_PARTS = st.sampled_from(["policy", "learn", "batch_size", "env", "id", "seed", "model", "hidden_sizes", "x", "_"])


def _compiles_or_config_error(main: dict, policy: str, overrides=()) -> EasyDict | None:
    try:
        return _compile(main, policy, overrides=overrides)
    except ConfigError as exc:
        one_clear_line(exc)
        return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(leaf=st.sampled_from(LEAVES), value=JUNK)
def test_junk_values_for_typed_keys(leaf, value):
    policy, key = leaf
    cfg = _compiles_or_config_error(_nested(key, value), policy)
    if cfg is not None:  # accepted: then it compiles again from its own output to the same config
        again = _compile({k: v for k, v in cfg.items() if k != "create_config"}, policy)
        assert again == cfg


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(KEY_PARTS, min_size=1, max_size=5), raw=st.text(max_size=20))
def test_random_nested_overrides(parts, raw):
    _compiles_or_config_error({}, "dqn", overrides=[f"{'.'.join(parts)}={raw}"])


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=40))
def test_random_override_strings(text):
    _compiles_or_config_error({}, "ppo", overrides=[text])


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("actor_learner.actors=0", "'policy.other.eps_ladder.enable' is True (Ape-X: one epsilon per actor)"),
        ("policy.other.replay_buffer.alpha=1.2", "'policy.other.replay_buffer.alpha' must be in [0, 1], got 1.2"),
    ],
)
def test_apex_bad_input_is_one_line_and_exit_2_before_any_process_starts(override, needle, capsys, monkeypatch):
    from pathlib import Path

    from ding_dist.entry import pipeline
    from ding_dist.entry.cli import main, train

    def no_start(*args, **kwargs):
        raise AssertionError("a run was started")

    monkeypatch.setattr(train, "launch_local", no_start)
    monkeypatch.setattr(pipeline, "train", no_start)
    config = Path(__file__).resolve().parents[1] / "configs" / "cartpole_apex_dqn_config.py"
    code = main(["train", str(config), "--set", override])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and needle in err, err
