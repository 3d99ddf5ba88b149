"""Topic drift with a ground truth (chapter 9): does the idea gate keep generations on topic?

Paper B's "domain stickiness" claim, measured on :mod:`semlm.data.topics`: synthetic documents whose sentences
carry a known topic that switches with probability ``switch_prob``. From the label of every generated sentence
(:class:`DriftCounts`): ``switch_rate``, the share of transitions between consecutive single-topic sentences
whose topic changes; ``excess_drift``, that minus the data's rate (0 for a model that learnt the data; below 0
is a miscalibration, not a success); ``mix_rate``, the share of topical sentences that mix topics.

Per seed, the gated GPT trains for the largest budget and the plain GPT for ``plain_steps``, keeping a
checkpoint at every validation (:func:`topic_drift_runs`); :class:`Measurements` scores any checkpoint once,
:func:`topic_decision` builds B-topic-drift's deciding comparison (arithmetic in :mod:`semlm.idea.topic_decision`)
and :func:`evaluate_curve` the secondary learning curve.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, field, replace
from functools import cache, lru_cache
from typing import Sequence

import numpy as np
import torch

from semlm.core import runs
from semlm.data import topics as topics_module
from semlm.data.topics import (EOS, MIXED, NEUTRAL, TopicConfig, TopicCorpus, TopicWorld, make_topic_corpus,
                               split_sentences)
from semlm.idea.data import TokenBlocks
from semlm.idea.generation import generate_texts, sample_interval
from semlm.idea.loss import idea_loss_fn
from semlm.idea.wikitext_experiment import model_config
from semlm.core.metrics import distinct_n, perplexity, stickiness
from semlm.core.records import Interval
from semlm.idea.records import IdeaRunMetrics, TopicDecision, TopicModelSummary
from semlm.idea.model import IdeaGPTForCausalLM
from semlm.idea.sharpening import matched_temperature, mean_entropy, next_token_logits
from semlm.idea.topic_decision import Arm, PromptCounts, SeedArms, bracket, decide
from semlm.idea.profiles import TOPIC_STOP_WORDS, GPTSize, IdeaSettings, TopicDriftProfile
from semlm.core.train_config import TrainConfig
from semlm.core.runs import RunRecord, RunSpec, default_device

CHAPTER = "09_topic_drift"


# --- labelling and drift -------------------------------------------------------------------------


def _words(text: str | Sequence[str]) -> list[str]:
    """The words of ``text`` (a string or a word list) before its first ``<eos>``."""
    words = text.split() if isinstance(text, str) else list(text)
    return words[:words.index(EOS)] if EOS in words else words


def sentence_labels(text: str | Sequence[str], world: TopicWorld, complete_only: bool = True) -> list[int]:
    """The label (:meth:`TopicWorld.label`) of every sentence of ``text`` (a string or a word list), in order;
    only sentences closed by a full stop unless ``complete_only`` is False, none after an ``<eos>``."""
    return [world.label(s) for s in split_sentences(_words(text), complete_only)]


@dataclass(frozen=True)
class DriftCounts:
    """Topic switches between sentences and topic mixing inside them, counted over some texts."""

    switches: int = 0       # transitions between consecutive single-topic sentences whose topic changes
    transitions: int = 0    # such transitions (the prompt's topic counts as the first sentence)
    mixed: int = 0          # topical sentences whose words allow no common topic
    topical: int = 0        # sentences with at least one topical word
    sentences: int = 0      # complete sentences

    def __add__(self, other: "DriftCounts") -> "DriftCounts":
        return DriftCounts(*(a + b for a, b in zip(astuple(self), astuple(other))))

    @property
    def switch_rate(self) -> float:
        return self.switches / self.transitions if self.transitions else float("nan")

    @property
    def mix_rate(self) -> float:
        return self.mixed / self.topical if self.topical else float("nan")


def drift_counts(labels: Sequence[int], start_topic: int | None = None) -> DriftCounts:
    """The :class:`DriftCounts` of one text's sentence labels: the switch chain is ``start_topic`` (if given)
    followed by the single-topic sentences (neutral, ambiguous and mixed ones skipped)."""
    chain = ([start_topic] if start_topic is not None else []) + [l for l in labels if l >= 0]
    return DriftCounts(sum(a != b for a, b in zip(chain, chain[1:])), max(len(chain) - 1, 0),
                       sum(l == MIXED for l in labels), sum(l != NEUTRAL for l in labels), len(labels))


def text_drift(texts: Sequence[str | Sequence[str]], world: TopicWorld) -> DriftCounts:
    """:class:`DriftCounts` pooled over documents ``texts`` (each chain starts at its first sentence)."""
    return sum((drift_counts(sentence_labels(text, world)) for text in texts), DriftCounts())


def topic_stickiness(text: str | Sequence[str], topic: int, world: TopicWorld) -> float:
    """Share of the topical words of ``text`` that allow ``topic`` (paper B's stickiness, with the function
    and neutral words as the stopwords); NaN without topical words."""
    return stickiness(_words(text), world.content_words(topic), (*TOPIC_STOP_WORDS, *world.all_neutral_words))


def data_drift(documents: Sequence[topics_module.Document], world: TopicWorld) -> Interval:
    """The switch rate of corpus documents as the labeller reads them, with its Wilson 95% interval."""
    counts = text_drift([doc.words for doc in documents], world)
    p = Interval.of_proportion(counts.switches, counts.transitions)
    return Interval(p.mean, p.low, p.high, counts.transitions, None, "mean", counts.switches)


#: Held-out transitions the data's switch rate of one world is measured on (B-topic-drift over worlds): at 20,000 its
#: 95% interval is about +-0.005, negligible beside the spread over seeds.
WORLD_RATE_TRANSITIONS = 20_000


def world_data_rate(config: TopicConfig, transitions: int = WORLD_RATE_TRANSITIONS) -> Interval:
    """The data's switch rate of ``config``'s world on held-out documents drawn for it (a stream of its own, apart
    from the training and validation documents), at least ``transitions`` transitions, with its Wilson interval."""
    world = TopicWorld.from_config(config)
    rng = np.random.default_rng([config.seed, config.lexicon_seed, 31_337])
    counts = DriftCounts()
    while counts.transitions < transitions:
        counts = counts + text_drift([doc.words for doc in topics_module.draw_documents(world, config, 500, rng)],
                                     world)
    p = Interval.of_proportion(counts.switches, counts.transitions)
    return Interval(p.mean, p.low, p.high, counts.transitions, None, "mean", counts.switches)


def world_of_seed(profile: TopicDriftProfile, seed: int) -> TopicDriftProfile:
    """``profile`` in the topic world of ``seed`` (B-topic-drift over worlds: world seed = training seed): its own
    made-up words (``lexicon_seed``) and documents (``data.seed``), the same laws."""
    return replace(profile, data=replace(profile.data, seed=seed, lexicon_seed=seed))


# --- data ----------------------------------------------------------------------------------------


@dataclass
class TopicData:
    corpus: TopicCorpus
    streams: dict[str, torch.Tensor]     # split -> 1-D ids, documents joined by <eos>
    stopword_ids: list[int]              # function words, <eos>, <unk>: masked out of the idea targets

    @property
    def world(self) -> TopicWorld:
        return self.corpus.world

    def blocks(self, split: str, profile: TopicDriftProfile) -> TokenBlocks:
        return TokenBlocks.from_stream(self.streams[split], profile.size.block_size, profile.idea.window)


@lru_cache(maxsize=8)
def prepare_topic_data(config: TopicConfig) -> TopicData:
    """The corpus of ``config`` as id streams (``<eos>`` before every document) and the stopword ids."""
    corpus = make_topic_corpus(config)
    world = corpus.world

    def stream(docs):
        return torch.tensor([i for d in docs for i in world.encode([EOS, *d.words])], dtype=torch.long)

    return TopicData(corpus, {"train": stream(corpus.train), "valid": stream(corpus.val)},
                     world.encode(TOPIC_STOP_WORDS))


# --- training ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicRun:
    """What one chapter-9 run is: everything its weights depend on (not the profile's generation settings)."""

    data: TopicConfig
    size: GPTSize
    train: TrainConfig
    idea: IdeaSettings
    gated: bool
    #: training processes the profile allows side by side: scheduling, not the recipe, so in no key
    max_workers: int | None = field(default=None, metadata={"execution": True})


class TopicDriftExperiment(runs.Experiment):
    """Plain and idea-gated GPTs on the topic world for :mod:`semlm.core.runs` (epochs over token blocks)."""

    name = "topic_drift"
    metrics_type = IdeaRunMetrics

    def max_workers(self, specs: Sequence[RunSpec]) -> int | None:
        return min((s.config.max_workers for s in specs if s.config.max_workers is not None), default=None)

    def data_key(self, spec: RunSpec):
        return spec.config.data

    def prepare(self, spec: RunSpec) -> TopicData:
        return prepare_topic_data(spec.config.data)

    def build(self, spec: RunSpec, data: TopicData) -> IdeaGPTForCausalLM:
        run = spec.config  # chapter 9's GPTs keep GPT-2's initialisation and dropout everywhere
        size = replace(run.size, init="gpt2_scaled", dropout_scope="everywhere")
        return IdeaGPTForCausalLM(model_config(replace(run, size=size), len(data.world.vocabulary), run.gated))

    def fit(self, spec: RunSpec, data: TopicData) -> runs.Fit:
        run = spec.config
        return runs.Fit(data.blocks("train", run), data.blocks("valid", run), run.train,
                        loss_fn=idea_loss_fn(run.idea, data.stopword_ids, run.gated,
                                             compile_on_cuda=run.train.compile_on_cuda),
                        snapshots=True)

    def evaluate(self, spec: RunSpec, data: TopicData, model, result) -> IdeaRunMetrics:
        val = data.blocks("valid", spec.config)
        return IdeaRunMetrics(val_ppl=perplexity(model, val),
                               val_ppl_ungated=perplexity(model, val, alpha=0.0) if spec.config.gated else None)

    def total_steps(self, spec: RunSpec) -> int:
        return spec.config.train.max_steps

TOPIC_DRIFT = TopicDriftExperiment()


#: the run group of the book's corpus, and of the secondary runs that draw new documents per seed
CURVE, RESAMPLED = "curve", "resampled"
#: the document seed of a resampled corpus: this plus the training seed (far from the chapter's own seeds)
RESAMPLE_OFFSET = 10_000


def topic_run(profile: TopicDriftProfile, gated: bool, seed: int, resample: bool = False) -> RunSpec:
    """The plain or gated model of ``profile`` at training seed ``seed`` (the gated one for the largest budget,
    the plain one for ``profile.plain_steps``). ``resample``: on the seed's own documents and prompts
    (``data.seed = RESAMPLE_OFFSET + seed``), same world, laws and words."""
    steps = profile.plain_steps if not gated else profile.gated_steps
    data = replace(profile.data, seed=RESAMPLE_OFFSET + seed) if resample else profile.data
    run = TopicRun(data, profile.size, replace(profile.train, max_steps=steps), profile.idea, gated,
                   profile.max_workers)
    return RunSpec("gated" if gated else "plain", seed, run, RESAMPLED if resample else CURVE)


def topic_drift_runs(profile: TopicDriftProfile, seeds: Sequence[int], resample: bool = False) -> list[RunSpec]:
    """Chapter 9's runs: the plain and the gated GPT of every seed (``resample``: each seed on its own corpus)."""
    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"seeds must be distinct and non-empty, got {list(seeds)}")
    return [topic_run(profile, gated, s, resample) for s in seeds for gated in (False, True)]


