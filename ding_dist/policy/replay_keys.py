"""The replay buffer's config keys, declared once for every policy that learns from replay.

Example:
    >>> [key.path.rsplit(".", 1)[-1] for key in replay_keys(100_000)]
    ['replay_buffer_size', 'save_in_checkpoint', 'frame_dedup', 'priority']
"""

from __future__ import annotations

from ding_dist.utils.keys import AUTO_BOOL, Key

__all__ = ["prioritized_keys", "replay_keys"]


def replay_keys(size: int, *, priority: bool = False) -> tuple[Key, ...]:
    """The replay section's keys with capacity ``size``; ``priority=False``: prioritized replay is refused (the
    policy has no use for it), True: the policy declares its own ``priority`` keys."""
    keys = (
        Key("other.replay_buffer.replay_buffer_size", size,
            "replay capacity, the run's total (each rank keeps size / N)", ">= 1", reader="pipeline"),
        Key("other.replay_buffer.save_in_checkpoint", False, "each rank also writes ckpt/replay_rank{r}.pt",
            reader="pipeline"),
        Key("other.replay_buffer.frame_dedup", None,
            "store each frame once (None: for stacked uint8 frames; False: never)", AUTO_BOOL, reader="pipeline"),
    )  # fmt: skip
    if priority:
        return keys
    return (*keys, Key("priority", False, "prioritized replay: not supported by this policy (False)", "in (False,)",
                       reader="pipeline"))  # fmt: skip


def prioritized_keys(on: bool) -> tuple[Key, ...]:
    """The keys of prioritized replay (sampling by |TD error|), on or off by default.

    Example:
        >>> [key.default for key in prioritized_keys(True)]
        [0.6, 0.4, 100000, True, True]
    """
    return (
        Key("other.replay_buffer.alpha", 0.6, "prioritized replay: priority exponent (0: uniform)", "[0, 1]",
            reader="pipeline"),
        Key("other.replay_buffer.beta", 0.4, "prioritized replay: initial importance-weight exponent", "[0, 1]",
            reader="pipeline"),
        Key("other.replay_buffer.anneal_step", 100000,
            "prioritized replay: draws over which beta rises to 1 (0: constant)", ">= 0", reader="pipeline"),
        Key("priority", on, "prioritized replay: sample by |TD error|, one replay over every rank's (or actor's) shard",
            "in (True, False)"),
        Key("priority_IS_weight", on, "weight each sample's loss by its importance weight (needs priority)"),
    )  # fmt: skip
