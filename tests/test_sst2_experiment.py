"""SST-2 experiment pieces: bucketed batches, the independent classifier, control on real text, causality."""

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from semlm.causality import future_sensitivity
from semlm.data.dataset import LMTensors
from semlm.metrics import perplexity, score_tokens
from semlm.models import build_model
from semlm.sst2_experiment import (
    classifier_accuracy, continue_under_control, control_prefixes, judge_continuations, prepare_sst2,
    sst2_model_config, sst2_profile, train_sentiment_classifier,
)

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def toy():
    """The pipeline on the hand-written fixture (all 24 rows, every word kept)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SEMLM_DATA_DIR", str(FIXTURES))
        profile = replace(sst2_profile("smoke"), n_train=None, min_freq=1)
        return profile, prepare_sst2(profile)


def test_fixture_without_phrase_trees_falls_back_for_capitalisation(toy):
    _, data = toy
    assert data.capitalisation_source.startswith("tag prior")
    assert len(data.train_sentences) == 24 and len(data.dev_sentences) == 8


def test_bucketed_batches_visit_every_row_once_and_trim_padding(toy):
    _, data = toy
    train = data.tensors["causal"]["train"]
    seen, generator = [], torch.Generator().manual_seed(0)
    for batch in train.batches(5, generator, shuffle=True):
        assert batch.mask[:, -1].any()  # no all-padding column at the end
        seen += batch.input_ids[:, 0].tolist()
    assert len(seen) == len(train)


def test_trimming_padding_leaves_perplexity_unchanged(toy):
    profile, data = toy
    dev = data.tensors["causal"]["dev"]
    torch.manual_seed(0)
    model = build_model(sst2_model_config(profile, "fusion", len(data.vocab), "causal"))
    trimmed = perplexity(score_tokens(model, dev, batch_size=3))
    padded = perplexity(score_tokens(model, LMTensors(dev.input_ids, dev.targets, dev.features, dev.mask, dev.scored),
                                          batch_size=3))
    assert trimmed == pytest.approx(padded, rel=1e-5)


@pytest.mark.parametrize("kind", ["baseline", "fusion"])
def test_causal_model_with_sst2_features_ignores_later_tokens(toy, kind):
    profile, data = toy
    model = build_model(sst2_model_config(profile, kind, len(data.vocab), "causal"))
    ids = data.tensors["causal"]["dev"].input_ids[:4, :8]
    assert future_sensitivity(model, data.featurizers["causal"], ids, 4, data.vocab.id("!")) < 1e-5


def test_hard_control_never_writes_an_adjective_of_the_other_class(toy):
    profile, data = toy
    model = build_model(sst2_model_config(profile, "fusion", len(data.vocab), "causal"))
    prefixes = [s[:2] for s in data.dev_sentences]
    config = replace(profile.control, new_tokens=8, temperature=3.0, top_p=1.0)
    adjectives = {w for w in data.vocab.tokens if data.prior.majority(w) == "ADJ"}
    for request, cls in (("pos", "positive"), ("neg", "negative")):
        allowed = {data.vocab.tokens[i] for i in data.adjective_classes[cls].tolist()}
        out = continue_under_control(model, data, prefixes * 8, request, "hard", config, seed=3)
        written = {w for words in out for w in words if w in adjectives}
        assert written and written <= allowed, written - allowed
        assert all(3 <= len(words) <= 8 for words in out)  # <eos> banned for the first 3 tokens


def test_control_requests_are_validated(toy):
    profile, data = toy
    model = build_model(sst2_model_config(profile, "baseline", len(data.vocab), "causal"))
    with pytest.raises(ValueError, match="unknown request 'up'"):
        continue_under_control(model, data, [["a"]], "up", "soft", profile.control)
    with pytest.raises(ValueError, match="same number of words"):
        continue_under_control(model, data, [["a"], ["a", "b"]], "pos", "soft", profile.control)


def test_judges_count_polarity_of_continuations(toy):
    profile, data = toy
    classifier = train_sentiment_classifier(profile.classifier, 0, data.train_sentences,
                                            [1, 0] * 12)  # fixture rows alternate positive / negative
    judged = judge_continuations([["a", "wonderful", "delight"], ["awful", "and", "boring"]], classifier, "pos")
    assert judged["acc"]["k"] == 1 and judged["acc"]["n"] == 2
    assert judged["vader"] == {"POS": 1, "NEG": 1}
    assert control_prefixes(data, replace(profile.control, prefix_words=3, min_sentence_words=8)) == [
        s[:3] for s in data.dev_sentences if len(s) >= 8]


@pytest.mark.needs_data("sst2/train.tsv", "sst2/dev.tsv")
def test_classifier_dev_accuracy_in_smoke_profile_is_well_above_chance():
    from semlm.data.sst2 import load_sst2

    profile = sst2_profile("smoke")
    classifier = train_sentiment_classifier(profile.classifier, 111)
    dev = load_sst2("dev").to_dict()
    accuracy = classifier_accuracy(classifier, [s.split() for s in dev["sentence"]], dev["label"])
    assert accuracy["value"] > 0.70, accuracy  # chance is 0.51; the full classifier reaches ~0.79
