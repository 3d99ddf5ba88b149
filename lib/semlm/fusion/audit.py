"""The leakage audit of chapter 4: paper A's Tables 1-4 over several seeds, in both settings,
with ablations and a control-code baseline.

Seeds vary model initialisation and data order; the corpus and its held-out adjectives stay
the published ones (corpus seed 111), so focus tokens such as *great* mean the same thing in
every run. Each number is summarised as a mean with a 95% Student-t interval over seeds, printed as
``mean [95% interval]``; :class:`LeakageAudit` is the chapter's record with its tables.
"""

from __future__ import annotations

import itertools
import math
import operator
from dataclasses import dataclass, make_dataclass, replace
from functools import reduce
from typing import Sequence

import pandas as pd
import torch

from semlm.core.metrics import FOCUS_TOKENS, score_tokens
from semlm.core.records import Interval
from semlm.core.runs import RunRecord, RunSpec
from semlm.data import synthetic as syn
from semlm.data.synthetic import AdjectiveSplit
from semlm.fusion.control_codes import N_CODES
from semlm.fusion.decoding import (PAPER_MIXTURE, ClauseGrammar, DecodingConfig, FUSION_DEFAULT, generate,
                                   published_decoding)
from semlm.fusion.metrics import (POLARITY_LABELS, control_accuracy, held_out_hit_rate, polarity_confusion,
                                  request_accuracy)
from semlm.fusion.profiles import AUDIT_SEEDS, OOD_SEEDS, STEERING_SEEDS, SyntheticProfile
from semlm.fusion.fuzzy import feature_index
from semlm.fusion.records import (ColumnShifts, ContextCrossEntropy, FeatureSteering, FocusByContext,
                                  LeakageAuditRecord)
from semlm.fusion.request import (COLUMN_GROUPS, FEATURE_STEERING_REQUESTS, PAPER_REQUESTS, REQUEST_FEATURES,
                                  Request, describe_requests)
from semlm.fusion.synthetic_experiment import SETTING_LABELS, SETTINGS, prepare_data, synthetic_runs
from semlm.fusion.training_report import TABLE1_COLUMNS, TABLE1_PAPER
from semlm.reference import PAPER_A_FOCUS_CE, PAPER_A_HARD_CONTROL, PAPER_A_OOD_HIT, PAPER_A_TABLE1

ABLATIONS: tuple[str, ...] = ("fusion_no_gate", "fusion_no_aux", "fusion_no_uniformizer")


def audit_seeds(config: SyntheticProfile, n_seeds: int | None = None) -> list[int]:
    """``n_seeds`` training seeds from ``config.seed`` on (None: its profile's,
    :data:`semlm.fusion.profiles.AUDIT_SEEDS`)."""
    if n_seeds is None:
        n_seeds = AUDIT_SEEDS[config.name]
    if n_seeds < 1:
        raise ValueError(f"n_seeds must be >= 1, got {n_seeds}")
    return [config.seed + i for i in range(n_seeds)]


UNIT = (0.0, 1.0)  # accuracies and hit rates: intervals clipped to [0, 1]


def audit_runs(config: SyntheticProfile, seeds: Sequence[int], steering_seeds: Sequence[int] = ()) -> list[RunSpec]:
    """Chapter 4's runs: baseline and fusion in both settings, the ablations and the control-code
    model (causal), per seed; and the causal fusion model of every ``steering_seeds`` seed that is not
    among ``seeds`` (the extra seeds of ``A-feature-steering`` and of the OOD hit rates, :func:`steering_seeds`,
    :func:`ood_seeds`; each once)."""
    specs = []
    for seed in seeds:
        seeded = replace(config, seed=seed)
        specs += synthetic_runs(seeded)
        specs += synthetic_runs(seeded, ABLATIONS + ("control_code",), ("causal",))
    for seed in dict.fromkeys(s for s in steering_seeds if s not in seeds):
        specs += synthetic_runs(replace(config, seed=seed), ("fusion",), ("causal",))
    return specs


def steering_seeds(config: SyntheticProfile, seeds: Sequence[int]) -> list[int]:
    """``A-feature-steering``'s training seeds: the audit's ``seeds`` and, from ``config.seed`` on, as many more as
    :data:`semlm.fusion.profiles.STEERING_SEEDS` asks at its profile."""
    return list(seeds) + [s for s in range(config.seed, config.seed + STEERING_SEEDS[config.name]) if s not in seeds]


