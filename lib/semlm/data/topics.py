"""A synthetic corpus with a latent topic per sentence, for measuring topic drift (chapter 9).

Paper B says the idea gate keeps a generation in the prompt's domain. On real text a small
model cannot write well enough for that to be judged, so this module builds a world where
the topic of every sentence is known exactly, and where staying on topic takes some work:

* ``n_topics`` topics, each with its own *exclusive* content words (nouns, verbs, adjectives):
  made-up, pronounceable words that belong to that topic alone;
* *bridge* nouns shared by two topics: ``bridges_per_pair`` of them for every pair of
  neighbouring topics on a ring (0-1, 1-2, ..., last-0). A bridge word says "one of these two";
  templates put it at the end or the start of a sentence, where a model that follows the last
  word it read, instead of the document, is led into the neighbouring topic;
* *neutral* sentences made of function words and neutral content words that belong to no
  topic. They sit between topical sentences, so the topic has to be carried across them;
* documents of ``sentences_per_doc`` topical sentences, with, after each but the last, a run of
  1 to ``max_neutral_run`` neutral sentences with probability ``neutral_prob``. At the cpu scale a
  document is longer than the model's context window.

**The latent topic and the data's rate.** The first topical sentence's topic is uniform; before
every later *topical* sentence the topic switches, with probability ``switch_prob``, to one of the
*other* topics, uniformly. A neutral sentence has no topic words and carries the current topic
forward: its latent topic (``Document.topics``) is the one of the topical sentence before it, and
it is skipped when transitions are counted. The data's rate, the share of transitions between
consecutive topical sentences whose topic changes, is therefore exactly ``switch_prob`` in
expectation, however many neutral sentences lie between.

**Labelling.** A sentence of any text (the corpus or a model's generation) is labelled from its
topical words: every exclusive word allows one topic, every bridge word two; the label is the one
topic all of them allow, :data:`MIXED` if no topic fits them all, :data:`AMBIGUOUS` if two do (only
bridge words of one pair), :data:`NEUTRAL` if the sentence has no topical word. Every generated
topical sentence has at least one exclusive word, so the corpus is labelled exactly.

The random draws are vectorised (one ``numpy.random.Generator`` per corpus, seeded by
``TopicConfig.seed``), so a corpus is a deterministic function of its config.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cached_property
from itertools import islice
from typing import Iterable, Sequence

import numpy as np

END = "."
EOS = "<eos>"
UNK = "<unk>"
FUNCTION_WORDS: tuple[str, ...] = ("the", "a", "with", "near", "of", "is", "very", "and", END)

#: Topical sentence templates: ``N`` noun, ``V`` verb, ``A`` adjective (exclusive words of the sentence's
#: topic), ``B`` a bridge noun of the topic; anything else is a function word written as is. Every
#: template has an exclusive slot, so its sentences are labelled exactly.
TEMPLATES: tuple[tuple[str, ...], ...] = (
    ("the", "A", "N", "V", "the", "N", END),
    ("a", "N", "V", "with", "the", "A", "N", END),
    ("the", "N", "is", "very", "A", END),
    ("the", "N", "V", "near", "the", "B", END),
    ("a", "B", "of", "the", "N", "V", "a", "N", END),
    ("a", "A", "N", "and", "a", "B", "V", END),
)
#: Neutral sentence templates: ``X`` noun, ``Y`` verb, ``Z`` adjective from the neutral words.
NEUTRAL_TEMPLATES: tuple[tuple[str, ...], ...] = (
    ("the", "X", "is", "very", "Z", END),
    ("a", "X", "Y", "near", "the", "X", END),
    ("the", "Z", "X", "Y", END),
)

NEUTRAL = -1     # a sentence without topical words (neutral, or no content at all)
MIXED = -2       # its topical words allow no common topic
AMBIGUOUS = -3   # its topical words allow two topics (bridge words of one pair only)

_ONSETS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


@dataclass(frozen=True)
class TopicConfig:
    """The world (topics and their words) and the documents drawn from it."""

    n_topics: int = 4
    nouns_per_topic: int = 6
    verbs_per_topic: int = 4
    adjectives_per_topic: int = 4
    bridges_per_pair: int = 2       # bridge nouns shared by each pair of neighbouring topics
    neutral_nouns: int = 4
    neutral_verbs: int = 3
    neutral_adjectives: int = 3
    sentences_per_doc: int = 8      # topical sentences; neutral ones come on top
    switch_prob: float = 0.15
    neutral_prob: float = 0.4       # a neutral run follows a topical sentence (not the last) with this probability
    max_neutral_run: int = 2        # a run has 1..max_neutral_run neutral sentences, uniformly
    n_train_docs: int = 2000
    n_val_docs: int = 200
    seed: int = 111            # draws the documents
    lexicon_seed: int = 0      # draws the made-up words (fixed: the same world at every seed)

    def __post_init__(self):
        smallest = {"n_topics": (2, " (a switch needs another topic)"),
                    "sentences_per_doc": (2, " (drift needs a transition)")}
        for name in ("n_topics", "nouns_per_topic", "verbs_per_topic", "adjectives_per_topic", "bridges_per_pair",
                     "neutral_nouns", "neutral_verbs", "neutral_adjectives", "sentences_per_doc", "max_neutral_run",
                     "n_train_docs", "n_val_docs"):
            value, (least, why) = getattr(self, name), smallest.get(name, (1, ""))
            if not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an int >= {least}{why}, got {value!r}")
        for name in ("switch_prob", "neutral_prob"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
        if self.n_words > 2000:
            raise ValueError(f"{self.n_words} content words requested; the made-up lexicon holds at most 2000, "
                             f"lower n_topics or the words per topic")

    @property
    def n_pairs(self) -> int:
        """Neighbouring pairs on the ring of topics (one pair when there are only two topics)."""
        return 1 if self.n_topics == 2 else self.n_topics

    @property
    def n_words(self) -> int:
        own = self.nouns_per_topic + self.verbs_per_topic + self.adjectives_per_topic
        return (self.n_topics * own + self.n_pairs * self.bridges_per_pair
                + self.neutral_nouns + self.neutral_verbs + self.neutral_adjectives)


@dataclass(frozen=True)
class Document:
    topics: tuple[int, ...]                    # latent topic of every sentence (neutral ones carry it forward)
    neutral: tuple[bool, ...]                  # which sentences are neutral
    sentences: tuple[tuple[str, ...], ...]     # words, each sentence ending with END

    @property
    def words(self) -> list[str]:
        return [w for s in self.sentences for w in s]

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def labels(self) -> list[int]:
        """What the labeller must read back: the topic of a topical sentence, :data:`NEUTRAL` otherwise."""
        return [NEUTRAL if n else t for t, n in zip(self.topics, self.neutral)]

    @property
    def topical_topics(self) -> list[int]:
        """The topics of the topical sentences, in order (the chain whose switches make the data's rate)."""
        return [t for t, n in zip(self.topics, self.neutral) if not n]


def _made_up_words(n: int, seed: int) -> list[str]:
    """``n`` distinct pronounceable words (two or three consonant-vowel syllables), none a function word."""
    rng = random.Random(seed)
    seen, out = set(FUNCTION_WORDS), []
    while len(out) < n:
        syllables = rng.choice((2, 2, 3))
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables))
        if word not in seen:
            seen.add(word)
            out.append(word)
    return out


