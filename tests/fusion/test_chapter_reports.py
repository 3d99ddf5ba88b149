"""The library side of chapters 1-5: run declarations, typed summaries, tables and records."""

import math
from dataclasses import replace

import pandas as pd
import pytest
import torch

from semlm.core.metrics import FOCUS_TOKENS
from semlm.core.records import Interval
from semlm.fusion.records import LanguageModelMetrics, SST2Judgement
from semlm.core.runs import RunRecord
from semlm.fusion.profiles import synthetic_profile

SYNTHETIC_REF = "semlm.fusion.synthetic_experiment:SYNTHETIC"
FOCUS = {token: 1.5 for token in FOCUS_TOKENS}
FLOORS = {"ppl": 2.0, "ppl_seen_only": 1.9, "ppl_authors_denominator": 1.8, "ppl_seen_only_authors_denominator": 1.7,
          "focus_ce": {t: 1.0 for t in FOCUS}}


def record(name, seed, group, ppl, sem_mse=None, status="trained"):
    metrics = {"ppl": ppl, "ppl_seen_only": ppl - 0.1, "ppl_authors_denominator": ppl - 0.2,
               "ppl_seen_only_authors_denominator": ppl - 0.3, "focus_ce": dict(FOCUS), "n_tokens": 10,
               "n_pad_targets": 0}
    if sem_mse is not None:
        metrics["sem_mse"] = sem_mse
    return RunRecord(SYNTHETIC_REF, name, seed, group, {}, "key", "unused", status, 1.0, 1,
                     [{"val_ppl": ppl}], metrics, "cpu", 1, 0.0)


def test_run_metrics_are_typed_and_written_back_unchanged():
    run = record("fusion", 111, "causal", 3.0, sem_mse=0.01)
    assert isinstance(run.metrics, LanguageModelMetrics)
    assert run.metrics.ppl == 3.0 and run.metrics.focus_ce == FOCUS
    assert set(run.to_dict()["metrics"]) == {"ppl", "ppl_seen_only", "ppl_authors_denominator",
                                             "ppl_seen_only_authors_denominator", "focus_ce", "n_tokens",
                                             "n_pad_targets", "sem_mse"}
    assert "sem_mse" not in record("baseline", 111, "causal", 3.0).to_dict()["metrics"]


def test_chapter_runs_are_declared_ahead_and_distinct():
    from semlm.fusion.audit import ABLATIONS, audit_runs
    from semlm.fusion.synthetic_experiment import fusion_training_runs

    chapter2 = fusion_training_runs(synthetic_profile("smoke"))
    assert [(s.group, s.name) for s in chapter2] == [("causal", "baseline"), ("causal", "fusion"),
                                                     ("published", "baseline"), ("published", "fusion")]
    specs = audit_runs(synthetic_profile("smoke"), [111, 112])
    assert len(specs) == 2 * (4 + len(ABLATIONS) + 1)
    assert len({(s.group, s.name, s.seed) for s in specs}) == len(specs)
    assert {s.seed for s in specs} == {111, 112}


def test_sst2_runs_cap_workers_at_the_profile():
    from semlm.fusion.profiles import sst2_profile
    from semlm.fusion.sst2_experiment import SST2, sst2_runs

    assert SST2.max_workers(sst2_runs(sst2_profile("smoke"))) == sst2_profile("smoke").workers == 1
    assert SST2.max_workers(sst2_runs(sst2_profile("cpu"))) == 2


def fake_audit(seeds=(111, 112)):
    from semlm.fusion.audit import ABLATIONS, AuditRuns

    records = []
    for i, seed in enumerate(seeds):
        for setting in ("causal", "published"):
            for model in ("baseline", "fusion"):
                records.append(record(model, seed, setting, 3.0 + i + (model == "baseline"),
                                      0.01 if model == "fusion" else None))
        for model in ABLATIONS + ("control_code",):
            records.append(record(model, seed, "causal", 3.5 + i, None if model == "control_code" else 0.02))
    return AuditRuns.of(records, seeds)


