"""The training loops, one module each, each reading top to bottom: data-parallel (every rank collects and
learns), and the actor and the learner of the actor-learner mode."""
