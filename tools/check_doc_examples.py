"""Every shell and Python example in docs/, README.md and ``ding-dist``'s ``--help`` runs (shortened), except the
few listed in SKIP / SKIP_LINES with the reason (other hosts, SLURM, GPUs, DI-engine, minutes of benchmarks).

::

    python tools/check_doc_examples.py            # every page and --help: minutes (shell examples train agents)
    python tools/check_doc_examples.py --fast     # the Python examples only: about a minute
    python tools/check_doc_examples.py --pages comm sync -- -x   # some pages; after -- : pytest options
    python tools/check_doc_examples.py --pages help README       # the --help examples, README's commands

(also ``python -m pytest tools/check_doc_examples.py``). The Python blocks of a page run in order as one
script in a fresh interpreter in an empty folder, as a user's script outside the clone (``PRELUDE[page]``
first: the tensors, nets and configs a fragment takes as given), so ``dd.launch`` can start ranks from it. A
shell block runs as one bash script (``set -e``: each command's exit code is checked) in a scratch folder holding
``configs/``, ``entry/`` and ``benchmarks/``. The examples of every sub-command's ``--help`` run as one script in
an empty folder, in the order of ``ding-dist --help`` (``HELP_GIVEN``: what an example takes as given, e.g. the
seed runs a plot example names), and README.md's commands (its code blocks' ``ding-dist`` parts and its inline
``ding-dist ...`` commands) as another. Every ``ding-dist train`` run is bounded: its ``--max-env-steps`` forced to
a few hundred env steps, a resume's to more than the run before it, so it continues. Each shell script is marked
``slow``; :func:`command_lines` lists every ``ding-dist`` command of the three sources (the default test run
parses them all).
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
README = ROOT / "README.md"
HELP = "help"  # the pseudo page of the --help examples
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
    ("README.md", "python -m pytest"): "installs the package and runs the test suite: .ci/run does both",
}

#: (page, text in a line of a Python block) -> why that line is left out (the rest of the block runs).
SKIP_LINES: dict[tuple[str, str], str] = {
    ("comm.md", 'addr="10.0.0.1"'): "needs a master on another host",
    ("comm.md", "dd.comm.send("): "point-to-point needs a second rank",
    ("comm.md", "dd.comm.recv("): "point-to-point needs a second rank",
    ("comm.md", "dd.comm.isend("): "point-to-point needs a second rank",
    ("comm.md", "dd.comm.irecv("): "point-to-point needs a second rank",
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


#: sub-command -> shell lines run before its --help examples: what they take as given.
HELP_GIVEN: dict[str, str] = {
    "plot": "for s in 0 1 2; do ding-dist train cartpole_ppo --seed $s --exp-dir runs/ppo_s$s; done",
    "config": f"cp {ROOT / 'tests' / 'config' / 'ding_files' / 'cartpole_dqn_ding_config.py'} my_ding_config.py",
    "ckpt": 'mkdir -p runs/old/ckpt && cp "$(ls runs/cartpole_ppo/ckpt/ckpt_*.pt | tail -n 1)" '
    "runs/old/ckpt/ckpt_000051200.pt",
}


def _wanted(stem: str) -> bool:
    wanted = [p for p in os.environ.get(PAGES_ENV, "").split(",") if p]
    return not wanted or stem in wanted


def _pages() -> list[Path]:
    return [p for p in DOCS if _wanted(p.stem)]


def help_examples() -> list[tuple[str, list[str]]]:
    """``(sub-command, its example lines)`` of every sub-command's ``--help``, in the order ``ding-dist --help``
    lists them."""
    import argparse

    from ding_dist.entry.cli.parser import build_parser

    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return [
        (name, [line.strip() for line in (sub.epilog or "").splitlines() if line.strip().startswith("ding-dist ")])
        for name, sub in commands.choices.items()
    ]


def readme_commands() -> list[str]:
    """README.md's ``ding-dist`` commands: the ``ding-dist`` parts of its bash blocks (not the installs or the test
    suite), then its inline ``ding-dist ...`` code that is a whole command (it parses; no placeholder)."""
    text = README.read_text()
    found = []
    for m in BLOCK.finditer(text):
        if m.group(1) == "bash":
            found += [part.strip() for line in m.group(2).splitlines() for part in line.split("&&")
                      if part.strip().startswith("ding-dist ")]  # fmt: skip
    for span in re.findall(r"`(ding-dist [^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S)):
        if not re.search(r"\b[A-Z]{2,}\b|\.\.\.|<", span) and _parses(span):
            found.append(span)
    return list(dict.fromkeys(found))


def _parses(command: str) -> bool:
    import contextlib
    import io

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            parse_command(command)
    except SystemExit:
        return False
    return True


def parse_command(command: str):
    """``command``'s ``ding-dist`` arguments parsed by the CLI's parser (``SystemExit`` when they do not parse);
    shell variables stand for ``1``. ``torchrun ... -m ding_dist.entry.cli train ...`` and ``srun ding-dist ...``
    are parsed from the ``ding-dist`` part on."""
    import shlex

    from ding_dist.entry.cli.parser import build_parser

    words = shlex.split(re.sub(r"\$\{?\w+\}?", "1", re.sub(r"\s+#.*$", "", command)))
    for marker in ("ding-dist", "ding_dist.entry.cli"):
        if marker in words:
            args = words[words.index(marker) + 1 :]
            return build_parser().parse_args(args[1:] if args[:1] == ["--"] else args)  # torchx: ``-m M -- ARGS``
    raise ValueError(f"not a ding-dist command: {command!r}")


def command_lines() -> list[tuple[str, str]]:
    """``(where, command)`` for every ``ding-dist`` command of docs/'s bash blocks, README.md and the --help
    examples (skipped blocks included: they must still parse)."""
    found = [(f"ding-dist {name} --help", line) for name, lines in help_examples() for line in lines]
    found += [("README.md", line) for line in readme_commands()]
    for page in DOCS:
        for m in BLOCK.finditer(page.read_text()):
            if m.group(1) == "bash":
                found += [(f"docs/{page.name}", line) for line in _shell_lines(m.group(2), shorten=False)
                          if re.search(r"(^|\s)(ding-dist|ding_dist\.entry\.cli) ", line)]  # fmt: skip
    return found


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
    if _wanted(HELP):
        script = [line for name, lines in help_examples() for line in ([HELP_GIVEN.get(name, "")] + lines) if line]
        params.append(pytest.param(HELP, "\n".join(script), id="help", marks=[pytest.mark.slow]))
    if _wanted(README.stem):
        params.append(pytest.param(README.name, "\n".join(readme_commands()), id="README", marks=[pytest.mark.slow]))
    for page in _pages():
        for k, m in enumerate(BLOCK.finditer(page.read_text())):
            lang, code = m.groups()
            if lang == "bash":
                reason = _skip_reason(page.name, code)
                marks = [pytest.mark.slow, *([pytest.mark.skip(reason=reason)] if reason else [])]
                params.append(pytest.param(page.name, code, id=f"{page.stem}-{k}", marks=marks))
    return params


def _shorten(command: str, steps: int | str = STEPS) -> str:
    """``ding-dist train``/``resume`` and entry scripts with a small ``--max-env-steps`` (``steps``); comments
    dropped. A ``for`` loop's body is cut too (``...; do ding-dist train ...; done``)."""
    command = re.sub(r"\s+#.*$", "", command)
    runs = r"(ding-dist|ding_dist\.entry\.cli) (train|resume)|entry/\S+_main\.py"
    if re.search(runs, command) and not (command.startswith("ding-dist resume") and "--max-env-steps" not in command):
        if "--max-env-steps" in command:
            command = re.sub(r"--max-env-steps \d+", f"--max-env-steps {steps}", command)
        elif command.rstrip().endswith("; done"):
            command = command.rstrip()[: -len("; done")] + f" --max-env-steps {steps}; done"
        else:
            command += f" --max-env-steps {steps}"
    return command


