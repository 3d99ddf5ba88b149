"""Paper B's typed, torch-free records: what one run measures (``RunRecord.metrics``) and the records of
chapters 6-9, in the JSON shape the metrics files have always had."""

from __future__ import annotations

from dataclasses import dataclass, make_dataclass
from typing import ClassVar, Sequence

import pandas as pd

from semlm.core.records import ChapterRecord, Interval, Record


@dataclass(frozen=True, kw_only=True)
class XrayRecord(ChapterRecord):
    chapter: ClassVar[str] = "07_xray_and_sweeps"


# -- chapters 6-9: paper B's runs (``RunRecord.metrics`` of the paper-B experiments) --

@dataclass(frozen=True, kw_only=True)
class IdeaRunMetrics(Record):
    """One GPT run of chapters 6, 7 and 9: validation perplexity with the gate (``val_ppl``) and without it
    (``val_ppl_ungated``; None for a plain GPT), training tokens (chapter 6's and 7's)."""

    val_ppl: float | None = None
    val_ppl_ungated: float | None = None
    train_tokens: int | None = None


@dataclass(frozen=True, kw_only=True)
class LoraRunMetrics(Record):
    """One LoRA run of chapter 8: perplexities, trainable parameters by group and in all, frozen ones."""

    val_ppl: float | None = None
    val_ppl_ungated: float | None = None
    trainable: dict[str, int] | None = None
    trainable_params: int | None = None
    frozen_params: int | None = None
    weights_mb: float | None = None


@dataclass(frozen=True, kw_only=True)
class BackboneRunMetrics(Record):
    """The book's small Mistral pre-trained on WikiText-2 (chapter 8's frozen backbone)."""

    wikitext_val_ppl: float | None = None
    n_parameters: int | None = None
    mistral_config: dict | None = None
    dataset: str | None = None


# -- chapter 6: idea gating on WikiText --

@dataclass(frozen=True, kw_only=True)
class Competence(Record):
    """``semlm.idea.competence.competence``: the models against the best interpolated bigram."""

    passes: bool | None = None
    worst_model: str | None = None
    worst_ratio: float | None = None
    threshold_ratio: float | None = None
    bigram_val_ppl: float | None = None
    model_val_ppl: dict[str, float] | None = None


@dataclass(frozen=True, kw_only=True)
class ValidationScore(Record):
    val_ppl: float | None = None


@dataclass(frozen=True, kw_only=True)
class AuthorsDomain(Record):
    """One domain of the authors' evaluation protocol: per-model summaries and gated - baseline."""

    baseline: dict[str, Interval] | None = None
    gated: dict[str, Interval] | None = None
    difference: dict[str, Interval] | None = None


@dataclass(frozen=True, kw_only=True)
class SeedPaired(Record):
    """One metric over training seeds: each model's per-seed values (``baseline``, ``gated``; a third model
    where there is one, ``control``) with 95% t-intervals, and the per-seed differences."""

    baseline: Interval | None = None
    gated: Interval | None = None
    control: Interval | None = None
    gated_minus_baseline: Interval | None = None
    gated_minus_control: Interval | None = None

    @classmethod
    def of(cls, baseline: Sequence[float], gated: Sequence[float],
           control: Sequence[float] | None = None) -> SeedPaired:
        """From per-seed values in the same seed order (the third model optional)."""
        third = {} if control is None else {"control": Interval.of_mean(control),
                                            "gated_minus_control": Interval.paired(gated, control)}
        return cls(baseline=Interval.of_mean(baseline), gated=Interval.of_mean(gated),
                   gated_minus_baseline=Interval.paired(gated, baseline), **third)


