"""Chapter 5: what the SST-2 chapter measures on its trained models and writes to its record.

``trained`` is ``{setting: {kind: RunRecord}}`` (``runs.nested(records, "group", "name")`` of
:func:`semlm.fusion.sst2_experiment.sst2_runs`); ``judged[(kind, request, mode)]`` holds the
:class:`semlm.core.records.SST2Judgement` of one set of continuations (request None: no control).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

import torch

from semlm.core.records import Interval
from semlm.fusion.records import SST2Judgement, SST2Record
from semlm.fusion.sst2_experiment import (
    PAPER_A_TABLE7, SETTINGS, ControlConfig, SST2Data, continue_under_control, judge_continuations,
)
from semlm.fusion.synthetic_experiment import SETTING_LABELS
from semlm.fusion.training_report import by_setting

#: (request, mode) decoded per model, in order (their seeds are ``seed + position``)
CONTROL_CASES = ((None, "soft"), ("pos", "soft"), ("neg", "soft"), ("pos", "hard"), ("neg", "hard"))
FEATURES_ONLY = "features only"


def feature_leak(featurize, ids: torch.Tensor, position: int, replacement: int) -> float:
    """Largest change of the features before ``position`` when the token there becomes ``replacement``."""
    changed = ids.clone()
    changed[:, position] = replacement
    return (featurize(ids)[:, :position] - featurize(changed)[:, :position]).abs().max().item()


def feature_changes(data: SST2Data, replacement: int, positions: Sequence[int] = (2, 5, 9)) -> dict[str, float]:
    """Per setting, the largest :func:`feature_leak` over the dev set and ``positions`` (0 when causal)."""
    ids = data.tensors["causal"]["dev"].input_ids
    return {s: max(feature_leak(data.featurizers[s], ids, t, replacement) for t in positions) for s in SETTINGS}


def table7_frame(trained):
    """Paper A's Table 7: dev perplexity and semantic MSE of every model, then the paper's."""
    import pandas as pd

    rows = [{"setting": SETTING_LABELS[s], "model": k, "dev PPL": r.metrics.ppl, "semantic MSE": r.metrics.sem_mse}
            for s, by_kind in trained.items() for k, r in by_kind.items()]
    rows += [{"setting": "paper, Table 7 (published setting)", "model": k, "dev PPL": v["ppl"],
              "semantic MSE": v.get("sem_mse")} for k, v in PAPER_A_TABLE7.items()]
    return pd.DataFrame(rows).set_index(["setting", "model"])


def table7_numbers(trained) -> dict[str, float]:
    """The perplexities, relative changes and semantic MSEs chapter 5's prose cites, by glue name."""
    out = {}
    for setting in SETTINGS:
        ppl = {kind: trained[setting][kind].metrics.ppl for kind in ("baseline", "fusion")}
        out.update({f"{setting}_{kind}_ppl": value for kind, value in ppl.items()})
        out[f"{setting}_ppl_change"] = 100 * (ppl["fusion"] / ppl["baseline"] - 1)
    for setting in SETTINGS:
        out[f"{setting}_sem_mse"] = trained[setting]["fusion"].metrics.sem_mse
    return out


def control_generations(models: Mapping[str, torch.nn.Module], data: SST2Data, prefixes, classifier,
                        config: ControlConfig, seed: int) -> tuple[dict, dict[tuple, SST2Judgement]]:
    """Continuations of every prefix per model under every :data:`CONTROL_CASES` case and with the
    features alone (no steering), and how the judges see them: ``(generations, judged)``."""
    generations, judged = {}, {}

    def run(kind, request, mode, control, mode_seed, label=None):
        out = continue_under_control(models[kind], data, prefixes, request, mode, control, seed=mode_seed)
        generations[(kind, request, label or mode)] = out
        judged[(kind, request, label or mode)] = judge_continuations(out, classifier, request)

    for kind in models:
        for offset, (request, mode) in enumerate(CONTROL_CASES):
            run(kind, request, mode, config, seed + offset)
    features_only = replace(config, steer_boost=0.0, steer_penalty=0.0)
    for kind in models:
        for offset, request in enumerate(("pos", "neg")):
            run(kind, request, "soft", features_only, seed + 10 + offset, FEATURES_ONLY)
    return generations, judged


def rate(p: Interval) -> str:
    """rate [95% Wilson interval] (successes/trials)."""
    return f"{p:.2f} ({p.successes}/{p.n})"


def control_table(judged: Mapping[tuple, SST2Judgement]):
    """Every model, request and mode: the share VADER and the classifier judge as requested."""
    import pandas as pd

    rows = []
    for (kind, request, mode), j in judged.items():
        if request is None:
            rows.append({"model": kind, "request": "none", "mode": "-", "VADER": "pos " + rate(j.vader_pos_share),
                         "classifier": "pos " + rate(j.classifier_pos_share)})
        else:
            rows.append({"model": kind, "request": request, "mode": mode, "VADER": rate(j.acc),
                         "classifier": rate(j.classifier_acc)})
    return pd.DataFrame(rows).set_index(["model", "request", "mode"])


