"""What chapter 9 shows of the topic-drift runs: tables, the numbers its prose cites, the verdict of
:mod:`semlm.book.claims` and its record (:class:`~semlm.core.records.TopicDriftRecord`)."""

from __future__ import annotations

import pandas as pd

from semlm.core.records import Interval
from semlm.idea.records import TopicBudget, TopicDecision, TopicDriftRecord
from semlm.core.runs import RunRecord
from semlm.idea.topic_experiment import CHAPTER, BudgetResults, TopicData, TopicDriftResults

KINDS = ("plain", "gated")
TABLE_METRICS = {"excess_drift": "excess drift (switch rate - data's rate)", "switch_rate": "switch rate",
                 "mix_rate": "mixed sentences (share of topical)", "stickiness": "stickiness to the prompt's topic",
                 "distinct_2": "distinct-2", "val_ppl": "validation PPL"}


def show(interval: Interval, signed: bool = False) -> str:
    """mean [95% interval]; "undefined" when a bound is not finite."""
    return interval.format(3, signed)


def training_table(runs: dict[str, dict[int, RunRecord]]) -> pd.DataFrame:
    """Status, steps, seconds, checkpoints and final validation perplexity (gate on and off) of every run."""
    return pd.DataFrame([{"model": kind, "seed": s, "status": r.status, "steps": r.steps,
                          "checkpoints": len(r.history), "train seconds": round(r.train_seconds, 1),
                          "validation PPL": r.metrics.val_ppl, "validation PPL, gate off": r.metrics.val_ppl_ungated}
                         for kind, by_seed in runs.items() for s, r in sorted(by_seed.items())]
                        ).set_index(["model", "seed"])


def validation_curves(runs: dict[str, dict[int, RunRecord]]) -> pd.DataFrame:
    """Every checkpoint's validation PPL: model, seed, steps, val_ppl (for the matched-PPL figure)."""
    return pd.DataFrame([{"model": kind, "seed": s, "steps": row["step"], "val_ppl": row["val_ppl"]}
                         for kind, by_seed in runs.items() for s, r in by_seed.items() for row in r.history])


DECISION_ARMS = {"gated": "gated (largest budget, gate on)", "plain_at_matched_ppl": "plain at matched PPL",
                 "sharpened_plain": "plain at matched PPL, sharpened to the gated entropy",
                 "gate_off": "gated, gate off (alpha 0)", "gated_minus_plain": "gated - plain at matched PPL",
                 "gated_minus_sharpened": "gated - sharpened plain"}


def decision_table(decision: TopicDecision) -> pd.DataFrame:
    """The deciding comparison: every arm's excess drift and the two paired differences, with 95% intervals,
    the per-seed values and how each interval was made."""
    methods = decision.interval_method or {}
    return pd.DataFrame([{"arm": label, "excess drift / difference": show(getattr(decision, name), True),
                          "per seed": ", ".join(f"{v:+.3f}" for v in getattr(decision, name).values or ()),
                          "interval": methods.get(name, "")}
                         for name, label in DECISION_ARMS.items() if getattr(decision, name) is not None]
                        ).set_index("arm")


def seed_table(details: list[dict]) -> pd.DataFrame:
    """Per seed: the gated model's PPL, the plain checkpoints that bracket it, the interpolation weight and the
    sharpening temperatures (a seed without a bracket says so)."""
    rows = []
    for d in details:
        row = {"seed": d["seed"], "gated PPL": round(d["gated_ppl"], 3)}
        if d["bracket"] is None:
            row["plain checkpoints (steps)"] = "none bracket it: not comparable"
        else:
            row.update({"plain checkpoints (steps)": f"{d['bracket'][0]} - {d['bracket'][1]}",
                        "their PPL": " - ".join(f"{p:.3f}" for p in d["plain_ppl"]),
                        "weight of the second": round(d["weight"], 3),
                        "gated entropy (nats)": round(d["gated_entropy"], 3),
                        "sharpening temperatures": " / ".join(f"{t:.3f}" for t in d["temperature"])})
        rows.append(row)
    return pd.DataFrame(rows).set_index("seed")


