import math

import pytest
import torch

from semlm.metrics import TokenScores, focus_cross_entropy, perplexity


@pytest.fixture
def scores():
    return TokenScores(cross_entropy=torch.tensor([1.0, 2.0, 3.0, 0.5], dtype=torch.float64),
                       targets=torch.tensor([5, 6, 7, 5]), feature_squared_error=None)


def test_perplexity_is_exp_of_mean_cross_entropy(scores):
    assert perplexity(scores) == pytest.approx(math.exp(6.5 / 4))


def test_seen_only_perplexity_drops_held_out_targets(scores):
    assert perplexity(scores, exclude_targets=[7]) == pytest.approx(math.exp(3.5 / 3))


def test_seen_only_perplexity_is_nan_when_nothing_is_left(scores):
    assert math.isnan(perplexity(scores, exclude_targets=[5, 6, 7]))


def test_focus_cross_entropy_averages_per_occurrence(vocab):
    good, bad = vocab.id("good"), vocab.id("bad")
    s = TokenScores(torch.tensor([1.0, 3.0, 2.0], dtype=torch.float64), torch.tensor([good, good, bad]), None)
    out = focus_cross_entropy(s, vocab, ["good", "bad", "!"])
    assert out["good"] == pytest.approx(2.0) and out["bad"] == pytest.approx(2.0)
    assert math.isnan(out["!"])
