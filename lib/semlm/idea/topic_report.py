"""What chapter 9 shows of the topic-drift runs: each section's result with ``.table()`` and ``.numbers()`` (the
numbers its prose cites by name), and the chapter's record (:class:`~semlm.idea.records.TopicDriftRecord`)."""

from __future__ import annotations

from dataclasses import dataclass, make_dataclass
from typing import ClassVar

import pandas as pd

from semlm.core.records import Interval
from semlm.idea.records import TopicBudget, TopicDecision, TopicDriftRecord
from semlm.core.runs import RunRecord
from semlm.idea.topic_experiment import BudgetResults, TopicData

KINDS = ("plain", "gated")
TABLE_METRICS = {"excess_drift": "excess drift (switch rate - data's rate)", "switch_rate": "switch rate",
                 "mix_rate": "mixed sentences (share of topical)", "stickiness": "stickiness to the prompt's topic",
                 "distinct_2": "distinct-2", "val_ppl": "validation PPL"}


def training_table(runs: dict[str, dict[int, RunRecord]]) -> pd.DataFrame:
    """Status, steps, seconds, checkpoints and final validation perplexity (gate on and off) of every run."""
    return pd.DataFrame([{"model": kind, "seed": s, "status": r.status, "steps": r.steps,
                          "checkpoints": len(r.history), "train seconds": round(r.train_seconds, 1),
                          "validation PPL": r.metrics.val_ppl, "validation PPL, gate off": r.metrics.val_ppl_ungated}
                         for kind, by_seed in runs.items() for s, r in sorted(by_seed.items())]
                        ).set_index(["model", "seed"])


def seed_table(details: list[dict]) -> pd.DataFrame:
    """Per seed: the gated model's PPL, the plain checkpoints that bracket it, the interpolation weight and the
    sharpening temperatures (a seed without a bracket says so)."""
    def bracket(d: dict) -> dict:
        if d["bracket"] is None:
            return {"plain checkpoints (steps)": "none bracket it: not comparable"}
        return {"plain checkpoints (steps)": f"{d['bracket'][0]} - {d['bracket'][1]}",
                "their PPL": " - ".join(f"{p:.3f}" for p in d["plain_ppl"]),
                "weight of the second": round(d["weight"], 3),
                "gated entropy (nats)": round(d["gated_entropy"], 3),
                "sharpening temperatures": " / ".join(f"{t:.3f}" for t in d["temperature"])}

    return pd.DataFrame([{"seed": d["seed"], "gated PPL": round(d["gated_ppl"], 3), **bracket(d)}
                         for d in details]).set_index("seed")


@dataclass(frozen=True)
class LearningCurve:
    """The secondary curve: both models at every budget, ascending (equal steps, so unequal perplexity)."""

    budgets: list[BudgetResults]

    @property
    def final(self) -> BudgetResults:
        """The largest budget (the gated models the decision, the alpha sweep and the examples use)."""
        return self.budgets[-1]

    def frame(self) -> pd.DataFrame:
        """One row per budget and model (and ``gated - plain``): excess drift, switch and mix rate, PPL, each as
        mean / low / high, for :func:`semlm.plots.plot_drift_learning_curve`."""
        rows = []
        for b in self.budgets:
            for kind, summary in (("plain", b.plain), ("gated", b.gated), ("gated - plain", b.paired)):
                row = {"steps": b.steps, "model": kind}
                for m in ("excess_drift", "switch_rate", "mix_rate", "val_ppl"):
                    v = getattr(summary, m)
                    row.update({m: v.mean, f"{m}_low": v.low, f"{m}_high": v.high})
                rows.append(row)
        return pd.DataFrame(rows)

    def table(self) -> pd.DataFrame:
        """Per budget: excess drift of both models, their per-seed difference and the per-seed PPL change."""
        return pd.DataFrame([{"budget (steps)": b.steps, "excess drift, plain": f"{b.plain.excess_drift:+.3f}",
                              "excess drift, gated": f"{b.gated.excess_drift:+.3f}",
                              "gated - plain": f"{b.paired.excess_drift:+.3f}",
                              "mix rate, plain": str(b.plain.mix_rate), "mix rate, gated": str(b.gated.mix_rate),
                              "PPL change gated / plain - 1": f"{b.paired.ppl_change:+.3f}"}
                             for b in self.budgets]).set_index("budget (steps)")

    def final_table(self) -> pd.DataFrame:
        """Each metric of both models over seeds at the largest budget, and the per-seed difference."""
        final = self.final
        table = pd.DataFrame({kind: {label: str(getattr(getattr(final, kind), m))
                                     for m, label in TABLE_METRICS.items()} for kind in KINDS})
        table["gated - plain (paired by seed)"] = [f"{getattr(final.paired, m):+.3f}" for m in TABLE_METRICS]
        return table

    def numbers(self) -> LearningCurveNumbers:
        """The budgets, both models' excess drift and the per-seed PPL change at the first and last, the last mix
        rates."""
        first, last = self.budgets[0], self.final
        return LearningCurveNumbers(
            budgets=", ".join(str(b.steps) for b in self.budgets), budget_first=first.steps, budget_last=last.steps,
            mix_plain_last=last.plain.mix_rate.mean, mix_gated_last=last.gated.mix_rate.mean,
            plain_first=first.plain.excess_drift.mean, gated_first=first.gated.excess_drift.mean,
            ppl_change_first=first.paired.ppl_change.mean, plain_last=last.plain.excess_drift.mean,
            gated_last=last.gated.excess_drift.mean, ppl_change_last=last.paired.ppl_change.mean)


