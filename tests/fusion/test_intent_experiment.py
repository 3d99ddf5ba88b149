"""Chapter 10's runs: its baseline and control-code models are chapter 4's runs, trained once."""

import json
from dataclasses import replace

import pytest
import torch

from semlm.core import runs
from semlm.fusion import intent_experiment as ie
from semlm.fusion.audit import audit_runs, audit_seeds
from semlm.fusion.synthetic_experiment import SYNTHETIC
from semlm.fusion.profiles import INTENT_STRENGTH_LEVELS, intent_profile
from semlm.profiles import PROFILES


@pytest.mark.parametrize("profile", PROFILES)
def test_every_shared_chapter_10_model_is_a_run_chapter_4_trains_at_the_same_profile(profile):
    config = intent_profile(profile)
    specs = ie.intent_runs(config, config.seeds())
    chapter_4 = audit_runs(config.synthetic, audit_seeds(config.synthetic))
    shared = [s for s in specs if s.name in ie.SHARED]
    assert len(shared) == len(ie.SHARED) * len(config.shared_seeds())
    assert {s.seed for s in specs if s.name in ("intent", "shuffled")} == set(config.seeds())
    for spec in shared:
        owner, owner_spec = ie.EXPERIMENT.shared_run(spec)
        assert owner is SYNTHETIC and owner_spec in chapter_4, (profile, spec.name, spec.seed)
    assert all(ie.EXPERIMENT.shared_run(s) is None for s in specs if s.name not in ie.SHARED)


def test_the_claims_pair_five_seeds_at_cpu_and_the_shared_models_stay_at_chapter_4s():
    from semlm.fusion.profiles import AUDIT_SEEDS

    config = intent_profile("cpu")
    specs = ie.intent_runs(config, config.seeds())
    assert config.n_seeds >= 5
    assert sorted(s.seed for s in specs if s.name == "shuffled") == config.seeds()
    assert {s.seed for s in specs if s.name in ie.SHARED} == set(config.seeds()[:AUDIT_SEEDS["cpu"]])


@pytest.fixture()
def small():
    config = intent_profile("smoke")
    synthetic = replace(config.synthetic, train=replace(config.synthetic.train, epochs=1))
    return replace(config, synthetic=synthetic, n_seeds=1, samples_per_request=2)


def test_a_shared_model_trains_once_under_its_owner_and_is_evaluated_by_chapter_10(small, tmp_path, monkeypatch):
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv("SEMLM_RUN_LOG", str(log))
    spec = next(s for s in ie.intent_runs(small, small.seeds()) if s.name == "baseline")
    owner, owner_spec = ie.EXPERIMENT.shared_run(spec)

    first = runs.run_one(ie.EXPERIMENT, spec, tmp_path)
    assert first.status == "trained" and first.trained_by == owner.reference()
    assert first.run_dir == str(runs.run_folder(owner, owner_spec, tmp_path, "cpu", 1))
    assert set(first.metrics.readings) == {"baseline"}

    # chapter 4 then loads the model it would have trained; chapter 10 loads its own record
    by_owner = runs.run_one(owner, owner_spec, tmp_path)
    again = runs.run_one(ie.EXPERIMENT, spec, tmp_path)
    assert (by_owner.status, again.status) == ("loaded", "loaded")
    assert again.metrics == first.metrics and by_owner.train_seconds == first.train_seconds
    for (name, a), (_, b) in zip(again.load().state_dict().items(), by_owner.load().state_dict().items()):
        assert torch.equal(a, b), name
    # one log line per chapter record: the owner's run inside chapter 10's is not logged twice
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(line["experiment"], line["status"]) for line in lines] == [
        (ie.EXPERIMENT.reference(), "trained"), (owner.reference(), "loaded"), (ie.EXPERIMENT.reference(), "loaded")]
    # every line names the trained model: the owner's run, for chapter 10's records too
    assert {tuple(line["model"]) for line in lines} == {(owner.reference(), "causal", "baseline", spec.seed)}


def test_a_shared_run_is_keyed_by_its_owner_so_a_retrained_owner_is_re_evaluated(small, monkeypatch):
    spec = next(s for s in ie.intent_runs(small, small.seeds()) if s.name == "control_code")
    key = runs.run_key(ie.EXPERIMENT, spec, "cpu", 1)
    original = runs.training_key
    monkeypatch.setattr(runs, "training_key",
                        lambda e: "edited" if e is SYNTHETIC else original(e))
    assert runs.run_key(ie.EXPERIMENT, spec, "cpu", 1) != key
    intent = next(s for s in ie.intent_runs(small, small.seeds()) if s.name == "intent")
    monkeypatch.setattr(runs, "training_key", original)
    assert runs.run_key(ie.EXPERIMENT, intent, "cpu", 1) != key


