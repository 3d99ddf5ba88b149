"""Semantic fusion on SST-2 (paper A, Section 3.3, Table 7), as a causal language model and in the published setting.

Word level, because every predicate is a property of a word (a VADER valence, a tag prior): ``prepare_sst2``
builds the vocabulary (minimum frequency, ``<unk>``), the weak-supervision feature bank of
:mod:`semlm.fusion.sst2_features` and the tensors. :class:`SST2Experiment` says what a run is (baseline or fusion,
causal or published; :mod:`semlm.core.runs` runs it). A bag-of-words logistic regression
(``train_sentiment_classifier``, its own vocabulary) judges generated text beside VADER, and
``continue_under_control`` continues dev prefixes under a :class:`~semlm.fusion.request.Request`, soft or hard.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import torch
from torch import nn
from transformers import (LogitsProcessorList, MinNewTokensLengthLogitsProcessor, SuppressTokensLogitsProcessor,
                          TemperatureLogitsWarper, TopPLogitsWarper)

from semlm.core import runs
from semlm.data.dataset import LMTensors, encode_corpus
from semlm.data.sst2 import load_sst2, load_sst_phrase_trees, tokenize
from semlm.data.synthetic import END_PUNCTUATION
from semlm.data.vocab import Vocabulary
from semlm.fusion.synthetic_experiment import check_setting, model_config
from semlm.fusion.fuzzy import FEATURE_NAMES, feature_index
from semlm.core.metrics import perplexity, score_tokens
from semlm.fusion.decoding.generate import sample_ids
from semlm.fusion.decoding.processors import (AdjectiveClassRestriction, EndPunctuationControl, LastKRepetitionPenalty,
                                              SentimentSteering, final_punctuation)
from semlm.fusion.losses import FusionLoss
from semlm.fusion.config import BackboneConfig
from semlm.fusion.metrics import POLARITY_LABELS
from semlm.fusion.model import build_model
from semlm.fusion.request import Request
from semlm.core.train_config import TrainConfig
from semlm.fusion.profiles import ClassifierConfig, ControlConfig, SST2Profile
from semlm.core.records import Interval
from semlm.fusion.records import SST2Judgement, SST2Metrics
from semlm.core.runs import RunSpec
from semlm.fusion.sst2_features import (
    COARSE_TAGS, SST2Features, TagPrior, build_sst2_tables, build_vocabulary, capitalised_words, load_spacy_tagger,
    map_unknown, tag_prior, vader_lexicon,
)
from semlm.core.train import fingerprint

SETTINGS: tuple[str, ...] = ("causal", "published")
KINDS: tuple[str, ...] = ("baseline", "fusion")


# --- data --------------------------------------------------------------------------------------


@dataclass
class SST2Data:
    vocab: Vocabulary
    prior: TagPrior
    featurizers: dict[str, SST2Features]          # by setting
    train_sentences: list[list[str]]
    dev_sentences: list[list[str]]
    dev_labels: list[int]
    tensors: dict[str, dict[str, LMTensors]]      # setting -> split -> tensors (batches trimmed and bucketed)
    adjective_classes: dict[str, torch.Tensor]    # "positive" / "negative" -> vocab ids
    capitalisation_source: str
    n_train_available: int

    def unk_rate(self, split: str = "dev") -> float:
        data = self.tensors["causal"][split]
        unk = self.vocab.id("<unk>")
        return (data.targets[data.scored] == unk).float().mean().item()


def subsample(n_available: int, n: int | None, seed: int) -> list[int]:
    """Indices of a seeded random subset (all, in order, when ``n`` is None or too large)."""
    if n is None or n >= n_available:
        return list(range(n_available))
    generator = torch.Generator().manual_seed(seed)
    return sorted(torch.randperm(n_available, generator=generator)[:n].tolist())


def _cached_tag_prior(sentences: list[list[str]], cache_dir: Path | None) -> TagPrior:
    key = fingerprint(sentences, "tag-prior-v1")
    path = cache_dir / f"tag-prior-{key}.json" if cache_dir is not None else None
    if path is not None and path.exists():
        saved = json.loads(path.read_text())
        return TagPrior({w: tuple(p) for w, p in saved["probabilities"].items()}, saved["source"])
    lexicon = vader_lexicon()
    prior = tag_prior(sentences, load_spacy_tagger(), lexicon)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # atomic: the chapter and the book's training ahead may both write it
        runs.write_atomic(path, json.dumps({"source": prior.source, "probabilities": prior.probabilities}))
    return prior


#: Shuffled SST-2 training batches come from pools of this many batches sorted by length
#: (``LMTensors.bucket_batches``): the phrases are 9 tokens on average but up to 52, so a random
#: batch is mostly padding; the chapter has trained this way since it was written.
SST2_BUCKET_BATCHES = 50


def prepare_sst2(profile: SST2Profile | SST2Run, cache_dir: str | Path | None = None) -> SST2Data:
    """Vocabulary, feature bank and tensors of both settings; the tag prior is cached in ``cache_dir``.

    ``profile`` is an :class:`SST2Profile` or an :class:`SST2Run` (``n_train``, ``min_freq``, ``seed``).
    """
    train_split, dev_split = load_sst2("train"), load_sst2("dev")
    picked = subsample(len(train_split), profile.n_train, profile.seed)
    columns = train_split.to_dict()  # plain lists: indexing a datasets column row by row is slow
    all_sentences = columns["sentence"]
    train_sentences = [tokenize(all_sentences[i]) for i in picked]
    dev_columns = dev_split.to_dict()
    dev_sentences = [tokenize(s) for s in dev_columns["sentence"]]
    vocab = build_vocabulary(train_sentences, profile.min_freq)
    prior = _cached_tag_prior(train_sentences, Path(cache_dir) if cache_dir is not None else None)
    lexicon = vader_lexicon()
    try:
        capitalised, cap_source = capitalised_words(load_sst_phrase_trees("train")), "SST phrase trees (train)"
    except FileNotFoundError:
        capitalised, cap_source = None, "tag prior (PROPN), phrase trees not found"
    tables = build_sst2_tables(vocab, prior, lexicon, capitalised)
    featurizers = {s: SST2Features(vocab, tables, published=s == "published", source=prior.source) for s in SETTINGS}
    tensors = {}
    for setting, featurize in featurizers.items():
        tensors[setting] = {
            # phrases of many lengths (2 to 52 tokens): shuffled batches are length-bucketed
            "train": replace(encode_corpus([map_unknown(s, vocab) for s in train_sentences], vocab, featurize),
                             bucket_batches=SST2_BUCKET_BATCHES),
            "dev": encode_corpus([map_unknown(s, vocab) for s in dev_sentences], vocab, featurize),
        }
    adjective = torch.tensor([prior.majority(w) == "ADJ" for w in vocab.tokens])
    adjective_classes = {"positive": torch.nonzero(adjective & (tables.valence > 0)).flatten(),
                         "negative": torch.nonzero(adjective & (tables.valence < 0)).flatten()}
    return SST2Data(vocab, prior, featurizers, train_sentences, dev_sentences, dev_columns["label"], tensors,
                    adjective_classes, cap_source, len(train_split))


# --- language models ---------------------------------------------------------------------------


#: How the tied embedding starts on SST-2 (both models, both settings): N(0, 1/d) instead of
#: nn.Embedding's N(0, 1). With N(0, 1) and a tied head, the initial logits have a standard
#: deviation of about sqrt(d) = 11, so a vocabulary of thousands starts at ~23 nats of loss and
#: the paper's 750-step budget (lr 3e-4) never recovers (cpu profile, seed 111: dev PPL 3,203
#: after 6 epochs; N(0, 1/d): 300 after 2). The synthetic task's ~40 words hide this.
EMBEDDING_INIT = "normal(0, 1/d_model)"


def initialise_embedding(model: nn.Module) -> None:
    d = model.backbone.config.d_model
    with torch.no_grad():
        nn.init.normal_(model.backbone.embed.weight, 0.0, d ** -0.5)


def evaluate_sst2_model(model: nn.Module, data: LMTensors) -> dict:
    """Dev perplexity (``semlm.core.metrics.perplexity``), its token count and, for fusion, the semantic MSE; one pass."""
    scores = score_tokens(model, data)
    out = {"ppl": perplexity(scores), "n_tokens": int(scores.targets.numel())}
    if scores.feature_squared_error is not None:
        out["sem_mse"] = scores.feature_squared_error.mean().item()
    return out


@dataclass(frozen=True)
class SST2Run:
    """What one SST-2 language model is: the data scale, the model and its training (all in the cache key).

    The profile's classifier and control settings are left out: they never change a language model.
    ``profile`` names the scale (it places the tag-prior cache next to the runs).
    """

    profile: str
    n_train: int | None
    min_freq: int
    backbone: BackboneConfig
    train: TrainConfig
    kind: str
    setting: str
    seed: int = 111              # the run's seed (its RunSpec's): the subsample of training phrases
    #: how many of these runs train at once (the profile's ``workers``): how it runs, not what it trains, so out of
    #: the key (:func:`semlm.core.train_config.execution_fields`)
    workers: int = field(default=2, metadata={"execution": True})


class SST2Experiment(runs.Experiment):
    """Paper A on SST-2 for :mod:`semlm.core.runs`: baseline or fusion, causal or published."""

    name = "sst2"
    device = "cpu"  # the chapter scores and continues text with CPU tensors (score_tokens, continue_under_control)
    metrics_type = SST2Metrics

    def data_key(self, spec: RunSpec):
        run = spec.config
        return run.profile, run.n_train, run.min_freq, run.seed

    def prepare(self, spec: RunSpec) -> SST2Data:
        run = spec.config
        return prepare_sst2(run, cache_dir=runs.default_runs_dir(run.profile) / "sst2")

    def build(self, spec: RunSpec, data: SST2Data) -> nn.Module:
        run = spec.config
        model = build_model(model_config(run, run.kind, len(data.vocab), run.setting))
        initialise_embedding(model)
        return model

    def fit(self, spec: RunSpec, data: SST2Data) -> runs.Fit:
        run = spec.config
        tensors = data.tensors[run.setting]
        return runs.Fit(tensors["train"], tensors["dev"], run.train,
                        FusionLoss.from_config(run.train, data.adjective_classes.values()))

    def evaluate(self, spec: RunSpec, data: SST2Data, model, result) -> dict:
        return evaluate_sst2_model(model, data.tensors[spec.config.setting]["dev"])

    def total_steps(self, spec: RunSpec) -> int:
        run = spec.config
        return -(-len(self.data(spec).tensors[run.setting]["train"]) // run.train.batch_size) * run.train.epochs

    def max_workers(self, specs) -> int:
        """The profile's ``workers`` (smoke: 1, training in this process: starting workers, each
        importing torch, costs more than its training)."""
        return min(spec.config.workers for spec in specs)

    def use_data(self, spec: RunSpec, data: SST2Data) -> None:
        """Use ``data`` (``prepare_sst2`` of the same profile), already prepared in this process, for
        ``spec`` and every spec sharing its data; refuses data of another scale."""
        run = spec.config
        expected = len(subsample(data.n_train_available, run.n_train, run.seed))
        if len(data.train_sentences) != expected:
            raise ValueError(f"the data holds {len(data.train_sentences)} training rows, the profile wants {expected}; "
                             f"pass prepare_sst2(profile) of the same profile")
        super().use_data(spec, data)


SST2 = SST2Experiment()


def sst2_spec(profile: SST2Profile, kind: str, setting: str) -> RunSpec:
    """The run of ``kind`` (baseline / fusion) in ``setting`` at ``profile``'s scale and seed."""
    if kind not in KINDS:
        raise ValueError(f"unknown model {kind!r}; choose one of: {', '.join(KINDS)}")
    run = SST2Run(profile.name, profile.n_train, profile.min_freq, profile.backbone, profile.train, kind,
                  check_setting(setting), profile.seed, profile.workers)
    return RunSpec(kind, profile.seed, run, group=setting)