def fake_report(hit):
    rate = {"value": hit, "ci_low": 0.0, "ci_high": 1.0, "k": 1, "n": 2}
    accuracy = {"adj_acc": rate, "punct_acc": rate}
    return {"hard": {"pos": accuracy, "neg": accuracy}, "soft": {"pos": accuracy, "neg": accuracy},
            "ood_hit": {"pos": rate, "neg": rate}, "confusion_diagonal": hit}


def test_audit_summary_is_typed_over_seeds_and_its_tables_build():
    from semlm.fusion import audit

    runs = fake_audit()
    reports = {key: fake_report(0.5 + 0.1 * (key[2] - 111)) for key in runs.runs if key[1] != "baseline"}
    summary = audit.LeakageAudit.of(runs, reports, FLOORS, 2)
    fusion = summary.table1["causal"].fusion
    assert fusion.ppl.mean == pytest.approx(3.5) and fusion.ppl.values == (3.0, 4.0)
    assert summary.table1["causal"].baseline.sem_mse is None
    assert summary.paired_gain_seen_only["causal"].mean == pytest.approx(1.0)  # baseline - fusion, paired by seed
    assert summary.control["causal"].hard["pos"].adj_acc.mean == pytest.approx(0.55)
    assert summary.focus_ce_seeds[FOCUS_TOKENS[0]]["causal fusion"] == [1.5, 1.5]
    assert audit.gain_verdict(summary.paired_gain_seen_only["causal"]) == "fusion lower"
    for table in (summary.table1_frame, summary.gain_frame, summary.control_table, summary.ablation_table,
                  summary.code_table, summary.key_numbers, summary.table1_points, summary.focus_frame):
        assert len(table()) > 0
    assert len(audit.Floors(FLOORS).table()) == 4
    numbers = summary.gain_numbers()
    assert numbers.gain_causal_verdict == "fusion lower" and numbers.n_seeds == 2
    assert summary.control_numbers().hard_min == pytest.approx(0.5) and summary.ablation_numbers().mse_side
    assert summary.code_numbers().code_verdict.startswith("at this profile")
    assert audit.Floors(FLOORS).numbers().floor_ppl == FLOORS["ppl"]
    saved = summary.to_dict()
    assert saved["table1"]["causal"]["fusion"]["ppl"]["values"] == [3.0, 4.0]
    assert saved["paired_gain_seen_only"]["causal"]["mean"] == pytest.approx(1.0)
    assert saved["focus_ce"][FOCUS_TOKENS[0]]["causal fusion"] == 1.5 and saved["n_per_request"] == 2


def test_below_oracle_names_the_seen_tokens_a_model_beats_by_the_margin():
    from semlm.fusion.audit import LeakageAudit

    audit = LeakageAudit(focus_ce={"good": {"training oracle": 1.4, "causal fusion": 1.3, "paper fusion": 1.38},
                                   "great": {"training oracle": math.inf, "causal fusion": 5.0, "paper fusion": 9.0}})
    assert audit.below_oracle("causal fusion") == ["good"] and audit.below_oracle("paper fusion") == []


def deaf_model(vocab_size):
    """A language model whose next-word scores ignore the features (the baseline): a request cannot steer it."""
    from semlm.fusion.config import BackboneConfig
    from semlm.fusion.model import build_model, lm_config

    return build_model(lm_config(BackboneConfig(vocab_size, d_model=16, n_layers=1, n_heads=2, d_ff=16),
                                 kind="baseline"))


def test_features_that_do_not_steer_write_the_same_sentences_under_both_requests(vocab):
    from semlm.fusion.audit import features_only_decodes, judged_polarity, steering_accuracies
    from semlm.fusion.decoding import ClauseGrammar
    from semlm.fusion.synthetic_experiment import prepare_data

    data = prepare_data(synthetic_profile("smoke").corpus)
    decodes = features_only_decodes(deaf_model(len(data.vocab)), data.featurizer, ClauseGrammar(data.vocab), 40, 111)
    assert decodes["pos"] == decodes["neg"]  # the same random numbers for both requests
    requested, opposite = steering_accuracies(judged_polarity(decodes))
    assert requested == pytest.approx(opposite)


