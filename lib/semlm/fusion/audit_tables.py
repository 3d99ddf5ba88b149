"""Chapter 4's tables, figures' inputs and record, from :class:`semlm.fusion.audit.AuditSummary`.

Every interval prints as ``mean [95% interval]`` over seeds (:meth:`semlm.core.records.Interval.format`).
"""

from __future__ import annotations

import math

from semlm.core.metrics import FOCUS_TOKENS
from semlm.core.records import Interval
from semlm.fusion.records import FeatureSteering, LeakageAuditRecord
from semlm.fusion.audit import AuditSummary
from semlm.fusion.request import PAPER_REQUESTS
from semlm.fusion.synthetic_experiment import SETTING_LABELS, SETTINGS
from semlm.reference import PAPER_A_FOCUS_CE, PAPER_A_HARD_CONTROL, PAPER_A_OOD_HIT, PAPER_A_TABLE1

#: which of the paper's Table-1 columns each of our metrics compares with (the paper counts the authors' way)
PAPER_COUNTS_AS = {"ppl_authors_denominator": "ppl", "ppl_seen_only_authors_denominator": "ppl_seen_only",
                   "sem_mse": "sem_mse"}
FLOOR_LABELS = {"PPL": "ppl", "seen-only PPL": "ppl_seen_only",
                "PPL, authors' denominator": "ppl_authors_denominator",
                "seen-only PPL, authors' denominator": "ppl_seen_only_authors_denominator"}


def _pair(a: Interval, b: Interval, digits: int = 2) -> str:
    return f"{a.format(digits)} / {b.format(digits)}"


def floors_frame(floors: dict):
    """The causal floors beside the paper's Table 1 (which counts the authors' way)."""
    import pandas as pd

    paper = {f"paper, {kind}": {"PPL": None, "seen-only PPL": None,
                                "PPL, authors' denominator": PAPER_A_TABLE1[kind]["ppl"],
                                "seen-only PPL, authors' denominator": PAPER_A_TABLE1[kind]["ppl_seen_only"]}
             for kind in ("baseline", "fusion")}
    return pd.DataFrame({"causal floor": {label: floors[k] for label, k in FLOOR_LABELS.items()}, **paper}).round(3)


def table1_frame(summary: AuditSummary):
    """Table 1 over seeds: one row per setting, model and metric, with the paper and the floor."""
    import pandas as pd

    rows = []
    for s in SETTINGS:
        for m in ("baseline", "fusion"):
            scores = getattr(summary.table1[s], m)
            for k in ("ppl", "ppl_seen_only", "ppl_authors_denominator", "ppl_seen_only_authors_denominator",
                      "sem_mse"):
                if getattr(scores, k) is None:
                    continue
                rows.append({"setting": SETTING_LABELS[s], "model": m, "metric": k,
                             "mean [95% CI]": getattr(scores, k).format(4 if k == "sem_mse" else 3),
                             "paper": PAPER_A_TABLE1[m].get(PAPER_COUNTS_AS.get(k, "")),
                             "causal floor": summary.floors.get(k)})
    return pd.DataFrame(rows).set_index(["setting", "model", "metric"])


def seed_points(summaries: dict[str, object], seeds, metrics=("ppl", "ppl_seen_only")):
    """Input of ``plots.plot_seed_intervals``: one row per (row label, metric, seed) with its summary;
    ``summaries`` maps a row label to something holding an :class:`Interval` per metric."""
    import pandas as pd

    def get(source, k):
        return source[k] if isinstance(source, dict) else getattr(source, k)

    return pd.DataFrame([
        {"metric": k, "row": row, "seed": seed, "value": value,
         "mean": get(source, k).mean, "ci_low": get(source, k).low, "ci_high": get(source, k).high}
        for row, source in summaries.items() for k in metrics
        for seed, value in zip(seeds, get(source, k).values)])


def table1_points(summary: AuditSummary):
    """Table 1's perplexities per seed and over seeds, per setting and model."""
    rows = {f"{s} / {m}": getattr(summary.table1[s], m) for s in SETTINGS for m in ("baseline", "fusion")}
    return seed_points(rows, summary.seeds)


