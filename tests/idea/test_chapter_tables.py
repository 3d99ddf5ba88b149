"""The tables, cited numbers and verdicts chapters 6-8 take from the library (semlm.idea.report, sweeps)."""

from types import SimpleNamespace

import pandas as pd

from semlm.core.records import IdeaRunMetrics, Interval, LoraRunMetrics
from semlm.idea import report, sweeps
from semlm.idea.wikitext_experiment import DomainScores, idea_profile


def run(metrics, history=(), seconds=1.0):
    return SimpleNamespace(metrics=metrics, history=list(history), seconds_per_step=seconds, status="trained",
                           steps=2, train_seconds=2 * seconds, best_step=None, stopped_early=False)


def test_the_differences_table_says_when_there_are_none():
    assert list(report.differences_frame(idea_profile("paper")).iloc[:, 0]) == ["no differences from the authors' run"]
    cpu = report.differences_frame(idea_profile("cpu"))
    assert cpu.index.name == "setting" and list(cpu.columns) == ["this run", "authors' run"] and len(cpu) > 3


def test_loss_form_numbers_name_the_other_form_or_say_only_one_was_trained():
    runs = {"baseline": run(IdeaRunMetrics(val_ppl=9.0)),
            "gated-sum": run(IdeaRunMetrics(val_ppl=8.0), [{"idea_bce_per_column": 0.2}]),
            "gated-mean": run(IdeaRunMetrics(val_ppl=7.0), [{"idea_bce_per_column": 0.1}])}
    both = report.loss_form_numbers(runs, ["gated-sum", "gated-mean"], "gated-mean")
    assert (both["form_other"], both["form_ppl_other"], both["form_bce_chosen"]) == ("gated-sum", 8.0, 0.1)
    one = report.loss_form_numbers({**runs, "gated": runs["gated-sum"]}, ["gated"], "gated")
    assert one["form_chosen"] == one["form_other"] and one["form_ppl_other"] == one["form_ppl_chosen"] == 8.0


def test_retention_frame_and_book_differences_read_the_typed_scores():
    def scores(values):
        rows = [{"stickiness": v} for v in values]
        return DomainScores({"stickiness": Interval.of_mean(values), "distinct_2": Interval(0.9, 0.8, 1.0)}, rows)

    retention = {"baseline": {"music": scores([0.1, 0.2, 0.1])}, "gated": {"music": scores([0.5, 0.6, 0.55])}}
    frame = report.retention_frame(retention, ("stickiness",))
    assert list(frame["model"]) == ["baseline", "gated"] and {"mean", "ci_low", "ci_high"} <= set(frame)
    assert report.book_differences(retention)["music"].low > 0


def test_quantization_numbers_compare_the_two_precisions():
    runs = {(q, idea): run(LoraRunMetrics(val_ppl=ppl), seconds=s)
            for (q, idea), ppl, s in ((("nf4", False), 10.0, 2.0), (("nf4", True), 9.0, 4.0),
                                      (("none", False), 8.0, 1.0), (("none", True), 8.5, 1.0))}
    numbers = report.quantization_numbers(runs, ("nf4", "none"))
    assert numbers == {"delta_nf4": -1.0, "delta_fp32": 0.5, "nf4_cost_base": 2.0, "step_ratio": 4.0}
    assert report.quantization_numbers(runs, ("nf4",)) == {"delta_nf4": -1.0}


def test_the_loop_verdict_is_read_from_the_intervals():
    def loops(strong_gate, strong_decay):
        rows = [{"alpha": 0.0, "decoder": "gate", "mean": 0.2, "ci_low": 0.1, "ci_high": 0.3}]
        rows += [{"alpha": 2.0, "decoder": "gate", **strong_gate},
                 {"alpha": 2.0, "decoder": sweeps.DECAY, **strong_decay}]
        return pd.DataFrame(rows)

    high, low = {"mean": 0.8, "ci_low": 0.7, "ci_high": 0.9}, {"mean": 0.3, "ci_low": 0.2, "ci_high": 0.4}
    numbers = sweeps.loop_numbers(loops(high, low), {"mean": 0.5})
    assert numbers["loop_verdict"].endswith("removes a significant part of it") and numbers["loop_alpha"] == 2.0
    assert "does not reduce it" in sweeps.loop_numbers(loops(high, high), {"mean": 0.5})["loop_verdict"]
    assert "cannot be judged" in sweeps.loop_numbers(loops(low, low), {"mean": 0.5})["loop_verdict"]
    both = sweeps.loops_for_plot(loops(high, low))
    assert len(both) == 4 and set(both[both.alpha == 0.0].decoder) == {"gate", sweeps.DECAY}


def test_the_sweep_runs_share_the_sweep_budget_and_the_chosen_loss_form():
    profile = idea_profile("smoke")
    specs = {s.name: s for s in sweeps.gate_sweep_runs(profile, profile.idea)}
    assert list(specs) == ["sweep-baseline", "sweep-beta-2.0", "sweep-beta-1.5", "sweep-beta-1.0", "sweep-k10",
                           "sweep-k50"]
    assert {s.config.train.max_steps for s in specs.values()} == {profile.sweep_steps}
    assert specs["sweep-k50"].config.idea.window == 50 and not specs["sweep-baseline"].config.gated
