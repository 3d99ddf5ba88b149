"""SST-2 experiment pieces: the runs, bucketed batches, the independent classifier, control on real text, causality."""

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from semlm.core.causality import future_sensitivity
from semlm.core.metrics import perplexity
from semlm.fusion.model import build_model
from semlm.fusion.profiles import sst2_profile
from semlm.fusion.sst2_experiment import (
    SST2, classifier_accuracy, continue_under_control, control_prefixes, judge_continuations, prepare_sst2,
    sst2_requests, sst2_runs, sst2_spec, train_sentiment_classifier,
)
from semlm.fusion.synthetic_experiment import model_config
from semlm.fusion.request import Request
from semlm.core import runs


def run_sst2(profile, data, runs_dir, **which):
    specs = sst2_runs(profile, **which)
    SST2.use_data(specs[0], data)
    records = runs.run_many(SST2, specs, runs.RunContext(profile.name, runs_dir, workers=1))
    return runs.nested(records, "group", "name")

FIXTURES = Path(__file__).parents[1] / "fixtures"


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


def test_training_batches_are_length_bucketed_so_most_of_a_batch_is_not_padding(toy):
    from semlm.fusion.sst2_experiment import SST2_BUCKET_BATCHES

    _, data = toy
    for setting in ("causal", "published"):
        assert data.tensors[setting]["train"].bucket_batches == SST2_BUCKET_BATCHES > 0
    train, generator = data.tensors["causal"]["train"], torch.Generator().manual_seed(0)
    lengths = [batch.mask.sum(1) for batch in train.batches(4, generator, shuffle=True)]
    spread = sum(int(l.max() - l.min()) for l in lengths) / len(lengths)
    assert spread < float(train.mask.sum(1).float().std())  # similar lengths share a batch


def test_runs_train_once_then_load_and_report_the_dev_perplexity_of_the_saved_model(toy, tmp_path):
    profile, data = toy
    profile = replace(profile, train=replace(profile.train, epochs=1))
    first = run_sst2(profile, data, tmp_path, kinds=("baseline", "fusion"), settings=("causal",))
    assert set(first) == {"causal"} and set(first["causal"]) == {"baseline", "fusion"}
    fusion = first["causal"]["fusion"]
    assert fusion.status == "trained" and fusion.steps == -(-24 // profile.train.batch_size)
    assert fusion.metrics.sem_mse is not None and first["causal"]["baseline"].metrics.sem_mse is None
    assert fusion.metrics.ppl == pytest.approx(perplexity(fusion.load(), data.tensors["causal"]["dev"]), rel=1e-6)
    again = run_sst2(profile, data, tmp_path, kinds=("fusion",), settings=("causal",))
    assert again["causal"]["fusion"].status == "loaded"
    assert again["causal"]["fusion"].metrics == fusion.metrics


def test_models_start_from_the_small_tied_embedding(toy):
    profile, data = toy
    spec = sst2_spec(profile, "fusion", "published")
    model = SST2.build(spec, data)
    d = profile.backbone.d_model
    assert model.backbone.embed.weight.std().item() == pytest.approx(d ** -0.5, rel=0.15)
    assert not model.backbone.config.causal


def test_runs_refuse_data_of_another_profile_and_unknown_models(toy, tmp_path):
    profile, data = toy
    with pytest.raises(ValueError, match="training rows"):
        run_sst2(replace(profile, n_train=5), data, tmp_path)
    with pytest.raises(ValueError, match="unknown model 'gpt'"):
        sst2_spec(profile, "gpt", "causal")
    with pytest.raises(ValueError, match="unknown setting"):
        sst2_spec(profile, "fusion", "bidirectional")


@pytest.mark.parametrize("kind", ["baseline", "fusion"])
def test_causal_model_with_sst2_features_ignores_later_tokens(toy, kind):
    profile, data = toy
    model = build_model(model_config(profile, kind, len(data.vocab), "causal"))
    ids = data.tensors["causal"]["dev"].input_ids[:4, :8]
    assert future_sensitivity(model, data.featurizers["causal"], ids, 4, data.vocab.id("!")) < 1e-5


def test_hard_control_never_writes_an_adjective_of_the_other_class(toy):
    profile, data = toy
    model = build_model(model_config(profile, "fusion", len(data.vocab), "causal"))
    prefixes = [s[:2] for s in data.dev_sentences]
    config = replace(profile.control, new_tokens=8, temperature=3.0, top_p=1.0)
    adjectives = {w for w in data.vocab.tokens if data.prior.majority(w) == "ADJ"}
    for request in sst2_requests(config).values():
        allowed = {data.vocab.tokens[i] for i in data.adjective_classes[request.polarity].tolist()}
        out = continue_under_control(model, data, prefixes * 8, request, "hard", config, seed=3)
        written = {w for words in out for w in words if w in adjectives}
        assert written and written <= allowed, written - allowed
        assert all(3 <= len(words) <= 8 for words in out)  # <eos> banned for the first 3 tokens


def test_control_requests_are_validated(toy):
    profile, data = toy
    model = build_model(model_config(profile, "baseline", len(data.vocab), "causal"))
    with pytest.raises(ValueError, match="unknown control mode 'up'"):
        continue_under_control(model, data, [["a"]], Request(), "up", profile.control)
    with pytest.raises(ValueError, match="same number of words"):
        continue_under_control(model, data, [["a"], ["a", "b"]], Request(), "soft", profile.control)


def test_judges_count_polarity_of_continuations(toy):
    profile, data = toy
    classifier = train_sentiment_classifier(profile.classifier, 0, data.train_sentences,
                                            [1, 0] * 12)  # fixture rows alternate positive / negative
    judged = judge_continuations([["a", "wonderful", "delight"], ["awful", "and", "boring"]], classifier,
                                  sst2_requests(profile.control)["pos"])
    assert judged.acc.successes == 1 and judged.acc.n == 2
    assert judged.vader == {"POS": 1, "NEG": 1}
    assert control_prefixes(data, replace(profile.control, prefix_words=3, min_sentence_words=8)) == [
        s[:3] for s in data.dev_sentences if len(s) >= 8]


@pytest.mark.needs_data("sst2/train.tsv", "sst2/dev.tsv")
def test_classifier_dev_accuracy_in_smoke_profile_is_well_above_chance():
    from semlm.data.sst2 import load_sst2

    profile = sst2_profile("smoke")
    classifier = train_sentiment_classifier(profile.classifier, 111)
    dev = load_sst2("dev").to_dict()
    accuracy = classifier_accuracy(classifier, [s.split() for s in dev["sentence"]], dev["label"])
    assert accuracy.mean > 0.70, accuracy  # chance is 0.51; the full classifier reaches ~0.79
