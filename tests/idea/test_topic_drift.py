"""Chapter 9: the synthetic topic world and its laws, the drift quantities, a smoke training run over
budgets and the claim rules."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from semlm.book.claims import evaluate_claims
from semlm.core.verdicts import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, STATUSES
from semlm.core.records import Interval
from semlm.idea.records import TopicDriftRecord
from semlm.core.runs import RunContext, nested, run_many
from semlm.data.topics import (AMBIGUOUS, END, EOS, MIXED, NEUTRAL, TopicConfig, TopicWorld, make_topic_corpus,
                               split_sentences)
from semlm.idea.profiles import topic_drift_profile
from semlm.idea.sharpening import matched_temperature, mean_entropy
from semlm.idea.topic_experiment import (CHAPTER, CURVE, RESAMPLE_OFFSET, RESAMPLED, TOPIC_DRIFT, DriftCounts,
                                         Measurements, alpha_sweep, data_drift, drift_counts, evaluate_curve,
                                         prepare_topic_data, score_continuation, sentence_labels, text_drift,
                                         topic_decision, topic_drift_runs, topic_prompts, topic_run,
                                         topic_stickiness)
from semlm.idea import topic_report


def small(**kwargs):
    return TopicConfig(n_train_docs=kwargs.pop("n_train_docs", 400), n_val_docs=10, **kwargs)


def switches(docs):
    chains = [d.topical_topics for d in docs]
    return sum(a != b for c in chains for a, b in zip(c, c[1:])), sum(len(c) - 1 for c in chains)


@pytest.mark.parametrize("switch_prob", [0.05, 0.3, 0.8])
def test_generated_switch_rate_matches_switch_prob_within_a_binomial_bound(switch_prob):
    corpus = make_topic_corpus(small(switch_prob=switch_prob, neutral_prob=0.6))
    k, n = switches(corpus.train)
    bound = 4 * math.sqrt(switch_prob * (1 - switch_prob) / n)  # 4 sigma: fails by chance about once in 16,000
    assert abs(k / n - switch_prob) < bound


def test_a_switch_goes_to_the_other_topics_uniformly():
    corpus = make_topic_corpus(small(n_topics=4, switch_prob=1.0, n_train_docs=600))
    steps = [(b - a) % 4 for d in corpus.train for a, b in zip(d.topical_topics, d.topical_topics[1:])]
    counts = np.bincount(steps, minlength=4)
    assert counts[0] == 0 and all(abs(c / len(steps) - 1 / 3) < 4 * math.sqrt(2 / 9 / len(steps)) for c in counts[1:])


def test_switch_prob_zero_and_one_are_exact_and_neutral_sentences_carry_the_topic():
    corpus = make_topic_corpus(small(switch_prob=0.0, neutral_prob=1.0))
    assert switches(corpus.train)[0] == 0
    doc = corpus.train[0]
    assert len(set(doc.topics)) == 1 and any(doc.neutral)
    k, n = switches(make_topic_corpus(small(switch_prob=1.0)).train)
    assert k == n


def test_neutral_runs_follow_topical_sentences_at_the_configured_rate():
    config = small(neutral_prob=0.3, max_neutral_run=3, n_train_docs=800)
    docs = make_topic_corpus(config).train
    runs, slots = 0, 0
    for d in docs:
        kinds = list(d.neutral)
        assert not kinds[0] and not kinds[-1]                     # documents start and end with a topical sentence
        starts = [i for i in range(1, len(kinds)) if kinds[i] and not kinds[i - 1]]
        runs, slots = runs + len(starts), slots + config.sentences_per_doc - 1
        assert sum(not k for k in kinds) == config.sentences_per_doc
    assert abs(runs / slots - 0.3) < 4 * math.sqrt(0.3 * 0.7 / slots)


def test_labelling_recovers_every_generated_sentence_label():
    corpus = make_topic_corpus(small(n_topics=5, switch_prob=0.5))
    for doc in corpus.train:
        assert sentence_labels(doc.words, corpus.world) == doc.labels
        assert sentence_labels(doc.text, corpus.world) == doc.labels


def test_bridge_words_belong_to_exactly_two_neighbouring_topics_and_others_to_one():
    for n_topics in (2, 3, 5):
        world = TopicWorld.from_config(TopicConfig(n_topics=n_topics))
        for pair, words in zip(world.bridge_pairs, world.bridges):
            assert (pair[1] - pair[0]) % n_topics == 1
            for w in words:
                assert world.topics_of[w] == frozenset(pair)
                assert sum(w in world.content_words(t) for t in range(n_topics)) == 2
        for t in range(n_topics):
            assert all(world.topics_of[w] == {t} for w in world.exclusive_words(t))
        assert not set(world.all_neutral_words) & set(world.topics_of)
        vocabulary = world.vocabulary
        assert len(vocabulary) == len(set(vocabulary))


def test_labelling_of_hand_made_sentences():
    world = TopicWorld.from_config(TopicConfig(n_topics=4))
    a0, a1, a2 = world.nouns[0][0], world.nouns[1][0], world.nouns[2][0]
    bridge01 = world.bridges[world.bridge_pairs.index((0, 1))][0]
    neutral = world.neutral_words[0][0]
    assert world.label(["the", a0, "near", "the", bridge01, END]) == 0        # bridge allows 0: still topic 0
    assert world.label(["the", a1, "near", "the", bridge01, END]) == 1
    assert world.label(["the", a2, "near", "the", bridge01, END]) == MIXED    # bridge 0-1 and topic 2
    assert world.label(["the", a0, "of", a1, END]) == MIXED
    assert world.label(["the", bridge01, "is", "very", END]) == AMBIGUOUS
    assert world.label(["the", neutral, "is", "very", END]) == NEUTRAL
    assert world.label(["the", "a", END]) == NEUTRAL


def test_switches_skip_neutral_ambiguous_and_mixed_sentences_and_mixing_is_counted_apart():
    assert drift_counts([0, NEUTRAL, 0, 1]) == DriftCounts(1, 2, 0, 3, 4)
    assert drift_counts([0, MIXED, 0]) == DriftCounts(0, 1, 1, 3, 3)
    assert drift_counts([AMBIGUOUS, 1], start_topic=0) == DriftCounts(1, 1, 0, 2, 2)
    assert drift_counts([1, 1], start_topic=0).switch_rate == 0.5
    counts = drift_counts([NEUTRAL, MIXED, 2], start_topic=2)
    assert counts.switch_rate == 0.0 and counts.mix_rate == 0.5
    assert math.isnan(drift_counts([NEUTRAL]).switch_rate) and math.isnan(drift_counts([]).mix_rate)
    world = TopicWorld.from_config(TopicConfig())
    a, b = world.nouns[0][0], world.nouns[1][0]
    text = ["the", a, END, "the", "a", END, "the", b, "with", a, END, "the", a, END, "the", a]
    assert sentence_labels(text, world) == [0, NEUTRAL, MIXED, 0]
    assert sentence_labels(text, world, complete_only=False) == [0, NEUTRAL, MIXED, 0, 0]
    assert split_sentences(["the", a, END, EOS, "the", b, END]) == [["the", a, END]]


def test_data_drift_equals_the_generators_own_switches():
    corpus = make_topic_corpus(small(switch_prob=0.2))
    k, n = switches(corpus.train)
    counts = text_drift([d.text for d in corpus.train], corpus.world)
    assert (counts.switches, counts.transitions, counts.mixed) == (k, n, 0)
    measured = data_drift(corpus.train, corpus.world)
    assert (measured.successes, measured.n) == (k, n)
    assert measured.low < 0.2 < measured.high
    assert set(measured.to_dict()) == {"mean", "ci_low", "ci_high", "k", "n"}


def test_stickiness_counts_topic_words_and_ignores_neutral_ones():
    world = TopicWorld.from_config(TopicConfig())
    neutral = world.neutral_words[0][0]
    words = ["the", world.nouns[0][0], world.verbs[0][0], "the", world.nouns[2][1], neutral, END]
    assert topic_stickiness(words, 0, world) == pytest.approx(2 / 3)
    assert math.isnan(topic_stickiness(["the", neutral, END], 0, world))
    scored = score_continuation(words + [EOS] + ["the", world.nouns[1][0], END], 0, world)
    assert scored["counts"] == DriftCounts(0, 0, 1, 1, 1)


def test_the_corpus_is_determined_by_its_seed():
    one, two = make_topic_corpus(small(seed=3)), make_topic_corpus(small(seed=3))
    assert [d.text for d in one.train] == [d.text for d in two.train]
    assert [d.text for d in make_topic_corpus(small(seed=4)).train] != [d.text for d in one.train]
    assert one.world == make_topic_corpus(small(seed=4)).world   # the words do not depend on the document seed


def test_the_tokenizer_matches_the_encoder():
    world = TopicWorld.from_config(TopicConfig(n_topics=6))
    doc = make_topic_corpus(small(n_topics=6)).train[0]
    tokenizer = world.tokenizer()
    assert tokenizer(doc.text)["input_ids"] == world.encode(doc.words)
    assert tokenizer.decode(world.encode(doc.words)) == doc.text


@pytest.mark.parametrize("bad, match", [
    ({"n_topics": 1}, "n_topics must be an int >= 2"),
    ({"switch_prob": 1.5}, r"switch_prob must be a probability in \[0, 1\]"),
    ({"neutral_prob": -0.1}, "neutral_prob"),
    ({"sentences_per_doc": 1}, "sentences_per_doc must be an int >= 2"),
    ({"bridges_per_pair": 0}, "bridges_per_pair must be an int >= 1"),
    ({"max_neutral_run": 0}, "max_neutral_run must be an int >= 1"),
    ({"n_train_docs": 0}, "n_train_docs must be an int >= 1"),
])
def test_bad_config_values_raise_one_clear_error(bad, match):
    with pytest.raises(ValueError, match=match):
        TopicConfig(**bad)


def test_topic_gpts_keep_gpt2_initialisation_and_dropout_everywhere():
    """Chapter 9's GPTs come from chapter 6's ``model_config`` but keep GPT-2's init and dropout scope."""
    spec = topic_run(replace(topic_drift_profile("smoke"), data=small(n_train_docs=20)), True, 0)
    model = TOPIC_DRIFT.build(spec, TOPIC_DRIFT.data(spec))
    c = model.config
    assert (c.init, c.dropout_scope, c.idea_head, c.n_layer, c.eos_token_id) == ("gpt2_scaled", "everywhere", True,
                                                                                  spec.config.size.n_layer, 0)
    assert c.alpha == spec.config.idea.alpha and c.n_positions == spec.config.size.block_size