def ood_seeds(config: SyntheticProfile, seeds: Sequence[int]) -> list[int]:
    """The seeds of the causal fusion model's out-of-distribution hit rates (``A-T4-ood-pos`` / ``-neg``): the
    audit's ``seeds`` and, from ``config.seed`` on, as many more as :data:`semlm.fusion.profiles.OOD_SEEDS` asks."""
    return list(seeds) + [s for s in range(config.seed, config.seed + OOD_SEEDS[config.name]) if s not in seeds]


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


def control_reports(audit: AuditRuns, config: SyntheticProfile, n: int) -> dict[tuple[str, str, int], dict]:
    """``control_report`` of every fusion-like and control-code model of the audit (``config``: its corpus)."""
    data = {s: prepare_data(config.corpus, s) for s in SETTINGS}
    coded = prepare_data(config.corpus, "causal", codes=True)
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


def features_only_decodes(model, featurizer, grammar: ClauseGrammar, n: int, seed: int,
                          requests: dict[str, Request] = FEATURE_STEERING_REQUESTS) -> dict[str, list[list[str]]]:
    """``n`` sentences per request (default the mirror-image pair :data:`FEATURE_STEERING_REQUESTS`) decoded with
    :data:`FEATURES_ONLY`, both requests with the same random numbers: a model whose features do not steer writes
    the same sentences under both."""
    return {name: generate(model, featurizer, grammar, n, request, config=FEATURES_ONLY, seed=seed + 50)
            for name, request in requests.items()}


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


def feature_steering(audit: AuditRuns, config: SyntheticProfile, n: int, seeds: Sequence[int] | None = None,
                     requests: dict[str, Request] = FEATURE_STEERING_REQUESTS) -> FeatureSteering:
    """A-feature-steering's measurement: every seed's causal fusion model (``seeds``: default the audit's) decoded
    with :data:`FEATURES_ONLY` under both ``requests`` (default the mirror-image pair, which differ only in the
    polarity columns), judged by the lexicon; per-seed requested and opposite-request accuracies and their
    difference; and, over the audit's seeds, which column group of the paper's two requests moves p(positive) at
    the adjective (:func:`column_shifts`)."""
    seeds = list(audit.seeds if seeds is None else seeds)
    data = prepare_data(config.corpus, "causal")
    grammar = ClauseGrammar(data.vocab)
    shares = {seed: judged_polarity(features_only_decodes(audit.runs[("causal", "fusion", seed)].load(),
                                                          data.featurizer, grammar, n, seed, requests))
              for seed in seeds}
    requested, opposite = zip(*(steering_accuracies(shares[seed]) for seed in seeds))
    written = {name: request.features() for name, request in requests.items()}
    return FeatureSteering(
        seeds=seeds, n_per_request=n, requested=Interval.of_mean(requested, UNIT),
        opposite=Interval.of_mean(opposite, UNIT), paired=Interval.paired(requested, opposite),
        judged_positive={name: Interval.of_mean([shares[seed][name]["POS"] for seed in seeds], UNIT)
                         for name in requests},
        requests=written, requests_description=describe_requests(requests),
        differing_predicates=differing_predicates(requests["pos"], requests["neg"]),
        column_shifts=column_shifts(audit, config))


def differing_predicates(first: Request, second: Request) -> list[str]:
    """The predicates (in :data:`REQUEST_FEATURES` order) whose written values differ between two requests (a
    predicate one of them leaves unset counts as differing: it keeps the model's own value there)."""
    return [k for k in REQUEST_FEATURES if (k in first.values) != (k in second.values) or first.get(k) != second.get(k)]


# --- which column group of a request moves p(positive) at the adjective (exact, over every prefix) ---------

#: The models of the column-shift table: chapter 4's causal fusion model and its reads-ahead (published) one.
SHIFT_MODELS = {"causal fusion": "causal", "published fusion": "published"}


def adjective_slot_prefixes(vocab) -> torch.Tensor:
    """[500, 7] every ``<bos> subject verb the object , intensifier`` prefix of the grammar (5 x 5 x 5 x 4): the
    position after each is the adjective slot."""
    rows = [[vocab.bos_id, *vocab.ids([s, v, "the", o, ",", i])]
            for s, v, o, i in itertools.product(syn.SUBJECTS, syn.VERBS, syn.OBJECTS, syn.INTENSIFIERS)]
    return torch.tensor(rows)


