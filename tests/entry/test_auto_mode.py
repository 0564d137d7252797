"""``ding-dist train --nproc auto``: the probe's rate, its choice, the modes it tries, and real probes end to end."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from ding_dist.entry import cli
from ding_dist.entry.cli.auto_mode import MARGIN, Probe, candidates, pick, steady_rate
from ding_dist.entry.cli.checks import check_config, checked_config
from ding_dist.entry.cli.parser import build_parser
from ding_dist.entry.threads import cpu_cores
from tests.entry.test_reliability import _Job, _no_leftovers
from tests.entry.test_stop_signals import _sigint_as_from_a_terminal

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_steady_rate_counts_from_the_first_log_point_after_an_update():
    # by hand: points with updates are (3000, 5.0) and (9000, 8.0) via (6000, 6.5): 6000 steps in 3 s
    rows = [(1000, 1.0, 0), (2000, 4.0, 0), (3000, 5.0, 7), (6000, 6.5, 40), (9000, 8.0, 70)]
    assert steady_rate(rows) == (2000.0, 3.0)
    # the whole log (9000 - 1000 steps over 7 s) or its last step alone would give other numbers
    assert steady_rate(rows)[0] != pytest.approx(8000 / 7)


def test_steady_rate_needs_two_points_after_an_update():
    assert steady_rate([]) == (None, 0.0)
    assert steady_rate([(1000, 1.0, 0), (2000, 2.0, 0), (3000, 3.0, 5)]) == (None, 0.0)
    assert steady_rate([(1000, 1.0, 3), (1000, 1.0, 3)]) == (None, 0.0)  # no time between them


def test_pick_takes_the_fastest():
    probes = [Probe("1 process", 1, [], 1000.0), Probe("--nproc 2", 2, ["--nproc", "2"], 1500.0),
              Probe("--actors 1 --learners 1", 2, ["--actors", "1", "--learners", "1"], 1400.0)]  # fmt: skip
    assert pick(probes).label == "--nproc 2"


def test_pick_prefers_fewer_processes_within_the_margin():
    best = 1000.0
    inside, outside = best * (1 - MARGIN) + 1, best * (1 - MARGIN) - 1
    assert pick([Probe("1 process", 1, [], inside), Probe("--nproc 2", 2, [], best)]).label == "1 process"
    assert pick([Probe("1 process", 1, [], outside), Probe("--nproc 2", 2, [], best)]).label == "--nproc 2"
    # among equal processes, the first listed
    two = [Probe("1 process", 1, [], 10.0), Probe("--nproc 2", 2, [], best), Probe("--actors 1", 2, [], best)]
    assert pick(two).label == "--nproc 2"


def test_pick_skips_unmeasured_modes_and_falls_back_to_one_process():
    assert pick([Probe("1 process", 1, [], None), Probe("--nproc 2", 2, [], 5.0)]).label == "--nproc 2"
    assert pick([Probe("1 process", 1, [], None), Probe("--nproc 2", 2, [], None)]).label == "1 process"


def _candidates(name: str, cores: int, *overrides: str) -> tuple[list[str], list[str]]:
    args = build_parser().parse_args(["train", str(CONFIGS / name), "--nproc", "auto", "--set", "seed=0", *overrides])
    config = check_config(args.config)
    probes, skipped = candidates(checked_config(config, args), cores, config, args)
    return [p.label for p in probes], skipped


def test_candidates_of_an_off_policy_config():
    labels, skipped = _candidates("cartpole_dqn_config.py", 4)
    assert labels == ["1 process", "--nproc 2", "--nproc 4", "--actors 3 --learners 1"]
    assert skipped == []


def test_candidates_leave_out_lagged_actors_for_an_on_policy_config_and_sizes_that_do_not_split():
    labels, skipped = _candidates("cartpole_ppo_config.py", 6, "env.collector_env_num=4")
    assert labels == ["1 process", "--nproc 2", "--nproc 4"]
    assert [line.split(":")[0] for line in skipped] == ["--nproc 6", "--actors 5 --learners 1"]
    assert "on-policy" in skipped[1]


def test_candidates_on_one_core():
    assert _candidates("cartpole_dqn_config.py", 1) == (["1 process"], [])


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--nproc", "0"], "must be an integer >= 1 or auto, got '0'"),
        (["--nproc", "many"], "must be an integer >= 1 or auto, got 'many'"),
        (["--probe-seconds", "5"], "--probe-seconds 5 needs --nproc auto"),
        (["--nproc", "auto", "--actors", "1"], "--nproc auto cannot go with --actors"),
        (["--nproc", "auto", "--population", "2"], "--nproc auto cannot go with --population"),
        (["--nproc", "auto", "--probe-seconds", "0"], "must be a finite number of seconds > 0, got 0"),
        (["--nproc", "auto", "--set", "actor_learner.actors=1"], "the config sets actor_learner.actors=1"),
    ],
)
def test_mistakes_are_one_line(tmp_path, capsys, argv, says):
    try:
        code = cli.main(["train", str(CONFIGS / "cartpole_dqn_config.py"), "--exp-dir", str(tmp_path / "run"), *argv])
    except SystemExit as e:  # the parser's own errors exit from inside it
        code = e.code
    err = capsys.readouterr().err
    assert code == 2
    assert says in err
    assert err.count("\n") == 1
    assert not (tmp_path / "run").exists()


def test_auto_cannot_resume(tmp_path, capsys):
    run = tmp_path / "run"
    assert cli.main(["train", "cartpole_dqn", "--max-env-steps", "256", "--exp-dir", str(run),
                     "--set", "policy.learn.update_per_collect=1"]) == 0  # fmt: skip
    capsys.readouterr()
    assert cli.main(["train", "--resume", str(run), "--nproc", "auto"]) == 2
    assert "--nproc auto cannot go with --resume" in capsys.readouterr().err


#: Short iterations logged often, so that a probe of a second sees several log points after its first update.
QUICK = ["policy.learn.learning_starts=0", "policy.learn.update_per_collect=4", "policy.other.log_freq=64",
         "env.n_evaluator_episode=2"]  # fmt: skip


needs_processes = pytest.mark.skipif(
    cpu_cores() < 2 or not sys.platform.startswith("linux"),
    reason="the probe tries other modes only with 2 or more cores; finds processes through /proc",
)


@needs_processes
def test_a_real_probe_picks_a_mode_says_so_trains_in_it_and_leaves_nothing(tmp_path):
    cores = cpu_cores()
    probes_at = tmp_path / "tmp"
    probes_at.mkdir()
    exp = tmp_path / "run"
    job = _Job(tmp_path, CONFIGS / "cartpole_dqn_config.py", "--nproc", "auto", "--probe-seconds", "1",
               "--max-env-steps", "1024", "--exp-dir", exp, "--set", *QUICK,
               env={"TMPDIR": str(probes_at)})  # fmt: skip
    assert job.wait(timeout=240) == 0, job.output()[-4000:]
    lines = [line for line in job.output().splitlines() if line.startswith("ding-dist:") and "left out" not in line]
    modes = _candidates("cartpole_dqn_config.py", cores, *QUICK)[0]  # on 2 cores: 1 process, --nproc 2, --actors 1
    assert lines[0].startswith(f"ding-dist: --nproc auto: trying {len(modes)} ways to run on {cores} CPU cores")
    measured = {}
    for mode, line in zip(modes, lines[1:], strict=False):
        head = f"ding-dist:   {mode}"
        assert line.startswith(head), lines
        measured[mode] = float(line[len(head) :].split()[0].replace(",", ""))
    assert all(rate > 0 for rate in measured.values())
    chosen = lines[1 + len(modes)].removeprefix("ding-dist: --nproc auto: training with ").split(" (")[0]
    assert chosen in modes
    result = json.loads((exp / "result.json").read_text())
    words = chosen.split()  # "1 process", "--nproc N" or "--actors N --learners 1": the processes it trains on
    world = 1 if words[0] == "1" else int(words[1]) + (1 if words[0] == "--actors" else 0)
    assert (result["world_size"], "actor_learner" in result) == (world, words[0] == "--actors")
    assert result["env_steps"] == 1024  # whole iterations of the config's 256 global env steps
    assert list(probes_at.glob("ding-dist-probe-*")) == []  # the probes' folders are gone (torchrun leaves its own)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["run", "tmp", job.log.name])
    assert _no_leftovers(job) == []


@needs_processes
def test_ctrl_c_during_the_probe_stops_it_and_leaves_nothing(tmp_path):
    probes_at = tmp_path / "tmp"
    probes_at.mkdir()
    job = _Job(tmp_path, CONFIGS / "cartpole_dqn_config.py", "--nproc", "auto", "--probe-seconds", "60",
               "--exp-dir", tmp_path / "run", "--set", *QUICK, env={"TMPDIR": str(probes_at)},
               preexec_fn=_sigint_as_from_a_terminal)  # fmt: skip
    job.wait_for(lambda: any(p.is_dir() for d in probes_at.glob("ding-dist-probe-*") for p in d.iterdir()), timeout=120)
    job.wait_for(lambda: len(job.leftovers()) >= 2, timeout=60)  # the probe's run has started
    job.proc.send_signal(signal.SIGINT)
    assert job.wait(timeout=90) == 130, job.output()[-3000:]
    assert job.output().rstrip().endswith("ding-dist: interrupted (SIGINT)")
    assert list(probes_at.glob("ding-dist-probe-*")) == []
    assert not (tmp_path / "run").exists()
    assert _no_leftovers(job) == []
