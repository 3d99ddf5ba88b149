"""Paper B's real-data claims judged over training seeds: stickiness (the book's five WikiText domains, fixed before
the recording, with the authors' four beside them),
distinct-2 against the plain model with a non-inferiority margin, and the LoRA perplexity claim against a
capacity-matched control."""

from semlm.book.claims import evaluate_claims
from semlm.core.verdicts import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED
from semlm.idea.claims import STICKINESS_DOMAINS
from semlm.idea.records import (IdeaGatingRecord, IdeaOverSeeds, LoraCapacityControl, LoraRecord, SeedPaired,
                                ValidationScore)

DOMAINS = ("medicine", "chemistry", "hardware", "finance")


def verdicts(metrics) -> dict:
    return {row["id"]: row for row in evaluate_claims(metrics)}


def idea_metrics(stickiness=((0.05, 0.06, 0.055), (0.08, 0.085, 0.09), (0.05, 0.055, 0.06)),
                 distinct=((0.99, 0.985, 0.99), (0.98, 0.99, 0.985)), model_ppl=40.0,
                 authors=((0.002, 0.001, 0.002), (0.001, 0.002, 0.002)), seeds=(111, 112, 113),
                 book_domains=STICKINESS_DOMAINS) -> dict:
    """A chapter-6 record over ``seeds``: per domain, the baseline's, the gated model's and (third, if given)
    the sharpening control's per-seed values (the same in every domain, so the domains' mean equals them).
    ``stickiness`` goes to the book's domains (``book_stickiness``, which decides), ``authors`` to the
    authors' four (shown beside)."""
    from semlm.idea.competence import competence

    check = competence({"baseline": model_ppl, "gated": model_ppl},
                       {"unigram_val_ppl": 500.0, "bigram_val_ppl": 60.0, "bigram_lambda": 0.9, "tokens": 1000})
    per_metric = {"stickiness": authors, "authors_stickiness": authors, "distinct_2": distinct}
    domains = {m: {d: SeedPaired.of(*values) for d in (*DOMAINS, "all")} for m, values in per_metric.items()}
    domains["book_stickiness"] = {d: SeedPaired.of(*stickiness) for d in (*book_domains, "all")}
    record = IdeaGatingRecord(profile="cpu", dataset="wikitext-2", competence=check,
                              baseline=ValidationScore(val_ppl=model_ppl), gated=ValidationScore(val_ppl=model_ppl),
                              over_seeds=IdeaOverSeeds(seeds=list(seeds), gated_run="gated-mean", domains=domains))
    return {"06_idea_gating": record.to_dict()}  # through JSON, as the report reads it


def lora_metrics(baseline=(350.0, 351.0, 349.5), gated=(330.0, 331.0, 329.0), control=(345.0, 346.0, 344.5),
                 seeds=(111, 112, 113)) -> dict:
    control_record = LoraCapacityControl(seeds=list(seeds), quantization="nf4",
                                         val_ppl=SeedPaired.of(baseline, gated, control))
    record = LoraRecord(profile="cpu", dataset="fineweb-edu", backbone="book",
                        baseline=ValidationScore(val_ppl=baseline[0]), gated=ValidationScore(val_ppl=gated[0]),
                        capacity_control=control_record)
    return {"08_lora_4bit_idea_gating": record.to_dict()}


# --- B-stickiness ------------------------------------------------------------------------------


def test_stickiness_higher_than_plain_and_than_the_sharpening_control_is_reproduced_and_names_every_domain():
    row = verdicts(idea_metrics())["B-stickiness"]
    assert row["status"] == REPRODUCED
    assert all(d in row["reason"] for d in STICKINESS_DOMAINS) and "sharpened" in row["reason"]
    assert "authors' four domains" in row["reason"] and "floor" in row["reason"]
    assert all(d in row["rule"] for d in STICKINESS_DOMAINS) and "fixed before the recording" in row["rule"]
    assert "training seeds" in row["rule"] and "bigram" in row["rule"]
    assert "sharpening control" in row["rule"] and row["ci"][0] <= row["causal_value"] <= row["ci"][1]


