"""The group-uniform mixture sampler of paper A (Eq. 9): mix, then truncate.

At the ADJ slot, with the requested class C:

    p = softmax(l_C / T),    q = (1 - alpha) p + alpha Unif(C),    then nucleus (top-p) on q.

Mixing before truncating keeps held-out adjectives, which the model rarely predicts,
inside the nucleus. This is the one sampler we write by hand; everything else uses
transformers' warpers.
"""

from __future__ import annotations

import torch


def group_uniform_mixture(logits: torch.Tensor, class_mask: torch.Tensor, alpha: float,
                          temperature: float = 1.0) -> torch.Tensor:
    """q over the vocabulary (zero outside the class); rows sum to 1. ``class_mask``: [V] or [B, V] bool."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    class_mask = class_mask.expand_as(logits)
    if not class_mask.any(-1).all():
        raise ValueError("every row needs at least one word in its class")
    p = torch.softmax((logits / temperature).masked_fill(~class_mask, float("-inf")), dim=-1)
    uniform = class_mask.float() / class_mask.sum(-1, keepdim=True)
    return (1 - alpha) * p + alpha * uniform


def nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of top words whose mass reaches ``top_p`` (at least one); renormalise."""
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    mass_before = sorted_probs.cumsum(-1) - sorted_probs
    keep_sorted = mass_before < top_p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = probs * keep
    return kept / kept.sum(-1, keepdim=True)


def sample_mixture(logits: torch.Tensor, class_mask: torch.Tensor, alpha: float, temperature: float,
                   top_p: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """[B] sampled ids from nucleus(q)."""
    q = nucleus(group_uniform_mixture(logits, class_mask, alpha, temperature), top_p)
    return torch.multinomial(q, 1, generator=generator).squeeze(-1)
