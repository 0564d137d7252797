"""Checkpoint files written off the training loop's hot path: a snapshot now, the file from a background thread.

:func:`snapshot` copies a state's tensors (to the CPU) so training may change the originals at once; a
:class:`BackgroundWriter` writes such snapshots one at a time on its own thread, each atomically (a temporary file
renamed onto its name, :func:`~ding_dist.utils.checkpoint.save_checkpoint`). At most one write is in flight: a
new one first waits for the previous, so files land in the order they were asked for. A write that failed (a full
disk) is raised in the training thread at the next :meth:`~BackgroundWriter.submit`, :meth:`~BackgroundWriter.check`
or :meth:`~BackgroundWriter.wait`, as the exception the write raised.

Example:
    >>> import tempfile, torch
    >>> from pathlib import Path
    >>> writer = BackgroundWriter()
    >>> w = torch.zeros(2)
    >>> path = Path(tempfile.mkdtemp()) / "ckpt.pt"
    >>> writer.submit(lambda state: save_checkpoint(state, path), {"w": w})
    >>> w += 1  # the snapshot was taken: the file holds zeros
    >>> writer.wait(); load_checkpoint(path)["w"].tolist()
    [0.0, 0.0]
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ding_dist.utils.checkpoint import load_checkpoint, save_checkpoint  # noqa: F401  (the example's names)

__all__ = ["BackgroundWriter", "snapshot"]


def snapshot(state: Any) -> Any:
    """A copy of ``state`` that later in-place changes of its tensors and arrays do not reach: tensors copied to the
    CPU, numpy arrays copied, dicts, lists, tuples and sets rebuilt, other values (numbers, strings) shared (a value
    a checkpoint cannot hold is left for :func:`~ding_dist.utils.checkpoint.save_checkpoint` to refuse).

    Example:
        >>> import torch
        >>> t = torch.ones(1); s = snapshot({"t": t, "n": [1, 2]}); t += 1
        >>> s["t"].item(), s["n"]
        (1.0, [1, 2])
    """
    if isinstance(state, torch.Tensor):
        return state.detach().to("cpu", copy=True)
    if isinstance(state, np.ndarray):
        return state.copy()
    kind = type(state)
    if kind in (dict, OrderedDict):
        return kind((k, snapshot(v)) for k, v in state.items())
    if kind in (list, tuple, set):
        return kind(snapshot(v) for v in state)
    return state


class BackgroundWriter:
    """One background thread that runs file writes one at a time, in order, each on a snapshot of its state.

    ``submit(write, state)`` snapshots ``state`` now (:func:`snapshot`) and returns; the thread then calls
    ``write(snapshot)``. ``wait()`` returns when nothing is in flight; both raise the exception of a write that
    failed since the last call, once.

    Example::

        writer = BackgroundWriter()
        writer.submit(lambda s: manager.save(s, step), state)   # returns at once
        writer.wait()                                            # before the process reports the run finished
    """

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, write: Callable[[Any], Any], state: Any) -> None:
        """Wait for the previous write, snapshot ``state`` and start ``write(snapshot)`` on a background thread."""
        self.wait()
        copy = snapshot(state)

        def run() -> None:
            try:
                write(copy)
            except BaseException as e:  # reported in the training thread: a disk full is one line there
                self._error = e

        self._thread = threading.Thread(target=run, name="ding_dist-checkpoint-writer", daemon=True)
        self._thread.start()

    def check(self) -> None:
        """Raise the exception of a write that failed (once); never waits."""
        error, self._error = self._error, None
        if error is not None:
            raise error

    def wait(self) -> None:
        """Wait until the write in flight (if any) is on disk, then :meth:`check`."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        self.check()

    @property
    def busy(self) -> bool:
        """A write is in flight."""
        return self._thread is not None and self._thread.is_alive()
