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
from pathlib import Path
from typing import Sequence

import torch

from semlm.core import runs
from semlm.data import topics as topics_module
from semlm.data.topics import (EOS, MIXED, NO_TOPIC, TopicConfig, TopicCorpus, TopicWorld, make_topic_corpus,
                          split_sentences)
from semlm.idea.wikitext_experiment import TokenBlocks, generate_texts, idea_loss_fn
from semlm.core.metrics import distinct_n, mean_interval, perplexity, proportion, stickiness, summarise
from semlm.idea.model import IdeaGPTConfig, IdeaGPTForCausalLM
from semlm.profiles import TOPIC_STOP_WORDS as STOP_WORDS
from semlm.profiles import GPTSize, IdeaSettings, TopicDriftProfile, TrainConfig, topic_drift_profile  # noqa: F401
from semlm.core.runs import RunRecord, RunSpec, default_device, default_runs_dir

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


def data_drift(documents: Sequence[topics_module.Document], world: TopicWorld) -> dict:
    """Drift of corpus documents measured by the labeller: ``{mean, ci_low, ci_high, k, n}`` (Wilson 95%)."""
    changes = transitions = 0
    for doc in documents:
        c, n = drift_counts(sentence_labels(doc.words, world))
        changes, transitions = changes + c, transitions + n
    p = proportion(changes, transitions)
    return {"mean": p["value"], "ci_low": p["ci_low"], "ci_high": p["ci_high"], "k": changes, "n": transitions}


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


class TopicDriftExperiment(runs.Experiment):
    """Plain and idea-gated GPTs on the topic world for :mod:`semlm.core.runs` (epochs over token blocks,
    paper B's loss with alpha ramped over optimiser steps). Metrics: ``val_ppl``, ``val_ppl_ungated``
    (None for the plain model)."""

    name = "topic_drift"

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

    def evaluate(self, spec: RunSpec, data: TopicData, model, result) -> dict:
        val = data.blocks("valid", spec.config)
        return {"val_ppl": perplexity(model, val),
                "val_ppl_ungated": perplexity(model, val, alpha=0.0) if spec.config.gated else None}

    def total_steps(self, spec: RunSpec) -> int:
        run = spec.config
        return -(-len(self.data(spec).blocks("train", run)) // run.train.batch_size) * run.train.epochs



TOPIC_DRIFT = TopicDriftExperiment()


def topic_run(profile: TopicDriftProfile, gated: bool, seed: int) -> RunSpec:
    """The plain (``gated=False``) or gated model of ``profile`` with training seed ``seed``."""
    run = TopicRun(profile.data, profile.size, profile.train, profile.idea, gated)
    return RunSpec("gated" if gated else "plain", seed, run)


def train_topic_models(profile: TopicDriftProfile, seeds: Sequence[int], runs_dir: str | Path | None = None,
                       workers: int = 1) -> dict[str, dict[int, RunRecord]]:
    """``{"plain": {seed: record}, "gated": {seed: record}}``, trained or reloaded with
    :func:`semlm.core.runs.run_many` (``workers`` one-thread CPU processes, at most ``profile.max_workers``;
    on a GPU one after another)."""
    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"seeds must be distinct and non-empty, got {list(seeds)}")
    specs = [topic_run(profile, gated, s) for s in seeds for gated in (False, True)]
    records = runs.run_many(TOPIC_DRIFT, specs, runs.RunContext(profile.name, runs_dir, max(1, min(workers, profile.max_workers))),
                            label=f"topic drift ({profile.name})")
    out: dict[str, dict[int, RunRecord]] = {"plain": {}, "gated": {}}
    for spec, record in zip(specs, records):
        out[spec.name][spec.seed] = record
    return out


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
            "stickiness": summarise([r["stickiness"] for r in rows])["mean"],
            "distinct_2": summarise([r["distinct_2"] for r in rows])["mean"],
            "changes": changes, "transitions": transitions, "sentences": sentences,
            "mixed_share": sum(r["mixed"] for r in rows) / sentences if sentences else float("nan"),
            "ended_share": sum(r["ended"] for r in rows) / len(rows), "samples": rows}


SEED_METRICS = ("drift_rate", "stickiness", "distinct_2", "mixed_share", "val_ppl")
SHARES = frozenset({"drift_rate", "stickiness", "distinct_2", "mixed_share"})  # intervals clipped to [0, 1]


def _over_seeds(name: str, values: Sequence[float]) -> dict:
    return mean_interval(values, bounds=(0.0, 1.0) if name in SHARES else None)


def evaluate_runs(runs: dict[str, dict[int, RunRecord]], data: TopicData, profile: TopicDriftProfile) -> dict:
    """Per model kind: each seed's generation scores and perplexities, and their mean with a 95% interval over seeds.

    Also ``paired``: the per-seed difference gated - plain of every metric, with its interval.
    """
    per_seed: dict[str, dict[int, dict]] = {}
    for kind, by_seed in runs.items():
        per_seed[kind] = {}
        for seed, run in by_seed.items():
            scores = evaluate_generations(run.load(), data, profile)
            per_seed[kind][seed] = {**scores, "val_ppl": run.metrics["val_ppl"],
                                    "val_ppl_ungated": run.metrics["val_ppl_ungated"]}
    out = {kind: {m: _over_seeds(m, [s[m] for s in seeds.values()]) for m in SEED_METRICS}
           for kind, seeds in per_seed.items()}
    out["gated"]["val_ppl_ungated"] = mean_interval([s["val_ppl_ungated"] for s in per_seed["gated"].values()])
    common = sorted(set(per_seed["plain"]) & set(per_seed["gated"]))
    out["paired"] = {m: mean_interval([per_seed["gated"][s][m] - per_seed["plain"][s][m] for s in common])
                     for m in SEED_METRICS}
    out["per_seed"] = per_seed
    return out


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
            row.update({name: summary["mean"], f"{name}_low": summary["ci_low"], f"{name}_high": summary["ci_high"]})
        rows.append(row)
    return rows