def control_numbers(judged: Mapping[tuple, SST2Judgement]) -> dict[str, float]:
    """The control rates chapter 5's prose cites, by glue name."""
    out = {}
    for name, key in (("soft_pos", ("fusion", "pos", "soft")), ("soft_neg", ("fusion", "neg", "soft")),
                      ("hard_pos", ("fusion", "pos", "hard")), ("hard_neg", ("fusion", "neg", "hard")),
                      ("feat_pos", ("fusion", "pos", FEATURES_ONLY)), ("feat_neg", ("fusion", "neg", FEATURES_ONLY)),
                      ("base_soft_pos", ("baseline", "pos", "soft")), ("base_soft_neg", ("baseline", "neg", "soft"))):
        out[f"{name}_vader"] = judged[key].acc.mean
        out[f"{name}_clf"] = judged[key].classifier_acc.mean
    for kind in ("baseline", "fusion"):
        none = judged[(kind, None, "soft")]
        out[f"none_{kind}_pos_vader"] = none.vader_pos_share.mean
        out[f"none_{kind}_neg_vader"] = none.vader_neg_share.mean
        out[f"none_{kind}_pos_clf"] = none.classifier_pos_share.mean
        out[f"none_{kind}_neg_clf"] = 1 - none.classifier_pos_share.mean
    return out


def features_only_table(judged: Mapping[tuple, SST2Judgement]):
    import pandas as pd

    return pd.DataFrame([{"model": kind, "request": request,
                          "VADER": rate(judged[(kind, request, FEATURES_ONLY)].acc),
                          "classifier": rate(judged[(kind, request, FEATURES_ONLY)].classifier_acc)}
                         for kind in ("baseline", "fusion") for request in ("pos", "neg")]).set_index(["model", "request"])


def example_continuations(generations: Mapping[tuple, list], prefixes, n: int = 4) -> list[dict]:
    """The first ``n`` prompts' continuations per model and control."""
    cases = ((None, "soft"), ("pos", FEATURES_ONLY), ("neg", FEATURES_ONLY), ("pos", "soft"), ("neg", "soft"),
             ("pos", "hard"), ("neg", "hard"))
    return [{"prompt": " ".join(prefixes[i]), "model": kind,
             "control": "none" if request is None else f"{request}, {mode}",
             "continuation": " ".join(generations[(kind, request, mode)][i])}
            for i in range(n) for kind in ("baseline", "fusion") for request, mode in cases]


def _control_record(judged: Mapping[tuple, SST2Judgement], n_prefixes: int) -> dict:
    def entry(request, mode, baseline_classifier=True):
        fusion, baseline = judged[("fusion", request, mode)], judged[("baseline", request, mode)]
        out = {"acc": fusion.acc.mean, "acc_ci": fusion.acc, "classifier_acc": fusion.classifier_acc.mean,
               "classifier_ci": fusion.classifier_acc, "baseline_acc": baseline.acc.mean,
               # per prompt (the same prefixes for both models): the claims pair fusion and baseline by prompt
               "classifier_correct": fusion.classifier_correct,
               "baseline_classifier_correct": baseline.classifier_correct}
        if baseline_classifier:
            out["baseline_classifier_acc"] = baseline.classifier_acc.mean
        return out

    control = {mode: {request: entry(request, mode) for request in ("pos", "neg")} for mode in ("soft", "hard")}
    control["features_only"] = {request: entry(request, FEATURES_ONLY, False) for request in ("pos", "neg")}
    control["none"] = {kind: judged[(kind, None, "soft")].to_dict() for kind in ("baseline", "fusion")}
    control["n_prefixes"] = n_prefixes
    return control


def sst2_record(config, data: SST2Data, trained, sensitivity, judged, n_prefixes: int, classifier_dev: Interval,
                feature_leak: dict, examples: list[dict]) -> SST2Record:
    """Chapter 5's metrics file: the fields the claims read, the rest in ``extra``."""
    settings = by_setting(trained, sensitivity)
    return SST2Record(
        causal=settings["causal"], published=settings["published"],
        fusion={"sem_mse": trained["causal"]["fusion"].metrics.sem_mse,
                "sem_mse_published": trained["published"]["fusion"].metrics.sem_mse},
        control=_control_record(judged, n_prefixes),
        extra={
            "classifier": {"dev_acc": classifier_dev.mean, "dev_ci": classifier_dev},
            "data": {"n_train_used": len(data.train_sentences), "n_train_available": data.n_train_available,
                     "vocab_size": len(data.vocab), "min_freq": config.min_freq, "dev_unk_rate": data.unk_rate("dev"),
                     "pos_tagger": data.prior.source, "capitalisation": data.capitalisation_source},
            "feature_leak": feature_leak, "examples": examples, "paper": {"table7": PAPER_A_TABLE7},
        })
