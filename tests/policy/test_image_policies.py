"""ACER, PPG and R2D2 on uint8 image observations (DI-engine's Atari files of those policies): a CNN trunk with
``model.conv_channels``, trained for a few iterations through the pipeline on the toy frame-stack env."""

from __future__ import annotations

import pytest
import torch

from ding_dist.entry import pipeline

ENV = {"entry_point": "ding_dist.envs.toy:FrameStackEnv", "env_kwargs": {"side": 36}, "collector_env_num": 2,
       "evaluator_env_num": 1, "n_evaluator_episode": 1, "max_episode_steps": 20}  # fmt: skip
CNN = {"hidden_sizes": [16], "conv_channels": [4, 8, 8]}


def _config(policy: str, **policy_cfg) -> tuple[dict, dict]:
    main = {"exp_name": f"image_{policy}", "env": ENV, "policy": {"device": "cpu", "model": CNN, **policy_cfg}}
    return main, {"env": {"type": "gymnasium"}, "env_manager": {"type": "sync"}, "policy": {"type": policy}}


@pytest.mark.parametrize(
    ("policy", "cfg", "steps", "iters"),
    [
        ("acer", {"learn": {"unroll_len": 4, "batch_size": 2, "update_per_collect": 2}, "collect": {"n_sample": 8}},
         16, 4),  # 2 collects, 2 updates each
        ("ppg_offpolicy", {"learn": {"update_per_collect": 2, "batch_size": 8, "aux_freq": 1, "aux_train_epoch": 1},
                           "collect": {"n_sample": 8}}, 16, 4),
        ("r2d2", {"sequence": {"seq_len": 4, "burnin": 1, "overlap": 0}, "model": {**CNN, "lstm_size": 8},
                  "learn": {"batch_size": 2, "learning_starts": 8}, "collect": {"n_sample": 8}}, 16, 2),
    ],
)  # fmt: skip
def test_image_observations_train(tmp_path, policy, cfg, steps, iters):
    torch.set_num_threads(1)
    result = pipeline.train(_config(policy, **cfg), max_env_steps=steps, exp_dir=tmp_path)
    assert (result["env_steps"], result["train_iters"]) == (steps, iters)
    ckpt = torch.load(next((tmp_path / "ckpt").glob("*.pt")), map_location="cpu", weights_only=False)

    def shapes(x):  # every tensor's shape in the checkpoint
        if isinstance(x, torch.Tensor):
            yield tuple(x.shape)
        elif isinstance(x, dict):
            for v in x.values():
                yield from shapes(v)

    assert (4, 4, 8, 8) in set(shapes(ckpt))  # the first convolution: 4 stacked frames -> conv_channels[0] = 4
