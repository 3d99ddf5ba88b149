"""Chapters 2 and 5: tables and records of trained baseline / fusion models, ``{setting: {model: RunRecord}}``
(``runs.nested(records, "group", "name")``); every table reads their typed ``metrics`` by attribute
(:class:`semlm.fusion.records.LanguageModelMetrics`, :class:`~semlm.fusion.records.SST2Metrics`)."""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from typing import Callable, Mapping

import pandas as pd
import torch

from semlm.core.causality import future_sensitivity
from semlm.core.metrics import FOCUS_TOKENS
from semlm.fusion.records import FusionTrainingRecord
from semlm.core.runs import RunRecord
from semlm.fusion.synthetic_experiment import SETTING_LABELS
from semlm.fusion.profiles import SyntheticProfile
from semlm.reference import PAPER_A_FOCUS_CE, PAPER_A_TABLE1

Trained = Mapping[str, Mapping[str, RunRecord]]

#: Table 1's columns: label -> metric
TABLE1_COLUMNS = {"PPL": "ppl", "PPL, authors' denominator": "ppl_authors_denominator",
                  "seen-only PPL": "ppl_seen_only",
                  "seen-only PPL, authors' denominator": "ppl_seen_only_authors_denominator",
                  "semantic MSE": "sem_mse"}


def _items(trained: Trained):
    return [(s, k, r) for s, by_kind in trained.items() for k, r in by_kind.items()]


#: Table 1's reference rows: which of the paper's values each column shows (the paper counts the authors' way)
TABLE1_PAPER = {"PPL, authors' denominator": "ppl", "seen-only PPL, authors' denominator": "ppl_seen_only",
                "semantic MSE": "sem_mse"}
#: The numbers chapter 2's prose cites per setting and model: glue suffix -> metric
TABLE1_CITED = {"ppl": "ppl", "seen": "ppl_seen_only", "ppl_authors": "ppl_authors_denominator"}


def model_numbers(name: str, cited) -> type:
    """A frozen dataclass of what :meth:`ModelTable.numbers` cites: ``{setting}_{model}_{suffix}`` per ``cited``
    suffix, then each setting's ``_ppl_change`` (fusion against baseline, %) and ``_sem_mse`` (fusion)."""
    fields = [f"{s}_{k}_{c}" for s in SETTING_LABELS for k in ("baseline", "fusion") for c in cited]
    fields += [f"{s}_{n}" for s in SETTING_LABELS for n in ("ppl_change", "sem_mse")]
    return make_dataclass(name, [(f, float) for f in fields], frozen=True)


Table1Numbers = model_numbers("Table1Numbers", TABLE1_CITED)


@dataclass(frozen=True)
class ModelTable:
    """Baseline and fusion per setting beside the paper's: Table 1 (chapter 2) or Table 7 (chapter 5).

    ``references`` maps a row label to the paper's values per model; ``columns`` a column label to a
    metric of the records; ``paper`` a column label to the key of the paper's values its reference rows
    show (the other columns stay blank there); ``cited`` a glue suffix to a metric and ``numbers_type`` the
    :func:`model_numbers` of those suffixes (:meth:`numbers`)."""

    trained: Trained
    references: Mapping[str, Mapping[str, dict]]
    columns: Mapping[str, str] = field(default_factory=lambda: TABLE1_COLUMNS)
    paper: Mapping[str, str] = field(default_factory=lambda: TABLE1_PAPER)
    cited: Mapping[str, str] = field(default_factory=lambda: TABLE1_CITED)
    numbers_type: type = Table1Numbers

    def table(self):
        rows = [{"setting": SETTING_LABELS[s], "model": k,
                 **{label: getattr(r.metrics, metric) for label, metric in self.columns.items()}}
                for s, k, r in _items(self.trained)]
        rows += [{"setting": source, "model": kind,
                  **{label: values.get(self.paper[label]) if label in self.paper else None for label in self.columns}}
                 for source, reference in self.references.items() for kind, values in reference.items()]
        return pd.DataFrame(rows).set_index(["setting", "model"])

    def numbers(self):
        """The numbers the prose cites (``causal_fusion_ppl``, ``published_ppl_change``...)."""
        out = {f"{s}_{k}_{name}": getattr(r.metrics, metric)
               for s, k, r in _items(self.trained) for name, metric in self.cited.items()}
        for setting, by_kind in self.trained.items():
            out[f"{setting}_ppl_change"] = 100 * (by_kind["fusion"].metrics.ppl / by_kind["baseline"].metrics.ppl - 1)
            out[f"{setting}_sem_mse"] = by_kind["fusion"].metrics.sem_mse
        return self.numbers_type(**out)


