"""The actor-learner mode on real gloo processes: counts, logs, resume, learners in sync, the lag bound,
dead actors and learners, SIGTERM, and the command line."""

from __future__ import annotations

import json
import os
import re
import signal
import time

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from ding_dist.comm import DeadRankError, LaunchError, get_rank, launch
from ding_dist.entry import pipeline
from ding_dist.entry.loops.learner_loop import LearnerLoop
from ding_dist.utils import CheckpointManager, load_checkpoint, read_metrics
from tests.entry.test_cli_args import _run
from tests.entry.test_pipeline import tiny_dqn, tiny_ppo
from tests.entry.test_reliability import DQN_CONFIG, FAST, _ckpt_steps, _Job, _no_leftovers

AL_KEYS = (
    "lag/mean",
    "lag/max",
    "lag/dropped",
    "queue/depth",
    "actors/env_steps_per_s",
    "learner/updates_per_s",
)
WAIT_KEYS = ("wait/data_s", "wait/weights_s", "wait/learner_s", "idle/learner", "idle/actor")


def _al(cfg, actors: int, learners: int = 1, **keys):
    main_cfg, create_cfg = cfg
    main_cfg.actor_learner = dict(actors=actors, learners=learners, **keys)
    main_cfg.env.stop_value = None  # these runs stop at max_env_steps: a lucky early eval must not solve CartPole
    return main_cfg, create_cfg


def _keep_sync_collectives(out: list):
    """Patch LearnerLoop.run to record how many collectives the sync engine ran for the trained network."""
    run = LearnerLoop.run

    def run_and_count(self):
        result = run(self)
        out.append(self.policy.train_model.comm_stats()["collectives"])
        return result

    LearnerLoop.run = run_and_count


def _one_actor_one_learner(exp_dir: str):
    collectives: list = []
    _keep_sync_collectives(collectives)
    first = pipeline.train(_al(tiny_dqn(), 1), seed=0, exp_dir=exp_dir, max_env_steps=1024)
    second = pipeline.train(_al(tiny_dqn(), 1), seed=0, resume=exp_dir, max_env_steps=2048)
    return get_rank(), first, second, collectives


def test_one_actor_one_learner_counts_logs_and_resumes_like_one_process(run_ranks, tmp_path):
    (r0, first, second, sync), (r1, a_first, a_second, _) = run_ranks(_one_actor_one_learner, 2, str(tmp_path))
    assert (r0, r1) == (0, 1) and "role" not in first and a_first["role"] == "actor"
    assert sync == [0, 0]  # one learner: the sync engine ran no gradient collective
    # The learner's counters follow the data-parallel schedule exactly: 64 env steps per round, learning from
    # 128 env steps, 4 updates per 64 (rounds ending at 128, ..., 1024: 15), then 16 more rounds.
    assert (first["env_steps"], first["train_iters"], first["stopped_by"]) == (1024, 15 * 4, "max_env_steps")
    assert (second["env_steps"], second["train_iters"]) == (2048, 31 * 4)
    al = first["actor_learner"]
    assert al["finished_cleanly"] and al["actors_lost"] == [] and al["lag_max"] <= al["max_lag"] == 8
    assert al["versions"] == 15  # a new weight version after every round that updated
    # The actor: versions only grow, it sent at least what the learner consumed, and it stopped when told.
    for actor in (a_first, a_second):
        assert actor["versions"] == sorted(actor["versions"]) and actor["chunks"] == len(actor["versions"])
        assert actor["chunks"] >= 16 and actor["env_steps"] == 64 * actor["chunks"]
    assert a_first["versions"][0] == 0 and a_first["versions"][-1] >= 10
    assert a_second["versions"][0] == 0  # the resumed learner's first version: its restored weights
    assert _ckpt_steps(tmp_path) == [1536, 2048]  # keep_last=2 of 512, 1024, 1536, 2048
    assert load_checkpoint(tmp_path / "ckpt" / "ckpt_000002048.pt")["roles"] == {"learners": 1, "actors": 1}
    records = [r for r in read_metrics(tmp_path / "tb" / "metrics.jsonl") if "time/fps" in r]
    assert [r["step"] for r in records] == [256, 512, 768, 1024, 1280, 1536, 1792, 2048]
    for record in records:
        assert all(k in record for k in AL_KEYS + WAIT_KEYS), sorted(record)
        assert record["actors/env_steps_per_s"] == record["actors/env_steps_per_s/rank1"] > 0
        assert record["lag/max"] <= 8 and record["lag/dropped"] == 0
        assert 0 <= record["idle/learner"] <= 1 and 0 <= record["idle/actor"] <= 1
    assert records[0]["wait/weights_s"] > 0  # the actor's wait for the first weights, in the first interval
    # The waits reach TensorBoard (what `ding-dist plot --keys wait/data_s,idle/actor` reads).
    events = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0})
    events.Reload()
    assert set(WAIT_KEYS) <= set(events.Tags()["scalars"]), events.Tags()["scalars"]
    assert len(events.Scalars("idle/learner")) == len(records)
    assert json.loads((tmp_path / "result.json").read_text())["env_steps"] == 2048


