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
from typing import Sequence

import numpy as np
import torch

from semlm.data import synthetic as syn
from semlm.data.vocab import BOS, EOS, Vocabulary
from semlm.fusion.records import FeatureBankRecord
from semlm.fusion import fuzzy
from semlm.fusion.fuzzy import FEATURE_INDEX, NUM_FEATURES, triangular_memberships

#: Strength added to every position when the sentence ends with "!" (published mode only).
PUBLISHED_EXCLAMATION_NUDGE = 0.2
#: The authors' fixed sequence positions (``<bos>`` = 0) of subject, head verb and object.
PUBLISHED_ROLE_POSITIONS = {"is_subject": 1, "is_head": 2, "is_object": 4}

_CLAUSE_SLOT_SUBJECT, _CLAUSE_SLOT_VERB, _CLAUSE_SLOT_OBJECT = 0, 1, 3


@dataclass(frozen=True)
class WordTables:
    """Per-word lookups, indexed by token id."""

    static: torch.Tensor       # [V, F]: features that depend on the word alone
    intensity: torch.Tensor    # [V]: intensifier strength r*, 0 for other words
    is_name: torch.Tensor      # [V] bool
    is_pronoun: torch.Tensor   # [V] bool
    starts_clause: torch.Tensor  # [V] bool: <bos> and conjunctions (the next word opens a clause)
    is_exclamation: torch.Tensor  # [V] bool
    is_content: torch.Tensor   # [V] bool: not a special token


def _authors_is_noun(word: str) -> bool:
    """The authors' ``is_noun``: an object noun, or any alphabetic word that is not a verb,
    adjective, name or pronoun ("the", "and", "but" and the intensifiers included)."""
    return word in syn.OBJECTS or (word.isalpha() and word not in syn.VERBS and word not in syn.SUBJECTS
                                   and word not in syn.PRONOUNS and word not in syn.POSITIVE_ADJECTIVES
                                   and word not in syn.NEGATIVE_ADJECTIVES)


def build_word_tables(vocab: Vocabulary, published: bool = False) -> WordTables:
    V, F = len(vocab), NUM_FEATURES
    static = np.zeros((V, F), dtype=np.float64)
    intensity = np.zeros(V)
    flags = {k: np.zeros(V, dtype=bool) for k in ("name", "pronoun", "starts", "excl", "content")}
    positive, negative = set(syn.POSITIVE_ADJECTIVES), set(syn.NEGATIVE_ADJECTIVES)
    for i, w in enumerate(vocab.tokens):
        row = static[i]
        row[FEATURE_INDEX["is_noun"]] = _authors_is_noun(w) if published else w in syn.OBJECTS
        row[FEATURE_INDEX["is_verb"]] = w in syn.VERBS
        row[FEATURE_INDEX["is_adj"]] = w in positive or w in negative
        row[FEATURE_INDEX["is_bos"]] = w == BOS
        row[FEATURE_INDEX["is_eos"]] = w == EOS
        row[FEATURE_INDEX["is_comma"]] = w == ","
        row[FEATURE_INDEX["is_question"]] = w == "?"
        polarity = 1.0 if w in positive else (-1.0 if w in negative else 0.0)
        row[FEATURE_INDEX["pos_low"]:FEATURE_INDEX["pos_high"] + 1] = triangular_memberships(max(0.0, polarity))
        row[FEATURE_INDEX["neg_low"]:FEATURE_INDEX["neg_high"] + 1] = triangular_memberships(max(0.0, -polarity))
        row[FEATURE_INDEX["is_capitalized"]] = w[:1].isupper() and w.isalpha()
        row[FEATURE_INDEX["is_pronoun"]] = w in syn.PRONOUNS
        intensity[i] = syn.INTENSITY.get(w, 0.0)
        flags["name"][i] = w in syn.SUBJECTS
        flags["pronoun"][i] = w in syn.PRONOUNS
        flags["starts"][i] = w == BOS or w in syn.CONJUNCTIONS
        flags["excl"][i] = w == "!"
        flags["content"][i] = not (w.startswith("<") and w.endswith(">"))
    return WordTables(
        static=torch.tensor(static, dtype=torch.float32),
        intensity=torch.tensor(intensity, dtype=torch.float32),
        is_name=torch.from_numpy(flags["name"]),
        is_pronoun=torch.from_numpy(flags["pronoun"]),
        starts_clause=torch.from_numpy(flags["starts"]),
        is_exclamation=torch.from_numpy(flags["excl"]),
        is_content=torch.from_numpy(flags["content"]),
    )


