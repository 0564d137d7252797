"""A full disk, at start or mid-run, is one ``ding-dist: error:`` line and exit code 2; nothing written before is lost.

Real ``ding-dist train`` processes. Full at start: a file-size limit of 0 bytes (``RLIMIT_FSIZE``, what ``ulimit -f
0`` sets; the kernel then fails every write with EFBIG), so the first file the run writes (its lock) finds no room.
Full mid-run: the process's ``torch.save`` writes part of the second checkpoint and then fails with ENOSPC, as a
disk that fills during that write does (a tmpfs of a few KB needs root).
"""

from __future__ import annotations

import resource
import subprocess
import sys

from ding_dist.utils import CheckpointManager, load_checkpoint
from tests.entry.test_reliability import DQN_CONFIG

# Runs ding-dist with a torch.save that fills the disk during the checkpoint after the first.
FULL_MID_RUN = """
import errno, sys, torch
real, saved = torch.save, []
def save(obj, f, *args, **kwargs):
    if isinstance(obj, dict) and obj.get("format") == "ding_dist.checkpoint":
        saved.append(1)
        if len(saved) > 1:
            f.write(b"x" * 4096)
            raise OSError(errno.ENOSPC, "No space left on device")
    return real(obj, f, *args, **kwargs)
torch.save = save
sys.argv = ["ding-dist", *sys.argv[1:]]
from ding_dist.entry.cli import run
run()
"""
TRAIN = ["train", str(DQN_CONFIG), "--max-env-steps", "2000", "--set", "policy.other.checkpoint.freq=256"]


def _no_file_size(limit: int = 0):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


def test_a_disk_full_at_start_is_one_line_exit_2_and_leaves_no_lock(tmp_path):
    """Before: a traceback (OSError: File too large) from the lock's write."""
    exp = tmp_path / "exp"
    done = subprocess.run([sys.executable, "-m", "ding_dist.entry.cli", *TRAIN, "--exp-dir", str(exp)], cwd=tmp_path,
                          preexec_fn=_no_file_size(), capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.splitlines()[-1]
    assert last.startswith("ding-dist: error: no room to write") and "(errno EFBIG)" in last, last
    assert list(exp.iterdir()) == []  # no lock, no half-written file


def test_a_disk_full_mid_run_is_one_line_exit_2_and_keeps_the_previous_checkpoint(tmp_path):
    """Before: a traceback of the checkpoint's write (the previous checkpoint stayed intact)."""
    exp = tmp_path / "exp"
    done = subprocess.run([sys.executable, "-c", FULL_MID_RUN, *TRAIN, "--exp-dir", str(exp)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stderr.splitlines()[-1] == (
        f"ding-dist: error: no room to write {exp / 'ckpt' / 'ckpt_000000512.pt'}: No space left on device (errno "
        "ENOSPC); free space or give --exp-dir on another disk; what the run wrote before is intact"
    )
    (kept,) = CheckpointManager(exp / "ckpt").checkpoints()
    assert kept.name == "ckpt_000000256.pt"
    assert load_checkpoint(kept)["counters"]["env_steps"] == 256
    assert sorted(p.name for p in (exp / "ckpt").iterdir()) == ["ckpt_000000256.pt"]  # no temp file left
    assert not (exp / ".lock").exists()