def gain_verdict(gain: Interval) -> str:
    if len(gain.values) < 2 or gain.low <= 0 <= gain.high:
        return "no difference detected (the interval contains 0)"
    return "fusion lower" if gain.low > 0 else "fusion higher"


def gain_frame(summary: AuditSummary):
    """Per setting: baseline - fusion seen-only PPL per seed, over seeds, and the verdict."""
    import pandas as pd

    return pd.DataFrame([{"setting": SETTING_LABELS[s],
                          **{f"seed {k}": round(v, 4) for k, v in zip(summary.seeds, summary.gain[s].values)},
                          "mean [95% CI]": summary.gain[s].format(), "verdict": gain_verdict(summary.gain[s])}
                         for s in SETTINGS]).set_index("setting")


def focus_frame(summary: AuditSummary):
    """Paper Table 6 over seeds: mean CE per focus token and model, the training oracle's (a reference, not a
    floor: one token's CE can go below it) and the paper's."""
    import pandas as pd

    rows = []
    for token in FOCUS_TOKENS:
        row = {"token": token, "training oracle": summary.floors["focus_ce"][token]}
        for s in SETTINGS:
            for m in ("baseline", "fusion"):
                row[f"{s} {m}"] = Interval.of_mean(summary.focus_seeds[token][f"{s} {m}"]).mean
        row["paper fusion"] = PAPER_A_FOCUS_CE["fusion"][token]
        rows.append(row)
    return pd.DataFrame(rows).set_index("token")


def below_floor(focus, floors: dict, setting: str, margin: float = 0.05) -> list[str]:
    """Focus tokens whose fusion CE in ``setting`` lies more than ``margin`` below the training oracle's."""
    return [t for t in FOCUS_TOKENS if math.isfinite(floors["focus_ce"][t])  # held out: the oracle never says it
            and focus.loc[t, f"{setting} fusion"] < floors["focus_ce"][t] - margin]


def control_table(summary: AuditSummary):
    """Tables 2-4 over seeds: hard and soft control and OOD hits of the fusion model, with the paper's."""
    import pandas as pd

    rows = []
    for s in SETTINGS:
        for cls in PAPER_REQUESTS:
            hard, soft = summary.control[s].hard[cls], summary.control[s].soft[cls]
            rows.append({"setting": SETTING_LABELS[s], "request": cls,
                         "hard adj / punct": _pair(hard.adj_acc, hard.punct_acc),
                         "soft adj / punct": _pair(soft.adj_acc, soft.punct_acc),
                         "OOD hit": summary.ood_hit[s][cls].format(2), "paper OOD": PAPER_A_OOD_HIT[cls],
                         "paper hard": f"{PAPER_A_HARD_CONTROL[cls]['adj_acc']:.2f} / "
                                       f"{PAPER_A_HARD_CONTROL[cls]['punct_acc']:.2f}"})
    return pd.DataFrame(rows).set_index(["setting", "request"])


def ablation_table(summary: AuditSummary):
    """The causal ablations over seeds: perplexities, semantic MSE, OOD hits and soft adjective accuracy."""
    import pandas as pd

    rows = []
    for v, e in summary.ablations.items():
        rows.append({"model": v, "PPL": e["ppl"].format(), "seen-only PPL": e["ppl_seen_only"].format(),
                     "sem MSE": e["sem_mse"].format(4) if "sem_mse" in e else "",
                     "OOD hit pos / neg": _pair(e["ood_hit"]["pos"], e["ood_hit"]["neg"]) if "ood_hit" in e else "",
                     "soft adj acc pos / neg": (_pair(e["soft_adj_acc"]["pos"], e["soft_adj_acc"]["neg"])
                                                if "soft_adj_acc" in e else "")})
    return pd.DataFrame(rows).set_index("model")