class SyntheticFeatures:
    """Semantic matrix of a batch of synthetic sentences: ``[B, L] ids -> [B, L, 22]``.

    ``published=True`` reproduces the authors' sentence-level features (reads the future).
    Padding positions get all-zero rows.
    """

    def __init__(self, vocab: Vocabulary, published: bool = False):
        self.vocab = vocab
        self.published = published
        self.tables = build_word_tables(vocab, published)

    @torch.no_grad()
    def __call__(self, input_ids: torch.Tensor) -> torch.Tensor:
        if input_ids.dim() == 1:
            return self(input_ids.unsqueeze(0)).squeeze(0)
        t = self.tables
        ids = input_ids.long()
        B, L = ids.shape
        feats = t.static[ids].clone()  # [B, L, F]
        positions = torch.arange(L, device=ids.device).expand(B, L)

        # Clause slots: distance from the last clause opener (<bos> or a conjunction) before t.
        opener_at = torch.where(t.starts_clause[ids], positions + 1, torch.zeros_like(positions))
        clause_start = torch.cummax(opener_at, dim=1).values
        slot = positions - clause_start
        clause_index = torch.cumsum(t.starts_clause[ids].long(), dim=1) - 1
        content = t.is_content[ids]
        feats[..., FEATURE_INDEX["is_subject"]] = ((slot == _CLAUSE_SLOT_SUBJECT) & content).float()
        feats[..., FEATURE_INDEX["is_object"]] = ((slot == _CLAUSE_SLOT_OBJECT) & content).float()
        feats[..., FEATURE_INDEX["is_head"]] = ((slot == _CLAUSE_SLOT_VERB) & (clause_index == 0) & content).float()
        if self.published:  # the authors' fixed positions in the first clause
            for name, position in PUBLISHED_ROLE_POSITIONS.items():
                feats[..., FEATURE_INDEX[name]] = ((positions == position) & content).float()

        # Strength r*(t): the intensity of the word just before t (the paper's "preceding intensifier").
        strength = torch.zeros(B, L, device=ids.device)
        strength[:, 1:] = t.intensity[ids[:, :-1]]
        if self.published:
            strength = torch.clamp(strength + PUBLISHED_EXCLAMATION_NUDGE * self._ends_with_exclamation(ids), max=1.0)
        lo = FEATURE_INDEX["str_low"]
        feats[..., lo:lo + 3] = triangular_memberships(strength)

        # coref_subject: a pronoun after a proper name has appeared (positions < t).
        name_before = torch.zeros(B, L, dtype=torch.bool, device=ids.device)
        name_before[:, 1:] = torch.cummax(t.is_name[ids].long(), dim=1).values[:, :-1].bool()
        feats[..., FEATURE_INDEX["coref_subject"]] = (t.is_pronoun[ids] & name_before).float()

        feats[ids == self.vocab.pad_id] = 0.0
        return feats

    def _ends_with_exclamation(self, ids: torch.Tensor) -> torch.Tensor:
        """[B, 1] flag: the last word before <eos>/<pad> is "!" (looks at the whole sentence)."""
        real = self.tables.is_content[ids]
        last = (real.long() * torch.arange(ids.shape[1], device=ids.device)).max(dim=1).values
        return self.tables.is_exclamation[ids.gather(1, last.unsqueeze(1))].float()


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


def feature_bank_record(triplets, sentence_a: Sequence[str], sentence_b: Sequence[str], changed_at: int,
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
