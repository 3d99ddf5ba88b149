"""What chapter 9 shows of the topic-drift runs: tables, the numbers its prose cites and its record
(:class:`~semlm.core.records.TopicDriftRecord`)."""

from __future__ import annotations

import pandas as pd

from semlm.core.records import Interval, TopicDriftRecord
from semlm.core.runs import RunRecord
from semlm.idea.topic_experiment import TopicData, TopicDriftResults

KINDS = ("plain", "gated")
TABLE_METRICS = {"drift_rate": "drift rate", "stickiness": "stickiness to the prompt's topic",
                 "distinct_2": "distinct-2", "mixed_share": "mixed sentences (share)", "val_ppl": "validation PPL"}


def show(interval: Interval) -> str:
    """mean [95% interval]; "undefined" when a bound is not finite."""
    return interval.format(3)


def training_table(runs: dict[str, dict[int, RunRecord]]) -> pd.DataFrame:
    """Status, steps, seconds and validation perplexity (gate on and off) of every model and seed."""
    return pd.DataFrame([{"model": kind, "seed": s, "status": r.status, "steps": r.steps,
                          "train seconds": round(r.train_seconds, 1), "validation PPL": r.metrics.val_ppl,
                          "validation PPL, gate off": r.metrics.val_ppl_ungated}
                         for kind, by_seed in runs.items() for s, r in by_seed.items()])


def drift_table(results: TopicDriftResults) -> pd.DataFrame:
    """Each metric of the plain and gated model over seeds, and the per-seed difference."""
    table = pd.DataFrame({kind: {label: show(getattr(getattr(results, kind), m)) for m, label in TABLE_METRICS.items()}
                          for kind in KINDS})
    table["gated - plain (paired by seed)"] = [show(getattr(results.paired, m)) for m in TABLE_METRICS]
    return table


def drift_frame(results: TopicDriftResults, data_rate: Interval) -> pd.DataFrame:
    """The drift rates of the data and of both models (mean, ci_low, ci_high) for :func:`plots.plot_drift_rates`."""
    rows = [("data", data_rate)] + [(kind, getattr(results, kind).drift_rate) for kind in KINDS]
    return pd.DataFrame([{"model": name, "mean": v.mean, "ci_low": v.low, "ci_high": v.high} for name, v in rows])


def drift_numbers(results: TopicDriftResults) -> dict:
    """The drift paragraph's numbers: each drift interval, the verdict read from the intervals, perplexities."""
    plain, gated, paired = results.plain.drift_rate, results.gated.drift_rate, results.paired.drift_rate
    out = {}
    for name, value in (("plain", plain), ("gated", gated), ("paired", paired)):
        out.update({f"drift_{name}": value.mean, f"drift_{name}_low": value.low, f"drift_{name}_high": value.high})
    below = gated.high < plain.low or paired.high < 0
    above = gated.low > plain.high or paired.low > 0
    if below and not above:
        verdict = "the gated model drifts less than the plain one, beyond the intervals"
    elif above and not below:
        verdict = "the gated model drifts more than the plain one, beyond the intervals"
    else:
        verdict = "the intervals overlap, so this build shows no difference in drift between the two"
    return {**out, "drift_verdict": verdict, "gated_ppl": results.gated.val_ppl.mean,
            "gated_ppl_ungated": results.gated.val_ppl_ungated.mean, "plain_ppl": results.plain.val_ppl.mean}


SWEEP_COLUMNS = ["alpha", "drift_rate", "drift_rate_low", "drift_rate_high", "ppl", "distinct_2", "stickiness"]


def sweep_numbers(sweep: list[dict], plain_rate: Interval) -> dict:
    """The alpha-sweep paragraph's numbers: first and last point, and the drift with the gate off against
    the plain model's."""
    first, last = sweep[0], sweep[-1]
    off = next((row for row in sweep if row["alpha"] == 0.0), None)
    if off is None:
        verdict = "no point at alpha = 0 was swept"
    elif off["drift_rate_low"] > plain_rate.high:
        verdict = ("more than the plain model, beyond its interval: trained behind the gate, the token head has come "
                   "to rely on it, so switching the gate off does not give back a plain model")
    else:
        verdict = "not more than the plain model beyond the intervals"
    return {"sweep_drift_first": first["drift_rate"], "sweep_drift_last": last["drift_rate"],
            "sweep_ppl_first": first["ppl"], "sweep_ppl_last": last["ppl"], "sweep_alpha_first": first["alpha"],
            "sweep_alpha_last": last["alpha"], "gate_off_drift": off["drift_rate"] if off else float("nan"),
            "gate_off_verdict": verdict}


def topic_examples(results: TopicDriftResults, seed: int, profile) -> pd.DataFrame:
    """The first continuation of the first prompt of each topic, from seed ``seed`` of each model."""
    every = profile.samples_per_prompt * profile.prompts_per_topic
    samples = {kind: results.per_seed[kind][seed]["samples"] for kind in KINDS}
    return pd.DataFrame([{"topic": row["topic"], "prompt": row["prompt"].replace("<eos>", "").strip(),
                          **{kind: samples[kind][i]["text"] for kind in KINDS}}
                         for i, row in enumerate(samples["plain"]) if i % every == 0]).set_index("topic")


def topic_drift_record(profile, data: TopicData, data_rate: Interval, labelling_exact: bool, seeds, results:
                       TopicDriftResults, sweep: list[dict], runs: dict[str, dict[int, RunRecord]]) -> TopicDriftRecord:
    """Chapter 9's record: the data's drift, both models and the per-seed difference over seeds, and in
    ``extra`` the seeds, the alpha sweep, the generation settings and the training seconds."""
    world = data.world
    return TopicDriftRecord(
        data={"drift_rate": data_rate, "switch_prob": profile.data.switch_prob, "labelling_exact": labelling_exact,
              "n_topics": world.n_topics, "vocab_size": len(world.vocabulary),
              "sentences_per_doc": profile.data.sentences_per_doc, "train_docs": profile.data.n_train_docs},
        plain=results.plain, gated=results.gated, paired=results.paired,
        extra={"seeds": seeds, "alpha_sweep": sweep, "train_alpha": profile.idea.alpha,
               "generation": {"prompts": world.n_topics * profile.prompts_per_topic,
                              "samples_per_prompt": profile.samples_per_prompt,
                              "max_new_tokens": profile.max_new_tokens, "temperature": profile.temperature},
               "train_seconds": {kind: sum(r.train_seconds for r in by_seed.values())
                                 for kind, by_seed in runs.items()}})
