"""Topic drift with a ground truth (chapter 9): does the idea gate keep generations on topic?

Paper B's "domain stickiness" claim is measured on :mod:`semlm.data.topics`, a synthetic corpus
whose sentences carry a known latent topic that switches between sentences with a known
probability ``switch_prob``. Plain and idea-gated GPTs (:class:`~semlm.models.idea.IdeaGPTForCausalLM`)
are trained on it with the book's one trainer and paper B's idea loss
(:func:`semlm.idea_experiment.idea_loss_fn`), several seeds each, then continue prompts of a known
topic. Every generated sentence is labelled by its content words, so the **drift rate** of a
model (share of sentence transitions whose topic changes) can be put next to the data's own rate:
a model that learnt the data exactly drifts at ``switch_prob``; less drift is stickiness; more
is the drift the paper says the gate prevents.

Profiles (:func:`topic_drift_profile`): ``smoke`` (seconds, 2 seeds), ``cpu`` (3 seeds of each
model, the whole chapter in about 3 minutes on 2 cores), ``paper`` (a larger world and GPT, 5 seeds;
meant for a GPU). Trained models are cached under ``default_runs_dir(profile)/topic_drift/``,
keyed by the configuration and the training code.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import multiprocessing as mp
import random
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import torch

from .data import topics as topics_module
from .data.topics import (EOS, FUNCTION_WORDS, MIXED, NO_TOPIC, UNK, TopicConfig, TopicCorpus, TopicWorld,
                          make_topic_corpus, split_sentences)
from .experiment import default_runs_dir
from .idea_experiment import (GPTSize, IdeaSettings, TokenBlocks, generate_texts,
                              idea_loss_fn, perplexity_of, quiet_transformers, training_source_hash)
from .metrics import distinct_n, mean_interval, proportion, stickiness, summarise
from .models.idea import IdeaGPTConfig, IdeaGPTForCausalLM
from .profiles import check_profile
from .train import TrainConfig, fingerprint, set_seed, train

CHAPTER = "09_topic_drift"
STOP_WORDS: tuple[str, ...] = (*FUNCTION_WORDS, EOS, UNK)


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


# --- profiles ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicDriftProfile:
    name: str
    data: TopicConfig
    size: GPTSize
    train: TrainConfig
    idea: IdeaSettings
    n_seeds: int
    prompts_per_topic: int = 2
    samples_per_prompt: int = 5
    max_new_tokens: int = 40
    temperature: float = 1.0              # 1.0: a model that learnt the data drifts at switch_prob
    sweep_alphas: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 4.0)
    sweep_samples_per_prompt: int = 3
    generation_seed: int = 0
    max_workers: int = 2

    def __post_init__(self):
        if self.n_seeds < 1 or self.prompts_per_topic < 1 or self.samples_per_prompt < 1 or self.max_new_tokens < 1:
            raise ValueError(f"n_seeds, prompts_per_topic, samples_per_prompt and max_new_tokens must be >= 1, got "
                             f"{self.n_seeds}, {self.prompts_per_topic}, {self.samples_per_prompt}, {self.max_new_tokens}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if any(a < 0 for a in self.sweep_alphas):
            raise ValueError(f"sweep_alphas must be >= 0, got {self.sweep_alphas}")

    def seeds(self, seed: int) -> list[int]:
        """The training seeds: ``seed, seed + 1, ...`` (``n_seeds`` of them)."""
        return [seed + i for i in range(self.n_seeds)]


def topic_drift_profile(profile: str, seed: int = 111) -> TopicDriftProfile:
    check_profile(profile)
    # K = 8 is about one sentence; the masked columns are this world's function words (passed as ids to
    # the loss). The idea BCE is the authors' v2 form (mean over the vocabulary, lambda 0.1), as in the
    # other small paper-B profiles; alpha 0.5 with the v1 gate, as the authors' WikiText GPT.
    idea = IdeaSettings(window=8, stopword_list=STOP_WORDS, stopwords_top_n=0, alpha=0.5, alpha_ramp_steps=60,
                        pos_weight=5.0, idea_loss_reduction="mean", idea_weight=0.1)
    cpu = TopicDriftProfile(
        name="cpu", data=TopicConfig(seed=seed, n_train_docs=3000, sentences_per_doc=10),
        size=GPTSize(n_layer=2, n_head=4, n_embd=64, block_size=64, dropout=0.0),
        train=TrainConfig(epochs=4, batch_size=32, lr=3e-3, weight_decay=0.01, warmup_fraction=0.05, seed=seed),
        idea=idea, n_seeds=3, samples_per_prompt=8, sweep_samples_per_prompt=4)
    if profile == "cpu":
        return cpu
    if profile == "smoke":
        return replace(cpu, name="smoke", data=TopicConfig(seed=seed, n_train_docs=120, n_val_docs=16,
                                                           sentences_per_doc=6),
                       size=GPTSize(n_layer=1, n_head=2, n_embd=32, block_size=32, dropout=0.0),
                       train=replace(cpu.train, epochs=1, batch_size=16),
                       idea=replace(idea, alpha_ramp_steps=5), n_seeds=2, prompts_per_topic=1,
                       samples_per_prompt=2, max_new_tokens=16, sweep_alphas=(0.0, 0.5, 2.0),
                       sweep_samples_per_prompt=1, max_workers=1)
    return replace(cpu, name="paper", data=TopicConfig(seed=seed, n_topics=8, nouns_per_topic=16, verbs_per_topic=8,
                                                       adjectives_per_topic=8, sentences_per_doc=12,
                                                       n_train_docs=40_000, n_val_docs=2_000),
                   size=GPTSize(n_layer=4, n_head=4, n_embd=256, block_size=128, dropout=0.1),
                   train=replace(cpu.train, epochs=4, batch_size=64, lr=1e-3),
                   idea=replace(idea, window=12, alpha_ramp_steps=500), n_seeds=5, prompts_per_topic=4,
                   samples_per_prompt=10, max_new_tokens=80, sweep_samples_per_prompt=5)


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


def source_hash() -> str:
    """The paper-B training code's hash plus this chapter's data and training code."""
    h = hashlib.sha256(training_source_hash().encode())
    h.update(Path(topics_module.__file__).read_bytes())
    for obj in (model_config, prepare_topic_data, train_topic_model):
        h.update(inspect.getsource(obj).encode())
    return h.hexdigest()[:12]


@dataclass
class TopicRun:
    kind: str                  # "plain" or "gated"
    seed: int
    run_dir: str
    status: str
    train_seconds: float
    steps: int
    val_ppl: float
    val_ppl_ungated: float | None
    history: list[dict] = field(default_factory=list)

    def load(self, device: str | None = None) -> IdeaGPTForCausalLM:
        """The trained model, on ``device`` (default: CUDA when present, else CPU)."""
        with quiet_transformers():
            model = IdeaGPTForCausalLM.from_pretrained(str(Path(self.run_dir) / "hf")).eval()
        return model.to(device or default_device())


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def train_topic_model(profile: TopicDriftProfile, idea: bool, seed: int, runs_dir: str | Path | None = None,
                      threads: int = 1, device: str | None = None) -> TopicRun:
    """Train (or reload from the cache) one plain (``idea=False``) or gated model with training seed ``seed``."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        device = device or default_device()
        runs_dir = Path(runs_dir) if runs_dir is not None else default_runs_dir(profile.name)
        data = prepare_topic_data(profile.data)
        train_blocks, val_blocks = data.blocks("train", profile), data.blocks("valid", profile)
        train_blocks.device = val_blocks.device = device
        tc = replace(profile.train, seed=seed)
        config = model_config(profile, len(data.world.vocabulary), idea)
        description = {"config": config.to_dict(), "settings": asdict(profile.idea), "idea": idea,
                       "stopwords": data.stopword_ids, "data": asdict(profile.data), "source": source_hash()}
        description["config"].pop("transformers_version", None)
        kind = "gated" if idea else "plain"
        run_dir = runs_dir / "topic_drift" / f"{kind}-seed{seed}-{fingerprint(description, asdict(tc))}"
        steps_per_epoch = math.ceil(len(train_blocks) / tc.batch_size)
        steps_done = 0
        state_file = run_dir / "checkpoint" / "trainer_state.pt"
        if state_file.is_file() and not (run_dir / "final").exists():  # resumed: the alpha ramp goes on
            steps_done = torch.load(state_file, weights_only=False)["epoch"] * steps_per_epoch
        set_seed(seed)
        model = IdeaGPTForCausalLM(config).to(device)
        result = train(model, train_blocks, val_blocks, tc, run_dir=run_dir, run_description=description,
                       progress=False, loss_fn=idea_loss_fn(profile.idea, data.stopword_ids, idea),
                       validate=lambda m, v, step: perplexity_of(m, v))
        if not (run_dir / "hf" / "config.json").is_file():
            with quiet_transformers():
                model.save_pretrained(str(run_dir / "hf"))
        model.eval()
        return TopicRun(kind, seed, str(run_dir), result.status, result.train_seconds, steps_per_epoch * tc.epochs,
                        perplexity_of(model, val_blocks), perplexity_of(model, val_blocks, alpha=0.0) if idea else None,
                        result.history)
    finally:
        torch.set_num_threads(previous)