@dataclass(frozen=True, kw_only=True)
class IdeaOverSeeds(Record):
    """Chapter 6's plain and gated GPT over training seeds: ``domains[metric][domain]`` (labels in :data:`LABELS`)
    holds per-seed means over the samples, paired by seed (``"all"``: the mean of the domains' means)."""

    seeds: list[int] | None = None
    gated_run: str | None = None
    val_ppl: SeedPaired | None = None
    domains: dict[str, dict[str, SeedPaired]] | None = None
    #: the sharpening control's temperature over seeds (the pairs' ``control``: the plain GPT at the gated entropy)
    sharpening_temperature: Interval | None = None

    LABELS: ClassVar[dict[str, str]] = {
        "book_stickiness": "stickiness, the book's domains (decides B-stickiness)",
        "stickiness": "stickiness, continuation only (ours)",
        "authors_stickiness": "stickiness, prompt + continuation (the authors' count)", "distinct_2": "distinct-2"}

    def table(self):
        """Per metric and domain: baseline, gated and gated - baseline, each mean [95% t-interval over seeds]."""
        rows = [(self.LABELS[m], d, v, 3) for m, by_domain in self.domains.items() for d, v in by_domain.items()]
        rows.append(("validation PPL", "-", self.val_ppl, 2))
        return pd.DataFrame([{
            "metric": metric, "domain": domain, "baseline": v.baseline.format(digits), "gated": v.gated.format(digits),
            "gated - baseline (paired by seed)": v.gated_minus_baseline.format(digits, signed=True),
            "gated - sharpened baseline": "-" if v.gated_minus_control is None else v.gated_minus_control.format(
                digits, signed=True)} for metric, domain, v, digits in rows]).set_index(["metric", "domain"])

    def numbers(self) -> IdeaOverSeedsNumbers:
        """Seeds, the four-domain stickiness and distinct-2 differences, the book domains' differences (plain and
        sharpened) and the sharpening temperature; "not measured" where there is none."""
        def signed(pair: SeedPaired | None, control: bool = False) -> str:
            value = None if pair is None else pair.gated_minus_control if control else pair.gated_minus_baseline
            return "not measured" if value is None else value.format(3, signed=True)

        overall = {m: by_domain["all"] for m, by_domain in self.domains.items()}
        book = overall.get("book_stickiness")
        return IdeaOverSeedsNumbers(
            n_seeds=len(self.seeds), seed_gated_run=self.gated_run, seed_stick_diff=signed(overall["stickiness"]),
            seed_authors_diff=signed(overall["authors_stickiness"]), seed_distinct_diff=signed(overall["distinct_2"]),
            seed_distinct_plain=overall["distinct_2"].baseline.mean,
            seed_stick_vs_sharpened=signed(overall["stickiness"], control=True),
            seed_book_diff=signed(book), seed_book_vs_sharpened=signed(book, control=True),
            seed_sharpening_temperature=self.sharpening_temperature.format(3)
            if self.sharpening_temperature is not None else "not measured")


@dataclass(frozen=True)
class IdeaOverSeedsNumbers:
    """What chapter 6's seed-comparison paragraph cites (:meth:`IdeaOverSeeds.numbers`)."""

    n_seeds: int
    seed_gated_run: str
    seed_stick_diff: str
    seed_authors_diff: str
    seed_distinct_diff: str
    seed_distinct_plain: float
    seed_stick_vs_sharpened: str
    seed_book_diff: str
    seed_book_vs_sharpened: str
    seed_sharpening_temperature: str


class NoOverSeeds:
    """Chapter 6 with no seed comparison to show: no table, and the same numbers saying so (0 seeds; a NaN plain
    distinct-2, which formats as "nan")."""

    def table(self) -> None:
        return None

    def numbers(self) -> IdeaOverSeedsNumbers:
        return IdeaOverSeedsNumbers(n_seeds=0, seed_gated_run="none", seed_distinct_plain=float("nan"), **dict.fromkeys(
            ("seed_stick_diff", "seed_authors_diff", "seed_distinct_diff", "seed_stick_vs_sharpened", "seed_book_diff",
             "seed_book_vs_sharpened", "seed_sharpening_temperature"), "not measured"))


@dataclass(frozen=True, kw_only=True)
class IdeaGatingRecord(ChapterRecord):
    chapter: ClassVar[str] = "06_idea_gating"
    dataset: str | None = None
    competence: Competence | None = None
    baseline: ValidationScore | None = None
    gated: ValidationScore | None = None
    authors_protocol: dict[str, AuthorsDomain] | None = None
    over_seeds: IdeaOverSeeds | None = None


