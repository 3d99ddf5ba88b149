"""Features-only control on the synthetic task: does the feature channel alone steer a causal model?

Five variants, all trained on the same corpus with the same recipe, paired by training seed:

* ``intent``: the fusion model whose channel carries the request of the clause being written
  (:mod:`semlm.fusion.intent`), given the request at generation time;
* ``control_code``: the CTRL-style baseline given the same polarity and punctuation as two code
  tokens (:mod:`semlm.fusion.control_codes`; it has no code for strength);
* ``shuffled``: the same fusion model trained with the request rows shuffled between sentences
  (the channel says nothing about the words), then given the request: the control that must fail;
* ``baseline``: the plain language model, unconditioned;
* ``no_request``: the ``intent`` model with the request predicates at their training mean.

Generation is plain ancestral sampling at temperature 1: no logit steering, no grammar mask;
only the tokens that are never text (``<pad>``, ``<bos>``, control codes) are suppressed with
transformers' ``SuppressTokensLogitsProcessor``. Requests and judging: the polarity of every
adjective of the sentence and its final punctuation are compared with the request. The intensity
response sweeps the strength request, written as the whole ``str_*`` triplet the training data write
(the four trained levels and at most two labelled interpolations), and reads the written intensity
of every sentence (the mean strength of its intensifiers, ``syn.INTENSITY``): per seed, the Spearman
rank correlation of requested level and written intensity. This module says what a run is;
:mod:`semlm.core.runs` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Sequence

import torch
from transformers import LogitsProcessorList, SuppressTokensLogitsProcessor

from semlm.core import runs
from semlm.core.metrics import evaluate_language_model
from semlm.core.records import Interval
from semlm.fusion.records import (IntensityPoint, IntensityResponse, IntentControl, IntentReading, IntentRunMetrics,
                                  IntentVariantScores)
from semlm.core.runs import RunRecord, RunSpec
from semlm.data import synthetic as syn
from semlm.data.dataset import LMTensors
from semlm.data.synthetic import SyntheticConfig
from semlm.fusion.control_codes import sentence_polarity
from semlm.fusion.intent import (N_INTENT_FEATURES, REQUEST_COLUMNS, TRAINED_STRENGTHS, IntentFeatures,
                                 declared_intent, intent_rows)
from semlm.fusion.request import Request, strength_triplet
from semlm.fusion.decoding.generate import sample_ids
from semlm.fusion.losses import FusionLoss
from semlm.fusion.model import build_model
from semlm.fusion.synthetic_experiment import SYNTHETIC, SyntheticData, model_config, prepare_data, spec_for
from semlm.fusion.profiles import IntentProfile, SyntheticProfile

CHAPTER = "10_intent_control"
#: The chapter's models, and the readings (variants) the chapter reports.
TRAINED: tuple[str, ...] = ("intent", "control_code", "shuffled", "baseline")
#: Models that are chapter 4's causal runs of the same seed (:meth:`IntentExperiment.shared_run`), not trained here.
SHARED: tuple[str, ...] = ("control_code", "baseline")
VARIANTS: tuple[str, ...] = ("intent", "control_code", "shuffled", "baseline", "no_request")
#: Requests of the control table: every polarity with every final punctuation.
REQUESTS: tuple[tuple[str, str], ...] = tuple((p, q) for p in ("positive", "negative") for q in syn.END_PUNCTUATION)
STRONG_INTENSIFIERS: tuple[str, ...] = tuple(w for w, r in syn.INTENSITY.items() if r >= 0.8)


@dataclass(frozen=True)
class IntentRun:
    """One trained model of chapter 10: the synthetic profile (with the run's seed), the variant, and
    the generation budget its evaluation uses."""

    synthetic: SyntheticProfile
    variant: str
    samples_per_request: int
    strength_levels: tuple[float, ...]


@dataclass
class IntentData:
    base: SyntheticData               # corpus, vocabulary, token-feature tensors (codes for control_code)
    train: LMTensors                  # what the model trains on (intent channel for intent / shuffled)
    val: LMTensors                    # validation with the true requests
    featurizer: IntentFeatures | None
    request_mean: torch.Tensor | None  # [R] training mean of the request predicates


def with_intent(tensors: LMTensors, sentences: Sequence[Sequence[str]], featurizer: IntentFeatures,
                permutation: torch.Tensor | None = None) -> LMTensors:
    """``tensors`` with the intent channel of ``sentences`` (their rows, in order); ``permutation``
    gives sentence i the requests of sentence ``permutation[i]`` (the shuffled control)."""
    rows = intent_rows([declared_intent(s) for s in sentences])
    if permutation is not None:
        rows = rows[permutation]
    return replace(tensors, features=featurizer(tensors.input_ids, rows))


def request_mean(tensors: LMTensors) -> torch.Tensor:
    """[R] mean of the request predicates over the real input positions."""
    return tensors.features[tensors.mask][:, REQUEST_COLUMNS].mean(0)


def prepare_intent_data(corpus: SyntheticConfig, variant: str) -> IntentData:
    """The data of ``variant``: token features (baseline), codes (control_code) or the intent channel,
    true (intent) or shuffled between training sentences with a permutation drawn from the corpus seed."""
    if variant not in TRAINED:
        raise ValueError(f"unknown chapter-10 model {variant!r}; choose one of: {', '.join(TRAINED)}")
    base = prepare_data(corpus, "causal", codes=variant == "control_code")
    if variant not in ("intent", "shuffled"):
        return IntentData(base, base.train, base.val, None, None)
    featurizer = IntentFeatures(base.vocab)
    permutation = None
    if variant == "shuffled":
        generator = torch.Generator().manual_seed(corpus.corpus_seed)
        permutation = torch.randperm(len(base.corpus.train), generator=generator)
    train = with_intent(base.train, base.corpus.train, featurizer, permutation)
    val = with_intent(base.val, base.corpus.val, featurizer)
    return IntentData(base, train, val, featurizer, request_mean(train))


# --- sampling and judging ------------------------------------------------------------------------

@torch.no_grad()
def sample_sentences(model: torch.nn.Module, data: IntentData, requests: Sequence[Request],
                     seed: int) -> list[list[str]]:
    """One sentence per request, sampled at temperature 1 from ``<bos>``, batched, as the model hears it.

    A control-code model hears the request's codes after ``<bos>`` (:meth:`Request.codes`), a fusion model its
    intent channel (the unset predicates at their training mean), a baseline nothing.
    Nothing but never-text tokens is masked.
    """
    vocab, n = data.base.vocab, len(requests)
    codes = [r.codes() for r in requests] if data.base.code_ids else [()] * n
    start = torch.tensor([[vocab.bos_id] + vocab.ids(c) for c in codes])
    suppress = [vocab.pad_id, vocab.bos_id] + list(data.base.code_ids)
    processors = LogitsProcessorList([SuppressTokensLogitsProcessor(suppress)])
    featurize = None
    if data.featurizer is not None:
        rows = torch.stack([r.vector(data.request_mean) for r in requests])
        featurize = partial(data.featurizer, requests=rows)
    limit = data.base.corpus.config.max_len - 1  # words and <eos>
    ids = sample_ids(model, start, processors, seed, limit, vocab.pad_id, vocab.eos_id, featurize)
    skip = start.shape[1]
    return [[w for w in vocab.decode(row[skip:]) if w not in ("<eos>", "<pad>")] for row in ids]


def judge(sentences: Sequence[Sequence[str]], requests: Sequence[Request], held_out: Sequence[str]) -> dict:
    """Polarity and punctuation accuracy against the requests, held-out adjective rate, strong share and mean
    written intensity (no strength was requested)."""
    polarity = [sentence_polarity(s) == r.polarity for s, r in zip(sentences, requests)]
    punct = [bool(s) and s[-1] == r.punctuation for s, r in zip(sentences, requests)]
    adjectives = [w for s in sentences for w in s if w in syn.POSITIVE_ADJECTIVES or w in syn.NEGATIVE_ADJECTIVES]
    return {"polarity_acc": sum(polarity) / len(polarity), "punct_acc": sum(punct) / len(punct),
            "held_out_rate": sum(w in held_out for w in adjectives) / max(len(adjectives), 1),
            "strong_share": strong_share(sentences), "written_intensity": mean_written_intensity(sentences)}


def strong_share(sentences: Sequence[Sequence[str]]) -> float:
    """Share of the intensifiers written that are strong (very, extremely); NaN if none was written."""
    intensifiers = [w for s in sentences for w in s if w in syn.INTENSITY]
    strong = sum(w in STRONG_INTENSIFIERS for w in intensifiers)
    return strong / len(intensifiers) if intensifiers else float("nan")


def written_intensity(sentence: Sequence[str]) -> float:
    """The mean strength (``syn.INTENSITY``) of the intensifiers ``sentence`` writes; NaN if it writes none."""
    levels = [syn.INTENSITY[w] for w in sentence if w in syn.INTENSITY]
    return sum(levels) / len(levels) if levels else float("nan")


def mean_written_intensity(sentences: Sequence[Sequence[str]]) -> float:
    """The mean of :func:`written_intensity` over the sentences that write an intensifier; NaN if none does."""
    values = [v for v in map(written_intensity, sentences) if v == v]
    return sum(values) / len(values) if values else float("nan")


def rank_correlation(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation of ``x`` and ``y`` (the Pearson correlation of their mid-ranks), NaN pairs
    dropped; 0 when either side is constant or fewer than 2 pairs remain (no response to measure)."""
    import pandas as pd

    pairs = pd.DataFrame({"x": x, "y": y}, dtype=float).dropna()
    if len(pairs) < 2:
        return 0.0
    rx, ry = pairs["x"].rank().tolist(), pairs["y"].rank().tolist()  # mid-ranks: ties share their mean rank
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return sxy / (sxx * syy) ** 0.5 if sxx > 0 and syy > 0 else 0.0


def control_requests(n: int) -> list[Request]:
    return [Request.of(p, q) for p, q in REQUESTS for _ in range(n)]


def strength_sweep(model, data: IntentData, levels: Sequence[float], n: int, seed: int) -> tuple[list[float], float]:
    """``n`` sentences per strength level (the whole triplet, polarity alternating, punctuation "."): the mean
    written intensity per level, and the rank correlation of requested level and written intensity over every
    sentence of the sweep (one seed's measure)."""
    requested, written, by_level = [], [], []
    for i, level in enumerate(levels):
        requests = [Request.of(("positive", "negative")[k % 2], ".", level) for k in range(n)]
        sentences = sample_sentences(model, data, requests, seed + 1 + i)
        values = [written_intensity(s) for s in sentences]
        by_level.append(mean_written_intensity(sentences))
        requested += [level] * len(values)
        written += values
    return by_level, rank_correlation(requested, written)


def read_model(model, data: IntentData, run: IntentRun, seed: int, variant: str) -> IntentReading:
    """One reading of a trained model: features-only control, strength sweep (fusion models), PPL."""
    requests = control_requests(run.samples_per_request)
    heard = [Request()] * len(requests) if variant == "no_request" else requests  # every predicate at its mean
    scores = judge(sample_sentences(model, data, heard, seed), requests, data.base.corpus.split.held_out)
    by_level = correlation = None
    if variant in ("intent", "shuffled"):
        by_level, correlation = strength_sweep(model, data, run.strength_levels, run.samples_per_request, seed)
    val = data.val
    if variant == "no_request":
        features = val.features.clone()
        features[..., REQUEST_COLUMNS] = data.request_mean
        features[~val.mask] = 0.0
        val = replace(val, features=features)
    ppl = evaluate_language_model(model, val, data.base.vocab, data.base.held_out_ids,
                                  never_scored=data.base.code_ids)["ppl"]
    return IntentReading(**scores, ppl=ppl, written_intensity_by_level=by_level, intensity_rank_correlation=correlation)


class IntentExperiment(runs.Experiment):
    """Chapter 10's models for :mod:`semlm.core.runs`: the intent and shuffled fusion LMs train here; the
    control-code and baseline LMs are chapter 4's runs (:meth:`shared_run`), evaluated here."""

    name = "intent_control"
    device = "cpu"  # small models; evaluation samples with CPU tensors
    metrics_type = IntentRunMetrics

    def data_key(self, spec: RunSpec):
        run = spec.config
        return run.synthetic.corpus, run.variant

    def prepare(self, spec: RunSpec) -> IntentData:
        return prepare_intent_data(spec.config.synthetic.corpus, spec.config.variant)

    def shared_run(self, spec: RunSpec) -> tuple[runs.Experiment, RunSpec] | None:
        """The baseline and the control-code model are chapter 4's causal runs of the same seed
        (:data:`SHARED`): the same corpus, recipe and seed, so the book trains them once."""
        run = spec.config
        if run.variant not in SHARED:
            return None
        return SYNTHETIC, spec_for(run.synthetic, run.variant, "causal")

    def build(self, spec: RunSpec, data: IntentData) -> torch.nn.Module:
        run = spec.config
        return build_model(model_config(run.synthetic, "fusion", len(data.base.vocab), "causal",
                                        n_features=N_INTENT_FEATURES))

    def fit(self, spec: RunSpec, data: IntentData) -> runs.Fit:
        config = spec.config.synthetic.train
        return runs.Fit(data.train, data.val, config, FusionLoss.from_config(config, data.base.adjective_classes))

    def evaluate(self, spec: RunSpec, data: IntentData, model, result) -> IntentRunMetrics:
        run = spec.config
        seed = 1000 * spec.seed
        readings = {run.variant: read_model(model, data, run, seed, run.variant)}
        if run.variant == "intent":
            readings["no_request"] = read_model(model, data, run, seed + 500, "no_request")
        return IntentRunMetrics(readings=readings, strength_levels=list(run.strength_levels))

    def total_steps(self, spec: RunSpec) -> int:
        p = spec.config.synthetic
        return -(-p.corpus.n_train // p.train.batch_size) * p.train.epochs


EXPERIMENT = IntentExperiment()


def intent_runs(profile: IntentProfile, seeds: Sequence[int]) -> list[RunSpec]:
    """The chapter's runs: the intent and shuffled models for every training seed, the shared ones (:data:`SHARED`,
    chapter 4's runs) for the first ``profile.n_shared_seeds`` of them (all if None)."""
    if not seeds:
        raise ValueError("intent_runs needs at least one seed")
    specs = []
    shared_seeds = list(seeds)[:profile.n_shared_seeds]
    for seed in seeds:
        synthetic = replace(profile.synthetic, seed=seed)
        for variant in (v for v in TRAINED if v not in SHARED or seed in shared_seeds):
            run = IntentRun(synthetic, variant, profile.samples_per_request, tuple(profile.strength_levels))
            specs.append(RunSpec(variant, seed, run))
    return specs


# --- the chapter's summary over seeds -----------------------------------------------------------

def sweep_point_kind(level: float) -> str:
    """``trained`` if the training data write this strength level (an intensifier's), else ``interpolated``."""
    return "trained" if level in TRAINED_STRENGTHS else "interpolated"


def intensity_response(by_seed: dict[int, IntentReading], levels: Sequence[float]) -> IntensityResponse:
    """One model's sweep over seeds: per point the written intensity (95% t-interval over seeds; a seed that
    wrote no intensifier at a level leaves it out), per seed the rank correlation."""
    seeds = sorted(by_seed)
    points = []
    for i, level in enumerate(levels):
        written = [by_seed[s].written_intensity_by_level[i] for s in seeds]
        written = [w for w in written if w == w]
        points.append(IntensityPoint(level=level, triplet=[round(float(v), 4) for v in strength_triplet(level)],
                                     kind=sweep_point_kind(level),
                                     written=Interval.of_mean(written, bounds=(0.0, 1.0)) if written else None))
    return IntensityResponse(seeds=seeds, points=points,
                             rank_correlation=Interval.of_mean([by_seed[s].intensity_rank_correlation for s in seeds]))


def summarise(records: Sequence[RunRecord]) -> IntentControl:
    """Every variant that ran, over its seeds (95% t-intervals; the shared models may run at fewer seeds than the
    intent model), the intensity responses of the two fusion models and their difference, intent - shuffled rank
    correlation paired by training seed (what ``A-intensity`` decides on)."""
    readings: dict[str, dict[int, IntentReading]] = {}  # variant -> seed -> reading
    for record in records:
        for variant, reading in record.metrics.readings.items():
            readings.setdefault(variant, {})[record.seed] = reading
    seeds, levels = sorted(readings["intent"]), records[0].metrics.strength_levels
    paired = [s for s in seeds if s in readings["shuffled"]]
    fields = ("polarity_acc", "punct_acc", "held_out_rate", "strong_share", "written_intensity", "ppl")
    return IntentControl(
        seeds=seeds,
        variants={variant: IntentVariantScores(**{
            f: Interval.of_mean([getattr(readings[variant][s], f) for s in seeds if s in readings[variant]],
                                bounds=None if f == "ppl" else (0.0, 1.0)) for f in fields})
            for variant in VARIANTS if variant in readings},
        intensity=intensity_response(readings["intent"], levels),
        intensity_shuffled=intensity_response(readings["shuffled"], levels),
        intensity_paired=Interval.paired(*([readings[v][s].intensity_rank_correlation for s in paired]
                                           for v in ("intent", "shuffled"))))


def examples(model, data: IntentData, variant: str, n_per_request: int = 1, seed: int = 0) -> list[dict]:
    """A few sentences per request of the control table, for the chapter's example table."""
    requests = control_requests(n_per_request)
    heard = [Request()] * len(requests) if variant == "no_request" else requests
    sentences = sample_sentences(model, data, heard, seed)
    return [{"variant": variant, "request": f"{r.polarity} {r.punctuation}", "sentence": " ".join(s)}
            for r, s in zip(requests, sentences)]