@torch.no_grad()
def positive_share_at_adjective(model, featurizer, prefixes: torch.Tensor, written: dict[str, float]) -> torch.Tensor:
    """[B] p(positive adjective | an adjective comes next) after each prefix, ``written`` (predicate -> value) in the
    newest position's features (the rest as ``featurizer`` computes them): the model's softmax renormalised over
    the adjectives, the words the grammar mask leaves at that slot."""
    vocab = featurizer.vocab
    features = featurizer(prefixes)
    if written:
        features[:, -1, [feature_index(k) for k in written]] = torch.tensor(list(written.values())).to(features)
    model.eval()
    logits = model(prefixes, features, torch.ones_like(prefixes, dtype=torch.bool)).logits[:, -1].double()
    adjectives = vocab.ids(syn.POSITIVE_ADJECTIVES + syn.NEGATIVE_ADJECTIVES)
    probabilities = logits[:, adjectives].softmax(-1)
    return probabilities[:, :len(syn.POSITIVE_ADJECTIVES)].sum(-1)


def written_columns(requests: dict[str, Request] = PAPER_REQUESTS) -> dict[str, dict[str, list[float]]]:
    """Per column group (and ``all`` of them), the predicates either request sets, with [positive request's value,
    negative's] (a predicate a request leaves unset written as 0, as steering reads it)."""
    pos, neg = requests["pos"], requests["neg"]
    groups = {group: {k: [pos.get(k), neg.get(k)] for k in columns if k in pos.values or k in neg.values}
              for group, columns in COLUMN_GROUPS.items()}
    groups["all"] = {k: v for columns in groups.values() for k, v in columns.items()}
    return {group: columns for group, columns in groups.items() if columns}


def prefix_shifts(model, featurizer, written: dict[str, dict[str, list[float]]]) -> dict[str, float]:
    """Per group of :func:`written_columns`: the mean over every adjective-slot prefix of p(positive) with the
    positive request's values written minus with the negative request's."""
    prefixes = adjective_slot_prefixes(featurizer.vocab)
    return {group: float((positive_share_at_adjective(model, featurizer, prefixes, {k: v[0] for k, v in cols.items()})
                          - positive_share_at_adjective(model, featurizer, prefixes, {k: v[1] for k, v in cols.items()})
                          ).mean()) for group, cols in written.items()}


def column_shifts(audit: AuditRuns, config: SyntheticProfile) -> ColumnShifts:
    """Which column group of the paper's two requests moves p(positive) at the adjective: for the causal and the
    published fusion model of every audit seed, :func:`prefix_shifts`, over seeds."""
    written = written_columns()
    shifts = {}
    for label, setting in SHIFT_MODELS.items():
        featurizer = prepare_data(config.corpus, setting).featurizer
        per_seed = [prefix_shifts(audit.runs[(setting, "fusion", seed)].load(), featurizer, written)
                    for seed in audit.seeds]
        shifts[label] = {group: Interval.of_mean([shift[group] for shift in per_seed]) for group in written}
    return ColumnShifts(seeds=list(audit.seeds), n_prefixes=len(adjective_slot_prefixes(featurizer.vocab)),
                        written=written, shift=shifts)


# --- Table 6 by context: a token's cross-entropy after a trained and after a held-out adjective -------------

#: The focus tokens the grammar writes only right after an adjective (a sentence ends adjective, punctuation), so
#: that every occurrence follows either a trained or a held-out adjective.
AFTER_ADJECTIVE_TOKENS: tuple[str, ...] = ("!", "?")


def focus_ce_after_adjectives(model, data, tokens: Sequence[str] = AFTER_ADJECTIVE_TOKENS) -> dict[str, dict]:
    """Per token: ``{"after_trained": (mean CE, count), "after_held_out": (mean CE, count)}`` over the validation
    positions whose target is the token, split by the word before it (a trained or a held-out adjective); scored as
    the run metrics are (:func:`semlm.core.metrics.score_tokens`), so the count-weighted mean is the token's CE."""
    scores = score_tokens(model, data.val)
    before = torch.cat([batch.input_ids[batch.scored] for batch in data.val.batches(256)])
    held_out = torch.tensor(data.held_out_ids)
    adjectives = torch.tensor(data.vocab.ids(syn.POSITIVE_ADJECTIVES + syn.NEGATIVE_ADJECTIVES))
    trained = adjectives[~torch.isin(adjectives, held_out)]
    out = {}
    for token in tokens:
        hits = scores.targets == data.vocab.id(token)
        split = {"after_trained": hits & torch.isin(before, trained),
                 "after_held_out": hits & torch.isin(before, held_out)}
        if int(hits.sum()) != sum(int(where.sum()) for where in split.values()):
            raise ValueError(f"{token!r} does not always follow an adjective; split only {AFTER_ADJECTIVE_TOKENS}")
        out[token] = {kind: (scores.cross_entropy[where].mean().item() if where.any() else math.nan, int(where.sum()))
                      for kind, where in split.items()}
    return out