def test_stickiness_is_decided_by_the_book_domains_not_the_authors_floor():
    """The authors' four domains at their WikiText floor cannot decide: a gate better there only is not reproduced."""
    floor_only = verdicts(idea_metrics(stickiness=((0.05, 0.06, 0.055), (0.05, 0.06, 0.055), (0.05, 0.06, 0.055)),
                                       authors=((0.001, 0.001, 0.002), (0.004, 0.005, 0.006), (0.001, 0.001, 0.001))))
    assert floor_only["B-stickiness"]["status"] != REPRODUCED


def test_stickiness_needs_three_seeds_and_every_preregistered_domain():
    two = verdicts(idea_metrics(stickiness=((0.05, 0.06), (0.08, 0.085), (0.05, 0.055)),
                                distinct=((0.99, 0.985), (0.98, 0.99)), authors=((0.002, 0.001), (0.001, 0.002)),
                                seeds=(111, 112)))["B-stickiness"]
    assert two["status"] == INCONCLUSIVE and "the rule needs 3" in two["reason"]
    other = verdicts(idea_metrics(book_domains=STICKINESS_DOMAINS[:-1]))["B-stickiness"]
    assert other["status"] == NOT_RUN and STICKINESS_DOMAINS[-1] in other["reason"]


def test_a_gate_that_only_sharpens_is_not_reproduced():
    """The gated GPT beats the plain one, but the plain one sampled at the gated entropy does as well: when that is
    measured precisely the effect over the sharpening control is excluded, and when noisily it is never reproduced."""
    impostor = verdicts(idea_metrics(stickiness=((0.05, 0.06, 0.055), (0.08, 0.085, 0.09),
                                                 (0.0801, 0.0849, 0.0901))))["B-stickiness"]
    assert impostor["status"] == NOT_REPRODUCED and "gated - sharpened plain's upper end" in impostor["reason"]
    noisy = verdicts(idea_metrics(stickiness=((0.05, 0.06, 0.055), (0.08, 0.085, 0.09),
                                              (0.081, 0.084, 0.091))))["B-stickiness"]
    assert noisy["status"] == INCONCLUSIVE and "gated - sharpened plain not shown above 0" in noisy["reason"]
    unrecorded = verdicts(idea_metrics(stickiness=((0.05, 0.06, 0.055), (0.08, 0.085, 0.09))))["B-stickiness"]
    assert unrecorded["status"] == INCONCLUSIVE and "no sharpening control" in unrecorded["reason"]


def test_stickiness_lower_or_overlapping_over_seeds_is_not_reproduced_or_inconclusive():
    lower = verdicts(idea_metrics(stickiness=((0.08, 0.085, 0.09), (0.05, 0.06, 0.055),
                                              (0.05, 0.05, 0.05))))["B-stickiness"]
    assert lower["status"] == NOT_REPRODUCED
    noisy = verdicts(idea_metrics(stickiness=((0.05, 0.09, 0.06), (0.09, 0.05, 0.07),
                                              (0.05, 0.05, 0.05))))["B-stickiness"]
    assert noisy["status"] == INCONCLUSIVE


def test_stickiness_without_seeds_is_not_run_and_incompetent_models_are_not_testable():
    from semlm.idea.claims import IDEA

    metrics = idea_metrics()
    del metrics[IDEA]["over_seeds"]
    assert verdicts(metrics)["B-stickiness"]["status"] == NOT_RUN
    assert verdicts(idea_metrics(model_ppl=100.0))["B-stickiness"]["status"] == NOT_TESTABLE


# --- B-distinct --------------------------------------------------------------------------------


def test_distinct_as_high_as_the_plain_model_is_reproduced():
    row = verdicts(idea_metrics())["B-distinct"]
    assert row["status"] == REPRODUCED
    assert "5%" in row["rule"] and "plain" in row["rule"]


def test_garbage_with_high_distinct_but_below_the_plain_model_is_not_reproduced():
    # distinct-2 0.92 clears the old fixed 0.9 floor, but the plain model writes 0.99
    row = verdicts(idea_metrics(distinct=((0.99, 0.99, 0.985), (0.92, 0.925, 0.92))))["B-distinct"]
    assert row["status"] == NOT_REPRODUCED


