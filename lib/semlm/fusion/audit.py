"""The leakage audit of chapter 4: paper A's Tables 1-4 over several seeds, in both settings,
with ablations and a control-code baseline.

Seeds vary model initialisation and data order; the corpus and its held-out adjectives stay
the published ones (corpus seed 111), so focus tokens such as *great* mean the same thing in
every run. Each number is summarised as a mean with a 95% Student-t interval over seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from semlm.fusion.control_codes import N_CODES, codes_for
from semlm.data.synthetic import AdjectiveSplit
from semlm.fusion.decoding import PAPER_MIXTURE, ClauseGrammar, Controls, DecodingConfig, FUSION_DEFAULT, generate, published_decoding
from semlm.fusion.synthetic_experiment import SETTINGS, prepare_data, run_grid
from semlm.core.runs import RunRecord
from semlm.core.metrics import control_accuracy, held_out_hit_rate, polarity_confusion
from semlm.profiles import synthetic_profile

#: The two requests of paper A's Tables 2-4: positive & strong with "!", negative with "?".
REQUESTS = {
    "pos": {"controls": {"pos_high": 0.95, "str_high": 0.9}, "polarity": "POS", "punct": "!", "class": "positive"},
    "neg": {"controls": {"neg_high": 0.95, "is_question": 1.0, "str_med": 0.6}, "polarity": "NEG", "punct": "?",
            "class": "negative"},
}
ABLATIONS: tuple[str, ...] = ("fusion_no_gate", "fusion_no_aux", "fusion_no_uniformizer")


def audit_seeds(seed: int, n_seeds: int | None = None, profile: str = "cpu") -> list[int]:
    """``n_seeds`` training seeds from ``seed`` on (None: the profile's, :data:`semlm.profiles.AUDIT_SEEDS`)."""
    from semlm.profiles import AUDIT_SEEDS, check_profile

    if n_seeds is None:
        n_seeds = AUDIT_SEEDS[check_profile(profile)]
    if n_seeds < 1:
        raise ValueError(f"n_seeds must be >= 1, got {n_seeds}")
    return [seed + i for i in range(n_seeds)]


@dataclass
class AuditRuns:
    """Every trained model of the audit, keyed by (setting, model name, seed)."""

    runs: dict[tuple[str, str, int], RunRecord]
    seeds: list[int]

    def values(self, setting: str, model: str, metric: str) -> list[float]:
        return [self.runs[(setting, model, s)].metrics[metric] for s in self.seeds]


def train_audit_models(profile: str, seeds: Sequence[int], workers: int = 2, progress: bool = True) -> AuditRuns:
    """Baseline and fusion in both settings, the ablations and the control-code model (causal), per seed."""
    jobs, keys = [], []
    for seed in seeds:
        config = synthetic_profile(profile, seed)
        for setting in SETTINGS:
            for model in ("baseline", "fusion"):
                jobs.append((config, model, setting))
                keys.append((setting, model, seed))
        for model in ABLATIONS + ("control_code",):
            jobs.append((config, model, "causal"))
            keys.append(("causal", model, seed))
    runs = run_grid(jobs, workers=workers, progress=progress, label=f"{len(jobs)} models x {len(seeds)} seeds")
    return AuditRuns(dict(zip(keys, runs)), list(seeds))


def control_report(model, featurizer, grammar: ClauseGrammar, split: AdjectiveSplit, n: int, seed: int,
                   codes_by_request: dict[str, tuple[str, ...]] | None = None, setting: str = "causal") -> dict:
    """Tables 2-4 for one model: hard control (paper mixture), its confusion, OOD hits, and soft control.

    With ``codes_by_request`` (a control-code model) the codes are placed after ``<bos>``;
    the soft setting then uses the codes alone (no steering), which is how CTRL is controlled.
    In the ``published`` setting the decoder is the authors' (``published_decoding``: their
    nucleus rule and steering, no controls in the features); the causal setting uses ours.
    """
    decoding = published_decoding if setting == "published" else (lambda config: config)
    held_out = {"pos": split.positive_held_out, "neg": split.negative_held_out}
    report, hard_outputs = {"hard": {}, "soft": {}, "ood_hit": {}}, {}
    for offset, (name, request) in enumerate(REQUESTS.items()):
        codes = codes_by_request[name] if codes_by_request else ()
        hard = decoding(DecodingConfig(hard=True, mixture=PAPER_MIXTURE[request["class"]]))
        out = generate(model, featurizer, grammar, n, Controls(request["controls"]), config=hard,
                       seed=seed + 10 * offset, codes=codes)
        hard_outputs[request["polarity"]] = out
        report["hard"][name] = control_accuracy(out, request["polarity"], request["punct"])
        report["ood_hit"][name] = held_out_hit_rate(out, held_out[name])
        soft_controls = Controls() if codes_by_request else Controls(request["controls"])
        out = generate(model, featurizer, grammar, n, soft_controls, config=decoding(FUSION_DEFAULT),
                       seed=seed + 10 * offset + 1, codes=codes)
        report["soft"][name] = control_accuracy(out, request["polarity"], request["punct"])
    confusion = polarity_confusion(hard_outputs)
    report["confusion_diagonal"] = sum(confusion[c][c] for c in confusion) / (len(confusion) * n)
    return report


def control_code_requests() -> dict[str, tuple[str, ...]]:
    return {name: codes_for(r["class"], r["punct"]) for name, r in REQUESTS.items()}


def control_reports(audit: AuditRuns, profile: str, n: int) -> dict[tuple[str, str, int], dict]:
    """``control_report`` of every fusion-like and control-code model of the audit."""
    corpus = synthetic_profile(profile).corpus
    data = {s: prepare_data(corpus, s) for s in SETTINGS}
    coded = prepare_data(corpus, "causal", codes=True)
    grammars = {False: ClauseGrammar(data["causal"].vocab), True: ClauseGrammar(coded.vocab, offset=N_CODES)}
    reports = {}
    for (setting, name, seed), run in audit.runs.items():
        if name == "baseline":
            continue
        with_codes = name == "control_code"
        featurizer = coded.featurizer if with_codes else data[setting].featurizer
        reports[(setting, name, seed)] = control_report(
            run.load(), featurizer, grammars[with_codes], data[setting].corpus.split, n, seed,
            codes_by_request=control_code_requests() if with_codes else None, setting=setting)
    return reports