def focus_by_context(audit: AuditRuns, config: SyntheticProfile) -> dict[str, dict[str, FocusByContext]]:
    """:func:`focus_ce_after_adjectives` (of :data:`AFTER_ADJECTIVE_TOKENS`) of every baseline and fusion model in
    both settings and every audit seed: token -> arm (``"causal fusion"``...) -> per-seed values and counts after a
    trained and a held-out adjective."""
    measured = {}
    for setting in SETTINGS:
        data = prepare_data(config.corpus, setting)
        for model in MODELS:
            measured[f"{setting} {model}"] = [
                focus_ce_after_adjectives(audit.runs[(setting, model, seed)].load(), data)
                for seed in audit.seeds]
    return {token: {arm: FocusByContext(**{kind: ContextCrossEntropy(values=[seed[token][kind][0] for seed in runs],
                                                                     counts=[seed[token][kind][1] for seed in runs])
                                           for kind in ("after_trained", "after_held_out")})
                    for arm, runs in measured.items()} for token in AFTER_ADJECTIVE_TOKENS}


# --- the result: chapter 4's record over seeds, presenting itself -------------------------------------------

MODELS = ("baseline", "fusion")
#: the Table-1 metrics summarised over seeds (plus ``sem_mse`` for fusion models)
TABLE1_METRICS: tuple[str, ...] = ("ppl", "ppl_seen_only", "ppl_authors_denominator",
                                   "ppl_seen_only_authors_denominator")
FUSION_ONLY = ("sem_mse",)  # the auxiliary head's reconstruction error
#: which of the paper's Table-1 columns each of our metrics compares with (the paper counts the authors' way)
PAPER_COUNTS_AS = {TABLE1_COLUMNS[label]: key for label, key in TABLE1_PAPER.items()}


def _pair(*intervals: Interval) -> str:
    return " / ".join(interval.format(2) for interval in intervals)


def _field(source, name: str):
    return source[name] if isinstance(source, dict) else getattr(source, name)


@dataclass(frozen=True)
class FloorNumbers:
    floor_ppl: float
    floor_seen: float
    paper_ppl_fusion: float
    paper_seen_fusion: float
    floor_ppl_authors: float
    floor_seen_authors: float
    paper_ppl_baseline: float
    paper_below: str  # the paper's models whose PPL lies below the floor counted the authors' way


@dataclass(frozen=True)
class Floors:
    """The causal floors (:func:`semlm.fusion.leakage.causal_floors`) beside the paper's Table 1, as a chapter shows
    them: :meth:`table` and the numbers its prose cites."""

    floors: dict

    def table(self):
        """The causal floors beside the paper's Table 1 (which counts the authors' way)."""
        labels = [label for label in TABLE1_COLUMNS if label != "semantic MSE"]
        columns = {"causal floor": {label: self.floors[TABLE1_COLUMNS[label]] for label in labels}}
        columns.update({f"paper, {kind}": {label: PAPER_A_TABLE1[kind].get(TABLE1_PAPER.get(label))
                                           for label in labels} for kind in MODELS})
        return pd.DataFrame(columns).round(3)

    def numbers(self) -> FloorNumbers:
        floors, paper = self.floors, {m: PAPER_A_TABLE1[m]["ppl"] for m in MODELS}
        below = [m for m, v in paper.items() if v < floors["ppl_authors_denominator"]]
        return FloorNumbers(
            floor_ppl=floors["ppl"], floor_seen=floors["ppl_seen_only"],
            paper_ppl_fusion=PAPER_A_TABLE1["fusion"]["ppl"],
            paper_seen_fusion=PAPER_A_TABLE1["fusion"]["ppl_seen_only"],
            floor_ppl_authors=floors["ppl_authors_denominator"],
            floor_seen_authors=floors["ppl_seen_only_authors_denominator"], paper_ppl_baseline=paper["baseline"],
            paper_below=" and ".join(below) or "neither")


@dataclass(frozen=True)
class GainNumbers:
    gain_causal: str
    gain_published: str
    gain_causal_verdict: str
    gain_published_verdict: str
    n_seeds: int
    seen_causal_baseline: float
    seen_causal_fusion: float
    seen_published_baseline: float
    seen_published_fusion: float
    causal_side: str     # the causal fusion model's mean seen-only PPL against the seen-only floor
    published_side: str  # and the published models'


@dataclass(frozen=True)
class FocusNumbers:
    below_published: str  # the focus tokens whose CE lies below the training oracle's
    below_causal: str
    below_paper: str


@dataclass(frozen=True)
class ContextNumbers:
    excl_pub_trained: float
    excl_pub_held: float
    excl_held_share: float
    excl_causal_trained: float
    excl_causal_held: float


