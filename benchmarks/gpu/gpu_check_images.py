"""Check (g): image policies (DQN with frame replay, PPO, IMPALA) on stacked uint8 frames through the
Nature-CNN, one process each (g1-g3)."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gpu_check_common import (
    CONFIGS,
    Ctx,
    _check_result,
    one_line,
    policy_device_log,
    row,
)


# ------------------------------------------------------------------------------------ (g) image policies
def image_config(ctx: Ctx, algo: str) -> tuple[Any, Any]:
    """``configs/cartpole_<algo>_config.py`` on :class:`~ding_dist.envs.toy.FrameStackEnv` (84 x 84; 36 x 36
    with --quick): Atari's frame shapes and dtype on a machine without ale-py."""
    from ding_dist.config import read_config

    main, create = read_config(str(CONFIGS[algo]))
    main.exp_name = f"gpu_check_image_{algo}"
    envs, batch = ctx.size("image_envs"), ctx.size("image_batch")
    side = {"side": ctx.size("image_side")}
    main.env.update(id=None, entry_point="ding_dist.envs.toy:FrameStackEnv", env_kwargs=side,
                    max_episode_steps=50 if not ctx.quick else 12, collector_env_num=envs, evaluator_env_num=1,
                    n_evaluator_episode=1, stop_value=None)  # fmt: skip
    main.policy.eval.eval_freq = 10**9  # one evaluation, at the end
    main.policy.other = {**main.policy.get("other", {}), "log_freq": 10**9}
    if algo == "dqn":
        main.policy.model.hidden_sizes = [ctx.size("image_hidden")]  # on images: the CNN's features, then one layer
        main.policy.learn.update(batch_size=batch, update_per_collect=ctx.size("image_dqn_updates"),
                                 learning_starts=4 * batch)  # fmt: skip
        main.policy.collect.n_sample = 2 * batch
        main.policy.other.replay_buffer = dict(replay_buffer_size=ctx.size("image_steps"))
    else:  # PPO and IMPALA: rollouts of 32 (16 with --quick) steps per env, 2 minibatches per epoch
        main.policy.learn.update(epoch_per_collect=2, batch_size=2 * batch)
        main.policy.collect.n_sample = 4 * batch
    if algo == "ppo":
        create.env_manager.type = "async"  # the env processes start after the policy is on the device
    return main, create


class _Seen:
    """What the image networks and the frame replay did while a pipeline ran (class-level wrappers)."""

    def __init__(self) -> None:
        self.cnn_inputs: set[tuple[str, str]] = set()
        self.frame_samples = 0


@contextmanager
def watch_images() -> Iterator[_Seen]:
    from ding_dist.data.frame_replay import FrameReplayBuffer
    from ding_dist.policy.encoders import NatureCNN

    seen = _Seen()
    forward, sample = NatureCNN.forward, FrameReplayBuffer.sample

    def watched_forward(self, obs):
        seen.cnn_inputs.add((str(obs.device), str(obs.dtype).replace("torch.", "")))
        return forward(self, obs)

    def watched_sample(self, *args, **kwargs):
        seen.frame_samples += 1
        return sample(self, *args, **kwargs)

    NatureCNN.forward, FrameReplayBuffer.sample = watched_forward, watched_sample
    try:
        yield seen
    finally:
        NatureCNN.forward, FrameReplayBuffer.sample = forward, sample


def check_image_policies(ctx: Ctx) -> list[dict[str, str]]:
    """g1-g3: DQN (frame replay), PPO (async envs) and IMPALA on stacked uint8 frames, one process each."""
    from ding_dist.entry import train

    expected = "cuda:0" if ctx.cuda else "cpu"
    steps = ctx.size("image_steps")
    side = ctx.size("image_side")
    rows = []
    for rid, algo in (("g1", "dqn"), ("g2", "ppo"), ("g3", "impala")):
        extra = {"dqn": ", FrameReplayBuffer", "ppo": ", env_manager=async", "impala": ""}[algo]
        name = f"image {algo.upper()} 1 process, Nature-CNN on 4x{side}x{side} uint8{extra}, policy.device={ctx.device}"
        try:
            main, create = image_config(ctx, algo)
            main.policy.device = ctx.device
            with policy_device_log() as devices, watch_images() as seen:
                result = train((main, create), seed=0, exp_dir=ctx.scratch(f"{rid}_run"), max_env_steps=steps)
            assert devices.devices[:1] == [expected], f"policy on {devices.devices}, expected {expected}"
            assert seen.cnn_inputs == {(expected, "uint8")}, f"the Nature-CNN saw {sorted(seen.cnn_inputs)}"
            figure = f"{_check_result(result, steps, 1)}; CNN input uint8 on {expected}"
            if algo == "dqn":
                assert seen.frame_samples > 0, "the frame replay (FrameReplayBuffer) was never sampled"
                figure += f"; {seen.frame_samples} FrameReplayBuffer samples"
            rows.append(row(rid, name, figure))
        except Exception as exc:  # one policy failing must not hide the others
            traceback.print_exc()
            rows.append(row(rid, name, one_line(exc), "FAIL"))
    return rows
