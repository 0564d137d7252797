"""Train PPO on CartPole-v1 with ding_dist.

Runs unchanged in every mode (the shipped config is found next to this repo, from any working folder)::

    python entry/cartpole_ppo_main.py --max-env-steps 20000           # one process (fake link)
    torchrun --nproc_per_node 2 entry/cartpole_ppo_main.py            # 2 processes, gloo on CPU / nccl on GPU
    ding-dist train entry/cartpole_ppo_main.py --nproc 2              # the same through the CLI

``ding-dist train`` reads ``main_config``/``create_config`` from this file, exactly as from a config file.
"""

from pathlib import Path

from ding_dist.comm import dist_mode
from ding_dist.config import read_config
from ding_dist.entry.script import run_script

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "cartpole_ppo_config.py"
main_config, create_config = read_config(CONFIG)


@dist_mode
def main(argv: list[str] | None = None) -> dict:
    """Train and return the result dict (also written to ``<exp_dir>/result.json``)."""
    return run_script(main_config, create_config, argv, description=__doc__)


if __name__ == "__main__":
    main()