def _two_learners_two_actors(exp_dir: str):
    params: list = []
    collectives: list = []
    _keep_sync_collectives(collectives)
    run = LearnerLoop.run

    def run_and_keep_params(self):
        result = run(self)
        params.append(torch.cat([p.detach().flatten() for p in self.policy.model.parameters()]).numpy())
        return result

    LearnerLoop.run = run_and_keep_params
    dqn = pipeline.train(_al(tiny_dqn(), 2, 2), seed=0, exp_dir=f"{exp_dir}/dqn", max_env_steps=1024)
    ppo = pipeline.train(_al(tiny_ppo(), 2, 2), seed=0, exp_dir=f"{exp_dir}/ppo", max_env_steps=1024)
    return get_rank(), dqn, ppo, params, collectives


def _checkpoint_params(exp_dir) -> np.ndarray:
    state = load_checkpoint(exp_dir / "ckpt" / "ckpt_000001024.pt")["policy"]["model"]
    return torch.cat([v.flatten() for v in state.values()]).numpy()


def test_two_learners_stay_bitwise_identical(run_ranks, tmp_path):
    results = run_ranks(_two_learners_two_actors, 4, str(tmp_path))
    (_, dqn0, ppo0, (dqn_p0, ppo_p0), sync0), (_, dqn1, ppo1, (dqn_p1, ppo_p1), sync1) = results[:2]
    # One gradient allreduce per update (one bucket) plus the initial broadcast, within the learner group.
    assert sync0 == sync1 == [15 * 4 + 1, 8 * 4 + 1]
    # Gradients averaged within the learner group at every update: the same networks on both learners.
    np.testing.assert_array_equal(dqn_p0, dqn_p1)
    np.testing.assert_array_equal(ppo_p0, ppo_p1)
    np.testing.assert_array_equal(dqn_p0, _checkpoint_params(tmp_path / "dqn"))
    np.testing.assert_array_equal(ppo_p0, _checkpoint_params(tmp_path / "ppo"))
    # DQN: 64 global env steps per round (32 per learner), the data-parallel schedule: 15 x 4 updates.
    # PPO: 128 per round (64 per learner), 8 rounds of 2 epochs x 2 minibatches.
    assert (dqn0["env_steps"], dqn0["train_iters"]) == (dqn1["env_steps"], dqn1["train_iters"]) == (1024, 15 * 4)
    assert (ppo0["env_steps"], ppo0["train_iters"]) == (ppo1["env_steps"], ppo1["train_iters"]) == (1024, 8 * 4)
    for rank, (_, dqn_actor, ppo_actor, no_params, _) in enumerate(results[2:], start=2):
        assert no_params == [] and dqn_actor["rank"] == ppo_actor["rank"] == rank
        assert dqn_actor["versions"] == sorted(dqn_actor["versions"])
        assert ppo_actor["versions"] == sorted(ppo_actor["versions"])
        # Each actor steps its learner's share of the 4 envs for the whole horizon (128 / 4 = 32 steps, as one
        # process does); splitting the horizon instead would hand GAE 16-step rollouts.
        assert ppo_actor["chunk_shape"] == [32, 2] and dqn_actor["chunk_shape"] == [16, 2]
    assert dqn0["actor_learner"]["finished_cleanly"] and ppo0["actor_learner"]["finished_cleanly"]


