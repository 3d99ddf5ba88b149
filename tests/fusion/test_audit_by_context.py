"""Chapter 4's issue-44 measurements: the mirror-image requests of A-feature-steering, which column group of the
paper's requests moves p(positive) at the adjective, Table 6 by context and the OOD hit rates' own seeds."""

import glob
import json
import math

import pytest
import torch

from semlm.core.metrics import FOCUS_TOKENS, evaluate_language_model
from semlm.core.runs import RunRecord
from semlm.fusion.profiles import synthetic_profile

SYNTHETIC_REF = "semlm.fusion.synthetic_experiment:SYNTHETIC"
SEEDS = [111, 112]
FLOORS = {"ppl": 2.0, "ppl_seen_only": 1.9, "ppl_authors_denominator": 1.8, "ppl_seen_only_authors_denominator": 1.7,
          "focus_ce": {token: 1.0 for token in FOCUS_TOKENS}}


def fake_report(hit):
    rate = {"value": hit, "ci_low": 0.0, "ci_high": 1.0, "k": 1, "n": 2}
    accuracy = {"adj_acc": rate, "punct_acc": rate}
    return {"hard": {"pos": accuracy, "neg": accuracy}, "soft": {"pos": accuracy, "neg": accuracy},
            "ood_hit": {"pos": rate, "neg": rate}, "confusion_diagonal": hit}


@pytest.fixture(scope="module")
def tiny_audit():
    """Untrained smoke-size baseline and fusion models in both settings at two seeds, their real run metrics
    (``evaluate_language_model`` on the smoke validation split), and records whose ``load`` returns them."""
    from semlm.fusion.audit import ABLATIONS, AuditRuns
    from semlm.fusion.model import build_model
    from semlm.fusion.synthetic_experiment import SETTINGS, model_config, prepare_data

    profile = synthetic_profile("smoke")
    models, records = {}, []
    for setting in SETTINGS:
        data = prepare_data(profile.corpus, setting)
        for seed in SEEDS:
            for name in ("baseline", "fusion"):
                torch.manual_seed(seed)
                model = build_model(model_config(profile, name, len(data.vocab), setting)).eval()
                metrics = evaluate_language_model(model, data.val, data.vocab, data.held_out_ids)
                models[(setting, name, seed)] = model
                records.append(RunRecord(SYNTHETIC_REF, name, seed, setting, {}, "key", "unused", "trained", 1.0, 1,
                                         [], metrics, "cpu", 1, 0.0))
    fusion = next(r.metrics for r in records if (r.group, r.name) == ("causal", "fusion"))
    for seed in SEEDS:  # the ablations and the control-code model: numbers only, never loaded here
        for name in ABLATIONS + ("control_code",):
            records.append(RunRecord(SYNTHETIC_REF, name, seed, "causal", {}, "key", "unused", "trained", 1.0, 1, [],
                                     fusion, "cpu", 1, 0.0))
    audit = AuditRuns.of(records, SEEDS)
    return audit, models


@pytest.fixture
def loadable(tiny_audit, monkeypatch):
    audit, models = tiny_audit
    monkeypatch.setattr(RunRecord, "load", lambda self, *a, **k: models[(self.group, self.name, self.seed)])
    return audit


def test_feature_steering_requests_differ_only_in_polarity():
    from semlm.fusion.audit import differing_predicates
    from semlm.fusion.request import COLUMN_GROUPS, FEATURE_STEERING_REQUESTS, PAPER_REQUESTS

    pos, neg = FEATURE_STEERING_REQUESTS["pos"], FEATURE_STEERING_REQUESTS["neg"]
    assert set(pos.values) == set(neg.values) and pos.punctuation == neg.punctuation
    assert set(differing_predicates(pos, neg)) <= set(COLUMN_GROUPS["polarity"])
    assert (pos.polarity, neg.polarity) == ("positive", "negative") and pos.strength == neg.strength
    assert pos.mirror_image().values == neg.values and neg.mirror_image().values == pos.values
    # the paper's pair is not a mirror image: its negative request also asks a question and another strength
    assert {"is_question", "str_med", "str_high"} <= set(differing_predicates(*PAPER_REQUESTS.values()))


