"""Controllability of paper A's synthetic task (Tables 2-4): what a generated one-clause sentence realises.

A sentence of the synthetic grammar (:mod:`semlm.data.synthetic`) carries its adjective and its punctuation at
fixed word positions; these metrics read them and report rates with their Wilson intervals
(:func:`semlm.core.metrics.proportion`).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from semlm.core.metrics import proportion
from semlm.core.records import Interval
from semlm.data.synthetic import NEGATIVE_ADJECTIVES, POSITIVE_ADJECTIVES

POLARITY_CLASSES: tuple[str, ...] = ("POS", "NEG", "OTHER")
ADJECTIVE_SLOT, PUNCTUATION_SLOT = 6, 7  # word positions in a one-clause sentence


def realised_polarity(sentence: Sequence[str]) -> str:
    """POS / NEG / OTHER for the adjective slot of a one-clause sentence."""
    word = sentence[ADJECTIVE_SLOT] if len(sentence) > ADJECTIVE_SLOT else None
    return "POS" if word in POSITIVE_ADJECTIVES else "NEG" if word in NEGATIVE_ADJECTIVES else "OTHER"


def control_accuracy(sentences: Sequence[Sequence[str]], polarity: str, punctuation: str | None) -> dict:
    """Share of sentences whose adjective has the requested polarity (and whose punctuation matches)."""
    adj = sum(realised_polarity(s) == polarity for s in sentences)
    out = {"adj_acc": proportion(adj, len(sentences))}
    if punctuation is not None:
        punct = sum(len(s) > PUNCTUATION_SLOT and s[PUNCTUATION_SLOT] == punctuation for s in sentences)
        out["punct_acc"] = proportion(punct, len(sentences))
    return out


#: The realised class a requested polarity is judged against.
POLARITY_LABELS = {"positive": "POS", "negative": "NEG"}


def request_accuracy(sentences: Sequence[Sequence[str]], request) -> dict:
    """:func:`control_accuracy` against a :class:`semlm.fusion.request.Request`'s polarity and punctuation."""
    return control_accuracy(sentences, POLARITY_LABELS[request.polarity], request.punctuation)


def rate(p: Interval) -> str:
    """rate [95% Wilson interval] (successes/trials)."""
    return f"{p:.2f} ({p.successes}/{p.n})"


def polarity_confusion(by_intended: dict[str, Sequence[Sequence[str]]]) -> dict[str, dict[str, int]]:
    """Counts of realised POS / NEG / OTHER for each intended polarity (rows of the paper's Table 3)."""
    return {intended: {c: sum(realised_polarity(s) == c for s in sentences) for c in POLARITY_CLASSES}
            for intended, sentences in by_intended.items()}


def held_out_hit_rate(sentences: Sequence[Sequence[str]], held_out: Iterable[str]) -> dict:
    """Share of sentences whose adjective is a held-out (never trained on) adjective (Table 4)."""
    held_out = set(held_out)
    hits = sum(len(s) > ADJECTIVE_SLOT and s[ADJECTIVE_SLOT] in held_out for s in sentences)
    return proportion(hits, len(sentences))
