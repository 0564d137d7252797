"""Checks (a) and (f): ``ding_dist.entry.train`` pipelines in one process on the device (a1-a5, the zoo's
p rows), and the actor-learner mode: CPU actors, learners on the device (f1-f5)."""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path

import torch
from gpu_check_common import (
    _QUICK_EVAL,
    CONFIGS,
    REPO,
    Ctx,
    _check_result,
    _expected_device,
    _no_cuda_reason,
    _read_result,
    one_line,
    policy_device_log,
    rank_cli_train,
    row,
)

import ding_dist as dd


# ------------------------------------------------------------------------------- (a) 1-process pipelines
def check_pipeline(ctx: Ctx, check_id: str, algo: str, spec: str) -> list[dict[str, str]]:
    """``ding_dist.entry.train`` in this process with ``policy.device=spec`` (``auto``: the default)."""
    from ding_dist.entry import train

    config = CONFIGS["ppo" if algo == "auto" else algo]
    base = "ppo" if algo == "auto" else algo
    steps = ctx.size(f"{algo}_steps")
    overrides = ctx.overrides(base) + ([] if spec == "auto" else [f"policy.device={spec}"])
    with policy_device_log() as seen:
        result = train(
            str(config), seed=0, overrides=overrides, exp_dir=ctx.scratch(f"{check_id}_run"), max_env_steps=steps
        )
    expected = _expected_device(spec)
    assert seen.devices, "the pipeline did not log its policy's device (its start line changed?)"
    assert seen.devices[0] == expected, f"policy on {seen.devices[0]}, expected {expected} (policy.device={spec})"
    figure = f"{_check_result(result, steps, 1)}; policy on {seen.devices[0]}"
    name = f"pipeline {base.upper()} 1 process, policy.device={spec}"
    if algo == "auto":
        name = f"pipeline PPO 1 process, policy.device=auto -> {expected}"
    return [row(check_id, name, figure)]


# The policies of DI-engine's zoo beyond the four above: (config, overrides that keep a short run short).
_OFF_POLICY = ["policy.learn.learning_starts=64", "policy.learn.update_per_collect=4", *_QUICK_EVAL]
ZOO: dict[str, tuple[str, list[str]]] = {
    "c51": ("cartpole_c51_config.py", _OFF_POLICY),
    "qrdqn": ("cartpole_qrdqn_config.py", _OFF_POLICY),
    "mdqn": ("cartpole_mdqn_config.py", _OFF_POLICY),
    "iqn": ("cartpole_iqn_config.py", _OFF_POLICY),
    "rainbow": ("cartpole_rainbow_config.py", _OFF_POLICY),  # prioritized replay, noisy layers
    "td3": ("pendulum_td3_config.py", _OFF_POLICY),
    "ddpg": ("pendulum_ddpg_config.py", _OFF_POLICY),
    "a2c": ("cartpole_a2c_config.py", _QUICK_EVAL),
    "pg": ("cartpole_pg_config.py", [*_QUICK_EVAL, "policy.collect.n_episode=2"]),
    "sql": ("cartpole_sql_config.py", _OFF_POLICY),
    "discrete_sac": ("cartpole_discrete_sac_config.py", _OFF_POLICY),
    "ppo_pg": ("cartpole_ppo_pg_config.py", [*_QUICK_EVAL, "policy.collect.n_episode=2"]),
    "fqf": ("cartpole_fqf_config.py", _OFF_POLICY),  # fraction proposal network: a second parameter group
    "sqn": ("cartpole_sqn_config.py", _OFF_POLICY),
    "bdq": ("pendulum_bdq_config.py", _OFF_POLICY),
    "d4pg": ("pendulum_d4pg_config.py", _OFF_POLICY),  # distributional critic, prioritized n-step replay
    "ppo_offpolicy": ("cartpole_ppo_offpolicy_config.py", _QUICK_EVAL),
    "ppg_offpolicy": ("cartpole_ppg_config.py", _QUICK_EVAL),
    "acer": ("cartpole_acer_config.py", _QUICK_EVAL),
    # LSTM state carried on the device, sequence replay with burn-in: sequences short enough for a short run
    "r2d2": (
        "cartpole_r2d2_config.py",
        [
            *_OFF_POLICY,
            "policy.sequence.seq_len=6",
            "policy.sequence.burnin=2",
            "policy.sequence.overlap=2",
            "policy.learn.batch_size=8",
        ],
    ),  # fmt: skip
}


def check_zoo(ctx: Ctx) -> list[dict[str, str]]:
    """Each policy of :data:`ZOO` trained briefly in this process on the device under test (one row each): its
    networks, replay (prioritized for Rainbow) and per-update draws on CUDA."""
    from ding_dist.entry import train

    steps, rows = ctx.size("zoo_steps"), []
    for i, (algo, (config, quick)) in enumerate(ZOO.items()):
        spec = "cuda" if ctx.cuda else "cpu"
        overrides = [*quick, "env.stop_value=1e9", f"policy.device={spec}"]
        with policy_device_log() as seen:
            result = train(str(REPO / "configs" / config), seed=0, overrides=overrides,
                           exp_dir=ctx.scratch(f"zoo_{algo}"), max_env_steps=steps)  # fmt: skip
        expected = _expected_device(spec)
        assert seen.devices and seen.devices[0] == expected, f"{algo}: policy on {seen.devices}, expected {expected}"
        rows.append(row(f"p{i + 1}", f"pipeline {algo} 1 process", f"{_check_result(result, steps, 1)}; on {expected}"))
    return rows


# ------------------------------------------------------------- (f) actor-learner: CPU actors, learners on device
AL_BACKEND = "cpu:gloo,cuda:nccl"  # host tensors (weights, experience) over gloo, the learners' CUDA ones over nccl
AL_SHARED_GPU = "cpu:gloo,cuda:gloo"  # learners sharing one GPU: their CUDA gradients over gloo

