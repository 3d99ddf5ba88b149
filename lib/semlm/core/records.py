"""Typed chapter metric records and the one interval type the book reports.

Every chapter ends by filling the record of this module that names what it measured
(:class:`LeakageAuditRecord` for chapter 4, :class:`TopicDriftRecord` for chapter 9, ...) and
handing it to :func:`semlm.book.report.write_chapter_metrics`. The claims of the reproducibility
report (:mod:`semlm.book.claims`) read the records back by attribute
(``audit.table1["causal"].fusion.ppl_seen_only.low``), never by string paths.

A record holds, typed, exactly the fields the claims and the report read; everything else a
chapter wants to keep (training histories, examples, settings) rides along in ``extra`` and
is written beside them. The JSON shape is the one the files have always had, so
:func:`load_record` reads old files too, and a field a chapter did not write loads as ``None``
(the claim then says "not run at this profile").

:class:`Interval` is the book's one interval: a mean (or a rate) with its 95% bounds, built by
:meth:`Interval.of_mean` (Student t over seeds), :meth:`Interval.of_proportion` (Wilson),
:meth:`Interval.paired` (per-seed differences) or :meth:`Interval.welch` (two independent samples),
and printed one way, ``0.123 [0.100, 0.150]``.

This module imports no torch, so the report can be built without it.
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass, field, fields
from typing import ClassVar, Mapping, Sequence

# --- the interval ---------------------------------------------------------------------------

# Two-sided 95% Student-t quantiles t_{0.975, df} for df = 1..30 (standard tables); beyond 30
# the normal quantile is within 2% and is used instead. Kept here to avoid a scipy dependency.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_Z975 = 1.959964


def t_quantile_975(df: int) -> float:
    """The two-sided 95% Student-t quantile for ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    return _T975[df - 1] if df <= len(_T975) else _Z975


def wilson_bounds(successes: int, n: int, z: float = _Z975) -> tuple[float, float]:
    """95% Wilson score interval of a proportion (well-behaved at 0 and 1, unlike the normal one)."""
    if n == 0:
        return float("nan"), float("nan")
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # At 0 and n successes the bounds are exactly 0 and 1; say so instead of 0.999999...
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def _number(value) -> float:
    """A float; ``None`` (how JSON writes NaN) becomes NaN."""
    return float("nan") if value is None else float(value)


