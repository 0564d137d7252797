"""benchmarks/gpu/gpu_check.sh: its CPU form runs every check that can run without a GPU (``-m quality``: run it
before taking the check to a GPU machine), where .whl/ is prepared with the carried wheels installed as on the
GPU machine, in an environment without them; a failing, crashing or hanging check is reported in its own row
while the others still run; without CUDA the plain command says so and exits 2; the commands written in the
script are those of benchmarks/gpu/README.md; --rerun-failed takes the failed rows of the last run."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest
import torch
from packaging.tags import sys_tags
from packaging.utils import parse_wheel_filename

import ding_dist as dd

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks" / "gpu"


def _bench_module(name: str) -> ModuleType:
    """A script of benchmarks/gpu/ as a module, without putting it on ``sys.path`` (its scripts import
    their siblings ``gpu_check_*`` by name, as they run on the GPU machine: those are loaded first)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# gpu_check_lib imports its checks' modules, and they gpu_check_common, by name: loaded in that order
for _name in ("common", "pipelines", "gloo", "nccl", "learner", "images", "sync"):
    _bench_module(f"gpu_check_{_name}")
gpu_check_lib = _bench_module("gpu_check_lib")
gpu_check = _bench_module("gpu_check")


def _rows(md: str) -> dict[str, dict[str, str]]:
    """The table's rows by id: {id: {name, status, figure, seconds}}."""
    rows = {}
    for line in md.splitlines():
        if not line.startswith("| ") or line.startswith("| id ") or line.startswith("| ---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 5, line
        rows[cells[0]] = dict(zip(("name", "status", "figure", "seconds"), cells[1:]))
    return rows


def _run(args: list[str], out: Path, timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPU_CHECK_FAILED_FILE": str(out / "failed_state.txt"), **(env or {})}
    env.pop("OMP_NUM_THREADS", None)
    args = [*args, "--out-dir", str(out)]
    return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def _log_names(out: Path) -> set[str]:
    """The check logs in ``DIR/gpu_check_logs.tar.gz`` (``--out-dir DIR``: one archive, a few files to copy back)."""
    with tarfile.open(out / "gpu_check_logs.tar.gz") as tar:
        return {Path(name).name for name in tar.getnames() if name.endswith(".log")}


WHEELS = REPO / ".whl"
HIDDEN = ("gymnasium", "easydict", "farama_notifications", "ale_py")  # what the GPU machine's image lacks


def _env_without_the_carried_packages(root: Path) -> Path:
    """A venv that sees this environment's packages except those .whl/ carries (and ding_dist's own install):
    the GPU machine's image as far as the check is concerned. Returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    visible = root / "visible"
    visible.mkdir()
    site_dir = Path(next(p for p in sys.path if p.endswith("site-packages") and (Path(p) / "torch").is_dir()))
    for entry in site_dir.iterdir():
        name = entry.name.lower()
        if not name.startswith(HIDDEN) and "ding_dist" not in name:
            (visible / entry.name).symlink_to(entry)
    (site,) = (root / "venv" / "lib").glob("python3*/site-packages")
    (site / "visible.pth").write_text(f"import site; site.addsitedir({str(visible)!r})\n")
    python = root / "venv" / "bin" / "python"
    probe = "import importlib.util as u; print([m for m in ('gymnasium', 'easydict', 'ding_dist') if u.find_spec(m)])"
    found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, cwd=root, check=True)
    assert found.stdout.strip() == "[]", found.stdout  # the packages are really missing there
    return python


@pytest.fixture(scope="module")
def cpu_form(tmp_path_factory) -> dict:
    """One run of the CPU form: with .whl/ prepared (benchmarks/gpu/gpu_prepare.sh), in an environment that lacks
    its packages, installing them the way the GPU machine does; else in this environment."""
    root = tmp_path_factory.mktemp("gpu_check")
    out = root / "out"
    out.mkdir()
    env = {"PYTHON": sys.executable}  # this interpreter, also when its venv is not on PATH
    if any(WHEELS.glob("*.whl")):
        env = {"PYTHON": str(_env_without_the_carried_packages(root)), "GPU_CHECK_SITE": str(root / "site")}
    proc = _run(["bash", str(BENCH / "gpu_check.sh"), "--device", "cpu", "--quick"], out, timeout=300, env=env)
    return {"proc": proc, "out": out, "wheels": "GPU_CHECK_SITE" in env, "site": root / "site"}


@pytest.mark.quality  # about 45 s on 2 cores: run with -m quality before a GPU machine is used
def test_cpu_quick_mode_runs_every_check(cpu_form):
    proc, out = cpu_form["proc"], cpu_form["out"]
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    md = (out / "gpu_check.md").read_text()
    assert md in proc.stdout  # the same table on stdout
    rows = _rows(md)
    expected = [rid for spec in gpu_check_lib.CHECKS.values() for rid in spec[3]]
    assert sorted(rows) == sorted(expected)
    skipped = {
        "c1": "skipped: no CUDA",  # nccl: the body ran over a gloo world of one instead
        "c2": "skipped: no CUDA",
        "n1": "skipped: no CUDA",  # nccl on 2 GPUs
        "f3": "skipped: no CUDA",  # 2 learners over nccl; f4 runs them on gloo
    }
    assert {rid: r["status"] for rid, r in rows.items() if r["status"] != "ok"} == skipped
    assert rows["c1"]["figure"].startswith("gloo stand-in on cpu ok")
    # every sync algorithm ran on the world of one (none was left out as not built)
    ran = rows["c2"]["figure"].split("ran: ", 1)[1].split(";", 1)[0].split(", ")
    assert ran == dd.available_algorithms()
    # the looser algorithms also ran on 2 ranks (h1-h5 ok above), each in its own row; nccl p2p (n1) is skipped
    for rid, algorithm in (("h1", "decentralized"), ("h2", "low_precision_decentralized"), ("h3", "local_sgd"),
                           ("h4", "qadam"), ("h5", "async")):  # fmt: skip
        assert rows[rid]["name"].startswith(algorithm + " ("), (rid, rows[rid])
    assert "bit-identical to the same run on cpu" in rows["h1"]["figure"]
    assert "decentralized, low_precision_decentralized" in rows["n1"]["name"]  # skipped above: nccl on 2 GPUs
    assert "4/4 cases bit-identical" in rows["b1"]["figure"]
    assert f"{len(expected)} rows, 0 failed" in md
    assert _log_names(out) == {"warmup.log"} | {f"{check_id}.log" for check_id in gpu_check_lib.CHECKS}
    assert (out / "gpu_check_failed.txt").read_text() == "\n"


@pytest.mark.quality
def test_cpu_form_installs_the_carried_wheels_in_an_environment_without_them(cpu_form):
    if not cpu_form["wheels"]:
        pytest.skip("no .whl/ folder: run bash benchmarks/gpu/gpu_prepare.sh to check the carried wheels here")
    proc = cpu_form["proc"]
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    # the wheels are for the GPU machine's CPython 3.12: on another Python its builds (ale-py's) are left out
    supported = set(sys_tags())
    wheels = [p for p in WHEELS.glob("*.whl") if supported & parse_wheel_filename(p.name)[3]]
    assert f"gpu_check: installed {len(wheels)} carried wheels into {cpu_form['site']}" in proc.stdout
    left = len(list(WHEELS.glob("*.whl"))) - len(wheels)
    assert (f"gpu_check: left out {left} carried wheel(s)" in proc.stdout) == (left > 0)
    assert sorted(p.name.split("-")[0].lower() for p in cpu_form["site"].glob("*.dist-info")) == sorted(
        p.name.split("-")[0].lower() for p in wheels
    )


def test_a_failing_check_is_reported_in_its_row_and_the_rest_still_run(tmp_path):
    cmd = [sys.executable, str(BENCH / "gpu_check.py"), "--device", "cpu", "--self-test", "--check-timeout", "3"]
    proc = _run(cmd, tmp_path, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = _rows((tmp_path / "gpu_check.md").read_text())
    assert rows["z1"]["status"] == "FAIL"
    assert rows["z1"]["figure"].startswith("ValueError: deliberate failure (log: ")  # one line of the error
    assert "second line" not in rows["z1"]["figure"]
    assert rows["z2"]["status"] == "FAIL" and "exited with code 3" in rows["z2"]["figure"]
    assert rows["z3"]["status"] == "FAIL" and "timed out after 3 s" in rows["z3"]["figure"]
    assert rows["z4"]["status"] == "ok"
    with tarfile.open(tmp_path / "gpu_check_logs.tar.gz") as tar:
        assert "Traceback" in tar.extractfile("gpu_check_logs/z1.log").read().decode()
    assert (tmp_path / "gpu_check_failed.txt").read_text() == "z1,z2,z3\n"
    rerun = f"bash benchmarks/gpu/gpu_check.sh --only z1,z2,z3 --out-dir {tmp_path}"
    assert f"gpu_check: rerun the failed rows: {rerun}\n" in proc.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU exit")
def test_without_a_gpu_the_plain_command_says_so_and_exits_2(tmp_path):
    proc = _run([sys.executable, str(BENCH / "gpu_check.py")], tmp_path, timeout=60)
    assert proc.returncode == 2
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and "no GPU" in lines[0] and "--device cpu" in lines[0], proc.stdout
    assert not (tmp_path / "gpu_check.md").exists()


def test_every_check_has_a_place_in_the_run_order_and_cells_are_escaped():
    assert sorted(gpu_check.ORDER) == sorted(gpu_check_lib.CHECKS)
    assert gpu_check.ORDER[-1] == "b6"  # the torchrun run, the likeliest to hang, comes last
    assert gpu_check._cell("a | b\nc") == "a \\| b c"
    assert set(gpu_check_lib.SIZES["quick"]) == set(gpu_check_lib.SIZES["full"])


def _written_command(text: str, tag: str) -> str:
    (line,) = [ln.split(f"{tag}: ", 1)[1] for ln in text.splitlines() if ln.startswith(f"#   {tag}: ")]
    return line


def test_the_gpu_machine_commands_are_written_alike_in_the_script_and_its_readme():
    script = (BENCH / "gpu_check.sh").read_text()
    readme = (BENCH / "README.md").read_text()
    for tag in ("DEVICE", "RERUN"):
        command = _written_command(script, tag)
        assert command.startswith("bash benchmarks/gpu/gpu_check.sh --out-dir gpu_results")
        assert f"\n{command}\n" in readme, tag  # a line of its own in a code block
    assert "bash benchmarks/gpu/gpu_prepare.sh" in readme and ".whl/" in readme
    assert "/.whl/" in (REPO / ".gitignore").read_text().split()


def test_rerun_failed_takes_the_failed_rows_of_the_last_run(tmp_path, monkeypatch, capsys):
    table = tmp_path / "gpu_check.md"
    table.write_text(
        "GPU check (...)\n\n| id | check | status | key figure | s |\n| --- | --- | --- | --- | --- |\n"
        "| a5 | x | FAIL | y | 1.0 |\n| b1 | x | ok | y | 1.0 |\n| h2 | x | FAIL | y | (in h0) |\n"
    )
    assert gpu_check._failed_ids(str(table)) == ["a5", "h2"]
    listed = tmp_path / "failed.txt"
    listed.write_text("g2,f3\n")
    assert gpu_check._failed_ids(str(listed)) == ["g2", "f3"]
    parser = argparse.ArgumentParser()

    def select(path: str) -> list[str]:
        args = argparse.Namespace(self_test=False, rerun_failed=path, only=None, skip=None)
        return gpu_check._select(args, parser)

    assert select(str(table)) == ["a5", "h0"]  # a failed row reruns its whole check
    assert select(str(listed)) == ["g1", "f1"]
    monkeypatch.setattr(gpu_check, "FAILED_FILE", str(tmp_path / "none.txt"))
    with pytest.raises(SystemExit) as stop:
        select("")  # --rerun-failed without FILE: the last run's list on this machine
    assert stop.value.code == 2
    assert "nothing to rerun" in capsys.readouterr().out
