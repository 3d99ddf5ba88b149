"""The synthetic two-clause corpus of the semantic-fusion paper (Section 3.1, Appendix B).

A sentence is one clause ``Subj verb the obj , intens adj`` and, with probability
0.6, a second clause joined by "and"/"but" whose subject is the pronoun of the first
subject; it ends with ".", "!" or "?". Half of each polarity's adjectives (3 of 5)
are held out of training and appear only in validation, so a model can be asked to
produce adjectives it has never seen (out-of-distribution control).

Sampling weights that the paper leaves implicit follow the authors' public code
(intensifiers 2:2:3:2, end punctuation 8:3:1 for . ! ?). Every draw goes through
one ``random.Random(seed)``; there is no global random state.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

SUBJECTS = ("Alice", "Bob", "Carol", "Dave", "Eve")
VERBS = ("finishes", "reviews", "trains", "starts", "cooks")
OBJECTS = ("task", "paper", "model", "project", "meal")
INTENSIFIERS = ("slightly", "moderately", "very", "extremely")
POSITIVE_ADJECTIVES = ("good", "great", "excellent", "pleasant", "wonderful")
NEGATIVE_ADJECTIVES = ("bad", "poor", "terrible", "unpleasant", "awful")
END_PUNCTUATION = (".", "!", "?")
CONJUNCTIONS = ("and", "but")
PRONOUN_OF = {"Alice": "she", "Bob": "he", "Carol": "she", "Dave": "he", "Eve": "she"}
PRONOUNS = ("he", "she", "they")
INTENSITY = {"slightly": 0.2, "moderately": 0.5, "very": 0.8, "extremely": 1.0}

INTENSIFIER_WEIGHTS = (2, 2, 3, 2)
PUNCTUATION_WEIGHTS = (8, 3, 1)

#: Every word the grammar can produce, in a fixed order (used to build the vocabulary).
LEXICON: tuple[str, ...] = (
    SUBJECTS + VERBS + ("the",) + OBJECTS + (",",) + INTENSIFIERS
    + POSITIVE_ADJECTIVES + NEGATIVE_ADJECTIVES + END_PUNCTUATION + CONJUNCTIONS + PRONOUNS
)


@dataclass(frozen=True)
class AdjectiveSplit:
    """Which adjectives of each polarity the model may see during training."""

    positive_train: tuple[str, ...]
    positive_held_out: tuple[str, ...]
    negative_train: tuple[str, ...]
    negative_held_out: tuple[str, ...]

    @property
    def held_out(self) -> tuple[str, ...]:
        return self.positive_held_out + self.negative_held_out


def held_out_split(seed: int = 111, n_train_per_class: int = 2) -> AdjectiveSplit:
    """Shuffle each polarity's adjectives with ``seed``; the first ``n_train_per_class`` are trained on.

    With seed 111 this gives the published split (held out: wonderful, excellent, great /
    terrible, awful, unpleasant), because it shuffles in the same order as the authors' code.
    """
    if not 1 <= n_train_per_class <= 4:
        raise ValueError(f"n_train_per_class must be in 1..4, got {n_train_per_class}")
    rng = random.Random(seed)
    positive, negative = list(POSITIVE_ADJECTIVES), list(NEGATIVE_ADJECTIVES)
    rng.shuffle(positive)
    rng.shuffle(negative)
    k = n_train_per_class
    return AdjectiveSplit(tuple(positive[:k]), tuple(positive[k:]), tuple(negative[:k]), tuple(negative[k:]))


@dataclass(frozen=True)
class SyntheticConfig:
    n_train: int = 8000
    n_val: int = 1200
    second_clause_prob: float = 0.6
    max_len: int = 28  # including <bos> and <eos>
    split_seed: int = 111
    corpus_seed: int = 111
    n_train_adjectives: int = 2

    def __post_init__(self):
        if self.n_train < 1 or self.n_val < 1:
            raise ValueError(f"n_train and n_val must be >= 1, got {self.n_train}, {self.n_val}")
        if not 0.0 <= self.second_clause_prob <= 1.0:
            raise ValueError(f"second_clause_prob must be in [0, 1], got {self.second_clause_prob}")
        if self.max_len < 10:
            raise ValueError(f"max_len must be >= 10 to hold one clause with <bos>/<eos>, got {self.max_len}")


@dataclass(frozen=True)
class SyntheticCorpus:
    train: list[list[str]]
    val: list[list[str]]
    split: AdjectiveSplit
    config: SyntheticConfig = field(repr=False)


def _clause(rng: random.Random, subject: str, positive: tuple[str, ...], negative: tuple[str, ...]) -> list[str]:
    verb = rng.choice(VERBS)
    obj = rng.choice(OBJECTS)
    intensifier = rng.choices(INTENSIFIERS, weights=INTENSIFIER_WEIGHTS, k=1)[0]
    adjective = rng.choice(positive if rng.random() < 0.5 else negative)
    return [subject, verb, "the", obj, ",", intensifier, adjective]


def sample_sentence(rng: random.Random, positive: tuple[str, ...], negative: tuple[str, ...],
                    second_clause_prob: float = 0.6) -> list[str]:
    """One sentence as a list of words (no <bos>/<eos>)."""
    subject = rng.choice(SUBJECTS)
    words = _clause(rng, subject, positive, negative)
    if rng.random() < second_clause_prob:
        words += [rng.choice(CONJUNCTIONS)] + _clause(rng, PRONOUN_OF[subject], positive, negative)
    words.append(rng.choices(END_PUNCTUATION, weights=PUNCTUATION_WEIGHTS, k=1)[0])
    return words


def make_corpus(config: SyntheticConfig = SyntheticConfig()) -> SyntheticCorpus:
    """Training sentences use only the training adjectives; validation uses all five per class."""
    split = held_out_split(config.split_seed, config.n_train_adjectives)
    rng = random.Random(config.corpus_seed)
    limit = config.max_len - 2  # room for <bos> and <eos>

    def draw(n, positive, negative):
        return [sample_sentence(rng, positive, negative, config.second_clause_prob)[:limit] for _ in range(n)]

    train = draw(config.n_train, split.positive_train, split.negative_train)
    val = draw(config.n_val, POSITIVE_ADJECTIVES, NEGATIVE_ADJECTIVES)
    return SyntheticCorpus(train=train, val=val, split=split, config=config)
