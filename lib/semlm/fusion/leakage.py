"""How low can a *causal* model go on the synthetic task? Exact floors from the generator.

The synthetic corpus comes from a known random process (``semlm.data.synthetic``), so the
best possible next-word distribution of a causal predictor is known exactly: it is the
generator's own conditional distribution given the words so far. Its cross-entropy on the
validation sentences is the floor no causal language model can beat on average; a model
that scores below it must be reading the future (paper A's published, non-causal setting).

Two oracles:

* the **training oracle** knows only the adjectives seen in training (2 per class); it is
  what a perfectly trained causal model converges to, so its seen-only perplexity is the
  floor of the seen-only metric. Its cross-entropy per focus token (``good``: chosen among
  the 2 x 2 training adjectives, ln 4) is a reference, not a floor: a model can go below it
  on one token by taking probability from the words that follow the same context. A
  held-out adjective has probability 0 under it (infinite cross-entropy).
* the **validation oracle** knows the validation generator (all 5 adjectives per class);
  its perplexity is the floor of the full validation perplexity for any causal model.

Floors and model perplexities share one denominator: every word of a sentence and its final
``<eos>``, never the ``<pad>`` after it (``LMTensors.scored``). ``OracleLM`` wraps an oracle as
a model, so ``semlm.core.metrics`` can score it like any trained model and land exactly on the floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, NamedTuple, Sequence

import torch

from semlm.data import synthetic as syn
from semlm.data.vocab import EOS, PAD, Vocabulary

_CLAUSE_LENGTH = 7  # subject verb the object , intensifier adjective


@dataclass(frozen=True)
class Oracle:
    """The generator's next-word distribution with a given adjective inventory."""

    positive: tuple[str, ...]
    negative: tuple[str, ...]
    second_clause_prob: float = 0.6

    def next_word(self, prefix: Sequence[str]) -> dict[str, float]:
        """P(next word | words so far) under the generator; ``<eos>`` after the punctuation."""
        prefix = list(prefix)
        if prefix and prefix[-1] in syn.END_PUNCTUATION:
            return {EOS: 1.0}
        conjunctions = [i for i, w in enumerate(prefix) if w in syn.CONJUNCTIONS]
        clause = len(conjunctions)
        slot = len(prefix) - (conjunctions[-1] + 1 if conjunctions else 0)
        if slot == 0:
            if clause == 0:
                return _uniform(syn.SUBJECTS)
            return {syn.PRONOUN_OF[prefix[0]]: 1.0}
        if slot in _FIXED_SLOTS:
            return _FIXED_SLOTS[slot]
        if slot == 6:
            out = {w: 0.5 / len(self.positive) for w in self.positive}
            out.update({w: 0.5 / len(self.negative) for w in self.negative})
            return out
        if slot == _CLAUSE_LENGTH:
            punctuation = _weighted(syn.END_PUNCTUATION, syn.PUNCTUATION_WEIGHTS)
            if clause > 0:
                return punctuation
            out = {c: self.second_clause_prob / len(syn.CONJUNCTIONS) for c in syn.CONJUNCTIONS}
            out.update({p: (1 - self.second_clause_prob) * q for p, q in punctuation.items()})
            return out
        raise ValueError(f"prefix {' '.join(prefix)!r} is not a prefix of a synthetic sentence")

    def cross_entropies(self, sentence: Sequence[str]) -> list[tuple[str, float]]:
        """(target, -ln P(target | prefix)) for every word of ``sentence`` and the final ``<eos>``."""
        out = []
        words = list(sentence) + [EOS]
        for t, target in enumerate(words):
            p = self.next_word(words[:t]).get(target, 0.0)
            out.append((target, -math.log(p) if p > 0 else math.inf))
        return out


def _uniform(words: Sequence[str]) -> dict[str, float]:
    return {w: 1.0 / len(words) for w in words}


def _weighted(words: Sequence[str], weights: Sequence[float]) -> dict[str, float]:
    total = sum(weights)
    return {w: k / total for w, k in zip(words, weights)}