@dataclass(frozen=True)
class LearningCurveNumbers:
    """What chapter 9's learning-curve paragraph cites (:meth:`LearningCurve.numbers`)."""

    budgets: str
    budget_first: int
    budget_last: int
    mix_plain_last: float
    mix_gated_last: float
    plain_first: float
    gated_first: float
    ppl_change_first: float
    plain_last: float
    gated_last: float
    ppl_change_last: float


@dataclass(frozen=True)
class AlphaSweep:
    """The gated models decoded at other gate strengths (``rows`` of :func:`alpha_sweep`)."""

    rows: list[dict]
    switch_prob: float
    plain_rate: Interval

    COLUMNS: ClassVar[list[str]] = ["alpha", "switch_rate", "switch_rate_low", "switch_rate_high", "excess_drift",
                                    "mix_rate", "ppl", "distinct_2", "stickiness"]

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)

    def table(self) -> pd.DataFrame:
        return self.frame()[self.COLUMNS]

    def numbers(self) -> AlphaSweepNumbers:
        """First and last point, the first alpha whose switch-rate interval lies below the data's rate
        (miscalibrated), and the gate-off drift against the plain model's."""
        first, last = self.rows[0], self.rows[-1]
        below = next((row["alpha"] for row in self.rows if row["switch_rate_high"] < self.switch_prob), None)
        off = next((row for row in self.rows if row["alpha"] == 0.0), None)
        if off is None:
            verdict = "no point at alpha = 0 was swept"
        elif off["switch_rate_low"] > self.plain_rate.high:
            verdict = ("more than the plain model, beyond its interval: trained behind the gate, the token head has "
                       "come to rely on it, so switching the gate off does not give back a plain model")
        else:
            verdict = "not more than the plain model beyond the intervals"
        return AlphaSweepNumbers(
            **{f"sweep_{name}_{end}": row[column] for name, column in SWEEP_ENDS.items()
               for end, row in (("first", first), ("last", last))},
            miscalibrated_from=(f"from alpha = {below:g} on, the switch-rate interval lies below the data's rate: "
                                "the gate makes the model stick to its topic more than the data do, which is a "
                                "miscalibration, not a better model" if below is not None else
                                "at no swept alpha does the switch-rate interval lie below the data's rate"),
            gate_off_switch=off["switch_rate"] if off else float("nan"), gate_off_verdict=verdict)


#: The columns of :class:`AlphaSweep`'s rows whose first and last values chapter 9 cites, by the name in their
#: glue keys.
SWEEP_ENDS = {"switch": "switch_rate", "ppl": "ppl", "alpha": "alpha"}
#: What chapter 9's alpha-sweep paragraph cites (:meth:`AlphaSweep.numbers`): ``sweep_<name>_first`` and
#: ``sweep_<name>_last`` of each of :data:`SWEEP_ENDS`, then the miscalibration and the gate-off drift.
AlphaSweepNumbers = make_dataclass("AlphaSweepNumbers", [
    (f"sweep_{name}_{end}", float) for name in SWEEP_ENDS for end in ("first", "last")] + [
    ("miscalibrated_from", str), ("gate_off_switch", float), ("gate_off_verdict", str)], frozen=True)


def topic_examples(curve: LearningCurve, seed: int, profile) -> pd.DataFrame:
    """The first continuation of the first prompt of each topic, from seed ``seed`` of each model (largest budget)."""
    every = profile.samples_per_prompt * profile.prompts_per_topic
    samples = {kind: curve.final.per_seed[kind][seed]["samples"] for kind in KINDS}
    return pd.DataFrame([{"topic": row["topic"], "prompt": row["prompt"].replace("<eos>", "").strip(),
                          **{kind: samples[kind][i]["text"] for kind in KINDS}}
                         for i, row in enumerate(samples["plain"]) if i % every == 0]).set_index("topic")


def topic_drift_record(*, profile, data: TopicData, data_rate: Interval, labelling_exact: bool, seeds,
                       curve: LearningCurve, sweep: AlphaSweep, runs: dict[str, dict[int, RunRecord]],
                       decision: TopicDecision, details: list[dict], resampled: TopicDecision | None = None
                       ) -> TopicDriftRecord:
    """Chapter 9's record: the data's rate, the deciding comparison (``resampled``: with a new corpus per seed),
    the secondary curve with its largest budget as ``plain`` / ``gated`` / ``paired``, and the settings."""
    world, final = data.world, curve.final
    return TopicDriftRecord(
        profile=profile.name,
        data={"drift_rate": data_rate, "switch_prob": profile.data.switch_prob, "labelling_exact": labelling_exact,
              "n_topics": world.n_topics, "vocab_size": len(world.vocabulary),
              "sentences_per_doc": profile.data.sentences_per_doc, "neutral_prob": profile.data.neutral_prob,
              "bridges_per_pair": profile.data.bridges_per_pair, "train_docs": profile.data.n_train_docs,
              "block_size": profile.size.block_size},
        plain=final.plain, gated=final.gated, paired=final.paired,
        budgets=[TopicBudget(steps=b.steps, plain=b.plain, gated=b.gated, paired=b.paired) for b in curve.budgets],
        decision=decision, resampled_decision=resampled,
        extra={"seeds": seeds, "decision_seeds": details, "alpha_sweep": sweep.rows, "train_alpha": profile.idea.alpha,
               "steps": {"gated": profile.gated_steps, "plain": profile.plain_steps,
                         "checkpoint_every": profile.train.eval_every},
               "generation": {"prompts": world.n_topics * profile.prompts_per_topic,
                              "samples_per_prompt": profile.samples_per_prompt,
                              "max_new_tokens": profile.max_new_tokens, "temperature": profile.temperature},
               "train_seconds": {kind: sum(r.train_seconds for r in by_seed.values())
                                 for kind, by_seed in runs.items()}})