@dataclass(frozen=True)
class Interval:
    """A mean (``kind="mean"``) or a rate (``kind="proportion"``) with its 95% interval ``[low, high]``.

    ``values`` are the replicates a mean was computed from (seeds), ``n`` their number (the number
    of trials of a rate, the two sample sizes of a Welch difference), ``successes`` the successes of a rate.
    """

    mean: float
    low: float
    high: float
    n: int | tuple[int, int] | None = None
    values: tuple[float, ...] | None = None
    kind: str = "mean"
    successes: int | None = None

    # -- constructors --
    @classmethod
    def of_mean(cls, values: Sequence[float], bounds: tuple[float, float] | None = None) -> Interval:
        """Mean and two-sided 95% Student-t interval of independent replicates (e.g. seeds).

        With one value the interval is that value (no spread can be estimated), which the book
        reports as n = 1. ``bounds`` clips the interval to the range the quantity can take
        (``(0, 1)`` for an accuracy).
        """
        values = tuple(float(v) for v in values)
        if not values:
            raise ValueError("an interval of a mean needs at least one value, got none")
        n = len(values)
        mean = sum(values) / n
        if n == 1:
            return cls(mean, mean, mean, n, values)
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
        half = t_quantile_975(n - 1) * sd / math.sqrt(n)
        low, high = mean - half, mean + half
        if bounds is not None:
            low, high = max(low, bounds[0]), min(high, bounds[1])
        return cls(mean, low, high, n, values)

    @classmethod
    def of_proportion(cls, successes: int, n: int) -> Interval:
        """The rate ``successes / n`` with its 95% Wilson interval (NaN for ``n = 0``)."""
        if n < 0 or successes < 0 or successes > n:
            raise ValueError(f"a proportion needs 0 <= successes <= n, got {successes} of {n}")
        low, high = wilson_bounds(successes, n)
        return cls(successes / n if n else float("nan"), low, high, n, None, "proportion", successes)

    @classmethod
    def paired(cls, first: Sequence[float], second: Sequence[float]) -> Interval:
        """Mean and 95% t-interval of ``first[i] - second[i]`` (paired by seed)."""
        if len(first) != len(second):
            raise ValueError(f"paired values need the same seeds, got {len(first)} and {len(second)}")
        return cls.of_mean([a - b for a, b in zip(first, second)])

    @classmethod
    def welch(cls, first: Sequence[float], second: Sequence[float]) -> Interval:
        """Mean of ``first`` minus mean of ``second`` with a Welch 95% interval (independent samples, e.g.
        generations of two models; NaNs dropped). ``n`` is the pair of sample sizes; with fewer than two
        values on a side the bounds are NaN (no spread can be estimated)."""
        a = [float(x) for x in first if math.isfinite(float(x))]
        b = [float(x) for x in second if math.isfinite(float(x))]
        n = (len(a), len(b))
        if len(a) < 2 or len(b) < 2:
            diff = (sum(a) / len(a) if a else float("nan")) - (sum(b) / len(b) if b else float("nan"))
            return cls(diff, float("nan"), float("nan"), n)
        ma, mb = sum(a) / len(a), sum(b) / len(b)
        va = sum((x - ma) ** 2 for x in a) / (len(a) - 1) / len(a)
        vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1) / len(b)
        se = math.sqrt(va + vb)
        if se == 0:
            return cls(ma - mb, ma - mb, ma - mb, n)
        df = (va + vb) ** 2 / ((va ** 2) / (len(a) - 1) + (vb ** 2) / (len(b) - 1))
        half = t_quantile_975(max(1, int(df))) * se
        return cls(ma - mb, ma - mb - half, ma - mb + half, n)

    @classmethod
    def from_dict(cls, data: Mapping) -> Interval:
        """Read ``{mean, ci_low, ci_high[, values | n]}`` or a rate ``{value, ci_low, ci_high, k, n}``."""
        if isinstance(data, Interval):
            return data
        if not isinstance(data, Mapping) or not ("mean" in data or "value" in data):
            raise ValueError(f"an interval needs a mapping with 'mean' (or 'value'), 'ci_low' and 'ci_high', "
                             f"got {data!r}")
        proportion = "mean" not in data
        mean = _number(data["value"] if proportion else data["mean"])
        values = data.get("values")
        values = tuple(_number(v) for v in values) if values is not None else None
        n = data.get("n", len(values) if values is not None else None)
        n = tuple(int(x) for x in n) if isinstance(n, (list, tuple)) else int(n) if n is not None else None
        return cls(mean, _number(data.get("ci_low", mean)), _number(data.get("ci_high", mean)), n, values,
                   "proportion" if proportion else "mean", data.get("k"))

    def to_dict(self) -> dict:
        """The JSON shape of the metrics files: ``{mean, ci_low, ci_high, values}`` (``n`` when the
        values are not kept) or, for a rate, ``{value, ci_low, ci_high, k, n}``."""
        if self.kind == "proportion":
            out = {"value": self.mean, "ci_low": self.low, "ci_high": self.high}
            if self.successes is not None:
                out["k"] = self.successes
            if self.n is not None:
                out["n"] = self.n
            return out
        out = {"mean": self.mean, "ci_low": self.low, "ci_high": self.high}
        if self.values is not None:
            out["values"] = list(self.values)
        elif self.n is not None:
            out["n"] = list(self.n) if isinstance(self.n, tuple) else self.n
        if self.successes is not None:  # a rate written with a "mean" key (chapter 9's corpus drift)
            out["k"] = self.successes
        return out

    # -- reading --
    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    @property
    def finite(self) -> bool:
        """All three numbers are finite (a rate of nothing, or NaN written as null, is not)."""
        return all(math.isfinite(x) for x in (self.mean, self.low, self.high))

    def above(self, x: float) -> bool:
        """The whole interval lies strictly above ``x``."""
        return self.low > x

    def below(self, x: float) -> bool:
        """The whole interval lies strictly below ``x``."""
        return self.high < x

    def excludes(self, x: float) -> bool:
        return self.above(x) or self.below(x)

    def format(self, digits: int = 3, signed: bool = False) -> str:
        """``0.123 [0.100, 0.150]`` (``+0.123 [+0.100, +0.150]`` if signed); ``undefined`` if not finite."""
        if not self.finite:
            return "undefined"
        spec = f"{'+' if signed else ''}.{digits}f"
        return f"{self.mean:{spec}} [{self.low:{spec}}, {self.high:{spec}}]"

    def __format__(self, spec: str) -> str:
        """``f"{interval:.2f}"``, ``f"{interval:+.3f}"``; an empty spec gives 3 digits."""
        if not spec:
            return self.format()
        signed = spec.startswith("+")
        body = spec.lstrip("+")
        if not (body.startswith(".") and body.endswith("f") and body[1:-1].isdigit()):
            raise ValueError(f"an interval formats as '.Nf' or '+.Nf', got {spec!r}")
        return self.format(int(body[1:-1]), signed)

    def __str__(self) -> str:
        return self.format()


