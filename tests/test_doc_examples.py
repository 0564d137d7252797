"""The Python examples of docs/ run: ``tools/check_doc_examples.py --fast`` (each page as one script).

Marked ``slow``: on a busy 2-core machine the five pages take 1-3 minutes, mostly interpreter and torch
start-up. The shell examples, which start training runs, are also ``slow`` and take many minutes:
``python tools/check_doc_examples.py`` runs them all.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO / "tools" / "check_doc_examples.py"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_docs_python_examples_run():
    done = subprocess.run([sys.executable, str(TOOL), "--fast"], cwd=REPO, capture_output=True, text=True, timeout=850)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
