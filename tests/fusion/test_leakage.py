"""The generator's own conditional distribution: the floor for any causal model."""

import math
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from semlm.data import synthetic as syn
from semlm.fusion.leakage import causal_floors, training_oracle, validation_oracle

SPLIT = syn.held_out_split(111)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10_000))
def test_oracle_is_a_distribution_that_gives_every_generated_word_mass(seed):
    sentence = syn.sample_sentence(random.Random(seed), SPLIT.positive_train, SPLIT.negative_train)
    oracle = training_oracle(SPLIT)
    for t in range(len(sentence) + 1):
        probs = oracle.next_word(sentence[:t])
        assert sum(probs.values()) == pytest.approx(1.0)
    assert all(math.isfinite(ce) for _, ce in oracle.cross_entropies(sentence))


def test_focus_token_floors_match_hand_computation():
    # one-clause "!" (P = 0.4 * 3/12) and two-clause "?" (P = 1/12)
    sentences = [["Alice", "cooks", "the", "meal", ",", "very", "good", "!"],
                 ["Bob", "starts", "the", "task", ",", "slightly", "great", "but", "he", "reviews", "the", "paper",
                  ",", "very", "good", "?"]]
    floors = causal_floors(sentences, SPLIT, ["good", "very", "slightly", ",", "!", "?", "great"])
    assert floors["focus_ce"]["good"] == pytest.approx(math.log(4))      # 1 of 2 x 2 training adjectives
    assert floors["focus_ce"]["very"] == pytest.approx(math.log(3))      # weight 3 of 9
    assert floors["focus_ce"]["slightly"] == pytest.approx(math.log(4.5))
    assert floors["focus_ce"][","] == 0.0
    assert floors["focus_ce"]["!"] == pytest.approx(-math.log(0.4 * 3 / 12))
    assert floors["focus_ce"]["?"] == pytest.approx(math.log(12))
    assert floors["focus_ce"]["great"] == math.inf                       # held out: never seen
    assert floors["focus_ce_validation_oracle"]["great"] == pytest.approx(math.log(10))


def test_second_clause_subject_is_the_pronoun_of_the_first():
    assert validation_oracle().next_word(["Carol", "cooks", "the", "meal", ",", "very", "bad", "and"]) == {"she": 1.0}


def test_a_non_grammatical_prefix_is_refused():
    with pytest.raises(ValueError, match="not a prefix"):
        validation_oracle().next_word(["Alice", "cooks", "the", "meal", ",", "very", "good", "good"])


def _val_data(n_val=60):
    from semlm.data.synthetic import SyntheticConfig
    from semlm.fusion.synthetic_experiment import prepare_data

    return prepare_data(SyntheticConfig(n_train=8, n_val=n_val))


def test_a_model_equal_to_the_causal_oracle_scores_exactly_the_floor():
    from semlm.fusion.leakage import OracleLM
    from semlm.core.metrics import evaluate_language_model

    data = _val_data()
    floors = causal_floors(data.corpus.val, data.corpus.split, ["!", "good"])
    metrics = evaluate_language_model(OracleLM(validation_oracle(), data.vocab), data.val, data.vocab, data.held_out_ids)
    assert metrics["ppl"] == pytest.approx(floors["ppl"], rel=1e-6)  # float32 logits
    assert metrics["ppl_authors_denominator"] == pytest.approx(floors["ppl_authors_denominator"], rel=1e-6)  # float32 logits
    assert metrics["n_pad_targets"] == len(data.corpus.val)  # one <eos> -> <pad> target per sentence
    trained = evaluate_language_model(OracleLM(training_oracle(data.corpus.split), data.vocab), data.val, data.vocab,
                                      data.held_out_ids)
    assert trained["ppl_seen_only"] == pytest.approx(floors["ppl_seen_only"], rel=1e-6)  # float32 logits
    assert trained["ppl_seen_only_authors_denominator"] == pytest.approx(floors["ppl_seen_only_authors_denominator"],
                                                                         rel=1e-6)
    assert trained["focus_ce"]["!"] == pytest.approx(floors["focus_ce"]["!"], rel=1e-6)  # float32 logits


def test_counting_the_pad_after_eos_would_put_the_oracle_below_the_floor():
    # The bug this guards against: scoring <eos> -> <pad> adds near-free targets.
    from semlm.fusion.leakage import OracleLM
    from semlm.core.metrics import evaluate_language_model

    data = _val_data()
    floors = causal_floors(data.corpus.val, data.corpus.split, [])
    metrics = evaluate_language_model(OracleLM(validation_oracle(), data.vocab), data.val, data.vocab, data.held_out_ids)
    assert metrics["ppl_authors_denominator"] < floors["ppl"] - 0.05
    assert metrics["ppl"] >= floors["ppl"] - 1e-9


def test_published_training_rows_all_end_with_a_trained_eos_to_pad_target_as_the_authors_do():
    from semlm.data.synthetic import SyntheticConfig
    from semlm.fusion.synthetic_experiment import prepare_data

    config = SyntheticConfig(n_train=64, n_val=16)
    published, causal = prepare_data(config, "published"), prepare_data(config, "causal")
    eos, pad = published.vocab.id("<eos>"), published.vocab.pad_id
    # every published training row has <eos> as an input, and that position's <pad> target is scored (trained)
    at_eos = published.train.input_ids == eos
    assert at_eos.any(1).all() and (published.train.targets[at_eos] == pad).all()
    assert torch.equal(published.train.scored, published.train.mask)
    # causal training never scores it; validation is the same in both settings and never scores it either
    assert not (causal.train.scored & (causal.train.targets == pad)).any()
    for data in (published, causal):
        assert not (data.val.scored & (data.val.targets == pad)).any()
    assert torch.equal(published.val.scored, causal.val.scored)
