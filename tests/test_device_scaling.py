"""benchmarks/gpu/device_scaling.sh: its dry run on a small CPU machine runs every row of the 16-core GPU machine's
table (quality set, 3-5 minutes on 2 cores) and writes a JSON whose ratios follow from the rows' own numbers; the
table/JSON logic on made-up rows against by-hand figures; bad arguments exit 2 naming the value; the commands
written in the script are those of benchmarks/gpu/README.md."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks" / "gpu"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("device_scaling", BENCH / "device_scaling.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("device_scaling", module)
    spec.loader.exec_module(module)
    return module


ds = _load()
IDS = ["p1c", "p1g", "a7", "a7i", "d8", "x1", "x8", "a3", "a3i", "d4", "x4", "a1", "a1i", "d2", "x2"]


@pytest.mark.quality  # 190-290 s on 2 shared cores: 15 whole training runs of 1 to 9 processes
def test_the_dry_run_runs_every_row_and_its_json_follows_from_the_rows(tmp_path):
    pytest.importorskip("ale_py", reason="the dry run trains on Pong (pip install -e '.[atari]')")
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PYTHON": sys.executable, "GPU_CHECK_SITE": str(tmp_path / "site")}
    env.pop("OMP_NUM_THREADS", None)
    cmd = ["bash", str(BENCH / "device_scaling.sh"), "--dry-run", "--out-dir", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = json.loads((out / "device_scaling.json").read_text())
    md = (out / "device_scaling.md").read_text()
    assert md in proc.stdout
    assert report["environment"]["mode"] == "dry run" and report["failed"] == []
    rows = {r["id"]: r for r in report["rows"]}
    assert [r["id"] for r in report["rows"]] == IDS  # every row, most informative first
    for rid, r in rows.items():
        assert r["status"] == "ok", (rid, r)
        assert r["env_steps"] == (384 if rid.startswith("x") else 512), rid
        assert r["steps_per_s"] == pytest.approx(r["env_steps"] / r["wall_s"]), rid
        assert r["loop_steps_per_s"] > 0 and r["updates_per_s"] > 0, rid
        base = rows[r["base"]]
        assert r["x_base"] == pytest.approx(r["loop_steps_per_s"] / base["loop_steps_per_s"]), rid
        assert r["x_base_whole"] == pytest.approx(r["steps_per_s"] / base["steps_per_s"]), rid
        assert r["start_s"] == pytest.approx(r["wall_s"] - r["train_wall_s"]), rid
        assert f"| {rid} | {r['run']} | cpu | {r['procs']} | {r['env_steps']} |" in md
    assert {rid: r["base"] for rid, r in rows.items()} == {rid: "x1" if rid[0] == "x" else "p1c" for rid in IDS}
    assert rows["p1c"]["x_base"] == 1.0 and rows["x1"]["x_base"] == 1.0
    for rid in ("p1g", "a7", "a7i", "a3", "a3i", "a1", "a1i"):  # PPO rows with a GPU part: also over p1g's
        assert rows[rid]["x_p1g"] == pytest.approx(rows[rid]["loop_steps_per_s"] / rows["p1g"]["loop_steps_per_s"])
    for rid in ("p1c", "d8", "d4", "d2", "x1", "x8", "x4", "x2"):
        assert rows[rid]["x_p1g"] is None, rid
    for rid in ("a7", "a7i", "a3", "a3i", "a1", "a1i", "x1", "x8", "x4", "x2"):  # the roles log their waits
        assert 0 <= rows[rid]["idle_learner"] <= 1 and 0 <= rows[rid]["idle_actor"] <= 1, rid
    for rid in ("p1c", "p1g", "d8", "d4", "d2"):  # one role: nothing to wait for
        assert rows[rid]["idle_learner"] is None and rows[rid]["idle_actor"] is None, rid
    assert {rid: rows[rid]["procs"] for rid in ("a7i", "d8", "x8", "a1")} == {"a7i": 9, "d8": 8, "x8": 9, "a1": 2}
    assert rows["a3i"]["rows_per_batch"] > 0 and rows["a3"]["rows_per_batch"] is None
    with tarfile.open(out / "device_scaling_logs.tar.gz") as tar:
        assert {Path(n).name for n in tar.getnames() if n.endswith(".log")} == {f"{rid}.log" for rid in IDS}


def _rec(t: float, steps: int, iters: int, **idle: float) -> dict:
    return {"wall_time": t, "time/env_steps": steps, "time/train_iters": iters, **idle}


def test_steady_rates_and_ratios_against_figures_by_hand():
    records = [
        _rec(10.0, 1024, 4, **{"idle/learner": 0.9, "idle/actor": 0.8}),  # its interval holds the start-up
        _rec(12.0, 2048, 8, **{"idle/learner": 0.2, "idle/actor": 0.1}),
        _rec(15.0, 3072, 16, **{"idle/learner": 0.4, "idle/actor": 0.3}),
    ]
    rates = ds.steady_rates(records)
    assert rates["loop_steps_per_s"] == pytest.approx((3072 - 1024) / 5.0)
    assert rates["updates_per_s"] == pytest.approx(12 / 5.0)
    assert rates["idle_learner"] == pytest.approx(0.3) and rates["idle_actor"] == pytest.approx(0.2)
    assert ds.steady_rates(records[:1]) == {"loop_steps_per_s": None, "updates_per_s": None, "idle_learner": 0.9,
                                            "idle_actor": 0.8}  # fmt: skip
    assert ds.steady_rates([_rec(0, 0, 0), _rec(1, 8, 2)])["idle_learner"] is None  # data-parallel: no waits
    results = [
        {"id": "p1c", "base": "p1c", "status": "ok", "loop_steps_per_s": 200.0, "steps_per_s": 100.0},
        {"id": "p1g", "base": "p1c", "status": "ok", "loop_steps_per_s": 500.0, "steps_per_s": 160.0},
        {"id": "a7", "base": "p1c", "status": "ok", "loop_steps_per_s": 1500.0, "steps_per_s": 400.0},
        {"id": "d8", "base": "p1c", "status": "FAIL", "loop_steps_per_s": 700.0, "steps_per_s": None},
        {"id": "x1", "base": "x1", "status": "timeout after 60 s", "loop_steps_per_s": 300.0, "steps_per_s": None},
        {"id": "x2", "base": "x1", "status": "ok", "loop_steps_per_s": 450.0, "steps_per_s": 150.0},
    ]
    ds.add_ratios(results)
    got = {r["id"]: (r["x_base"], r["x_base_whole"], r["x_p1g"]) for r in results}
    assert got == {
        "p1c": (1.0, 1.0, None),
        "p1g": (2.5, 1.6, 1.0),
        "a7": (7.5, 4.0, 3.0),
        "d8": (3.5, None, None),  # a failed row keeps its figures, it is no base
        "x1": (None, None, None),  # a timed-out base gives no ratios
        "x2": (None, None, None),
    }


def test_the_report_is_one_table_and_its_json(tmp_path):
    results = [
        {"id": "p1c", "run": ds.ROWS["p1c"].what, "base": "p1c", "procs": 1, "device": "cpu", "status": "ok",
         "env_steps": 8192, "wall_s": 40.0, "steps_per_s": 204.8, "loop_steps_per_s": 256.0, "updates_per_s": 4.0,
         "idle_learner": None, "idle_actor": None},
        {"id": "a7", "run": ds.ROWS["a7"].what, "base": "p1c", "procs": 8, "device": "cuda", "status": "FAIL",
         "error": "exit 1: RuntimeError: a | b", "wall_s": 3.0},
        {"id": "x1", "run": ds.ROWS["x1"].what, "base": "x1", "procs": 2, "device": "cuda",
         "status": "skipped: no CUDA"},
    ]  # fmt: skip
    path = tmp_path / "r" / "device_scaling.json"
    md = ds.write_report(results, {"mode": "full"}, "Device scaling (test)", 44.4, path)
    assert md == path.with_suffix(".md").read_text()
    report = json.loads(path.read_text())
    assert report["failed"] == ["a7"] and report["total_s"] == 44.4 and report["environment"] == {"mode": "full"}
    assert [r["id"] for r in report["rows"]] == ["p1c", "a7", "x1"] and report["rows"][0]["x_base"] == 1.0
    lines = md.splitlines()
    assert lines[0] == "Device scaling (test)"
    assert lines[4].startswith(
        "| p1c | PPO, 1 process (CPU) | cpu | 1 | 8192 | 40.0 | 205 | 256 | 1.00 | 1.00 | - | 4.0 |"
    )
    assert lines[5].endswith("| FAIL: exit 1: RuntimeError: a \\| b |")  # one cell, its bar escaped
    assert lines[6].endswith("| - | - | skipped: no CUDA |")
    rerun = "bash benchmarks/gpu/device_scaling.sh --rows a7 --out-dir scaling_results"
    assert lines[-3:] == ["3 rows, 1 failed (a7), 44 s", "", f"rerun: {rerun}"]  # x1 (no CUDA) is not rerun
    assert report["rerun_command"] == rerun
    assert sorted(p.name for p in path.parent.iterdir()) == ["device_scaling.json", "device_scaling.md"]  # no temp


def test_the_rerun_command_takes_failed_timed_out_and_budget_cut_rows_in_the_tables_order():
    statuses = {"p1c": "ok", "a7": "timeout after 60 s", "x1": "skipped: no CUDA (...)", "a1": "FAIL",
                "d2": "skipped: budget (9 s of 280 s left)"}  # fmt: skip
    again = ds.rerun_command([{"id": rid, "status": st} for rid, st in statuses.items()])
    assert again == ds.DEVICE_COMMAND.replace("device_scaling.sh --out", "device_scaling.sh --rows a7,a1,d2 --out")
    assert ds._parse(["--rows", again.split("--rows ")[1].split()[0]]).ids == ["a7", "a1", "d2"]
    assert ds.rerun_command([{"id": "p1c", "status": "ok"}]) is None


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--rows", "p1c,z9"], "--rows 'p1c,z9': unknown id(s) z9; expected 'all' or some of p1c, p1g,"),
        (["--rows", ","], "unknown id(s) (none given)"),
        (["--steps", "0"], "--steps must be > 0, got 0"),
        (["--dry-run", "--device", "cuda"], "--dry-run runs on the CPU"),
    ],
)
def test_bad_arguments_exit_2_naming_the_value(args, expected, capsys):
    with pytest.raises(SystemExit) as stop:
        ds._parse(args)
    assert stop.value.code == 2
    assert expected in capsys.readouterr().err


def test_rows_run_in_the_tables_order_and_each_has_its_overrides():
    assert ds._parse(["--rows", "x2,p1c, a7"]).ids == ["p1c", "a7", "x2"]
    assert list(ds.ROWS) == IDS
    assert ds._parse([]).steps == ds.STEPS and ds._parse(["--dry-run"]).steps == 512
    a3i = ds.row_overrides(ds.ROWS["a3i"], "cuda", dry=False)
    assert a3i[-3:] == ["policy.device=cuda", "actor_learner.inference=1", "actor_learner.actor_device=cuda"]
    assert ds.row_overrides(ds.ROWS["d8"], "cuda", dry=False)[-1] == "policy.device=cpu"  # data-parallel on CPU
    assert ds.ROWS["a3i"].args == ("--actors", "3") and ds.ROWS["d4"].args == ("--nproc", "4")


def test_the_gpu_machine_commands_are_written_alike_in_the_script_and_its_readme():
    script = (BENCH / "device_scaling.sh").read_text()
    readme = (BENCH / "README.md").read_text()
    for tag in ("DEVICE", "RERUN"):
        (command,) = [ln.split(f"{tag}: ", 1)[1] for ln in script.splitlines() if ln.startswith(f"#   {tag}: ")]
        assert command.startswith("bash benchmarks/gpu/device_scaling.sh")
        assert f"\n{command}\n" in readme, tag  # a line of its own in a code block
    assert ds.DEVICE_COMMAND == [ln.split("DEVICE: ", 1)[1] for ln in script.splitlines() if "#   DEVICE: " in ln][0]
