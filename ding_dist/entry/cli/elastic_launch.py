"""``ding-dist train --nnodes MIN:MAX``: this node's part of an elastic job, started by torch's launcher.

The node runs torchrun's elastic agent (``torch.distributed.run``) with the c10d rendezvous (no etcd): between
MIN and MAX nodes of ``--nproc`` processes each. When a node joins a running job, or one dies, the agents stop
their workers and the job re-forms at the new size; the new workers continue the run of the shared experiment
folder from its newest checkpoint (the folder records the job's id, see ``Experiment.rejoined``), every rank's
replay re-sharded over the new world. A join stops the old workers with SIGTERM, so they checkpoint the step they
reached first: nothing is lost. A node that dies loses what its job did since the newest checkpoint, and uses one
of ``--max-restarts``.

Example (each node; the first one serves the rendezvous)::

    ding-dist train cartpole_dqn --nnodes 1:4 --nproc 2 --rdzv-endpoint node0:29400 \\
        --exp-dir /shared/runs/dqn --max-restarts 3
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ding_dist.entry.cli.errors import PROG, UsageError

__all__ = ["SHARE_STORE_ENV", "elastic_launcher_argv", "launch_elastic"]

#: torch 2.11-2.13 keep the first round's worker-store address when the rendezvous is shared with the workers,
#: so a node that joins later waits for an address that is never published for its round: not shared here.
SHARE_STORE_ENV = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
RANK_MODULE = "ding_dist.entry.cli"


def job_id_for(args: argparse.Namespace, exp_dir: Path) -> str:
    """``--rdzv-id``, else ``$SLURM_JOB_ID``, else the experiment folder's name: the same on every node."""
    return args.rdzv_id or os.environ.get("SLURM_JOB_ID") or exp_dir.name


def elastic_launcher_argv(args: argparse.Namespace, nproc: int, exp_dir: Path, child_argv: list[str]) -> list[str]:
    """torchrun's arguments for this node of the elastic job (``child_argv``: one rank's ``ding-dist`` arguments).

    Example::

        elastic_launcher_argv(args, 2, Path("/shared/runs/dqn"), ["train", "cfg.py", "--exp-dir", "/shared/runs/dqn"])
    """
    if not args.rdzv_endpoint:
        raise UsageError("--nnodes needs --rdzv-endpoint HOST:PORT: the rendezvous every node reaches")
    host, sep, port = args.rdzv_endpoint.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--rdzv-endpoint {args.rdzv_endpoint!r}: expected HOST:PORT, e.g. node0:29400")
    low, high = args.nnodes
    conf = "last_call_timeout=2,join_timeout=600"
    if args.rdzv_host != "auto":
        conf += f",is_host={int(args.rdzv_host == 'yes')}"
    argv = ["--nnodes", f"{low}:{high}", "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", args.rdzv_endpoint, "--rdzv-id", job_id_for(args, exp_dir), "--rdzv-conf", conf,
            "--max-restarts", str(args.max_restarts), "--monitor-interval", "1"]  # fmt: skip
    if args.node_addr:
        argv += ["--local-addr", args.node_addr]
    return [*argv, "--module", RANK_MODULE, *child_argv]


def check_worlds(cfg: Any, nproc: int, nnodes: tuple[int, int]) -> None:
    """Refuse, before start, a config that some world size of the job (``nproc`` x MIN..MAX nodes) cannot split."""
    from ding_dist.config.split import split_errors

    if cfg.actor_learner.actors:
        raise UsageError("--nnodes runs data-parallel jobs; an actor-learner run's roles cannot change size")
    for nodes in range(nnodes[0], nnodes[1] + 1):
        errors = split_errors(cfg, nodes * nproc)
        if errors:
            raise UsageError(f"--nnodes {nnodes[0]}:{nnodes[1]} with {nodes} node(s): " + "; ".join(errors))


def launch_elastic(args: argparse.Namespace, cfg: Any, nproc: int, exp_dir: Path, child_argv: list[str]) -> int:
    """Run this node's agent of the elastic job until the job ends; the exit code (0, or one line and 1)."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser
    from torch.distributed.run import run as torchrun

    argv = elastic_launcher_argv(args, nproc, exp_dir, child_argv)
    check_worlds(cfg, nproc, args.nnodes)
    launcher = get_args_parser().parse_args(argv)
    os.environ.setdefault(SHARE_STORE_ENV, "1")
    threads = os.environ.setdefault("OMP_NUM_THREADS", "1")
    low, high = args.nnodes
    print(f"{PROG}: elastic node of {low} to {high} node(s) x {nproc} process(es), rendezvous {args.rdzv_endpoint} "
          f"(job {launcher.rdzv_id}), experiment folder {exp_dir} (OMP_NUM_THREADS={threads})",
          file=sys.stderr)  # fmt: skip
    from ding_dist.entry.cli.agent import stop_aware_agent

    try:
        with stop_aware_agent(local=False):  # a peer node's stop re-forms the job; a bounded exit barrier
            torchrun(launcher)
    except ChildFailedError as e:
        first = min(e.failures.items(), key=lambda kv: kv[1].timestamp)
        print(f"{PROG}: the job failed after {args.max_restarts} restart(s): rank {first[0]} exited with code "
              f"{first[1].exitcode}", file=sys.stderr)  # fmt: skip
        return 1
    except SignalException as e:
        print(f"{PROG}: stopped by {e.sigval.name}; this node's ranks were stopped", file=sys.stderr)
        return 128 + int(e.sigval)
    return 0