def _shell_lines(code: str, shorten: bool = True) -> list[str]:
    """The commands of a shell block, continuation lines joined; ``shorten``: bounded by :func:`_shorten`, each
    resume (``--resume``, ``ding-dist resume``) given a budget above the runs before it, so it trains on."""
    joined = re.sub(r"\\\n\s*", " ", code)
    lines = [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not shorten:
        return [re.sub(r"\s+#.*$", "", line) for line in lines]
    out, resumes = [], 0
    for line in lines:
        resuming = re.search(r"--resume |ding-dist resume ", line) is not None
        resumes += resuming
        out.append(_shorten(line, int(STEPS) * (1 + resumes) if resuming else STEPS))
    return out


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
    script = tmp_path / f"docs_{Path(page).stem}.py"  # an empty folder: the shipped configs are found by name
    script.write_text(_page_script(ROOT / "docs" / page))
    done = subprocess.run([sys.executable, script.name], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=240)  # fmt: skip
    assert done.returncode == 0, f"docs/{page} (as {script}):\n{done.stderr[-3000:]}"


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("page", "code"), _shell_blocks())
def test_shell_example_runs(page, code, scratch, tmp_path):
    script = "set -e\n" + "\n".join(_shell_lines(code))  # one script: loops span lines; the first failure ends it
    where = tmp_path if page in (HELP, README.name) else scratch  # --help and README: as a user, in an empty folder
    done = subprocess.run(["bash", "-c", script], cwd=where, env=_env(), capture_output=True, text=True,
                          timeout=800)  # fmt: skip
    assert done.returncode == 0, f"{page}:\n{script}\n{done.stderr[-2000:]}"


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
    assert _shorten("for s in 1 2; do ding-dist train c --seed $s; done") == (
        f"for s in 1 2; do ding-dist train c --seed $s --max-env-steps {STEPS}; done"
    )
    # resumes train on: each to a budget above the runs before it; one without a budget keeps the run's
    assert _shell_lines("ding-dist train c.py\nding-dist train --resume r --max-env-steps 9\nding-dist resume r\n"
                        "ding-dist resume r --max-env-steps 9 --nproc 2") == [  # fmt: skip
        short, f"ding-dist train --resume r --max-env-steps {2 * int(STEPS)}", "ding-dist resume r",
        f"ding-dist resume r --max-env-steps {4 * int(STEPS)} --nproc 2",
    ]  # fmt: skip


def test_help_and_readme_examples_are_found():
    examples = dict(help_examples())
    assert list(examples) == ["train", "resume", "eval", "plot", "config", "ckpt"]
    assert all(examples.values()) and set(HELP_GIVEN) <= set(examples)
    readme = readme_commands()
    assert readme[0] == "ding-dist train configs/cartpole_ppo_config.py" and "ding-dist train cartpole_ppo" in readme
    assert not any("pip " in c or c == "ding-dist plot" for c in readme)


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
