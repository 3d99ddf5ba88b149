"""The leakage audit of chapter 4: paper A's Tables 1-4 over several seeds, in both settings,
with ablations and a control-code baseline.

Seeds vary model initialisation and data order; the corpus and its held-out adjectives stay
the published ones (corpus seed 111), so focus tokens such as *great* mean the same thing in
every run. Each number is summarised as a mean with a 95% Student-t interval over seeds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from semlm.fusion.control_codes import N_CODES
from semlm.data.synthetic import AdjectiveSplit
from semlm.fusion.decoding import (PAPER_MIXTURE, ClauseGrammar, DecodingConfig, FUSION_DEFAULT, generate,
                                   published_decoding)
from semlm.fusion.synthetic_experiment import SETTINGS, prepare_data, synthetic_runs
from semlm.fusion.metrics import (POLARITY_LABELS, control_accuracy, held_out_hit_rate, polarity_confusion,
                                  request_accuracy)
from semlm.core.records import Interval
from semlm.fusion.records import FeatureSteering
from semlm.core.runs import RunRecord, RunSpec
from semlm.fusion.profiles import AUDIT_SEEDS, STEERING_SEEDS, synthetic_profile
from semlm.profiles import check_profile
from semlm.fusion.request import PAPER_REQUESTS

ABLATIONS: tuple[str, ...] = ("fusion_no_gate", "fusion_no_aux", "fusion_no_uniformizer")


def audit_seeds(seed: int, n_seeds: int | None = None, profile: str = "cpu") -> list[int]:
    """``n_seeds`` training seeds from ``seed`` on (None: the profile's, :data:`semlm.fusion.profiles.AUDIT_SEEDS`)."""
    if n_seeds is None:
        n_seeds = AUDIT_SEEDS[check_profile(profile)]
    if n_seeds < 1:
        raise ValueError(f"n_seeds must be >= 1, got {n_seeds}")
    return [seed + i for i in range(n_seeds)]


UNIT = (0.0, 1.0)  # accuracies and hit rates: intervals clipped to [0, 1]


def audit_runs(profile: str, seeds: Sequence[int], steering_seeds: Sequence[int] = ()) -> list[RunSpec]:
    """Chapter 4's runs: baseline and fusion in both settings, the ablations and the control-code
    model (causal), per seed; and the causal fusion model of every ``steering_seeds`` seed that is not
    among ``seeds`` (the extra seeds of ``A-feature-steering``, :func:`steering_seeds`)."""
    specs = []
    for seed in seeds:
        config = synthetic_profile(profile, seed)
        specs += synthetic_runs(config)
        specs += synthetic_runs(config, ABLATIONS + ("control_code",), ("causal",))
    for seed in (s for s in steering_seeds if s not in seeds):
        specs += synthetic_runs(synthetic_profile(profile, seed), ("fusion",), ("causal",))
    return specs


def steering_seeds(seed: int, seeds: Sequence[int], profile: str = "cpu") -> list[int]:
    """``A-feature-steering``'s training seeds: the audit's ``seeds`` and, from ``seed`` on, as many more as
    :data:`semlm.fusion.profiles.STEERING_SEEDS` asks at ``profile``."""
    wanted = [seed + i for i in range(STEERING_SEEDS[check_profile(profile)])]
    return list(seeds) + [s for s in wanted if s not in seeds]


@dataclass
class AuditRuns:
    """Every trained model of the audit, keyed by (setting, model name, seed)."""

    runs: dict[tuple[str, str, int], RunRecord]
    seeds: list[int]

    @classmethod
    def of(cls, records: Sequence[RunRecord], seeds: Sequence[int]) -> AuditRuns:
        """The records of :func:`audit_runs` (from ``runs.run_many``), keyed by (setting, model, seed)."""
        return cls({(r.group, r.name, r.seed): r for r in records}, list(seeds))

    def values(self, setting: str, model: str, metric: str) -> list[float]:
        return [getattr(self.runs[(setting, model, s)].metrics, metric) for s in self.seeds]

    def over_seeds(self, setting: str, model: str, metric: str) -> Interval:
        """Mean and 95% t-interval over seeds of one run metric."""
        return Interval.of_mean(self.values(setting, model, metric))


def control_report(model, featurizer, grammar: ClauseGrammar, split: AdjectiveSplit, n: int, seed: int,
                   setting: str = "causal") -> dict:
    """Tables 2-4 for one model: hard control (paper mixture), its confusion, OOD hits, and soft control.

    A control-code model (a grammar with an ``offset``) hears each request as its codes; its soft
    setting is the codes alone (no steering), which is how CTRL is controlled. In the ``published``
    setting the decoder is the authors' (``published_decoding``: their nucleus rule and steering, no
    controls in the features); the causal setting uses ours.
    """
    decoding = published_decoding if setting == "published" else (lambda config: config)
    soft = replace(FUSION_DEFAULT, logit_steering=False) if grammar.offset else FUSION_DEFAULT
    held_out = {"pos": split.positive_held_out, "neg": split.negative_held_out}
    report, hard_outputs = {"hard": {}, "soft": {}, "ood_hit": {}}, {}
    for offset, (name, request) in enumerate(PAPER_REQUESTS.items()):
        hard = decoding(DecodingConfig(hard=True, mixture=PAPER_MIXTURE[request.polarity]))
        out = generate(model, featurizer, grammar, n, request, config=hard, seed=seed + 10 * offset)
        hard_outputs[POLARITY_LABELS[request.polarity]] = out
        report["hard"][name] = request_accuracy(out, request)
        report["ood_hit"][name] = held_out_hit_rate(out, held_out[name])
        out = generate(model, featurizer, grammar, n, request, config=decoding(soft), seed=seed + 10 * offset + 1)
        report["soft"][name] = request_accuracy(out, request)
    confusion = polarity_confusion(hard_outputs)
    report["confusion_diagonal"] = sum(confusion[c][c] for c in confusion) / (len(confusion) * n)
    return report


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
            run.load(), featurizer, grammars[with_codes], data[setting].corpus.split, n, seed, setting)
    return reports


