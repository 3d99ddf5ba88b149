"""Logits processors for controlled decoding, in transformers' ``(input_ids, scores) -> scores`` shape.

They stack in a ``transformers.LogitsProcessorList`` together with transformers' own
``TemperatureLogitsWarper``, ``TopKLogitsWarper`` and ``TopPLogitsWarper``.

Steering magnitudes follow the authors' ``apply_logit_steer`` in SemanticFusion.py
(github.com/YongchaoHuang/semantic_fusion): at ADJ, +6 x polarity on the requested class and
-3 x polarity on the other; at PUNCT, +2.8 x strength x polarity on "!" and +2.8 x is_question
on "?". Two rules (``STEERING_RULES``):

* ``"authors"``: strength = max(str_high, str_med); at INTENS the same constant
  1.2 (0.5 + strength) is added to every intensifier, which cancels in the softmax (only
  intensifiers are allowed there), so the intensifier is not steered at all.
* ``"ours"`` (default): strength = the requested memberships' weighted centre
  (``Request.strength``), and at INTENS the intensifiers whose strength is closest to the
  requested one are favoured (a documented change).
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor, RepetitionPenaltyLogitsProcessor

from semlm.data import synthetic as syn
from semlm.fusion.decoding.grammar import ADJ, INTENS, PUNCT, ClauseGrammar
from semlm.fusion.request import Request

ADJ_BOOST, ADJ_PENALTY, PUNCT_BOOST, INTENS_BOOST = 6.0, 3.0, 2.8, 3.0
STEERING_RULES: tuple[str, ...] = ("ours", "authors")


class ControlSteering(LogitsProcessor):
    """State-aware additive shifts of the logits at INTENS, ADJ and PUNCT (``rule``: see module doc)."""

    def __init__(self, grammar: ClauseGrammar, request: Request, rule: str = "ours"):
        if rule not in STEERING_RULES:
            raise ValueError(f"unknown steering rule {rule!r}; choose one of: {', '.join(STEERING_RULES)}")
        vocab = grammar.vocab
        self.grammar = grammar
        V = len(vocab)
        shift = torch.zeros(len(grammar.allowed), V)
        polarity = request.net_polarity
        positive, negative = vocab.ids(syn.POSITIVE_ADJECTIVES), vocab.ids(syn.NEGATIVE_ADJECTIVES)
        wanted, other = (positive, negative) if polarity >= 0 else (negative, positive)
        shift[ADJ, wanted] += ADJ_BOOST * abs(polarity)
        shift[ADJ, other] -= ADJ_PENALTY * abs(polarity)
        if rule == "authors":
            strength = max(request.get("str_high"), request.get("str_med"))
            if strength > 0:
                shift[INTENS, vocab.ids(syn.INTENSIFIERS)] += 1.2 * (0.5 + strength)  # equal for all: no effect
        else:
            strength = request.strength
            level = max(request.get(n) for n in ("str_low", "str_med", "str_high"))
            for word, intensity in syn.INTENSITY.items():
                shift[INTENS, vocab.id(word)] += INTENS_BOOST * level * (1.0 - abs(intensity - strength))
        shift[PUNCT, vocab.id("!")] += PUNCT_BOOST * strength * max(0.0, polarity)
        shift[PUNCT, vocab.id("?")] += PUNCT_BOOST * request.get("is_question")
        self.shift = shift

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return scores + self.shift.to(scores.device)[self.grammar.state_of(input_ids)]


class HardControl(LogitsProcessor):
    """Strong requests: restrict ADJ to the requested class, and fix the punctuation asked for."""

    def __init__(self, grammar: ClauseGrammar, request: Request):
        vocab = grammar.vocab
        self.grammar = grammar
        keep = torch.ones(len(grammar.allowed), len(vocab), dtype=torch.bool)
        if request.hard_class is not None:
            keep[ADJ] = False
            words = syn.POSITIVE_ADJECTIVES if request.hard_class == "positive" else syn.NEGATIVE_ADJECTIVES
            keep[ADJ, vocab.ids(words)] = True
        if request.punctuation is not None:
            keep[PUNCT] = False
            keep[PUNCT, vocab.id(request.punctuation)] = True
        self.keep = keep

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return scores.masked_fill(~self.keep.to(scores.device)[self.grammar.state_of(input_ids)], float("-inf"))


class LastKRepetitionPenalty(LogitsProcessor):
    """transformers' repetition penalty (positive logits / p, negative x p) over the last ``k`` tokens only.

    The paper penalises the last k = 3 tokens (1.5 for fusion, 2.5 for the baseline);
    with ``k`` >= the sequence length it is exactly ``RepetitionPenaltyLogitsProcessor``.
    """

    def __init__(self, penalty: float, k: int = 3):
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = k
        self.inner = RepetitionPenaltyLogitsProcessor(penalty=penalty)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return self.inner(input_ids[:, -self.k:], scores)


# --- real text (SST-2, chapter 5): no grammar slots, so control acts on the lexicon ------------------


class SentimentSteering(LogitsProcessor):
    """Soft control on real text: every lexicon word gets ``+boost x |valence|`` if it has the requested
    polarity and ``-penalty x |valence|`` if it has the other one (the paper's +6 / -3 at its ADJ slot,
    spread over the lexicon by strength, since real text has no grammar slot)."""

    def __init__(self, valence: torch.Tensor, polarity: int, boost: float, penalty: float):
        wanted = (valence * polarity).clamp(min=0)
        other = (-valence * polarity).clamp(min=0)
        self.shift = boost * wanted - penalty * other

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return scores + self.shift.to(scores.device)


class AdjectiveClassRestriction(LogitsProcessor):
    """Hard control: every adjective outside the requested VADER class is forbidden, so the next
    adjective the model writes (whenever it writes one) has the requested polarity."""

    def __init__(self, is_adjective: torch.Tensor, allowed: torch.Tensor):
        self.forbidden = is_adjective.clone()
        self.forbidden[allowed] = False

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return scores.masked_fill(self.forbidden.to(scores.device), float("-inf"))


class EndPunctuationControl(LogitsProcessor):
    """Punctuation control on real text, where no grammar state says when a sentence ends. Soft: at every step the
    other end marks lose ``penalty``, so a sentence the model ends prefers the requested mark. Hard (the paper's
    deterministic punctuation): the other end marks are forbidden, and ending the text (``eos``) is allowed only
    right after the requested mark; elsewhere the end's probability goes to the mark, so every continuation that
    ends, ends with it. ``requested``, ``others`` and ``eos`` are token ids; the model still decides when to end."""

    def __init__(self, requested: int, others: list[int], hard: bool, penalty: float, eos: int):
        self.requested, self.others, self.hard, self.penalty, self.eos = requested, list(others), hard, penalty, eos

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        scores = scores.clone()
        if not self.hard:
            scores[:, self.others] -= self.penalty
            return scores
        scores[:, self.others] = float("-inf")
        open_rows = input_ids[:, -1] != self.requested  # the text may end only after the requested mark
        merged = torch.logaddexp(scores[:, self.requested], scores[:, self.eos])
        scores[open_rows, self.requested] = merged[open_rows]
        scores[open_rows, self.eos] = float("-inf")
        return scores


def final_punctuation(words: list[str]) -> str | None:
    """The last end punctuation mark (``. ! ?``) of a continuation, or None if it ends no sentence."""
    return next((w for w in reversed(words) if w in syn.END_PUNCTUATION), None)
