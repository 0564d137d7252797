"""What the training loops compose, one module each: checkpointing (with resume), metrics, evaluation, failures
(the guarded context every loop runs in), the run folder's config files and result, the run's counters."""