def train_topic_models(profile: TopicDriftProfile, seeds: Sequence[int], runs_dir: str | Path | None = None,
                       workers: int = 1) -> dict[str, dict[int, TopicRun]]:
    """``{"plain": {seed: run}, "gated": {seed: run}}``; in ``workers`` spawned one-thread CPU processes when
    > 1 (on a GPU every run trains in this process, on the GPU)."""
    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"seeds must be distinct and non-empty, got {list(seeds)}")
    jobs = [(idea, s) for s in seeds for idea in (False, True)]
    workers = max(1, min(workers, profile.max_workers, len(jobs)))
    if workers == 1 or default_device() == "cuda":
        runs = [train_topic_model(profile, idea, s, runs_dir) for idea, s in jobs]
    else:
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
            runs = list(pool.map(train_topic_model, *zip(*[(profile, idea, s, runs_dir) for idea, s in jobs])))
    out: dict[str, dict[int, TopicRun]] = {"plain": {}, "gated": {}}
    for run in runs:
        out[run.kind][run.seed] = run
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


def evaluate_runs(runs: dict[str, dict[int, TopicRun]], data: TopicData, profile: TopicDriftProfile) -> dict:
    """Per model kind: each seed's generation scores and perplexities, and their mean with a 95% interval over seeds.

    Also ``paired``: the per-seed difference gated - plain of every metric, with its interval.
    """
    per_seed: dict[str, dict[int, dict]] = {}
    for kind, by_seed in runs.items():
        per_seed[kind] = {}
        for seed, run in by_seed.items():
            scores = evaluate_generations(run.load(), data, profile)
            per_seed[kind][seed] = {**scores, "val_ppl": run.val_ppl, "val_ppl_ungated": run.val_ppl_ungated}
    out = {kind: {m: _over_seeds(m, [s[m] for s in seeds.values()]) for m in SEED_METRICS}
           for kind, seeds in per_seed.items()}
    out["gated"]["val_ppl_ungated"] = mean_interval([s["val_ppl_ungated"] for s in per_seed["gated"].values()])
    common = sorted(set(per_seed["plain"]) & set(per_seed["gated"]))
    out["paired"] = {m: mean_interval([per_seed["gated"][s][m] - per_seed["plain"][s][m] for s in common])
                     for m in SEED_METRICS}
    out["per_seed"] = per_seed
    return out