def code_table(summary: AuditSummary):
    """The control-code baseline beside the causal fusion model."""
    import pandas as pd

    fusion = summary.table1["causal"].fusion
    modes = summary.control["causal"]
    fusion_source = {"ppl": fusion.ppl, "ppl_seen_only": fusion.ppl_seen_only,
                     "soft": {c: {"adj_acc": a.adj_acc, "punct_acc": a.punct_acc} for c, a in modes.soft.items()},
                     "ood_hit": summary.ood_hit["causal"]}
    rows = []
    for name, source in (("control codes (causal)", summary.control_code), ("fusion (causal)", fusion_source)):
        rows.append({"model": name, "PPL": source["ppl"].format(), "seen-only PPL": source["ppl_seen_only"].format(),
                     **{f"soft {cls} adj / punct": _pair(source["soft"][cls]["adj_acc"],
                                                         source["soft"][cls]["punct_acc"]) for cls in PAPER_REQUESTS},
                     **{f"OOD hit {cls}": source["ood_hit"][cls].format(2) for cls in PAPER_REQUESTS}})
    return pd.DataFrame(rows).set_index("model")


def code_verdicts(summary: AuditSummary) -> dict[str, str]:
    """The chapter's two sentences on the control-code baseline: how strong the codes are at this
    profile, and whether the feature channel changes the out-of-distribution hits."""
    code = summary.control_code
    worst = min(code["soft"][c][k].mean for c in PAPER_REQUESTS for k in ("adj_acc", "punct_acc"))
    same_ood = abs(code["ood_hit"]["pos"].mean - summary.ood_hit["causal"]["pos"].mean) < 0.05
    return {
        "code_verdict": ("the codes are a strong, cheap control that needs no feature bank" if worst >= 0.9
                         else "at this profile the codes are a weak control"),
        "ood_verdict": ("which says that the mixture sampler, not the feature channel, "
                        "does the out-of-distribution work" if same_ood
                        else "so the feature channel changes how often the mixture reaches unseen words"),
    }


def feature_steering_frame(steering: FeatureSteering):
    """A-feature-steering's numbers per training seed (the causal fusion model, features only): the share judged
    positive under each request, the requested and opposite-request accuracies and their difference, and a last
    row with each column's mean [95% interval] over seeds."""
    import pandas as pd

    columns = {"positive request: judged positive": steering.judged_positive["pos"],
               "negative request: judged positive": steering.judged_positive["neg"],
               "requested accuracy": steering.requested, "opposite-request accuracy": steering.opposite,
               "requested - opposite": steering.paired}
    frame = pd.DataFrame({name: interval.values for name, interval in columns.items()},
                         index=pd.Index(steering.seeds, name="seed")).round(3).astype(object)
    frame.loc["mean [95% CI]"] = [interval.format(3, signed=name == "requested - opposite")
                                  for name, interval in columns.items()]
    return frame


def key_numbers(summary: AuditSummary):
    """The chapter's headline numbers in one column."""
    import pandas as pd

    floors, table1, ood = summary.floors, summary.table1, summary.ood_hit["causal"]
    return pd.DataFrame({
        "causal floor PPL / seen-only": f"{floors['ppl']:.3f} / {floors['ppl_seen_only']:.3f}",
        "published fusion seen-only PPL": table1["published"].fusion.ppl_seen_only.format(),
        "causal fusion seen-only PPL": table1["causal"].fusion.ppl_seen_only.format(),
        "causal baseline seen-only PPL": table1["causal"].baseline.ppl_seen_only.format(),
        "causal fusion OOD hit pos / neg": _pair(ood["pos"], ood["neg"]),
        "seeds": ", ".join(map(str, summary.seeds)),
    }, index=["value"]).T


def leakage_audit_record(summary: AuditSummary, n_per_request: int,
                         feature_steering: FeatureSteering | None = None) -> LeakageAuditRecord:
    """Chapter 4's metrics file: the fields the claims read, the rest in ``extra``."""
    return LeakageAuditRecord(
        table1=summary.table1, floors=summary.floors, control=summary.control, ood_hit=summary.ood_hit,
        confusion_diagonal=summary.confusion_diagonal, focus_ce_seeds=summary.focus_seeds,
        feature_steering=feature_steering,
        extra={"seeds": summary.seeds, "n_per_request": n_per_request,
               "focus_ce": focus_frame(summary).to_dict(orient="index"),
               "paired_gain_seen_only": summary.gain, "ablations": summary.ablations,
               "control_code_baseline": summary.control_code})
