"""ding_dist: scale RL training from one process to many GPUs and nodes."""
