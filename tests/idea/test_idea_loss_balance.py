"""The idea loss's two reductions (paper B: v1 summed, v2 averaged over the vocabulary) and the profiles' choice."""

from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from semlm.idea.profiles import LOSS_FORMS, IdeaSettings, idea_profile
from semlm.idea.wikitext_experiment import idea_gating_runs, with_chosen_gated
from semlm.core.metrics import NO_TARGET
from semlm.idea.targets import idea_bce_sparse, vocabulary_mask, window_ids


def test_paper_keeps_v1_and_the_small_profiles_train_both_forms():
    paper = idea_profile("paper")
    assert (paper.idea.idea_loss_reduction, paper.idea.idea_weight, paper.idea.pos_weight) == ("sum_vocab", 0.01, 5.0)
    assert [s.name for s in idea_gating_runs(paper)] == ["baseline", "gated"]
    for name in ("cpu", "smoke"):
        specs = {s.name: s for s in idea_gating_runs(idea_profile(name))}
        assert list(specs) == ["baseline", "gated-sum", "gated-mean"]
        for form, kw in LOSS_FORMS.items():
            assert (specs[f"gated-{form}"].config.idea.idea_loss_reduction,
                    specs[f"gated-{form}"].config.idea.idea_weight) == (kw["idea_loss_reduction"], kw["idea_weight"])
        assert not specs["baseline"].config.gated and specs["gated-mean"].config.gated


def test_unknown_idea_loss_reduction_is_rejected():
    with pytest.raises(ValueError, match="unknown idea_loss_reduction 'max'"):
        IdeaSettings(idea_loss_reduction="max")


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(1, 8), st.integers(1, 5), st.integers(3, 40), st.integers(0, 10_000),
       st.sampled_from([None, 5.0]), st.integers(0, 2))
def test_mean_reduction_is_the_masked_vocabulary_sum_divided_by_the_unmasked_columns(batch, length, window, vocab, seed,
                                                                                   pos_weight, n_stop):
    g = torch.Generator().manual_seed(seed)
    future = torch.randint(NO_TARGET, vocab, (batch, length + window - 1), generator=g)
    logits = torch.randn(batch, length, vocab, generator=g)
    positives = window_ids(future, window, length)
    mask = vocabulary_mask(vocab, list(range(n_stop)))
    summed = idea_bce_sparse(logits, positives, None, pos_weight, "sum_vocab", mask)
    mean = idea_bce_sparse(logits, positives, None, pos_weight, "mean", mask)
    assert torch.allclose(mean * (vocab - n_stop), summed, rtol=1e-5)


def test_the_chosen_gated_model_is_the_form_with_the_lower_validation_perplexity():
    from semlm.idea.records import IdeaRunMetrics

    class Run:
        def __init__(self, ppl):
            self.metrics = IdeaRunMetrics(val_ppl=ppl)

    ppl = {"baseline": 50.0, "gated-sum": 70.0, "gated-mean": 55.0}
    runs = {name: Run(value) for name, value in ppl.items()}
    chosen_runs, chosen = with_chosen_gated(runs)
    assert chosen == "gated-mean" and chosen_runs["gated"] is runs["gated-mean"] and "gated" not in runs
    runs["gated-sum"] = Run(54.0)
    assert with_chosen_gated(runs)[1] == "gated-sum"
    plain = {"baseline": Run(50.0), "gated": Run(60.0)}  # the paper profile trains v1 only
    chosen_runs, chosen = with_chosen_gated(plain)
    assert chosen == "gated" and set(chosen_runs) == {"baseline", "gated"}


def test_the_worker_policy_is_the_profiles():
    from semlm.idea.wikitext_experiment import IDEA

    assert IDEA.max_workers(idea_gating_runs(idea_profile("smoke"))) == 1
    assert IDEA.max_workers(idea_gating_runs(idea_profile("cpu"))) == idea_profile("cpu").max_workers == 2