# --- generation and scoring ----------------------------------------------------------------------


def topic_prompts(data: TopicData, profile: TopicDriftProfile) -> list[tuple[int, str]]:
    """``prompts_per_topic`` ``(topic, prompt)`` pairs per topic: ``<eos>``, a sentence of the topic and a neutral
    one, so the model carries the topic across a neutral sentence as inside the documents."""
    rng = np.random.default_rng(profile.data.seed + 7_919)
    world = data.world
    return [(t, " ".join([EOS, *world.sentence(t, rng), *world.sentence(None, rng)]))
            for t in range(world.n_topics) for _ in range(profile.prompts_per_topic)]


def score_continuation(words: Sequence[str], topic: int, world: TopicWorld) -> dict:
    """Drift counts, stickiness to the prompt's topic and distinct-2 of one continuation (cut at ``<eos>``)."""
    words = _words(words)
    return {"counts": drift_counts(sentence_labels(words, world), topic),
            "stickiness": topic_stickiness(words, topic, world), "distinct_2": distinct_n(words, 2)}


def evaluate_generations(model, data: TopicData, profile: TopicDriftProfile, alpha: float | None = None,
                         samples_per_prompt: int | None = None, temperature: float | None = None) -> dict:
    """Continuations of every topic prompt (no repetition penalty, which would itself push towards new topics),
    scored: pooled rates and ``counts``, ``prompt_counts``, mean stickiness and distinct-2, and the ``samples``."""
    tokenizer = data.world.tokenizer()
    prompts = topic_prompts(data, profile)
    n = samples_per_prompt or profile.samples_per_prompt
    samples = generate_texts(model, tokenizer, [p for _, p in prompts], n, profile.max_new_tokens,
                             profile.generation_seed, alpha, temperature=temperature or profile.temperature,
                             repetition_penalty=None)
    rows = []
    for i, sample in enumerate(samples):
        topic = prompts[i // n][0]
        words = tokenizer.convert_ids_to_tokens(sample["ids"])
        rows.append({"topic": topic, "prompt": sample["prompt"], "text": " ".join(words),
                     **score_continuation(words, topic, data.world)})
    per_prompt = [sum((r["counts"] for r in rows[i * n:(i + 1) * n]), DriftCounts()) for i in range(len(prompts))]
    counts = sum(per_prompt, DriftCounts())
    return {"switch_rate": counts.switch_rate, "excess_drift": counts.switch_rate - profile.data.switch_prob,
            "mix_rate": counts.mix_rate, "counts": counts,
            "prompt_counts": PromptCounts.of([(c.switches, c.transitions, c.mixed, c.topical) for c in per_prompt]),
            "stickiness": sample_interval([r["stickiness"] for r in rows]).mean,
            "distinct_2": sample_interval([r["distinct_2"] for r in rows]).mean, "samples": rows}


# --- the deciding comparison and the secondary curve ---------------------------------------------


def _history_ppl(run: RunRecord) -> tuple[list[int], list[float]]:
    return [int(r["step"]) for r in run.history], [float(r["val_ppl"]) for r in run.history]


@dataclass(eq=False)
class Measurements:
    """Every model measured once: generations and PPL per (kind, seed, step, alpha, temperature), cached for
    the chapter (the decision, the curve and the controls share checkpoints)."""

    runs: dict[str, dict[int, RunRecord]]
    data: TopicData
    profile: TopicDriftProfile

    @cache
    def model(self, kind: str, seed: int, step: int):
        run = self.runs[kind][seed]
        return run.load("cpu", step=None if step == run.steps else step)

    @cache
    def scores(self, kind: str, seed: int, step: int, alpha: float | None = None,
               temperature: float | None = None) -> dict:
        return evaluate_generations(self.model(kind, seed, step), self.data, self.profile, alpha,
                                    temperature=temperature)

    def ppl(self, kind: str, seed: int, step: int) -> float:
        steps, ppl = _history_ppl(self.runs[kind][seed])
        return ppl[steps.index(step)]


def seed_arms(m: Measurements, seed: int) -> tuple[SeedArms, dict]:
    """One seed's arms for :func:`~semlm.idea.topic_decision.decide` and what they were (bracketing steps,
    weight, temperatures, entropies), for the chapter's table."""
    gated_run = m.runs["gated"][seed]
    g, target = gated_run.steps, gated_run.metrics.val_ppl
    found = bracket(*_history_ppl(m.runs["plain"][seed]), target)
    detail = {"seed": seed, "gated_ppl": target, "gated_steps": g}
    if found is None:
        return SeedArms(seed, target, None), {**detail, "bracket": None}
    a, b, w = found
    val = m.data.blocks("valid", m.profile)
    entropy = mean_entropy(next_token_logits(m.model("gated", seed, g), val))
    temps = [matched_temperature(next_token_logits(m.model("plain", seed, s), val), entropy) for s in (a, b)]
    arms = {"gated": Arm.single(m.scores("gated", seed, g)["prompt_counts"]),
            "gate_off": Arm.single(m.scores("gated", seed, g, alpha=0.0)["prompt_counts"]),
            "plain": Arm.interpolated(m.scores("plain", seed, a)["prompt_counts"],
                                      m.scores("plain", seed, b)["prompt_counts"], w),
            "sharpened": Arm.interpolated(m.scores("plain", seed, a, temperature=temps[0])["prompt_counts"],
                                          m.scores("plain", seed, b, temperature=temps[1])["prompt_counts"], w)}
    detail.update({"bracket": [a, b], "plain_ppl": [m.ppl("plain", seed, a), m.ppl("plain", seed, b)], "weight": w,
                   "gated_entropy": entropy, "temperature": temps})
    return SeedArms(seed, target, arms, float(np.mean(temps))), detail


def topic_decision(m: Measurements, data_rate: Interval) -> tuple[TopicDecision, list[dict]]:
    """B-topic-drift's :class:`~semlm.idea.records.TopicDecision` over every seed of ``m``, and each seed's details."""
    pairs = [seed_arms(m, seed) for seed in sorted(m.runs["gated"])]
    return decide([arms for arms, _ in pairs], data_rate), [detail for _, detail in pairs]


def resampled_decision(resampled: dict[str, dict[int, RunRecord]], profile: TopicDriftProfile
                       ) -> tuple[TopicDecision, list[dict]]:
    """The deciding comparison on the runs trained on a corpus of their own (``resample=True``), each seed
    measured on its own corpus and prompts; the data's rate pooled over the seeds' validation documents."""
    pairs, counts = [], DriftCounts()
    for seed in sorted(resampled["gated"]):
        data = prepare_topic_data(resampled["gated"][seed].spec.config.data)
        counts = counts + text_drift([doc.words for doc in data.corpus.val], data.world)
        pairs.append(seed_arms(Measurements({kind: {seed: resampled[kind][seed]} for kind in resampled}, data,
                                            profile), seed))
    rate = Interval.of_proportion(counts.switches, counts.transitions)
    return decide([arms for arms, _ in pairs], rate), [detail for _, detail in pairs]


SEED_METRICS = ("switch_rate", "excess_drift", "mix_rate", "stickiness", "distinct_2", "val_ppl")
SHARES = frozenset({"switch_rate", "mix_rate", "stickiness", "distinct_2"})  # intervals clipped to [0, 1]


def _over_seeds(name: str, values: Sequence[float]) -> Interval:
    return Interval.of_mean(values, bounds=(0.0, 1.0) if name in SHARES else None)


@dataclass
class BudgetResults:
    """The plain and gated checkpoints of one training budget (the secondary curve): each kind's metrics over
    seeds, the per-seed difference gated - plain (``paired``) and every seed's scores."""

    steps: int
    plain: TopicModelSummary
    gated: TopicModelSummary
    paired: TopicModelSummary
    per_seed: dict[str, dict[int, dict]]


def evaluate_budget(m: Measurements, steps: int) -> BudgetResults:
    """Both models' checkpoints at ``steps`` optimiser steps, every seed, summarised over seeds and paired."""
    per_seed = {kind: {seed: {**m.scores(kind, seed, steps), "val_ppl": m.ppl(kind, seed, steps)}
                       for seed in sorted(m.runs[kind])} for kind in ("plain", "gated")}
    for seed, scores in per_seed["gated"].items():
        scores["val_ppl_ungated"] = perplexity(m.model("gated", seed, steps), m.data.blocks("valid", m.profile),
                                               alpha=0.0)
    out = {kind: {name: _over_seeds(name, [s[name] for s in seeds.values()]) for name in SEED_METRICS}
           for kind, seeds in per_seed.items()}
    out["gated"]["val_ppl_ungated"] = Interval.of_mean([s["val_ppl_ungated"] for s in per_seed["gated"].values()])
    common = sorted(set(per_seed["plain"]) & set(per_seed["gated"]))
    plain, gated = ([per_seed[k][s] for s in common] for k in ("plain", "gated"))
    out["paired"] = {name: Interval.paired([g[name] for g in gated], [p[name] for p in plain]) for name in SEED_METRICS}
    out["paired"]["ppl_change"] = Interval.of_mean([g["val_ppl"] / p["val_ppl"] - 1 for g, p in zip(gated, plain)])
    # drift_rate repeats switch_rate: the name older files and the recorded-runs table read
    summary = {kind: TopicModelSummary(**v, drift_rate=v["switch_rate"]) for kind, v in out.items()}
    return BudgetResults(steps, summary["plain"], summary["gated"], summary["paired"], per_seed)


def evaluate_curve(m: Measurements) -> list[BudgetResults]:
    """:func:`evaluate_budget` at every budget of the profile (checkpoints of the same runs), ascending."""
    return [evaluate_budget(m, steps) for steps in m.profile.budgets]


SWEEP_METRICS = ("switch_rate", "excess_drift", "mix_rate", "ppl", "distinct_2", "stickiness")


def alpha_sweep(runs: dict[int, RunRecord], data: TopicData, profile: TopicDriftProfile,
                alphas: Sequence[float] | None = None) -> list[dict]:
    """The gated models decoded at other gate strengths: each metric of :data:`SWEEP_METRICS` per alpha, mean over
    seeds with ``<metric>_low`` / ``<metric>_high``."""
    val = data.blocks("valid", profile)
    models = {seed: run.load(default_device()) for seed, run in runs.items()}
    rows = []
    for alpha in alphas if alphas is not None else profile.sweep_alphas:
        scores = [{**evaluate_generations(model, data, profile, alpha, profile.sweep_samples_per_prompt),
                   "ppl": perplexity(model, val, alpha=alpha)} for model in models.values()]
        row = {"alpha": float(alpha)}
        for name in SWEEP_METRICS:
            summary = _over_seeds(name, [s[name] for s in scores])
            row.update({name: summary.mean, f"{name}_low": summary.low, f"{name}_high": summary.high})
        rows.append(row)
    return rows
