"""Who called into the collective layer: the caller's ``file:line`` for error messages, and whether an
exception came through ``ding_dist/comm`` (a collective failed, not the caller's own code).

Both look at the folder a frame's code lives in, so they name the first frame outside this package
however deep the helpers call each other.
"""

from __future__ import annotations

import os
import sys

__all__ = ["COMM_DIR", "call_site", "raised_in_comm"]

#: The folder of the collective layer's modules.
COMM_DIR = os.path.dirname(os.path.abspath(__file__))


def _in_comm(filename: str) -> bool:
    return os.path.dirname(os.path.abspath(filename)) == COMM_DIR


def call_site() -> str:
    """``file:line in function`` of the innermost caller outside ``ding_dist/comm`` (``<unknown>`` if none).

    Example:
        >>> call_site()  # doctest: +SKIP
        'train.py:12 in main'
    """
    frame = sys._getframe(1)
    while frame is not None and _in_comm(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    return f"{os.path.relpath(frame.f_code.co_filename)}:{frame.f_lineno} in {frame.f_code.co_name}"


def raised_in_comm(exc: BaseException) -> bool:
    """True when ``exc`` passed through the collective layer on its way up (a collective failed, not local code).

    Example:
        >>> raised_in_comm(ValueError("raised here"))
        False
    """
    tb = exc.__traceback__
    while tb is not None:
        if _in_comm(tb.tb_frame.f_code.co_filename):
            return True
        tb = tb.tb_next
    return False
