"""The tables, cited numbers and verdicts chapters 6-8 take from the library (semlm.idea.report, sweeps)."""

from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from semlm.core.records import Interval
from semlm.idea.records import IdeaRunMetrics, LoraRunMetrics
from semlm.idea import report, sweeps
from semlm.idea.profiles import idea_profile
from semlm.idea.data import TokenBlocks
from semlm.idea.generation import DomainScores


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
    both = report.LossForms(runs, "gated-mean")
    assert list(both.forms) == ["gated-sum", "gated-mean"]
    numbers = both.numbers()
    assert (numbers.form_other, numbers.form_ppl_other, numbers.form_bce_chosen) == ("gated-sum", 8.0, 0.1)
    one = report.LossForms({"baseline": runs["baseline"], "gated": runs["gated-sum"]}, "gated").numbers()
    assert one.form_chosen == one.form_other and one.form_ppl_other == one.form_ppl_chosen == 8.0


def test_the_training_result_cites_speed_minutes_and_every_model_over_seeds():
    trained = {"baseline": run(IdeaRunMetrics(val_ppl=9.0), seconds=1.0),
               "gated": run(IdeaRunMetrics(val_ppl=8.0), seconds=2.0)}
    config = SimpleNamespace(train=SimpleNamespace(batch_size=2, max_steps=10), size=SimpleNamespace(block_size=8))
    training = report.Training(trained, trained, [*trained.values()] * 2, config)
    numbers = training.numbers()
    assert numbers.step_time_ratio == 2.0 and numbers.train_tokens == "160"
    assert numbers.all_models == 4 and numbers.budget_minutes == pytest.approx(6 / 60)
    assert list(training.table().data.index) == ["baseline", "gated"]


def test_retention_tables_differences_and_cited_domains_read_the_typed_scores():
    def scores(values):
        rows = [{"stickiness": v} for v in values]
        return DomainScores({"stickiness": Interval.of_mean(values), "distinct_2": Interval(0.9, 0.8, 1.0)}, rows)

    retention = report.Retention({"baseline": {"music": scores([0.1, 0.2, 0.1]), "sport": scores([0.3, 0.3, 0.4])},
                                  "gated": {"music": scores([0.5, 0.6, 0.55]), "sport": scores([0.1, 0.1, 0.2])}})
    frame = retention.frame()
    assert list(frame["model"]) == ["baseline"] * 4 + ["gated"] * 4 and {"mean", "ci_low", "ci_high"} <= set(frame)
    assert retention.differences["music"].low > 0 and retention.differences["sport"].high < 0
    assert retention.numbers() == report.RetentionNumbers(book_n=2, book_above="music", book_below="sport")
    assert retention.table().loc[("music", "baseline"), "gated - baseline stickiness"] == ""
    summary = retention.summary(("stickiness",), intervals=("distinct_2",))
    assert summary["music"]["gated"] == {"stickiness": pytest.approx(0.55), "distinct_2_ci": [0.8, 1.0]}
    assert summary["sport"]["difference"] == {"stickiness": retention.differences["sport"]}
    assert list(retention.summary(("stickiness",), difference=False)["music"]) == ["baseline", "gated"]
    assert "paper (stickiness)" not in retention.table()


def test_the_authors_protocol_table_sets_the_difference_beside_the_gated_rows():
    from semlm.reference import PAPER_B_EVAL_DOMAINS

    def scores(values):
        summary = {m: Interval.of_mean(values) for m in ("stickiness", "authors_stickiness")}
        return DomainScores(summary, [{"authors_stickiness": v, "text": " a text "} for v in values])

    authors = report.AuthorsProtocol({m: {d: scores([0.1, 0.2] if m == "baseline" else [0.3, 0.4])
                                          for d in PAPER_B_EVAL_DOMAINS} for m in ("baseline", "gated")})
    domain = next(iter(PAPER_B_EVAL_DOMAINS))
    assert authors.summary()[domain]["difference"]["authors_stickiness"].mean == pytest.approx(0.2)
    difference = authors.table()["gated - baseline stickiness"]
    assert difference[(domain, "baseline")] == "" and difference[(domain, "gated")].startswith("0.2")
    assert authors.table().loc[("chemistry", "gated"), "paper (stickiness)"] == 0.103
    assert authors.summary()[domain]["gated"]["stickiness"] == authors.scores["gated"][domain].summary["stickiness"]
    assert authors.examples().loc[domain, "gated"] == "a text"


