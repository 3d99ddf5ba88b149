"""Intent features: a feature channel that carries the *request* for the clause being written.

Paper A presents its fuzzy predicates (``pos_high``, ``str_high``, ``is_question``, ...) as
knobs: write a value into the feature channel and the text should follow. Our causal
features (:class:`semlm.fusion.features.SyntheticFeatures`) describe words already written,
so writing a request into them tells a causal model nothing about the next word. The intent
channel fixes that without reading the future of the *text*: the request is decided before a
sentence is written, so it may sit at every position.

At position t the channel holds

* the 22 causal token features of ``x_t`` (part of speech, roles, ``<bos>``/``<eos>``, ...),
  except that
* the **request predicates** describe the clause that ``x_{t+1}`` belongs to: its polarity
  (``pos_*`` / ``neg_*`` = the triplets of 1 or 0), its strength (``str_*`` = the triplet of the
  clause's intensifier strength, 0.2 / 0.5 / 0.8 / 1.0), and the sentence's final punctuation
  (``is_question``, and ``is_exclamation``, a 23rd column: the paper's bank has no predicate
  for "!").

Clause boundaries: the features at t condition the token t+1. The conjunction that opens a
second clause is a free choice of the generator (and / but, whatever the polarities), so it is
predicted under the first clause's request; from the position of the conjunction on (whose
next token is the second clause's pronoun) the channel describes the second clause. In
training the requests are the generator's own draws, read back exactly from each sentence
(:func:`declared_intent`); at generation time they come from the user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from semlm.data import synthetic as syn
from semlm.data.vocab import Vocabulary
from semlm.fusion.features import SyntheticFeatures
from semlm.fusion.fuzzy import FEATURE_NAMES
from semlm.fusion.request import REQUEST_FEATURES, Request

#: The intent channel: the 22 predicates of paper A and one more for a requested "!".
INTENT_FEATURE_NAMES: tuple[str, ...] = FEATURE_NAMES + ("is_exclamation",)
INTENT_INDEX = {name: i for i, name in enumerate(INTENT_FEATURE_NAMES)}
N_INTENT_FEATURES = len(INTENT_FEATURE_NAMES)
#: The columns that carry the request (``REQUEST_FEATURES``; the rest describe the current token, causally).
REQUEST_COLUMNS = torch.tensor([INTENT_INDEX[n] for n in REQUEST_FEATURES])
MAX_CLAUSES = 2


@dataclass(frozen=True)
class ClauseIntent:
    polarity: str     # "positive" | "negative"
    intensity: float  # the intensifier's strength r* (syn.INTENSITY)


@dataclass(frozen=True)
class SentenceIntent:
    clauses: tuple[ClauseIntent, ...]
    punctuation: str  # "." | "!" | "?"


def declared_intent(words: Sequence[str]) -> SentenceIntent:
    """The attributes the generator drew for ``words`` (``semlm.data.synthetic.sample_sentence``):
    per clause its adjective's polarity and its intensifier's strength, and the final punctuation.
    Each clause of the grammar has exactly one intensifier and one adjective, so this is exact."""
    clauses, intensity = [], None
    for word in words:
        if word in syn.INTENSITY:
            intensity = syn.INTENSITY[word]
        elif word in syn.POSITIVE_ADJECTIVES or word in syn.NEGATIVE_ADJECTIVES:
            if intensity is None:
                raise ValueError(f"adjective {word!r} without an intensifier in {' '.join(words)!r}")
            clauses.append(ClauseIntent("positive" if word in syn.POSITIVE_ADJECTIVES else "negative", intensity))
            intensity = None
    if not clauses or words[-1] not in syn.END_PUNCTUATION:
        raise ValueError(f"not a sentence of the synthetic grammar: {' '.join(words)!r}")
    return SentenceIntent(tuple(clauses), words[-1])


def intent_rows(intents: Sequence[SentenceIntent]) -> torch.Tensor:
    """[B, MAX_CLAUSES, R] request predicates per sentence and clause (a missing clause repeats the last)."""
    rows = []
    for intent in intents:
        clauses = [Request.of(c.polarity, intent.punctuation, c.intensity).vector(torch.zeros(len(REQUEST_FEATURES)))
                   for c in intent.clauses[:MAX_CLAUSES]]
        clauses += [clauses[-1]] * (MAX_CLAUSES - len(clauses))
        rows.append(torch.stack(clauses))
    return torch.stack(rows)


#: The strength levels training writes: the intensifiers' strengths r (``syn.INTENSITY``), each as its triplet.
TRAINED_STRENGTHS: tuple[float, ...] = tuple(sorted(set(syn.INTENSITY.values())))


class IntentFeatures:
    """``[B, L] ids, requests -> [B, L, 23]``: causal token features with the request predicates of the
    clause being written. ``requests`` is ``[B, MAX_CLAUSES, R]`` (per clause), ``[B, R]`` or ``[R]``
    (the same request for every clause). Padding positions are all zero."""

    def __init__(self, vocab: Vocabulary):
        self.vocab = vocab
        self.tokens = SyntheticFeatures(vocab)
        self.is_conjunction = torch.zeros(len(vocab), dtype=torch.bool)
        self.is_conjunction[vocab.ids(syn.CONJUNCTIONS)] = True

    @torch.no_grad()
    def __call__(self, input_ids: torch.Tensor, requests: torch.Tensor) -> torch.Tensor:
        ids = input_ids.long()
        B, L = ids.shape
        requests = requests.float()
        if requests.dim() == 1:
            requests = requests.expand(B, -1)
        if requests.dim() == 2:
            requests = requests.unsqueeze(1).expand(B, MAX_CLAUSES, -1)
        if requests.shape != (B, MAX_CLAUSES, len(REQUEST_FEATURES)):
            raise ValueError(f"requests must be [B, {MAX_CLAUSES}, {len(REQUEST_FEATURES)}], got {tuple(requests.shape)}")
        # clause of the *next* token: a conjunction at t (or before) opens the next clause
        clause = torch.cumsum(self.is_conjunction[ids].long(), dim=1).clamp(max=MAX_CLAUSES - 1)
        per_position = requests.gather(1, clause.unsqueeze(-1).expand(B, L, requests.shape[-1]))
        out = torch.zeros(B, L, N_INTENT_FEATURES)
        out[..., :len(FEATURE_NAMES)] = self.tokens(ids)
        out[..., REQUEST_COLUMNS] = per_position
        out[ids == self.vocab.pad_id] = 0.0
        return out