# --- paper A's own channel: the request in the per-token features only (A-feature-steering) ------------------

#: The request written into the newest position's features (the authors' ``apply_control``), no logit steering,
#: no class restriction or mixture; ``generate`` always applies the grammar mask. Chapter 3's "features only" path.
FEATURES_ONLY = replace(FUSION_DEFAULT, feature_control=True, logit_steering=False)


def features_only_decodes(model, featurizer, grammar: ClauseGrammar, n: int, seed: int) -> dict[str, list[list[str]]]:
    """``n`` sentences per request of :data:`PAPER_REQUESTS` decoded with :data:`FEATURES_ONLY`, both requests with
    the same random numbers: a model whose features do not steer writes the same sentences under both."""
    return {name: generate(model, featurizer, grammar, n, request, config=FEATURES_ONLY, seed=seed + 50)
            for name, request in PAPER_REQUESTS.items()}


def judged_polarity(decodes: dict[str, list[list[str]]]) -> dict[str, dict[str, float]]:
    """Per request, the share of sentences the lexicon judges ``POS`` and ``NEG`` (their adjective's class)."""
    return {name: {p: control_accuracy(out, p, None)["adj_acc"]["value"] for p in ("POS", "NEG")}
            for name, out in decodes.items()}


def steering_accuracies(shares: dict[str, dict[str, float]]) -> tuple[float, float]:
    """(requested, opposite) polarity accuracy from :func:`judged_polarity`: the positive-requested share judged
    positive and the negative-requested share judged negative, averaged; then the same targets with the opposite
    request given (the negative-requested share judged positive and the positive-requested share judged negative)."""
    requested = (shares["pos"]["POS"] + shares["neg"]["NEG"]) / 2
    opposite = (shares["neg"]["POS"] + shares["pos"]["NEG"]) / 2
    return requested, opposite


def feature_steering(audit: AuditRuns, profile: str, n: int, seeds: Sequence[int] | None = None) -> FeatureSteering:
    """A-feature-steering's measurement: every seed's causal fusion model (``seeds``: default the audit's) decoded
    with :data:`FEATURES_ONLY` under both requests, judged by the lexicon; per-seed requested and opposite-request
    accuracies and their difference."""
    seeds = list(audit.seeds if seeds is None else seeds)
    data = prepare_data(synthetic_profile(profile).corpus, "causal")
    grammar = ClauseGrammar(data.vocab)
    shares = {seed: judged_polarity(features_only_decodes(audit.runs[("causal", "fusion", seed)].load(),
                                                          data.featurizer, grammar, n, seed))
              for seed in seeds}
    requested, opposite = zip(*(steering_accuracies(shares[seed]) for seed in seeds))
    return FeatureSteering(
        seeds=seeds, n_per_request=n, requested=Interval.of_mean(requested, UNIT),
        opposite=Interval.of_mean(opposite, UNIT), paired=Interval.paired(requested, opposite),
        judged_positive={name: Interval.of_mean([shares[seed][name]["POS"] for seed in seeds], UNIT)
                         for name in PAPER_REQUESTS})