def test_quantization_numbers_compare_the_two_precisions():
    runs = {(q, idea): run(LoraRunMetrics(val_ppl=ppl), seconds=s)
            for (q, idea), ppl, s in ((("nf4", False), 10.0, 2.0), (("nf4", True), 9.0, 4.0),
                                      (("none", False), 8.0, 1.0), (("none", True), 8.5, 1.0))}
    numbers = report.LoraRuns(runs).quantization_deltas(("nf4", "none"))
    assert numbers == {"delta_nf4": -1.0, "delta_fp32": 0.5, "nf4_cost_base": 2.0, "step_ratio": 4.0}
    assert report.LoraRuns(runs).quantization_deltas(("nf4",)) == {"delta_nf4": -1.0}


def test_the_loop_verdict_is_read_from_the_intervals():
    def loops(strong_gate, strong_decay):
        rows = [{"alpha": 0.0, "decoder": "gate", "mean": 0.2, "ci_low": 0.1, "ci_high": 0.3}]
        rows += [{"alpha": 2.0, "decoder": "gate", **strong_gate},
                 {"alpha": 2.0, "decoder": sweeps.DECAY, **strong_decay}]
        return sweeps.Loops(pd.DataFrame(rows), {}, {"mean": 0.5})

    high, low = {"mean": 0.8, "ci_low": 0.7, "ci_high": 0.9}, {"mean": 0.3, "ci_low": 0.2, "ci_high": 0.4}
    numbers = loops(high, low).numbers()
    assert numbers.loop_verdict.endswith("removes a significant part of it") and numbers.loop_alpha == 2.0
    assert numbers.loop_baseline == 0.5
    assert "does not reduce it" in loops(high, high).numbers().loop_verdict
    assert "cannot be judged" in loops(low, low).numbers().loop_verdict
    both = loops(high, low).plot_frame()
    assert len(both) == 4 and set(both[both.alpha == 0.0].decoder) == {"gate", sweeps.DECAY}


def test_the_sweep_runs_share_the_sweep_budget_and_the_chosen_loss_form():
    profile = idea_profile("smoke")
    specs = {s.name: s for s in sweeps.gate_sweep_runs(profile, profile.idea)}
    assert list(specs) == ["sweep-baseline", "sweep-beta-2.0", "sweep-beta-1.5", "sweep-beta-1.0", "sweep-k10",
                           "sweep-k50"]
    assert {s.config.train.max_steps for s in specs.values()} == {profile.sweep_steps}
    assert specs["sweep-k50"].config.idea.window == 50 and not specs["sweep-baseline"].config.gated


# --- the seed comparison (chapter 6) and the capacity control (chapter 8) ---------------------


def test_chapter_6_trains_the_profiles_form_at_every_further_seed():
    from semlm.idea.wikitext_experiment import idea_gating_runs, profile_form_run

    cpu = idea_profile("cpu")
    # cpu's models fail the competence check, so further seeds would feed no verdict: one seed of each model
    assert cpu.n_seeds == 1 and idea_profile("cpu-long").n_seeds == 3 and idea_profile("smoke").n_seeds == 2
    assert profile_form_run(cpu) == "gated-mean"
    assert [(s.name, s.seed) for s in idea_gating_runs(cpu, None)] == [
        ("baseline", 111), ("gated-sum", 111), ("gated-mean", 111)]
    specs = idea_gating_runs(cpu, 3)
    assert [(s.name, s.seed) for s in specs] == [
        ("baseline", 111), ("gated-sum", 111), ("gated-mean", 111),
        ("baseline", 112), ("gated-mean", 112), ("baseline", 113), ("gated-mean", 113)]
    assert specs[4].seed == 112 and specs[4].config.idea == specs[2].config.idea
    assert len(idea_gating_runs(cpu)) == 3  # chapter 7 reloads the first seed's models only
    assert [s.name for s in idea_gating_runs(idea_profile("paper"), 2)] == ["baseline", "gated"] * 2


