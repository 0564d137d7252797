"""PrioritizedReplayBuffer: sampling frequencies (chi-square), exact weights, local updates, wrap-around, n-step,
frame-deduplicated storage, checkpoints and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ding_dist.data.frame_replay import FrameReplayBuffer
from ding_dist.data.prioritized import PrioritizedReplayBuffer, SumMinTree
from ding_dist.data.replay import ReplayBuffer
from ding_dist.utils.checkpoint import load_checkpoint, save_checkpoint

ENVS, ROWS = 2, 8  # capacity 16 transitions


def rollout(first_row: int, rows: int, terminate_at: tuple[int, ...] = ()) -> dict[str, np.ndarray]:
    """Rows ``first_row..`` of a stream whose transition id ``row * ENVS + env`` is its obs and its reward."""
    ids = (np.arange(first_row, first_row + rows)[:, None] * ENVS + np.arange(ENVS)).astype(np.float32)
    terminated = np.isin(np.arange(first_row, first_row + rows), terminate_at)[:, None].repeat(ENVS, 1)
    return {
        "obs": ids[..., None],
        "action": np.zeros((rows, ENVS), dtype=np.int64),
        "reward": ids,
        "next_obs": ids[..., None] + 0.5,
        "terminated": terminated,
        "truncated": np.zeros((rows, ENVS), dtype=bool),
    }


def wrapped_buffer(alpha: float = 0.7, beta: float = 0.4, n_step: int = 1, **kw) -> PrioritizedReplayBuffer:
    """A full buffer after 12 rows into 8: physical rows 0-3 hold stream rows 8-11, rows 4-7 stream rows 4-7."""
    buf = PrioritizedReplayBuffer(
        ReplayBuffer(ROWS * ENVS, (1,), num_envs=ENVS, n_step=n_step, gamma=0.5, seed=3), alpha=alpha, beta=beta, **kw
    )
    buf.add(rollout(0, 12))
    return buf


def stream_id(index: np.ndarray) -> np.ndarray:
    """The stream id stored at buffer index ``index`` of :func:`wrapped_buffer`."""
    row, env = np.divmod(index, ENVS)
    return np.where(row < 4, row + 8, row) * ENVS + env


DELTA = np.array([0.5, 3.0, 1.0, 0.1, 2.0, 0.7, 4.0, 1.5, 0.2, 0.9, 2.5, 1.2, 0.3, 3.5, 0.8, 1.8])


def test_sampling_frequencies_match_priorities_chi_square():
    buf = wrapped_buffer()
    buf.update_priorities(np.arange(16), DELTA)
    p = (DELTA + buf.eps) ** 0.7
    prob = p / p.sum()
    counts = np.zeros(16)
    for _ in range(400):
        batch, _, index = buf.sample(50)
        np.testing.assert_array_equal(batch["obs"][:, 0].numpy(), stream_id(index))  # data follows the index
        counts += np.bincount(index, minlength=16)
    expected = prob * counts.sum()
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 37.70  # chi-square, 15 degrees of freedom, p = 0.001


@pytest.mark.parametrize("roots", [4096, 2, 1])  # one searchsorted over the leaves; subtrees; one binary tree
def test_find_takes_the_first_leaf_whose_prefix_sum_exceeds_the_value(roots):
    tree = SumMinTree(5, roots)
    tree.update(np.arange(5), np.array([1.0, 0.0, 2.0, 0.0, 1.0]))
    np.testing.assert_array_equal(tree.find(np.array([0.0, 0.99, 1.0, 2.99, 3.0, 3.999999])), [0, 0, 2, 2, 4, 4])
    assert (tree.total, tree.min) == (4.0, 1.0)  # the smallest positive leaf


@pytest.mark.parametrize(("capacity", "roots"), [(1000, 1), (1000, 4), (100, 4096), (1025, 64)])
def test_tree_agrees_with_a_brute_force_prefix_search(capacity, roots):
    rng = np.random.default_rng(capacity + roots)
    tree, leaves = SumMinTree(capacity, roots), np.zeros(capacity)
    for _ in range(5):  # batches with repeated indices, some leaves set to 0
        index = rng.integers(0, capacity, 300)
        value = rng.exponential(size=300) * (rng.random(300) < 0.8) + (rng.random(300) < 0.1)
        tree.update(index, value)
        last = {i: v for i, v in zip(index.tolist(), value.tolist())}  # the last value of a repeated index
        leaves[list(last)] = list(last.values())
        assert tree.total == pytest.approx(leaves.sum(), rel=1e-12)
        assert tree.min == leaves[leaves > 0].min()
        np.testing.assert_array_equal(tree.leaves(np.arange(capacity)), leaves)
        u = rng.random(2000) * tree.total * (1 - 1e-9)  # clear of the top, where sums in other orders may differ
        found = tree.find(u)
        np.testing.assert_array_equal(found, np.searchsorted(np.cumsum(leaves), u, side="right"))
        assert (leaves[found] > 0).all()
        top = tree.find(np.array([np.nextafter(tree.total, 0.0), tree.total * 2]))  # at or past the top: clamped
        np.testing.assert_array_equal(top, np.flatnonzero(leaves)[-1])
    restored = SumMinTree(capacity, roots)
    restored.load_state_dict(tree.state_dict())  # the inner nodes rebuilt from the leaves
    np.testing.assert_array_equal(restored._sum, tree._sum)
    np.testing.assert_array_equal(restored._min, tree._min)


def test_find_never_returns_an_empty_leaf_when_rounding_overshoots():
    tree = SumMinTree(4, roots=1)
    tree.update(np.arange(4), np.array([1.0, 2.0, 0.0, 0.0]))
    tree._sum[1] += 1e-9  # the root's sum a little above its leaves', as rounding can leave it
    np.testing.assert_array_equal(tree.find(np.array([0.5, 2.5, 3.0 + 5e-10])), [0, 1, 1])


def test_weights_equal_the_formula_and_beta_anneals():
    buf = wrapped_buffer(alpha=0.6, beta=0.4, anneal_step=4)
    buf.update_priorities(np.arange(16), DELTA)
    p = (DELTA + buf.eps) ** 0.6
    prob = p / p.sum()
    for beta in (0.4, 0.55, 0.7, 0.85, 1.0, 1.0):
        assert buf.beta == pytest.approx(beta, abs=1e-15)
        _, weights, index = buf.sample(32)
        w_all = (16 * prob) ** -beta
        expected = w_all[index] / w_all.max()
        assert weights.dtype == torch.float32
        np.testing.assert_allclose(weights.numpy(), expected.astype(np.float32), rtol=2e-7, atol=0)
        assert weights.max().item() <= 1.0


def test_updates_change_only_the_given_indices_and_new_rows_get_the_max():
    buf = wrapped_buffer(alpha=0.5)
    buf.update_priorities(np.arange(16), DELTA)
    before = buf.tree.leaves(np.arange(16))
    buf.update_priorities(np.array([3, 9, 14]), torch.tensor([-6.0, 0.0, 2.0]))  # |delta|, tensors accepted
    after = buf.tree.leaves(np.arange(16))
    others = np.setdiff1d(np.arange(16), [3, 9, 14])
    np.testing.assert_array_equal(after[others], before[others])
    np.testing.assert_array_equal(after[[3, 9, 14]], (np.array([6.0, 0.0, 2.0]) + buf.eps) ** 0.5)
    assert buf.max_priority == 6.0 + buf.eps
    assert buf.tree.total == pytest.approx(after.sum(), rel=1e-12)
    buf.add(rollout(12, 1))  # overwrites physical row 4 (indices 8, 9): the current max priority
    latest = buf.tree.leaves(np.arange(16))
    np.testing.assert_array_equal(latest[[8, 9]], (6.0 + buf.eps) ** 0.5)
    keep = np.setdiff1d(np.arange(16), [8, 9])
    np.testing.assert_array_equal(latest[keep], after[keep])
    buf.add(rollout(13, 1), priority=np.array([[1.0, 2.0]]))  # row 5 (indices 10, 11): given priorities
    np.testing.assert_array_equal(buf.tree.leaves(np.array([10, 11])), (np.array([1.0, 2.0]) + buf.eps) ** 0.5)
    with pytest.raises(ValueError, match="indices must be in"):
        buf.update_priorities(np.array([16]), np.array([1.0]))


def test_n_step_returns_follow_the_sampled_index():
    buf = PrioritizedReplayBuffer(ReplayBuffer(16, (1,), num_envs=ENVS, n_step=3, gamma=0.5, seed=1))
    buf.add(rollout(0, 12, terminate_at=(9,)))  # wraps; stream row 9 ends an episode
    batch, _, index = buf.sample(64)
    first = stream_id(index)
    start_row = first // ENVS
    n = np.minimum(3, np.where(start_row <= 9, 10, 12) - start_row)  # cut at the termination or the newest row
    expected = sum(np.where(k < n, 0.5**k * (first + k * ENVS), 0.0) for k in range(3))
    np.testing.assert_allclose(batch["reward"].numpy(), expected, rtol=1e-6)
    terminal = (start_row + n - 1) == 9
    np.testing.assert_allclose(batch["discount"].numpy(), np.where(terminal, 0.0, 0.5**n), rtol=1e-6)
    np.testing.assert_array_equal(batch["next_obs"][:, 0].numpy(), first + (n - 1) * ENVS + 0.5)


def frame_stream(rows: int, seed: int):
    rng = np.random.default_rng(seed)
    obs = rng.integers(0, 256, (ENVS, 3, 4, 4), dtype=np.uint8)
    for _ in range(rows):
        next_obs = np.concatenate([obs[:, 1:], rng.integers(0, 256, (ENVS, 1, 4, 4), dtype=np.uint8)], axis=1)
        done = rng.random(ENVS) < 0.2
        yield {
            "obs": obs[None],
            "action": rng.integers(0, 3, (1, ENVS)),
            "reward": rng.normal(size=(1, ENVS)).astype(np.float32),
            "next_obs": next_obs[None],
            "terminated": done[None],
            "truncated": np.zeros((1, ENVS), dtype=bool),
        }
        obs = next_obs.copy()
        for i in np.flatnonzero(done):
            obs[i] = rng.integers(0, 256, (3, 4, 4), dtype=np.uint8)


def test_frame_dedup_storage_samples_what_the_naive_storage_samples():
    kw = dict(num_envs=ENVS, n_step=3, gamma=0.9, seed=7)
    frames = PrioritizedReplayBuffer(FrameReplayBuffer(20, (3, 4, 4), **kw), alpha=0.8)
    naive = PrioritizedReplayBuffer(ReplayBuffer(20, (3, 4, 4), obs_dtype=np.uint8, **kw), alpha=0.8)
    for row in frame_stream(33, seed=2):  # wraps the 10-row ring three times
        frames.add(row)
        naive.add(row)
    delta = np.random.default_rng(0).exponential(size=20)
    for buf in (frames, naive):
        buf.update_priorities(np.arange(20), delta)
    (a, wa, ia), (b, wb, ib) = frames.sample(40), naive.sample(40)
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_array_equal(wa.numpy(), wb.numpy())
    for key in b:
        np.testing.assert_array_equal(a[key].numpy(), b[key].numpy())


def test_state_dict_round_trips_through_a_checkpoint(tmp_path):
    buf = wrapped_buffer(anneal_step=10)
    buf.update_priorities(np.arange(16), DELTA)
    buf.sample(8)
    save_checkpoint({"replay": buf.state_dict()}, tmp_path / "ckpt.pt")
    restored = wrapped_buffer(anneal_step=10)
    restored.load_state_dict(load_checkpoint(tmp_path / "ckpt.pt")["replay"])
    np.testing.assert_array_equal(restored.tree.leaves(np.arange(16)), buf.tree.leaves(np.arange(16)))
    assert (restored.tree.total, restored.tree.min, restored.beta) == (buf.tree.total, buf.tree.min, buf.beta)
    (a, wa, ia), (b, wb, ib) = restored.sample(16), buf.sample(16)
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_array_equal(wa.numpy(), wb.numpy())
    np.testing.assert_array_equal(a["obs"].numpy(), b["obs"].numpy())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": 1.5}, "alpha must be in \\[0, 1\\], got 1.5"),
        ({"beta": -0.1}, "beta must be in \\[0, 1\\], got -0.1"),
    ],
)
def test_exponents_outside_the_unit_interval_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PrioritizedReplayBuffer(ReplayBuffer(8, (1,)), **kwargs)


def test_config_keys_are_validated_and_priority_chooses_the_prioritized_buffer():
    import gymnasium as gym
    from easydict import EasyDict

    from ding_dist.config.rules import value_errors
    from ding_dist.entry.factories import make_replay_buffer

    assert value_errors({"policy": {"other": {"replay_buffer": {"alpha": 1.2, "beta": 0.4}}}}) == [
        "config key 'policy.other.replay_buffer.alpha' must be in [0, 1], got 1.2"
    ]
    rb = {"alpha": 0.7, "beta": 0.5, "anneal_step": 10}
    obs, act = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2)
    for priority in (False, True):
        cfg = EasyDict(policy={"discount_factor": 0.99, "priority": priority, "other": {"replay_buffer": rb}})
        buf = make_replay_buffer(cfg, obs, act, num_envs=2, capacity=100, seed=0)
        assert isinstance(buf, PrioritizedReplayBuffer) == priority
    assert (buf.alpha, buf.beta0, buf.anneal_step, buf.capacity) == (0.7, 0.5, 10, 100)


def test_tensor_priorities_apply_at_the_next_read_in_order_and_draw_as_if_applied_at_once():
    deferred, direct = wrapped_buffer(alpha=0.6), wrapped_buffer(alpha=0.6)
    rng = np.random.default_rng(0)
    for step in range(6):
        batch_d, w_d, idx_d = deferred.sample(8)
        batch_n, w_n, idx_n = direct.sample(8)
        np.testing.assert_array_equal(idx_d, idx_n)
        np.testing.assert_array_equal(w_d.numpy(), w_n.numpy())
        delta = rng.uniform(0.0, 5.0, 8)
        deferred.update_priorities(idx_d, torch.tensor(delta, dtype=torch.float64))
        assert len(deferred._pending) == 1  # kept, not applied: nothing waited for the values
        direct.update_priorities(idx_n, delta)
        if step == 2:  # new rows read the maximum priority: the pending update counts
            deferred.add(rollout(12 + step, 1))
            direct.add(rollout(12 + step, 1))
    np.testing.assert_array_equal(deferred.tree.leaves(np.arange(16)), direct.tree.leaves(np.arange(16)))
    assert deferred.max_priority == direct.max_priority
    # two pending updates of one index: the later one wins, and the maximum remembers the earlier one
    deferred.update_priorities(np.array([3]), torch.tensor([5.0]))
    deferred.update_priorities(np.array([3]), torch.tensor([1.0]))
    assert len(deferred._pending) == 2
    assert deferred.tree.leaves(np.array([3]))[0] == (1.0 + deferred.eps) ** 0.6
    assert deferred.max_priority == max(direct.max_priority, 5.0 + deferred.eps)
    assert deferred._pending == []


def test_a_non_finite_tensor_priority_is_refused_at_the_next_read_and_sizes_at_once():
    buf = wrapped_buffer()
    with pytest.raises(ValueError, match="3 indices but 2 priorities"):
        buf.update_priorities(np.array([0, 1, 2]), torch.tensor([1.0, 2.0]))
    buf.update_priorities(np.array([0, 1]), torch.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match="priorities must be finite"):
        buf.sample(4)
    buf.sample(4)  # the refused update is dropped; the buffer goes on


def test_host_copy_parts_pick_their_rows_from_one_copy():
    from ding_dist.data.prioritized import HostCopy

    copy = HostCopy(torch.arange(10.0).reshape(2, 5))
    np.testing.assert_array_equal(copy.numpy(), np.arange(10.0))
    part = copy.take(np.arange(10) % 3 == 0)  # rows 0, 3, 6, 9
    np.testing.assert_array_equal(part.numpy(), [0.0, 3.0, 6.0, 9.0])
    np.testing.assert_array_equal(part.take(np.array([2, 0])).numpy(), [6.0, 0.0])
    assert len(part) == 4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_draws_and_priorities_make_no_synchronizing_call():
    buf, reference = wrapped_buffer(), wrapped_buffer()
    uniform = ReplayBuffer(ROWS * ENVS, (1,), num_envs=ENVS, n_step=3, gamma=0.5, seed=3)
    uniform_ref = ReplayBuffer(ROWS * ENVS, (1,), num_envs=ENVS, n_step=3, gamma=0.5, seed=3)
    for b in (uniform, uniform_ref):
        b.extend(rollout(0, 12))
    delta = torch.linspace(0.1, 3.0, 16, device="cuda")
    torch.cuda.set_sync_debug_mode("error")  # any synchronizing call raises
    try:
        busy = delta.repeat(2000, 1).cumsum(0)  # queued work the uploads must not wait for
        buf.update_priorities(np.arange(16), delta * 2.0)
        batch, weights, index = buf.sample(8, device="cuda")
        drawn = uniform.sample(8, device="cuda")
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert busy.is_cuda
    reference.update_priorities(np.arange(16), (delta * 2.0).cpu().numpy())
    np.testing.assert_array_equal(buf.tree.leaves(np.arange(16)), reference.tree.leaves(np.arange(16)))
    ref_batch, ref_weights, ref_index = reference.sample(8)
    np.testing.assert_array_equal(index, ref_index)
    assert torch.equal(weights.cpu(), ref_weights) and weights.device.type == "cuda"
    assert all(torch.equal(batch[k].cpu(), ref_batch[k]) for k in ref_batch)
    ref_drawn = uniform_ref.sample(8)
    assert all(drawn[k].is_cuda and torch.equal(drawn[k].cpu(), ref_drawn[k]) for k in ref_drawn)
