"""Paper B's evaluation penalty: compounding per occurrence over the context window (the authors' evaluate.py)."""

import pytest
import torch
from transformers import RepetitionPenaltyLogitsProcessor

from semlm.idea.compounding_penalty import CompoundingRepetitionPenalty


def authors_loop(ids, logits, penalty):
    """The authors' rule written as their loop: once per position of the window."""
    logits = logits.clone()
    for token in ids:
        if logits[token] < 0:
            logits[token] *= penalty
        else:
            logits[token] /= penalty
    return logits


def test_matches_the_authors_loop_and_compounds_per_occurrence():
    g = torch.Generator().manual_seed(0)
    ids = torch.tensor([[3, 1, 3, 3, 0], [2, 2, 4, 1, 1]])
    scores = torch.randn(2, 6, generator=g)
    out = CompoundingRepetitionPenalty(1.2)(ids, scores)
    for row in range(2):
        assert torch.allclose(out[row], authors_loop(ids[row].tolist(), scores[row], 1.2))
    assert out[0, 3] == pytest.approx(float(scores[0, 3]) * (1.2 ** 3 if scores[0, 3] < 0 else 1.2 ** -3))
    assert out[0, 5] == scores[0, 5]  # never seen: unchanged


def test_differs_from_transformers_once_per_token_penalty_only_for_repeats():
    ids = torch.tensor([[1, 2, 2]])
    scores = torch.tensor([[1.0, 2.0, 3.0, -1.0]])
    ours = CompoundingRepetitionPenalty(1.2)(ids, scores.clone())
    theirs = RepetitionPenaltyLogitsProcessor(1.2)(ids, scores.clone())
    assert ours[0, 1] == pytest.approx(theirs[0, 1])            # seen once: the same
    assert ours[0, 2] == pytest.approx(theirs[0, 2] / 1.2)      # seen twice: one more factor


def test_window_counts_only_the_last_ids_and_bad_values_are_refused():
    ids = torch.tensor([[4, 4, 4, 1]])
    scores = torch.ones(1, 5)
    out = CompoundingRepetitionPenalty(2.0, window=2)(ids, scores)
    assert out[0, 4] == pytest.approx(0.5) and out[0, 1] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="penalty must be > 0"):
        CompoundingRepetitionPenalty(0.0)
    with pytest.raises(ValueError, match="window must be >= 1"):
        CompoundingRepetitionPenalty(1.2, window=0)