def test_steering_accuracies_pair_each_target_with_the_opposite_request_and_the_table_builds():
    from semlm.fusion.records import FeatureSteering
    from semlm.fusion.audit import LeakageAudit, steering_accuracies

    shares = {"pos": {"POS": 0.9, "NEG": 0.1}, "neg": {"POS": 0.3, "NEG": 0.7}}
    assert steering_accuracies(shares) == pytest.approx(((0.9 + 0.7) / 2, (0.3 + 0.1) / 2))
    requested, opposite = [0.8, 0.7], [0.2, 0.3]
    steering = FeatureSteering(seeds=[111, 112], n_per_request=2, requested=Interval.of_mean(requested),
                               opposite=Interval.of_mean(opposite), paired=Interval.paired(requested, opposite),
                               judged_positive={"pos": Interval.of_mean([0.8, 0.7]),
                                                "neg": Interval.of_mean([0.2, 0.3])})
    audit = fake_audit()
    reports = {key: fake_report(0.5) for key in audit.runs if key[1] != "baseline"}
    record = replace(LeakageAudit.of(audit, reports, FLOORS, 2), feature_steering=steering)
    frame = record.steering_frame()
    assert list(frame.index) == [111, 112, "mean [95% CI]"]
    assert frame.loc[111, "requested - opposite"] == pytest.approx(0.6)
    assert record.to_dict()["feature_steering"]["paired"]["values"] == pytest.approx([0.6, 0.4])


def test_training_report_reads_records_by_attribute():
    from semlm.fusion import training_report

    trained = {s: {m: record(m, 111, s, 4.0 if m == "baseline" else 3.0, 0.01 if m == "fusion" else None)
                   for m in ("baseline", "fusion")} for s in ("causal", "published")}
    table1 = training_report.ModelTable(trained, {"paper": {"fusion": {"ppl": 2.2, "ppl_seen_only": 2.0}}})
    numbers = table1.numbers()
    assert numbers.causal_ppl_change == pytest.approx(-25.0) and numbers.published_sem_mse == 0.01
    assert numbers.causal_fusion_ppl == 3.0
    assert numbers.causal_fusion_seen == pytest.approx(2.9)
    assert numbers.published_baseline_ppl_authors == pytest.approx(3.8)
    sensitivity = pd.Series({(s, m): 0.0 for s in trained for m in ("baseline", "fusion")})
    summary = training_report.by_setting(trained, sensitivity)["causal"]["fusion"]
    assert summary["ppl"] == 3.0 and summary["val_ppl_per_epoch"] == [3.0] and summary["run_status"] == "trained"
    frame = table1.table()
    assert len(frame) == 5 and math.isnan(frame.loc[("paper", "fusion"), "PPL"])
    assert frame.loc[("paper", "fusion"), "PPL, authors' denominator"] == 2.2


def test_table7_shows_dev_perplexity_and_cites_only_the_perplexities():
    from semlm.fusion.sst2_report import table7

    trained = {s: {m: record(m, 111, s, 4.0 if m == "baseline" else 3.0, 0.01 if m == "fusion" else None)
                   for m in ("baseline", "fusion")} for s in ("causal", "published")}
    table = table7(trained)
    assert list(table.table().columns) == ["dev PPL", "semantic MSE"] and len(table.table()) == 6
    settings, models = ("causal", "published"), ("baseline", "fusion")
    assert set(vars(table.numbers())) == {f"{s}_{k}_ppl" for s in settings for k in models} | {
        f"{s}_{n}" for s in settings for n in ("ppl_change", "sem_mse")}


def test_rule_and_path_numbers_name_every_glued_rate():
    from semlm.fusion.control_study import CONTROL_PATHS, rule_and_path_numbers
    from semlm.fusion.metrics import rate

    hit = Interval.of_proportion(3, 4)
    side = [{"setting": s, "nucleus rule": r, "control path": p, "OOD hit pos": hit, "OOD hit neg": hit,
             "soft adj pos": hit, "soft adj neg": hit}
            for s in ("causal", "published") for r in ("reach", "authors") for p in CONTROL_PATHS]
    numbers = rule_and_path_numbers(side)
    assert len(vars(numbers)) == 3 + 6 and set(vars(numbers).values()) == {0.75}
    assert rate(hit) == f"{hit:.2f} (3/4)"


