"""The feature bank's computation from per-word tables (semantic-fusion paper, Section 2): the one implementation.

The book's featurizers (:mod:`semlm.fusion.features`) build the per-word tables from a vocabulary and a lexicon and
call :func:`bank_features` here. An exported synthetic-corpus fusion model carries the same tables as buffers
(:class:`TableFeaturizer`) and computes its own features with this same code, which ``save_pretrained`` copies
verbatim beside the weights as remote code (``trust_remote_code=True`` runs it without semlm). Hence only torch and
the sibling :mod:`fuzzy` module are imported, relatively.

The tables (an object with these attributes, indexed by token id): ``static`` [V, F] (what a word gives alone),
``intensity`` [V] (the strength it gives the next word), and the flags ``opener`` (the next word opens a clause),
``exclamation``, ``content`` (not a special token), ``antecedent`` and ``pronoun`` [V].
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .fuzzy import FEATURE_INDEX, NUM_FEATURES, triangular_memberships

#: Strength added to every position when the sentence ends with "!" (published mode only).
PUBLISHED_EXCLAMATION_NUDGE = 0.2
#: The authors' fixed sequence positions (``<bos>`` = 0) of subject, head verb and object.
PUBLISHED_ROLE_POSITIONS = {"is_subject": 1, "is_head": 2, "is_object": 4}
#: The columns of a triplet, by its prefix.
TRIPLET = {prefix: slice(FEATURE_INDEX[f"{prefix}_low"], FEATURE_INDEX[f"{prefix}_high"] + 1)
           for prefix in ("pos", "neg", "str")}
#: A word's slot in its clause (distance from the clause's first word) for each shallow role.
CLAUSE_SLOT_SUBJECT, CLAUSE_SLOT_VERB, CLAUSE_SLOT_OBJECT = 0, 1, 3
#: The per-word tables, in the order :class:`TableFeaturizer` stores them.
TABLE_NAMES = ("static", "intensity", "opener", "exclamation", "content", "antecedent", "pronoun")

#: ``(tables, ids, feats, positions, clause_start, clause_index) -> None``: a bank's clause-dependent columns.
ClauseFeatures = Callable[..., None]


def shift_right(x: torch.Tensor, by: int, fill=0) -> torch.Tensor:
    """x[:, t - by] at position t (``fill`` for t < by): looks only backwards."""
    out = torch.full_like(x, fill)
    if by < x.shape[1]:
        out[:, by:] = x[:, :-by]
    return out


def ends_with_exclamation(tables, ids: torch.Tensor) -> torch.Tensor:
    """[B, 1] flag: the last word before <eos>/<pad> is "!" (reads the whole sentence: published mode only)."""
    real = tables.content[ids]
    last = (real.long() * torch.arange(ids.shape[1], device=ids.device)).max(dim=1).values
    return tables.exclamation[ids.gather(1, last.unsqueeze(1))].float()


@torch.no_grad()
def bank_features(tables, input_ids: torch.Tensor, pad_id: int, published: bool,
                  clause_features: ClauseFeatures) -> torch.Tensor:
    """The semantic matrix ``[B, L, F]`` of ``input_ids`` ``[B, L]``; padding rows are zero. The word lookup, the
    strength triplet and ``coref_subject`` are common to every bank; ``clause_features`` adds what a bank reads from
    the clause so far. In the causal mode (``published`` False) position t depends on tokens <= t only."""
    t, ids = tables, input_ids.long()
    feats = t.static[ids].clone()  # [B, L, F]

    # Strength r*(t): the intensity of the word just before t (the paper's "preceding intensifier").
    strength = shift_right(t.intensity[ids], 1, 0.0)
    if published:
        strength = torch.clamp(strength + PUBLISHED_EXCLAMATION_NUDGE * ends_with_exclamation(t, ids), max=1.0)
    feats[..., TRIPLET["str"]] = triangular_memberships(strength)

    # coref_subject: a pronoun after an antecedent has appeared (positions < t).
    antecedent_before = shift_right(torch.cummax(t.antecedent[ids].long(), dim=1).values, 1, 0).bool()
    feats[..., FEATURE_INDEX["coref_subject"]] = (t.pronoun[ids] & antecedent_before).float()

    # Clauses: each opens after the last opener (<bos> or a conjunction) before t.
    positions = torch.arange(ids.shape[1], device=ids.device).expand_as(ids)
    opener = t.opener[ids]
    clause_start = torch.cummax(torch.where(opener, positions + 1, torch.zeros_like(positions)), dim=1).values
    clause_features(ids, feats, positions, clause_start, torch.cumsum(opener.long(), dim=1) - 1)

    feats[ids == pad_id] = 0.0
    return feats


def synthetic_clause_features(tables, ids, feats, positions, clause_start, clause_index,
                              published: bool = False) -> None:
    """The synthetic bank's shallow roles by the clause template: a word's slot is its distance from the clause's
    start (``published``: the authors' fixed positions in the first clause instead)."""
    slot, content = positions - clause_start, tables.content[ids]
    feats[..., FEATURE_INDEX["is_subject"]] = ((slot == CLAUSE_SLOT_SUBJECT) & content).float()
    feats[..., FEATURE_INDEX["is_object"]] = ((slot == CLAUSE_SLOT_OBJECT) & content).float()
    feats[..., FEATURE_INDEX["is_head"]] = ((slot == CLAUSE_SLOT_VERB) & (clause_index == 0) & content).float()
    if published:
        for name, position in PUBLISHED_ROLE_POSITIONS.items():
            feats[..., FEATURE_INDEX[name]] = ((positions == position) & content).float()


class TableFeaturizer(nn.Module):
    """The causal synthetic bank inside a model: the per-word tables as buffers, saved with the weights.

    Built empty (zeros) for a vocabulary of ``vocab_size``; ``from_pretrained`` fills the buffers, or
    :meth:`fill` copies a book featurizer's tables in. ``featurizer(ids)`` is ``[B, L, F]``."""

    def __init__(self, vocab_size: int, pad_id: int, n_features: int = NUM_FEATURES):
        super().__init__()
        self.pad_id = pad_id
        self.register_buffer("static", torch.zeros(vocab_size, n_features))
        self.register_buffer("intensity", torch.zeros(vocab_size))
        for name in TABLE_NAMES[2:]:
            self.register_buffer(name, torch.zeros(vocab_size, dtype=torch.bool))

    @torch.no_grad()
    def fill(self, tables) -> "TableFeaturizer":
        """Copy ``tables`` (any object with the :data:`TABLE_NAMES` attributes, e.g. a book featurizer's) in."""
        for name in TABLE_NAMES:
            source, target = getattr(tables, name), getattr(self, name)
            if source.shape != target.shape:
                raise ValueError(f"table {name} has shape {tuple(source.shape)}, the model expects "
                                 f"{tuple(target.shape)}")
            target.copy_(source)
        return self

    def _clauses(self, ids, feats, positions, clause_start, clause_index) -> None:
        synthetic_clause_features(self, ids, feats, positions, clause_start, clause_index)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return bank_features(self, input_ids, self.pad_id, False, self._clauses)