def sst2_runs(profile: SST2Profile, kinds: Sequence[str] = KINDS, settings: Sequence[str] = SETTINGS) -> list[RunSpec]:
    """Chapter 5's runs: every model of ``kinds`` in every setting (``runs.nested(records, "group", "name")``
    gives ``{setting: {kind: record}}``). Serve the chapter's ``prepare_sst2`` data to the runs with
    ``SST2.use_data(specs[0], data)``; worker processes prepare their own copy (the tag prior is cached)."""
    return [sst2_spec(profile, kind, setting) for setting in settings for kind in kinds]


# --- the independent sentiment classifier ------------------------------------------------------


class BagOfWordsClassifier(nn.Module):
    """Logistic regression on the mean of unigram and bigram weights: P(positive | text)."""

    def __init__(self, vocabulary: dict[str, int]):
        super().__init__()
        self.vocabulary = vocabulary
        self.weights = nn.EmbeddingBag(len(vocabulary) + 1, 1, mode="mean", padding_idx=0)
        nn.init.zeros_(self.weights.weight)
        self.bias = nn.Parameter(torch.zeros(()))

    @staticmethod
    def ngrams(words: Sequence[str]) -> list[str]:
        return list(words) + [f"{a} {b}" for a, b in zip(words, words[1:])]

    def encode(self, texts: Sequence[Sequence[str]]) -> torch.Tensor:
        """[N, longest] n-gram ids, 0-padded (unknown n-grams dropped; 0 is ignored by the bag)."""
        rows = [[self.vocabulary[g] for g in self.ngrams(words) if g in self.vocabulary] for words in texts]
        out = torch.zeros(len(rows), max([len(r) for r in rows] + [1]), dtype=torch.long)
        for i, r in enumerate(rows):
            out[i, :len(r)] = torch.tensor(r, dtype=torch.long)
        return out

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.weights(ids).squeeze(-1) + self.bias

    @torch.no_grad()
    def predict_proba(self, texts: Sequence[Sequence[str]]) -> torch.Tensor:
        self.eval()
        return torch.sigmoid(self(self.encode(texts)))