@dataclass(frozen=True)
class ControlNumbers:
    hard_min: float
    hard_side: str
    ood_n_causal: int
    ood_range_causal: str
    ood_range_published: str


@dataclass(frozen=True)
class AblationNumbers:
    mse_full: float
    mse_no_aux: float
    mse_side: str  # whether the model without the auxiliary head lies inside the full model's interval


@dataclass(frozen=True)
class CodeNumbers:
    code_soft_pos: float
    code_soft_neg_punct: float
    code_ood_pos: float
    fusion_ood_pos: float
    code_verdict: str
    ood_verdict: str


#: the column-shift table's models as the prose's glue names call them, and the column groups it cites
SHIFT_KEYS = {"causal fusion": "causal", "published fusion": "pub"}
SHIFT_GROUPS = ("polarity", "is_question")
#: :meth:`LeakageAudit.shift_numbers`: the table's prefixes and seeds, then ``shift_{model}_{group}``
ShiftNumbers = make_dataclass("ShiftNumbers", [("shift_prefixes", int), ("shift_seeds", str)] + [
    (f"shift_{key}_{group}", str) for key in SHIFT_KEYS.values() for group in SHIFT_GROUPS], frozen=True)


def seed_points(summaries: dict[str, object], seeds, metrics=("ppl", "ppl_seen_only")):
    """Input of ``plots.plot_seed_intervals``: one row per (row label, metric, seed) with its summary;
    ``summaries`` maps a row label to something holding an :class:`Interval` per metric."""
    return pd.DataFrame([
        {"metric": k, "row": row, "seed": seed, "value": value, "mean": _field(source, k).mean,
         "ci_low": _field(source, k).low, "ci_high": _field(source, k).high}
        for row, source in summaries.items() for k in metrics for seed, value in zip(seeds, _field(source, k).values)])


def gain_verdict(gain: Interval) -> str:
    if len(gain.values) < 2 or gain.low <= 0 <= gain.high:
        return "no difference detected (the interval contains 0)"
    return "fusion lower" if gain.low > 0 else "fusion higher"


