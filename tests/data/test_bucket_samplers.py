"""Bucketing samplers: invariants over the global plan, DDP balance, resuming."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from torchpace.data import BucketBatchSampler, TokenBudgetBatchSampler

lengths_st = st.lists(st.integers(1, 300), min_size=0, max_size=150)


def _bucket(lengths, replicas, rank=0, **kw):
    return BucketBatchSampler(
        lengths, kw.pop("batch_size", 4), num_replicas=replicas, rank=rank, **kw
    )


def _budget(lengths, replicas, rank=0, **kw):
    return TokenBudgetBatchSampler(
        lengths, kw.pop("max_tokens", 600), num_replicas=replicas, rank=rank, **kw
    )


def _per_rank(make, lengths, replicas, **kw):
    return [list(make(lengths, replicas, rank, **kw)) for rank in range(replicas)]


def _lognormal(n, seed=0):
    return np.random.default_rng(seed).lognormal(4.5, 0.8, n).astype(int).clip(1, 2000)


@settings(max_examples=40, deadline=None)
@given(
    lengths=lengths_st,
    replicas=st.integers(1, 4),
    batch_size=st.integers(1, 9),
    drop_last=st.booleans(),
    shuffle=st.booleans(),
    epoch=st.integers(0, 3),
)
def test_bucket_exactly_once_and_equal_counts(
    lengths, replicas, batch_size, drop_last, shuffle, epoch
):
    samplers = [
        _bucket(lengths, replicas, r, batch_size=batch_size, drop_last=drop_last, shuffle=shuffle)
        for r in range(replicas)
    ]
    for sampler in samplers:
        sampler.set_epoch(epoch)
    ranks = [list(s) for s in samplers]
    assert len({len(r) for r in ranks}) == 1 and all(len(s) == len(ranks[0]) for s in samplers)
    used = collections.Counter(i for r in ranks for batch in r for i in batch)
    batches = [batch for r in ranks for batch in r]
    assert all(0 < len(b) <= batch_size for b in batches)
    n = len(lengths)
    if drop_last:
        assert all(len(b) == batch_size for b in batches)
        assert (
            set(used.values()) <= {1}
            and len(used) == n // batch_size // replicas * replicas * batch_size
        )
    else:
        full = -(-n // batch_size)
        needed = -(-full // replicas) * replicas
        assert set(used) == set(range(n))
        assert sum(used.values()) == max(n, needed if n else 0)  # repeats only when n < needed
        assert max(map(len, batches), default=0) - min(map(len, batches), default=0) <= 1


@settings(max_examples=40, deadline=None)
@given(
    lengths=lengths_st,
    replicas=st.integers(1, 4),
    max_tokens=st.integers(304, 2000),
    drop_last=st.booleans(),
    multiple_of=st.sampled_from([1, 8]),
)
def test_budget_within_budget_exactly_once_and_equal_counts(
    lengths, replicas, max_tokens, drop_last, multiple_of
):
    ranks = _per_rank(
        _budget,
        lengths,
        replicas,
        max_tokens=max_tokens,
        drop_last=drop_last,
        multiple_of=multiple_of,
    )
    assert len({len(r) for r in ranks}) == 1
    for batch in (b for r in ranks for b in r):
        longest = -(-max(lengths[i] for i in batch) // multiple_of) * multiple_of
        assert longest * len(batch) <= max_tokens
    used = collections.Counter(i for r in ranks for b in r for i in b)
    if drop_last:
        assert set(used.values()) <= {1}
    else:
        assert set(used) == set(range(len(lengths)))
        if len(lengths) >= replicas and any(len(b) > 1 for r in ranks for b in r):
            assert set(used.values()) <= {1}


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 100), epoch=st.integers(0, 5), which=st.sampled_from([_bucket, _budget]))
def test_same_plan_for_same_seed_and_epoch_different_for_other_epoch(seed, epoch, which):
    lengths = _lognormal(400, seed).clip(1, 250).tolist()
    a, b = which(lengths, 2, seed=seed), which(lengths, 2, seed=seed)
    a.set_epoch(epoch)
    b.set_epoch(epoch)
    assert a.global_plan() == b.global_plan() and list(a) == list(b)
    b.set_epoch(epoch + 1)
    assert list(a) != list(b)


@settings(max_examples=25, deadline=None)
@given(
    which=st.sampled_from([_bucket, _budget]),
    replicas=st.integers(1, 3),
    cut=st.integers(0, 60),
    epoch=st.integers(0, 2),
)
def test_resume_from_state_dict_yields_exactly_the_rest(which, replicas, cut, epoch):
    lengths = _lognormal(300, epoch).clip(1, 250).tolist()
    first = which(lengths, replicas, rank=replicas - 1)
    first.set_epoch(epoch)
    full = list(first)
    iterator = iter(first)
    done = [next(iterator) for _ in range(min(cut, len(full)))]
    state = first.state_dict()
    resumed = which(lengths, replicas, rank=replicas - 1)
    resumed.load_state_dict(state)
    assert done + list(resumed) == full
    assert list(resumed) == full  # the epoch after the resumed one starts from the beginning


def test_state_dict_with_the_loops_count_when_the_loader_prefetches():
    sampler = _bucket(list(range(1, 41)), 1)
    loader = DataLoader(list(range(40)), batch_sampler=sampler, num_workers=1, prefetch_factor=4)
    iterator = iter(loader)
    next(iterator)
    assert sampler.state_dict()["batches_done"] > 1  # the worker ran ahead of the loop
    state = sampler.state_dict(batches_done=1)
    del iterator
    resumed = _bucket(list(range(1, 41)), 1)
    resumed.load_state_dict(state)
    assert list(resumed) == list(sampler)[1:]


def _totals(make, lengths, replicas, **kw):
    ranks = _per_rank(make, lengths, replicas, **kw)
    real = [sum(lengths[i] for b in r for i in b) for r in ranks]
    padded = [sum(max(lengths[i] for i in b) * len(b) for b in r) for r in ranks]
    return real, padded


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("replicas", [2, 4, 8])
@pytest.mark.parametrize("which", [_bucket, _budget])
def test_token_totals_per_rank_within_five_percent(which, replicas, seed):
    lengths = _lognormal(20000, seed).tolist()
    kw = {"batch_size": 16} if which is _bucket else {"max_tokens": 4096}
    for totals in _totals(which, lengths, replicas, seed=seed, **kw):
        assert max(totals) <= 1.05 * min(totals), totals


def test_token_budget_balances_even_with_few_batches_per_rank():
    # 4,000 heavy-tailed lengths over 8 ranks: ~30 batches each. Fixed-size buckets cannot balance
    # that (one tail batch costs ~20 typical ones); token-budget batches cost about the same.
    for seed in range(3):
        lengths = _lognormal(4000, seed).tolist()
        for totals in _totals(_budget, lengths, 8, seed=seed, max_tokens=4096):
            assert max(totals) <= 1.05 * min(totals), totals


def test_bucketing_pads_little_on_lognormal_lengths():
    lengths = _lognormal(20000)
    for sampler in (BucketBatchSampler(lengths, 32), TokenBudgetBatchSampler(lengths, 8192)):
        real = padded = 0
        for batch in sampler:
            real += int(lengths[batch].sum())
            padded += int(lengths[batch].max()) * len(batch)
        assert padded / real - 1 <= 0.05


def test_steps_pair_similar_lengths_across_ranks():
    lengths = _lognormal(2000)
    steps = BucketBatchSampler(lengths, 16, num_replicas=4, rank=0).global_plan()
    spread = [
        max(lengths[b].max() for b in step) / min(lengths[b].max() for b in step) for step in steps
    ]
    # Only the long tail (a few unique, very long batches) can pair unlike lengths.
    assert np.quantile(spread, 0.9) <= 1.25


def test_len_and_dataloader_integration():
    sampler = BucketBatchSampler([3, 1, 2, 5, 4, 6, 7], 2, shuffle=False)
    loader = DataLoader(list(range(7)), batch_sampler=sampler)
    assert len(loader) == len(sampler) == 4
    assert sorted(i for batch in loader for i in batch.tolist()) == list(range(7))


def test_defaults_without_torch_distributed():
    sampler = BucketBatchSampler([1, 2, 3], 2)
    assert (sampler.num_replicas, sampler.rank) == (1, 0)


def test_bad_arguments_are_clear():
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        BucketBatchSampler([1], 0)
    with pytest.raises(ValueError, match="lengths must be >= 0, got -3 at index 1"):
        BucketBatchSampler([1, -3], 2)
    with pytest.raises(ValueError, match=r"rank must be in \[0, num_replicas=2\), got 5"):
        BucketBatchSampler([1], 2, num_replicas=2, rank=5)
    with pytest.raises(
        ValueError, match="max_tokens=100 is smaller than sample 1, which alone needs 104"
    ):
        TokenBudgetBatchSampler([5, 101], 100, multiple_of=8)
    with pytest.raises(ValueError, match="epoch must be >= 0, got -1"):
        BucketBatchSampler([1], 1).set_epoch(-1)


def test_resume_refuses_a_different_run():
    state = BucketBatchSampler([1, 2, 3], 2, seed=1).state_dict()
    with pytest.raises(ValueError, match="state has seed=1 but this sampler has seed=2"):
        BucketBatchSampler([1, 2, 3], 2, seed=2).load_state_dict(state)
    with pytest.raises(
        ValueError, match="state has num_samples=3 but this sampler has num_samples=4"
    ):
        BucketBatchSampler([1, 2, 3, 4], 2, seed=1).load_state_dict(state)


def test_max_batch_size_caps_token_budget_batches():
    lengths = [3] * 50
    batches = list(TokenBudgetBatchSampler(lengths, 1000, max_batch_size=7, shuffle=False))
    assert max(map(len, batches)) == 7 and sum(map(len, batches)) == 50


def test_one_pool_and_unshuffled_plans_put_the_most_expensive_step_first():
    lengths = _lognormal(500)
    for sampler in (
        BucketBatchSampler(lengths, 8, shuffle=False, pool_size=None),
        TokenBudgetBatchSampler(lengths, 4096, shuffle=False, pool_size=None),
    ):
        costs = [int(lengths[b].max()) * len(b) for b in sampler]
        assert costs[0] == max(costs)  # the peak-memory batch comes first: OOM shows at once
        with pytest.raises(ValueError, match="pool_size must be >= 1 or None"):
            type(sampler)(lengths, 4096, pool_size=0)
