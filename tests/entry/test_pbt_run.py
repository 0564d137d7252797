"""A population trained end to end (2 members of 1 rank over real gloo processes): the member folders, the lineage
replayed from its seed, the best member's checkpoint and result; and the CLI's refusals of populations that do not
fit the processes or the config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ding_dist.config.pbt import parse_hyperparams
from ding_dist.entry import cli
from ding_dist.utils import load_checkpoint, read_metrics
from ding_dist.worker.pbt import explore, initial_values, round_rng, select_exploits

HYPER = {
    "learn.learning_rate": {"min": 1e-4, "max": 1e-2, "log": True},
    "learn.entropy_weight": {"min": 0.0, "max": 0.05},
}
PBT = {"population": 2, "interval": 128, "quantile": 0.5, "hyperparams": HYPER, "seed": 3}


def _population(exp_dir: str) -> dict:
    from ding_dist.entry import train

    main_config = {
        "exp_name": "pbt_test",
        "seed": 0,
        "env": {"id": "CartPole-v1", "collector_env_num": 2, "evaluator_env_num": 1, "n_evaluator_episode": 1},
        "policy": {
            "model": {"hidden_sizes": [8]},
            "learn": {"epoch_per_collect": 1, "batch_size": 64},
            "collect": {"n_sample": 128},
            "eval": {"eval_freq": 0},
            "other": {"log_freq": 128},
        },
        "pbt": PBT,
    }
    create_config = {"env": {"type": "gymnasium"}, "env_manager": {"type": "sync"}, "policy": {"type": "ppo"}}
    first = train((main_config, create_config), exp_dir=exp_dir, max_env_steps=256, log_summary=False)
    second = train((main_config, create_config), resume=exp_dir, max_env_steps=512, log_summary=False)
    solved = {**main_config, "env": {**main_config["env"], "stop_value": 1}}  # any score reaches it
    third = train((solved, create_config), resume=exp_dir, max_env_steps=2048, log_summary=False)
    return first, second, third


def test_population_of_two_trains_exploits_resumes_and_names_its_best_member(run_ranks, tmp_path):
    exp_dir = tmp_path / "pop"
    results = run_ranks(_population, 2, str(exp_dir))
    assert results[0] == results[1]  # every rank returns the population's result
    first, second, third = results[0]  # each segment resumed from the checkpoints of the one before
    assert (first["rounds"], first["env_steps"], first["stopped_by"]) == (2, 256, "max_env_steps")
    assert (second["rounds"], second["env_steps"], second["stopped_by"]) == (4, 512, "max_env_steps")
    # the third stops at its first exploit step: a member's score reached env.stop_value, and every member stops
    result = json.loads((exp_dir / "result.json").read_text())
    assert result == json.loads(json.dumps(third))
    assert result["population"] == 2 and result["rounds"] == 5 and result["env_steps"] == 640
    assert result["stopped_by"] == "stop_value"
    members = [json.loads((exp_dir / f"member{i}" / "result.json").read_text()) for i in range(2)]
    assert [(m["env_steps"], m["stopped_by"]) for m in members] == [(640, "stop_value")] * 2
    finals = [m["last_eval_return"] for m in members]
    best = 0 if finals[0] >= finals[1] else 1
    assert result["best_member"] == best
    assert (exp_dir / "ckpt" / "best.pt").read_bytes() == Path(members[best]["checkpoint"]["last"]).read_bytes()

    # the lineage: one row per member per round; the last step of a segment (256, 512) and a stop exploit nothing
    rows = [json.loads(line) for line in (exp_dir / "lineage.jsonl").read_text().splitlines()]
    assert [(r["round"], r["env_step"]) for r in rows] == [(n, 128 * n) for n in (1, 2, 3, 4, 5) for _ in (0, 1)]
    assert [r["member"] for r in rows] == [0, 1] * 5
    assert all(r["copied_from"] is None for r in rows[2:4] + rows[6:])

    # replayed from pbt.seed: the start values, each round's selection from its scores and the perturbations
    specs = parse_hyperparams(HYPER)
    values = initial_values(specs, 2, seed=3, config_values={})
    assert [rows[0]["old_hyperparams"], rows[1]["old_hyperparams"]] == values
    copies = 0
    for round_ in (1, 2, 3, 4, 5):
        mine = rows[2 * (round_ - 1) : 2 * round_]
        rng = round_rng(3, round_)
        plan = select_exploits(mine[0]["scores"], 0.5, rng) if round_ in (1, 3) else {}  # 2, 4, 5: an end
        assert {r["member"]: r["copied_from"] for r in mine if r["copied_from"] is not None} == plan
        new = {loser: explore(values[winner], specs, rng) for loser, winner in plan.items()}
        for r in mine:
            assert r["old_hyperparams"] == values[r["member"]]
            assert r["new_hyperparams"] == new.get(r["member"], values[r["member"]])
        values = [new.get(i, values[i]) for i in range(2)]
        copies += len(plan)
    assert [m["hyperparams"] for m in result["members"]] == values

    # each member's last checkpoint holds its final hyperparameters, in its optimizer too; its logs record them
    for i in range(2):
        state = load_checkpoint(members[i]["checkpoint"]["last"])
        assert state["pbt"] == {"member": i, "round": 5, "population": 2, "hyperparams": values[i]}
        assert sorted(p.name for p in (exp_dir / f"member{i}" / "ckpt").glob("ckpt_*.pt")) == [
            f"ckpt_{step:09d}.pt" for step in (384, 512, 640)
        ]  # at the exploit steps (pbt.interval) and the ends: every member at the same steps, kept 3
        assert [g["lr"] for g in state["policy"]["optimizer"]["param_groups"]] == [values[i]["learn.learning_rate"]]
        logged = [r for r in read_metrics(exp_dir / f"member{i}" / "tb" / "metrics.jsonl") if "pbt/round" in r]
        assert [r["pbt/round"] for r in logged] == [1, 2, 3, 4, 5]
        assert logged[-1]["pbt/learn.learning_rate"] == values[i]["learn.learning_rate"]
    assert copies >= 1  # the seeded run exploits (the scores differ)
    assert [m["last_eval_return"] for m in result["members"]] == finals


def _error_line(capsys, argv: list[str]) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("ding-dist: error: ")
    return err


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--population", "2"], "population 2 is larger than the 1 process"),
        (["--population", "3", "--nproc", "4"], "population 3 does not divide the 4 processes"),
        (["--population", "2", "--actors", "2"], "a population trains data-parallel members only"),
        (["--population", "2", "--nproc", "2", "--set", "pbt.quantile=0.9"], "'pbt.quantile' must be a number"),
    ],
)
def test_cli_refuses_a_population_that_does_not_fit(capsys, tmp_path, flags, words):
    argv = ["train", "cartpole_ppo", "--exp-dir", str(tmp_path / "run"), "--max-env-steps", "256", *flags]
    assert words in _error_line(capsys, argv)
    assert not (tmp_path / "run").exists()


def test_cli_refuses_a_hyperparameter_the_policy_cannot_change(capsys, tmp_path):
    config = tmp_path / "dqn_pbt.py"
    source = (Path(__file__).resolve().parents[2] / "configs" / "cartpole_dqn_config.py").read_text()
    config.write_text(source + "\nmain_config.pbt = dict(population=2, hyperparams={'learn.batch_size': "
                      "dict(min=32, max=128)})\n")  # fmt: skip
    err = _error_line(capsys, ["train", str(config), "--nproc", "2", "--exp-dir", str(tmp_path / "run")])
    assert (
        "names 'learn.batch_size', which policy 'dqn' cannot change mid-run; it can change: learn.learning_rate" in err
    )


def test_plot_of_a_population_marks_its_exploits_and_the_best_members_schedule(tmp_path, capsys):
    from ding_dist.entry.cli.plot_pbt import build_population_figure
    from ding_dist.utils import MetricWriter

    folder = tmp_path / "pop"
    for member, returns in enumerate([[10.0, 30.0, 20.0], [40.0, 35.0, 60.0]]):
        with MetricWriter(folder / f"member{member}" / "tb", tensorboard=False) as w:
            for step, value in zip((100, 200, 300), returns):
                w.scalars({"eval/mean_reward": value}, step=step)
    lr = [[1e-3, 1.2e-3, 8e-4], [2e-3, 2e-3, 2e-3]]  # member 0 copies member 1 at steps 100 and 300
    rows = []
    for round_, step in enumerate((100, 200, 300), start=1):
        scores = [[10.0, 30.0, 20.0][round_ - 1], [40.0, 35.0, 60.0][round_ - 1]]
        for member in (0, 1):
            old = lr[member][round_ - 2] if round_ > 1 else {0: 5e-4, 1: 2e-3}[member]
            copied = 1 if member == 0 and round_ in (1, 3) else None
            new = {"learn.learning_rate": lr[member][round_ - 1]}
            rows.append({"round": round_, "env_step": step, "member": member, "score": scores[member],
                         "copied_from": copied, "old_hyperparams": {"learn.learning_rate": old},
                         "new_hyperparams": new, "scores": scores})  # fmt: skip
    (folder / "lineage.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "result.json").write_text(json.dumps({"best_member": 1}))

    fig = build_population_figure(folder)
    reward, rate = fig.axes[0], fig.axes[1]
    assert [line.get_label() for line in reward.get_lines()] == ["member 0", "member 1 (best)"]
    arrows = [(a.xy, a.xyann) for a in reward.texts]  # from the copying member's score to the copied one's
    assert arrows == [((100, 40.0), (100, 10.0)), ((300, 60.0), (300, 20.0))]
    best = rate.get_lines()[1]
    assert list(best.get_xdata()) == [0, 100, 200, 300] and list(best.get_ydata()) == [2e-3] * 4
    assert list(rate.get_lines()[0].get_ydata()) == [5e-4, 1e-3, 1.2e-3, 8e-4]
    assert best.get_linewidth() > rate.get_lines()[0].get_linewidth()

    assert cli.main(["plot", str(folder)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {folder / 'learning_curve.png'}"
    assert (folder / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"


# --- learning: a hopeless member is rescued ----------------------------------------------------------------
HOPELESS_SEED = 28  # pbt.seed whose first draws are 9.2e-4, 1.2e-3, 4.6e-4 and 1.3e-6 (member 3: hopeless)
HOPELESS_LR = {"learn.learning_rate": {"min": 1e-6, "max": 3e-3, "log": True}}
HOPELESS_BUDGET = 40_960  # env steps of each member (and of the hopeless member's run alone)


def _hopeless_population(exp_dir: str, population: bool) -> dict:
    from ding_dist.config import load_config
    from ding_dist.entry import train

    sets = ["env.stop_value=475", "policy.eval.eval_freq=2048"]
    cfg = load_config("cartpole_ppo_pbt", seed=0, overrides=sets)
    cfg.pbt.update(population=4 if population else 1, hyperparams=HOPELESS_LR, seed=HOPELESS_SEED)
    if not population:  # member 3's start, trained alone
        cfg.policy.learn.learning_rate = initial_values(parse_hyperparams(HOPELESS_LR), 4, HOPELESS_SEED, {})[3][
            "learn.learning_rate"
        ]
    return train(cfg, exp_dir=exp_dir, max_env_steps=HOPELESS_BUDGET, log_summary=False)


@pytest.mark.quality
def test_a_population_with_a_hopeless_learning_rate_reaches_475_and_rescues_it(run_ranks, tmp_path):
    draws = [v["learn.learning_rate"] for v in initial_values(parse_hyperparams(HOPELESS_LR), 4, HOPELESS_SEED, {})]
    assert min(draws) == draws[3] and draws[3] < 2e-6 and min(draws[:3]) > 4e-4

    alone = run_ranks(_hopeless_population, 1, str(tmp_path / "alone"), False)[0]
    assert alone["stopped_by"] == "max_env_steps"  # 1.3e-6 does not learn CartPole in the budget

    result = run_ranks(_hopeless_population, 4, str(tmp_path / "pop"), True)[0]
    assert result["stopped_by"] == "stop_value"
    rows = [json.loads(line) for line in (tmp_path / "pop" / "lineage.jsonl").read_text().splitlines()]
    copies = [r for r in rows if r["member"] == 3 and r["copied_from"] is not None]
    assert copies, rows  # the hopeless member copied a better one before the population stopped
    first_copy = copies[0]
    source = next(r for r in rows if r["round"] == first_copy["round"] and r["member"] == first_copy["copied_from"])
    ratio = first_copy["new_hyperparams"]["learn.learning_rate"] / source["old_hyperparams"]["learn.learning_rate"]
    assert min(abs(ratio - 0.8), abs(ratio - 1.2)) < 1e-9  # the source's value, perturbed