def test_bad_profile_and_budgets_raise():
    with pytest.raises(ValueError, match="unknown profile"):
        topic_drift_profile("laptop")
    with pytest.raises(ValueError, match="budgets must be distinct positive"):
        replace(topic_drift_profile("smoke"), budgets=(8, 4))


def test_cpu_documents_are_longer_than_the_context_window():
    profile = topic_drift_profile("cpu")
    docs = make_topic_corpus(replace(profile.data, n_train_docs=50)).train
    assert np.mean([len(d.words) for d in docs]) > profile.size.block_size
    assert len(profile.budgets) >= 3 and profile.n_seeds >= 3


def test_a_smoke_training_run_produces_the_chapters_metric_keys(tmp_path):
    profile = topic_drift_profile("smoke")
    profile = replace(profile, data=replace(profile.data, n_train_docs=40, n_val_docs=4), budgets=(4, 8),
                      sweep_alphas=(0.0, 1.0))
    context = RunContext(profile.name, tmp_path)
    specs = topic_drift_runs(profile, [5, 6])
    assert TOPIC_DRIFT.max_workers(specs) == 1  # the smoke profile's policy
    runs = nested(run_many(TOPIC_DRIFT, specs, context), "group", "name", "seed")[CURVE]
    assert {k: sorted(v) for k, v in runs.items()} == {"plain": [5, 6], "gated": [5, 6]}
    assert runs["gated"][5].steps == 8 and runs["plain"][6].steps == profile.plain_steps == 12  # 1.5 x 8
    assert runs["plain"][5].snapshot_steps == [4, 8, 12] and runs["plain"][5].metrics.val_ppl_ungated is None
    # a checkpoint is the model after that many steps: the snapshot of the last step is the final model
    final, last = runs["plain"][5].load("cpu"), runs["plain"][5].load("cpu", step=12)
    assert all(torch.equal(a, b) for a, b in zip(final.state_dict().values(), last.state_dict().values()))
    with pytest.raises(FileNotFoundError, match="no snapshot at step 5"):
        runs["plain"][5].load("cpu", step=5)
    data = prepare_topic_data(profile.data)
    assert all(p.startswith(EOS) and p.count(END) == 2 for _, p in topic_prompts(data, profile))
    measured = Measurements(runs, data, profile)
    rate = data_drift(data.corpus.val, data.world)
    decision, details = topic_decision(measured, rate)
    assert [d["seed"] for d in details] == [5, 6]
    assert set(decision.seeds) | set(decision.not_comparable) == {5, 6}
    curve = topic_report.LearningCurve(evaluate_curve(measured))
    assert [b.steps for b in curve.budgets] == [4, 8] and curve.final is curve.budgets[-1]
    sweep = alpha_sweep(runs["gated"], data, profile)
    assert [row["alpha"] for row in sweep] == [0.0, 1.0] and {"switch_rate", "excess_drift", "ppl"} <= set(sweep[0])
    record = topic_report.topic_drift_record(
        profile=profile, data=data, data_rate=rate, labelling_exact=True, seeds=[5, 6], curve=curve,
        sweep=topic_report.AlphaSweep(sweep, profile.data.switch_prob, curve.final.plain.switch_rate), runs=runs,
        decision=decision, details=details).to_dict()
    assert len(record["budgets"]) == 2 and record["decision"]["data_rate"]
    for budget in record["budgets"]:
        for kind in ("plain", "gated"):
            for metric in ("excess_drift", "switch_rate", "mix_rate"):
                assert {"mean", "ci_low", "ci_high", "values"} <= set(budget[kind][metric])
                assert len(budget[kind][metric]["values"]) == 2
    assert record["data"]["switch_prob"] == profile.data.switch_prob
    claims = {r["id"]: r for r in evaluate_claims({CHAPTER: TopicDriftRecord.from_dict(record)})
              if r["id"].startswith("B-topic")}
    assert list(claims) == ["B-topic-drift", "B-topic-diversity"]
    assert claims["B-topic-drift"]["status"] == INCONCLUSIVE  # 2 seeds: fewer than the rule needs
    assert list(curve.table().index) == [4, 8] and len(curve.frame()) == 2 * 3
    assert (curve.numbers().budgets, curve.numbers().budget_first, curve.numbers().budget_last) == ("4, 8", 4, 8)
    assert "gated - plain (paired by seed)" in curve.final_table()
    assert decision.numbers().seeds == len(decision.seeds)
    assert ("gated - plain at matched PPL" in decision.table().index) == bool(decision.seeds)
    # a second call reloads the cached runs instead of training again
    again = run_many(TOPIC_DRIFT, topic_drift_runs(profile, [5]), context)
    assert [r.status for r in again] == ["loaded", "loaded"]
    with pytest.raises(ValueError, match="distinct and non-empty"):
        topic_drift_runs(profile, [5, 5])