def test_a_model_trained_by_chapter_10_itself_names_no_owner(small, tmp_path):
    spec = next(s for s in ie.intent_runs(small, small.seeds()) if s.name == "intent")
    record = runs.run_one(ie.EXPERIMENT, spec, tmp_path)
    assert record.trained_by == "" and record.spec is spec
    assert record.run_dir == str(runs.run_folder(ie.EXPERIMENT, spec, tmp_path, "cpu", 1))
    assert set(record.metrics.readings) == {"intent", "no_request"}


def test_a_sentence_writes_the_mean_strength_of_its_intensifiers():
    assert ie.written_intensity("the cat is very good .".split()) == 0.8
    assert ie.written_intensity("the cat is slightly good and it is extremely bad !".split()) == pytest.approx(0.6)
    assert ie.written_intensity("the cat is good .".split()) != ie.written_intensity("the cat is good .".split())


def test_the_rank_correlation_is_spearmans_with_mid_ranks_and_zero_without_a_response():
    assert ie.rank_correlation([0.2, 0.5, 0.8, 1.0], [0.2, 0.5, 0.9, 1.0]) == pytest.approx(1.0)
    assert ie.rank_correlation([0.2, 0.5, 0.8, 1.0], [1.0, 0.8, 0.5, 0.2]) == pytest.approx(-1.0)
    # ties take mid-ranks: x ranks 1.5 1.5 3.5 3.5, y ranks 1 2 3 4 -> r = 4 / sqrt(4 * 5)
    assert ie.rank_correlation([0.2, 0.2, 1.0, 1.0], [0.1, 0.2, 0.3, 0.4]) == pytest.approx(4 / 20 ** 0.5)
    assert ie.rank_correlation([0.2, 0.5, 0.8], [0.5, 0.5, 0.5]) == 0.0     # the writing never moves
    assert ie.rank_correlation([0.2, 0.5, 0.8], [0.2, float("nan"), 0.8]) == pytest.approx(1.0)  # NaN dropped


def test_the_sweep_writes_every_trained_level_and_labels_the_interpolations(small):
    levels = INTENT_STRENGTH_LEVELS
    kinds = [ie.sweep_point_kind(v) for v in levels]
    assert kinds.count("trained") >= 4 and kinds.count("interpolated") <= 2
    with pytest.raises(ValueError, match="strength_levels"):
        replace(small, strength_levels=(0.2, 0.5, 1.0))                     # a trained level missing
    with pytest.raises(ValueError, match="strength_levels"):
        replace(small, strength_levels=(0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0))  # three interpolations
    with pytest.raises(ValueError, match="strength_levels"):
        replace(small, strength_levels=(0.0, 0.2, 0.5, 0.8, 1.0))            # outside the trained range


def test_the_record_carries_per_seed_correlations_of_both_models_and_their_paired_difference(small, tmp_path):
    specs = [s for s in ie.intent_runs(replace(small, n_seeds=2), [111, 112]) if s.name in ("intent", "shuffled")]
    records = [runs.run_one(ie.EXPERIMENT, spec, tmp_path) for spec in specs]
    summary = ie.summarise(records)  # the two fusion models only
    assert set(summary.variants) == {"intent", "no_request", "shuffled"}
    intent, shuffled, paired = summary.intensity, summary.intensity_shuffled, summary.intensity_paired
    assert intent.seeds == shuffled.seeds == [111, 112]
    assert [p.kind for p in intent.points] == [ie.sweep_point_kind(v) for v in INTENT_STRENGTH_LEVELS]
    assert intent.points[0].triplet == pytest.approx([1.0, 0.8866, 0.786], abs=1e-4)  # slightly's triplet
    assert list(paired.values) == pytest.approx([a - b for a, b in zip(intent.rank_correlation.values,
                                                                        shuffled.rank_correlation.values)])


def test_shared_models_at_fewer_seeds_are_summarised_over_their_own_seeds(small, tmp_path):
    config = replace(small, n_seeds=2, n_shared_seeds=1)
    specs = ie.intent_runs(config, [111, 112])
    assert sorted((s.name, s.seed) for s in specs if s.name in ie.SHARED) == [("baseline", 111), ("control_code", 111)]
    summary = ie.summarise([runs.run_one(ie.EXPERIMENT, spec, tmp_path) for spec in specs])
    assert len(summary.variants["intent"].polarity_acc.values) == len(summary.variants["shuffled"].ppl.values) == 2
    assert len(summary.variants["baseline"].polarity_acc.values) == len(summary.variants["control_code"].ppl.values) == 1
    assert summary.seeds == [111, 112]
