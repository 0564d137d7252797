"""``ding-dist train --algo ALGO --env ENV_ID``: a run without a config file; ``--set`` on top."""

from __future__ import annotations

import json

from ding_dist.config import read_config
from ding_dist.config.presets import preset_config, shipped_config
from ding_dist.entry import cli


def test_shipped_env_uses_its_tuned_config():
    assert shipped_config("sac", "Pendulum-v1").name == "pendulum_sac_config.py"
    assert preset_config("dqn", "CartPole-v1").name == "cartpole_dqn_config.py"
    assert shipped_config("ppo", "Pendulum-v1") is None


def test_other_pairs_get_the_policy_defaults(tmp_path):
    path = preset_config("ppo", "Pendulum-v1", tmp_path)
    main, create = read_config(path)
    assert create.policy.type == "ppo"
    assert main.env.id == "Pendulum-v1"
    assert main.exp_name == "pendulum_v1_ppo"


def test_train_by_name_with_overrides(tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", "--algo", "ppo", "--env", "Pendulum-v1", "--max-env-steps", "100", "--exp-dir", str(run)]
    assert cli.main([*argv, "--set", "policy.collect.n_sample=64", "policy.learn.batch_size=32"]) == 0
    saved, create = read_config(run / "config.py")
    assert (saved.env.id, saved.policy.collect.n_sample, create.policy.type) == ("Pendulum-v1", 64, "ppo")
    assert json.loads((run / "result.json").read_text())["env_steps"] >= 100


def test_by_name_needs_both_and_no_config(capsys):
    assert cli.main(["train", "--algo", "ppo"]) == 2
    assert cli.main(["train", "configs/cartpole_ppo_config.py", "--algo", "ppo", "--env", "CartPole-v1"]) == 2
    assert cli.main(["train", "--algo", "pop", "--env", "CartPole-v1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[:2] == [
        "ding-dist: error: --algo needs --env ENV_ID too (e.g. --algo ppo --env Pendulum-v1)",
        "ding-dist: error: give CONFIG ('configs/cartpole_ppo_config.py') or --algo and --env, not both: --algo ALGO "
        "--env ENV_ID trains without a config file",
    ]
    assert len(err) == 3 and "registered: " in err[2]
