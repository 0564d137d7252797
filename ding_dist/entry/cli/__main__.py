"""``python -m ding_dist.entry.cli ...``: the ``ding-dist`` command (how torchrun starts the local ranks)."""

from ding_dist.entry.cli.commands import run

if __name__ == "__main__":
    run()
