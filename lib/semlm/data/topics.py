"""A synthetic corpus with a latent topic per sentence, for measuring topic drift (chapter 9).

Paper B says the idea gate keeps a generation in the prompt's domain. On real text a small
model cannot write well enough for that to be judged, so this module builds a world where
the topic of every sentence is known exactly:

* ``n_topics`` topics, each with its own *content* words (nouns, verbs, adjectives): made-up,
  pronounceable words, so that every content word belongs to exactly one topic;
* a small set of shared *function* words ("the", "a", "with", ...) and the full stop;
* a handful of sentence templates (a tiny grammar) whose content slots are filled from the
  sentence's topic;
* documents of ``sentences_per_doc`` sentences: the first sentence's topic is uniform, and
  before every later sentence the topic switches, with probability ``switch_prob``, to a
  topic drawn uniformly from the *other* topics. The data's drift rate (share of sentence
  transitions whose topic changes) is therefore exactly ``switch_prob`` in expectation.

A sentence of any text (the corpus or a model's generation) is labelled from its content
words: one topic if all of them belong to it, :data:`MIXED` if they come from two or more
topics, :data:`NO_TOPIC` if it has none. Every draw goes through one ``random.Random``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Sequence

END = "."
EOS = "<eos>"
UNK = "<unk>"
FUNCTION_WORDS: tuple[str, ...] = ("the", "a", "with", "near", "of", "is", "very", "and", END)

#: Sentence templates: ``N`` noun, ``V`` verb, ``A`` adjective (content slots, from the sentence's
#: topic); anything else is a function word written as is.
TEMPLATES: tuple[tuple[str, ...], ...] = (
    ("the", "A", "N", "V", "the", "N", END),
    ("a", "N", "V", "with", "the", "A", "N", END),
    ("the", "N", "is", "very", "A", END),
    ("the", "N", "of", "the", "N", "V", "near", "a", "N", END),
    ("a", "A", "N", "and", "a", "N", "V", END),
)

NO_TOPIC = -1   # a sentence without content words
MIXED = -2      # a sentence whose content words come from two or more topics

_ONSETS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


@dataclass(frozen=True)
class TopicConfig:
    """The world (topics and their words) and the documents drawn from it."""

    n_topics: int = 4
    nouns_per_topic: int = 6
    verbs_per_topic: int = 4
    adjectives_per_topic: int = 4
    sentences_per_doc: int = 8
    switch_prob: float = 0.15
    n_train_docs: int = 2000
    n_val_docs: int = 200
    seed: int = 111            # draws the documents
    lexicon_seed: int = 0      # draws the made-up words (fixed: the same world at every seed)

    def __post_init__(self):
        if not isinstance(self.n_topics, int) or self.n_topics < 2:
            raise ValueError(f"n_topics must be an int >= 2 (a switch needs another topic), got {self.n_topics!r}")
        for name in ("nouns_per_topic", "verbs_per_topic", "adjectives_per_topic", "n_train_docs", "n_val_docs"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if not isinstance(self.sentences_per_doc, int) or self.sentences_per_doc < 2:
            raise ValueError(f"sentences_per_doc must be an int >= 2 (drift needs a transition), "
                             f"got {self.sentences_per_doc!r}")
        if not isinstance(self.switch_prob, (int, float)) or not 0.0 <= self.switch_prob <= 1.0:
            raise ValueError(f"switch_prob must be a probability in [0, 1], got {self.switch_prob!r}")
        words = self.n_topics * (self.nouns_per_topic + self.verbs_per_topic + self.adjectives_per_topic)
        if words > 2000:
            raise ValueError(f"{words} content words requested; the made-up lexicon holds at most 2000, "
                             f"lower n_topics or the words per topic")


@dataclass(frozen=True)
class Document:
    topics: tuple[int, ...]                    # one topic per sentence
    sentences: tuple[tuple[str, ...], ...]     # words, each sentence ending with END

    @property
    def words(self) -> list[str]:
        return [w for s in self.sentences for w in s]

    @property
    def text(self) -> str:
        return " ".join(self.words)


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
    """The topics' word lists and the shared function words of a :class:`TopicConfig`."""

    nouns: tuple[tuple[str, ...], ...]
    verbs: tuple[tuple[str, ...], ...]
    adjectives: tuple[tuple[str, ...], ...]

    @classmethod
    def from_config(cls, config: TopicConfig) -> "TopicWorld":
        c = config
        per_topic = c.nouns_per_topic + c.verbs_per_topic + c.adjectives_per_topic
        words = _made_up_words(c.n_topics * per_topic, c.lexicon_seed)
        nouns, verbs, adjectives = [], [], []
        for t in range(c.n_topics):
            own = words[t * per_topic:(t + 1) * per_topic]
            nouns.append(tuple(own[:c.nouns_per_topic]))
            verbs.append(tuple(own[c.nouns_per_topic:c.nouns_per_topic + c.verbs_per_topic]))
            adjectives.append(tuple(own[c.nouns_per_topic + c.verbs_per_topic:]))
        return cls(tuple(nouns), tuple(verbs), tuple(adjectives))

    @property
    def n_topics(self) -> int:
        return len(self.nouns)

    def content_words(self, topic: int) -> tuple[str, ...]:
        return self.nouns[topic] + self.verbs[topic] + self.adjectives[topic]

    @cached_property
    def topic_of(self) -> dict[str, int]:
        return {w: t for t in range(self.n_topics) for w in self.content_words(t)}

    @property
    def vocabulary(self) -> list[str]:
        """Token strings in id order: ``<eos>`` (id 0, also the padding), ``<unk>``, function words, content words."""
        return [EOS, UNK, *FUNCTION_WORDS, *(w for t in range(self.n_topics) for w in self.content_words(t))]

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

    def sentence(self, topic: int, rng: random.Random) -> tuple[str, ...]:
        slots = {"N": self.nouns[topic], "V": self.verbs[topic], "A": self.adjectives[topic]}
        template = rng.choice(TEMPLATES)
        return tuple(rng.choice(slots[w]) if w in slots else w for w in template)

    def document(self, n_sentences: int, switch_prob: float, rng: random.Random,
                 first_topic: int | None = None) -> Document:
        topic = rng.randrange(self.n_topics) if first_topic is None else first_topic
        topics = [topic]
        for _ in range(n_sentences - 1):
            if rng.random() < switch_prob:
                topic = rng.choice([t for t in range(self.n_topics) if t != topic])
            topics.append(topic)
        return Document(tuple(topics), tuple(self.sentence(t, rng) for t in topics))

    # --- labelling ----------------------------------------------------------------------------

    def label(self, sentence: Sequence[str]) -> int:
        """The topic of one sentence from its content words; :data:`MIXED` or :data:`NO_TOPIC` otherwise."""
        topics = {self.topic_of[w] for w in sentence if w in self.topic_of}
        if not topics:
            return NO_TOPIC
        return topics.pop() if len(topics) == 1 else MIXED


@dataclass(frozen=True)
class TopicCorpus:
    world: TopicWorld
    train: list[Document]
    val: list[Document]
    config: TopicConfig


def make_topic_corpus(config: TopicConfig = TopicConfig()) -> TopicCorpus:
    """Training and validation documents of ``config`` (deterministic in ``config.seed``)."""
    world = TopicWorld.from_config(config)
    rng = random.Random(config.seed)

    def draw(n):
        return [world.document(config.sentences_per_doc, config.switch_prob, rng) for _ in range(n)]

    train = draw(config.n_train_docs)
    return TopicCorpus(world, train, draw(config.n_val_docs), config)


def split_sentences(words: Sequence[str], complete_only: bool = True) -> list[list[str]]:
    """Sentences ending with :data:`END`; a trailing fragment is kept only if ``complete_only`` is False.

    Text after an ``<eos>`` belongs to another document and is dropped.
    """
    words = list(words)
    if EOS in words:
        words = words[:words.index(EOS)]
    sentences, current = [], []
    for w in words:
        current.append(w)
        if w == END:
            sentences.append(current)
            current = []
    if current and not complete_only:
        sentences.append(current)
    return sentences
