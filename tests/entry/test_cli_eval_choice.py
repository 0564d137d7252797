"""``ding-dist eval``: which checkpoint of a run it loads (``--which best|last``, one line saying which and why), a
file that is not a checkpoint, and recordings that are the evaluated episodes (same seeds, same lengths)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ding_dist.config import load_config
from ding_dist.entry import cli, pipeline
from ding_dist.entry.cli import resolve_checkpoint
from ding_dist.envs import env_seeds
from ding_dist.utils.checkpoint import CheckpointManager, load_checkpoint, save_checkpoint

PPO = Path(__file__).resolve().parents[2] / "configs" / "cartpole_ppo_config.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A tiny PPO run (64 env steps, one checkpoint): its greedy CartPole episodes end at different lengths."""
    folder = tmp_path_factory.mktemp("eval") / "run"
    sizes = ["policy.collect.n_sample=64", "policy.learn.batch_size=32"]
    assert cli.main(["train", str(PPO), "--max-env-steps", "64", "--exp-dir", str(folder), "--set", *sizes]) == 0
    return folder


def _numbered(run: Path) -> Path:
    (last,) = CheckpointManager(run / "ckpt").checkpoints()
    return last


def _write_best(run: Path) -> Path:
    """``ckpt/best.pt`` as a run writes it: a checkpoint of the numbered ones' format, its counters saying the
    return and env step of the evaluation it was the best at (here made up: 500.0 at env step 32)."""
    state = load_checkpoint(_numbered(run))
    state["counters"] = {**state["counters"], "env_steps": 32, "best_eval": 500.0, "last_eval": 500.0}
    return save_checkpoint(state, run / "ckpt" / "best.pt")


def _gif_frames(path: Path) -> int:
    """Frames of a CartPole GIF (50 fps: 20 ms each; Pillow merges identical frames, so count by duration)."""
    from PIL import Image

    total = 0
    with Image.open(path) as gif:
        for i in range(gif.n_frames):
            gif.seek(i)
            total += gif.info["duration"]
    assert total % 20 == 0
    return total // 20


def _out_lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def _err_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if " INFO ding_dist." not in line]


