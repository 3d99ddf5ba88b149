"""Chapter 10's claims: features-only soft control and the intensity response, judged from its record."""

from semlm.book.claims import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, REPRODUCED, evaluate_claims
from semlm.core.records import IntentControlRecord, Interval

STR_HIGH = [0.0, 0.25, 0.5, 0.75, 1.0]


def intent_record(intent_acc, shuffled_acc, curves):
    """A chapter-10 record: polarity accuracy per seed of the two fusion models, strong share per seed and str_high."""
    variants = {v: {"polarity_acc": Interval.of_mean(a).to_dict(), "punct_acc": Interval.of_mean(a).to_dict(),
                    "ppl": Interval.of_mean([3.0] * len(a)).to_dict()}
                for v, a in (("intent", intent_acc), ("shuffled", shuffled_acc), ("baseline", shuffled_acc),
                             ("control_code", intent_acc), ("no_request", shuffled_acc))}
    share = [Interval.of_mean([c[i] for c in curves]).to_dict() for i in range(len(STR_HIGH))]
    slopes = [sum((x - 0.5) * (y - sum(c) / len(c)) for x, y in zip(STR_HIGH, c)) / 0.625 for c in curves]
    return IntentControlRecord.from_dict({"profile": "cpu", "intent": {
        "seeds": list(range(len(intent_acc))), "variants": variants,
        "intensity": {"str_high": STR_HIGH, "share": share, "slope": Interval.of_mean(slopes).to_dict()}}})


def verdicts(record):
    return {r["id"]: r for r in evaluate_claims({"10_intent_control": record})}


RISING = [[0.3, 0.4, 0.5, 0.6, 0.7], [0.35, 0.4, 0.5, 0.55, 0.7], [0.3, 0.45, 0.5, 0.6, 0.75]]
FLAT = [[0.55, 0.5, 0.56, 0.54, 0.55], [0.5, 0.56, 0.55, 0.5, 0.52], [0.56, 0.55, 0.5, 0.55, 0.54]]


def test_features_that_steer_polarity_beyond_the_shuffled_control_reproduce_the_claim():
    rows = verdicts(intent_record([0.9, 0.92, 0.88], [0.3, 0.33, 0.31], RISING))
    assert rows["A-soft-control"]["status"] == REPRODUCED
    assert rows["A-soft-control"]["rule"] and "shuffled" in rows["A-soft-control"]["reason"]


def test_features_no_better_than_the_shuffled_control_do_not_reproduce_it():
    rows = verdicts(intent_record([0.3, 0.31, 0.33], [0.31, 0.32, 0.33], FLAT))
    assert rows["A-soft-control"]["status"] == NOT_REPRODUCED
    noisy = verdicts(intent_record([0.5, 0.2, 0.45], [0.3, 0.33, 0.31], FLAT))  # better on average, interval spans 0
    assert noisy["A-soft-control"]["status"] == INCONCLUSIVE


def test_a_rising_intensity_response_reproduces_and_a_flat_one_does_not():
    assert verdicts(intent_record([0.9] * 3, [0.3] * 3, RISING))["A-intensity"]["status"] == REPRODUCED
    flat = verdicts(intent_record([0.9] * 3, [0.3] * 3, FLAT))["A-intensity"]
    assert flat["status"] in (NOT_REPRODUCED, INCONCLUSIVE)
    falling = [list(reversed(c)) for c in RISING]
    assert verdicts(intent_record([0.9] * 3, [0.3] * 3, falling))["A-intensity"]["status"] == NOT_REPRODUCED


def test_without_chapter_10_both_claims_are_not_run():
    rows = {r["id"]: r for r in evaluate_claims({})}
    assert rows["A-soft-control"]["status"] == NOT_RUN and rows["A-intensity"]["status"] == NOT_RUN