# --- records --------------------------------------------------------------------------------

_HINTS: dict[type, dict[str, object]] = {}


def _hints(cls) -> dict[str, object]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _coerce(tp, value, where: str):
    """``value`` (JSON-shaped or already typed) as type ``tp``: Interval, a Record, dict/list of them."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _coerce(inner[0], value, where) if len(inner) == 1 else value
    if tp is Interval:
        if not isinstance(value, (Interval, Mapping)):
            raise ValueError(f"{where} must be an interval ({{mean, ci_low, ci_high}}), got {value!r}")
        return Interval.from_dict(value)
    if isinstance(tp, type) and issubclass(tp, Record):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"{where} must be a mapping for {tp.__name__}, got {value!r}")
        return tp.from_dict(value)
    if origin is dict:
        _, inner = typing.get_args(tp)
        if not isinstance(value, Mapping):
            raise ValueError(f"{where} must be a mapping, got {value!r}")
        return {k: _coerce(inner, v, f"{where}.{k}") for k, v in value.items()}
    if origin in (list, tuple):
        inner = typing.get_args(tp)[0]
        return [_coerce(inner, v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _encode(value):
    if isinstance(value, (Interval, Record)):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


@dataclass(frozen=True, kw_only=True)
class Record:
    """A typed part of a metrics file. Fields hold what the claims and the report read (``None``
    when the chapter did not write it); ``extra`` keeps the rest of the file as written.

    Fields accept their JSON shape too (a ``{mean, ci_low, ci_high}`` dict for an ``Interval``),
    converted on construction, so a chapter can pass the summaries it already computed.
    """

    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        shadowed = sorted(set(self.extra) & {f.name for f in fields(self)})
        if shadowed:
            raise ValueError(f"{type(self).__name__}: pass {', '.join(shadowed)} as field(s), not in extra")
        hints = _hints(type(self))
        for f in fields(self):
            if f.name != "extra":
                where = f"{type(self).__name__}.{f.name}"
                object.__setattr__(self, f.name, _coerce(hints[f.name], getattr(self, f.name), where))

    @classmethod
    def from_dict(cls, data: Mapping):
        if not isinstance(data, Mapping):
            raise ValueError(f"{cls.__name__} needs a mapping, got {type(data).__name__}")
        names = {f.name for f in fields(cls)} - {"extra"}
        return cls(**{k: v for k, v in data.items() if k in names},
                   extra={k: v for k, v in data.items() if k not in names})

    def to_dict(self) -> dict:
        out = dict(_encode(self.extra))
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "extra" and value is not None:
                out[f.name] = _encode(value)
        return out


@dataclass(frozen=True, kw_only=True)
class ChapterRecord(Record):
    """A chapter's metrics file. ``profile`` is read back from the provenance the writer adds."""

    chapter: ClassVar[str] = ""
    profile: str | None = None


# -- paper A's runs: what one trained model measures (``RunRecord.metrics``) --

