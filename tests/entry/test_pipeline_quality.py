"""Quality: the shipped CartPole configs reach a greedy evaluation of 475 on 1 and on 2 processes.

Fixed seeds, at most 100k env steps, stopping at the config's stop_value (475). Across seeds 0-5 both configs
reach it on 1 process (DQN in 12-31k env steps, PPO in 12-25k; docs/rl.md); these tests pin seed 2, among the
quicker ones, to stay fast in CI. The 2-process runs and DQN's (27-55 s on 2 cores) are marked ``quality``
(``python -m pytest -m quality``), outside the default run; PPO on 1 process stays in it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ding_dist.comm import launch
from ding_dist.entry import train

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SEED = 2
MAX_ENV_STEPS = 100_000


def _train(config, exp_dir):
    torch.set_num_threads(1)
    return train(config, seed=SEED, exp_dir=exp_dir, max_env_steps=MAX_ENV_STEPS)


@pytest.mark.slow
@pytest.mark.parametrize("nproc", [1, pytest.param(2, marks=pytest.mark.quality)])
@pytest.mark.parametrize("algo", ["ppo", pytest.param("dqn", marks=pytest.mark.quality)])  # dqn-1: 27-55 s
def test_cartpole_reaches_475(tmp_path, algo, nproc):
    config = str(CONFIGS / f"cartpole_{algo}_config.py")
    if nproc == 1:
        result = _train(config, tmp_path)
    else:
        result = launch(_train, nproc, config, tmp_path, timeout=600, comm_timeout=120)[0]
    assert result["world_size"] == nproc
    assert result["best_eval_return"] >= 475, result["eval_history"]
    assert result["stopped_by"] == "stop_value" and result["env_steps"] <= MAX_ENV_STEPS