class LeakageAudit(LeakageAuditRecord):
    """Chapter 4's record (:meth:`of`) presenting itself: Table 1, control (Tables 2-4), Table 6, ablations,
    control codes and feature steering over seeds."""

    @classmethod
    def of(cls, audit: AuditRuns, reports: dict, floors: dict, n_per_request: int,
           by_context: dict[str, dict[str, FocusByContext]] | None = None,
           ood_seeds: Sequence[int] | None = None) -> LeakageAudit:
        """Every over-seeds number from the trained models, their control reports
        (:func:`semlm.fusion.audit.control_reports`) and the floors (:func:`semlm.fusion.leakage.causal_floors`);
        ``by_context`` is :func:`focus_by_context`, ``ood_seeds`` the seeds of the causal fusion model's
        out-of-distribution hit rates (:func:`ood_seeds`; default the audit's)."""
        seeds = audit.seeds
        ood_seeds = list(seeds if ood_seeds is None else ood_seeds)

        def reported(setting: str, model: str, *path: str, over: Sequence[int] = seeds) -> Interval:  # over seeds
            values = [reduce(operator.getitem, path, reports[(setting, model, seed)]) for seed in over]
            return Interval.of_mean([v["value"] if isinstance(v, dict) else v for v in values], UNIT)

        def accuracies(setting: str, model: str, modes) -> dict:  # {mode: {request: {adj_acc, punct_acc}}}
            return {mode: {cls: {k: reported(setting, model, mode, cls, k) for k in ("adj_acc", "punct_acc")}
                           for cls in PAPER_REQUESTS} for mode in modes}

        def ood(setting: str, model: str, over: Sequence[int] = seeds) -> dict[str, Interval]:
            return {cls: reported(setting, model, "ood_hit", cls, over=over) for cls in PAPER_REQUESTS}

        ablations = {}
        for variant in MODELS + ABLATIONS:
            ablations[variant] = {k: audit.over_seeds("causal", variant, k) for k in ("ppl", "ppl_seen_only")}
            if variant != "baseline":
                ablations[variant].update(
                    sem_mse=audit.over_seeds("causal", variant, "sem_mse"), ood_hit=ood("causal", variant),
                    soft_adj_acc={cls: reported("causal", variant, "soft", cls, "adj_acc") for cls in PAPER_REQUESTS})
        focus_seeds = {token: {f"{s} {m}": [audit.runs[(s, m, seed)].metrics.focus_ce[token] for seed in seeds]
                               for s in SETTINGS for m in MODELS} for token in FOCUS_TOKENS}
        return cls(
            seeds=list(seeds), n_per_request=n_per_request, floors=floors,
            table1={s: {m: {k: audit.over_seeds(s, m, k)
                            for k in TABLE1_METRICS + (FUSION_ONLY if m == "fusion" else ())}
                        for m in MODELS} for s in SETTINGS},
            control={s: accuracies(s, "fusion", ("hard", "soft")) for s in SETTINGS},
            ood_hit={s: ood(s, "fusion", ood_seeds if s == "causal" else seeds) for s in SETTINGS},
            ood_hit_seeds={s: ood_seeds if s == "causal" else list(seeds) for s in SETTINGS},
            confusion_diagonal={s: reported(s, "fusion", "confusion_diagonal") for s in SETTINGS},
            paired_gain_seen_only={s: Interval.paired(audit.values(s, "baseline", "ppl_seen_only"),
                                                      audit.values(s, "fusion", "ppl_seen_only")) for s in SETTINGS},
            focus_ce_seeds=focus_seeds, focus_ce_by_context=by_context,
            focus_ce={token: {"training oracle": floors["focus_ce"][token],
                              **{arm: Interval.of_mean(values).mean for arm, values in by_arm.items()},
                              "paper fusion": PAPER_A_FOCUS_CE["fusion"][token]}
                      for token, by_arm in focus_seeds.items()},
            ablations=ablations,
            control_code_baseline={"ppl": audit.over_seeds("causal", "control_code", "ppl"),
                                   "ppl_seen_only": audit.over_seeds("causal", "control_code", "ppl_seen_only"),
                                   **accuracies("causal", "control_code", ("soft", "hard")),
                                   "ood_hit": ood("causal", "control_code")})

    def table1_frame(self):
        """Table 1 over seeds: one row per setting, model and metric, with the paper and the floor."""
        return pd.DataFrame([
            {"setting": SETTING_LABELS[s], "model": m, "metric": k,
             "mean [95% CI]": value.format(4 if k == "sem_mse" else 3),
             "paper": PAPER_A_TABLE1[m].get(PAPER_COUNTS_AS.get(k, "")), "causal floor": getattr(self.floors, k, None)}
            for s in SETTINGS for m in MODELS for k in TABLE1_METRICS + FUSION_ONLY
            if (value := getattr(getattr(self.table1[s], m), k)) is not None
        ]).set_index(["setting", "model", "metric"])

    def table1_points(self):
        """Table 1's perplexities per seed and over seeds, per setting and model."""
        return seed_points({f"{s} / {m}": getattr(self.table1[s], m) for s in SETTINGS for m in MODELS}, self.seeds)

    def gain_frame(self):
        """Per setting: baseline - fusion seen-only PPL per seed, over seeds, and the verdict."""
        return pd.DataFrame([{"setting": SETTING_LABELS[s],
                              **{f"seed {k}": round(v, 4) for k, v in zip(self.seeds, gain.values)},
                              "mean [95% CI]": gain.format(), "verdict": gain_verdict(gain)}
                             for s, gain in self.paired_gain_seen_only.items()]).set_index("setting")

    def gain_numbers(self) -> GainNumbers:
        """The paired seen-only gain per setting with its verdict, the seen-only PPL of each setting's models, and
        which side of the seen-only floor they lie on."""
        gain, floor = self.paired_gain_seen_only, self.floors.ppl_seen_only
        seen = {(s, m): getattr(self.table1[s], m).ppl_seen_only.mean for s in SETTINGS for m in MODELS}
        return GainNumbers(
            **{f"gain_{s}": gain[s].format() for s in SETTINGS},
            **{f"gain_{s}_verdict": gain_verdict(gain[s]) for s in SETTINGS},
            n_seeds=len(self.seeds), **{f"seen_{s}_{m}": v for (s, m), v in seen.items()},
            causal_side="above" if seen["causal", "fusion"] >= floor else "below",
            published_side=("both below it" if max(seen["published", m] for m in MODELS) < floor
                            else "not both below it"))

    def focus_numbers(self) -> FocusNumbers:
        return FocusNumbers(**{f"below_{s}": ", ".join(self.below_oracle(f"{s} fusion")) or "none"
                               for s in ("published", "causal", "paper")})

    def context_numbers(self) -> ContextNumbers:
        """The "!" row of :meth:`focus_context_frame` for the published and the causal fusion model."""
        frame = self.focus_context_frame()
        published, causal = frame.loc[("!", "published fusion")], frame.loc[("!", "causal fusion")]
        return ContextNumbers(excl_pub_trained=published["after trained"], excl_pub_held=published["after held-out"],
                              excl_held_share=published["held-out share"],
                              excl_causal_trained=causal["after trained"], excl_causal_held=causal["after held-out"])

    def control_numbers(self) -> ControlNumbers:
        """The lowest hard-control accuracy of any request and seed, and the causal and published OOD hit ranges."""
        hard = min(v for modes in self.control.values() for c in modes.hard.values()
                   for v in (*c.adj_acc.values, *c.punct_acc.values))
        hits = {s: self.ood_hit[s]["pos"].values for s in ("causal", "published")}
        ranges = {f"ood_range_{s}": f"{min(values):.2f} to {max(values):.2f}" for s, values in hits.items()}
        return ControlNumbers(hard_min=hard, hard_side="exact" if hard == 1.0 else "not exact",
                              ood_n_causal=len(self.ood_hit_seeds["causal"]), **ranges)

    def ablation_numbers(self) -> AblationNumbers:
        full, no_aux = (self.ablations[v]["sem_mse"] for v in ("fusion", "fusion_no_aux"))
        inside = full.low <= no_aux.mean <= full.high
        return AblationNumbers(mse_full=full.mean, mse_no_aux=no_aux.mean, mse_side="inside" if inside else "outside")

    def focus_frame(self):
        """Paper Table 6 over seeds: mean CE per focus token and model, the training oracle's (a reference, not a
        floor: one token's CE can go below it) and the paper's."""
        return pd.DataFrame.from_dict(self.focus_ce, orient="index").rename_axis("token")

    def focus_context_frame(self):
        """Table 6 by context: per token written only after an adjective and per model, the mean over seeds of its
        cross-entropy overall, after a trained and after a held-out adjective, and the held-out share of its
        positions (empty when the record has no split)."""
        def mean(values):
            finite = [v for v in values if math.isfinite(v)]
            return sum(finite) / len(finite) if finite else math.nan

        rows = []
        for token, by_arm in (self.focus_ce_by_context or {}).items():
            for arm, split in by_arm.items():
                trained, held_out = split.after_trained, split.after_held_out
                total = sum(trained.counts) + sum(held_out.counts)
                rows.append({"token": token, "model": arm, "overall": mean(self.focus_ce_seeds[token][arm]),
                             "after trained": mean(trained.values), "after held-out": mean(held_out.values),
                             "held-out share": sum(held_out.counts) / total if total else math.nan})
        return pd.DataFrame(rows, columns=["token", "model", "overall", "after trained", "after held-out",
                                           "held-out share"]).set_index(["token", "model"])

    def below_oracle(self, column: str, margin: float = 0.05) -> list[str]:
        """Focus tokens whose CE in ``column`` (``"causal fusion"``, ``"paper fusion"``...) lies more than ``margin``
        below the training oracle's."""
        return [token for token, row in self.focus_ce.items()  # held out: the oracle never says it
                if math.isfinite(row["training oracle"]) and row[column] < row["training oracle"] - margin]

    def control_table(self):
        """Tables 2-4 over seeds: hard and soft control and OOD hits of the fusion model, with the paper's."""
        paper = PAPER_A_HARD_CONTROL
        return pd.DataFrame([
            {"setting": SETTING_LABELS[s], "request": cls,
             "hard adj / punct": _pair(modes.hard[cls].adj_acc, modes.hard[cls].punct_acc),
             "soft adj / punct": _pair(modes.soft[cls].adj_acc, modes.soft[cls].punct_acc),
             "OOD hit": self.ood_hit[s][cls].format(2), "paper OOD": PAPER_A_OOD_HIT[cls],
             "paper hard": f"{paper[cls]['adj_acc']:.2f} / {paper[cls]['punct_acc']:.2f}"}
            for s, modes in self.control.items() for cls in PAPER_REQUESTS]).set_index(["setting", "request"])

    def ablation_table(self):
        """The causal ablations over seeds: perplexities, semantic MSE, OOD hits and soft adjective accuracy."""
        return pd.DataFrame([
            {"model": v, "PPL": e["ppl"].format(), "seen-only PPL": e["ppl_seen_only"].format(),
             "sem MSE": e["sem_mse"].format(4) if "sem_mse" in e else "",
             **{label: _pair(*e[key].values()) if key in e else ""
                for label, key in (("OOD hit pos / neg", "ood_hit"), ("soft adj acc pos / neg", "soft_adj_acc"))}}
            for v, e in self.ablations.items()]).set_index("model")

    def code_table(self):
        """The control-code baseline beside the causal fusion model."""
        code, fusion = self.control_code_baseline, self.table1["causal"].fusion
        sources = {"control codes (causal)": (code["ppl"], code["ppl_seen_only"], code["soft"], code["ood_hit"]),
                   "fusion (causal)": (fusion.ppl, fusion.ppl_seen_only, self.control["causal"].soft,
                                       self.ood_hit["causal"])}
        return pd.DataFrame([
            {"model": name, "PPL": ppl.format(), "seen-only PPL": seen.format(),
             **{f"soft {cls} adj / punct": _pair(_field(soft[cls], "adj_acc"), _field(soft[cls], "punct_acc"))
                for cls in PAPER_REQUESTS},
             **{f"OOD hit {cls}": ood[cls].format(2) for cls in PAPER_REQUESTS}}
            for name, (ppl, seen, soft, ood) in sources.items()]).set_index("model")

    def code_numbers(self) -> CodeNumbers:
        """The control-code baseline's soft control and OOD hits beside the causal fusion model's, and the
        chapter's two sentences on them: how strong the codes are at this profile, and whether the feature channel
        changes the out-of-distribution hits."""
        code, fusion_ood = self.control_code_baseline, self.ood_hit["causal"]["pos"].mean
        worst = min(code["soft"][c][k].mean for c in PAPER_REQUESTS for k in ("adj_acc", "punct_acc"))
        same_ood = abs(code["ood_hit"]["pos"].mean - fusion_ood) < 0.05
        return CodeNumbers(
            code_soft_pos=code["soft"]["pos"]["adj_acc"].mean,
            code_soft_neg_punct=code["soft"]["neg"]["punct_acc"].mean,
            code_ood_pos=code["ood_hit"]["pos"].mean, fusion_ood_pos=fusion_ood,
            code_verdict=("the codes are a strong, cheap control that needs no feature bank" if worst >= 0.9
                          else "at this profile the codes are a weak control"),
            ood_verdict=("which says that the mixture sampler, not the feature channel, "
                         "does the out-of-distribution work" if same_ood
                         else "so the feature channel changes how often the mixture reaches unseen words"))

    def steering_frame(self):
        """A-feature-steering's numbers per training seed (the causal fusion model, features only): the share judged
        positive under each request, the requested and opposite-request accuracies and their difference, and a
        last row with each column's mean [95% interval] over seeds."""
        steering = self.feature_steering
        columns = {"positive request: judged positive": steering.judged_positive["pos"],
                   "negative request: judged positive": steering.judged_positive["neg"],
                   "requested accuracy": steering.requested, "opposite-request accuracy": steering.opposite,
                   "requested - opposite": steering.paired}
        frame = pd.DataFrame({name: interval.values for name, interval in columns.items()},
                             index=pd.Index(steering.seeds, name="seed")).round(3).astype(object)
        frame.loc["mean [95% CI]"] = [interval.format(3, signed=name == "requested - opposite")
                                      for name, interval in columns.items()]
        return frame

    def column_shift_frame(self):
        """Which column group of the paper's two requests moves p(positive) at the adjective: per group (rows) the
        predicates written (positive / negative request) and, per model, the mean [95% interval] over seeds of the
        per-seed mean shift over every prefix."""
        shifts = self.feature_steering.column_shifts
        return pd.DataFrame([
            {"columns written": group,
             "positive / negative request": ", ".join(f"{k} {v[0]:g} / {v[1]:g}" for k, v in written.items()),
             **{model: by_group[group].format(3, signed=True) for model, by_group in shifts.shift.items()}}
            for group, written in shifts.written.items()]).set_index("columns written")

    def shift_numbers(self) -> ShiftNumbers:
        """The column-shift table's prefixes and seeds, and the polarity and is_question shifts of both models."""
        shifts = self.feature_steering.column_shifts
        return ShiftNumbers(
            shift_prefixes=shifts.n_prefixes, shift_seeds=", ".join(map(str, shifts.seeds)),
            **{f"shift_{key}_{group}": shifts.shift[model][group].format(3, signed=True)
               for model, key in SHIFT_KEYS.items() for group in SHIFT_GROUPS})

    def key_numbers(self):
        """The chapter's headline numbers in one column."""
        floors, table1, ood = self.floors, self.table1, self.ood_hit["causal"]
        return pd.DataFrame({
            "causal floor PPL / seen-only": f"{floors.ppl:.3f} / {floors.ppl_seen_only:.3f}",
            "published fusion seen-only PPL": table1["published"].fusion.ppl_seen_only.format(),
            "causal fusion seen-only PPL": table1["causal"].fusion.ppl_seen_only.format(),
            "causal baseline seen-only PPL": table1["causal"].baseline.ppl_seen_only.format(),
            "causal fusion OOD hit pos / neg": _pair(ood["pos"], ood["neg"]),
            "seeds": ", ".join(map(str, self.seeds)),
        }, index=["value"]).T
