"""Chapter 3: controllable decoding of the trained synthetic-task models, measured.

A :class:`Decoder` holds the trained models of both settings and decodes N sentences of one model
under one request; the functions below are the chapter's experiments (hard and soft control,
the soft-control curve, out-of-distribution hits and the alpha sweep, the nucleus rule and the
control path side by side), each returning typed rates (:class:`semlm.core.records.Interval`,
Wilson intervals) or the frame its figure draws.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, make_dataclass, replace
from typing import Mapping, Sequence

import pandas as pd

from semlm.fusion.metrics import POLARITY_LABELS, held_out_hit_rate, rate, request_accuracy
from semlm.core.records import Interval
from semlm.fusion.records import ControlAccuracy, DecodingRecord
from semlm.core.runs import RunRecord
from semlm.data.vocab import detokenize
from semlm.fusion.decoding import (
    BASELINE_FAIR, FUSION_DEFAULT, PAPER_MIXTURE, ClauseGrammar, DecodingConfig, generate,
    published_decoding,
)
from semlm.fusion.synthetic_experiment import SETTING_LABELS, SETTINGS, SyntheticData, prepare_data
from semlm.fusion.profiles import SyntheticProfile
from semlm.fusion.request import PAPER_REQUESTS, Request
from semlm.reference import PAPER_A_HARD_CONTROL, PAPER_A_OOD_HIT

HARD = {cls: DecodingConfig(hard=True, mixture=PAPER_MIXTURE[r.polarity]) for cls, r in PAPER_REQUESTS.items()}
#: the generations shown: label -> (model, request, decoding)
SHOWN = {
    "baseline (fair)": ("baseline", Request(), BASELINE_FAIR),
    "fusion (no control)": ("fusion", Request(), FUSION_DEFAULT),
    "fusion (positive & strong, hard)": ("fusion", PAPER_REQUESTS["pos"], HARD["pos"]),
    "fusion (negative & question, hard)": ("fusion", PAPER_REQUESTS["neg"], HARD["neg"]),
}
#: the three ways a request can reach the model: label -> (features, logit steering)
CONTROL_PATHS = {"logits + features (ours)": (True, True), "logits only (authors')": (False, True),
                 "features only": (True, False)}


@dataclass
class Decoder:
    """The trained models of both settings, ready to decode: ``decode(setting, kind, n, request)``."""

    models: dict[tuple[str, str], object]
    data: dict[str, SyntheticData]
    grammar: ClauseGrammar
    seed: int

    @classmethod
    def of(cls, trained: Mapping[str, Mapping[str, RunRecord]], config: SyntheticProfile, seed: int) -> Decoder:
        data = {setting: prepare_data(config.corpus, setting) for setting in SETTINGS}
        models = {(s, k): r.load() for s, by_kind in trained.items() for k, r in by_kind.items()}
        return cls(models, data, ClauseGrammar(data["causal"].vocab), seed)

    @property
    def held_out(self) -> dict[str, tuple[str, ...]]:
        split = self.data["causal"].corpus.split
        return {"pos": split.positive_held_out, "neg": split.negative_held_out}

    def __call__(self, setting: str, kind: str, n: int, request: Request = Request(), prompt=None,
                 decoding=FUSION_DEFAULT, seed_offset: int = 0, authors_rules: bool | None = None) -> list[list[str]]:
        """``n`` sentences; ``authors_rules`` (default: in the published setting) decodes with
        ``published_decoding``."""
        if setting == "published" if authors_rules is None else authors_rules:
            decoding = published_decoding(decoding)
        return generate(self.models[(setting, kind)], self.data[setting].featurizer, self.grammar, n,
                        request, prompt=prompt, config=decoding, seed=self.seed + seed_offset)


def accuracy(sentences, request: str) -> ControlAccuracy:
    """Adjective and punctuation accuracy of ``sentences`` for ``request`` ("pos"/"neg"), Wilson intervals."""
    return ControlAccuracy.from_dict(request_accuracy(sentences, PAPER_REQUESTS[request]))


def held_out_hits(sentences, held_out) -> Interval:
    return Interval.from_dict(held_out_hit_rate(sentences, held_out))


def examples(decode: Decoder, prompts: Sequence[str | None] = (None, "Carol starts the model,")) -> list[dict]:
    """Three causal generations per :data:`SHOWN` setting and prompt."""
    rows = []
    for prompt in prompts:
        for offset, (label, (kind, request, decoding)) in enumerate(SHOWN.items()):
            # a seed per setting: with one seed, similar models draw the same random numbers
            for sentence in decode("causal", kind, 3, request, prompt, decoding, seed_offset=11 + offset):
                rows.append({"prompt": prompt or "(none)", "setting": label, "generation": detokenize(sentence)})
    return rows


def grammar_no_ops(decode: Decoder, n: int) -> bool:
    """Whether top-k and the last-3 repetition penalty change nothing under the clause grammar."""
    return all(decode(s, kind, n, decoding=d, seed_offset=7)
               == decode(s, kind, n, decoding=replace(d, top_k=0, repetition_penalty=1.0), seed_offset=7)
               for s in SETTINGS for kind, d in (("baseline", BASELINE_FAIR), ("fusion", FUSION_DEFAULT)))


def hard_control(decode: Decoder, n: int) -> dict[tuple[str, str], list[list[str]]]:
    """Hard-controlled generations of the fusion model per (setting, request) (paper Tables 2-3)."""
    return {(s, cls): decode(s, "fusion", n, request, decoding=HARD[cls])
            for s in SETTINGS for cls, request in PAPER_REQUESTS.items()}


def hard_table(scores: Mapping[tuple[str, str], ControlAccuracy]):
    return pd.DataFrame([{"setting": SETTING_LABELS[s], "request": cls, "adjective accuracy": rate(v.adj_acc),
                          "punctuation accuracy": rate(v.punct_acc),
                          "paper": f"{PAPER_A_HARD_CONTROL[cls]['adj_acc']:.2f} / "
                                   f"{PAPER_A_HARD_CONTROL[cls]['punct_acc']:.2f}"}
                         for (s, cls), v in scores.items()])


def soft_curve(decode: Decoder, n: int, strengths: Sequence[float]):
    """Soft-control accuracy of the causal fusion model against the control value (``plots.plot_control_curve``)."""
    rows = []
    for value in strengths:
        for cls, request in (("pos", Request({"pos_high": value, "str_high": value}, "!")),
                             ("neg", Request({"neg_high": value, "is_question": value}, "?"))):
            asked = PAPER_REQUESTS[cls]
            wanted = {"adjective": POLARITY_LABELS[asked.polarity], "punctuation": asked.punctuation}
            scores = accuracy(decode("causal", "fusion", n, request, seed_offset=100), cls)
            for what, p in (("adjective", scores.adj_acc), ("punctuation", scores.punct_acc)):
                rows.append({"strength": value, "series": f"{cls} {what} ({wanted[what]})",
                             "accuracy": p.mean, "low": p.low, "high": p.high})
    return pd.DataFrame(rows)


def soft_control(decode: Decoder, n: int) -> dict[str, ControlAccuracy]:
    """The paper's requests without restriction or mixture (causal fusion model)."""
    return {cls: accuracy(decode("causal", "fusion", n, request, seed_offset=200), cls)
            for cls, request in PAPER_REQUESTS.items()}