#: The slots whose next word does not depend on the adjective inventory: verb, "the", object, ",", intensifier.
_FIXED_SLOTS = {1: _uniform(syn.VERBS), 2: {"the": 1.0}, 3: _uniform(syn.OBJECTS), 4: {",": 1.0},
                5: _weighted(syn.INTENSIFIERS, syn.INTENSIFIER_WEIGHTS)}


def training_oracle(split: syn.AdjectiveSplit, second_clause_prob: float = 0.6) -> Oracle:
    return Oracle(split.positive_train, split.negative_train, second_clause_prob)


def validation_oracle(second_clause_prob: float = 0.6) -> Oracle:
    return Oracle(syn.POSITIVE_ADJECTIVES, syn.NEGATIVE_ADJECTIVES, second_clause_prob)


def causal_floors(sentences: Sequence[Sequence[str]], split: syn.AdjectiveSplit,
                  focus_tokens: Iterable[str], second_clause_prob: float = 0.6) -> dict:
    """Floors of chapter 2's metrics for a causal model, on these validation sentences.

    ``ppl``: the validation oracle's perplexity (all targets). ``ppl_seen_only``: the training
    oracle's perplexity without held-out targets. ``focus_ce``: the training oracle's mean
    cross-entropy per focus token (``inf`` for a held-out adjective) and, as
    ``focus_ce_validation_oracle``, the validation oracle's. ``ppl_authors_denominator``: the
    validation oracle's perplexity with one more, free target per sentence (the ``<pad>`` after
    ``<eos>``, which the authors' evaluation counts), to compare with their numbers.
    """
    held_out = set(split.held_out)
    trained = [pair for s in sentences for pair in training_oracle(split, second_clause_prob).cross_entropies(s)]
    full = [pair for s in sentences for pair in validation_oracle(second_clause_prob).cross_entropies(s)]

    def mean(pairs, keep=lambda target: True, free: int = 0):  # ``free`` more targets, at cross-entropy 0
        values = [ce for target, ce in pairs if keep(target)]
        return sum(values) / (len(values) + free) if values else math.nan

    def seen(target: str) -> bool:
        return target not in held_out

    focus_tokens = list(focus_tokens)
    return {
        "ppl": math.exp(mean(full)),
        "ppl_authors_denominator": math.exp(mean(full, free=len(sentences))),
        "ppl_seen_only_authors_denominator": math.exp(mean(trained, seen, len(sentences))),
        "ppl_seen_only": math.exp(mean(trained, seen)),
        "focus_ce": {tok: mean(trained, lambda t, tok=tok: t == tok) for tok in focus_tokens},
        "focus_ce_validation_oracle": {tok: mean(full, lambda t, tok=tok: t == tok) for tok in focus_tokens},
    }


class OracleOutput(NamedTuple):
    logits: torch.Tensor
    feature_pred: None = None
    hidden: None = None


class OracleLM(torch.nn.Module):
    """An oracle as a causal "model": logits = log P(next word | words so far) under the generator.

    After ``<eos>`` it predicts ``<pad>`` with certainty (the generator stops there); a word the
    oracle gives probability 0 gets logit -inf (infinite cross-entropy, e.g. a held-out adjective
    under the training oracle). Same call signature as the trained models, so ``semlm.core.metrics``
    scores it unchanged: its perplexity is the floor.
    """

    def __init__(self, oracle: Oracle, vocab: Vocabulary):
        super().__init__()
        self.oracle, self.vocab = oracle, vocab

    def forward(self, input_ids: torch.Tensor, features=None, mask=None) -> OracleOutput:
        B, L = input_ids.shape
        logits = torch.full((B, L, len(self.vocab)), -math.inf)
        for b in range(B):
            words = self.vocab.decode(input_ids[b], skip_special=False)
            for t in range(L):
                if words[t] == PAD:
                    logits[b, t] = 0.0  # never scored
                    continue
                if words[t] == EOS:
                    logits[b, t, self.vocab.pad_id] = 0.0
                    continue
                for word, p in self.oracle.next_word(words[1:t + 1]).items():
                    logits[b, t, self.vocab.id(word)] = math.log(p)
        return OracleOutput(logits)