def test_the_sharpening_temperature_matches_the_entropy_and_refuses_what_it_cannot_reach():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.5, 0.0, 0.0, -3.0]])
    target = mean_entropy(logits, 0.7)
    assert matched_temperature(logits, target) == pytest.approx(0.7, rel=1e-4)
    assert mean_entropy(logits, 0.5) < mean_entropy(logits, 1.0) < mean_entropy(logits, 2.0)
    with pytest.raises(ValueError, match="out of reach"):
        matched_temperature(logits, math.log(4) + 0.1)


def test_the_sharpening_temperature_matches_the_gated_entropy_on_the_first_max_blocks():
    from types import SimpleNamespace

    from semlm.idea.sharpening import next_token_logits, sharpening_temperature
    from semlm.idea.data import TokenBlocks

    class Scaled(torch.nn.Module):  # logits: a fixed row per input token, times a scale
        def __init__(self, scale: float):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.tensor(scale))

        def forward(self, ids):
            table = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.5, 0.0, 0.0, -3.0], [0.0, 0.1, 0.0, 0.0],
                                  [1.0, -1.0, 0.5, 0.0]])
            return SimpleNamespace(logits=self.scale * table[ids])

    stream = torch.randint(0, 4, (200,), generator=torch.Generator().manual_seed(0))
    blocks = TokenBlocks.from_stream(stream, block_size=3, window=1)
    assert len(next_token_logits(Scaled(1.0), blocks)) == blocks.n_tokens
    temperature, target = sharpening_temperature(Scaled(1.0), Scaled(2.0), blocks, max_blocks=2)
    first = replace(blocks, input_ids=blocks.input_ids[:2])
    assert target == pytest.approx(mean_entropy(next_token_logits(Scaled(2.0), first)))
    assert target != pytest.approx(mean_entropy(next_token_logits(Scaled(2.0), blocks)))
    assert temperature == pytest.approx(0.5, rel=1e-4)  # twice the logits: half the temperature