def test_sst2_control_record_keeps_the_fields_the_claims_read():
    from semlm.fusion.records import SST2ControlModes
    from semlm.fusion.sst2_report import FEATURES_ONLY, ControlStudy

    share = Interval.of_proportion(2, 4)
    asked = SST2Judgement(vader={"POS": 2}, classifier={"POS": 2}, acc=share, classifier_acc=share,
                          classifier_correct=[1, 1, 0, 0])
    none = SST2Judgement(vader={"POS": 2}, classifier={"POS": 2}, vader_pos_share=share, vader_neg_share=share,
                         classifier_pos_share=share)
    judged = {(k, None, "soft"): none for k in ("baseline", "fusion")}
    judged.update({(k, r, m): asked for k in ("baseline", "fusion") for r in ("pos", "neg")
                   for m in ("soft", "hard", FEATURES_ONLY)})
    study = ControlStudy([["a", "b"]] * 4, {key: [["good"]] * 4 for key in judged}, judged)
    control = SST2ControlModes.from_dict(study.record())
    assert control.hard["pos"].acc == 0.5 and control.hard["pos"].acc_ci.low < 0.5
    assert control.features_only["neg"].baseline_acc == 0.5
    numbers = study.numbers()
    assert numbers.none_fusion_neg_clf == 0.5 and numbers.n_prefixes == 4 and numbers.soft_gain_pos == 0.0
    assert numbers.punct_hard_q is None  # this study decoded no end marks
    assert len(study.table()) == 2 + 2 * 2 * 3 and len(study.features_only_table()) == 4
    assert len(study.examples()) == 4 * 2 * 7
    bars = study.frame()  # per model, judge and request: none, soft and hard, the unconditioned share out of 4
    assert len(bars) == 2 * 2 * 2 * 3 and bars.query("mode == 'none' and request == 'pos'")["value"].eq(0.5).all()
    # per prompt, for the claim's fusion - baseline difference paired over prompts
    assert control.hard["neg"].classifier_correct == control.hard["neg"].baseline_classifier_correct == [1, 1, 0, 0]


def test_feature_bank_table_and_future_change():
    from semlm.data import synthetic
    from semlm.data.vocab import Vocabulary
    from semlm.fusion import features, fuzzy

    assert list(features.feature_bank_table().predicate) == list(fuzzy.FEATURE_NAMES)
    vocab = Vocabulary.build(synthetic.LEXICON)
    a = "Alice reviews the paper , very good !".split()
    b = "Alice reviews the paper , very good ?".split()
    diffs, tokens, changed_at = features.future_change(
        {"causal": features.SyntheticFeatures(vocab), "published": features.SyntheticFeatures(vocab, published=True)},
        vocab, a, b)
    assert changed_at == 8 and tokens[8] == "! / ?"
    assert diffs["causal"][:changed_at].max() == 0 and diffs["published"][:changed_at].max() > 0


def test_feature_steering_seeds_add_only_causal_fusion_models_beyond_the_audit():
    from semlm.fusion.audit import audit_runs, steering_seeds
    from semlm.fusion.profiles import STEERING_SEEDS

    seeds = [111, 112, 113]
    cpu = synthetic_profile("cpu")
    steer = steering_seeds(cpu, seeds)
    assert steer[:3] == seeds and len(steer) == STEERING_SEEDS["cpu"] >= 5
    extra = audit_runs(cpu, seeds, steer)[len(audit_runs(cpu, seeds)):]
    assert [(s.group, s.name, s.seed) for s in extra] == [("causal", "fusion", seed) for seed in steer[3:]]
    assert steering_seeds(synthetic_profile("smoke"), [111, 112]) == [111, 112]
