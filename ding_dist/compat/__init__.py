"""Drop-in replacements for DI-engine modules, so code written against DI-engine runs by changing an import.

- :mod:`ding_dist.compat.pytorch_ddp_dist_helper`: ``ding.utils.pytorch_ddp_dist_helper``'s names,
  signatures and behaviour (its ``allreduce`` averages), on top of :mod:`ding_dist.comm`.

Example:
    >>> from ding_dist.compat.pytorch_ddp_dist_helper import allreduce, get_world_size
    >>> get_world_size()
    1
"""
