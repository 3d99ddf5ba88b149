"""Per-token fuzzy semantic features for the synthetic corpus (semantic-fusion paper, Section 2).

``SyntheticFeatures(vocab)(input_ids)`` maps a batch of token ids ``[B, L]`` to the
semantic matrix ``[B, L, 22]``. The feature vector at position t is built from

* a per-word lookup table (part of speech, punctuation flags, polarity triplets, ...),
* the previous token (the intensifier that sets an adjective's strength),
* running maxima / sums over positions <= t (clause boundaries, "a name came earlier").

Shifts to the right and cumulative operations only look backwards, so in the default
**causal** mode the features at t depend on tokens <= t and nothing else; the tests
check this by perturbing the future.

The **published** mode (``published=True``) is the authors' ``compute_semantics`` in
SemanticFusion.py (github.com/YongchaoHuang/semantic_fusion):

* the "+0.2 strength when the sentence ends with '!'" nudge (their ``strength_signal``) at
  every position: it reads the last token of the sentence, i.e. the future;
* ``is_subject`` / ``is_head`` / ``is_object`` only at the fixed positions 1 / 2 / 4 of the
  sequence (``<bos>`` is 0), i.e. in the first clause only;
* their ``is_noun``: any alphabetic word that is not a verb, adjective, name or pronoun, so
  "the", the conjunctions and the intensifiers count as nouns.

It exists only so the leakage audit can reproduce the published setting.

In the default causal mode, where the paper is silent, we define the shallow roles by the
clause template: ``is_subject`` / ``is_object`` mark the first / fourth word of *each*
clause and ``is_head`` the verb of the main (first) clause; ``is_noun`` marks common nouns
(the objects) only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from semlm.data import synthetic as syn
from semlm.data.vocab import BOS, EOS, Vocabulary
from semlm.fusion.records import FeatureBankRecord
from semlm.fusion import fuzzy
from semlm.fusion.featurize import (PUBLISHED_EXCLAMATION_NUDGE, PUBLISHED_ROLE_POSITIONS, TRIPLET,  # noqa: F401
                                    bank_features, shift_right, synthetic_clause_features)
from semlm.fusion.fuzzy import FEATURE_INDEX, NUM_FEATURES, triangular_memberships

#: The boundary predicates, the same in both banks.
BOUNDARIES: dict[str, Callable[[str], bool]] = {
    "is_bos": lambda w: w == BOS, "is_eos": lambda w: w == EOS, "is_comma": lambda w: w == ",",
    "is_question": lambda w: w == "?"}


@dataclass(frozen=True)
class WordTables:
    """Per-word lookups, indexed by token id."""

    static: torch.Tensor       # [V, F]: features that depend on the word alone
    intensity: torch.Tensor    # [V]: strength r* the word gives to the next one, 0 for most words
    opener: torch.Tensor       # [V] bool: the next word opens a clause (<bos>, conjunctions)
    exclamation: torch.Tensor  # [V] bool
    content: torch.Tensor      # [V] bool: not a special token
    antecedent: torch.Tensor   # [V] bool: what a later pronoun refers to (coref_subject)
    pronoun: torch.Tensor      # [V] bool: a pronoun that coref_subject marks


def static_table(tokens: Sequence[str], predicates: Mapping[str, Callable[[str], float]]) -> np.ndarray:
    """``[V, F]`` float64 values of the word-alone ``predicates`` by feature name (the other columns 0)."""
    static = np.zeros((len(tokens), NUM_FEATURES))
    for name, predicate in predicates.items():
        static[:, FEATURE_INDEX[name]] = [predicate(w) for w in tokens]
    return static


def per_word(tokens: Sequence[str], value: Callable[[str], float], dtype=torch.bool) -> torch.Tensor:
    """``[V]`` tensor of ``value(word)`` for every token."""
    return torch.tensor([value(w) for w in tokens], dtype=dtype)


def _authors_is_noun(word: str) -> bool:
    """The authors' ``is_noun``: an object noun, or any alphabetic word that is not a verb,
    adjective, name or pronoun ("the", "and", "but" and the intensifiers included)."""
    return word in syn.OBJECTS or (word.isalpha() and word not in syn.VERBS and word not in syn.SUBJECTS
                                   and word not in syn.PRONOUNS and word not in syn.POSITIVE_ADJECTIVES
                                   and word not in syn.NEGATIVE_ADJECTIVES)


def build_word_tables(vocab: Vocabulary, published: bool = False) -> WordTables:
    tokens = vocab.tokens
    positive, negative = set(syn.POSITIVE_ADJECTIVES), set(syn.NEGATIVE_ADJECTIVES)
    static = static_table(tokens, {
        "is_noun": _authors_is_noun if published else (lambda w: w in syn.OBJECTS),
        "is_verb": lambda w: w in syn.VERBS, "is_adj": lambda w: w in positive or w in negative, **BOUNDARIES,
        "is_capitalized": lambda w: w[:1].isupper() and w.isalpha(), "is_pronoun": lambda w: w in syn.PRONOUNS})
    polarity = np.array([1.0 if w in positive else (-1.0 if w in negative else 0.0) for w in tokens])
    static[:, TRIPLET["pos"]] = triangular_memberships(np.maximum(0.0, polarity))
    static[:, TRIPLET["neg"]] = triangular_memberships(np.maximum(0.0, -polarity))
    return WordTables(
        static=torch.tensor(static, dtype=torch.float32),
        intensity=per_word(tokens, lambda w: syn.INTENSITY.get(w, 0.0), torch.float32),
        opener=per_word(tokens, lambda w: w == BOS or w in syn.CONJUNCTIONS),
        exclamation=per_word(tokens, lambda w: w == "!"),
        content=per_word(tokens, lambda w: not (w.startswith("<") and w.endswith(">"))),
        antecedent=per_word(tokens, lambda w: w in syn.SUBJECTS),
        pronoun=per_word(tokens, lambda w: w in syn.PRONOUNS))


class FeatureBank:
    """Semantic matrix of a batch of token ids, ``[B, L] -> [B, L, 22]``, from :class:`WordTables`; padding rows
    are zero. The computation is :func:`semlm.fusion.featurize.bank_features` (the code an exported model runs);
    a bank adds what it reads from the clause so far in :meth:`_clause_features`."""

    def __init__(self, vocab: Vocabulary, tables: WordTables, published: bool = False):
        self.vocab, self.tables, self.published = vocab, tables, published

    @torch.no_grad()
    def __call__(self, input_ids: torch.Tensor) -> torch.Tensor:
        if input_ids.dim() == 1:
            return self(input_ids.unsqueeze(0)).squeeze(0)
        return bank_features(self.tables, input_ids, self.vocab.pad_id, self.published, self._clause_features)

    def _clause_features(self, ids: torch.Tensor, feats: torch.Tensor, positions: torch.Tensor,
                         clause_start: torch.Tensor, clause_index: torch.Tensor) -> None:
        raise NotImplementedError


class SyntheticFeatures(FeatureBank):
    """The synthetic bank; ``published=True`` reproduces the authors' sentence-level features (reads the future)."""

    def __init__(self, vocab: Vocabulary, published: bool = False):
        super().__init__(vocab, build_word_tables(vocab, published), published)

    def _clause_features(self, ids, feats, positions, clause_start, clause_index) -> None:
        """Shallow roles by the clause template (:func:`semlm.fusion.featurize.synthetic_clause_features`)."""
        synthetic_clause_features(self.tables, ids, feats, positions, clause_start, clause_index, self.published)