@dataclass(frozen=True)
class TopicWorld:
    """The topics' word lists, the bridge and neutral words of a :class:`TopicConfig`."""

    nouns: tuple[tuple[str, ...], ...]
    verbs: tuple[tuple[str, ...], ...]
    adjectives: tuple[tuple[str, ...], ...]
    bridge_pairs: tuple[tuple[int, int], ...] = ()
    bridges: tuple[tuple[str, ...], ...] = ()      # bridge nouns of each pair of bridge_pairs
    neutral_words: tuple[tuple[str, ...], ...] = ((), (), ())   # neutral nouns, verbs, adjectives

    @classmethod
    def from_config(cls, config: TopicConfig) -> "TopicWorld":
        c, words = config, iter(_made_up_words(config.n_words, config.lexicon_seed))

        def take(n: int) -> tuple[str, ...]:  # the next n made-up words
            return tuple(islice(words, n))

        sizes = (c.nouns_per_topic, c.verbs_per_topic, c.adjectives_per_topic)
        nouns, verbs, adjectives = zip(*[[take(n) for n in sizes] for _ in range(c.n_topics)])
        pairs = tuple((t, (t + 1) % c.n_topics) for t in range(c.n_pairs))
        bridges = tuple(take(c.bridges_per_pair) for _ in pairs)
        neutral = (take(c.neutral_nouns), take(c.neutral_verbs), take(c.neutral_adjectives))
        return cls(nouns, verbs, adjectives, pairs, bridges, neutral)

    @property
    def n_topics(self) -> int:
        return len(self.nouns)

    def exclusive_words(self, topic: int) -> tuple[str, ...]:
        return self.nouns[topic] + self.verbs[topic] + self.adjectives[topic]

    def bridge_words(self, topic: int) -> tuple[str, ...]:
        """The bridge nouns ``topic`` shares with its neighbours."""
        return tuple(w for pair, words in zip(self.bridge_pairs, self.bridges) if topic in pair for w in words)

    def content_words(self, topic: int) -> tuple[str, ...]:
        """Every word that allows ``topic``: its exclusive and its bridge words."""
        return self.exclusive_words(topic) + self.bridge_words(topic)

    @cached_property
    def topics_of(self) -> dict[str, frozenset[int]]:
        """The topics each topical word allows: one for an exclusive word, two for a bridge word."""
        out = {w: frozenset({t}) for t in range(self.n_topics) for w in self.exclusive_words(t)}
        out.update({w: frozenset(pair) for pair, words in zip(self.bridge_pairs, self.bridges) for w in words})
        return out

    @property
    def all_neutral_words(self) -> tuple[str, ...]:
        return tuple(w for group in self.neutral_words for w in group)

    @property
    def vocabulary(self) -> list[str]:
        """Token strings in id order: ``<eos>`` (id 0, also the padding), ``<unk>``, function words, exclusive,
        bridge and neutral words."""
        return [EOS, UNK, *FUNCTION_WORDS, *(w for t in range(self.n_topics) for w in self.exclusive_words(t)),
                *(w for words in self.bridges for w in words), *self.all_neutral_words]

    @cached_property
    def token_id(self) -> dict[str, int]:
        return {w: i for i, w in enumerate(self.vocabulary)}

    def encode(self, words: Iterable[str]) -> list[int]:
        unk = self.token_id[UNK]
        return [self.token_id.get(w, unk) for w in words]

    def tokenizer(self):
        """A word-level transformers tokenizer over :attr:`vocabulary` (whitespace split; eos = pad = ``<eos>``)."""
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast

        core = Tokenizer(models.WordLevel(vocab=self.token_id, unk_token=UNK))
        core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        return PreTrainedTokenizerFast(tokenizer_object=core, eos_token=EOS, bos_token=EOS, pad_token=EOS,
                                       unk_token=UNK, clean_up_tokenization_spaces=False)

    # --- sampling -----------------------------------------------------------------------------

    def fill(self, template: Sequence[str], topic: int | None, uniforms: Sequence[float]) -> tuple[str, ...]:
        """``template`` with each slot ``i`` filled by word ``floor(uniforms[i] * len(pool))`` of its pool
        (``topic=None``: the neutral pools)."""
        slots = dict(zip("XYZ", self.neutral_words)) if topic is None else {
            "N": self.nouns[topic], "V": self.verbs[topic], "A": self.adjectives[topic], "B": self.bridge_words(topic)}
        return tuple(slots[w][int(u * len(slots[w]))] if w in slots else w for w, u in zip(template, uniforms))

    def sentence(self, topic: int | None, rng: np.random.Generator) -> tuple[str, ...]:
        """One sentence of ``topic`` (``None``: a neutral sentence)."""
        templates = NEUTRAL_TEMPLATES if topic is None else TEMPLATES
        template = templates[int(rng.integers(len(templates)))]
        return self.fill(template, topic, rng.random(len(template)))

    # --- labelling ----------------------------------------------------------------------------

    def label(self, sentence: Sequence[str]) -> int:
        """The topic of one sentence: the one topic all its topical words allow, else :data:`MIXED` (none),
        :data:`AMBIGUOUS` (two) or :data:`NEUTRAL` (no topical word)."""
        allowed = [self.topics_of[w] for w in sentence if w in self.topics_of]
        if not allowed:
            return NEUTRAL
        common = frozenset.intersection(*allowed)
        return next(iter(common)) if len(common) == 1 else (AMBIGUOUS if common else MIXED)