# row id: (config, actors, learners, policy.device (None: the default, auto), backend with CUDA, GPUs it needs).
# f2 is on-policy into a CUDA learner with auto (the learner must resolve it to its GPU under the mixed backend);
# f3 needs a GPU per learner (nccl); f4 runs the same with both learners on one GPU over gloo; f5 adds an inference
# rank on the device (actor_learner.inference=1, actor_device={device}) that acts for 2 CPU actors.
AL_RUNS: dict[str, tuple[str, int, int, str | None, str, int]] = {
    "f1": ("dqn", 1, 1, "{device}", AL_BACKEND, 1),
    "f2": ("impala", 1, 1, None, AL_BACKEND, 1),
    "f3": ("ppo", 2, 2, "{device}", AL_BACKEND, 2),
    "f4": ("ppo", 2, 2, "{device}", AL_SHARED_GPU, 1),
    "f5": ("impala", 2, 1, "{device}", AL_BACKEND, 1),
}
AL_INFERENCE = {"f5"}  # rows with an inference rank (the last rank) on the device


def _actor_learner_run(ctx: Ctx, rid: str) -> dict[str, str]:
    algo, actors, learners, spec, cuda_backend, gpus = AL_RUNS[rid]
    spec = spec.format(device=ctx.device) if spec else None
    backend = cuda_backend if ctx.cuda else "gloo"
    inference = rid in AL_INFERENCE
    world = actors + learners + inference
    device_text = f"policy.device={spec}" if spec else "policy.device=auto (default)"
    name = f"ding-dist train {algo.upper()} --actors {actors} --learners {learners} (launch, {backend}), {device_text}"
    if inference:
        name += f", inference rank on {ctx.device}"
    visible = torch.cuda.device_count() if ctx.cuda else 0
    if ctx.cuda and visible < gpus:
        why = f"needs {gpus} GPUs, {visible} visible: nccl takes one GPU per learner; f4 shares one GPU over gloo"
        return row(rid, name, why, f"skipped: needs {gpus} GPUs")
    if not ctx.cuda and cuda_backend == AL_BACKEND and learners > 1:
        return row(rid, name, "an nccl row; f4 runs the same on gloo", f"skipped: {_no_cuda_reason()}")
    exp_dir = os.path.join(ctx.scratch(rid), "run")
    steps = ctx.size("al_steps")
    argv = ["train", str(CONFIGS[algo]), "--actors", str(actors), "--learners", str(learners), "--seed", "0",
            "--exp-dir", exp_dir, "--timeout", "120", "--max-env-steps", str(steps),
            "--set", "actor_learner.actor_device=cpu", *ctx.overrides(algo)]  # fmt: skip
    if inference:  # the actors' own copy stays on the CPU whatever actor_device says
        argv += ["actor_learner.inference=1", f"actor_learner.actor_device={ctx.device}"]
    if spec:
        argv += [f"policy.device={spec}"]
    results = dd.launch(rank_cli_train, world, argv, backend=backend, timeout=ctx.size("launch_timeout"),
                        comm_timeout=120)  # fmt: skip
    learner_device = "cuda:0" if ctx.cuda else "cpu"  # one GPU: every learner on it; with more, rank i on GPU i
    for rank, r in enumerate(results):
        on_device = rank < learners or (inference and rank == world - 1)
        want = (f"cuda:{rank % max(visible, 1)}" if ctx.cuda else "cpu") if rank < learners else "cpu"
        if inference and rank == world - 1:
            want = "cuda:0" if ctx.cuda else "cpu"
        assert r["rc"] == 0, f"rank {rank}: ding-dist train returned {r['rc']}"
        assert r["devices"] == [want], f"rank {rank}: policy on {r['devices']}, expected {want}"
        if not on_device:
            assert not r["cuda_started"], f"rank {rank} (an actor on the CPU) started CUDA"
    result = _read_result(exp_dir)
    al = result["actor_learner"]
    assert al["finished_cleanly"] and al["versions"] > 0, f"actor_learner: {al}"
    assert al["lag_max"] <= al["max_lag"], f"lag {al['lag_max']} above the maximum {al['max_lag']}"
    served = ""
    if inference:
        info = json.loads(Path(exp_dir, "inference.json").read_text())
        assert info["lost"] == [] and info["rows"] > 0, f"inference: {info}"
        served = f"; inference rank on {want}: {info['rows']} rows in {info['batches']} forward passes"
    figure = (f"{_check_result(result, steps, world)}; learners on {learner_device}, actors on cpu"
              f"{' (CUDA never started there)' if ctx.cuda else ''}; {al['versions']} weight versions, "
              f"lag max {al['lag_max']}{served}")  # fmt: skip
    return row(rid, name, figure)


def check_actor_learner(ctx: Ctx) -> list[dict[str, str]]:
    """f1-f5: ``ding-dist train --actors N --learners M`` on ``launch``ed ranks, actors on the CPU, learners on the
    device: DQN, IMPALA with ``policy.device=auto`` under ``cpu:gloo,cuda:nccl``, PPO with 2 learners over nccl
    (2 GPUs) and sharing one GPU over gloo, IMPALA with an inference rank on the device. Weights cross from the
    device to the actors, experience back."""
    rows = []
    for rid in AL_RUNS:
        try:
            rows.append(_actor_learner_run(ctx, rid))
        except Exception as exc:  # one run failing must not hide the others
            traceback.print_exc()
            algo, actors, learners, *_ = AL_RUNS[rid]
            rows.append(row(rid, f"ding-dist train {algo.upper()} --actors {actors} --learners {learners}",
                            one_line(exc), "FAIL"))  # fmt: skip
    return rows