def _slow_learner(exp_dir: str, mode: str):
    main_cfg, create_cfg = _al(tiny_ppo(), 2, max_lag=1, lag_mode=mode)
    main_cfg.policy.learn.epoch_per_collect = 40  # the learner falls behind two actors
    return pipeline.train((main_cfg, create_cfg), seed=0, exp_dir=exp_dir, max_env_steps=1024)


@pytest.mark.parametrize("mode", ["block", "drop"])
def test_policy_lag_never_exceeds_the_maximum(run_ranks, tmp_path, mode):
    learner, *actors = run_ranks(_slow_learner, 3, str(tmp_path), mode)
    al = learner["actor_learner"]
    assert learner["env_steps"] == 1024 and al["lag_max"] <= 1
    assert al["dropped_chunks"] > 0  # chunks were too old (or overwritten): the bound was needed
    records = [r for r in read_metrics(tmp_path / "tb" / "metrics.jsonl") if "lag/max" in r]
    assert records and max(r["lag/max"] for r in records) <= 1
    sent = sum(a["chunks"] for a in actors)
    assert sent >= 1024 // 128 + al["dropped_chunks"] - 4  # what was consumed or dropped was sent
    # (how long actors wait for the learner in each mode is a benchmark's figure: benchmarks/bench_actor_learner.py)


def _actor_dies(exp_dir: str, on_death: str, inference: int = 0):
    from ding_dist.worker import Collector

    if get_rank() == 2:
        collect, calls = Collector.collect, [0]

        def die_on_the_fourth_chunk(self, n_steps, env_step):
            calls[0] += 1
            if calls[0] == 4:
                os.kill(os.getpid(), signal.SIGKILL)
            return collect(self, n_steps, env_step)

        Collector.collect = die_on_the_fourth_chunk
    cfg = _al(tiny_dqn(), 2, on_actor_death=on_death, inference=inference)
    try:
        return pipeline.train(cfg, seed=0, exp_dir=exp_dir, max_env_steps=2048)
    except DeadRankError as e:  # (its class does not travel back through launch's queue)
        raise RuntimeError(f"DeadRankError ranks {e.ranks}: {e}") from None


def test_killed_actor_is_named_and_the_learner_goes_on_with_the_others(tmp_path):
    # the grace (how long the others may go on after a rank died) must hold the learner's remaining ~1,150 env steps
    # on a loaded 2-core machine: 60 s did not at 14 env steps/s (the learner was stopped); a passing run takes ~10 s
    with pytest.raises(LaunchError) as info:
        launch(_actor_dies, 3, str(tmp_path), "continue", timeout=300, comm_timeout=60, grace=240)
    assert info.value.failures == [(2, "was killed by signal SIGKILL")]  # the learner and actor 1 finished
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["env_steps"] == 2048 and result["stopped_by"] == "max_env_steps"
    assert result["actor_learner"]["actors_lost"] == [2] and result["actor_learner"]["finished_cleanly"]


def test_killed_actor_stops_the_learner_when_configured(tmp_path):
    with pytest.raises(LaunchError) as info:
        launch(_actor_dies, 3, str(tmp_path), "stop", timeout=150, comm_timeout=60, grace=30)
    failures = dict(info.value.failures)
    assert failures[2] == "was killed by signal SIGKILL"
    died = r"raised RuntimeError: DeadRankError ranks \[2\]: learner rank 0: actor rank 2 died \(.+\); stopping"
    assert re.match(died, failures[0]), failures
    assert not (tmp_path / "result.json").exists()


