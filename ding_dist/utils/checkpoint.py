"""Crash-safe checkpoints: atomic saves, loud failures on bad files, rotation, RNG capture.

A checkpoint file is ``torch.save`` of ``{"format": "ding_dist.checkpoint", "version": 1, "state": ...}``.
It is written to a temporary file in the same folder, flushed, fsync'ed and renamed onto the final name,
so a crash (even SIGKILL) mid-save leaves either the previous file or the new one, never a partial one.
Loading uses ``weights_only=False`` because states hold optimizer, RNG and counter objects: only load
checkpoints you trust (your own runs).
"""

from __future__ import annotations

import logging
import os
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ding_dist.comm.processes import pid_alive
from ding_dist.utils.fileio import atomic_open, atomic_write_text

__all__ = [
    "CheckpointError",
    "CheckpointManager",
    "capture_rng_state",
    "load_checkpoint",
    "restore_rng_state",
    "save_checkpoint",
]

logger = logging.getLogger(__name__)

_FORMAT = "ding_dist.checkpoint"
_VERSION = 1
_CKPT_RE = re.compile(r"^ckpt_(\d+)\.pt$")
_TMP_RE = re.compile(r"^\.ckpt_\d+\.pt\.(\d+)\..*\.tmp$")


class CheckpointError(ValueError):
    """A checkpoint file is missing, truncated, corrupt or not a ding_dist checkpoint; names the file.

    Example:
        >>> raise CheckpointError("checkpoint '/tmp/x.pt' is truncated or corrupt")
        Traceback (most recent call last):
        ...
        ding_dist.utils.checkpoint.CheckpointError: checkpoint '/tmp/x.pt' is truncated or corrupt
    """


def save_checkpoint(state: dict, path: str | os.PathLike) -> Path:
    """Save ``state`` to ``path`` atomically (temp file in the same folder, fsync, rename).

    Example:
        >>> import tempfile, pathlib
        >>> p = save_checkpoint({"step": 3}, pathlib.Path(tempfile.mkdtemp()) / "a.pt")
        >>> load_checkpoint(p)["step"]
        3
    """
    if not isinstance(state, dict):
        raise TypeError(f"checkpoint state must be a dict, got {type(state).__name__}")
    final = Path(path)
    with atomic_open(final, "wb") as f:
        torch.save({"format": _FORMAT, "version": _VERSION, "state": state}, f)
    return final


def load_checkpoint(path: str | os.PathLike, map_location: Any = "cpu") -> dict:
    """Load a checkpoint written by :func:`save_checkpoint` and return its state dict.

    Raises CheckpointError naming the file when it is missing, truncated, corrupt or not ours.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "bad.pt"
        >>> _ = p.write_bytes(b"not a checkpoint")
        >>> load_checkpoint(p)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ding_dist.utils.checkpoint.CheckpointError: checkpoint '...bad.pt' is truncated or corrupt ...
    """
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"checkpoint {str(p)!r} does not exist")
    try:
        blob = torch.load(p, map_location=map_location, weights_only=False)
    except Exception as e:
        raise CheckpointError(
            f"checkpoint {str(p)!r} is truncated or corrupt ({type(e).__name__}: {(str(e).splitlines() or [''])[0]})"
        ) from e
    if not (isinstance(blob, dict) and blob.get("format") == _FORMAT and isinstance(blob.get("state"), dict)):
        raise CheckpointError(
            f"checkpoint {str(p)!r} is not a ding_dist checkpoint (expected one written by save_checkpoint)"
        )
    if blob.get("version") != _VERSION:
        raise CheckpointError(
            f"checkpoint {str(p)!r} has format version {blob.get('version')!r}, this ding_dist reads version {_VERSION}"
        )
    return blob["state"]