def test_distinct_straddling_the_margin_is_inconclusive():
    row = verdicts(idea_metrics(distinct=((0.99, 0.99, 0.99), (0.99, 0.90, 0.99))))["B-distinct"]
    assert row["status"] == INCONCLUSIVE


# --- B-lora-ppl --------------------------------------------------------------------------------


def test_gated_lower_than_baseline_and_capacity_control_is_reproduced():
    row = verdicts(lora_metrics())["B-lora-ppl"]
    assert row["status"] == REPRODUCED
    assert "capacity control" in row["rule"] and "3 training seeds" in row["reason"]


def test_control_better_than_gate_is_not_reproduced():
    """The gate beats the plain LoRA baseline, but an output adapter with its parameters does as well or better."""
    matched = verdicts(lora_metrics(control=(330.5, 331.2, 329.1)))["B-lora-ppl"]
    assert matched["status"] == NOT_REPRODUCED and "smaller than the smallest effect of interest" in matched["reason"]
    better = verdicts(lora_metrics(control=(250.0, 251.0, 249.0)))["B-lora-ppl"]
    assert better["status"] == NOT_REPRODUCED and "opposite direction" in better["reason"]
    assert "capacity control - gated" in better["reason"]


def test_a_gated_model_not_lower_than_the_baseline_is_not_reproduced_and_a_noisy_one_inconclusive():
    assert verdicts(lora_metrics(gated=(352.0, 353.0, 351.5)))["B-lora-ppl"]["status"] == NOT_REPRODUCED
    # lower on average, but too noisy to exclude an effect of m or to show one
    assert verdicts(lora_metrics(gated=(345.0, 355.0, 347.0), control=(360.0, 365.0, 362.0)))["B-lora-ppl"][
        "status"] == INCONCLUSIVE


def test_one_seed_of_the_lora_comparison_is_inconclusive_and_no_control_is_not_run():
    one = lora_metrics(baseline=(350.0,), gated=(330.0,), control=(345.0,), seeds=(111,))
    assert verdicts(one)["B-lora-ppl"]["status"] == INCONCLUSIVE
    metrics = lora_metrics()
    del metrics["08_lora_4bit_idea_gating"]["capacity_control"]
    assert verdicts(metrics)["B-lora-ppl"]["status"] == NOT_RUN


def test_an_incompetent_build_names_a_recorded_run_that_passes_the_check_but_does_not_judge_it(tmp_path, monkeypatch):
    import json

    import semlm.book.recorded_runs as recorded

    monkeypatch.setattr(recorded, "RECORDED_DIR", tmp_path)
    verdict = verdicts(idea_metrics(model_ppl=100.0))["B-stickiness"]
    assert verdict["status"] == NOT_TESTABLE and "recorded run" not in verdict["reason"]
    (tmp_path / "cpu-long").mkdir()
    (tmp_path / "cpu-long" / "provenance.json").write_text(json.dumps({"kind": "cpu-long"}))
    (tmp_path / "cpu-long" / "06_idea_gating.json").write_text(json.dumps({"competence": {"passes": True}}))
    verdict = verdicts(idea_metrics(model_ppl=100.0))["B-stickiness"]
    assert verdict["status"] == NOT_TESTABLE and "book/recorded/cpu-long" in verdict["reason"]


def test_paper_b_claims_decided_on_an_interval_show_its_quantity():
    """The value shown beside an interval is that interval's mean (gated - baseline / control / plain)."""
    rows = verdicts({**idea_metrics(), **lora_metrics()})
    for claim in ("B-stickiness", "B-distinct", "B-lora-ppl"):
        row = rows[claim]
        assert isinstance(row["causal_value"], float) and row["ci"][0] <= row["causal_value"] <= row["ci"][1], claim


def test_paper_b_verdicts_over_training_seeds_say_how_many_seeds_they_rest_on():
    rows = verdicts({**idea_metrics(), **lora_metrics(baseline=(350.0, 351.0), gated=(330.0, 331.0),
                                                       control=(345.0, 346.0), seeds=(111, 112))})
    assert (rows["B-stickiness"]["seeds"], rows["B-distinct"]["seeds"], rows["B-lora-ppl"]["seeds"]) == (3, 3, 2)
    assert verdicts(idea_metrics(model_ppl=100.0))["B-stickiness"]["seeds"] is None  # not testable: judged on nothing
