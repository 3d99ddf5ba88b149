"""Chapter 9: the synthetic topic world, the drift measure, a smoke training run and the claim rules."""

import math
import random
from dataclasses import replace

import pytest

from semlm.book.claims import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED, STATUSES, evaluate_claims
from semlm.data.topics import END, EOS, MIXED, NO_TOPIC, TopicConfig, TopicWorld, make_topic_corpus, split_sentences
from semlm.core.metrics import mean_interval
from semlm.core.runs import RunContext, nested, run_many
from semlm.idea.topic_experiment import (TOPIC_DRIFT, alpha_sweep, data_drift, drift_counts, drift_rate, evaluate_runs,
                                         prepare_topic_data, score_continuation, sentence_labels, topic_drift_profile,
                                         topic_drift_runs, topic_stickiness)
from semlm.idea import topic_report


def small(**kwargs):
    return TopicConfig(n_train_docs=400, n_val_docs=10, **kwargs)


def switches(docs):
    changes = sum(a != b for d in docs for a, b in zip(d.topics, d.topics[1:]))
    return changes, sum(len(d.topics) - 1 for d in docs)


@pytest.mark.parametrize("switch_prob", [0.05, 0.3, 0.8])
def test_generated_switch_rate_matches_switch_prob_within_a_binomial_bound(switch_prob):
    corpus = make_topic_corpus(small(switch_prob=switch_prob))
    k, n = switches(corpus.train)
    bound = 4 * math.sqrt(switch_prob * (1 - switch_prob) / n)  # 4 sigma: fails by chance about once in 16,000
    assert abs(k / n - switch_prob) < bound


def test_switch_prob_zero_and_one_are_exact():
    assert switches(make_topic_corpus(small(switch_prob=0.0)).train)[0] == 0
    k, n = switches(make_topic_corpus(small(switch_prob=1.0)).train)
    assert k == n


def test_labelling_recovers_every_generated_sentence_topic():
    corpus = make_topic_corpus(small(n_topics=5, switch_prob=0.5))
    for doc in corpus.train:
        assert sentence_labels(doc.words, corpus.world) == list(doc.topics)
        assert sentence_labels(doc.text, corpus.world) == list(doc.topics)


def test_drift_rate_of_the_data_equals_the_generators_own_switches():
    corpus = make_topic_corpus(small(switch_prob=0.2))
    k, n = switches(corpus.train)
    assert drift_rate([d.text for d in corpus.train], corpus.world) == k / n
    measured = data_drift(corpus.train, corpus.world)
    assert (measured.successes, measured.n) == (k, n)
    assert measured.low < 0.2 < measured.high
    assert set(measured.to_dict()) == {"mean", "ci_low", "ci_high", "k", "n"}


def test_mixed_and_topicless_sentences_are_handled_explicitly():
    world = TopicWorld.from_config(TopicConfig())
    a, b = world.nouns[0][0], world.nouns[1][0]
    text = ["the", a, END, "the", "a", END, "the", b, "with", a, END, "the", a, END, "the", a]
    assert sentence_labels(text, world) == [0, NO_TOPIC, MIXED, 0]
    assert sentence_labels(text, world, complete_only=False) == [0, NO_TOPIC, MIXED, 0, 0]
    # the topicless sentence is skipped; both transitions around the mixed one are changes
    assert drift_counts([0, NO_TOPIC, MIXED, 0]) == (2, 2)
    assert drift_counts([0, NO_TOPIC, 0]) == (0, 1)
    assert drift_counts([1, 1], start_topic=0) == (1, 2)
    assert math.isnan(drift_rate([["the", "a", END]], world))
    # text after an end-of-document token is another document
    assert split_sentences(["the", a, END, EOS, "the", b, END]) == [["the", a, END]]


def test_stickiness_counts_content_words_of_the_prompt_topic():
    world = TopicWorld.from_config(TopicConfig())
    words = ["the", world.nouns[0][0], world.verbs[0][0], "the", world.nouns[2][1], END]
    assert topic_stickiness(words, 0, world) == pytest.approx(2 / 3)
    assert math.isnan(topic_stickiness(["the", END], 0, world))
    scored = score_continuation(words + [EOS] + ["the", world.nouns[1][0], END], 0, world)
    assert scored["ended"] and scored["changes"] == 1 and scored["transitions"] == 1 and scored["mixed"] == 1


