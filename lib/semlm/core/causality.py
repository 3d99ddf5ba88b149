"""Probe whether a model's predictions at positions < t depend on tokens at or after t.

A language model's prediction at position t may depend on tokens 0..t only. We change
the token at ``t`` (and recompute the features from the changed ids, as a causal
pipeline would) and measure the largest change in the logits at positions before t.
For a causal model that is zero up to floating-point noise; for the published,
non-causal model it is large, because position t-1 attends to token t, its target.
"""

from __future__ import annotations

from typing import Callable

import torch

#: The largest change of an earlier logit that still counts as floating-point noise: float32 rounding of logits of
#: order 10 is about 1e-6, while a model that reads a later word moves earlier logits by orders of magnitude more
#: (the published setting's models, and the leaks of ``tests/core/test_causality.py``, by more than 1e-4).
CAUSAL_TOLERANCE = 1e-5


@torch.no_grad()
def future_sensitivity(model: torch.nn.Module, featurize: Callable[[torch.Tensor], torch.Tensor],
                       input_ids: torch.Tensor, position: int, replacement_id: int) -> float:
    """max |logits(original) - logits(changed)| over positions < ``position`` (features included)."""
    if input_ids.dim() == 1:
        input_ids = input_ids.unsqueeze(0)
    if not 0 < position < input_ids.shape[1]:
        raise ValueError(f"position must be in 1..{input_ids.shape[1] - 1}, got {position}")
    model.eval()
    changed = input_ids.clone()
    changed[:, position] = replacement_id
    before = model(input_ids, featurize(input_ids), torch.ones_like(input_ids, dtype=torch.bool)).logits
    after = model(changed, featurize(changed), torch.ones_like(changed, dtype=torch.bool)).logits
    return (before[:, :position] - after[:, :position]).abs().max().item()