def decision_numbers(decision: TopicDecision, prefix: str = "decision") -> dict:
    """The numbers the verdict paragraph cites: each arm and difference (mean, low, high), the matched PPL,
    the temperature, the seed counts."""
    out = {f"{prefix}_seeds": len(decision.seeds or ()), f"{prefix}_not_comparable": len(decision.not_comparable or ())}
    for name in (*DECISION_ARMS, "matched_ppl", "temperature"):
        value = getattr(decision, name)
        if value is not None:
            out.update({f"{prefix}_{name}": value.mean, f"{prefix}_{name}_low": value.low,
                        f"{prefix}_{name}_high": value.high})
    return out


def drift_table(budget: BudgetResults) -> pd.DataFrame:
    """Each metric of the plain and gated model over seeds at one budget, and the per-seed difference."""
    table = pd.DataFrame({kind: {label: show(getattr(getattr(budget, kind), m)) for m, label in TABLE_METRICS.items()}
                          for kind in KINDS})
    table["gated - plain (paired by seed)"] = [show(getattr(budget.paired, m), True) for m in TABLE_METRICS]
    return table


def learning_curve(results: TopicDriftResults) -> pd.DataFrame:
    """One row per budget and model (and ``gated - plain``): excess drift, switch and mix rate, PPL, each as
    mean / low / high, for :func:`semlm.plots.plot_drift_learning_curve`."""
    rows = []
    for b in results.budgets:
        for kind in (*KINDS, "gated - plain"):
            summary = b.paired if kind == "gated - plain" else getattr(b, kind)
            row = {"steps": b.steps, "model": kind}
            for m in ("excess_drift", "switch_rate", "mix_rate", "val_ppl"):
                v = getattr(summary, m)
                row.update({m: v.mean, f"{m}_low": v.low, f"{m}_high": v.high})
            rows.append(row)
    return pd.DataFrame(rows)


def curve_table(results: TopicDriftResults) -> pd.DataFrame:
    """The learning curve as text: per budget, excess drift of both models, their per-seed difference and
    the per-seed relative PPL change."""
    return pd.DataFrame([{"budget (steps)": b.steps, "excess drift, plain": show(b.plain.excess_drift, True),
                          "excess drift, gated": show(b.gated.excess_drift, True),
                          "gated - plain": show(b.paired.excess_drift, True),
                          "mix rate, plain": show(b.plain.mix_rate), "mix rate, gated": show(b.gated.mix_rate),
                          "PPL change gated / plain - 1": show(b.paired.ppl_change, True)}
                         for b in results.budgets]).set_index("budget (steps)")


def claim_rows(record: TopicDriftRecord) -> pd.DataFrame:
    """The chapter's claims as :func:`semlm.book.claims.evaluate_claims` judges this record: status, reason
    and rule (the rule lives there only)."""
    from semlm.book.claims import evaluate_claims

    rows = [r for r in evaluate_claims({CHAPTER: record}) if r["id"].startswith("B-topic")]
    return pd.DataFrame(rows)[["id", "status", "reason", "rule"]].set_index("id")


def verdict_numbers(record: TopicDriftRecord) -> dict:
    """The status of each topic claim, to be glued into the prose (``B-topic-drift`` -> ``topic_drift_status``)."""
    rows = claim_rows(record)
    return {f"{claim_id.removeprefix('B-').replace('-', '_')}_status": row["status"]
            for claim_id, row in rows.iterrows()}


def drift_numbers(results: TopicDriftResults) -> dict:
    """The numbers the learning-curve paragraph cites: first and last budget, both models' excess drift, their
    per-seed difference and PPL change (mean, low, high)."""
    out = {"budget_first": results.budgets[0].steps, "budget_last": results.final.steps}
    for which, b in (("first", results.budgets[0]), ("last", results.final)):
        for name, v in (("plain", b.plain.excess_drift), ("gated", b.gated.excess_drift),
                        ("paired", b.paired.excess_drift), ("ppl_change", b.paired.ppl_change),
                        ("mix_plain", b.plain.mix_rate), ("mix_gated", b.gated.mix_rate)):
            out.update({f"{name}_{which}": v.mean, f"{name}_{which}_low": v.low, f"{name}_{which}_high": v.high})
    return out


SWEEP_COLUMNS = ["alpha", "switch_rate", "switch_rate_low", "switch_rate_high", "excess_drift", "mix_rate", "ppl",
                 "distinct_2", "stickiness"]