@dataclass(frozen=True)
class TopicCorpus:
    world: TopicWorld
    train: list[Document]
    val: list[Document]
    config: TopicConfig


def draw_documents(world: TopicWorld, config: TopicConfig, n_docs: int, rng: np.random.Generator) -> list[Document]:
    """``n_docs`` documents of ``config``: the latent topic chains, neutral runs, templates and words are
    drawn as arrays for all documents at once; only assembling the word tuples loops."""
    c, S = config, config.sentences_per_doc
    first = rng.integers(c.n_topics, size=(n_docs, 1))
    switch = rng.random((n_docs, S - 1)) < c.switch_prob
    offset = rng.integers(1, c.n_topics, size=(n_docs, S - 1))   # uniform over the *other* topics
    chain = (np.cumsum(np.concatenate([first, switch * offset], axis=1), axis=1) % c.n_topics).tolist()
    runs = (rng.random((n_docs, S - 1)) < c.neutral_prob) * rng.integers(1, c.max_neutral_run + 1, (n_docs, S - 1))
    runs = runs.tolist()
    longest = max(len(t) for t in TEMPLATES + NEUTRAL_TEMPLATES)
    topical_template = rng.integers(len(TEMPLATES), size=(n_docs, S)).tolist()
    topical_uniforms = rng.random((n_docs, S, longest))
    n_neutral = int(sum(map(sum, runs)))
    neutral_template = iter(rng.integers(len(NEUTRAL_TEMPLATES), size=n_neutral).tolist())
    neutral_uniforms = iter(rng.random((n_neutral, longest)))
    docs = []
    for d in range(n_docs):
        rows = []  # (topic, neutral, sentence) of every sentence
        for i, topic in enumerate(chain[d]):
            rows.append((topic, False, world.fill(TEMPLATES[topical_template[d][i]], topic, topical_uniforms[d, i])))
            rows += [(topic, True, world.fill(NEUTRAL_TEMPLATES[next(neutral_template)], None, next(neutral_uniforms)))
                     for _ in range(runs[d][i] if i < S - 1 else 0)]
        docs.append(Document(*map(tuple, zip(*rows))))
    return docs


def make_topic_corpus(config: TopicConfig = TopicConfig()) -> TopicCorpus:
    """Training and validation documents of ``config`` (deterministic in ``config.seed``)."""
    world = TopicWorld.from_config(config)
    rng = np.random.default_rng(config.seed)
    train = draw_documents(world, config, config.n_train_docs, rng)
    return TopicCorpus(world, train, draw_documents(world, config, config.n_val_docs, rng), config)


def split_sentences(words: Sequence[str], complete_only: bool = True) -> list[list[str]]:
    """Sentences ending with :data:`END`; a trailing fragment is kept only if ``complete_only`` is False.

    Text after an ``<eos>`` belongs to another document and is dropped.
    """
    words = list(words)
    words = words[:words.index(EOS)] if EOS in words else words
    starts = [0] + [i + 1 for i, w in enumerate(words) if w == END]
    sentences = [words[a:b] for a, b in zip(starts, starts[1:])]
    return sentences if complete_only or starts[-1] == len(words) else sentences + [words[starts[-1]:]]