def test_a_resampled_corpus_has_new_documents_and_a_new_lexicon_would_only_rename_tokens():
    profile = topic_drift_profile("smoke")
    spec = topic_run(profile, True, 7, resample=True)
    assert spec.config.data.seed == RESAMPLE_OFFSET + 7 and spec.group == RESAMPLED
    assert spec.config.data.lexicon_seed == profile.data.lexicon_seed
    ours, theirs = prepare_topic_data(profile.data), prepare_topic_data(spec.config.data)
    assert not torch.equal(ours.streams["train"][:500], theirs.streams["train"][:500])
    # why the lexicon is not varied: other made-up words, the very same token ids
    renamed = prepare_topic_data(replace(profile.data, lexicon_seed=99))
    assert renamed.world.vocabulary != ours.world.vocabulary
    assert all(torch.equal(ours.streams[k], renamed.streams[k]) for k in ("train", "valid"))


def test_the_alpha_sweep_names_the_miscalibration_and_the_gate_off_drift():
    plain = Interval(0.2, 0.15, 0.25)
    row = {"alpha": 0.0, "switch_rate": 0.4, "switch_rate_low": 0.3, "switch_rate_high": 0.5, "ppl": 2.0}
    strong = {**row, "alpha": 4.0, "switch_rate": 0.05, "switch_rate_low": 0.02, "switch_rate_high": 0.08}
    numbers = topic_report.AlphaSweep([row, strong], 0.15, plain).numbers()
    assert numbers.gate_off_verdict.startswith("more than the plain model")
    assert numbers.miscalibrated_from.startswith("from alpha = 4 on")
    weak = topic_report.AlphaSweep([{**row, "switch_rate_low": 0.2}], 0.15, plain)
    assert weak.numbers().gate_off_verdict.startswith("not more")
    no_zero = topic_report.AlphaSweep([{**row, "alpha": 1.0}], 0.15, plain)
    assert no_zero.numbers().gate_off_verdict == "no point at alpha = 0 was swept"


