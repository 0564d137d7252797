"""Workers: the collector (actor), the learner and the evaluator."""

from ding_dist.worker.collector import Collector
from ding_dist.worker.evaluator import Evaluator
from ding_dist.worker.learner import Learner, reduce_log

__all__ = ["Collector", "Evaluator", "Learner", "reduce_log"]
