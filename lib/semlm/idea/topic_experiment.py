"""Topic drift with a ground truth (chapter 9): does the idea gate keep generations on topic?

Paper B's "domain stickiness" claim is measured on :mod:`semlm.data.topics`, a synthetic corpus
whose sentences carry a known latent topic that switches between sentences with a known
probability ``switch_prob``. Plain and idea-gated GPTs (:class:`~semlm.idea.model.IdeaGPTForCausalLM`)
are trained on it with the book's one trainer and paper B's idea loss
(:func:`semlm.idea.wikitext_experiment.idea_loss_fn`), several seeds each, then continue prompts of a known
topic. Every generated sentence is labelled by its content words, so the **drift rate** of a
model (share of sentence transitions whose topic changes) can be put next to the data's own rate:
a model that learnt the data exactly drifts at ``switch_prob``; less drift is stickiness; more
is the drift the paper says the gate prevents.

Profiles (:func:`~semlm.profiles.topic_drift_profile`, in the torch-free :mod:`semlm.profiles`):
``smoke`` (seconds, 2 seeds), ``cpu`` (3 seeds of each model, the whole chapter in about 3 minutes on
2 cores), ``paper`` (a larger world and GPT, 5 seeds; meant for a GPU). :class:`TopicDriftExperiment`
says what a run is; :mod:`semlm.core.runs` trains or reloads it, caching it under
``default_runs_dir(profile)/topic_drift/`` keyed by the configuration and the training code.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import torch

from semlm.core import runs
from semlm.data import topics as topics_module
from semlm.data.topics import (EOS, MIXED, NO_TOPIC, TopicConfig, TopicCorpus, TopicWorld, make_topic_corpus,
                          split_sentences)
from semlm.idea.wikitext_experiment import TokenBlocks, generate_texts, idea_loss_fn, sample_interval
from semlm.core.metrics import distinct_n, perplexity, stickiness
from semlm.core.records import Interval, TopicModelSummary, TopicRunMetrics
from semlm.idea.model import IdeaGPTConfig, IdeaGPTForCausalLM
from semlm.profiles import TOPIC_STOP_WORDS as STOP_WORDS
from semlm.profiles import GPTSize, IdeaSettings, TopicDriftProfile, TrainConfig, topic_drift_profile  # noqa: F401
from semlm.core.runs import RunRecord, RunSpec, default_device

CHAPTER = "09_topic_drift"


# --- labelling and drift -------------------------------------------------------------------------


def _words(text: str | Sequence[str]) -> list[str]:
    return text.split() if isinstance(text, str) else list(text)


def sentence_labels(text: str | Sequence[str], world: TopicWorld, complete_only: bool = True) -> list[int]:
    """The topic label of every sentence of ``text`` (a string or a word list), in order.

    A label is a topic index, :data:`~semlm.data.topics.MIXED` (content words of several topics) or
    :data:`~semlm.data.topics.NO_TOPIC` (no content words). Only sentences closed by a full stop count
    unless ``complete_only`` is False; anything after an ``<eos>`` is another document and is ignored.
    """
    return [world.label(s) for s in split_sentences(_words(text), complete_only)]


def drift_counts(labels: Sequence[int], start_topic: int | None = None) -> tuple[int, int]:
    """``(changes, transitions)`` over consecutive labelled sentences.

    ``start_topic`` (the prompt's topic) is put in front, so the first generated sentence is a
    transition too. Sentences without a topic (:data:`NO_TOPIC`) are skipped: the transition runs
    from the sentence before to the one after. A :data:`MIXED` sentence drifts inside itself, so
    every transition into or out of it counts as a change.
    """
    sequence = ([start_topic] if start_topic is not None else []) + [l for l in labels if l != NO_TOPIC]
    pairs = list(zip(sequence, sequence[1:]))
    changes = sum(a != b or a == MIXED for a, b in pairs)
    return changes, len(pairs)


def drift_rate(texts: Sequence[str | Sequence[str]], world: TopicWorld,
               start_topics: Sequence[int] | None = None) -> float:
    """Share of sentence transitions whose topic changes, pooled over ``texts`` (NaN if there are none)."""
    starts = list(start_topics) if start_topics is not None else [None] * len(texts)
    if len(starts) != len(texts):
        raise ValueError(f"got {len(texts)} texts but {len(starts)} start topics; pass one per text or none")
    changes = transitions = 0
    for text, start in zip(texts, starts):
        c, n = drift_counts(sentence_labels(text, world), start)
        changes, transitions = changes + c, transitions + n
    return changes / transitions if transitions else float("nan")


def topic_stickiness(text: str | Sequence[str], topic: int, world: TopicWorld) -> float:
    """Share of the content words of ``text`` that belong to ``topic`` (paper B's stickiness, with the
    function words as the stopwords); NaN without content words."""
    words = _words(text)
    if EOS in words:
        words = words[:words.index(EOS)]
    return stickiness(words, world.content_words(topic), STOP_WORDS)


def data_drift(documents: Sequence[topics_module.Document], world: TopicWorld) -> Interval:
    """Drift of corpus documents measured by the labeller: the rate with its Wilson 95% interval, ``n``
    transitions and ``successes`` changes (written as ``{mean, ci_low, ci_high, n, k}``)."""
    changes = transitions = 0
    for doc in documents:
        c, n = drift_counts(sentence_labels(doc.words, world))
        changes, transitions = changes + c, transitions + n
    p = Interval.of_proportion(changes, transitions)
    return Interval(p.mean, p.low, p.high, transitions, None, "mean", changes)


# --- data ----------------------------------------------------------------------------------------


@dataclass
class TopicData:
    corpus: TopicCorpus
    streams: dict[str, torch.Tensor]     # split -> 1-D ids, documents joined by <eos>
    stopword_ids: list[int]              # function words, <eos>, <unk>: masked out of the idea targets

    @property
    def world(self) -> TopicWorld:
        return self.corpus.world

    @property
    def tokenizer(self):
        return self.world.tokenizer()

    def blocks(self, split: str, profile: TopicDriftProfile, window: int | None = None) -> TokenBlocks:
        return TokenBlocks.from_stream(self.streams[split], profile.size.block_size, window or profile.idea.window)


@lru_cache(maxsize=4)
def prepare_topic_data(config: TopicConfig) -> TopicData:
    """The corpus of ``config`` as id streams (``<eos>`` before every document) and the stopword ids."""
    corpus = make_topic_corpus(config)
    world = corpus.world

    def stream(docs):
        return torch.tensor([i for d in docs for i in world.encode([EOS, *d.words])], dtype=torch.long)

    return TopicData(corpus, {"train": stream(corpus.train), "valid": stream(corpus.val)}, world.encode(STOP_WORDS))


# --- training ------------------------------------------------------------------------------------


def model_config(profile: TopicDriftProfile, vocab_size: int, idea: bool) -> IdeaGPTConfig:
    s, size = profile.idea, profile.size
    return IdeaGPTConfig(vocab_size=vocab_size, n_positions=size.block_size, n_embd=size.n_embd, n_layer=size.n_layer,
                         n_head=size.n_head, dropout=size.dropout, idea_head=idea, gate_variant=s.gate_variant,
                         alpha=s.alpha if idea else 0.0, beta=s.beta, eps=s.eps,
                         bos_token_id=0, eos_token_id=0, pad_token_id=0)


@dataclass(frozen=True)
class TopicRun:
    """What one chapter-9 run is: the world and corpus, the GPT, the training recipe (its seed is the
    spec's), the idea settings, and plain or gated. The profile's generation settings are not in it."""

    data: TopicConfig
    size: GPTSize
    train: TrainConfig
    idea: IdeaSettings
    gated: bool
    profile: str = ""     # the profile's name (its worker policy, see TopicDriftExperiment.max_workers)


class TopicDriftExperiment(runs.Experiment):
    """Plain and idea-gated GPTs on the topic world for :mod:`semlm.core.runs` (epochs over token blocks,
    paper B's loss with alpha ramped over optimiser steps). Metrics (:class:`~semlm.core.records.TopicRunMetrics`):
    ``val_ppl``, ``val_ppl_ungated`` (None for the plain model). Workers: the profile's ``max_workers``."""

    name = "topic_drift"
    metrics_type = TopicRunMetrics

    def max_workers(self, specs: Sequence[RunSpec]) -> int | None:
        return min((topic_drift_profile(s.config.profile).max_workers for s in specs if s.config.profile),
                   default=None)

    def data_key(self, spec: RunSpec):
        return spec.config.data

    def prepare(self, spec: RunSpec) -> TopicData:
        return prepare_topic_data(spec.config.data)

    def build(self, spec: RunSpec, data: TopicData) -> IdeaGPTForCausalLM:
        run = spec.config
        return IdeaGPTForCausalLM(model_config(run, len(data.world.vocabulary), run.gated))

    def fit(self, spec: RunSpec, data: TopicData) -> runs.Fit:
        run = spec.config
        return runs.Fit(data.blocks("train", run), data.blocks("valid", run), run.train,
                        loss_fn=idea_loss_fn(run.idea, data.stopword_ids, run.gated))

    def evaluate(self, spec: RunSpec, data: TopicData, model, result) -> TopicRunMetrics:
        val = data.blocks("valid", spec.config)
        return TopicRunMetrics(val_ppl=perplexity(model, val),
                               val_ppl_ungated=perplexity(model, val, alpha=0.0) if spec.config.gated else None)

    def total_steps(self, spec: RunSpec) -> int:
        run = spec.config
        return -(-len(self.data(spec).blocks("train", run)) // run.train.batch_size) * run.train.epochs



TOPIC_DRIFT = TopicDriftExperiment()


def topic_run(profile: TopicDriftProfile, gated: bool, seed: int) -> RunSpec:
    """The plain (``gated=False``) or gated model of ``profile`` with training seed ``seed``."""
    run = TopicRun(profile.data, profile.size, profile.train, profile.idea, gated, profile.name)
    return RunSpec("gated" if gated else "plain", seed, run)


def topic_drift_runs(profile: TopicDriftProfile, seeds: Sequence[int]) -> list[RunSpec]:
    """Chapter 9's runs: the plain and the gated GPT for every training seed."""
    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"seeds must be distinct and non-empty, got {list(seeds)}")
    return [topic_run(profile, gated, s) for s in seeds for gated in (False, True)]


# --- generation and scoring ----------------------------------------------------------------------


def topic_prompts(data: TopicData, profile: TopicDriftProfile) -> list[tuple[int, str]]:
    """``(topic, prompt)`` pairs: ``prompts_per_topic`` one-sentence prompts per topic, drawn from the world.

    A prompt starts with ``<eos>``, as every document of the training stream does, so the model
    reads it as the first sentence of a new document.
    """
    rng = random.Random(profile.data.seed + 7_919)
    return [(t, " ".join([EOS, *data.world.sentence(t, rng)])) for t in range(data.world.n_topics)
            for _ in range(profile.prompts_per_topic)]


def score_continuation(words: Sequence[str], topic: int, world: TopicWorld) -> dict:
    """Drift counts, stickiness to the prompt's topic and distinct-2 of one continuation (cut at ``<eos>``)."""
    words = list(words)
    ended = EOS in words
    if ended:
        words = words[:words.index(EOS)]
    labels = sentence_labels(words, world)
    changes, transitions = drift_counts(labels, topic)
    return {"changes": changes, "transitions": transitions, "sentences": len(labels),
            "mixed": sum(l == MIXED for l in labels), "no_topic": sum(l == NO_TOPIC for l in labels),
            "stickiness": topic_stickiness(words, topic, world), "distinct_2": distinct_n(words, 2), "ended": ended}


def evaluate_generations(model, data: TopicData, profile: TopicDriftProfile, alpha: float | None = None,
                         samples_per_prompt: int | None = None) -> dict:
    """Sample continuations of every topic prompt (temperature ``profile.temperature``, no repetition
    penalty, which would itself push towards new topics) and score them.

    Returns the pooled ``drift_rate`` (changes / transitions over all samples), mean ``stickiness``
    and ``distinct_2``, the counts, and the ``samples``.
    """
    tokenizer = data.tokenizer
    prompts = topic_prompts(data, profile)
    n = samples_per_prompt or profile.samples_per_prompt
    samples = generate_texts(model, tokenizer, [p for _, p in prompts], n, profile.max_new_tokens,
                             profile.generation_seed, alpha, temperature=profile.temperature, repetition_penalty=None)
    rows = []
    for i, sample in enumerate(samples):
        topic = prompts[i // n][0]
        words = tokenizer.convert_ids_to_tokens(sample["ids"])
        rows.append({"topic": topic, "prompt": sample["prompt"], "text": " ".join(words),
                     **score_continuation(words, topic, data.world)})
    changes, transitions = sum(r["changes"] for r in rows), sum(r["transitions"] for r in rows)
    sentences = sum(r["sentences"] for r in rows)
    return {"drift_rate": changes / transitions if transitions else float("nan"),
            "stickiness": sample_interval([r["stickiness"] for r in rows]).mean,
            "distinct_2": sample_interval([r["distinct_2"] for r in rows]).mean,
            "changes": changes, "transitions": transitions, "sentences": sentences,
            "mixed_share": sum(r["mixed"] for r in rows) / sentences if sentences else float("nan"),
            "ended_share": sum(r["ended"] for r in rows) / len(rows), "samples": rows}


SEED_METRICS = ("drift_rate", "stickiness", "distinct_2", "mixed_share", "val_ppl")
SHARES = frozenset({"drift_rate", "stickiness", "distinct_2", "mixed_share"})  # intervals clipped to [0, 1]


def _over_seeds(name: str, values: Sequence[float]) -> Interval:
    return Interval.of_mean(values, bounds=(0.0, 1.0) if name in SHARES else None)


@dataclass
class TopicDriftResults:
    """Chapter 9's models over seeds: each kind's metrics (mean and 95% interval over seeds), the per-seed
    difference gated - plain (``paired``) and every seed's scores and samples (``per_seed[kind][seed]``)."""

    plain: TopicModelSummary
    gated: TopicModelSummary
    paired: TopicModelSummary
    per_seed: dict[str, dict[int, dict]]


def evaluate_runs(runs: dict[str, dict[int, RunRecord]], data: TopicData, profile: TopicDriftProfile) -> TopicDriftResults:
    """Per model kind: each seed's generation scores and perplexities, and their mean with a 95% interval over seeds.

    Also ``paired``: the per-seed difference gated - plain of every metric, with its interval.
    """
    per_seed: dict[str, dict[int, dict]] = {}
    for kind, by_seed in runs.items():
        per_seed[kind] = {}
        for seed, run in by_seed.items():
            scores = evaluate_generations(run.load(), data, profile)
            per_seed[kind][seed] = {**scores, "val_ppl": run.metrics.val_ppl,
                                    "val_ppl_ungated": run.metrics.val_ppl_ungated}
    out = {kind: {m: _over_seeds(m, [s[m] for s in seeds.values()]) for m in SEED_METRICS}
           for kind, seeds in per_seed.items()}
    out["gated"]["val_ppl_ungated"] = Interval.of_mean([s["val_ppl_ungated"] for s in per_seed["gated"].values()])
    common = sorted(set(per_seed["plain"]) & set(per_seed["gated"]))
    paired = {m: Interval.of_mean([per_seed["gated"][s][m] - per_seed["plain"][s][m] for s in common])
              for m in SEED_METRICS}
    return TopicDriftResults(TopicModelSummary(**out["plain"]), TopicModelSummary(**out["gated"]),
                             TopicModelSummary(**paired), per_seed)


def alpha_sweep(runs: dict[int, RunRecord], data: TopicData, profile: TopicDriftProfile,
                alphas: Sequence[float] | None = None) -> list[dict]:
    """The gated models decoded at other gate strengths: drift, validation perplexity, distinct-2 and
    stickiness at each alpha (mean over seeds, ``<metric>_low`` / ``<metric>_high`` the 95% interval)."""
    val = data.blocks("valid", profile)
    models = {seed: run.load(default_device()) for seed, run in runs.items()}
    rows = []
    for alpha in alphas if alphas is not None else profile.sweep_alphas:
        values: dict[str, list[float]] = {"drift_rate": [], "ppl": [], "distinct_2": [], "stickiness": []}
        for model in models.values():
            scores = evaluate_generations(model, data, profile, alpha, profile.sweep_samples_per_prompt)
            values["drift_rate"].append(scores["drift_rate"])
            values["distinct_2"].append(scores["distinct_2"])
            values["stickiness"].append(scores["stickiness"])
            values["ppl"].append(perplexity(model, val, alpha=alpha))
        row = {"alpha": float(alpha)}
        for name, vals in values.items():
            summary = _over_seeds(name, vals)
            row.update({name: summary.mean, f"{name}_low": summary.low, f"{name}_high": summary.high})
        rows.append(row)
    return rows
