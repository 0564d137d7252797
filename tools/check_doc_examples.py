"""Every shell and Python example in docs/ runs (shortened), except the few listed in SKIP / SKIP_LINES with
the reason (other hosts, SLURM, GPUs, DI-engine, minutes of benchmarks).

::

    python tools/check_doc_examples.py            # every page: minutes (shell examples train agents)
    python tools/check_doc_examples.py --fast     # the Python examples only: about a minute
    python tools/check_doc_examples.py --pages comm sync -- -x   # some pages; after -- : pytest options

(also ``python -m pytest tools/check_doc_examples.py``). The Python blocks of a page run in order as one
script in a fresh interpreter (``PRELUDE[page]`` first: the tensors, nets and configs a fragment takes as
given), so ``dd.launch`` can start ranks from it. A shell block runs as one bash script (``set -e``) in a scratch
folder holding ``configs/``, ``entry/`` and ``benchmarks/``, with ``ding-dist train`` runs cut to a few
hundred env steps; each shell block is marked ``slow``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
BLOCK = re.compile(r"```(bash|python)\n(.*?)```", re.S)
STEPS = "256"
PAGES_ENV = "DOCS_PAGES"  # comma-separated page stems to check (default: all); set by --pages

#: (page, text in the block) -> why the block does not run here.
SKIP: dict[tuple[str, str], str] = {
    ("benchmarks.md", "gpu_check.sh"): "GPU check and benchmarks: minutes of measurements",
    ("benchmarks.md", "bench_vs_ding"): "needs a DI-engine virtual environment",
    ("benchmarks.md", "bench_sync_algorithms.py"): "benchmark: minutes of measurements",
    ("benchmarks.md", "bench_actor_learner.py"): "benchmark: minutes of measurements",
    ("rl.md", "bench_rl.py"): "benchmark: minutes of measurements",
    ("sac.md", "bench_sac.py"): "benchmark: minutes of measurements",
    ("launching.md", "--nnodes 2"): "needs two hosts",
    ("training.md", "--nnodes 2"): "needs two hosts",
    ("launching.md", "srun"): "needs SLURM",
    ("training.md", "srun"): "needs SLURM",
    ("migration_from_ding.md", "dizoo/"): "needs a DI-engine checkout",
    ("migration_from_ding.md", "from ding.utils"): "imports DI-engine",
    ("reliability.md", "pytest tests/"): "runs part of this test suite",
    ("launching.md", "python train.py"): "train.py is the reader's script",
    ("launching.md", "torchrun --standalone --nproc_per_node 2 train.py"): "train.py is the reader's script",
    ("comm.md", "dd.get_group(2)"): "groups of 2 need a world of 2 or more",
}

#: (page, text in a line of a Python block) -> why that line is left out (the rest of the block runs).
SKIP_LINES: dict[tuple[str, str], str] = {
    ("comm.md", 'addr="10.0.0.1"'): "needs a master on another host",
    ("comm.md", "dd.send("): "point-to-point needs a second rank",
    ("comm.md", "dd.recv("): "point-to-point needs a second rank",
    ("comm.md", "dd.isend("): "point-to-point needs a second rank",
    ("comm.md", "dd.irecv("): "point-to-point needs a second rank",
}

#: page -> code run before its Python blocks: what a fragment takes as given (a world of one).
PRELUDE: dict[str, str] = {
    "comm.md": """
import torch
from easydict import EasyDict
import ding_dist as dd
group, out = None, torch.zeros(2)
episodes, loss, grad, grad_is_real = 3, torch.tensor(0.5), torch.zeros(2), True
cfg = EasyDict(policy=dict(learn=dict(batch_size=64), collect=dict(n_sample=64)))
a, b, stats, counts = [1], {"b": 2}, {"fps": 10.0}, {"episodes": 3}
def merge(x, y): return {k: x[k] + y[k] for k in x}
def read_rank_file(): return 0
""",
    "optim_and_data.md": """
import os
import torch
model = torch.nn.Linear(4, 1)
loader = [torch.randn(8, 4) for _ in range(3)]
def loss_fn(model, batch): return model(batch).pow(2).mean()
os.makedirs("ckpt", exist_ok=True)
episodes = [list(range(n)) for n in (5, 300, 1200, 40, 900)]
n_epochs = 2
""",
    "sync.md": """