def _through_an_inference_rank(exp_dir: str, kill_actor: bool):
    """1 learner, 2 actors (ranks 1, 2) acting through inference rank 3; actor 2 is killed on its 4th chunk."""
    if kill_actor:
        return _actor_dies(exp_dir, "continue", inference=1)
    return pipeline.train(_al(tiny_ppo(), 2, inference=1), seed=0, exp_dir=exp_dir, max_env_steps=1024)


def test_inference_rank_acts_for_every_actor_step_and_the_run_counts_as_without_it(run_ranks, tmp_path):
    learner, *actors, inference = run_ranks(_through_an_inference_rank, 4, str(tmp_path), False)
    assert learner["env_steps"] == 1024 and learner["stopped_by"] == "max_env_steps"
    assert learner["actor_learner"]["lag_max"] <= learner["actor_learner"]["max_lag"]
    assert [a["role"] for a in actors] == ["actor", "actor"] and inference["role"] == "inference"
    assert all(a["inference_rank"] == 3 for a in actors)
    # every env step of every actor was one observation row served; each request one actor's 4 envs
    assert inference["rows"] == sum(a["env_steps"] for a in actors) == 4 * inference["requests"]
    assert inference["lost"] == [] and inference["versions_received"] > 1
    assert json.loads((tmp_path / "inference.json").read_text())["rows"] == inference["rows"]
    for a in actors:  # a chunk's version: the oldest that acted in it, never decreasing
        assert a["versions"] == sorted(a["versions"]) and a["versions"][-1] > 0


def test_killed_actor_is_left_out_by_the_inference_rank_and_the_run_goes_on(tmp_path):
    with pytest.raises(LaunchError) as info:
        launch(_through_an_inference_rank, 4, str(tmp_path), True, timeout=300, comm_timeout=60, grace=240)
    assert info.value.failures == [(2, "was killed by signal SIGKILL")]  # the learner, actor 1 and inference finished
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["env_steps"] == 2048 and result["actor_learner"]["actors_lost"] == [2]


def _mismatched_world(exp_dir: str):
    return pipeline.train(_al(tiny_dqn(), 2), exp_dir=exp_dir, max_env_steps=64)


