"""The idea loss's reduction option and the gradient-balance probe of chapter 6 (paper B, v1 vs v2 loss)."""

from dataclasses import dataclass, replace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from semlm.idea_experiment import IdeaSettings, TokenBlocks, gradient_balance, idea_profile
from semlm.idea_targets import PAD_ID, idea_bce_sparse, window_ids


def test_small_profiles_use_the_mean_reduced_idea_loss_and_paper_keeps_v1():
    paper = idea_profile("paper").idea
    assert (paper.idea_loss_reduction, paper.idea_weight, paper.pos_weight) == ("sum_vocab", 0.01, 5.0)
    for name in ("cpu", "smoke"):
        small = idea_profile(name).idea
        assert (small.idea_loss_reduction, small.idea_weight) == ("mean", 0.1)
        assert replace(small, idea_loss_reduction="sum_vocab", idea_weight=0.01, alpha_ramp_steps=2000) == paper


def test_unknown_idea_loss_reduction_is_rejected():
    with pytest.raises(ValueError, match="unknown idea_loss_reduction 'max'"):
        IdeaSettings(idea_loss_reduction="max")


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(1, 8), st.integers(1, 5), st.integers(2, 40), st.integers(0, 10_000),
       st.sampled_from([None, 5.0]))
def test_mean_reduction_is_the_vocabulary_sum_divided_by_the_vocabulary_size(batch, length, window, vocab, seed,
                                                                            pos_weight):
    g = torch.Generator().manual_seed(seed)
    future = torch.randint(PAD_ID, vocab, (batch, length + window - 1), generator=g)
    logits = torch.randn(batch, length, vocab, generator=g)
    positives = window_ids(future, window, length)
    summed = idea_bce_sparse(logits, positives, None, pos_weight, "sum_vocab")
    mean = idea_bce_sparse(logits, positives, None, pos_weight, "mean")
    assert torch.allclose(mean * vocab, summed, rtol=1e-5)


@dataclass
class TinyData:
    """What gradient_balance needs from IdeaData: train blocks, a tokenizer length and stopwords."""

    stream: torch.Tensor
    tokenizer: list
    stopword_ids: list

    def blocks(self, split, profile):
        return TokenBlocks.from_stream(self.stream, profile.size.block_size, profile.idea.window)


def test_gradient_balance_probe_scales_the_idea_gradient_by_weight_over_vocabulary_at_the_first_step():
    profile = idea_profile("smoke")
    vocab = 40
    data = TinyData(torch.randint(0, vocab, (2000,), generator=torch.Generator().manual_seed(0)), [None] * vocab, [0])
    forms = {"v1": replace(profile.idea, idea_loss_reduction="sum_vocab", idea_weight=0.01),
             "v2": replace(profile.idea, idea_loss_reduction="mean", idea_weight=0.1)}
    result = gradient_balance(profile, data, forms, steps=3, every=2, device="cpu")
    assert [r["step"] for r in result["v1"]["rows"]] == [0, 2] and len(result["v1"]["token_ce"]) == 3
    first = {name: r["rows"][0] for name, r in result.items()}
    # same weights and batch, alpha = 0 at step 0: identical token gradients, idea gradients scaled by 10 / V
    assert first["v1"]["token_grad"] == pytest.approx(first["v2"]["token_grad"], rel=1e-6)
    assert first["v2"]["idea_grad"] == pytest.approx(first["v1"]["idea_grad"] * 10 / vocab, rel=1e-4)
    for row in result["v1"]["rows"] + result["v2"]["rows"]:
        assert row["ratio"] == pytest.approx(row["idea_grad"] / row["token_grad"])
        assert 0 < row["token_grad_kept"] <= 1.0