def alpha_sweep(runs: dict[int, TopicRun], data: TopicData, profile: TopicDriftProfile,
                alphas: Sequence[float] | None = None) -> list[dict]:
    """The gated models decoded at other gate strengths: drift, validation perplexity, distinct-2 and
    stickiness at each alpha (mean over seeds, ``<metric>_low`` / ``<metric>_high`` the 95% interval)."""
    val = data.blocks("valid", profile)
    val.device = default_device()
    models = {seed: run.load(val.device) for seed, run in runs.items()}
    rows = []
    for alpha in alphas if alphas is not None else profile.sweep_alphas:
        values: dict[str, list[float]] = {"drift_rate": [], "ppl": [], "distinct_2": [], "stickiness": []}
        for model in models.values():
            scores = evaluate_generations(model, data, profile, alpha, profile.sweep_samples_per_prompt)
            values["drift_rate"].append(scores["drift_rate"])
            values["distinct_2"].append(scores["distinct_2"])
            values["stickiness"].append(scores["stickiness"])
            values["ppl"].append(perplexity_of(model, val, alpha=alpha))
        row = {"alpha": float(alpha)}
        for name, vals in values.items():
            summary = _over_seeds(name, vals)
            row.update({name: summary["mean"], f"{name}_low": summary["ci_low"], f"{name}_high": summary["ci_high"]})
        rows.append(row)
    return rows