def soft_table(soft: Mapping[str, ControlAccuracy]):
    return pd.DataFrame({cls: {"adjective accuracy": rate(v.adj_acc), "punctuation accuracy": rate(v.punct_acc)}
                         for cls, v in soft.items()}).T


def ood_sweep(decode: Decoder, n: int, alphas: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 0.85, 0.97, 1.0)):
    """Held-out hit rate of the causal fusion model under hard control against the mixture weight alpha."""
    rows = []
    for cls, request in PAPER_REQUESTS.items():
        for alpha in alphas:
            decoding = DecodingConfig(hard=True, mixture=replace(PAPER_MIXTURE[request.polarity], alpha=alpha))
            out = decode("causal", "fusion", n, request, decoding=decoding, seed_offset=300)
            p = held_out_hits(out, decode.held_out[cls])
            rows.append({"class": cls, "alpha": alpha, "rate": p.mean, "low": p.low, "high": p.high})
    return pd.DataFrame(rows)


def ood_table(ood: Mapping[tuple[str, str], Interval]):
    return pd.DataFrame([{"setting": SETTING_LABELS[s], "class": cls, "held-out hit rate": rate(p),
                          "paper": PAPER_A_OOD_HIT[cls]} for (s, cls), p in ood.items()])


def rule_and_path(decode: Decoder, n: int) -> list[dict]:
    """Per setting, nucleus rule and control path: OOD hits under hard control and soft adjective accuracy."""
    rows = []
    for s in SETTINGS:
        for rule in ("reach", "authors"):
            for path, (features, steering) in CONTROL_PATHS.items():
                row = {"setting": s, "nucleus rule": rule, "control path": path}
                for offset, cls in enumerate(PAPER_REQUESTS):
                    how = {"nucleus_rule": rule, "feature_control": features, "logit_steering": steering}
                    hard = replace(HARD[cls], mixture=replace(HARD[cls].mixture, nucleus_rule=rule), **how)
                    out = decode(s, "fusion", n, PAPER_REQUESTS[cls], decoding=hard, seed_offset=400 + offset,
                                 authors_rules=False)
                    row[f"OOD hit {cls}"] = held_out_hits(out, decode.held_out[cls])
                    out = decode(s, "fusion", n, PAPER_REQUESTS[cls], decoding=replace(FUSION_DEFAULT, **how),
                                 seed_offset=410 + offset, authors_rules=False)
                    row[f"soft adj {cls}"] = accuracy(out, cls).adj_acc
                rows.append(row)
    return rows