class CheckpointManager:
    """Numbered checkpoints ``ckpt_{step:09d}.pt`` in one folder, keeping the newest ``keep_last``.

    One process (rank 0) should write to a folder; any process may read it.

    Example:
        >>> import tempfile
        >>> mgr = CheckpointManager(tempfile.mkdtemp(), keep_last=2)
        >>> for step in (10, 20, 30):
        ...     _ = mgr.save({"step": step}, step)
        >>> [p.name for p in mgr.checkpoints()]
        ['ckpt_000000020.pt', 'ckpt_000000030.pt']
        >>> mgr.load_latest()["step"]
        30
    """

    def __init__(self, directory: str | os.PathLike, keep_last: int = 3) -> None:
        if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1:
            raise ValueError(f"keep_last must be an int >= 1, got {keep_last!r}")
        self.directory = Path(directory)
        self.keep_last = keep_last

    def path_for(self, step: int) -> Path:
        """The file name used for ``step``."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"checkpoint step must be an int >= 0, got {step!r}")
        return self.directory / f"ckpt_{step:09d}.pt"

    def checkpoints(self) -> list[Path]:
        """Complete-named checkpoint files, oldest step first (content not checked)."""
        if not self.directory.is_dir():
            return []
        found = []
        for p in self.directory.iterdir():
            m = _CKPT_RE.match(p.name)
            if m and p.is_file():
                found.append((int(m.group(1)), p))
        return [p for _, p in sorted(found)]

    def save(self, state: dict, step: int) -> Path:
        """Save ``state`` as the checkpoint of ``step``, then delete all but the newest ``keep_last``.

        The file just written is never deleted, even when files of later steps exist (left by an attempt
        that crashed before a run fell back to an older checkpoint, e.g. because the newest was corrupt).
        """
        path = self.path_for(step)
        save_checkpoint(state, path)
        existing = self.checkpoints()
        later = [p.name for p in existing if int(_CKPT_RE.match(p.name).group(1)) > step]
        if later:
            logger.warning("%s holds checkpoints of later steps than %d: %s", self.directory, step, ", ".join(later))
        for old in existing[: -self.keep_last]:
            if old != path:
                old.unlink(missing_ok=True)
        self._remove_stale_temps()
        return path

    def _remove_stale_temps(self) -> None:
        """Delete temp files left by writers that died mid-save (their pid no longer runs)."""
        for p in self.directory.iterdir():
            m = _TMP_RE.match(p.name)
            if m and int(m.group(1)) != os.getpid() and not pid_alive(int(m.group(1))):
                logger.info("removing leftover partial checkpoint %s", p)
                p.unlink(missing_ok=True)

    def _newest_loadable(self, map_location: Any, move_aside: bool = False) -> tuple[Path, dict] | None:
        for path in reversed(self.checkpoints()):
            try:
                return path, load_checkpoint(path, map_location=map_location)
            except CheckpointError as e:
                if move_aside:
                    self._move_aside(path, e)
                else:
                    logger.warning("skipping unusable checkpoint: %s", e)
        return None

    def _move_aside(self, path: Path, error: Exception) -> None:
        """Rename an unusable checkpoint to ``corrupt_<name>`` with a note beside it, so rotation (which
        counts only ``ckpt_*.pt`` names) never keeps it in place of a complete checkpoint."""
        aside = path.with_name(f"corrupt_{path.name}")
        try:
            os.replace(path, aside)
            atomic_write_text(aside.with_name(aside.name + ".txt"), f"moved aside, not loadable: {error}\n")
        except OSError as move_error:  # e.g. a read-only folder: leave it, say so
            logger.warning("skipping unusable checkpoint: %s (could not move it aside: %s)", error, move_error)
            return
        logger.warning("unusable checkpoint moved aside to %s: %s", aside, error)

    def latest(self, move_aside: bool = False) -> Path | None:
        """Path of the newest checkpoint that loads, or None. Unusable ones are skipped with a warning and,
        with ``move_aside=True`` (a run that will write here: resume, restart), renamed ``corrupt_<name>``
        with a note, so rotation never keeps them in place of complete checkpoints."""
        found = self._newest_loadable("cpu", move_aside)
        return None if found is None else found[0]

    def load_latest(self, map_location: Any = "cpu", move_aside: bool = False) -> dict | None:
        """State of the newest checkpoint that loads, or None when there is none (``move_aside`` as in
        :meth:`latest`)."""
        found = self._newest_loadable(map_location, move_aside)
        return None if found is None else found[1]


def capture_rng_state() -> dict:
    """Snapshot the RNGs of python ``random``, numpy's global generator, torch CPU and CUDA (if any).

    Example:
        >>> s = capture_rng_state(); a = random.random(); restore_rng_state(s); a == random.random()
        True
    """
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict) -> None:
    """Restore RNGs from :func:`capture_rng_state`'s output (missing parts are left alone).

    Example:
        >>> import torch
        >>> s = capture_rng_state(); x = torch.rand(2); restore_rng_state(s); bool((x == torch.rand(2)).all())
        True
    """
    if not isinstance(state, dict):
        raise TypeError(f"rng state must be a dict from capture_rng_state(), got {type(state).__name__}")
    unknown = set(state) - {"python", "numpy", "torch", "cuda"}
    if unknown:
        raise ValueError(f"unknown rng state keys {sorted(unknown)}; expected python, numpy, torch, cuda")
    if "python" in state:
        py = state["python"]
        # torch.load may give lists where random.setstate needs tuples.
        random.setstate((py[0], tuple(py[1]), py[2]))
    if "numpy" in state:
        np.random.set_state(state["numpy"])
    if "torch" in state:
        torch.set_rng_state(torch.as_tensor(state["torch"], dtype=torch.uint8).cpu())
    if "cuda" in state and torch.cuda.is_available():
        cuda_states = list(state["cuda"])
        n = min(len(cuda_states), torch.cuda.device_count())
        if n < len(cuda_states):
            logger.warning("restoring CUDA RNG of %d of %d saved devices", n, len(cuda_states))
        for i in range(n):
            torch.cuda.set_rng_state(torch.as_tensor(cuda_states[i], dtype=torch.uint8).cpu(), device=i)