def test_the_corpus_is_determined_by_its_seed():
    one, two = make_topic_corpus(small(seed=3)), make_topic_corpus(small(seed=3))
    assert [d.text for d in one.train] == [d.text for d in two.train]
    assert [d.text for d in make_topic_corpus(small(seed=4)).train] != [d.text for d in one.train]
    # the world (the words) does not depend on the document seed
    assert one.world == make_topic_corpus(small(seed=4)).world


def test_content_words_belong_to_exactly_one_topic_and_the_tokenizer_matches_the_encoder():
    world = TopicWorld.from_config(TopicConfig(n_topics=6))
    words = [w for t in range(world.n_topics) for w in world.content_words(t)]
    assert len(words) == len(set(words)) == len(world.topic_of)
    doc = make_topic_corpus(small(n_topics=6)).train[0]
    tokenizer = world.tokenizer()
    assert tokenizer(doc.text)["input_ids"] == world.encode(doc.words)
    assert tokenizer.decode(world.encode(doc.words)) == doc.text


@pytest.mark.parametrize("bad, match", [
    ({"n_topics": 1}, "n_topics must be an int >= 2"),
    ({"switch_prob": 1.5}, r"switch_prob must be a probability in \[0, 1\]"),
    ({"switch_prob": -0.1}, "switch_prob"),
    ({"sentences_per_doc": 1}, "sentences_per_doc must be an int >= 2"),
    ({"nouns_per_topic": 0}, "nouns_per_topic must be an int >= 1"),
    ({"n_train_docs": 0}, "n_train_docs must be an int >= 1"),
])
def test_bad_config_values_raise_one_clear_error(bad, match):
    with pytest.raises(ValueError, match=match):
        TopicConfig(**bad)


def test_bad_profile_and_mismatched_start_topics_raise():
    with pytest.raises(ValueError, match="unknown profile"):
        topic_drift_profile("laptop")
    world = TopicWorld.from_config(TopicConfig())
    with pytest.raises(ValueError, match="start topics"):
        drift_rate(["the a ."], world, start_topics=[0, 1])


def test_a_smoke_training_run_produces_the_chapters_metric_keys(tmp_path):
    profile = topic_drift_profile("smoke")
    profile = replace(profile, data=replace(profile.data, n_train_docs=40, n_val_docs=4), sweep_alphas=(0.0, 1.0))
    context = RunContext(profile.name, tmp_path)
    assert TOPIC_DRIFT.max_workers(topic_drift_runs(profile, [5, 6])) == 1  # the smoke profile's policy
    runs = nested(run_many(TOPIC_DRIFT, topic_drift_runs(profile, [5, 6]), context), "name", "seed")
    assert {k: sorted(v) for k, v in runs.items()} == {"plain": [5, 6], "gated": [5, 6]}
    assert runs["plain"][5].metrics.val_ppl_ungated is None and runs["gated"][5].metrics.val_ppl_ungated > 1
    assert runs["gated"][5].status == "trained" and runs["gated"][5].steps == runs["plain"][6].steps > 0
    data = prepare_topic_data(profile.data)
    results = evaluate_runs(runs, data, profile)
    for kind in ("plain", "gated", "paired"):
        summary = getattr(results, kind)
        assert all(getattr(summary, m) is not None for m in ("drift_rate", "stickiness", "distinct_2", "val_ppl"))
        assert {"mean", "ci_low", "ci_high", "values"} <= set(summary.drift_rate.to_dict())
    sweep = alpha_sweep(runs["gated"], data, profile)
    assert [row["alpha"] for row in sweep] == [0.0, 1.0]
    assert {"drift_rate", "ppl", "distinct_2", "drift_rate_low", "drift_rate_high"} <= set(sweep[0])
    numbers = topic_report.drift_numbers(results)
    assert numbers["drift_plain"] == results.plain.drift_rate.mean and "drift_verdict" in numbers
    assert list(topic_report.drift_table(results).columns) == ["plain", "gated", "gated - plain (paired by seed)"]
    record = topic_report.topic_drift_record(profile, data, data_drift(data.corpus.val, data.world), True, [5, 6],
                                             results, sweep, runs).to_dict()
    assert {"data", "plain", "gated", "paired", "seeds", "alpha_sweep"} <= set(record)
    # a second call reloads the cached runs instead of training again
    again = run_many(TOPIC_DRIFT, topic_drift_runs(profile, [5]), context)
    assert [r.status for r in again] == ["loaded", "loaded"]
    with pytest.raises(ValueError, match="distinct and non-empty"):
        topic_drift_runs(profile, [5, 5])


