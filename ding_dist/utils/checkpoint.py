"""Crash-safe checkpoints that cannot run code: atomic saves, loud failures on bad files, rotation, RNG capture.

A checkpoint file is ``torch.save`` of ``{"format": "ding_dist.checkpoint", "version": 2, "state": ...}``.
It is written to a temporary file in the same folder, flushed, fsync'ed and renamed onto the final name,
so a crash (even SIGKILL) mid-save leaves either the previous file or the new one, never a partial one.

A state holds only tensors and plain Python values (``dict``, ``list``, ``tuple``, ``set``, ``str``, numbers,
``bool``, ``None``, ``bytes``, torch dtypes and devices): :func:`save_checkpoint` stores numpy arrays and
scalars as tensors and Python numbers, and refuses anything else, naming where it sits. Files are read with
``torch.load(..., weights_only=True)``, which builds no other object and calls no function, so a file copied
from elsewhere cannot run code when ``ding-dist eval --ckpt`` or a resume loads it: one that needs more is
refused with :class:`UnsafeCheckpointError` (one line naming the file), and resume falls back to the newest
file that loads. Version 1 files (ding_dist before checkpoints were plain) hold numpy arrays in their RNG
and replay states: they load as they are, with numpy's array and dtype classes allowed for that load only
(they rebuild arrays and call nothing else). A file that needs more than that, if its source is trusted, is
converted once with ``ding-dist ckpt convert FILE`` (:func:`convert_checkpoint`).
"""

from __future__ import annotations

import enum
import logging
import os
import pickle
import random
import re
import shutil
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ding_dist.comm.processes import pid_alive
from ding_dist.utils.fileio import atomic_open, atomic_write_text

__all__ = [
    "CheckpointError",
    "CheckpointManager",
    "UnsafeCheckpointError",
    "capture_rng_state",
    "check_finite_weights",
    "checkpoint_is_current",
    "convert_checkpoint",
    "load_checkpoint",
    "restore_rng_state",
    "save_checkpoint",
]

logger = logging.getLogger(__name__)

