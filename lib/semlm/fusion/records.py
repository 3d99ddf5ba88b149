"""Paper A's typed records, torch-free: what one trained model measures (``RunRecord.metrics``) and the metrics
files of chapters 1-5 and 10."""

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
    ppl_authors_denominator: float | None = None
    ppl_seen_only_authors_denominator: float | None = None
    focus_ce: dict[str, float] | None = None


@dataclass(frozen=True, kw_only=True)
class ColumnShifts(Record):
    """The exact shift of p(positive) at the adjective slot when one column group of the paper's positive rather than
    its negative request is written into the newest feature row (:func:`semlm.fusion.audit.column_shifts`), over
    every subject / verb / object / intensifier prefix of the grammar (``n_prefixes``); ``p(positive)`` is the
    model's probability of a positive adjective among the adjectives (what the grammar mask leaves)."""

    seeds: list[int] | None = None
    n_prefixes: int | None = None
    #: group ("polarity", "is_question", "strength", "all") -> predicate -> [positive request's value, negative's]
    written: dict[str, dict[str, list[float]]] | None = None
    #: model ("causal fusion", "published fusion") -> group -> the per-seed means over prefixes, over ``seeds``
    shift: dict[str, dict[str, Interval]] | None = None


@dataclass(frozen=True, kw_only=True)
class FeatureSteering(Record):
    """Paper A's own channel on each seed's causal fusion model (:func:`semlm.fusion.audit.feature_steering`):
    polarity accuracy with the request given (``requested``) and with the opposite one (``opposite``), their
    difference by seed (``paired``) and the share judged positive per request; each interval's ``values`` follow
    ``seeds``."""

    seeds: list[int] | None = None
    n_per_request: int | None = None
    requested: Interval | None = None
    opposite: Interval | None = None
    paired: Interval | None = None
    judged_positive: dict[str, Interval] | None = None
    #: the two requests' written predicates (``pos`` / ``neg`` -> predicate -> value), the one-line description and
    #: the predicates whose values differ (the mirror-image requests: the polarity columns only)
    requests: dict[str, dict[str, float]] | None = None
    requests_description: str | None = None
    differing_predicates: list[str] | None = None
    #: which column group of the paper's two requests moves p(positive) at the adjective, per model
    column_shifts: ColumnShifts | None = None


@dataclass(frozen=True, kw_only=True)
class ContextCrossEntropy(Record):
    """A focus token's cross-entropy at the positions that follow one kind of adjective: per seed the mean
    (NaN where ``counts`` is 0) and the number of such positions."""

    values: list[float] | None = None
    counts: list[int] | None = None


@dataclass(frozen=True, kw_only=True)
class FocusByContext(Record):
    """A focus token's cross-entropy split by the adjective right before it: trained or held out; per seed the
    count-weighted mean of the two is the token's overall cross-entropy (``focus_ce_seeds``)."""

    after_trained: ContextCrossEntropy | None = None
    after_held_out: ContextCrossEntropy | None = None


@dataclass(frozen=True, kw_only=True)
class LeakageAuditRecord(ChapterRecord):
    """Chapter 4 over ``seeds``; settings are ``causal`` (the language model) and ``published`` (the authors'
    encoder). Presented by :class:`semlm.fusion.audit.LeakageAudit`."""

    chapter: ClassVar[str] = "04_leakage_audit"
    seeds: list[int] | None = None
    n_per_request: int | None = None  # generations per request and model
    table1: dict[str, ModelPair] | None = None
    floors: CausalFloors | None = None
    control: dict[str, ControlModes] | None = None
    ood_hit: dict[str, dict[str, Interval]] | None = None
    ood_hit_seeds: dict[str, list[int]] | None = None  # per setting, the seeds of ``ood_hit`` (None: ``seeds``)
    confusion_diagonal: dict[str, Interval] | None = None
    paired_gain_seen_only: dict[str, Interval] | None = None  # baseline - fusion seen-only PPL, paired by seed
    #: token -> "causal baseline" / "causal fusion" / "published baseline" / "published fusion" -> CE per seed
    focus_ce_seeds: dict[str, dict[str, list[float]]] | None = None
    #: the tokens written only after an adjective ("!", "?") -> arm (as above) -> CE after a trained and after a
    #: held-out adjective, per seed (absent from records written before it)
    focus_ce_by_context: dict[str, dict[str, FocusByContext]] | None = None
    #: Table 6: token -> mean CE per model (as above), the training oracle's and the paper's fusion model's
    focus_ce: dict[str, dict[str, float]] | None = None
    ablations: dict | None = None  # causal: variant -> ppl, ppl_seen_only (, sem_mse, ood_hit, soft_adj_acc)
    control_code_baseline: dict | None = None  # causal: ppl, ppl_seen_only, soft, hard, ood_hit
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
class SST2Punctuation(Record):
    """Punctuation under control on real text (``judge_punctuation``), for one requested end mark and mode: of the
    continuations that end a sentence, the share whose last end mark is the requested one (``acc``), and the share
    that end a sentence at all (``coverage``); the fusion model and the baseline under the same decoding."""

    acc: Interval | None = None
    coverage: Interval | None = None
    baseline_acc: Interval | None = None
    baseline_coverage: Interval | None = None


@dataclass(frozen=True, kw_only=True)
class SST2ControlModes(Record):
    hard: dict[str, SST2Control] | None = None
    soft: dict[str, SST2Control] | None = None
    features_only: dict[str, SST2Control] | None = None
    #: mode ("soft", "hard") -> requested end mark ("!", "?") -> its accuracy
    punctuation: dict[str, dict[str, SST2Punctuation]] | None = None


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
    """One model read one way, one seed (:func:`semlm.fusion.intent_experiment.read_model`); the strength sweep's
    fields are None where the model has no such knob."""

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
    """One point of chapter 10's strength sweep: the requested ``level``, the ``str_low`` / ``str_med`` /
    ``str_high`` ``triplet`` written for it, its ``kind`` (``trained`` / ``interpolated``), the written intensity."""

    level: float | None = None
    triplet: list[float] | None = None
    kind: str | None = None
    written: Interval | None = None


@dataclass(frozen=True, kw_only=True)
class IntensityResponse(Record):
    """One model's response to the strength request: the sweep's points and, per seed of ``seeds``, the rank
    correlation of requested level and written intensity."""

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
