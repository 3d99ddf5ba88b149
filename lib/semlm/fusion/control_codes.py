"""A CTRL-style control-code baseline for the synthetic task (not in paper A; the standard alternative).

Keskar et al. (2019) steer a plain language model by prepending a *control code* to every
training document; at generation time one picks the code. Here each training sentence gets
two codes after ``<bos>``: its polarity (``<pos>``, ``<neg>`` or ``<mixed>`` when the two
clauses disagree) and its final punctuation (``<.>``, ``<!>``, ``<?>``):

    <bos> <pos> <!> Alice cooks the meal , very good !  <eos>

The model is the plain baseline LM (no feature channel). Codes are inputs, never targets
worth scoring: perplexities exclude the positions that predict a code, so they are the
perplexity of the sentence *given* its codes, which is lower than an unconditioned LM's.
"""

from __future__ import annotations

from typing import Sequence

from semlm.data.synthetic import END_PUNCTUATION, NEGATIVE_ADJECTIVES, POSITIVE_ADJECTIVES

POLARITY_CODES = {"positive": "<pos>", "negative": "<neg>", "mixed": "<mixed>"}
PUNCTUATION_CODES = {p: f"<{p}>" for p in END_PUNCTUATION}
CODE_TOKENS: tuple[str, ...] = tuple(POLARITY_CODES.values()) + tuple(PUNCTUATION_CODES.values())
N_CODES = 2


def sentence_polarity(words: Sequence[str]) -> str:
    """``positive`` / ``negative`` if every adjective of the sentence has that polarity, else ``mixed``."""
    kinds = {"positive" if w in POSITIVE_ADJECTIVES else "negative"
             for w in words if w in POSITIVE_ADJECTIVES or w in NEGATIVE_ADJECTIVES}
    return kinds.pop() if len(kinds) == 1 else "mixed"


def with_codes(sentences: Sequence[Sequence[str]]) -> list[list[str]]:
    """Each sentence with its own two codes in front (the final word is its punctuation)."""
    out = []
    for words in sentences:
        punctuation = words[-1] if words and words[-1] in PUNCTUATION_CODES else "."
        out.append([POLARITY_CODES[sentence_polarity(words)], PUNCTUATION_CODES[punctuation]] + list(words))
    return out