_FORMAT = "ding_dist.checkpoint"
_VERSION = 2
_READS = (1, 2)  # 1: may hold numpy arrays (RNG, replay), loaded with numpy's array classes allowed
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


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint file holds more than tensors and plain values, so loading it could run code: it is refused,
    in one line naming the file, the object it needs and the command that converts it when its source is trusted.

    Example:
        >>> issubclass(UnsafeCheckpointError, CheckpointError)
        True
    """


CONVERT_COMMAND = "ding-dist ckpt convert"

_SCALARS = (str, int, float, bool, complex, bytes, type(None))
_TENSORS = (torch.Tensor, torch.nn.Parameter)
_LEAVES = (torch.dtype, torch.device, torch.Size)


def _plain(value: Any, where: str, lenient: bool = False) -> Any:
    """``value`` with numpy arrays and scalars as tensors and Python numbers; ``TypeError`` naming ``where`` for
    anything else that ``torch.load(weights_only=True)`` could not rebuild. ``lenient`` (conversion of a trusted
    old file) also turns dict, list and tuple subclasses (e.g. EasyDict, named tuples) and enums into plain ones."""
    kind = type(value)
    if kind in _SCALARS or kind in _TENSORS or isinstance(value, _LEAVES):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject or value.dtype.kind not in "biufc":
            raise TypeError(f"{where} is a numpy array of dtype {value.dtype}: a checkpoint holds numeric arrays only")
        return torch.from_numpy(np.ascontiguousarray(value))
    if isinstance(value, np.generic):
        return value.item()
    if kind in (dict, OrderedDict) or (lenient and isinstance(value, dict)):
        out = {_plain(k, f"a key of {where}", lenient): _plain(v, f"{where}[{k!r}]", lenient) for k, v in value.items()}
        return OrderedDict(out) if kind is OrderedDict else out
    if kind in (list, tuple, set) or (lenient and isinstance(value, (list, tuple, set))):
        items = [_plain(v, f"{where}[{i}]", lenient) for i, v in enumerate(value)]
        base = list if isinstance(value, list) else tuple if isinstance(value, tuple) else set
        return base(items)
    if lenient and isinstance(value, enum.Enum):
        return _plain(value.value, where, lenient)
    if lenient and isinstance(value, torch.Tensor):  # a tensor subclass: its data as a plain tensor
        return value.as_subclass(torch.Tensor).detach()
    raise TypeError(
        f"{where} is a {kind.__module__}.{kind.__qualname__}: a checkpoint holds only tensors and plain Python values "
        "(dict, list, tuple, str, numbers, bool, None), so that loading it cannot run code"
    )


def save_checkpoint(state: dict, path: str | os.PathLike) -> Path:
    """Save ``state`` to ``path`` atomically (temp file in the same folder, fsync, rename).

    ``state`` may hold tensors and plain Python values, numpy arrays and scalars (stored as tensors and Python
    numbers); anything else is a ``TypeError`` naming where it sits, raised before the file is touched.

    Example:
        >>> import tempfile, pathlib
        >>> p = save_checkpoint({"step": 3}, pathlib.Path(tempfile.mkdtemp()) / "a.pt")
        >>> load_checkpoint(p)["step"]
        3
    """
    if not isinstance(state, dict):
        raise TypeError(f"checkpoint state must be a dict, got {type(state).__name__}")
    plain = _plain(state, "state")
    final = Path(path)
    with atomic_open(final, "wb") as f:
        torch.save({"format": _FORMAT, "version": _VERSION, "state": plain}, f)
    return final


def _numpy_globals() -> list[Any]:
    """What a version-1 file's numpy arrays and scalars need: the array rebuild, ndarray, dtype and the classes
    of numeric dtypes, under their numpy 1 and numpy 2 names."""
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray
    found: list[Any] = [np.ndarray, np.dtype, *{type(np.dtype(code)) for code in "?bhilqpBHILQPefdgFDG"}]
    for fn in (multiarray._reconstruct, multiarray.scalar):
        found += [(fn, f"numpy.core.multiarray.{fn.__name__}"), (fn, f"numpy._core.multiarray.{fn.__name__}")]
    return found


@contextmanager
def _reading() -> Iterator[None]:
    with torch.serialization.safe_globals(_numpy_globals()):
        yield


_REFUSED_RE = re.compile(r"GLOBAL ([\w.]+)|Can only build .*? but got (<[^>\n]+>)")


def _refusal(error: Exception) -> tuple[str | None, str]:
    """(what ``torch.load(weights_only=True)`` refused to build, e.g. ``"posix.system"``, or None when the file
    is not a pickle it can read at all; the error's line that says why)."""
    text = str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not isinstance(error, pickle.UnpicklingError) or "Weights only load failed" not in text:
        return None, (lines or [""])[0]
    m = _REFUSED_RE.search(text)
    if m:
        return next(g for g in m.groups() if g), ""
    why = [line for line in lines if "Unsupported" in line or "WeightsUnpickler error" in line]
    return None, (why or lines)[-1].replace("WeightsUnpickler error: ", "")


def load_checkpoint(path: str | os.PathLike, map_location: Any = "cpu") -> dict:
    """Load a checkpoint written by :func:`save_checkpoint` and return its state dict, running no code of the file.

    Raises CheckpointError naming the file when it is missing, truncated, corrupt or not ours, and its subclass
    UnsafeCheckpointError when it holds objects other than tensors and plain values.

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
        with _reading():
            blob = torch.load(p, map_location=map_location, weights_only=True)
    except Exception as e:
        refused, why = _refusal(e)
        if refused is not None:
            raise UnsafeCheckpointError(
                f"checkpoint {str(p)!r} holds more than tensors and plain values ({refused}), refused: loading it "
                f"could run code; only if you trust its source, convert it with: {CONVERT_COMMAND} {p}"
            ) from None
        raise CheckpointError(f"checkpoint {str(p)!r} is truncated or corrupt ({type(e).__name__}: {why})") from e
    return _state_of(blob, p)


def _state_of(blob: Any, p: Path) -> dict:
    if not (isinstance(blob, dict) and blob.get("format") == _FORMAT and isinstance(blob.get("state"), dict)):
        raise CheckpointError(
            f"checkpoint {str(p)!r} is not a ding_dist checkpoint (expected one written by save_checkpoint)"
        )
    if blob.get("version") not in _READS:
        raise CheckpointError(
            f"checkpoint {str(p)!r} has format version {blob.get('version')!r}, this ding_dist reads versions "
            f"{', '.join(map(str, _READS))}"
        )
    return blob["state"]


def checkpoint_is_current(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a ding_dist checkpoint of the current format that loads without running code: one
    :func:`convert_checkpoint` would rewrite unchanged.

    Example:
        >>> import tempfile, pathlib
        >>> p = save_checkpoint({"step": 1}, pathlib.Path(tempfile.mkdtemp()) / "c.pt")
        >>> checkpoint_is_current(p)
        True
    """
    try:
        with _reading():
            blob = torch.load(Path(path), map_location="cpu", weights_only=True)
    except Exception:  # refused, corrupt, missing: convert_checkpoint says which
        return False
    return isinstance(blob, dict) and blob.get("format") == _FORMAT and blob.get("version") == _VERSION


def _nonfinite(value: Any, where: str) -> Iterator[tuple[str, int, int]]:
    """``(name, non-finite values, values)`` of each floating tensor under ``value`` that holds a NaN or inf."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            bad = int((~torch.isfinite(value)).sum())
            if bad:
                yield where, bad, value.numel()
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _nonfinite(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, (list, tuple)):
        for j, item in enumerate(value):
            yield from _nonfinite(item, f"{where}[{j}]")


def check_finite_weights(state: dict, path: str | os.PathLike) -> None:
    """Raise :class:`CheckpointError` in one line when the policy state of checkpoint ``state`` (its networks and
    optimizer state) holds a NaN or inf: such a file evaluates to nonsense and a resume from it fails at its first
    updates, so eval and resume refuse it at load, naming the first such tensor.

    Example (the message goes on: ``'model.w' has 1 of 2 values non-finite; evaluate or resume an earlier ...``):
        >>> check_finite_weights({"policy": {"model": {"w": torch.tensor([1.0, float("nan")])}}}, "x.pt")
        Traceback (most recent call last):
        ...
        ding_dist.utils.checkpoint.CheckpointError: checkpoint 'x.pt' holds non-finite weights (NaN or inf): ...
    """
    found = list(_nonfinite(state.get("policy"), ""))
    if found:
        name, bad, total = found[0]
        more = f" (and {len(found) - 1} more tensor(s))" if len(found) > 1 else ""
        raise CheckpointError(
            f"checkpoint {str(path)!r} holds non-finite weights (NaN or inf): {name!r} has {bad} of {total} values "
            f"non-finite{more}; evaluate or resume an earlier checkpoint"
        )


def convert_checkpoint(path: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Rewrite a checkpoint as the current format, one that loads without running code: its state with numpy
    values as tensors and numbers and, for a file :func:`load_checkpoint` refuses, dict/list/tuple subclasses and
    enums as plain ones. Reading a refused file RUNS ITS CODE (``weights_only=False``): only for files whose source
    you trust (a file that loads safely, e.g. of version 1, is read safely). Writes ``out`` (default: in place, the
    original kept as ``<name>.orig``) and returns it; a value that has no plain form is a ``CheckpointError``
    naming it.

    Example::

        convert_checkpoint("runs/old/ckpt/ckpt_000051200.pt")   # what `ding-dist ckpt convert FILE` does
    """
    p = Path(path)
    try:
        state = load_checkpoint(p)
    except UnsafeCheckpointError:
        try:
            blob = torch.load(p, map_location="cpu", weights_only=False)  # trusted by the caller: it may run code
        except Exception as e:
            raise CheckpointError(f"checkpoint {str(p)!r} cannot be read ({type(e).__name__}: {e})") from e
        state = _state_of(blob, p)
    try:
        plain = _plain(state, "state", lenient=True)
    except TypeError as e:
        raise CheckpointError(f"checkpoint {str(p)!r} cannot be converted: {e}") from None
    target = p if out is None else Path(out)
    if target.resolve() == p.resolve():
        shutil.copy2(p, p.with_name(p.name + ".orig"))
    return save_checkpoint(plain, target)


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
        """Rename an unusable checkpoint to ``corrupt_<name>`` (``unsafe_<name>`` for one refused because loading
        it could run code) with a note beside it, so rotation (which counts only ``ckpt_*.pt`` names) never keeps
        it in place of a complete checkpoint."""
        prefix = "unsafe" if isinstance(error, UnsafeCheckpointError) else "corrupt"
        aside = path.with_name(f"{prefix}_{path.name}")
        try:
            os.replace(path, aside)
            atomic_write_text(aside.with_name(aside.name + ".txt"), f"moved aside, not loadable: {error}\n")
        except OSError as move_error:  # e.g. a read-only folder: leave it, say so
            logger.warning("skipping unusable checkpoint: %s (could not move it aside: %s)", error, move_error)
            return
        logger.warning("unusable checkpoint moved aside to %s: %s", aside, error)

    def latest(self, move_aside: bool = False) -> Path | None:
        """Path of the newest checkpoint that loads, or None. Unusable ones are skipped with a warning and,
        with ``move_aside=True`` (a run that will write here: resume, restart), renamed ``corrupt_<name>`` (or
        ``unsafe_<name>``) with a note, so rotation never keeps them in place of complete checkpoints."""
        found = self._newest_loadable("cpu", move_aside)
        return None if found is None else found[0]

    def load_latest(self, map_location: Any = "cpu", move_aside: bool = False) -> dict | None:
        """State of the newest checkpoint that loads, or None when there is none (``move_aside`` as in
        :meth:`latest`)."""
        found = self._newest_loadable(map_location, move_aside)
        return None if found is None else found[1]


def capture_rng_state() -> dict:
    """Snapshot the RNGs of python ``random``, numpy's global generator, torch CPU and CUDA (if any), as plain
    values (numpy's state a tuple of its name, a list of its key words and three numbers).

    Example:
        >>> s = capture_rng_state(); a = random.random(); restore_rng_state(s); a == random.random()
        True
    """
    name, key, pos, has_gauss, gauss = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": (str(name), key.tolist(), int(pos), int(has_gauss), float(gauss)),
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
    if "numpy" in state:  # a list of key words (or an array, in version-1 files)
        name, key, pos, has_gauss, gauss = state["numpy"]
        np.random.set_state((str(name), np.asarray(key, dtype=np.uint32), int(pos), int(has_gauss), float(gauss)))
    if "torch" in state:
        torch.set_rng_state(torch.as_tensor(state["torch"], dtype=torch.uint8).cpu())
    if "cuda" in state and torch.cuda.is_available():
        cuda_states = list(state["cuda"])
        n = min(len(cuda_states), torch.cuda.device_count())
        if n < len(cuda_states):
            logger.warning("restoring CUDA RNG of %d of %d saved devices", n, len(cuda_states))
        for i in range(n):
            torch.cuda.set_rng_state(torch.as_tensor(cuda_states[i], dtype=torch.uint8).cpu(), device=i)