@dataclass(frozen=True, kw_only=True)
class LanguageModelMetrics(Record):
    """One synthetic-task model on the validation split (``semlm.core.metrics.evaluate_language_model``)."""

    ppl: float | None = None
    ppl_seen_only: float | None = None
    focus_ce: dict[str, float] | None = None
    n_tokens: int | None = None
    ppl_authors_denominator: float | None = None
    ppl_seen_only_authors_denominator: float | None = None
    n_pad_targets: int | None = None
    sem_mse: float | None = None  # fusion models only


@dataclass(frozen=True, kw_only=True)
class SST2Metrics(Record):
    """One SST-2 model on the dev split (``semlm.fusion.sst2_experiment.evaluate_sst2_model``)."""

    ppl: float | None = None
    n_tokens: int | None = None
    sem_mse: float | None = None  # fusion models only


# -- chapters the claims do not read: provenance only, their numbers in ``extra`` --

@dataclass(frozen=True, kw_only=True)
class FeatureBankRecord(ChapterRecord):
    chapter: ClassVar[str] = "01_feature_bank"


@dataclass(frozen=True, kw_only=True)
class FusionTrainingRecord(ChapterRecord):
    chapter: ClassVar[str] = "02_fusion_training"


@dataclass(frozen=True, kw_only=True)
class DecodingRecord(ChapterRecord):
    chapter: ClassVar[str] = "03_controllable_decoding"


@dataclass(frozen=True, kw_only=True)
class XrayRecord(ChapterRecord):
    chapter: ClassVar[str] = "07_xray_and_sweeps"


# -- chapter 4: the leakage audit (paper A's Tables 1-4 and 6 over seeds) --

@dataclass(frozen=True, kw_only=True)
class LanguageModelScores(Record):
    """One model in one setting, each metric over seeds."""

    ppl: Interval | None = None
    ppl_seen_only: Interval | None = None
    ppl_authors_denominator: Interval | None = None
    ppl_seen_only_authors_denominator: Interval | None = None
    sem_mse: Interval | None = None


@dataclass(frozen=True, kw_only=True)
class ModelPair(Record):
    baseline: LanguageModelScores | None = None
    fusion: LanguageModelScores | None = None


@dataclass(frozen=True, kw_only=True)
class ControlAccuracy(Record):
    """Adjective-polarity and punctuation accuracy of one request, over seeds."""

    adj_acc: Interval | None = None
    punct_acc: Interval | None = None


@dataclass(frozen=True, kw_only=True)
class ControlModes(Record):
    """Per request (``pos``/``neg``), under hard and soft control."""

    hard: dict[str, ControlAccuracy] | None = None
    soft: dict[str, ControlAccuracy] | None = None


@dataclass(frozen=True, kw_only=True)
class CausalFloors(Record):
    """What no causal model can beat on average (``semlm.fusion.leakage``)."""

    ppl: float | None = None
    ppl_seen_only: float | None = None
    focus_ce: dict[str, float] | None = None


@dataclass(frozen=True, kw_only=True)
class FeatureSteering(Record):
    """Paper A's own control channel, measured on each seed's causal fusion model: the request written into the
    per-token features, no logit steering, the grammar mask on. Per training seed (``seeds``, in the order of each
    interval's ``values``), ``requested`` is the polarity accuracy with the request given (the mean of the share of
    positive-requested sentences judged positive and of negative-requested sentences judged negative) and
    ``opposite`` the same targets with the opposite request given (the share of negative-requested sentences judged
    positive and of positive-requested ones judged negative); ``paired`` is requested - opposite by seed.
    ``judged_positive`` is the share judged positive per request (``pos`` / ``neg``) over seeds."""

    seeds: list[int] | None = None
    n_per_request: int | None = None
    requested: Interval | None = None
    opposite: Interval | None = None
    paired: Interval | None = None
    judged_positive: dict[str, Interval] | None = None