def test_the_gate_off_verdict_reads_the_plain_models_interval():
    from semlm.core.records import Interval

    plain = Interval(0.2, 0.15, 0.25)
    row = {"alpha": 0.0, "drift_rate": 0.4, "drift_rate_low": 0.3, "ppl": 2.0}
    assert topic_report.sweep_numbers([row], plain)["gate_off_verdict"].startswith("more than the plain model")
    assert topic_report.sweep_numbers([{**row, "drift_rate_low": 0.2}], plain)["gate_off_verdict"].startswith("not more")
    assert topic_report.sweep_numbers([{**row, "alpha": 1.0}], plain)["gate_off_verdict"] == "no point at alpha = 0 was swept"


# --- the claim rules -------------------------------------------------------------------------------

def chapter(plain_drift, gated_drift, plain_d2=(0.8, 0.81, 0.82), gated_d2=(0.8, 0.81, 0.82), mixed=0.05):
    record = {"profile": "cpu", "data": {"drift_rate": {"mean": 0.15, "ci_low": 0.14, "ci_high": 0.16}}}
    for kind, drift, d2 in (("plain", plain_drift, plain_d2), ("gated", gated_drift, gated_d2)):
        record[kind] = {"drift_rate": mean_interval(drift), "distinct_2": mean_interval(d2),
                        "mixed_share": mean_interval([mixed] * len(drift))}
    record["paired"] = {"drift_rate": mean_interval([g - p for g, p in zip(gated_drift, plain_drift)]),
                        "distinct_2": mean_interval([g - p for g, p in zip(gated_d2, plain_d2)])}
    return {"09_topic_drift": record}


def verdicts(record):
    rows = {r["id"]: r for r in evaluate_claims(record)}
    return rows["B-topic-drift"], rows["B-topic-diversity"]


def test_drift_claim_is_reproduced_only_when_the_gated_interval_is_below():
    drift, diversity = verdicts(chapter([0.30, 0.32, 0.31], [0.10, 0.12, 0.11]))
    assert drift["status"] == REPRODUCED
    assert "0.310" in drift["reason"] and "0.110" in drift["reason"]  # the verdict states the numbers
    assert diversity["status"] == REPRODUCED


def test_drift_claim_fails_on_models_without_the_property():
    same = [0.20, 0.25, 0.22]
    assert verdicts(chapter(same, same))[0]["status"] == INCONCLUSIVE                       # no effect at all
    noisy = verdicts(chapter([0.2, 0.3, 0.25], [0.28, 0.18, 0.27]))[0]
    assert noisy["status"] == INCONCLUSIVE and "overlap" in noisy["reason"]
    worse = verdicts(chapter([0.10, 0.12, 0.11], [0.30, 0.32, 0.31]))[0]
    assert worse["status"] == NOT_REPRODUCED
    one_seed = verdicts(chapter([0.3], [0.1]))[0]                                             # a sign is not an interval
    assert one_seed["status"] == INCONCLUSIVE


def test_topic_claims_are_not_testable_when_the_plain_model_cannot_write_topic_sentences():
    drift, diversity = verdicts(chapter([0.30, 0.32, 0.31], [0.10, 0.12, 0.11], mixed=0.6))
    assert drift["status"] == diversity["status"] == NOT_TESTABLE
    assert "0.60" in drift["reason"] and drift["rule"]
    undefined = chapter([0.3] * 3, [0.1] * 3)
    undefined["09_topic_drift"]["gated"]["drift_rate"] = {"mean": None, "ci_low": None, "ci_high": None, "values": [None]}
    assert verdicts(undefined)[0]["status"] == NOT_TESTABLE


def test_diversity_claim_fails_when_the_gate_costs_diversity():
    lower = verdicts(chapter([0.3] * 3, [0.1] * 3, gated_d2=(0.60, 0.61, 0.62)))[1]
    assert lower["status"] == NOT_REPRODUCED and "0.610" in lower["reason"]
    straddling = verdicts(chapter([0.3] * 3, [0.1] * 3, gated_d2=(0.70, 0.83, 0.79)))[1]
    assert straddling["status"] == INCONCLUSIVE


def test_topic_claims_are_not_run_without_the_chapter_and_statuses_are_known():
    drift, diversity = verdicts({})
    assert drift["status"] == diversity["status"] == NOT_RUN
    assert INCONCLUSIVE in STATUSES
