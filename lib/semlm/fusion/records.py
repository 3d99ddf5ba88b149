"""Paper A's typed records: what one trained model measures (``RunRecord.metrics``) and the records of
chapters 1-5 and 10 (:class:`LeakageAuditRecord` for chapter 4, :class:`SST2Record` for chapter 5, ...).

The JSON shape is the one the metrics files have always had; torch-free, like :mod:`semlm.core.records`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from semlm.core.records import ChapterRecord, Interval, Record


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