def runs_table(trained: Trained):
    """One row per run: whether it was trained or loaded, and how long it trained."""
    return pd.DataFrame([{"setting": s, "model": k, "status": r.status, "train seconds": round(r.train_seconds, 1)}
                         for s, k, r in _items(trained)])


def epoch_curves(trained: Trained) -> dict[tuple[str, str], list[float]]:
    """``{(setting, model): validation PPL per epoch}``, the input of ``plots.plot_validation_curves``."""
    return {(s, k): r.val_ppl_per_epoch for s, k, r in _items(trained)}


def paper_comparison_frame(paper: dict[str, dict], trained: Trained, metric: str = "ppl", paper_label: str = "paper"):
    """Long table of ``metric``: the paper's value per model beside this build's per (setting, model),
    the input of ``plots.plot_table1_comparison``."""
    return pd.DataFrame([{"source": paper_label, "model": k, "value": v[metric]} for k, v in paper.items()]
                        + [{"source": f"this build: {s}", "model": k, "value": getattr(r.metrics, metric)}
                           for s, k, r in _items(trained)])


def focus_frame(trained: Trained):
    """Long table of focus-token cross-entropy: setting, model, token, ce (``plots.plot_focus_ce``)."""
    return pd.DataFrame([{"setting": s, "model": k, "token": token, "ce": ce}
                         for s, k, r in _items(trained) for token, ce in r.metrics.focus_ce.items()])


def focus_table(trained: Trained):
    """Paper Table 6: CE per focus token (rows) and trained model (columns ``"setting model"``), beside the paper's."""
    focus = pd.DataFrame({f"{s} {k}": r.metrics.focus_ce for s, k, r in _items(trained)})
    return focus.reindex(list(FOCUS_TOKENS)).join(pd.DataFrame(PAPER_A_FOCUS_CE).add_prefix("paper "))


def leak_sensitivity(trained: Trained, featurizers: Mapping[str, Callable], probe: torch.Tensor, position: int,
                     replacement: int) -> pd.Series:
    """``future_sensitivity`` of every trained model (its setting's featurizer) by (setting, model): how much the
    logits before ``position`` move when the token there becomes ``replacement``; 0 for a language model."""
    return pd.Series({(s, k): future_sensitivity(r.load(), featurizers[s], probe, position, replacement)
                      for s, k, r in _items(trained)},
                     name="max |Δ logit| before the changed token").rename_axis(["setting", "model"])


def key_numbers(trained: Trained, sensitivity: pd.Series):
    """Chapter 2's headline numbers: perplexities and the leak, per setting and model."""
    return pd.DataFrame({(SETTING_LABELS[s], k): {"PPL": r.metrics.ppl, "seen-only PPL": r.metrics.ppl_seen_only,
                                                  "max |Δ logit| from the future": sensitivity[(s, k)]}
                         for s, k, r in _items(trained)}).T.round(4)


def by_setting(trained: Trained, sensitivity: pd.Series) -> dict[str, dict]:
    """What a chapter's metrics file keeps of each trained model: ``{setting: {label, model: summary}}``."""
    return {s: {"label": SETTING_LABELS[s],
                **{k: {**r.metrics.to_dict(), "val_ppl_per_epoch": r.val_ppl_per_epoch,
                       "train_seconds": r.train_seconds, "run_status": r.status,
                       "future_sensitivity": float(sensitivity[(s, k)])}
                   for k, r in by_kind.items()}}
            for s, by_kind in trained.items()}


def fusion_training_record(*, config: SyntheticProfile, trained: Trained,
                           sensitivity: pd.Series) -> FusionTrainingRecord:
    """Chapter 2's metrics file: every model's metrics, curve and leak, the paper's numbers, the profile."""
    numbers = by_setting(trained, sensitivity)
    numbers["paper"] = {"table1": PAPER_A_TABLE1, "focus_ce": PAPER_A_FOCUS_CE}
    set_per_run = ("vocab_size", "max_positions", "causal")  # the profile chooses the other dimensions
    backbone = {k: v for k, v in vars(config.backbone).items() if k not in set_per_run}
    numbers["config"] = {"corpus": vars(config.corpus), "backbone": backbone, "train": vars(config.train)}
    return FusionTrainingRecord(extra=numbers)