@dataclass(frozen=True, kw_only=True)
class LeakageAuditRecord(ChapterRecord):
    """Settings are ``causal`` (the language model) and ``published`` (the authors' encoder)."""

    chapter: ClassVar[str] = "04_leakage_audit"
    table1: dict[str, ModelPair] | None = None
    floors: CausalFloors | None = None
    control: dict[str, ControlModes] | None = None
    ood_hit: dict[str, dict[str, Interval]] | None = None
    confusion_diagonal: dict[str, Interval] | None = None
    #: token -> "causal baseline" / "causal fusion" / "published fusion" -> CE per seed
    focus_ce_seeds: dict[str, dict[str, list[float]]] | None = None
    feature_steering: FeatureSteering | None = None  # the causal fusion model, features-only, over seeds


# -- chapter 5: SST-2 --

@dataclass(frozen=True, kw_only=True)
class SST2Model(Record):
    ppl: float | None = None


@dataclass(frozen=True, kw_only=True)
class SST2Setting(Record):
    label: str | None = None
    baseline: SST2Model | None = None
    fusion: SST2Model | None = None


@dataclass(frozen=True, kw_only=True)
class SST2Fusion(Record):
    sem_mse: float | None = None
    sem_mse_published: float | None = None


@dataclass(frozen=True, kw_only=True)
class SST2Control(Record):
    """Sentiment of the continuation judged by VADER (``acc``) for one request."""

    acc: float | None = None
    acc_ci: Interval | None = None
    baseline_acc: float | None = None
    #: the independent classifier's verdict (1 = the requested polarity) per prompt, in prompt order, for the
    #: fusion model and for the baseline with the same steering (what ``A-T7-control`` pairs)
    classifier_correct: list[int] | None = None
    baseline_classifier_correct: list[int] | None = None


@dataclass(frozen=True, kw_only=True)
class SST2ControlModes(Record):
    hard: dict[str, SST2Control] | None = None
    soft: dict[str, SST2Control] | None = None
    features_only: dict[str, SST2Control] | None = None


@dataclass(frozen=True, kw_only=True)
class SST2Judgement(Record):
    """How VADER and the classifier judge a set of continuations (``judge_continuations``): label counts,
    and the share judged as requested (``acc``, ``classifier_acc``) or, with no request, the shares."""

    vader: dict[str, int] | None = None
    classifier: dict[str, int] | None = None
    acc: Interval | None = None
    classifier_acc: Interval | None = None
    vader_pos_share: Interval | None = None
    vader_neg_share: Interval | None = None
    classifier_pos_share: Interval | None = None
    classifier_correct: list[int] | None = None   # per prompt, in prefix order: 1 if the classifier agrees


@dataclass(frozen=True, kw_only=True)
class SST2Record(ChapterRecord):
    chapter: ClassVar[str] = "05_sst2"
    causal: SST2Setting | None = None
    published: SST2Setting | None = None
    fusion: SST2Fusion | None = None
    control: SST2ControlModes | None = None


# -- chapters 6-9: paper B's runs (``RunRecord.metrics`` of the paper-B experiments) --

@dataclass(frozen=True, kw_only=True)
class IdeaRunMetrics(Record):
    """One GPT run of chapters 6 and 7 (``IdeaExperiment``): validation perplexity with the gate
    (``val_ppl``) and without it (``val_ppl_ungated``; None for a plain GPT), training tokens."""

    val_ppl: float | None = None
    val_ppl_ungated: float | None = None
    train_tokens: int | None = None


@dataclass(frozen=True, kw_only=True)
class LoraRunMetrics(Record):
    """One LoRA run of chapter 8: perplexities, trainable parameters by group and in all, frozen ones."""

    val_ppl: float | None = None
    val_ppl_ungated: float | None = None
    trainable: dict[str, int] | None = None
    trainable_params: int | None = None
    frozen_params: int | None = None
    weights_mb: float | None = None


@dataclass(frozen=True, kw_only=True)
class BackboneRunMetrics(Record):
    """The book's small Mistral pre-trained on WikiText-2 (chapter 8's frozen backbone)."""

    wikitext_val_ppl: float | None = None
    n_parameters: int | None = None
    mistral_config: dict | None = None
    dataset: str | None = None


@dataclass(frozen=True, kw_only=True)
class TopicRunMetrics(Record):
    """One GPT of chapter 9: validation perplexity with and without the gate (None for a plain GPT)."""

    val_ppl: float | None = None
    val_ppl_ungated: float | None = None