def train_sentiment_classifier(config: ClassifierConfig, seed: int = 111,
                               train_texts: Sequence[Sequence[str]] | None = None,
                               train_labels: Sequence[int] | None = None) -> BagOfWordsClassifier:
    """Fit the bag-of-words classifier on SST-2 train (or the given texts): Adam on the mean BCE."""
    if train_texts is None:
        split = load_sst2("train")
        picked = subsample(len(split), config.n_train, seed + 1)
        columns = split.to_dict()
        sentences, labels = columns["sentence"], columns["label"]
        train_texts = [tokenize(sentences[i]) for i in picked]
        train_labels = [labels[i] for i in picked]
    counts = Counter(g for words in train_texts for g in set(BagOfWordsClassifier.ngrams(words)))
    vocabulary = {g: i + 1 for i, g in enumerate(sorted(g for g, n in counts.items() if n >= config.min_freq))}
    model = BagOfWordsClassifier(vocabulary)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    labels = torch.tensor(list(train_labels), dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    encoded = model.encode(train_texts)
    model.train()
    for _ in range(config.epochs):
        order = torch.randperm(len(train_texts), generator=generator)
        for start in range(0, len(order), config.batch_size):
            rows = order[start:start + config.batch_size]
            loss = nn.functional.binary_cross_entropy_with_logits(model(encoded[rows]), labels[rows])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return model.eval()


def classifier_accuracy(model: BagOfWordsClassifier, texts: Sequence[Sequence[str]], labels: Sequence[int]) -> Interval:
    predicted = (model.predict_proba(texts) > 0.5).long()
    correct = int((predicted == torch.tensor(list(labels))).sum())
    return Interval.of_proportion(correct, len(labels))


# --- continuation under control ----------------------------------------------------------------


def control_prefixes(data: SST2Data, config: ControlConfig) -> list[list[str]]:
    """The first ``prefix_words`` words of the first ``n_prefixes`` dev sentences that are long enough."""
    long_enough = [s for s in data.dev_sentences if len(s) >= config.min_sentence_words]
    return [s[:config.prefix_words] for s in long_enough[:config.n_prefixes]]


def sst2_requests(config: ControlConfig) -> dict[str, Request]:
    """The study's requests: ``pos_high`` or ``neg_high`` at ``control_value``, ``str_high`` at ``strength_value``."""
    return {cls: Request({f"{cls}_high": config.control_value, "str_high": config.strength_value})
            for cls in ("pos", "neg")}


@torch.no_grad()
def continue_under_control(model: nn.Module, data: SST2Data, prefixes: Sequence[Sequence[str]], request: Request,
                           mode: str, config: ControlConfig, seed: int = 0) -> list[list[str]]:
    """Continue every prefix (one batch) and return the continuations (words, <eos> and after removed).

    ``request`` (:func:`sst2_requests`; ``Request()``: no control) reaches the model in ``mode`` "soft" (its
    values written into the newest position's features + ``SentimentSteering``) or "hard" (soft + the adjective
    class restriction). Baseline models ignore the feature channel, so only the steering reaches them.
    """
    if mode not in ("soft", "hard"):
        raise ValueError(f"unknown control mode {mode!r}; choose soft or hard")
    lengths = {len(p) for p in prefixes}
    if len(lengths) != 1:
        raise ValueError(f"prefixes must all have the same number of words, got lengths {sorted(lengths)}")
    vocab, featurize = data.vocab, data.featurizers["causal"]
    ids = torch.tensor([vocab.encode(map_unknown(p, vocab))[:-1] for p in prefixes])
    prompt_length = ids.shape[1]
    steps = [SuppressTokensLogitsProcessor([vocab.pad_id, vocab.bos_id, vocab.id("<unk>")]),
             MinNewTokensLengthLogitsProcessor(prompt_length, config.min_new_tokens, vocab.eos_id)]
    if request.polarity is not None:
        polarity = 1 if request.polarity == "positive" else -1
        steps.append(SentimentSteering(featurize.tables.valence, polarity, config.steer_boost, config.steer_penalty))
        if mode == "hard":
            is_adjective = torch.tensor([data.prior.majority(w) == "ADJ" for w in vocab.tokens])
            steps.append(AdjectiveClassRestriction(is_adjective, data.adjective_classes[request.polarity]))
    if request.punctuation is not None:  # the other end marks penalised (soft) or forbidden (hard)
        if request.punctuation not in vocab:
            raise ValueError(f"the vocabulary has no {request.punctuation!r}, so it cannot be requested; request one "
                             f"of {', '.join(p for p in END_PUNCTUATION if p in vocab)}")
        others = [vocab.id(p) for p in END_PUNCTUATION if p != request.punctuation and p in vocab]
        steps.append(EndPunctuationControl(vocab.id(request.punctuation), others, mode == "hard",
                                           config.steer_penalty, vocab.eos_id))
    steps += [LastKRepetitionPenalty(config.repetition_penalty, 3), TemperatureLogitsWarper(config.temperature),
              TopPLogitsWarper(config.top_p)]
    # the predicates of the 22-feature bank (is_exclamation is the intent channel's, chapter 10: no column here)
    values = {k: v for k, v in request.features().items() if k in FEATURE_NAMES}
    controls = (torch.tensor([feature_index(k) for k in values], dtype=torch.long),
                torch.tensor(list(values.values()), dtype=torch.float32))
    ids = sample_ids(model, ids, LogitsProcessorList(steps), seed, config.new_tokens, vocab.eos_id, vocab.eos_id,
                     featurize, controls)
    continuations = []
    for row in ids[:, prompt_length:].tolist():
        words = vocab.decode(row, skip_special=False)
        continuations.append(words[:words.index("<eos>")] if "<eos>" in words else words)
    return continuations


def judge_continuations(continuations: Sequence[Sequence[str]], classifier: BagOfWordsClassifier,
                        request: Request) -> SST2Judgement:
    """Realised polarity of continuations by VADER (its compound score, its authors' +-0.05 convention: "POS" /
    "NEG" / "NEUTRAL") and by the classifier; accuracies when ``request`` has a polarity."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    analyzer = SentimentIntensityAnalyzer()
    compound = [analyzer.polarity_scores(" ".join(words))["compound"] for words in continuations]
    vader = ["POS" if c >= 0.05 else "NEG" if c <= -0.05 else "NEUTRAL" for c in compound]
    clf = ["POS" if p > 0.5 else "NEG" for p in classifier.predict_proba(continuations).tolist()]
    counts = {"vader": dict(Counter(vader)), "classifier": dict(Counter(clf))}
    share = Interval.of_proportion
    if request.polarity is not None:
        label = POLARITY_LABELS[request.polarity]
        return SST2Judgement(**counts, acc=share(sum(v == label for v in vader), len(vader)),
                             classifier_acc=share(sum(c == label for c in clf), len(clf)),
                             classifier_correct=[int(c == label) for c in clf])
    return SST2Judgement(**counts, vader_pos_share=share(sum(v == "POS" for v in vader), len(vader)),
                         vader_neg_share=share(sum(v == "NEG" for v in vader), len(vader)),
                         classifier_pos_share=share(sum(c == "POS" for c in clf), len(clf)))


def judge_punctuation(continuations: Sequence[Sequence[str]], punctuation: str) -> dict[str, Interval]:
    """``acc``: the share of continuations that end a sentence whose last end mark is ``punctuation``;
    ``coverage``: the share that end a sentence at all (a continuation of a few tokens often does not)."""
    marks = [final_punctuation(list(words)) for words in continuations]
    ended = [m for m in marks if m is not None]
    return {"acc": Interval.of_proportion(sum(m == punctuation for m in ended), len(ended)),
            "coverage": Interval.of_proportion(len(ended), len(marks))}


def feature_table(data: SST2Data, words: Sequence[str]) -> tuple[list[str], torch.Tensor]:
    """(tokens shown, [L, 22] features) of one sentence in the causal bank, with <bos> and <eos>."""
    ids = torch.tensor(data.vocab.encode(map_unknown(words, data.vocab)))
    return data.vocab.decode(ids, skip_special=False), data.featurizers["causal"](ids)


def tag_coverage(data: SST2Data) -> dict[str, float]:
    """Share of vocabulary words per majority tag (how the tag prior splits the vocabulary)."""
    tags = Counter(data.prior.majority(w) for w in data.vocab.tokens if w in data.prior.probabilities)
    total = sum(tags.values())
    return {t: tags.get(t, 0) / total for t in COARSE_TAGS}
