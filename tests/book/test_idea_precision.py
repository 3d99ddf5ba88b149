"""Paper B's float32 / bf16 comparison (semlm.book.idea_precision): the runs it trains and its summary."""

import pytest

from semlm.book.idea_precision import (IDEA_PRECISION_RULE, gating_specs, in_precision, summarise_idea_precision,
                                       xray_overlap)
from semlm.idea.profiles import idea_profile

SEEDS = (1, 2, 3)


def _gating(bf16_shift: float, bf16_seconds: float) -> dict:
    """Chapter 6's results: PPL 100 / 90 (plain / gated) + (-1, 0, 1) by seed, bf16 shifted; 10 CPU-s in float32."""
    return {(precision, kind, seed): {"ppl": base + noise + (bf16_shift if precision == "bf16" else 0.0),
                                      "train_cpu_seconds": bf16_seconds if precision == "bf16" else 10.0,
                                      "train_seconds": 1.0}
            for precision in ("float32", "bf16") for kind, base in (("baseline", 100.0), ("gated-mean", 90.0))
            for seed, noise in zip(SEEDS, (-1.0, 0.0, 1.0))}


def _drift(bf16_gated: tuple[float, ...]) -> dict:
    float32 = dict(zip(SEEDS, (0.10, 0.12, 0.14)))
    return {"float32": {"plain": float32, "gated": float32},
            "bf16": {"plain": float32, "gated": dict(zip(SEEDS, bf16_gated))}}


XRAY = {str(seed): {"boosted": 0.75, "suppressed": 1.0} for seed in SEEDS}
XRAY_CONTROL = {"1-2": {"boosted": 0.5, "suppressed": 0.25}, "2-3": {"boosted": 0.5, "suppressed": 0.75}}


def test_bf16_within_the_seed_intervals_with_unchanged_drift_and_less_cpu_time_is_adopted():
    record = summarise_idea_precision(_gating(0.5, 6.0), _drift((0.11, 0.12, 0.13)), {"float32": 20.0, "bf16": 15.0},
                                      XRAY, XRAY_CONTROL, "cpu")
    verdict, bf16 = record["verdict"], record["chapter6"]["variants"]["bf16"]
    assert verdict == {"ppl_within_seed_intervals": True, "drift_as_good": True, "as_good": True, "faster": True,
                       "cpu_time_ratio": pytest.approx(0.6), "adopt_bf16": True}
    assert bf16["baseline"]["ppl_paired_change"]["mean"] == pytest.approx(0.5 / 100, rel=1e-3)
    assert record["topic_drift"]["cpu_time_ratio"] == pytest.approx(0.75)
    gated = record["topic_drift"]["excess_drift"]["gated"]
    assert gated["paired_difference"]["mean"] == pytest.approx(0.0, abs=1e-12)  # +0.01, 0, -0.01 by seed
    assert gated["paired_difference"]["ci_low"] < 0 < gated["paired_difference"]["ci_high"]
    same, control = record["xray"]["same_seed_float32_vs_bf16"], record["xray"]["float32_across_seeds"]
    assert same["boosted"]["mean"] == 0.75 and same["suppressed"]["mean"] == 1.0
    assert control["boosted"]["mean"] == 0.5 and control["suppressed"]["mean"] == 0.5
    assert record["rule"] == IDEA_PRECISION_RULE and list(record)[0] == "rule"  # the rule comes before the numbers


def test_a_shifted_ppl_or_drift_is_not_as_good_and_more_cpu_time_is_not_faster():
    shifted = summarise_idea_precision(_gating(5.0, 6.0), _drift((0.11, 0.12, 0.13)), {"float32": 2.0, "bf16": 1.0},
                                       XRAY, XRAY_CONTROL, "cpu")["verdict"]
    assert not shifted["ppl_within_seed_intervals"] and shifted["faster"] and not shifted["adopt_bf16"]
    # every seed's gated excess drift 0.2 higher in bf16: the paired interval excludes 0, the mean leaves float32's
    drifted = summarise_idea_precision(_gating(0.5, 12.0), _drift((0.30, 0.33, 0.34)), {"float32": 2.0, "bf16": 3.0},
                                       XRAY, XRAY_CONTROL, "cpu")["verdict"]
    assert drifted["ppl_within_seed_intervals"] and not drifted["drift_as_good"] and not drifted["as_good"]
    assert not drifted["faster"] and drifted["cpu_time_ratio"] == pytest.approx(1.2) and not drifted["adopt_bf16"]