# -- chapter 6: idea gating on WikiText --

@dataclass(frozen=True, kw_only=True)
class Competence(Record):
    """``semlm.idea.wikitext_experiment.competence``: the models against the best interpolated bigram."""

    passes: bool | None = None
    worst_model: str | None = None
    worst_ratio: float | None = None
    threshold_ratio: float | None = None
    bigram_val_ppl: float | None = None
    model_val_ppl: dict[str, float] | None = None


@dataclass(frozen=True, kw_only=True)
class ValidationScore(Record):
    val_ppl: float | None = None


@dataclass(frozen=True, kw_only=True)
class AuthorsDomain(Record):
    """One domain of the authors' evaluation protocol: per-model summaries and gated - baseline."""

    baseline: dict[str, Interval] | None = None
    gated: dict[str, Interval] | None = None
    difference: dict[str, Interval] | None = None


@dataclass(frozen=True, kw_only=True)
class SeedPaired(Record):
    """One metric over training seeds: each model's per-seed values (``baseline``, ``gated``; a third model
    where there is one, ``control``) with 95% t-intervals, and the per-seed differences."""

    baseline: Interval | None = None
    gated: Interval | None = None
    control: Interval | None = None
    gated_minus_baseline: Interval | None = None
    gated_minus_control: Interval | None = None

    @classmethod
    def of(cls, baseline: Sequence[float], gated: Sequence[float],
           control: Sequence[float] | None = None) -> SeedPaired:
        """From per-seed values in the same seed order (the third model optional)."""
        if control is None:
            return cls(baseline=Interval.of_mean(baseline), gated=Interval.of_mean(gated),
                       gated_minus_baseline=Interval.paired(gated, baseline))
        return cls(baseline=Interval.of_mean(baseline), gated=Interval.of_mean(gated),
                   control=Interval.of_mean(control), gated_minus_baseline=Interval.paired(gated, baseline),
                   gated_minus_control=Interval.paired(gated, control))


@dataclass(frozen=True, kw_only=True)
class IdeaOverSeeds(Record):
    """Chapter 6's plain and gated GPT trained with several seeds (the profile's idea-loss form), each pair
    scored with the authors' protocol and the book's. ``domains[metric][domain]``: per-seed means over the samples
    of that domain (``"all"``: the mean of the domains' means), paired by seed. Metrics: ``book_stickiness`` (the
    book's five WikiText domains and protocol; what ``B-stickiness`` decides on), ``stickiness`` (the authors'
    word count on the continuation only), ``authors_stickiness`` (their count, prompt included), ``distinct_2``."""

    seeds: list[int] | None = None
    gated_run: str | None = None
    val_ppl: SeedPaired | None = None
    domains: dict[str, dict[str, SeedPaired]] | None = None
    #: the sharpening control's temperature over seeds (the pairs' ``control``: the plain GPT at the gated entropy)
    sharpening_temperature: Interval | None = None


@dataclass(frozen=True, kw_only=True)
class IdeaGatingRecord(ChapterRecord):
    chapter: ClassVar[str] = "06_idea_gating"
    dataset: str | None = None
    competence: Competence | None = None
    baseline: ValidationScore | None = None
    gated: ValidationScore | None = None
    authors_protocol: dict[str, AuthorsDomain] | None = None
    over_seeds: IdeaOverSeeds | None = None


# -- chapter 8: LoRA on a frozen 4-bit backbone --

@dataclass(frozen=True, kw_only=True)
class LoraCapacityControl(Record):
    """The LoRA baseline, LoRA + idea gate and the capacity control (LoRA + an output adapter as large as the
    idea head, no idea objective) over training seeds, in one quantisation: validation PPL paired by seed.
    ``competence``: the baseline's validation PPL over the interpolated bigram's on the same tokens."""

    seeds: list[int] | None = None
    quantization: str | None = None
    val_ppl: SeedPaired | None = None
    trainable_params: dict[str, dict[str, int]] | None = None
    competence: Competence | None = None


