"""Train SAC on Pendulum-v1 with ding_dist.

Runs unchanged in every mode (the shipped config is found next to this repo, from any working folder)::

    python entry/pendulum_sac_main.py --max-env-steps 20000           # one process (fake link)
    torchrun --nproc_per_node 2 entry/pendulum_sac_main.py            # 2 processes, gloo on CPU / nccl on GPU
    ding-dist train entry/pendulum_sac_main.py --nproc 2              # the same through the CLI

``ding-dist train`` reads ``main_config``/``create_config`` from this file, exactly as from a config file.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from ding_dist.comm import dist_mode, get_rank
from ding_dist.config import read_config
from ding_dist.utils import get_logger

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "pendulum_sac_config.py"
main_config, create_config = read_config(CONFIG)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """--seed, --max-env-steps and --exp-dir; everything else comes from the config."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: the config's)")
    parser.add_argument("--max-env-steps", type=int, default=None, help="stop after this many env steps")
    parser.add_argument("--exp-dir", default=None, help="experiment folder (default: runs/<exp_name>)")
    return parser.parse_args(argv)


@dist_mode
def main(argv: Sequence[str] | None = None) -> dict:
    """Train and return the result dict (also written to ``<exp_dir>/result.json``)."""
    from ding_dist.entry.pipeline import train

    args = parse_args(argv)
    get_logger("ding_dist")  # the library's INFO lines on rank 0, warnings on every rank
    seed = {} if args.seed is None else {"seed": args.seed}
    result = train((main_config, create_config), exp_dir=args.exp_dir, max_env_steps=args.max_env_steps, **seed)
    if get_rank() == 0:
        print(json.dumps(result, indent=2, sort_keys=True, default=str))
    return result


if __name__ == "__main__":
    main()
