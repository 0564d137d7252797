"""On a terminal the progress bar owns its line: log lines go through tqdm (printed above the bar) while it is
open; off a terminal nothing is redirected."""

from __future__ import annotations

import io
import logging
import re

from tqdm.contrib.logging import _TqdmLoggingHandler

from ding_dist.utils import PlainProgress, get_logger, progress_bar


class _FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _handlers() -> list[logging.Handler]:
    return list(logging.getLogger("ding_dist").handlers)


def test_log_lines_go_through_tqdm_while_a_terminal_bar_is_open(monkeypatch):
    term = _FakeTerminal()
    monkeypatch.setattr("sys.stderr", term)
    log = get_logger("ding_dist.test_redirect")
    before = _handlers()
    bar = progress_bar(100, desc="env steps")
    try:
        assert not isinstance(bar, PlainProgress)
        during = _handlers()
        assert any(isinstance(h, _TqdmLoggingHandler) for h in during)
        assert not any(getattr(h, "_ding_dist", False) for h in during)  # our plain stderr handler is out
        bar.update(10)
        log.info("eval mean return %d", 42)
    finally:
        bar.close()
    text = term.getvalue()
    # Formatted like the usual handler, and on a line of its own: tqdm cleared the bar's line ("\r") first.
    assert re.search(r"[\r\n]\d\d:\d\d:\d\d INFO ding_dist.test_redirect: eval mean return 42\n", text), text
    assert _handlers() == before  # restored once the bar is closed
    bar.close()  # a second close is harmless
    assert _handlers() == before


def test_no_redirect_off_a_terminal(monkeypatch):
    monkeypatch.setattr("sys.stderr", io.StringIO())
    get_logger("ding_dist.test_redirect")
    before = _handlers()
    bar = progress_bar(100, desc="env steps")
    try:
        assert isinstance(bar, PlainProgress)
        assert _handlers() == before
    finally:
        bar.close()


def test_no_redirect_for_a_disabled_bar(monkeypatch):
    monkeypatch.setattr("sys.stderr", _FakeTerminal())
    monkeypatch.setattr("ding_dist.utils.logging._rank_and_world", lambda: (1, 2))  # not the logging rank
    get_logger("ding_dist.test_redirect")
    before = _handlers()
    bar = progress_bar(100, desc="env steps")
    try:
        assert bar.disable and _handlers() == before
    finally:
        bar.close()


def test_root_logger_without_console_handler_is_left_alone(monkeypatch):
    monkeypatch.setattr("sys.stderr", _FakeTerminal())
    get_logger("ding_dist.test_redirect")
    root_before = list(logging.root.handlers)
    monkeypatch.setattr(logging.root, "handlers", [h for h in root_before if not isinstance(h, logging.StreamHandler)])
    kept = list(logging.root.handlers)
    bar = progress_bar(10)
    try:
        assert logging.root.handlers == kept  # no tqdm handler there: ding_dist records would print twice
    finally:
        bar.close()
