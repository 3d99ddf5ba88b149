"""The repetition penalty of paper B's evaluation, compounding per occurrence, as a transformers processor.

The authors' ``evaluate.py`` penalises a token's logit (divided by 1.2 if positive, multiplied if negative)
once per occurrence in the model's context window, so a token seen n times gets 1.2^n, where transformers'
``RepetitionPenaltyLogitsProcessor`` penalises each distinct earlier token once. Vectorised with one
``scatter_add``; it commutes with temperature scaling, so its place in a ``LogitsProcessorList`` does not matter.
"""

from __future__ import annotations

import torch


class CompoundingRepetitionPenalty:
    """``scores[b, v]`` divided (if > 0) or multiplied (if < 0) by ``penalty ** n[b, v]``, with n[b, v] the
    number of times v occurs in the last ``window`` ids of row b (all of them when ``window`` is None)."""

    def __init__(self, penalty: float = 1.2, window: int | None = None):
        if not penalty > 0:
            raise ValueError(f"repetition penalty must be > 0, got {penalty}")
        if window is not None and window < 1:
            raise ValueError(f"window must be >= 1 or None, got {window}")
        self.penalty, self.window = float(penalty), window

    def occurrences(self, input_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
        ids = input_ids if self.window is None else input_ids[:, -self.window:]
        counts = torch.zeros(ids.shape[0], vocab_size, device=ids.device)
        return counts.scatter_add_(1, ids, torch.ones_like(ids, dtype=counts.dtype))

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        factor = self.penalty ** self.occurrences(input_ids, scores.shape[-1]).to(scores.dtype)
        return torch.where(scores < 0, scores * factor, scores / factor)
