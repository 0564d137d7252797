"""Torchrun's elastic agent as ``ding-dist``'s launchers run it: a stop is a stop, and the agent ends with its job.

Torch's launcher (``torch.distributed.run``, ``elastic_launch``) builds a ``LocalElasticAgent``; inside
:func:`stop_aware_agent` it builds a :class:`StopAwareAgent` instead, which differs in three ways:

- **a stop is a stop** (``local=True``, ``ding-dist train --nproc N``): ranks that exit with a stop code (128 +
  SIGINT, SIGTERM or SIGUSR1: they checkpointed the step they stopped at) end the job as stopped, not failed, and
  are never restarted, whatever ``--max-restarts`` says; :attr:`StopAwareAgent.stopped` holds their exit codes. In
  an elastic job (``local=False``) a stop its own agent did not ask for means that a peer node leaves: the agent
  re-forms the job without it from that checkpoint, as after a failure;
- **a bounded exit barrier**: torch's agent waits up to 300 s, in one uninterruptible store call, for the other
  nodes' agents once its workers finished; this one waits at most :data:`EXIT_BARRIER_S` seconds, in slices, so a
  signal stops it at once, and not at all when a peer is gone (the store's host answers no more);
- its workers die with it: each worker asks the kernel for SIGTERM when its agent dies (:func:`die_with_agent`),
  so a killed agent leaves no orphan: the worker stops like a preempted one.

Example::

    with stop_aware_agent(local=True) as agents:
        torch.distributed.run.run(args)
    agents[0].stopped   # {rank: exit code} when the job was stopped by a signal to a rank
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

from torch.distributed.elastic.agent.server.api import RunResult, WorkerState
from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent

__all__ = ["EXIT_BARRIER_S", "STOP_EXIT_CODES", "StopAwareAgent", "die_with_agent", "stop_aware_agent"]

logger = logging.getLogger(__name__)

#: Seconds an agent whose workers finished waits for the other nodes' agents (torch's default: 300).
EXIT_BARRIER_S = 30.0
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)
#: Exit codes of a rank that stopped on a signal: 128 + the signal (handled: checkpointed), or killed by it.
STOP_EXIT_CODES = frozenset([128 + s for s in _STOP_SIGNALS] + [-s for s in _STOP_SIGNALS])
_PR_SET_PDEATHSIG = 1


def _is_stop(failures: dict[int, Any]) -> bool:
    return bool(failures) and all(f.exitcode in STOP_EXIT_CODES for f in failures.values())


class StopAwareAgent(LocalElasticAgent):
    """``LocalElasticAgent`` where ranks stopped by a signal end a local job (see the module docstring), with a
    bounded, interruptible exit barrier."""

    def __init__(self, *args: Any, local: bool = True, exit_barrier_s: float = EXIT_BARRIER_S, **kwargs: Any):
        super().__init__(*args, exit_barrier_timeout=exit_barrier_s, **kwargs)
        self.local = local
        #: Global rank -> exit code of the ranks whose stop ended the job (empty: it was not stopped that way).
        self.stopped: dict[int, int] = {}

    def _monitor_workers(self, worker_group: Any) -> RunResult:
        result = super()._monitor_workers(worker_group)
        if self.local and result.state == WorkerState.FAILED and _is_stop(result.failures):
            self.stopped = {rank: f.exitcode for rank, f in result.failures.items()}
            self._stop_workers(worker_group)  # the others stop too (the same checkpointed step)
            return RunResult(
                state=WorkerState.SUCCEEDED, return_values={w.global_rank: None for w in worker_group.workers}
            )
        if result.state == WorkerState.FAILED and _is_stop(result.failures):
            logger.warning("[%s] worker(s) %s stopped on a signal their agent did not get: a node leaves the job; "
                           "re-forming without it", worker_group.spec.role, sorted(result.failures))  # fmt: skip
        return result

    def _exit_barrier(self) -> None:
        """Wait until every agent's workers finished, at most ``exit_barrier_s`` seconds, a signal stopping the
        wait at once (torch's barrier is one blocking store call); a store that answers no more ends it."""
        store, world = self._store, self._worker_group.group_world_size
        if store is None or world <= 1:
            return
        prefix = "torchelastic/agent/terminal_state"
        deadline = time.monotonic() + self._exit_barrier_timeout
        try:
            if store.add(prefix + "num_members", 1) == world:
                store.set(prefix + "last_member", "<val_ignored>")
            while not store.check([prefix + "last_member"]):
                if time.monotonic() > deadline:
                    logger.warning("the other nodes' agents did not finish within %g s; exiting",
                                   self._exit_barrier_timeout)  # fmt: skip
                    return
                time.sleep(0.5)  # signals are handled here
        except RuntimeError as e:  # the store's host is gone: no one is left to wait for
            logger.info("exit barrier: the rendezvous store answers no more (%s); exiting", str(e).splitlines()[0])


@contextlib.contextmanager
def stop_aware_agent(local: bool, exit_barrier_s: float = EXIT_BARRIER_S) -> Iterator[list[StopAwareAgent]]:
    """While active, torch's launcher (``elastic_launch``, ``torch.distributed.run.run``) builds
    :class:`StopAwareAgent` for its agent; the list it yields holds the agent(s) built.

    Example::

        with stop_aware_agent(local=True) as agents:
            elastic_launch(config, entrypoint)(*args)
    """
    from torch.distributed.launcher import api

    made: list[StopAwareAgent] = []

    def build(*args: Any, **kwargs: Any) -> StopAwareAgent:
        agent = StopAwareAgent(*args, local=local, exit_barrier_s=exit_barrier_s, **kwargs)
        made.append(agent)
        return agent

    saved = api.LocalElasticAgent
    api.LocalElasticAgent = build  # launch_agent builds its agent from this module's name
    try:
        yield made
    finally:
        api.LocalElasticAgent = saved


def die_with_agent() -> None:
    """In a worker of torchrun's agent (Linux): SIGTERM from the kernel when the agent dies, so a killed agent leaves
    no orphan (the worker stops like a preempted one, its peers with it). Elsewhere nothing.

    Example::

        die_with_agent()  # early in a rank started by torchrun
    """
    if not sys.platform.startswith("linux") or not os.environ.get("TORCHELASTIC_RUN_ID"):
        return
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the agent died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)
