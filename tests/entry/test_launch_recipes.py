"""docs/launching.md's TorchX and Kubeflow recipes: their command lines parse (torchrun's and ding-dist's parsers),
their configs split over every world size they allow, and TorchX's dry run (when TorchX is installed) starts
what the recipe says."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ding_dist.config import load_config
from ding_dist.config.presets import find_config
from ding_dist.config.split import split_errors
from ding_dist.entry.cli.parser import build_parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "launching.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


def _scalar(text: str) -> Any:
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):  # a flow sequence of JSON-like scalars
        return json.loads(text)
    if text[:1] in "\"'":
        return ast.literal_eval(text)
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def parse_yaml(text: str) -> Any:
    """The YAML subset of a Kubernetes manifest: block mappings and sequences by indentation, scalars, quoted
    strings and flow sequences of them (PyYAML is not a dependency)."""
    lines = [(len(raw) - len(raw.lstrip()), raw.strip()) for raw in text.splitlines()]
    lines = [(indent, line) for indent, line in lines if line and not line.startswith("#")]

    def block(i: int, indent: int) -> tuple[Any, int]:
        if lines[i][1].startswith("- "):
            items = []
            while i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
                rest = lines[i][1][2:]
                if ":" in rest and not rest.startswith(("[", '"', "'")):  # a mapping item: re-read as its own block
                    lines[i] = (indent + 2, rest)
                    value, i = block(i, indent + 2)
                else:
                    value, i = _scalar(rest), i + 1
                items.append(value)
            return items, i
        out: dict[str, Any] = {}
        while i < len(lines) and lines[i][0] == indent:
            key, _, rest = lines[i][1].partition(":")
            if rest.strip():
                out[key], i = _scalar(rest), i + 1
            else:
                out[key], i = block(i + 1, lines[i + 1][0])
        return out, i

    value, end = block(0, lines[0][0])
    assert end == len(lines), f"unparsed line: {lines[end]}"
    return value


def test_yaml_subset_parser():
    doc = "a: 1\nb:\n  c: 'x'\n  d: [\"e\", 2]\n  f:\n    - name: g\n      h: 3\n    - i\n"
    assert parse_yaml(doc) == {"a": 1, "b": {"c": "x", "d": ["e", 2], "f": [{"name": "g", "h": 3}, "i"]}}


def _check_ding_dist_argv(argv: list[str], worlds: list[int]) -> None:
    """``argv`` parses as ``ding-dist`` arguments, and its config with its overrides splits over each world."""
    args = build_parser().parse_args(argv)
    assert args.command == "train"
    cfg = load_config(find_config(args.config), overrides=args.overrides or [])
    for world in worlds:
        assert split_errors(cfg, world) == [], world


def _torchx_command() -> list[str]:
    commands = [line for block in _blocks("bash") for line in block.splitlines() if line.startswith("torchx run")]
    assert len(commands) == 1, commands
    return shlex.split(commands[0])


def test_torchx_recipe_runs_a_valid_ding_dist_command():
    cmd = _torchx_command()
    assert cmd[:5] == ["torchx", "run", "-s", "local_cwd", "dist.ddp"]
    assert cmd[cmd.index("-m") + 1] == "ding_dist.entry.cli"
    nodes, nproc = cmd[cmd.index("-j") + 1].split("x")
    _check_ding_dist_argv(cmd[cmd.index("--") + 1 :], [int(nodes) * int(nproc)])


TORCHX = os.environ.get("TORCHX") or shutil.which("torchx")


@pytest.mark.skipif(TORCHX is None, reason="TorchX is not installed (pip install torchx, or TORCHX=path/to/torchx)")
def test_torchx_dry_run_starts_torchrun_with_the_recipes_ding_dist_command(tmp_path):
    cmd = _torchx_command()
    done = subprocess.run([TORCHX, "run", "--dryrun", *cmd[2:]], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    request = ast.literal_eval(done.stdout.split("=== SCHEDULER REQUEST ===", 1)[1].strip())
    (replica,) = next(iter(request["role_params"].values()))
    assert replica["args"][:2] == ["bash", "-c"]
    started = shlex.split(replica["args"][2])
    assert started[0] == "torchrun" and "--nproc_per_node" in started
    module = started.index("-m")
    assert started[module + 1] == "ding_dist.entry.cli"
    assert started[module + 2 :] == cmd[cmd.index("--") + 1 :]


def test_kubeflow_pytorchjob_manifest_is_elastic_and_runs_a_valid_command(monkeypatch):
    (manifest,) = [parse_yaml(block) for block in _blocks("yaml") if "PyTorchJob" in block]
    assert manifest["apiVersion"] == "kubeflow.org/v1" and manifest["kind"] == "PyTorchJob"
    elastic = manifest["spec"]["elasticPolicy"]
    assert elastic["rdzvBackend"] == "c10d"
    low, high = elastic["minReplicas"], elastic["maxReplicas"]
    assert 1 <= low <= high
    worker = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert low <= worker["replicas"] <= high
    (container,) = worker["template"]["spec"]["containers"]
    command = container["command"]
    assert command[0] == "torchrun"
    # the operator's variables for an elastic job: torchrun reads PET_<OPTION> as the option's default
    monkeypatch.setenv("PET_NNODES", f"{low}:{high}")
    monkeypatch.setenv("PET_RDZV_BACKEND", elastic["rdzvBackend"])
    monkeypatch.setenv("PET_RDZV_ENDPOINT", "ding-dist-dqn-worker-0:23456")
    from torch.distributed.run import get_args_parser

    args = get_args_parser().parse_args(command[1:])
    assert args.module and args.training_script == "ding_dist.entry.cli"
    assert (args.nnodes, args.rdzv_backend) == (f"{low}:{high}", "c10d")
    nproc = int(args.nproc_per_node)
    _check_ding_dist_argv(args.training_script_args, [n * nproc for n in range(low, high + 1)])
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    exp_dir = args.training_script_args[args.training_script_args.index("--exp-dir") + 1]
    assert any(exp_dir.startswith(m) for m in mounts), "checkpoints must go to the shared volume"