# --- the claim rules -------------------------------------------------------------------------------

RATE = 0.15


def summary(switch, ppl, mix=0.05, d2=(0.8, 0.81, 0.82)):
    return {"excess_drift": mean_of([x - RATE for x in switch]), "switch_rate": mean_of(switch),
            "mix_rate": mean_of([mix] * len(switch)), "distinct_2": mean_of(d2), "val_ppl": mean_of(ppl)}


def mean_of(values):
    return Interval.of_mean(values).to_dict()


def budget(steps, plain, gated, plain_ppl=(3.0, 3.1, 3.2), gated_ppl=(3.0, 3.1, 3.2), mix=0.05, gated_d2=None):
    d2 = (0.8, 0.81, 0.82)
    paired = {"excess_drift": Interval.paired(gated, plain).to_dict(),
              "distinct_2": Interval.paired(gated_d2 or d2, d2).to_dict(),
              "ppl_change": mean_of([g / p - 1 for g, p in zip(gated_ppl, plain_ppl)])}
    return {"steps": steps, "plain": summary(plain, plain_ppl, mix), "gated": summary(gated, gated_ppl, mix,
                                                                                       gated_d2 or d2),
            "paired": paired}


def chapter(*budgets):
    record = {"profile": "cpu", "data": {"switch_prob": RATE, "drift_rate": {"mean": 0.15, "ci_low": 0.14,
                                                                            "ci_high": 0.16}},
              "budgets": list(budgets)}
    record.update({k: budgets[-1][k] for k in ("plain", "gated", "paired")})
    return {"09_topic_drift": record}


def verdicts(record):
    rows = {r["id"]: r for r in evaluate_claims(record)}
    return rows["B-topic-drift"], rows["B-topic-diversity"]


SAME = [0.16, 0.15, 0.17]


def test_topic_claims_are_not_testable_when_the_plain_model_cannot_write_topic_sentences():
    mixing = budget(400, [0.45, 0.50, 0.47], [0.25, 0.28, 0.26], mix=0.6)
    diversity = verdicts(chapter(mixing))[1]
    assert diversity["status"] == NOT_TESTABLE
    assert "0.60" in diversity["reason"] and diversity["rule"]
    undefined = chapter(budget(400, SAME, SAME))
    undefined["09_topic_drift"]["gated"]["distinct_2"] = {"mean": None, "ci_low": None, "ci_high": None,
                                                          "values": [None]}
    assert verdicts(undefined)[1]["status"] == NOT_TESTABLE


def test_diversity_claim_fails_when_the_gate_costs_diversity():
    lower = verdicts(chapter(budget(400, SAME, SAME, gated_d2=(0.60, 0.61, 0.62))))[1]
    assert lower["status"] == NOT_REPRODUCED and "0.610" in lower["reason"]
    straddling = verdicts(chapter(budget(400, SAME, SAME, gated_d2=(0.70, 0.83, 0.79))))[1]
    assert straddling["status"] == INCONCLUSIVE


def test_topic_claims_are_not_run_without_the_chapter_and_statuses_are_known():
    drift, diversity = verdicts({})
    assert drift["status"] == diversity["status"] == NOT_RUN
    assert INCONCLUSIVE in STATUSES
    old = chapter(budget(400, SAME, SAME))                 # a metrics file from before the matched-PPL test
    assert verdicts(old)[0]["status"] == NOT_RUN and "decision" in verdicts(old)[0]["reason"]
