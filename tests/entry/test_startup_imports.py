"""What ``ding-dist train`` has imported when its training loop reaches the first env step: what the run needs, not
the other policies, loops and replay buffers, the DI-engine translation, TensorBoard (made at the first record),
matplotlib or torch's elastic agent (a rank of torchrun's only)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, logging, sys
from ding_dist.entry.cli import main

class AtFirstStep(logging.Handler):
    def emit(self, record):
        if ", exp dir " in record.getMessage():  # the loop's line right before its first collect
            with open({out!r}, "w") as f:
                json.dump(sorted(sys.modules), f)

logging.getLogger("ding_dist.entry.loops.data_parallel").addHandler(AtFirstStep())
sys.exit(main(["train", "cartpole_ppo", "--max-env-steps", "256", "--exp-dir", {exp!r}]))
"""

NOT_BEFORE_THE_FIRST_STEP = (
    "ding_dist.config.ding.core",  # the DI-engine translation: DI-engine files only (every config is asked
    "ding_dist.config.ding.envs",  # whether it is one: ding_dist.config.ding.marks)
    "ding_dist.config.ding.translate",
    "ding_dist.data.prioritized",  # off-policy runs only
    "ding_dist.entry.cli.agent",  # torchrun's ranks only
    "ding_dist.entry.loops.actor",
    "ding_dist.entry.loops.learner_loop",
    "ding_dist.policy.dqn",  # the other policies
    "ding_dist.policy.sac",
    "matplotlib",
    "torch.distributed.elastic.agent",
    "torch.utils.tensorboard",
)


def test_a_run_reaches_its_first_env_step_without_what_it_does_not_use(tmp_path):
    out = tmp_path / "modules.json"
    code = PROBE.format(out=str(out), exp=str(tmp_path / "run"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    modules = set(json.loads(out.read_text()))
    assert {"ding_dist.policy.ppo", "ding_dist.entry.loops.data_parallel", "torch", "gymnasium"} <= modules
    assert (
        sorted(
            m
            for m in modules
            if m.split(".")[0] == "matplotlib"
            or any(m == n or m.startswith(f"{n}.") for n in NOT_BEFORE_THE_FIRST_STEP)
        )
        == []
    )
    assert any((tmp_path / "run" / "tb").glob("events.out.tfevents.*"))  # TensorBoard was written all the same
