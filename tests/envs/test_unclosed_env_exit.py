"""A process that exits without closing its async envs (an exception escaped the cleanup) still exits.

The workers ignore SIGTERM (``InWorker``: a signal to the job's process group must not kill the envs under their
rank), and multiprocessing's own exit hook terminates (SIGTERM) and then joins them: without ding_dist's exit hook,
which SIGKILLs the workers of every env still open, the interpreter's exit waits for them forever.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    from ding_dist.envs.restarting import RestartingVectorEnv, async_in_workers

    fns = [lambda: gym.make("CartPole-v1")] * 2
    if sys.argv[1] == "restarting":  # the guarded envs: one one-env async vector env per env
        venv = RestartingVectorEnv(fns, "async")
        processes = [p for sub in venv.subs for p in sub.processes]
    else:  # the plain async envs (env.max_restarts=0)
        venv = async_in_workers(fns)
        processes = venv.processes
    venv.reset(seed=[0, 1])
    print(*[p.pid for p in processes], flush=True)
    sys.exit(3)  # no venv.close()
    """
)


@pytest.mark.parametrize("kind", ["restarting", "plain"])
def test_exit_without_close_kills_the_workers_and_does_not_hang(kind):
    done = subprocess.run([sys.executable, "-c", SCRIPT, kind], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    pids = [int(p) for p in done.stdout.split()]
    assert len(pids) == 2
    for pid in pids:  # gone (reaped by the exiting parent), not left running as orphans
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"worker {pid} still runs after its parent exited")
