"""Off a terminal the progress is one plain line every 30 s, in env steps, with the total and an ETA."""

from __future__ import annotations

import io
import sys

from ding_dist.utils import PlainProgress, progress_bar


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_interval_and_at_close():
    out, clock = io.StringIO(), _Clock()
    bar = PlainProgress(1000, desc="env steps", stream=out, clock=clock)
    for _ in range(40):  # 40 updates and postfix refreshes over 60 s: two interval lines
        clock.now += 1.5
        bar.update(10)
        bar.set_postfix(fps="7", eval="-")
    bar.close()
    bar.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines == [
        "200/1000 env steps (20%), 7 env steps/s, ETA 0:02:00, fps=7, eval=-",
        "400/1000 env steps (40%), 7 env steps/s, ETA 0:01:30, fps=7, eval=-",
        "400/1000 env steps (40%), 7 env steps/s, ETA 0:01:30, fps=7, eval=-",
    ]


def test_unknown_total_has_no_eta():
    out, clock = io.StringIO(), _Clock()
    bar = PlainProgress(None, stream=out, clock=clock, initial=100)
    clock.now = 2.0
    bar.update(50)
    bar.close()
    assert out.getvalue() == "150 env steps, 25 env steps/s\n"


def test_progress_bar_off_a_terminal_is_plain(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    bar = progress_bar(100, desc="env steps")
    assert isinstance(bar, PlainProgress)
    bar.update(100)
    bar.close()
    assert sys.stderr.getvalue().startswith("100/100 env steps (100%)")
    assert sys.stderr.getvalue().count("\n") == 1