def test_xray_overlap_is_the_shared_share_of_top_tokens_averaged_over_domains():
    def rows(*ids):
        return [{"id": i} for i in ids]

    float32 = {"music": {"boosted": rows(1, 2, 3, 4), "suppressed": rows(5, 6)},
               "sport": {"boosted": rows(7, 8, 9, 10), "suppressed": rows(11, 12)}}
    bf16 = {"music": {"boosted": rows(4, 3, 2, 1), "suppressed": rows(5, 13)},
            "sport": {"boosted": rows(7, 20, 21, 22), "suppressed": rows(14, 15)}}
    assert xray_overlap(float32, bf16) == {"boosted": pytest.approx((1 + 0.25) / 2),
                                           "suppressed": pytest.approx((0.5 + 0) / 2)}


def test_each_precision_trains_in_a_run_group_of_its_own_and_only_the_precision_differs():
    from dataclasses import replace

    profile = idea_profile("cpu")
    specs = gating_specs(profile, (111, 112))
    assert [(s.name, s.seed) for s in specs] == [("baseline", 111), ("gated-mean", 111), ("baseline", 112),
                                                ("gated-mean", 112)]
    float32, bf16 = in_precision(specs[1], "float32"), in_precision(specs[1], "bf16")
    assert float32.config.train.autocast == "bf16_on_cuda" and bf16.config.train.autocast == "bf16"
    for run in (float32, bf16):  # the profile's recipe, whatever precision it picks on this CPU
        assert replace(run.config, train=replace(run.config.train, autocast=None)) == replace(
            specs[1].config, train=replace(specs[1].config.train, autocast=None))
    assert {float32.group, bf16.group} == {"wikitext-2-float32", "wikitext-2-bf16"}


def test_paper_bs_comparison_is_recorded_in_a_file_of_its_own_not_read_as_chapter_metrics(tmp_path):
    from semlm.book.recorded import write_precision_comparison
    from semlm.book.recorded_runs import load_recorded

    record = {"profile": "cpu", "rule": IDEA_PRECISION_RULE, "verdict": {"adopt_bf16": False}}
    write_precision_comparison(record, tmp_path, "cpu-bf16-idea", "python -m semlm.bench --only precision-idea",
                               paper="B")
    (run,) = load_recorded(tmp_path)
    assert run.idea_precision == record and run.training_variants is None and run.chapters == {}
    assert run.on_cpu and "paper B's models" in run.provenance["label"]


def test_the_recorded_comparison_is_shown_per_model_with_its_rule_and_verdict(tmp_path):
    from semlm.book.bench import recorded_idea_precision_frame

    frame, message = recorded_idea_precision_frame()  # book/recorded/cpu-bf16-idea
    assert list(frame.index) == ["chapter 6 baseline: validation PPL", "chapter 6 gated-mean: validation PPL",
                                 "chapter 9 plain: excess drift", "chapter 9 gated: excess drift"]
    assert "book/recorded/cpu-bf16-idea" in message and "rule: as good" in message and "adopt bf16" in message
    assert recorded_idea_precision_frame(tmp_path) == (
        None, "no recorded paper-B precision comparison (python -m semlm.bench --only precision-idea)")


@pytest.mark.parametrize("only", ["precision", "precision-idea"])
def test_a_precision_comparison_is_not_recorded_at_the_default_smoke_profile(only, capsys):
    """The recorded comparison is evidence for the cpu profile: the CLI's default (smoke) must not replace it."""
    from semlm.book.bench_cli import main

    assert main(["--only", only]) == 2
    assert "pass --variants-profile cpu" in capsys.readouterr().err
