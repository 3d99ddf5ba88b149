"""Paper B's models trained in float32 and in bf16 autocast on this CPU, paired by seed: the evidence for paper B's
``cpu`` precision (``python -m semlm.bench --only precision-idea``, recorded in ``book/recorded/cpu-bf16-idea``).

Chapter 6's plain and gated GPT (validation PPL, training CPU-seconds), chapter 9's topic-drift models (excess
drift at the gated model's budget) and chapter 7's X-ray of each gated GPT, every model trained once per precision
through the run cache, float32 and bf16 in run groups of their own. Validation and generation run in float32 for
both: the comparison is of the trained weights, not of bf16 inference. :func:`summarise_idea_precision` judges
the numbers by :data:`IDEA_PRECISION_RULE`, written before them in the record.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Sequence

from semlm.core import runs as runner
from semlm.core.records import Interval
from semlm.fusion.bench import summarise_training_variants
from semlm.idea.profiles import IdeaProfile, idea_profile, topic_drift_profile
from semlm.idea.sweeps import domain_xrays
from semlm.idea.topic_experiment import TOPIC_DRIFT, Measurements, evaluate_budget, prepare_topic_data, topic_drift_runs
from semlm.idea.generation import load_domains
from semlm.idea.wikitext_experiment import IDEA, idea_data, idea_run, profile_form_run

#: precision -> ``TrainConfig.autocast``: the profiles' own (bf16 on CUDA only, so float32 here) and bf16 autocast.
IDEA_PRECISIONS: dict[str, str] = {"float32": "bf16_on_cuda", "bf16": "bf16"}
#: Where ``python -m semlm.bench --only precision-idea`` records the comparison (``book/recorded/<name>``).
IDEA_PRECISION_RECORD = "cpu-bf16-idea"
IDEA_PRECISION_RULE = (
    "as good: for each of chapter 6's models the bf16 mean validation PPL lies inside the float32 95% t-interval "
    "over the seeds, and for chapter 9's gated model the paired (by seed) bf16 - float32 difference of excess "
    "drift has a 95% interval containing 0, or its bf16 mean excess drift lies inside the float32 interval; "
    "faster: chapter 6's training CPU-seconds, summed over models and seeds, bf16 / float32 below 1; "
    "bf16 is adopted for paper B's cpu profile only if both hold")
XRAY_SIDES = ("boosted", "suppressed")


def in_precision(spec: runner.RunSpec, precision: str) -> runner.RunSpec:
    """``spec`` trained with the autocast of ``IDEA_PRECISIONS[precision]``, in the run group
    ``<group>-<precision>`` (float32 and bf16 never share a cache entry, nor the book's runs)."""
    run = spec.config
    train = dataclasses.replace(run.train, autocast=IDEA_PRECISIONS[precision])
    return dataclasses.replace(spec, config=dataclasses.replace(run, train=train), group=f"{spec.group}-{precision}")


def train_in_both(experiment: runner.Experiment, specs: Sequence[runner.RunSpec],
                  context: runner.RunContext) -> dict[str, list[runner.RunRecord]]:
    """``{precision: records of specs}``: every spec trained in each precision, the two alternating in one pool
    (a busy neighbour slows both alike)."""
    records = runner.run_many(experiment, [in_precision(s, p) for s in specs for p in IDEA_PRECISIONS], context)
    return {p: records[i::len(IDEA_PRECISIONS)] for i, p in enumerate(IDEA_PRECISIONS)}


def gating_specs(profile: IdeaProfile, seeds: Sequence[int]) -> list[runner.RunSpec]:
    """Chapter 6's plain GPT (``baseline``) and gated GPT in the profile's loss form, per seed."""
    return [idea_run(dataclasses.replace(profile, seed=seed), name, gated) for seed in seeds
            for name, gated in (("baseline", False), (profile_form_run(profile), True))]


def xray_overlap(first: dict, second: dict) -> dict[str, float]:
    """Per side (boosted, suppressed): the share of ``first``'s top tokens also in ``second``'s, averaged over
    the domains of two :func:`~semlm.idea.sweeps.domain_xrays` of the same prompts."""
    def shared(domain: str, side: str) -> float:
        ids = [{row["id"] for row in xrays[domain][side]} for xrays in (first, second)]
        return len(ids[0] & ids[1]) / len(ids[0])

    return {side: statistics.fmean(shared(domain, side) for domain in first) for side in XRAY_SIDES}


def _overlap_summary(overlaps: dict[str, dict[str, float]]) -> dict:
    """``{pair: {side: shared share}}`` with each side's mean and 95% interval over the pairs."""
    return {"per_pair": overlaps, **{side: Interval.of_mean([o[side] for o in overlaps.values()],
                                                            bounds=(0.0, 1.0)).to_dict() for side in XRAY_SIDES}}


def summarise_idea_precision(gating: dict[tuple[str, str, int], dict], drift: dict[str, dict[str, dict[int, float]]],
                             topic_cpu_seconds: dict[str, float], xray: dict[str, dict[str, float]],
                             xray_control: dict[str, dict[str, float]], profile: str) -> dict:
    """The comparison record, judged by :data:`IDEA_PRECISION_RULE`.

    ``gating``: ``{(precision, kind, seed): {ppl, train_cpu_seconds, train_seconds}}`` of chapter 6's models;
    ``drift``: ``{precision: {kind: {seed: excess drift}}}`` of chapter 9's; ``topic_cpu_seconds``: their training
    CPU-seconds per precision; ``xray``: ``{seed: {side: shared share}}`` of float32 against bf16
    (:func:`xray_overlap`), ``xray_control`` the same of float32 models of two seeds (how much the X-ray's top
    tokens move with the seed alone; a secondary look, outside the rule).
    """
    variants = {precision: (0, autocast) for precision, autocast in IDEA_PRECISIONS.items()}
    chapter6 = summarise_training_variants(gating, profile, variants, metrics=("ppl",))
    reference, compared = IDEA_PRECISIONS
    seeds = sorted(drift[reference]["gated"])
    excess = {kind: {**{p: Interval.of_mean([drift[p][kind][s] for s in seeds]) for p in IDEA_PRECISIONS},
                     "paired_difference": Interval.paired([drift[compared][kind][s] for s in seeds],
                                                          [drift[reference][kind][s] for s in seeds])}
              for kind in drift[reference]}
    gated, bf16 = excess["gated"], chapter6["variants"][compared]
    drift_same = (gated["paired_difference"].low <= 0 <= gated["paired_difference"].high
                  or gated[reference].low <= gated[compared].mean <= gated[reference].high)
    as_good, faster = bf16["within_seed_intervals"] and drift_same, bf16["faster"]
    return {"rule": IDEA_PRECISION_RULE, "precisions": IDEA_PRECISIONS, "chapter6": chapter6,
            "topic_drift": {"seeds": seeds, "excess_drift_per_seed": drift,
                            "excess_drift": {k: {n: i.to_dict() for n, i in v.items()} for k, v in excess.items()},
                            "train_cpu_seconds": topic_cpu_seconds,
                            "cpu_time_ratio": topic_cpu_seconds[compared] / topic_cpu_seconds[reference]},
            "xray": {"same_seed_float32_vs_bf16": _overlap_summary(xray),
                     "float32_across_seeds": _overlap_summary(xray_control)},
            "verdict": {"ppl_within_seed_intervals": bf16["within_seed_intervals"], "drift_as_good": drift_same,
                        "as_good": as_good, "faster": faster, "cpu_time_ratio": bf16["cpu_time_ratio"],
                        "adopt_bf16": as_good and faster}}


def compare_idea_precisions(profile: str = "cpu", seeds: Sequence[int] = (111, 112, 113),
                            workers: int | None = None, runs_dir: str | Path | None = None) -> dict:
    """Train chapter 6's models at ``seeds`` and chapter 9's at its profile's seeds (from ``seeds[0]``) in both
    precisions through the run cache (``runs_dir``; None: the build's), measure them and summarise
    (:func:`summarise_idea_precision`). A run loaded from the cache reports the CPU time it measured then."""
    config, topic = idea_profile(profile), topic_drift_profile(profile)
    context = runner.RunContext(profile, runs_dir, workers, progress=False)
    gating = train_in_both(IDEA, gating_specs(config, seeds), context)
    topics = train_in_both(TOPIC_DRIFT, topic_drift_runs(topic, topic.seeds(seeds[0])), context)
    results = {(p, r.name, r.seed): {"ppl": r.metrics.val_ppl, "train_seconds": r.train_seconds,
                                     "train_cpu_seconds": r.cpu_seconds} for p, rs in gating.items() for r in rs}
    data, topic_data, domains = idea_data(config), prepare_topic_data(topic.data), load_domains()
    xrays = {p: {r.seed: domain_xrays(r.load("cpu"), data.tokenizer, domains, data.stopword_ids)
                 for r in rs if r.name != "baseline"} for p, rs in gating.items()}
    drift = {}
    for p, records in topics.items():
        budget = evaluate_budget(Measurements(runner.nested(records, "name", "seed"), topic_data, topic),
                                 topic.gated_steps)
        drift[p] = {k: {seed: s["excess_drift"] for seed, s in per_seed.items()} for k, per_seed in
                    budget.per_seed.items()}
    reference, compared = IDEA_PRECISIONS
    float32 = xrays[reference]
    pairs = zip(sorted(float32), sorted(float32)[1:] + sorted(float32)[:1])  # each seed with the next, cyclically
    record = summarise_idea_precision(
        results, drift, {p: sum(r.cpu_seconds for r in rs) for p, rs in topics.items()},
        {str(seed): xray_overlap(float32[seed], xrays[compared][seed]) for seed in float32},
        {f"{a}-{b}": xray_overlap(float32[a], float32[b]) for a, b in pairs if a != b}, profile)
    return {"profile": profile, "topic_profile": topic.name, **record,
            "evaluation": "validation PPL, generations and X-rays in float32 for both precisions (the trained "
                          "weights compared); topic drift at the gated model's budget "
                          f"({topic.gated_steps} steps), both models' checkpoints there (chapter 9's evaluate_budget)",
            "xray_prompts": {name: d.prompts[0].strip() for name, d in domains.items()}}