@dataclass(frozen=True, kw_only=True)
class LoraRecord(ChapterRecord):
    chapter: ClassVar[str] = "08_lora_4bit_idea_gating"
    dataset: str | None = None
    backbone: str | None = None
    baseline: ValidationScore | None = None
    gated: ValidationScore | None = None
    capacity_control: LoraCapacityControl | None = None


# -- chapter 9: topic drift --

@dataclass(frozen=True, kw_only=True)
class TopicModelSummary(Record):
    """One model's (or the per-seed difference gated - plain's) metrics over seeds at one budget.

    ``switch_rate``: topic changes per transition between single-topic sentences; ``excess_drift``:
    ``switch_rate`` minus the data's ``switch_prob`` (below 0: drifting less than the data, a
    miscalibration); ``mix_rate``: share of topical sentences mixing topics; ``drift_rate`` repeats
    ``switch_rate`` (the name older files use); ``ppl_change``: per-seed gated / plain - 1 (paired only).
    """

    switch_rate: Interval | None = None
    excess_drift: Interval | None = None
    mix_rate: Interval | None = None
    drift_rate: Interval | None = None
    distinct_2: Interval | None = None
    stickiness: Interval | None = None
    val_ppl: Interval | None = None
    val_ppl_ungated: Interval | None = None
    ppl_change: Interval | None = None


@dataclass(frozen=True, kw_only=True)
class TopicData(Record):
    drift_rate: Interval | None = None  # the corpus' own switches per transition, as the labeller reads them
    switch_prob: float | None = None    # the generator's switch probability: the data's rate, exactly


@dataclass(frozen=True, kw_only=True)
class TopicBudget(Record):
    """Chapter 9 at one training budget (optimiser steps): both models over seeds and gated - plain."""

    steps: int | None = None
    plain: TopicModelSummary | None = None
    gated: TopicModelSummary | None = None
    paired: TopicModelSummary | None = None


@dataclass(frozen=True, kw_only=True)
class TopicDecision(Record):
    """What decides ``B-topic-drift`` (:func:`semlm.idea.topic_decision.decide`), over the comparable seeds.

    Excess drift (switch rate minus the data's measured rate, ``data_rate``) of the gated model at the largest
    budget (``gated``), of the plain model interpolated to the gated model's validation PPL
    (``plain_at_matched_ppl``; ``matched_ppl`` per seed), of that plain model sampled at the gated model's
    next-token entropy (``sharpened_plain``; ``temperature``) and of the gated model at alpha 0 (``gate_off``);
    the paired differences ``gated_minus_plain`` and ``gated_minus_sharpened``; the mix rates of the two models
    at the deciding point (competence); the seeds used and those without a bracketing checkpoint.
    """

    seeds: list[int] | None = None
    not_comparable: list[int] | None = None
    data_rate: Interval | None = None
    matched_ppl: Interval | None = None
    gated: Interval | None = None
    plain_at_matched_ppl: Interval | None = None
    sharpened_plain: Interval | None = None
    gate_off: Interval | None = None
    gated_minus_plain: Interval | None = None
    gated_minus_sharpened: Interval | None = None
    mix_gated: Interval | None = None
    mix_plain: Interval | None = None
    temperature: Interval | None = None
    interpolation_error: dict[str, float] | None = None
    interval_method: dict[str, str] | None = None


@dataclass(frozen=True, kw_only=True)
class TopicDriftRecord(ChapterRecord):
    """Chapter 9: the data's rate, the learning curve (``budgets``, ascending) and, as ``plain`` /
    ``gated`` / ``paired``, the largest budget again (what the diversity claim and older readers read)."""

    chapter: ClassVar[str] = "09_topic_drift"
    data: TopicData | None = None
    plain: TopicModelSummary | None = None
    gated: TopicModelSummary | None = None
    paired: TopicModelSummary | None = None  # gated - plain, per seed
    budgets: list[TopicBudget] | None = None
    decision: TopicDecision | None = None  # what B-topic-drift is judged on (matched PPL, the controls)
    resampled_decision: TopicDecision | None = None  # the same test with a new corpus per seed (secondary)


@dataclass(frozen=True, kw_only=True)
class BenchmarkRecord(ChapterRecord):
    """``make bench``: the report shows its top-level numbers, kept in ``extra``."""

    chapter: ClassVar[str] = "bench"