def test_eval_loads_the_best_checkpoint_by_default_and_says_which(run, capsys):
    best = _write_best(run)
    last = _numbered(run)
    last_eval = round(float(load_checkpoint(last)["counters"]["last_eval"]), 3)
    capsys.readouterr()
    assert cli.main(["eval", "--ckpt", str(run), "--episodes", "1"]) == 0
    lines = _out_lines(capsys)
    assert lines[0] == f"evaluating {best} (best: eval return 500.0 at env step 32; --which last for the newest)"
    assert lines[1].startswith(f"checkpoint {best}: mean_return ") and len(lines) == 2
    assert cli.main(["eval", "--ckpt", str(run / "ckpt"), "--episodes", "1", "--which", "last"]) == 0
    assert _out_lines(capsys)[0] == (
        f"evaluating {last} (newest: env step 64, latest eval return {last_eval}; --which best for the best)"
    )
    assert cli.main(["eval", "--ckpt", str(run), "--episodes", "1", "--which", "best", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)  # the one line is JSON: which and why are in it
    assert (record["checkpoint"], record["which"]) == (str(best), "best")
    assert record["why"] == "best: eval return 500.0 at env step 32; --which last for the newest"
    assert resolve_checkpoint(run) == best and resolve_checkpoint(run, "last") == last


def test_without_a_best_checkpoint_eval_takes_the_newest(run, capsys, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (copy / "ckpt" / "best.pt").unlink(missing_ok=True)
    last = _numbered(copy)
    last_eval = round(float(load_checkpoint(last)["counters"]["last_eval"]), 3)
    capsys.readouterr()
    assert cli.main(["eval", "--ckpt", str(copy), "--episodes", "1"]) == 0
    assert _out_lines(capsys)[0] == (
        f"evaluating {last} (newest: env step 64, latest eval return {last_eval}; no best.pt in '{copy / 'ckpt'}')"
    )
    assert cli.main(["eval", "--ckpt", str(copy), "--episodes", "1", "--which", "best"]) == 2
    assert _err_lines(capsys) == [
        f"ding-dist: error: --which best: '{copy / 'ckpt'}' holds no best.pt (a run writes it when an evaluation "
        "beats its best return so far); --which last for its newest checkpoint"
    ]
    (copy / "ckpt" / "best.pt").write_bytes(b"cut short")  # a best.pt that does not load: the newest, and why
    assert cli.main(["eval", "--ckpt", str(copy), "--episodes", "1"]) == 0
    line = _out_lines(capsys)[0]
    assert line.startswith(f"evaluating {last} (newest: env step 64, latest eval return {last_eval}; ")
    assert f"{copy / 'ckpt' / 'best.pt'} does not load (checkpoint " in line


def test_which_with_a_checkpoint_file_is_refused(run, capsys):
    last = _numbered(run)
    capsys.readouterr()
    assert cli.main(["eval", "--ckpt", str(last), "--which", "last"]) == 2
    assert _err_lines(capsys) == [
        f"ding-dist: error: --which last chooses among a run's checkpoints, and --ckpt '{last}' is a file: give the "
        "run folder (or its ckpt/) to choose, or leave --which out"
    ]
    assert capsys.readouterr().out == ""
    assert cli.main(["eval", "--ckpt", str(last), "--episodes", "1"]) == 0  # a file alone: no line about a choice
    assert _out_lines(capsys)[0].startswith(f"checkpoint {last}: mean_return ")


@pytest.mark.parametrize(("name", "what"), [("config.json", "a run's config"), ("notes.txt", "a .txt file")])
def test_a_file_that_is_not_a_checkpoint_says_so(run, capsys, tmp_path, name, what):
    given = run / name if name == "config.json" else tmp_path / name
    given.write_text(given.read_text() if given.exists() else "some notes\n")
    capsys.readouterr()
    assert cli.main(["eval", "--ckpt", str(given)]) == 2
    assert _err_lines(capsys) == [
        f"ding-dist: error: '{given}' is not a checkpoint file ({what}); give the run folder or a ckpt/*.pt file"
    ]
    assert capsys.readouterr().out == ""


def test_a_damaged_pt_file_is_still_truncated_or_corrupt(capsys, tmp_path):
    bad = tmp_path / "ckpt_000000064.pt"
    bad.write_bytes(b"PK\x03\x04 cut short")
    config = str(PPO)
    assert cli.main(["eval", config, "--ckpt", str(bad)]) == 2
    (line,) = _err_lines(capsys)
    assert line.startswith(f"ding-dist: error: checkpoint '{bad}' is truncated or corrupt (")


def _mp4_frames(path: Path) -> int:
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")  # comes with moviepy
    return imageio_ffmpeg.count_frames_and_secs(str(path))[0]


def test_recordings_are_the_evaluated_episodes(run, capsys, tmp_path):
    """--episodes 3 --video: the three evaluated episodes (their seeds, their lengths: L + 1 frames each, the reset
    frame and one per step) back to back; --gif without --episodes: the first of the ten evaluated."""
    pytest.importorskip("pygame", reason="the render extra is not installed")
    pytest.importorskip("moviepy", reason="the render extra is not installed")
    capsys.readouterr()
    mp4 = tmp_path / "three.mp4"
    assert cli.main(["eval", "--ckpt", str(run), "--episodes", "3", "--video", str(mp4), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    lengths = [e["length"] for e in record["episodes"]]
    assert [e["seed"] for e in record["episodes"]] == env_seeds(0, 0, "evaluator", 3)  # env i's first episode
    assert _mp4_frames(mp4) == sum(lengths) + 3
    assert cli.main(["eval", "--ckpt", str(run), "--episodes", "3", "--video", str(mp4)]) == 0
    assert _out_lines(capsys)[1] == f"wrote {mp4} (the 3 evaluated episodes: {', '.join(map(str, lengths))} steps)"
    gif = tmp_path / "one.gif"
    assert cli.main(["eval", "--ckpt", str(run), "--gif", str(gif), "--json"]) == 0
    ten = json.loads(capsys.readouterr().out)["episodes"]
    assert len(ten) == 10 and ten[:3] == record["episodes"]  # the first three: the same seeds, the same episodes
    assert _gif_frames(gif) == ten[0]["length"] + 1


def test_each_recorded_episode_has_its_evaluated_length(run, tmp_path):
    """Each evaluated episode recorded alone from its seed by the policy that evaluated it: L + 1 frames."""
    pytest.importorskip("pygame", reason="the render extra is not installed")
    pytest.importorskip("moviepy", reason="the render extra is not installed")
    from ding_dist.entry.cli.video import record_episodes

    cfg = load_config(str(run / "config.json"), seed=0)
    frames: list[int] = []

    def replay(policy, result):
        for k, seed in enumerate(result["seeds"]):
            recorded = record_episodes(cfg, policy, tmp_path / f"{k}.mp4", [seed])
            assert recorded.lengths == [result["lengths"][k]] and recorded.returns == [result["returns"][k]]
            frames.append(_mp4_frames(recorded.path))

    result = pipeline.evaluate(cfg, _numbered(run), episodes=4, replay=replay)
    assert frames == [n + 1 for n in result["lengths"]] and len(frames) == 4
