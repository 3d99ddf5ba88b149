"""The group-uniform mixture sampler of paper A (Eq. 9): mix, then truncate.

At the ADJ slot, with the requested class C:

    p = softmax(l_C / T),    q = (1 - alpha) p + alpha Unif(C),    then nucleus (top-p) on q.

Mixing before truncating keeps held-out adjectives, which the model rarely predicts,
inside the nucleus. In ``generate()`` it is a processor (``MixtureAtAdjective``) returning log q at ADJ;
everything else uses transformers' warpers.

Two nucleus rules exist (``NUCLEUS_RULES``), and they differ exactly at the word whose
cumulative mass crosses ``top_p``:

* ``"reach"`` (ours, transformers' ``TopPLogitsWarper``, Holtzman et al.): keep the smallest
  set of top words whose mass *reaches* ``top_p``, i.e. the crossing word is kept. The
  causal setting uses it.
* ``"authors"`` (the authors' ``sample_group_mixture`` and ``top_p_top_k_sample`` in
  SemanticFusion.py, github.com/YongchaoHuang/semantic_fusion): keep the words whose
  cumulative mass is ``<= top_p`` (the crossing word is dropped; the top word is always
  kept). At the negative request (alpha 0.85, top-p 0.95) this drops the last of the five
  class words, usually a held-out one; at top-p 1.0 it drops the last word whenever the
  float32 cumulative sum rounds above 1. The published setting uses it.
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor


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


NUCLEUS_RULES: tuple[str, ...] = ("reach", "authors")


def check_nucleus_rule(rule: str) -> str:
    if rule not in NUCLEUS_RULES:
        raise ValueError(f"unknown nucleus rule {rule!r}; choose one of: {', '.join(NUCLEUS_RULES)}")
    return rule


def nucleus_keep(probs: torch.Tensor, top_p: float, rule: str = "reach") -> torch.Tensor:
    """Boolean [.., V]: which words survive top-p truncation under ``rule`` (see module doc)."""
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    check_nucleus_rule(rule)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    cdf = sorted_probs.cumsum(-1)
    if rule == "reach":
        keep_sorted = (cdf - sorted_probs) < top_p
    else:
        keep_sorted = cdf <= top_p
        keep_sorted[..., 0] = True
    return torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)


def nucleus(probs: torch.Tensor, top_p: float, rule: str = "reach") -> torch.Tensor:
    """Truncate ``probs`` to its nucleus under ``rule`` (at least one word) and renormalise."""
    kept = probs * nucleus_keep(probs, top_p, rule)
    return kept / kept.sum(-1, keepdim=True)


class AuthorsTopPLogitsWarper(LogitsProcessor):
    """LogitsProcessor form of the authors' nucleus (``rule="authors"``), for the steps outside
    the mixture; transformers' ``TopPLogitsWarper`` is the ``"reach"`` rule."""

    def __init__(self, top_p: float):
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        self.top_p = top_p

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        keep = nucleus_keep(torch.softmax(scores, dim=-1), self.top_p, "authors")
        return scores.masked_fill(~keep, float("-inf"))

