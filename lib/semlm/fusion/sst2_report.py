"""Chapter 5: what the SST-2 chapter measures on its trained models and writes to its record.

``trained`` is ``{setting: {kind: RunRecord}}`` (``runs.nested(records, "group", "name")`` of
:func:`semlm.fusion.sst2_experiment.sst2_runs`): :func:`table7` presents it; :class:`ControlStudy`
decodes, judges and presents the control section.
"""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass, replace
from typing import Mapping, Sequence

import pandas as pd
import torch

from semlm.core.records import Interval
from semlm.fusion.metrics import rate
from semlm.fusion.records import SST2Judgement, SST2Record
from semlm.fusion.profiles import ControlConfig
from semlm.fusion.sst2_experiment import (SETTINGS, SST2Data, continue_under_control, judge_continuations,
                                          judge_punctuation, sst2_requests)
from semlm.fusion.request import Request
from semlm.fusion.training_report import ModelTable, by_setting, model_numbers
from semlm.reference import PAPER_A_TABLE7

#: (request, mode) decoded per model, in order (their seeds are ``seed + position``)
CONTROL_CASES = ((None, "soft"), ("pos", "soft"), ("neg", "soft"), ("pos", "hard"), ("neg", "hard"))
FEATURES_ONLY = "features only"
#: The end marks requested alone (the paper's punctuation control; "." is what a sentence ends with anyway)
PUNCTUATION_REQUESTS = ("!", "?")
#: New tokens of a punctuation case: enough for most continuations to end (the polarity cases' 10 rarely do)
PUNCTUATION_NEW_TOKENS = 30


def feature_changes(data: SST2Data, replacement: int, positions: Sequence[int] = (2, 5, 9)) -> dict[str, float]:
    """Per setting, the largest change of the dev set's features before a position of ``positions`` when the token
    there becomes ``replacement`` (0 when causal)."""
    ids = data.tensors["causal"]["dev"].input_ids

    def leak(featurize, t: int) -> float:
        changed = ids.index_fill(1, torch.tensor([t]), replacement)
        return (featurize(ids)[:, :t] - featurize(changed)[:, :t]).abs().max().item()

    return {s: max(leak(data.featurizers[s], t) for t in positions) for s in SETTINGS}


Table7Numbers = model_numbers("Table7Numbers", ("ppl",))


def table7(trained) -> ModelTable:
    """Paper A's Table 7: dev perplexity and semantic MSE of every model, then the paper's."""
    columns = {"dev PPL": "ppl", "semantic MSE": "sem_mse"}
    return ModelTable(trained, {"paper, Table 7 (published setting)": PAPER_A_TABLE7}, columns, columns,
                      {"ppl": "ppl"}, Table7Numbers)


#: The glue names of the control rates chapter 5's prose cites: (kind, request, mode) judged as requested
CITED = {"soft_pos": ("fusion", "pos", "soft"), "soft_neg": ("fusion", "neg", "soft"),
         "hard_pos": ("fusion", "pos", "hard"), "hard_neg": ("fusion", "neg", "hard"),
         "feat_pos": ("fusion", "pos", FEATURES_ONLY), "feat_neg": ("fusion", "neg", FEATURES_ONLY),
         "base_soft_pos": ("baseline", "pos", "soft"), "base_soft_neg": ("baseline", "neg", "soft")}


#: :meth:`ControlStudy.numbers`: the glue names of chapter 5's control section (the end marks' are None in a study
#: that decoded none)
ControlStudyNumbers = make_dataclass("ControlStudyNumbers", [("n_prefixes", int)] + [
    (f"{name}_{judge}", float) for name in CITED for judge in ("vader", "clf")] + [
    (f"none_{kind}_{side}", float) for kind in ("baseline", "fusion")
    for side in ("pos_vader", "neg_vader", "pos_clf", "neg_clf")] + [
    ("soft_gain_pos", float), ("soft_gain_neg", float)] + [
    (f"punct_{mode}_{mark}{ended}", float | None, None) for mark in ("excl", "q") for mode in ("soft", "hard")
    for ended in ("", "_ended")], frozen=True)


