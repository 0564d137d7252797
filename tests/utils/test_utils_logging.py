"""Rank-aware logging, MetricWriter (TensorBoard + metrics.jsonl) and progress bars."""

from __future__ import annotations

import io
import json
import logging
import math
import subprocess
import sys

import pytest
import torch

from ding_dist.utils import METRICS_FILE, MetricWriter, get_logger, progress_bar, read_metrics


def test_logger_prints_info_on_single_process(capsys):
    log = get_logger("ding_dist.test_single")
    log.info("hello %d", 7)
    log.debug("hidden debug")
    err = capsys.readouterr().err
    assert "INFO ding_dist.test_single: hello 7" in err
    assert "hidden debug" not in err and "[rank" not in err
    get_logger("ding_dist.other")  # a second logger of the package must not add a second handler
    assert sum(getattr(h, "_ding_dist", False) for h in logging.getLogger("ding_dist").handlers) == 1


def test_logger_bad_name():
    with pytest.raises(ValueError, match="non-empty string"):
        get_logger("")


def test_metric_writer_jsonl_and_tensorboard(tmp_path):
    with MetricWriter(tmp_path / "tb") as w:
        w.scalars({"rollout/ep_rew_mean": 10.0, "time/fps": torch.tensor(5.5)}, step=100)
        w.scalar("eval/mean_reward", 20, step=200)
        w.flush()
    recs = read_metrics(tmp_path / "tb")
    assert [(r["step"], r.get("rollout/ep_rew_mean"), r.get("eval/mean_reward")) for r in recs] == [
        (100, 10.0, None),
        (200, None, 20.0),
    ]
    assert recs[0]["time/fps"] == 5.5 and recs[0]["wall_time"] > 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("eval/mean_reward")] == [(200, 20.0)]
    assert [(e.step, e.value) for e in acc.Scalars("rollout/ep_rew_mean")] == [(100, 10.0)]


def _config_texts(folder) -> list[tuple[int, dict]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    acc.Reload()
    return [(e.step, json.loads(e.tensor_proto.string_val[0].decode())) for e in acc.Tensors("config/text_summary")]


def test_tensorboard_writer_is_made_at_the_first_record_with_the_config_as_given(tmp_path):
    """No event file (and no TensorBoard import) until something is written; then the config as it was given."""
    config = {"seed": 3, "policy": {"learn": {"learning_rate": 0.001}}}
    w = MetricWriter(tmp_path, purge_step=40, config=config)
    config["seed"] = 99  # changed after: TensorBoard gets the config the writer was given
    assert w._tb is None and not list(tmp_path.glob("events.out.tfevents.*"))
    w.scalar("train/loss", 0.5, step=48)
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 1
    w.close()
    assert _config_texts(tmp_path) == [(40, {"seed": 3, "policy": {"learn": {"learning_rate": 0.001}}})]


def test_a_writer_closed_without_records_still_writes_its_config(tmp_path):
    MetricWriter(tmp_path, config={"seed": 1}).close()
    assert _config_texts(tmp_path) == [(0, {"seed": 1})]


def test_making_a_metric_writer_imports_no_tensorboard(tmp_path):
    code = (
        "import sys\nfrom ding_dist.utils import MetricWriter\n"
        f"w = MetricWriter({str(tmp_path)!r}, config={{'seed': 1}})\n"
        "print(sorted(m for m in ('tensorboard', 'torch.utils.tensorboard') if m in sys.modules))\n"
        "w.scalar('x', 1.0, step=1)\nprint('torch.utils.tensorboard' in sys.modules)\nw.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["[]", "True"]


def test_metric_writer_purge_on_resume(tmp_path):
    with MetricWriter(tmp_path, tensorboard=False) as w:
        for step in (10, 20, 30, 40):
            w.scalar("train/loss", step / 10, step)
    with MetricWriter(tmp_path, purge_step=30, tensorboard=False) as w:
        w.scalar("train/loss", 9.0, 30)
    assert [(r["step"], r["train/loss"]) for r in read_metrics(tmp_path)] == [(10, 1.0), (20, 2.0), (30, 9.0)]


def test_metric_writer_rejects_bad_values(tmp_path):
    with MetricWriter(tmp_path, tensorboard=False) as w:
        with pytest.raises(TypeError, match="'train/loss' must be a real number, got 'x'"):
            w.scalar("train/loss", "x", 1)
        with pytest.raises(TypeError, match="step must be an int"):
            w.scalar("train/loss", 1.0, 1.5)
        with pytest.raises(ValueError, match="metric name"):
            w.scalar("step", 1.0, 1)
        w.scalars({"a": math.nan, "b": math.inf}, 3)
    (rec,) = read_metrics(tmp_path)
    assert math.isnan(rec["a"]) and rec["b"] == math.inf
    json.loads((tmp_path / METRICS_FILE).read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON {c}"))


def test_read_metrics_skips_a_truncated_last_line(tmp_path):
    with MetricWriter(tmp_path, tensorboard=False) as w:
        w.scalar("x", 1.0, 1)
        w.scalar("x", 2.0, 2)
    path = tmp_path / METRICS_FILE
    path.write_text(path.read_text()[:-15])  # cut into the last record, as a crash would
    assert [r["step"] for r in read_metrics(path)] == [1]
    with pytest.raises(FileNotFoundError, match="no metrics file"):
        read_metrics(tmp_path / "nowhere")


def test_progress_bar_single_process():
    bar = progress_bar(10, desc="steps", initial=2)
    bar.update(3)
    assert bar.n == 5 and not bar.disable
    bar.close()
    with pytest.raises(ValueError, match="total must be an int >= 0"):
        progress_bar(-1)


# ---------------------------------------------------------------------------------- two real ranks
def _two_rank_body(log_dir: str) -> dict:
    from ding_dist.comm import get_rank

    rank = get_rank()
    buf, old = io.StringIO(), sys.stderr
    sys.stderr = buf
    try:
        log = get_logger("ding_dist.test_ranks")
        log.info("info from %d", rank)
        log.warning("warning from %d", rank)
        bar = progress_bar(5, desc="bar")
        bar.update(5)
        bar_disabled = bar.disable
        bar.close()
    finally:
        sys.stderr = old
    with MetricWriter(log_dir, tensorboard=False) as w:
        w.scalar("rank_plus_one", rank + 1, step=rank)
    return {"rank": rank, "stderr": buf.getvalue(), "bar_disabled": bar_disabled, "writer": w.enabled}


def test_rank0_only_logging_with_two_ranks(tmp_path):
    try:
        from ding_dist.comm import launch
    except ImportError:
        pytest.skip("ding_dist.comm.launch is not available yet")
    out = sorted(launch(_two_rank_body, 2, str(tmp_path)), key=lambda r: r["rank"])
    r0, r1 = out
    assert "[rank 0]" in r0["stderr"] and "info from 0" in r0["stderr"] and "warning from 0" in r0["stderr"]
    assert "info from 1" not in r1["stderr"] and "[rank 1]" in r1["stderr"] and "warning from 1" in r1["stderr"]
    assert (r0["bar_disabled"], r1["bar_disabled"]) == (False, True)
    assert (r0["writer"], r1["writer"]) == (True, False)
    assert [(r["step"], r["rank_plus_one"]) for r in read_metrics(tmp_path)] == [(0, 1.0)]