# -- chapter 8: LoRA on a frozen 4-bit backbone --

@dataclass(frozen=True, kw_only=True)
class LoraCapacityControl(Record):
    """The LoRA baseline, LoRA + idea gate and the capacity control (an output adapter as large as the idea head)
    over training seeds in one quantisation, validation PPL paired by seed, and the models' competence."""

    seeds: list[int] | None = None
    quantization: str | None = None
    val_ppl: SeedPaired | None = None
    trainable_params: dict[str, dict[str, int]] | None = None
    competence: Competence | None = None

    def table(self):
        """Validation PPL per seed of the three models and the paired differences (mean [95% t-interval])."""
        p, signed = self.val_ppl, {"gated - baseline", "gated - control"}
        columns = {"baseline": p.baseline, "gated": p.gated, "control": p.control,
                   "gated - baseline": p.gated_minus_baseline, "gated - control": p.gated_minus_control}
        rows = {f"seed {s}": {c: f"{v.values[i]:{'+' if c in signed else ''}.2f}" for c, v in columns.items()}
                for i, s in enumerate(self.seeds)}
        rows["mean [95% interval]"] = {c: v.format(2, signed=c in signed) for c, v in columns.items()}
        return pd.DataFrame(rows).T

    def numbers(self) -> LoraCapacityControlNumbers:
        """What the capacity-control paragraph cites (``cc_*``)."""
        p, counts = self.val_ppl, self.trainable_params
        return LoraCapacityControlNumbers(
            cc_seeds=len(self.seeds), cc_vs_base=p.gated_minus_baseline.format(2, signed=True),
            cc_vs_control=p.gated_minus_control.format(2, signed=True),
            cc_control_vs_base=(p.control.mean - p.baseline.mean), cc_idea_params=counts["gated"]["idea_head"],
            cc_adapter_params=counts["control"]["output_adapter"], cc_bigram=self.competence.bigram_val_ppl,
            cc_worst_ratio=self.competence.worst_ratio)


@dataclass(frozen=True)
class LoraCapacityControlNumbers:
    """What chapter 8's capacity-control paragraph cites (:meth:`LoraCapacityControl.numbers`)."""

    cc_seeds: int
    cc_vs_base: str
    cc_vs_control: str
    cc_control_vs_base: float
    cc_idea_params: int
    cc_adapter_params: int
    cc_bigram: float
    cc_worst_ratio: float


@dataclass(frozen=True, kw_only=True)
class LoraRecord(ChapterRecord):
    chapter: ClassVar[str] = "08_lora_4bit_idea_gating"
    dataset: str | None = None
    backbone: str | None = None
    baseline: ValidationScore | None = None
    gated: ValidationScore | None = None
    capacity_control: LoraCapacityControl | None = None


# -- chapter 9: topic drift --

@dataclass(frozen=True, kw_only=True)
class TopicModelSummary(Record):
    """One model's (or the per-seed difference gated - plain's) metrics over seeds at one budget
    (:mod:`semlm.idea.topic_experiment`); ``drift_rate`` repeats ``switch_rate`` (the name older files use),
    ``ppl_change`` is the per-seed gated / plain - 1 (paired only)."""

    switch_rate: Interval | None = None
    excess_drift: Interval | None = None
    mix_rate: Interval | None = None
    drift_rate: Interval | None = None
    distinct_2: Interval | None = None
    stickiness: Interval | None = None
    val_ppl: Interval | None = None
    val_ppl_ungated: Interval | None = None
    ppl_change: Interval | None = None


@dataclass(frozen=True, kw_only=True)
class TopicData(Record):
    drift_rate: Interval | None = None  # the corpus' own switches per transition, as the labeller reads them
    switch_prob: float | None = None    # the generator's switch probability: the data's rate, exactly


@dataclass(frozen=True, kw_only=True)
class TopicBudget(Record):
    """Chapter 9 at one training budget (optimiser steps): both models over seeds and gated - plain."""

    steps: int | None = None
    plain: TopicModelSummary | None = None
    gated: TopicModelSummary | None = None
    paired: TopicModelSummary | None = None


