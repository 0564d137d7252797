"""``ding-dist config show`` (the resolved config, a row per key) and ``ding-dist ckpt convert`` (a checkpoint
rewritten as plain tensors and values).

Example:
    >>> from ding_dist.entry.cli import main
    >>> main(["config", "show", "cartpole_dqn"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse

from ding_dist.entry.cli.checks import check_config, checked_config
from ding_dist.entry.cli.errors import (
    PROG,
)
from ding_dist.utils.fileio import shown_path

__all__ = ["ckpt_convert", "config_show"]


def config_show(args: argparse.Namespace) -> int:
    """``ding-dist config show CONFIG``: the resolved config, a row per key (ding_dist/config/describe.py)."""
    from ding_dist.config import run_defaults
    from ding_dist.config.describe import describe, format_rows, markdown_table
    from ding_dist.config.sections import TOP_KEYS
    from ding_dist.policy import get_policy_cls

    cfg = checked_config(check_config(args.config), args)
    policy_type = cfg.create_config.policy.type
    policy_cls = get_policy_cls(policy_type)
    schema = {**TOP_KEYS.defaults(), **run_defaults(policy_type)}
    rows = describe(cfg, schema, policy_type, policy_cls.keys)
    print(markdown_table(rows, values=True) if args.markdown else format_rows(rows))
    return 0


def ckpt_convert(args: argparse.Namespace) -> int:
    """``ckpt convert FILE``: the checkpoint rewritten as plain tensors and values (:func:`convert_checkpoint`)."""
    from ding_dist.utils.checkpoint import checkpoint_is_current, convert_checkpoint, load_checkpoint

    if checkpoint_is_current(args.file):  # nothing to rewrite: no copy, no .orig
        print(f"{PROG}: {shown_path(args.file)} already loads without running code (the current format): "
              "nothing to convert, nothing written")  # fmt: skip
        return 0
    written = convert_checkpoint(args.file, args.out)
    load_checkpoint(written)  # proof: it loads without running code now
    kept = f", the original kept as {written.name}.orig" if args.out is None else ""
    print(f"{PROG}: wrote {shown_path(written)}: it loads without running code{kept}")
    return 0
