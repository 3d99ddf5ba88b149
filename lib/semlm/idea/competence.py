"""The competence check of paper B's generation claims: a model is judged only if it beats word-pair counts.

:func:`ngram_reference` fits unigram and interpolated bigram models on the training tokens; :func:`competence`
asks whether every model's validation perplexity is at most :data:`COMPETENCE_RATIO` of the bigram's.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch


#: A model is competent to be judged on paper B's generation claims if its validation perplexity is
#: at most this fraction of the best count-based bigram model's on the same tokens (see :func:`competence`).
COMPETENCE_RATIO = 0.75


def ngram_reference(train_ids: torch.Tensor, valid_ids: torch.Tensor, vocab_size: int,
                    lambdas: Sequence[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)) -> dict:
    """Validation perplexities of count models from the training tokens: add-one unigram, and a bigram
    interpolated with it, ``p = l p_bigram(v | u) + (1 - l) p_unigram(v)``, at the best ``l`` of a
    grid *chosen on the validation split itself* (so the bigram reference is, if anything, optimistic)."""
    train, valid = train_ids.long().flatten(), valid_ids.long().flatten()
    unigram = (torch.bincount(train, minlength=vocab_size).double() + 1) / (len(train) + vocab_size)
    pairs = train[:-1] * vocab_size + train[1:]
    keys, counts = torch.unique(pairs, return_counts=True)
    context = torch.bincount(train[:-1], minlength=vocab_size).double()
    prev, nxt = valid[:-1], valid[1:]
    query = prev * vocab_size + nxt
    pos = torch.searchsorted(keys, query).clamp_max(len(keys) - 1)
    pair_count = torch.where(keys[pos] == query, counts[pos].double(), torch.zeros_like(query, dtype=torch.double))
    p_bigram = torch.where(context[prev] > 0, pair_count / context[prev].clamp_min(1), torch.zeros_like(pair_count))
    p_uni = unigram[nxt]
    best = min(((math.exp(-torch.log(l * p_bigram + (1 - l) * p_uni).mean().item()), l) for l in lambdas))
    return {"unigram_val_ppl": math.exp(-torch.log(p_uni).mean().item()), "bigram_val_ppl": best[0],
            "bigram_lambda": best[1], "tokens": len(nxt)}


def competence(model_ppls: dict, reference: dict, ratio: float = COMPETENCE_RATIO) -> dict:
    """Does every model beat the bigram reference by the margin ``ratio`` (PPL <= ratio x bigram PPL)? A model
    that cannot beat word-pair counts does not use context, so the topic of its continuations is noise.
    """
    worst = max(model_ppls, key=model_ppls.get)
    passes = all(p <= ratio * reference["bigram_val_ppl"] for p in model_ppls.values())
    return {**reference, "model_val_ppl": dict(model_ppls), "threshold_ratio": ratio,
            "threshold_ppl": ratio * reference["bigram_val_ppl"], "worst_model": worst,
            "worst_ratio": model_ppls[worst] / reference["bigram_val_ppl"], "passes": passes}