@dataclass
class ControlStudy:
    """Chapter 5's control on real text: every prefix continued by each model under every
    :data:`CONTROL_CASES` case and with the features alone (no steering); ``generations`` and
    ``judged`` (:class:`SST2Judgement`) are keyed by ``(kind, request, mode)``, request None: no control."""

    prefixes: list
    generations: dict[tuple, list]
    judged: dict[tuple, SST2Judgement]
    #: ``(kind, mark, mode)`` -> ``judge_punctuation``: the end mark requested alone (no polarity), soft or hard
    punctuation: dict[tuple, dict] = field(default_factory=dict)

    @classmethod
    def run(cls, models: Mapping[str, torch.nn.Module], data: SST2Data, prefixes, classifier,
            config: ControlConfig, seed: int) -> "ControlStudy":
        """Decode and judge every case; the seeds are ``seed + position`` (features only: ``seed + 10 + ...``)."""
        study = cls(list(prefixes), {}, {})
        features_only = replace(config, steer_boost=0.0, steer_penalty=0.0)
        requests = {None: Request(), **sst2_requests(config)}
        cases = [(kind, request, mode, config, seed + offset, mode)
                 for kind in models for offset, (request, mode) in enumerate(CONTROL_CASES)]
        cases += [(kind, request, "soft", features_only, seed + 10 + offset, FEATURES_ONLY)
                  for kind in models for offset, request in enumerate(("pos", "neg"))]
        for kind, request, mode, control, mode_seed, label in cases:
            out = continue_under_control(models[kind], data, prefixes, requests[request], mode, control, seed=mode_seed)
            study.generations[(kind, request, label)] = out
            study.judged[(kind, request, label)] = judge_continuations(out, classifier, requests[request])
        # the paper's other control (Table 2): the end mark, requested alone, with room to end the sentence (a
        # prefix of 5 words, SST-2 phrases of about 19); both models share each case's seed
        punctuation_config = replace(config, new_tokens=PUNCTUATION_NEW_TOKENS)
        for offset, (mark, mode) in enumerate((m, mode) for m in PUNCTUATION_REQUESTS for mode in ("soft", "hard")):
            for kind in models:
                out = continue_under_control(models[kind], data, prefixes, Request.of(punctuation=mark), mode,
                                             punctuation_config, seed=seed + 20 + offset)
                study.punctuation[(kind, mark, mode)] = judge_punctuation(out, mark)
        return study

    def punctuation_table(self):
        """Per requested end mark and mode: of the continuations that end a sentence, the share ending with the
        requested mark ("ends with it", with its count), and the share that end one at all, fusion beside
        baseline."""
        return pd.DataFrame([
            {"request": mark, "mode": mode, "model": kind, "ends with it": rate(j["acc"]),
             "ends a sentence": rate(j["coverage"])}
            for (kind, mark, mode), j in self.punctuation.items()]).set_index(["request", "mode", "model"])

    def table(self):
        """Every model, request and mode: the share VADER and the classifier judge as requested."""
        return pd.DataFrame([
            {"model": kind, "request": request, "mode": mode, "VADER": rate(j.acc),
             "classifier": rate(j.classifier_acc)} if request else
            {"model": kind, "request": "none", "mode": "-", "VADER": "pos " + rate(j.vader_pos_share),
             "classifier": "pos " + rate(j.classifier_pos_share)}
            for (kind, request, mode), j in self.judged.items()]).set_index(["model", "request", "mode"])

    def frame(self):
        """Bars for ``plots.plot_sst2_control``: per model, judge, request and mode (none / soft / hard) the
        share judged as requested, with its Wilson interval."""
        rows = []
        for model in dict.fromkeys(model for model, _, _ in self.judged):
            none = self.judged[(model, None, "soft")]
            judges = (("VADER", none.vader, "acc"), ("classifier", none.classifier, "classifier_acc"))
            for request, label in (("pos", "POS"), ("neg", "NEG")):
                for judge, counts, acc in judges:
                    shares = {"none": Interval.of_proportion(counts.get(label, 0), len(self.prefixes)),
                              **{mode: getattr(self.judged[(model, request, mode)], acc) for mode in ("soft", "hard")}}
                    rows += [{"request": request, "mode": mode, "series": f"{model}, {judge}", "value": p.mean,
                              "low": p.low, "high": p.high} for mode, p in shares.items()]
        return pd.DataFrame(rows)

    def features_only_table(self):
        """:meth:`table`'s rows of the features alone (no steering)."""
        return self.table().xs(FEATURES_ONLY, level="mode")

    def numbers(self) -> "ControlStudyNumbers":
        """The control rates chapter 5's prose cites (:data:`CITED`, the unconditioned shares, the soft
        gain over the baseline with the same steering, the fusion model's end marks)."""
        out = {"n_prefixes": len(self.prefixes)}
        for name, key in CITED.items():
            out[f"{name}_vader"] = self.judged[key].acc.mean
            out[f"{name}_clf"] = self.judged[key].classifier_acc.mean
        for kind in ("baseline", "fusion"):
            none = self.judged[(kind, None, "soft")]
            out[f"none_{kind}_pos_vader"] = none.vader_pos_share.mean
            out[f"none_{kind}_neg_vader"] = none.vader_neg_share.mean
            out[f"none_{kind}_pos_clf"] = none.classifier_pos_share.mean
            out[f"none_{kind}_neg_clf"] = 1 - none.classifier_pos_share.mean
        for request in ("pos", "neg"):
            out[f"soft_gain_{request}"] = out[f"soft_{request}_vader"] - out[f"base_soft_{request}_vader"]
        for (kind, mark, mode), judged in self.punctuation.items():
            if kind == "fusion":
                name = f"punct_{mode}_{'excl' if mark == '!' else 'q'}"
                out[name], out[f"{name}_ended"] = judged["acc"].mean, judged["coverage"].mean
        return ControlStudyNumbers(**out)

    def examples(self, n: int = 4) -> list[dict]:
        """The first ``n`` prompts' continuations per model and control."""
        cases = ((None, "soft"), ("pos", FEATURES_ONLY), ("neg", FEATURES_ONLY), ("pos", "soft"), ("neg", "soft"),
                 ("pos", "hard"), ("neg", "hard"))
        return [{"prompt": " ".join(self.prefixes[i]), "model": kind,
                 "control": "none" if request is None else f"{request}, {mode}",
                 "continuation": " ".join(self.generations[(kind, request, mode)][i])}
                for i in range(n) for kind in ("baseline", "fusion") for request, mode in cases]

    def record(self) -> dict:
        """What the record keeps (the fields the claims read): per mode and request the fusion model's
        rates and per-prompt classifier verdicts beside the baseline's."""
        def entry(request, mode, baseline_classifier=True):
            fusion, baseline = self.judged[("fusion", request, mode)], self.judged[("baseline", request, mode)]
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
        control["none"] = {kind: self.judged[(kind, None, "soft")].to_dict() for kind in ("baseline", "fusion")}
        control["punctuation"] = {
            mode: {mark: {**self.punctuation[("fusion", mark, mode)],  # acc, coverage; then the baseline's
                          **{f"baseline_{k}": v for k, v in self.punctuation[("baseline", mark, mode)].items()}}
                   for mark in PUNCTUATION_REQUESTS} for mode in ("soft", "hard")} if self.punctuation else None
        control["n_prefixes"] = len(self.prefixes)
        return control


def sst2_record(*, config, data: SST2Data, trained, sensitivity, control: ControlStudy, classifier_dev: Interval,
                feature_leak: dict) -> SST2Record:
    """Chapter 5's metrics file: the fields the claims read, the rest in ``extra``."""
    settings = by_setting(trained, sensitivity)
    return SST2Record(
        causal=settings["causal"], published=settings["published"],
        fusion={"sem_mse": trained["causal"]["fusion"].metrics.sem_mse,
                "sem_mse_published": trained["published"]["fusion"].metrics.sem_mse},
        control=control.record(),
        extra={
            "classifier": {"dev_acc": classifier_dev.mean, "dev_ci": classifier_dev},
            "data": {"n_train_used": len(data.train_sentences), "n_train_available": data.n_train_available,
                     "vocab_size": len(data.vocab), "min_freq": config.min_freq, "dev_unk_rate": data.unk_rate("dev"),
                     "pos_tagger": data.prior.source, "capitalisation": data.capitalisation_source},
            "feature_leak": feature_leak, "examples": control.examples(), "paper": {"table7": PAPER_A_TABLE7},
        })
