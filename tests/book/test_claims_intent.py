"""Chapter 10's claims: features-only soft control and the intensity response, judged from its record."""

import pytest

from semlm.book.claims import evaluate_claims
from semlm.core.verdicts import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, REPRODUCED
from semlm.fusion.claims import INTENSITY_SMOOTH_THRESHOLD
from semlm.core.records import Interval
from semlm.fusion.records import IntentControlRecord

STRONG = [0.85, 0.9, 0.88]   # a rank correlation that follows the strength request
NONE = [0.02, -0.01, 0.03]   # what a channel unrelated to the words gives
STRONG_ACC, NONE_ACC = [0.9, 0.92, 0.88], [0.3, 0.33, 0.31]  # polarity accuracy per seed


def response(correlations, seeds=None):
    """An intensity response with one rank correlation per seed (hand-made, as the chapter writes it)."""
    seeds = list(range(len(correlations))) if seeds is None else seeds
    return {"seeds": seeds, "rank_correlation": Interval.of_mean(correlations).to_dict(),
            "points": [{"level": 0.2, "triplet": [1.0, 0.887, 0.786], "kind": "trained",
                        "written": Interval.of_mean([0.3] * len(correlations)).to_dict()}]}


def intent_record(intent_acc, shuffled_acc, intent_corr=STRONG, shuffled_corr=NONE, shuffled_seeds=None):
    """A chapter-10 record: polarity accuracy per seed of the two fusion models, and their intensity responses."""
    variants = {v: {"polarity_acc": Interval.of_mean(a).to_dict(), "punct_acc": Interval.of_mean(a).to_dict(),
                    "ppl": Interval.of_mean([3.0] * len(a)).to_dict()}
                for v, a in (("intent", intent_acc), ("shuffled", shuffled_acc), ("baseline", shuffled_acc),
                             ("control_code", intent_acc), ("no_request", shuffled_acc))}
    return IntentControlRecord.from_dict({"profile": "cpu", "intent": {
        "seeds": list(range(len(intent_acc))), "variants": variants,
        "intensity": response(intent_corr), "intensity_shuffled": response(shuffled_corr, shuffled_seeds)}})


def verdicts(record):
    return {r["id"]: r for r in evaluate_claims({"10_intent_control": record})}


def intensity(intent_corr, shuffled_corr, shuffled_seeds=None):
    return verdicts(intent_record([0.9] * len(intent_corr), [0.3] * len(intent_corr), intent_corr, shuffled_corr,
                                  shuffled_seeds))["A-intensity"]


def test_features_that_steer_polarity_beyond_the_shuffled_control_reproduce_the_claim():
    rows = verdicts(intent_record([0.9, 0.92, 0.88], [0.3, 0.33, 0.31]))
    assert rows["A-soft-control"]["status"] == REPRODUCED
    assert rows["A-soft-control"]["rule"] and "shuffled" in rows["A-soft-control"]["reason"]
    assert rows["A-soft-control"]["seeds"] == 3 and rows["A-intensity"]["seeds"] == 3


def test_features_no_better_than_the_shuffled_control_do_not_reproduce_it():
    rows = verdicts(intent_record([0.3, 0.31, 0.33], [0.31, 0.32, 0.33]))
    assert rows["A-soft-control"]["status"] == NOT_REPRODUCED
    noisy = verdicts(intent_record([0.5, 0.2, 0.45], [0.3, 0.33, 0.31]))  # better on average, interval spans 0
    assert noisy["A-soft-control"]["status"] == INCONCLUSIVE


def test_the_intensity_rule_names_the_shuffled_control_and_its_threshold():
    rule = intensity(STRONG, NONE)["rule"]
    assert "shuffled" in rule and "paired by training seed" in rule and str(INTENSITY_SMOOTH_THRESHOLD) in rule
    assert "trained" in rule and "interpolated" in rule and "Spearman" in rule


def test_an_intensity_response_well_beyond_the_shuffled_control_reproduces_the_claim():
    verdict = intensity(STRONG, NONE)
    assert verdict["status"] == REPRODUCED
    low, high = verdict["ci"]
    assert low > INTENSITY_SMOOTH_THRESHOLD and low <= verdict["causal_value"] <= high
    assert verdict["causal_value"] == pytest.approx(sum(STRONG) / 3 - sum(NONE) / 3)


def test_a_response_the_shuffled_control_matches_is_not_reproduced_however_strong():
    # the old rule judged the intent model alone and would have called this reproduced
    assert intensity([0.80, 0.82, 0.79], [0.81, 0.83, 0.80])["status"] == NOT_REPRODUCED
    assert intensity([0.0, 0.01, -0.02], [0.2, 0.25, 0.22])["status"] == NOT_REPRODUCED


def test_a_response_above_the_control_but_not_above_the_threshold_is_inconclusive():
    assert intensity([0.25, 0.3, 0.27], [0.02, 0.03, 0.01])["status"] == INCONCLUSIVE  # above 0, below 0.5
    assert intensity([0.6, 0.1, 0.5], [0.0, 0.02, 0.01])["status"] == INCONCLUSIVE     # straddles 0
    assert intensity([0.9], [0.0])["status"] == INCONCLUSIVE                           # one seed: no interval


def test_the_intensity_difference_is_paired_by_seed_not_by_position():
    # the shuffled control's seeds are listed in another order: pairing by position would mix the seeds
    verdict = intensity([0.9, 0.6, 0.95], [0.45, 0.4, 0.1], shuffled_seeds=[2, 0, 1])
    assert verdict["ci"][0] == pytest.approx(verdict["ci"][1])  # paired by seed: 0.5 every time, no spread
    assert verdict["causal_value"] == pytest.approx(0.5)


def test_without_chapter_10_both_claims_are_not_run():
    rows = {r["id"]: r for r in evaluate_claims({})}
    assert rows["A-soft-control"]["status"] == NOT_RUN and rows["A-intensity"]["status"] == NOT_RUN


def test_both_claims_say_they_test_the_request_channel_this_book_adds():
    rows = verdicts(intent_record(STRONG_ACC, NONE_ACC))
    for claim_id in ("A-soft-control", "A-intensity"):
        text = rows[claim_id]["claim"]
        assert "request channel this book adds" in text and "not the paper's per-token feature channel" in text
        assert "request channel this book adds" in rows[claim_id]["rule"]
