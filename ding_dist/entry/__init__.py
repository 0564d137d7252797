"""Entry points: training pipelines and evaluation (the ``ding-dist`` CLI lives in ``entry/cli.py``)."""

from ding_dist.entry.pipeline import evaluate, load_config, serial_pipeline, serial_pipeline_onpolicy, train

__all__ = ["evaluate", "load_config", "serial_pipeline", "serial_pipeline_onpolicy", "train"]