def test_the_seed_comparison_pairs_each_seeds_means_over_the_four_domains():
    cpu = idea_profile("cpu")

    def record(name, seed, ppl):
        return SimpleNamespace(name=name, seed=seed, metrics=IdeaRunMetrics(val_ppl=ppl))

    records = [record("baseline", 111, 10.0), record("gated-sum", 111, 9.0), record("gated-mean", 111, 9.5),
               record("baseline", 112, 11.0), record("gated-mean", 112, 10.0)]
    by_seed = report.runs_by_seed(records, cpu)
    assert {s: {m: r.metrics.val_ppl for m, r in p.items()} for s, p in by_seed.items()} == {
        111: {"baseline": 10.0, "gated": 9.5}, 112: {"baseline": 11.0, "gated": 10.0}}

    def scores(stick):  # two domains; the second is always 0
        summary = {m: Interval.of_mean([v]) for m, v in (("stickiness", stick), ("authors_stickiness", stick),
                                                          ("distinct_2", 0.9))}
        zero = {m: Interval.of_mean([0.0]) for m in summary}
        return {"chemistry": DomainScores(summary, []), "finance": DomainScores(zero, [])}

    seed_scores = {111: {"baseline": scores(0.1), "gated": scores(0.3)},
                   112: {"baseline": scores(0.2), "gated": scores(0.3)}}
    over = report.seed_comparison(by_seed, seed_scores, cpu)
    assert over.seeds == [111, 112] and over.gated_run == "gated-mean"
    assert over.domains["stickiness"]["chemistry"].gated_minus_baseline.values == pytest.approx((0.2, 0.1))
    assert over.domains["stickiness"]["all"].gated_minus_baseline.values == pytest.approx((0.1, 0.05))
    assert over.val_ppl.gated_minus_baseline.values == (-0.5, -1.0)
    assert {"stickiness", "authors_stickiness", "distinct_2"} == set(over.domains)
    assert len(over.table()) == 3 * 3 + 1
    assert over.numbers().seed_stick_vs_sharpened == "not measured" == over.numbers().seed_book_diff
    assert over.domains["stickiness"]["all"].gated_minus_control is None and over.sharpening_temperature is None
    # with the sharpening control: the plain GPT at the gated entropy is the pairs' control
    for seed, stick in ((111, 0.25), (112, 0.2)):
        seed_scores[seed]["sharpened"] = scores(stick)
    over = report.seed_comparison(by_seed, seed_scores, cpu, {111: 0.5, 112: 0.55})
    assert over.domains["stickiness"]["chemistry"].gated_minus_control.values == pytest.approx((0.05, 0.1))
    assert over.sharpening_temperature.mean == pytest.approx(0.525)
    assert over.numbers().seed_sharpening_temperature.startswith("0.525")
    assert over.numbers().seed_stick_vs_sharpened == over.domains["stickiness"]["all"].gated_minus_control.format(
        3, signed=True)


def test_the_capacity_control_pairs_the_three_models_by_seed():
    def record(name, seed, ppl, trainable):
        return SimpleNamespace(name=name, seed=seed, key=f"{name}-{seed}",
                               spec=SimpleNamespace(config=SimpleNamespace(quantization=name.split("-")[1])),
                               metrics=LoraRunMetrics(val_ppl=ppl, trainable=trainable))

    counts = {"baseline": {"lora": 8, "idea_head": 0, "output_adapter": 0},
              "gated": {"lora": 8, "idea_head": 40, "output_adapter": 0},
              "control": {"lora": 8, "idea_head": 0, "output_adapter": 40}}
    values = {"baseline": (30.0, 31.0, 30.5), "gated": (28.0, 29.0, 28.0), "control": (29.0, 29.5, 29.0)}
    records = [record(f"{m}-nf4", 111 + i, v, counts[m]) for m, vs in values.items() for i, v in enumerate(vs)]
    records.append(record("baseline-none", 111, 5.0, counts["baseline"]))  # another precision: left out
    tokens = torch.arange(400) % 17
    blocks = TokenBlocks.from_stream(tokens, 16, 4)
    control = report.lora_capacity(records, "nf4", SimpleNamespace(train=blocks, validation=blocks), 17)
    assert control.seeds == [111, 112, 113]
    assert control.val_ppl.gated_minus_baseline.values == (-2.0, -2.0, -2.5)
    assert control.val_ppl.gated_minus_control.values == (-1.0, -0.5, -1.0)
    assert control.competence.worst_model == "baseline (seed 112)"
    table = control.table()
    assert list(table.index) == ["seed 111", "seed 112", "seed 113", "mean [95% interval]"]
    numbers = control.numbers()
    assert (numbers.cc_idea_params, numbers.cc_adapter_params, numbers.cc_seeds) == (40, 40, 3)