def test_focus_ce_by_context_adds_up(loadable):
    from semlm.fusion.audit import AFTER_ADJECTIVE_TOKENS, LeakageAudit, focus_by_context
    from semlm.fusion.records import LeakageAuditRecord

    reports = {key: fake_report(0.5) for key in loadable.runs if key[1] != "baseline"}
    record = LeakageAudit.of(loadable, reports, FLOORS, 2,
                             by_context=focus_by_context(loadable, synthetic_profile("smoke")))
    record = LeakageAuditRecord.from_dict(json.loads(json.dumps(record.to_dict())))  # as a metrics file reads back
    assert set(record.focus_ce_by_context) == set(AFTER_ADJECTIVE_TOKENS)
    for token, by_arm in record.focus_ce_by_context.items():
        assert set(by_arm) == {"causal baseline", "causal fusion", "published baseline", "published fusion"}
        for arm, split in by_arm.items():
            overall = record.focus_ce_seeds[token][arm]  # the run metrics' CE per seed, a list as before
            assert len(overall) == len(SEEDS) == len(split.after_trained.values) == len(split.after_held_out.counts)
            for i in range(len(SEEDS)):
                parts = [(kind.values[i], kind.counts[i]) for kind in (split.after_trained, split.after_held_out)]
                n = sum(count for _, count in parts)
                assert n > 0
                weighted = sum(value * count for value, count in parts if count) / n
                assert weighted == pytest.approx(overall[i], abs=1e-6)
    frame = LeakageAudit.from_dict(record.to_dict()).focus_context_frame()
    assert len(frame) == len(AFTER_ADJECTIVE_TOKENS) * 4 and frame["held-out share"].between(0, 1).all()


def test_old_chapter_4_records_without_the_split_still_load():
    from semlm.fusion.audit import LeakageAudit

    paths = sorted(glob.glob("book/recorded/*/metrics/04_leakage_audit.json"))
    assert paths
    old = 0
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        record = LeakageAudit.from_dict(data)
        token = next(iter(record.focus_ce_seeds))
        assert isinstance(record.focus_ce_seeds[token]["causal fusion"], list)
        if "focus_ce_by_context" not in data:  # written before the split: loads, with nothing to show
            old += 1
            assert record.focus_ce_by_context is None and record.focus_context_frame().empty
        else:  # a build that has it (cpu-book-48558a4 on): typed
            assert not record.focus_context_frame().empty
    assert old > 0


def test_a_split_token_must_always_follow_an_adjective(loadable):
    from semlm.fusion.audit import focus_ce_after_adjectives
    from semlm.fusion.synthetic_experiment import prepare_data

    data = prepare_data(synthetic_profile("smoke").corpus)
    with pytest.raises(ValueError, match="does not always follow an adjective"):
        focus_ce_after_adjectives(loadable.runs[("causal", "fusion", 111)].load(), data, (",",))


def test_column_shifts_cover_every_prefix_and_vanish_where_the_requests_agree(loadable):
    from semlm.fusion.audit import adjective_slot_prefixes, column_shifts, prefix_shifts, written_columns
    from semlm.fusion.request import FEATURE_STEERING_REQUESTS, PAPER_REQUESTS
    from semlm.fusion.synthetic_experiment import prepare_data

    data = prepare_data(synthetic_profile("smoke").corpus)
    assert adjective_slot_prefixes(data.vocab).shape == (500, 7)
    assert set(written_columns(PAPER_REQUESTS)) == {"polarity", "is_question", "strength", "all"}
    assert written_columns(PAPER_REQUESTS)["is_question"] == {"is_question": [0.0, 1.0]}
    mirror = written_columns(FEATURE_STEERING_REQUESTS)
    assert "is_question" not in mirror and mirror["strength"] == {"str_high": [0.9, 0.9]}
    fusion = loadable.runs[("causal", "fusion", 111)].load()
    shifts = prefix_shifts(fusion, data.featurizer, mirror)
    assert shifts["strength"] == 0.0 and shifts["polarity"] != 0.0  # an untrained fusion model still reads them
    deaf = prefix_shifts(loadable.runs[("causal", "baseline", 111)].load(), data.featurizer, mirror)
    assert all(value == 0.0 for value in deaf.values())  # the baseline ignores its features
    table = column_shifts(loadable, synthetic_profile("smoke"))
    assert table.seeds == SEEDS and table.n_prefixes == 500
    assert set(table.shift) == {"causal fusion", "published fusion"}
    assert all(len(interval.values) == len(SEEDS) and -1 <= interval.mean <= 1
               for by_group in table.shift.values() for interval in by_group.values())