def test_world_must_hold_actors_plus_learners(run_ranks, tmp_path):
    with pytest.raises(LaunchError, match=r"actor_learner.actors=2 \+ actor_learner.learners=1 needs a world of 3"):
        run_ranks(_mismatched_world, 2, str(tmp_path))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--learners", "2"], "--learners needs --actors"),
        (["--actors", "1", "--learners", "2"], "--actors 1 < --learners 2: every learner needs at least one actor"),
        (["--actors", "2", "--nproc", "2"], "--nproc 2 does not match --actors 2 + --learners 1"),
        (["--actors", "0"], "argument --actors: must be >= 1, got 0"),
        (["--set", "actor_learner.lag_mode=wait"], "'actor_learner.lag_mode' must be one of ['block', 'drop']"),
        (["--actors", "1", "--set", "actor_learner.inference=2"], "'actor_learner.inference' must be 0 or 1"),
        (["--set", "actor_learner.inference=1"], "'actor_learner.inference' is 1 but the run has no actors"),
        (["--actors", "2", "--set", "actor_learner.inference=1", "policy.other.eps_ladder.enable=True"],
         "actor_learner.inference=1 acts for every actor with one epsilon"),
        (["--actors", "1", "--set", "actor_learner.inference=1", "--config-file", "cartpole_r2d2_config.py"],
         "'r2d2' is recurrent (its state lives in each actor's envs)"),
    ],
)  # fmt: skip
def test_bad_actor_learner_flags_are_one_line_and_exit_2(tmp_path, capsys, args, message):
    config = str(DQN_CONFIG)
    if "--config-file" in args:  # another shipped config
        at = args.index("--config-file")
        config, args = str(DQN_CONFIG.parent / args[at + 1]), args[:at] + args[at + 2 :]
    code, err = _run(["train", config, "--exp-dir", str(tmp_path / "exp"), *args], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and message in lines[0], lines
    assert not (tmp_path / "exp").exists()


# ---------------------------------------------------------------------------------- the command line
@pytest.mark.slow
def test_cli_trains_two_actors_and_one_learner_and_sigterm_leaves_no_process(tmp_path):
    exp = tmp_path / "exp"
    job = _Job(tmp_path, DQN_CONFIG, "--actors", "2", "--max-env-steps", "1024", "--exp-dir", exp, "--set", *FAST)
    assert job.wait(120) == 0, job.output()[-3000:]
    trained = [line for line in job.stderr_lines() if line.startswith("trained ")]
    assert len(trained) == 1 and trained[0].startswith("trained 1024 env steps (64 train iters, world size 3)")
    result = json.loads((exp / "result.json").read_text())
    assert result["actor_learner"]["actors"] == 2 and result["actor_learner"]["finished_cleanly"]
    assert _no_leftovers(job) == []

    exp = tmp_path / "sigterm"
    job = _Job(tmp_path, DQN_CONFIG, "--actors", "2", "--max-env-steps", "400000", "--exp-dir", exp, "--set", *FAST)
    job.wait_for(lambda: len(_ckpt_steps(exp)) >= 1)
    assert len(job.leftovers()) == 4  # the launcher and three ranks
    job.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    assert job.wait(60) == 143, job.output()[-3000:]
    assert time.monotonic() - signalled < 30
    assert job.stderr_lines()[-1] == "ding-dist: stopped by SIGTERM; all 3 rank(s) were stopped"
    assert _no_leftovers(job, within=5) == []
    assert CheckpointManager(exp / "ckpt").latest() is not None


@pytest.mark.slow
@pytest.mark.parametrize("victim", [pytest.param(2, marks=pytest.mark.quality), 0], ids=["actor", "learner"])
def test_cli_killed_rank_ends_the_job_with_a_summary_naming_it(tmp_path, victim):
    """Under torchrun a process that dies ends the whole job (its agent stops every rank): the summary names
    it, nothing hangs and no process is left (``on_actor_death=continue`` applies where the launcher lets the
    learners go on, as ``ding_dist.launch`` does within its grace)."""
    exp = tmp_path / "exp"
    job = _Job(tmp_path, DQN_CONFIG, "--actors", "2", "--max-env-steps", "400000", "--exp-dir", exp,
               "--timeout", "30", "--set", *FAST)  # fmt: skip
    job.wait_for(lambda: _ckpt_steps(exp))
    pid = job.rank_pid(victim, world=3)
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    assert job.wait(60) == 1, job.output()[-3000:]
    assert time.monotonic() - killed_at < 30
    last = job.stderr_lines()[-1]
    # torchrun's exit status, or (ranks forked by its agent report one failure) the heartbeat's silence
    assert re.match(rf"ding-dist: error: rank {victim} of 3 failed with signal (SIGKILL|\(unknown: it died "
                    r"without reporting\)) \(first failure\)", last), last  # fmt: skip
    assert _no_leftovers(job) == []


@pytest.mark.slow
def test_cli_max_restarts_continue_an_actor_learner_run_from_its_checkpoint(tmp_path):
    exp = tmp_path / "exp"
    job = _Job(tmp_path, DQN_CONFIG, "--actors", "1", "--max-restarts", "1", "--max-env-steps", "4096",
               "--exp-dir", exp, "--set", *FAST)  # fmt: skip
    job.wait_for(lambda: _ckpt_steps(exp))
    os.kill(job.rank_pid(1), signal.SIGKILL)  # the actor
    assert job.wait(180) == 0, job.output()[-3000:]
    resumed = re.search(r"resumed at env step (\d+), train iter (\d+)", job.output())
    assert resumed and int(resumed.group(2)) == int(resumed.group(1)) // 256 * 16  # 16 updates per 256 steps
    result = json.loads((exp / "result.json").read_text())
    assert (result["env_steps"], result["train_iters"]) == (4096, 4096 // 256 * 16)
    assert result["actor_learner"]["finished_cleanly"]
    assert _no_leftovers(job) == []
