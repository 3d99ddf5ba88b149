"""A-feature-steering: paper A's own channel (the request in the per-token features, no logit steering), judged
against the same model given the opposite request, paired over training seeds, from chapter 4's record."""

import json

import pytest

from semlm.book.claims import evaluate_claims
from semlm.core.verdicts import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, REPRODUCED
from semlm.fusion.claims import FEATURE_STEERING_MIN_SEEDS
from semlm.core.records import Interval
from semlm.fusion.records import LeakageAuditRecord

SEEDS = [111, 112, 113, 114, 115]
STEERS = ([0.80, 0.84, 0.78, 0.82, 0.86], [0.22, 0.18, 0.25, 0.20, 0.16])  # requested, opposite per seed
DEAF = ([0.48, 0.51, 0.47, 0.50, 0.49], [0.52, 0.53, 0.50, 0.54, 0.51])    # features that do not steer


def audit_record(requested, opposite, seeds=None, **fields):
    """A chapter-4 record holding only the features-only measurement (hand-made, as the chapter writes it)."""
    seeds = SEEDS[:len(requested)] if seeds is None else seeds
    steering = {"seeds": seeds, "n_per_request": 200, "requested": Interval.of_mean(requested).to_dict(),
                "opposite": Interval.of_mean(opposite).to_dict(),
                "paired": Interval.paired(requested, opposite).to_dict(), **fields}
    return {"profile": "cpu", "feature_steering": steering}


def verdict(record):
    return {r["id"]: r for r in evaluate_claims({"04_leakage_audit": record})}["A-feature-steering"]


def test_features_that_steer_beyond_the_opposite_request_over_five_seeds_reproduce_the_claim():
    row = verdict(audit_record(*STEERS))
    assert row["status"] == REPRODUCED
    low, high = row["ci"]
    assert low > 0 and low <= row["causal_value"] <= high
    assert row["causal_value"] == pytest.approx(sum(STEERS[0]) / 5 - sum(STEERS[1]) / 5)
    assert "opposite request" in row["reason"]
    assert row["seeds"] == 5  # the paired interval rests on five training seeds


def test_features_that_score_no_better_than_the_opposite_request_do_not_reproduce_it():
    assert verdict(audit_record(*DEAF))["status"] == NOT_REPRODUCED
    # a model whose features do not steer, decoded with shared random numbers, writes the same sentences
    same = [0.45, 0.5, 0.55, 0.4, 0.6]
    row = verdict(audit_record(same, same))
    assert row["status"] == NOT_REPRODUCED and row["ci"] == [0.0, 0.0]


def test_an_interval_straddling_zero_is_inconclusive():
    requested, opposite = [0.7, 0.4, 0.6, 0.35, 0.65], [0.4, 0.55, 0.45, 0.5, 0.4]
    assert Interval.paired(requested, opposite).low < 0 < Interval.paired(requested, opposite).high
    assert verdict(audit_record(requested, opposite))["status"] == INCONCLUSIVE


def test_fewer_than_five_seeds_are_inconclusive_whatever_the_interval_and_the_reason_says_so():
    assert FEATURE_STEERING_MIN_SEEDS == 5
    for requested, opposite in (STEERS, DEAF):
        row = verdict(audit_record(requested[:3], opposite[:3]))
        assert row["status"] == INCONCLUSIVE
        assert f"needs {FEATURE_STEERING_MIN_SEEDS}" in row["reason"]
    assert verdict(audit_record([0.9], [0.1]))["status"] == INCONCLUSIVE


def test_the_rule_names_the_opposite_request_control_and_both_arms_decoding():
    rule = verdict(audit_record(*STEERS))["rule"]
    assert "opposite request" in rule and "paired by training seed" in rule
    assert "no logit steering" in rule and "grammar mask on" in rule and "per-token features" in rule
    assert str(FEATURE_STEERING_MIN_SEEDS) in rule


def test_a_record_without_the_measurement_is_not_run_and_names_the_field():
    row = verdict({"profile": "cpu"})
    assert row["status"] == NOT_RUN and "feature_steering" in row["reason"]
    requested_only = {"seeds": SEEDS, "requested": Interval.of_mean(STEERS[0]).to_dict()}
    row = verdict({"profile": "cpu", "feature_steering": requested_only})
    assert row["status"] == NOT_RUN and "feature_steering.opposite" in row["reason"]
    no_values = {"seeds": SEEDS, "requested": {"mean": 0.8, "ci_low": 0.7, "ci_high": 0.9},
                 "opposite": Interval.of_mean(STEERS[1]).to_dict()}
    row = verdict({"profile": "cpu", "feature_steering": no_values})
    assert row["status"] == NOT_RUN and "one per seed" in row["reason"]
    assert {r["id"]: r for r in evaluate_claims({})}["A-feature-steering"]["status"] == NOT_RUN


def test_the_typed_record_and_its_json_give_the_same_verdict():
    record = audit_record(*STEERS, judged_positive={"pos": Interval.of_mean(STEERS[0]).to_dict(),
                                                     "neg": Interval.of_mean(STEERS[1]).to_dict()})
    typed = LeakageAuditRecord.from_dict(record)
    assert typed.feature_steering.judged_positive["pos"].values == tuple(STEERS[0])
    round_trip = json.loads(json.dumps(typed.to_dict()))
    assert verdict(typed) == verdict(record) == verdict(round_trip)