def test_feature_steering_records_its_mirror_requests_and_the_shift_table(loadable):
    from dataclasses import replace

    from semlm.fusion.audit import LeakageAudit, feature_steering
    from semlm.fusion.records import LeakageAuditRecord

    steering = feature_steering(loadable, synthetic_profile("smoke"), 6)
    assert steering.differing_predicates == ["pos_high", "neg_high"]
    assert steering.requests["pos"]["str_high"] == steering.requests["neg"]["str_high"] == 0.9
    assert '"!"' in steering.requests_description
    reports = {key: fake_report(0.5) for key in loadable.runs if key[1] != "baseline"}
    record = replace(LeakageAudit.of(loadable, reports, FLOORS, 6), feature_steering=steering)
    saved = LeakageAuditRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert saved.feature_steering.column_shifts.shift["published fusion"]["is_question"].values == tuple(
        steering.column_shifts.shift["published fusion"]["is_question"].values)
    frame = record.column_shift_frame()
    assert list(frame.index) == ["polarity", "is_question", "strength", "all"]
    assert list(frame.columns) == ["positive / negative request", "causal fusion", "published fusion"]
    assert len(record.steering_frame()) == len(SEEDS) + 1


def test_the_ood_hit_rates_run_on_their_own_seeds():
    from semlm.fusion.audit import audit_runs, ood_seeds, steering_seeds
    from semlm.fusion.profiles import OOD_SEEDS

    seeds, cpu = [111, 112, 113], synthetic_profile("cpu")
    ood = ood_seeds(cpu, seeds)
    assert ood == list(range(111, 111 + OOD_SEEDS["cpu"])) and len(ood) >= 6
    base = audit_runs(cpu, seeds)
    extra = audit_runs(cpu, seeds, steering_seeds(cpu, seeds) + ood)[len(base):]
    assert [(s.group, s.name, s.seed) for s in extra] == [("causal", "fusion", s) for s in (114, 115, 116)]
    assert ood_seeds(synthetic_profile("smoke"), [111, 112]) == [111, 112]


def test_the_causal_ood_interval_uses_every_ood_seed(tiny_audit):
    from semlm.fusion.audit import AuditRuns, LeakageAudit

    audit, _ = tiny_audit
    extra = [RunRecord(SYNTHETIC_REF, "fusion", 113, "causal", {}, "key", "unused", "trained", 1.0, 1, [],
                       audit.runs[("causal", "fusion", 111)].metrics, "cpu", 1, 0.0)]
    runs = AuditRuns.of([*audit.runs.values(), *extra], SEEDS)
    reports = {key: fake_report(0.1 * (key[2] - 110)) for key in runs.runs if key[1] != "baseline"}
    record = LeakageAudit.of(runs, reports, FLOORS, 2, ood_seeds=[111, 112, 113])
    assert record.ood_hit["causal"]["neg"].values == pytest.approx((0.1, 0.2, 0.3))
    assert record.ood_hit["published"]["neg"].values == pytest.approx((0.1, 0.2))
    assert record.ood_hit_seeds == {"causal": [111, 112, 113], "published": SEEDS}
    assert len(record.ablations["fusion"]["ood_hit"]["neg"].values) == len(SEEDS)  # ablations stay paired
    assert not math.isnan(record.ood_hit["causal"]["pos"].mean)