def sweep_numbers(sweep: list[dict], switch_prob: float, plain_rate: Interval) -> dict:
    """The alpha-sweep paragraph's numbers: first and last point, the first alpha whose switch-rate interval
    lies below the data's rate (miscalibrated), and the gate-off drift against the plain model's."""
    first, last = sweep[0], sweep[-1]
    below = next((row["alpha"] for row in sweep if row["switch_rate_high"] < switch_prob), None)
    off = next((row for row in sweep if row["alpha"] == 0.0), None)
    if off is None:
        verdict = "no point at alpha = 0 was swept"
    elif off["switch_rate_low"] > plain_rate.high:
        verdict = ("more than the plain model, beyond its interval: trained behind the gate, the token head has come "
                   "to rely on it, so switching the gate off does not give back a plain model")
    else:
        verdict = "not more than the plain model beyond the intervals"
    return {"sweep_switch_first": first["switch_rate"], "sweep_switch_last": last["switch_rate"],
            "sweep_ppl_first": first["ppl"], "sweep_ppl_last": last["ppl"], "sweep_alpha_first": first["alpha"],
            "sweep_alpha_last": last["alpha"],
            "miscalibrated_from": (f"from alpha = {below:g} on, the switch-rate interval lies below the data's rate: "
                                   "the gate makes the model stick to its topic more than the data do, which is a "
                                   "miscalibration, not a better model" if below is not None else
                                   "at no swept alpha does the switch-rate interval lie below the data's rate"),
            "gate_off_switch": off["switch_rate"] if off else float("nan"), "gate_off_verdict": verdict}


def topic_examples(results: TopicDriftResults, seed: int, profile) -> pd.DataFrame:
    """The first continuation of the first prompt of each topic, from seed ``seed`` of each model (largest budget)."""
    every = profile.samples_per_prompt * profile.prompts_per_topic
    samples = {kind: results.final.per_seed[kind][seed]["samples"] for kind in KINDS}
    return pd.DataFrame([{"topic": row["topic"], "prompt": row["prompt"].replace("<eos>", "").strip(),
                          **{kind: samples[kind][i]["text"] for kind in KINDS}}
                         for i, row in enumerate(samples["plain"]) if i % every == 0]).set_index("topic")


def topic_drift_record(profile, data: TopicData, data_rate: Interval, labelling_exact: bool, seeds,
                       results: TopicDriftResults, sweep: list[dict], runs: dict[str, dict[int, RunRecord]],
                       decision: TopicDecision, details: list[dict], resampled: TopicDecision | None = None
                       ) -> TopicDriftRecord:
    """Chapter 9's record: the data's rate, the deciding comparison (``decision``; ``resampled`` with a new
    corpus per seed), the secondary curve (``budgets``), the largest budget again as ``plain`` / ``gated`` /
    ``paired``, and in ``extra`` the seeds, the per-seed brackets, the alpha sweep, the generation settings and
    the training seconds."""
    world, final = data.world, results.final
    return TopicDriftRecord(
        profile=profile.name,
        data={"drift_rate": data_rate, "switch_prob": profile.data.switch_prob, "labelling_exact": labelling_exact,
              "n_topics": world.n_topics, "vocab_size": len(world.vocabulary),
              "sentences_per_doc": profile.data.sentences_per_doc, "neutral_prob": profile.data.neutral_prob,
              "bridges_per_pair": profile.data.bridges_per_pair, "train_docs": profile.data.n_train_docs,
              "block_size": profile.size.block_size},
        plain=final.plain, gated=final.gated, paired=final.paired,
        budgets=[TopicBudget(steps=b.steps, plain=b.plain, gated=b.gated, paired=b.paired) for b in results.budgets],
        decision=decision, resampled_decision=resampled,
        extra={"seeds": seeds, "decision_seeds": details, "alpha_sweep": sweep, "train_alpha": profile.idea.alpha,
               "steps": {"gated": profile.gated_steps, "plain": profile.plain_steps,
                         "checkpoint_every": profile.train.eval_every},
               "generation": {"prompts": world.n_topics * profile.prompts_per_topic,
                              "samples_per_prompt": profile.samples_per_prompt,
                              "max_new_tokens": profile.max_new_tokens, "temperature": profile.temperature},
               "train_seconds": {kind: sum(r.train_seconds for r in by_seed.values())
                                 for kind, by_seed in runs.items()}})