import torch
net = torch.nn.Linear(4, 2)
x, y = torch.randn(8, 4), torch.randn(8, 2)
loss_fn = torch.nn.functional.mse_loss
world_size, rank = 1, 0
""",
}


def _pages() -> list[Path]:
    wanted = [p for p in os.environ.get(PAGES_ENV, "").split(",") if p]
    return [p for p in DOCS if not wanted or p.stem in wanted]


def _skip_reason(page: str, code: str) -> str | None:
    return next((why for (name, text), why in SKIP.items() if name == page and text in code), None)


def _page_script(page: Path) -> str | None:
    """The page's Python blocks (those not in SKIP) after its prelude, as one script; None when there are none."""
    parts = []
    for k, m in enumerate(BLOCK.finditer(page.read_text())):
        lang, code = m.groups()
        if lang != "python" or _skip_reason(page.name, code):
            continue
        lines = []
        for line in code.splitlines():
            why = next((why for (name, text), why in SKIP_LINES.items() if name == page.name and text in line), None)
            lines.append(f"{line[: len(line) - len(line.lstrip())]}pass  # skipped: {why}" if why else line)
        parts.append(f"# ---- docs/{page.name}, block {k}\n" + "\n".join(lines))
    if not parts:
        return None
    code = re.sub(r"max_env_steps=[\d_]+", f"max_env_steps={STEPS}", "\n\n".join(parts))  # training: cut short
    return PRELUDE.get(page.name, "").strip() + "\n\n" + code + "\n"


def _shell_blocks() -> list:
    params = []
    for page in _pages():
        for k, m in enumerate(BLOCK.finditer(page.read_text())):
            lang, code = m.groups()
            if lang == "bash":
                reason = _skip_reason(page.name, code)
                marks = [pytest.mark.slow, *([pytest.mark.skip(reason=reason)] if reason else [])]
                params.append(pytest.param(page.name, code, id=f"{page.stem}-{k}", marks=marks))
    return params


def _shorten(command: str) -> str:
    """``ding-dist train`` and entry scripts with a small ``--max-env-steps``; comments dropped."""
    command = re.sub(r"\s+#.*$", "", command)
    if re.search(r"(ding-dist|ding_dist\.entry\.cli) train|entry/\S+_main\.py", command):
        if "--max-env-steps" in command:
            command = re.sub(r"--max-env-steps \d+", f"--max-env-steps {STEPS}", command)
        else:
            command += f" --max-env-steps {STEPS}"
    return command


def _shell_lines(code: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", code)
    return [_shorten(line) for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _link_repo_folders(folder: Path) -> Path:
    for name in ("configs", "entry", "benchmarks"):
        (folder / name).symlink_to(ROOT / name)
    return folder


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return _link_repo_folders(tmp_path_factory.mktemp("docs"))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("page", [p.name for p in _pages() if _page_script(p)])
def test_python_examples_run(page, tmp_path):
    script = _link_repo_folders(tmp_path) / f"docs_{Path(page).stem}.py"
    script.write_text(_page_script(ROOT / "docs" / page))
    done = subprocess.run([sys.executable, script.name], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=240)  # fmt: skip
    assert done.returncode == 0, f"docs/{page} (as {script}):\n{done.stderr[-3000:]}"


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("page", "code"), _shell_blocks())
def test_shell_example_runs(page, code, scratch):
    script = "set -e\n" + "\n".join(_shell_lines(code))  # one script: loops span lines; the first failure ends it
    done = subprocess.run(["bash", "-c", script], cwd=scratch, env=_env(), capture_output=True, text=True,
                          timeout=800)  # fmt: skip
    assert done.returncode == 0, f"docs/{page}:\n{script}\n{done.stderr[-2000:]}"


def test_every_block_is_found():
    blocks = [m.group(1) for page in DOCS for m in BLOCK.finditer(page.read_text())]
    assert len(blocks) > 40 and set(blocks) == {"bash", "python"}


def test_page_script_has_prelude_skips_and_short_runs():
    comm = _page_script(ROOT / "docs" / "comm.md")
    assert comm.startswith(PRELUDE["comm.md"].strip()) and "dd.get_group(2)" not in comm
    assert "pass  # skipped: needs a master on another host" in comm and 'addr="10.0.0.1"' not in comm
    assert f"max_env_steps={STEPS})" in _page_script(ROOT / "docs" / "training.md")


def test_shorten_cuts_training_runs():
    short = f"ding-dist train c.py --max-env-steps {STEPS}"
    assert _shorten("ding-dist train c.py --max-env-steps 40000  # note") == short
    assert _shorten("ding-dist train c.py --nproc 2") == f"ding-dist train c.py --nproc 2 --max-env-steps {STEPS}"
    assert _shorten("ding-dist plot runs/x") == "ding-dist plot runs/x"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the checks with pytest; returns its exit code."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fast", action="store_true", help="only the Python examples (no training runs)")
    parser.add_argument("--pages", nargs="+", metavar="PAGE", default=[], help="page stems, e.g. comm training")
    parser.add_argument("pytest_args", nargs="*", help="after --: options for pytest (e.g. -x -k sync)")
    args = parser.parse_args(argv)
    if args.pages:
        os.environ[PAGES_ENV] = ",".join(Path(p).stem for p in args.pages)
    selection = ["-m", "not slow"] if args.fast else []
    return pytest.main(["-q", "-p", "no:cacheprovider", *selection, __file__, *args.pytest_args])


if __name__ == "__main__":
    sys.exit(main())