#: The 22 predicates by group, with where each group's values come from (chapter 1's table).
FEATURE_GROUPS: dict[str, tuple[str, ...]] = {
    "part of speech (word lookup)": ("is_noun", "is_verb", "is_adj"),
    "shallow roles (position in the clause so far)": ("is_subject", "is_object", "is_head"),
    "boundaries (word lookup)": ("is_bos", "is_eos", "is_comma", "is_question"),
    "polarity triplets (adjective lexicon)": ("pos_low", "pos_med", "pos_high", "neg_low", "neg_med", "neg_high"),
    "strength triplet (the word before t)": ("str_low", "str_med", "str_high"),
    "discourse / style": ("coref_subject", "is_capitalized", "is_pronoun"),
}


def feature_bank_table():
    """One row per predicate, in column order: its name, group (source) and whether it is graded."""
    import pandas as pd

    rows = [(fuzzy.feature_index(n), n, g, "graded" if n in fuzzy.GRADED_FEATURES else "binary")
            for g, names in FEATURE_GROUPS.items() for n in names]
    bank = pd.DataFrame(rows, columns=["column", "predicate", "group (source)", "values"])
    bank = bank.sort_values("column").set_index("column")
    if list(bank.predicate) != list(fuzzy.FEATURE_NAMES):
        raise ValueError("FEATURE_GROUPS must name every predicate of fuzzy.FEATURE_NAMES once")
    return bank


def future_change(featurizers: dict[str, SyntheticFeatures], vocab: Vocabulary, sentence_a: Sequence[str],
                  sentence_b: Sequence[str]) -> tuple[dict[str, np.ndarray], list[str], int]:
    """How each featurizer's semantic matrix changes between two sentences of equal length:
    ``({name: |S(a) - S(b)|}, token labels "a / b" where they differ, first changed row)``."""
    ids_a, ids_b = torch.tensor(vocab.encode(sentence_a)), torch.tensor(vocab.encode(sentence_b))
    changed_at = 1 + next(i for i, (a, b) in enumerate(zip(sentence_a, sentence_b)) if a != b)  # +1 for <bos>
    diffs = {name: np.abs(fx(ids_a).numpy() - fx(ids_b).numpy()) for name, fx in featurizers.items()}
    tokens = [f"{a} / {b}" if a != b else a
              for a, b in zip(vocab.decode(ids_a, skip_special=False), vocab.decode(ids_b, False))]
    return diffs, tokens, changed_at


CAUSAL, PUBLISHED = "causal featurizer", "published featurizer (reads the future)"


def feature_bank_record(*, triplets, sentence_a: Sequence[str], sentence_b: Sequence[str], changed_at: int,
                        prefix_change: dict[str, float]) -> FeatureBankRecord:
    """Chapter 1's metrics file: the bank's definition, the strength triplets and the causality demo
    (``prefix_change`` by :data:`CAUSAL` / :data:`PUBLISHED`)."""
    return FeatureBankRecord(extra={
        "n_features": fuzzy.NUM_FEATURES, "feature_names": list(fuzzy.FEATURE_NAMES),
        "centres": list(fuzzy.CENTRES), "tau": fuzzy.TAU,
        "strength_triplets": triplets.round(6).to_dict(orient="index"),
        "causality_demo": {"sentence_a": " ".join(sentence_a), "sentence_b": " ".join(sentence_b),
                           "changed_at": changed_at, "causal_max_prefix_change": prefix_change[CAUSAL],
                           "published_max_prefix_change": prefix_change[PUBLISHED]},
    })
