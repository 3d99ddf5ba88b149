"""Idea-head targets (multi-hot bags of the next K tokens) and the idea BCE (paper B, Section 3)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from semlm.idea_targets import (PAD_ID, idea_bce, idea_bce_sparse, idea_targets, top_frequent_ids, window_ids)


def bag(row):
    return set(row.nonzero().flatten().tolist())


def test_targets_match_a_hand_example_with_window_edges_padding_and_stopwords():
    # next-token targets continued past the block; the text ends after 5 tokens (then padding)
    future = torch.tensor([[4, 2, 4, 7, 5, PAD_ID, PAD_ID]])
    bags = idea_targets(future, window=3, vocab_size=8, stopword_ids=[5], length=5)
    assert bags.shape == (1, 5, 8)
    assert [bag(bags[0, t]) for t in range(5)] == [
        {2, 4},      # 4 2 4: a repeated token counts once
        {2, 4, 7},   # 2 4 7
        {4, 7},      # 4 7 5: 5 is a stopword
        {7},         # 7 5 <pad>
        set(),       # 5 <pad> <pad>
    ]


def test_windows_past_the_given_future_are_truncated():
    future = torch.tensor([[1, 2, 3]])
    bags = idea_targets(future, window=2, vocab_size=5, length=3)
    assert [bag(bags[0, t]) for t in range(3)] == [{1, 2}, {2, 3}, {3}]


def test_default_length_gives_every_position_a_full_window():
    future = torch.arange(10)[None]
    assert idea_targets(future, window=4, vocab_size=10).shape == (1, 7, 10)


def test_bad_inputs_raise_one_clear_error():
    with pytest.raises(ValueError, match="window K must be >= 1"):
        idea_targets(torch.zeros(1, 3, dtype=torch.long), window=0, vocab_size=4)
    with pytest.raises(ValueError, match="future ids must be in"):
        idea_targets(torch.tensor([[9]]), window=1, vocab_size=4)
    with pytest.raises(ValueError, match="unknown reduction"):
        idea_bce(torch.zeros(1, 1, 3), torch.zeros(1, 1, 3), reduction="max")


def test_top_frequent_ids_breaks_ties_by_smaller_id():
    ids = torch.tensor([3, 3, 1, 1, 2, 0, PAD_ID])
    assert top_frequent_ids(ids, 2) == [1, 3]
    assert top_frequent_ids(ids, 2, exclude=[1]) == [3, 0]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 12), st.integers(1, 6), st.integers(2, 9), st.integers(0, 10_000),
       st.sampled_from(["sum_vocab", "mean"]), st.sampled_from([None, 5.0]))
def test_sparse_bce_equals_dense_bce(batch, length, window, vocab, seed, reduction, pos_weight):
    g = torch.Generator().manual_seed(seed)
    future = torch.randint(-1, vocab, (batch, length + window - 1), generator=g)
    stop = [0] if vocab > 3 else []
    logits = torch.randn(batch, length, vocab, generator=g)
    mask = torch.rand(batch, length, generator=g) > 0.3
    dense = idea_bce(logits, idea_targets(future, window, vocab, stop, length=length), mask, pos_weight, reduction)
    sparse = idea_bce_sparse(logits, window_ids(future, window, length, stop), mask, pos_weight, reduction)
    assert torch.allclose(dense, sparse, rtol=1e-5, atol=1e-5)


def test_window_ids_hold_each_positive_once():
    future = torch.tensor([[4, 2, 4, 7, 5, PAD_ID, PAD_ID]])
    positives = window_ids(future, 3, 5, [5])
    assert [sorted(set(r.tolist()) - {PAD_ID}) for r in positives[0]] == [[2, 4], [2, 4, 7], [4, 7], [7], []]
    assert all(len([x for x in r.tolist() if x != PAD_ID]) == len(set(r.tolist()) - {PAD_ID}) for r in positives[0])