def rule_and_path_table(side: list[dict]):
    return pd.DataFrame([{k: rate(v) if isinstance(v, Interval) else v for k, v in row.items()} for row in side])


#: the control paths of :data:`CONTROL_PATHS` as the prose's glue names call them: ours with the features, the
#: authors' without them, the features alone
CITED_PATHS = ("with", "without", "alone")
#: :func:`rule_and_path_numbers`: three OOD hit rates, then ``soft_{request}_{path}``
RuleAndPathNumbers = make_dataclass("RuleAndPathNumbers", [
    ("ood_neg_reach", float), ("ood_neg_authors", float), ("ood_neg_published_authors", float)] + [
    (f"soft_{cls}_{name}", float) for cls in PAPER_REQUESTS for name in CITED_PATHS], frozen=True)


def rule_and_path_numbers(side: list[dict]) -> RuleAndPathNumbers:
    """The rates chapter 3's prose cites."""
    ours, authors, _ = CONTROL_PATHS
    rows = {(r["setting"], r["nucleus rule"], r["control path"]): r for r in side}
    return RuleAndPathNumbers(
        ood_neg_reach=rows[("causal", "reach", ours)]["OOD hit neg"].mean,
        ood_neg_authors=rows[("causal", "authors", ours)]["OOD hit neg"].mean,
        ood_neg_published_authors=rows[("published", "authors", authors)]["OOD hit neg"].mean,
        **{f"soft_{cls}_{name}": rows[("causal", "reach", path)][f"soft adj {cls}"].mean
           for cls in PAPER_REQUESTS for name, path in zip(CITED_PATHS, CONTROL_PATHS)})


def generations_per_second(decode: Decoder, n: int, repeats: int = 4) -> tuple[float, float]:
    """(best seconds, sentences per second) of one hard-controlled batch of ``n``; the first call warms up."""
    times = []
    for repeat in range(repeats):
        start = time.perf_counter()
        decode("causal", "fusion", n, PAPER_REQUESTS["pos"], decoding=HARD["pos"], seed_offset=repeat)
        times.append(time.perf_counter() - start)
    best = min(times[1:])
    return best, n / best


def key_numbers(hard_scores, soft, ood):
    """The causal fusion model's hard and soft control and held-out hit rate, per request."""
    return pd.DataFrame({cls: {
        "hard adjective / punctuation": f"{hard_scores[('causal', cls)].adj_acc.mean:.2f} / "
                                        f"{hard_scores[('causal', cls)].punct_acc.mean:.2f}",
        "soft adjective / punctuation": f"{soft[cls].adj_acc.mean:.2f} / {soft[cls].punct_acc.mean:.2f}",
        "held-out hit rate": f"{ood[('causal', cls)].mean:.2f}"} for cls in PAPER_REQUESTS}).T


def _rate_json(p: Interval) -> dict:
    return {"value": p.mean, "ci_low": p.low, "ci_high": p.high, "n": p.n}


def _accuracies(scores: ControlAccuracy, as_json=lambda p: p.mean) -> dict:
    return {k: as_json(getattr(scores, k)) for k in ("adj_acc", "punct_acc")}


def decoding_record(*, n: int, hard_scores, soft, curve, confusion, ood, sweep, side, no_ops: bool, focus,
                    speed: float, examples: list[dict]) -> DecodingRecord:
    """Chapter 3's metrics file (causal fusion model unless a key says published)."""
    return DecodingRecord(extra={
        "n_per_setting": n,
        "control": {
            "hard": {cls: _accuracies(hard_scores[("causal", cls)]) for cls in PAPER_REQUESTS},
            "hard_ci": {cls: _accuracies(hard_scores[("causal", cls)], _rate_json) for cls in PAPER_REQUESTS},
            "hard_published": {cls: _accuracies(hard_scores[("published", cls)]) for cls in PAPER_REQUESTS},
            "soft": {cls: _accuracies(soft[cls]) for cls in PAPER_REQUESTS},
            "soft_ci": {cls: _accuracies(soft[cls], _rate_json) for cls in PAPER_REQUESTS},
            "soft_curve": curve.to_dict(orient="records"),
        },
        "confusion": {"hard": confusion},
        "ood_hit": {cls: ood[("causal", cls)].mean for cls in PAPER_REQUESTS},
        "ood_hit_published": {cls: ood[("published", cls)].mean for cls in PAPER_REQUESTS},
        "ood_alpha_sweep": sweep.to_dict(orient="records"),
        "rule_and_control_path": [{k: _rate_json(v) if isinstance(v, Interval) else v for k, v in row.items()}
                                  for row in side],
        "grammar_makes_top_k_and_repetition_penalty_no_ops": no_ops,
        "focus_ce": {col: focus[col].to_dict() for col in focus.columns},
        "generations_per_second": speed,
        "examples": examples,
    })
