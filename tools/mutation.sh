#!/usr/bin/env bash
# Mutation testing of the learning math with mutmut (docs/contributing.md, "Mutation testing"). Not in CI.
#
#   bash tools/mutation.sh              # the learning-math scope below: ~5,200 mutants, ~25 min on 2 cores
#   bash tools/mutation.sh 'ding_dist.policy.ppo.*'   # other mutmut name patterns instead of the scope
#   MUTATION_TESTS='tests/policy/test_ppo.py tests/policy/test_impala.py' bash tools/mutation.sh \
#       'ding_dist.policy.ppo.x_compute_gae*' 'ding_dist.policy.impala.x_vtrace*'   # a narrow run (docs/contributing.md)
#   python -m mutmut show NAME          # the diff of one mutant; python -m mutmut apply NAME writes it (commit first)
#
# MUTATION_TESTS (test paths, space-separated) replaces [tool.mutmut]'s test selection: the run then happens in a
# scratch copy of the checkout (mutmut reads only ./pyproject.toml), MUTATION_DIR (default a new temporary folder),
# whose mutants/ keeps its results (show / apply from there).
#
# mutmut (the `dev` extra) reads [tool.mutmut] in pyproject.toml: it copies the package into mutants/, writes every
# mutant of ding_dist/policy, ding_dist/data and ding_dist/sync/algorithms there, runs the in-process unit tests once
# to learn which tests call which function, then runs each mutant against the tests of its function. The run is
# resumable (results stay in mutants/); the summary at the end counts the scope's mutants by outcome and lists the
# survivors. JOBS (default 2) sets the parallel mutants, MUTATION_TIMEOUT (default 3600 s) bounds the run.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
case "$PYTHON" in */* | /*) [ "${PYTHON#/}" = "$PYTHON" ] && PYTHON="$PWD/$PYTHON" ;; esac  # survives the cd below

# The losses, targets, estimators and samplers: mutmut's names are module.x_function or module.xǁClassǁmethod.
SCOPE=(
  'ding_dist.policy.ppo.x_compute_gae*' 'ding_dist.policy.ppo.x_clipped_surrogate*' 'ding_dist.policy.ppo.x_minibatch_plan*'
  'ding_dist.policy.ppo.xǁPPOPolicyǁadvantages*' 'ding_dist.policy.ppo.xǁPPOPolicyǁglobal_minibatch_stats*'
  'ding_dist.policy.ppo.xǁPPOPolicyǁlearn*' 'ding_dist.policy.ppo.xǁActorCriticǁforward*'
  'ding_dist.policy.impala.x_vtrace*' 'ding_dist.policy.impala.xǁIMPALAPolicyǁlearn*'
  'ding_dist.policy.a2c.xǁA2CPolicyǁlearn*'
  'ding_dist.policy.pg.x_episode_returns*' 'ding_dist.policy.pg.xǁPGPolicyǁlearn*'
  'ding_dist.policy.ppo_pg.xǁPPOPGPolicyǁlearn*'
  'ding_dist.policy.ppo_offpolicy.xǁPPOOffPolicyǁlearn*' 'ding_dist.policy.ppo_offpolicy.xǁPPOOffPolicyǁupdate*'
  'ding_dist.policy.ppg.x_clipped_value_loss*' 'ding_dist.policy.ppg.xǁPPGOffPolicyǁlearn*'
  'ding_dist.policy.ppg.xǁPPGOffPolicyǁpolicy_step*' 'ding_dist.policy.ppg.xǁPPGOffPolicyǁvalue_step*'
  'ding_dist.policy.ppg.xǁPPGOffPolicyǁaux_step*' 'ding_dist.policy.ppg.xǁPPGOffPolicyǁaux_phase*'
  'ding_dist.policy.acer.x_retrace_targets*' 'ding_dist.policy.acer.x_trust_region_gradient*'
  'ding_dist.policy.acer.xǁACERPolicyǁupdate*'
  'ding_dist.policy.dqn.xǁDQNPolicyǁlearn*' 'ding_dist.policy.dqn.xǁQNetworkǁforward*'
  'ding_dist.policy.losses.x_categorical_projection*' 'ding_dist.policy.losses.x_quantile_huber_loss*'
  'ding_dist.policy.q_learning.x_update_target*' 'ding_dist.policy.q_learning.xǁQLearningPolicyǁapply_loss*'
  'ding_dist.policy.networks.xǁDuelingHeadǁforward*' 'ding_dist.policy.networks.xǁNoisyLinearǁforward*'
  'ding_dist.policy.networks.xǁCategoricalQNetworkǁq_values*' 'ding_dist.policy.networks.xǁAtomQNetworkǁq_values*'
  'ding_dist.policy.c51.xǁC51Policyǁlearn*' 'ding_dist.policy.qrdqn.xǁQRDQNPolicyǁlearn*'
  'ding_dist.policy.iqn.xǁIQNPolicyǁlearn*' 'ding_dist.policy.iqn.xǁImplicitQuantileNetworkǁforward*'
  'ding_dist.policy.fqf.x_fraction_loss*' 'ding_dist.policy.fqf.xǁFQFNetworkǁforward*' 'ding_dist.policy.fqf.xǁFQFPolicyǁlearn*'
  'ding_dist.policy.mdqn.x_munchausen_target*' 'ding_dist.policy.mdqn.xǁMDQNPolicyǁlearn*'
  'ding_dist.policy.sql.x_soft_value*' 'ding_dist.policy.sql.x_sql_target*' 'ding_dist.policy.sql.xǁSQLPolicyǁlearn*'
  'ding_dist.policy.sqn.xǁSQNPolicyǁlearn*' 'ding_dist.policy.rainbow.xǁRainbowPolicyǁlearn*'
  'ding_dist.policy.bdq.xǁBDQPolicyǁlearn*' 'ding_dist.policy.bdq.xǁBranchingQNetworkǁforward*'
  'ding_dist.policy.d4pg.xǁD4PGPolicyǁlearn*' 'ding_dist.policy.d4pg.xǁDistributionalCriticǁforward*'
  'ding_dist.policy.sac.x_squashed_sample*' 'ding_dist.policy.sac.xǁSACPolicyǁlearn*'
  'ding_dist.policy.sac.xǁSquashedGaussianActorǁforward*'
  'ding_dist.policy.discrete_sac.x_expected_soft_value*' 'ding_dist.policy.discrete_sac.x_discrete_policy_loss*'
  'ding_dist.policy.discrete_sac.xǁDiscreteSACPolicyǁlearn*'
  'ding_dist.policy.td3.xǁTD3Policyǁlearn*' 'ding_dist.policy.td3.xǁTD3Policyǁsmoothing_noise*'
  'ding_dist.policy.continuous.x_gaussian_noise*'
  'ding_dist.policy.r2d2.x_value_rescale*' 'ding_dist.policy.r2d2.x_inverse_value_rescale*'
  'ding_dist.policy.r2d2.x_rescaled_n_step_target*' 'ding_dist.policy.r2d2.xǁRecurrentQNetworkǁforward*'
  'ding_dist.policy.r2d2.xǁR2D2Policyǁlearn*'
  'ding_dist.data.prioritized.xǁSumMinTreeǁupdate*' 'ding_dist.data.prioritized.xǁSumMinTreeǁfind*'
  'ding_dist.data.prioritized.xǁPrioritizedReplayBufferǁsample_indices*'
  'ding_dist.data.prioritized.xǁPrioritizedReplayBufferǁupdate_priorities*'
  'ding_dist.data.prioritized.xǁPrioritizedReplayBufferǁ_scaled*' 'ding_dist.data.prioritized.xǁPrioritizedReplayBufferǁadd*'
  'ding_dist.data.replay.xǁRowRingǁ_n_step_at*' 'ding_dist.data.replay.xǁRowRingǁ_draw_n_step*'
  'ding_dist.data.sequence_replay.x_sequence_priority*'
  'ding_dist.data.sequence_replay.xǁSequenceReplayBufferǁsample_indices*'
  'ding_dist.data.sequence_replay.xǁSequenceReplayBufferǁupdate_priorities*'
  'ding_dist.sync.algorithms._scatter_gather.xǁMinMaxUInt8Codecǁ*' 'ding_dist.sync.algorithms._scatter_gather.xǁHalfCodecǁ*'
  'ding_dist.sync.algorithms.low_precision.x_encode_indicators*' 'ding_dist.sync.algorithms.low_precision.x_decode_counts*'
)
if [ "$#" -gt 0 ]; then SCOPE=("$@"); fi

if [ -n "${MUTATION_TESTS:-}" ]; then
  work=${MUTATION_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/ding_dist_mutation.XXXXXX")}
  mkdir -p "$work"
  cp -r ding_dist tests configs setup.py pyproject.toml "$work"/
  # shellcheck disable=SC2086
  "$PYTHON" - "$work/pyproject.toml" $MUTATION_TESTS <<'PY'
import re, sys
path, tests = sys.argv[1], sys.argv[2:]
text = open(path).read()
selection = "pytest_add_cli_args_test_selection = [" + ", ".join(f'"{t}"' for t in tests) + "]"
text, n = re.subn(r"pytest_add_cli_args_test_selection = \[[^\]]*\]", selection, text)
assert n == 1, "no pytest_add_cli_args_test_selection in [tool.mutmut]"
open(path, "w").write(text)
PY
  echo "mutmut in $work on: $MUTATION_TESTS"
  cd "$work"
fi
mkdir -p mutants
echo "mutmut: ${#SCOPE[@]} patterns, log in mutants/run.log"
status=0
# mutmut forks a child per mutant from a parent that has run torch: with torch's OpenMP pool up, a forked child's
# first parallel kernel can wait forever (every D4PG mutant "timed out" at 0% CPU). One thread each: fork-safe.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
nice -n 10 timeout "${MUTATION_TIMEOUT:-3600}" "$PYTHON" -m mutmut run --max-children "${JOBS:-2}" "${SCOPE[@]}" \
  > mutants/run.log 2>&1 || status=$?
"$PYTHON" -m mutmut results --all true 2>/dev/null | "$PYTHON" -c '
import fnmatch, sys
from collections import Counter
scope = sys.argv[1:]
rows = [line.strip().rsplit(": ", 1) for line in sys.stdin if ": " in line]
rows = [(name, state) for name, state in rows if any(fnmatch.fnmatchcase(name, p) for p in scope)]
counts = Counter(state for _, state in rows)
print(f"{len(rows)} mutants in scope: " + ", ".join(f"{n} {s}" for s, n in counts.most_common()))
for name, state in rows:
    if state not in ("killed", "no tests"):
        print(f"  {state}: {name}")
' "${SCOPE[@]}"
exit "$status"
