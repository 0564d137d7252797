"""README's Python example runs as a plain script and prints its result."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_readme_example_prints_a_result(tmp_path):
    (code,) = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    (tmp_path / "train.py").write_text(code)
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.fullmatch(r"1 rank\(s\), final loss \d+\.\d{4}\n", done.stdout), done.stdout
