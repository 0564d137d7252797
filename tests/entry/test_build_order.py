"""A rank builds every env before its policy: an async env manager forks its workers, and a process that holds a
CUDA context must not fork (the policy moves to the GPU when it is built)."""

from __future__ import annotations

from ding_dist.entry import train
from ding_dist.entry.loops import data_parallel
from tests.entry.test_pipeline import tiny_ppo


def test_rank_0_builds_its_evaluation_envs_before_the_policy(tmp_path, monkeypatch):
    order: list[str] = []
    make_vec_env, build_policy = data_parallel.make_vec_env, data_parallel.build_policy

    def recording_make_vec_env(cfg, num_envs, *args, training=False, **kwargs):
        order.append("collector envs" if training else "evaluation envs")
        return make_vec_env(cfg, num_envs, *args, training=training, **kwargs)

    def recording_build_policy(*args, **kwargs):
        order.append("policy")
        return build_policy(*args, **kwargs)

    monkeypatch.setattr(data_parallel, "make_vec_env", recording_make_vec_env)
    monkeypatch.setattr(data_parallel, "build_policy", recording_build_policy)
    main, create = tiny_ppo()
    train((main, create), seed=0, exp_dir=tmp_path / "run", max_env_steps=128)
    assert order == ["collector envs", "evaluation envs", "policy"]
