"""A config is read and compiled once per process: the CLI compiles it (and tries its env and policy), then
passes the compiled config down. A config file is a program every process runs (it may ask which rank it is),
so each rank reads it once too, forked from the launcher (which then skips the env and policy trial) or started
as a fresh interpreter."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from pathlib import Path

from ding_dist.config import compiled
from ding_dist.entry.cli import main

REPO = Path(__file__).resolve().parents[2]
# A config that notes the pid of every process that executes (reads) it.
COUNTING = """
import os
from ding_dist.config import read_config
with open({log!r}, "a") as f:
    f.write(f"{{os.getpid()}}\\n")
main_config, create_config = read_config({base!r})
main_config.policy.eval.eval_freq = 0
"""


def _counting_config(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "reads.txt"
    config = tmp_path / "counting_config.py"
    config.write_text(COUNTING.format(log=str(log), base=str(REPO / "configs" / "cartpole_ppo_config.py")))
    return config, log


def _reads(log: Path) -> collections.Counter:
    return collections.Counter(log.read_text().split())


def test_one_process_reads_and_compiles_its_config_once(tmp_path, monkeypatch):
    config, log = _counting_config(tmp_path)
    compiles = []
    compile_config = compiled.compile_config

    def counting(*args, **kwargs):
        compiles.append(1)
        return compile_config(*args, **kwargs)

    monkeypatch.setattr(compiled, "compile_config", counting)
    argv = ["train", str(config), "--max-env-steps", "256", "--exp-dir", str(tmp_path / "run"), "--seed", "3"]
    assert main([*argv, "--set", "policy.learn.epoch_per_collect=1"]) == 0
    assert _reads(log) == {str(os.getpid()): 1}
    assert len(compiles) == 1


def test_each_process_of_a_two_rank_job_reads_its_config_once(tmp_path):
    config, log = _counting_config(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
    env.update(OMP_NUM_THREADS="1", DING_DIST_START_METHOD="fork")  # ranks forked from the launcher
    cmd = [sys.executable, "-m", "ding_dist.entry.cli", "train", str(config), "--nproc", "2", "--max-env-steps",
           "256", "--exp-dir", str(tmp_path / "run")]  # fmt: skip
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    reads = _reads(log)
    assert len(reads) == 3 and set(reads.values()) == {1}, reads  # the launcher and each of the 2 ranks, once