RECORDS: dict[str, type[ChapterRecord]] = {
    cls.chapter: cls
    for cls in (FeatureBankRecord, FusionTrainingRecord, DecodingRecord, LeakageAuditRecord, SST2Record,
                IdeaGatingRecord, XrayRecord, LoraRecord, TopicDriftRecord, BenchmarkRecord)
}


def load_record(chapter: str, data) -> ChapterRecord:
    """The typed record of ``chapter`` from its metrics file's dict (or the record itself)."""
    if chapter not in RECORDS:
        raise ValueError(f"no record type for chapter {chapter!r}; known: {', '.join(RECORDS)}")
    cls = RECORDS[chapter]
    if isinstance(data, cls):
        return data
    if isinstance(data, Record):
        raise ValueError(f"chapter {chapter} needs a {cls.__name__}, got a {type(data).__name__}")
    return cls.from_dict(data)


# -- chapter 10: features-only control (intent features) --

@dataclass(frozen=True, kw_only=True)
class IntentReading(Record):
    """One model read one way (``semlm.fusion.intent_experiment``), one seed: features-only control
    judged from the generated text, the held-out adjective rate, conditional PPL on validation, and
    the strength sweep (None where the model has no such knob): the mean written intensity per requested
    level and the Spearman rank correlation of requested level and written intensity over its sentences."""

    polarity_acc: float | None = None
    punct_acc: float | None = None
    held_out_rate: float | None = None
    strong_share: float | None = None          # without a strength request
    written_intensity: float | None = None     # mean strength of the intensifiers written, without a strength request
    ppl: float | None = None
    written_intensity_by_level: list[float] | None = None
    intensity_rank_correlation: float | None = None


@dataclass(frozen=True, kw_only=True)
class IntentRunMetrics(Record):
    """What one trained run of chapter 10 measured: ``{reading: IntentReading}`` (the intent model
    gives two readings, ``intent`` and ``no_request``)."""

    readings: dict[str, IntentReading] | None = None
    strength_levels: list[float] | None = None


@dataclass(frozen=True, kw_only=True)
class IntentVariantScores(Record):
    """One variant over seeds."""

    polarity_acc: Interval | None = None
    punct_acc: Interval | None = None
    held_out_rate: Interval | None = None
    strong_share: Interval | None = None
    written_intensity: Interval | None = None
    ppl: Interval | None = None


@dataclass(frozen=True, kw_only=True)
class IntensityPoint(Record):
    """One point of chapter 10's strength sweep: the requested strength ``level`` (an intensifier strength of
    the corpus's ``INTENSITY`` table, or a value between two), the ``str_low`` / ``str_med`` / ``str_high``
    ``triplet`` written for it, whether training saw that triplet (``kind``: ``trained`` / ``interpolated``),
    and the written intensity over seeds (per seed: the mean over sentences of each sentence's mean intensifier
    strength)."""

    level: float | None = None
    triplet: list[float] | None = None
    kind: str | None = None
    written: Interval | None = None


@dataclass(frozen=True, kw_only=True)
class IntensityResponse(Record):
    """One model's response to the strength request: the sweep's points, and per training seed (``seeds``, in
    the order of ``rank_correlation.values``) the Spearman rank correlation of requested level and written
    intensity over the sweep's sentences."""

    seeds: list[int] | None = None
    points: list[IntensityPoint] | None = None
    rank_correlation: Interval | None = None


@dataclass(frozen=True, kw_only=True)
class IntentControl(Record):
    seeds: list[int] | None = None
    variants: dict[str, IntentVariantScores] | None = None
    intensity: IntensityResponse | None = None           # the intent model
    intensity_shuffled: IntensityResponse | None = None  # the shuffled control, given the same requests
    intensity_paired: Interval | None = None             # intent - shuffled rank correlation, paired by seed


@dataclass(frozen=True, kw_only=True)
class IntentControlRecord(ChapterRecord):
    chapter: ClassVar[str] = "10_intent_control"
    intent: IntentControl | None = None


RECORDS[IntentControlRecord.chapter] = IntentControlRecord