@dataclass(frozen=True, kw_only=True)
class TopicDecision(Record):
    """What decides ``B-topic-drift`` (:func:`semlm.idea.topic_decision.decide`) over the comparable seeds: the
    excess drift of each arm (:data:`ARMS`), the paired differences, and the two models' mix rates."""

    seeds: list[int] | None = None
    not_comparable: list[int] | None = None
    data_rate: Interval | None = None
    matched_ppl: Interval | None = None
    gated: Interval | None = None
    plain_at_matched_ppl: Interval | None = None
    sharpened_plain: Interval | None = None
    gate_off: Interval | None = None
    gated_minus_plain: Interval | None = None
    gated_minus_sharpened: Interval | None = None
    mix_gated: Interval | None = None
    mix_plain: Interval | None = None
    temperature: Interval | None = None
    interpolation_error: dict[str, float] | None = None
    interval_method: dict[str, str] | None = None

    #: the rows chapter 9's table shows, by field, with their labels
    ARMS: ClassVar[dict[str, str]] = {
        "gated": "gated (largest budget, gate on)", "plain_at_matched_ppl": "plain at matched PPL",
        "sharpened_plain": "plain at matched PPL, sharpened to the gated entropy",
        "gate_off": "gated, gate off (alpha 0)", "gated_minus_plain": "gated - plain at matched PPL",
        "gated_minus_sharpened": "gated - sharpened plain"}

    def table(self):
        """Every arm's excess drift and the two paired differences, with 95% intervals, the per-seed values and
        how each interval was made."""
        methods = self.interval_method or {}
        return pd.DataFrame([{"arm": label, "excess drift / difference": getattr(self, name).format(3, True),
                              "per seed": ", ".join(f"{v:+.3f}" for v in getattr(self, name).values or ()),
                              "interval": methods.get(name, "")}
                             for name, label in self.ARMS.items() if getattr(self, name) is not None],
                            columns=["arm", "excess drift / difference", "per seed", "interval"]).set_index("arm")

    def numbers(self) -> TopicDecisionNumbers:
        """The numbers the verdict paragraph cites: the seed counts and each arm, difference, the matched PPL and
        the temperature as mean, low and high (NaN where there is none); chapter 9 shows them under a prefix."""
        none, names = Interval(float("nan"), float("nan"), float("nan")), (*self.ARMS, "matched_ppl", "temperature")
        return TopicDecisionNumbers(seeds=len(self.seeds or ()), not_comparable=len(self.not_comparable or ()), **{
            name + end: getattr(getattr(self, name) or none, part) for name in names
            for end, part in (("", "mean"), ("_low", "low"), ("_high", "high"))})


#: What chapter 9 cites of a :class:`TopicDecision` (``decision_<field>``, ``resampled_<field>``): the seed counts,
#: then each arm, difference, the matched PPL and the temperature as ``<name>``, ``<name>_low`` and ``<name>_high``.
TopicDecisionNumbers = make_dataclass("TopicDecisionNumbers", [("seeds", int), ("not_comparable", int)] + [
    (name + end, float) for name in (*TopicDecision.ARMS, "matched_ppl", "temperature")
    for end in ("", "_low", "_high")], frozen=True)


@dataclass(frozen=True, kw_only=True)
class TopicDriftRecord(ChapterRecord):
    """Chapter 9: the data's rate, the learning curve (``budgets``, ascending) and, as ``plain`` /
    ``gated`` / ``paired``, the largest budget again (what the diversity claim and older readers read)."""

    chapter: ClassVar[str] = "09_topic_drift"
    data: TopicData | None = None
    plain: TopicModelSummary | None = None
    gated: TopicModelSummary | None = None
    paired: TopicModelSummary | None = None  # gated - plain, per seed
    budgets: list[TopicBudget] | None = None
    decision: TopicDecision | None = None  # what B-topic-drift is judged on (matched PPL, the controls)
    resampled_decision: TopicDecision | None = None  # the same test with a new corpus per seed (secondary)
