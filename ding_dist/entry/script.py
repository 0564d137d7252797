"""What every ``@dist_mode`` entry script in ``entry/`` does: parse a few flags, train, print the result."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ding_dist.comm import get_rank
from ding_dist.utils import get_logger


def run_script(
    main_config: Mapping, create_config: Mapping, argv: Sequence[str] | None = None, description: str = ""
) -> dict[str, Any]:
    """Train ``(main_config, create_config)`` with ``--seed``, ``--max-env-steps`` and ``--exp-dir`` from ``argv``.

    Runs on whatever process group the caller set up (``@dist_mode`` in the scripts), prints the result
    dict on rank 0 and returns it.

    Example::

        @dist_mode
        def main(argv=None):
            return run_script(main_config, create_config, argv, description=__doc__)
    """
    from ding_dist.entry.pipeline import train

    first_line = (description or "Train with ding_dist.").strip().splitlines()[0]
    parser = argparse.ArgumentParser(description=first_line)
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: the config's)")
    parser.add_argument("--max-env-steps", type=int, default=None, help="stop after this many env steps")
    parser.add_argument("--exp-dir", default=None, help="experiment folder (default: runs/<exp_name>)")
    args = parser.parse_args(argv)
    get_logger("ding_dist")  # the library's INFO lines on rank 0, warnings on every rank
    seed = {} if args.seed is None else {"seed": args.seed}
    result = train((main_config, create_config), exp_dir=args.exp_dir, max_env_steps=args.max_env_steps, **seed)
    if get_rank() == 0:
        print(json.dumps(result, indent=2, sort_keys=True, default=str))
    return result
