"""Fuzzy memberships and the 22-predicate feature bank (semantic-fusion paper, Section 2, Eq. 1).

A graded predicate such as ``pos_high`` is the degree to which a scalar signal
``x`` in [0, 1] is close to a centre ``c``:

    mu(x; c, tau) = 0.9 ** (|x - c| / tau)          (Eq. 1)

Three centres (0.2, 0.6, 1.0) give the low / med / high triplet. The kernel never
reaches 0: a token with no sentiment at all still has pos_low = mu(0; 0.2, 0.35) ~ 0.94,
which is why the triplets look "flat" in the book's heatmaps.
"""

from __future__ import annotations

import sys
from typing import Sequence

import numpy as np

CENTRES: tuple[float, float, float] = (0.2, 0.6, 1.0)
TAU: float = 0.35
BASE: float = 0.9

# The paper's predicate names, in the order of the authors' feature bank
# (``build_feature_bank`` in SemanticFusion.py, github.com/YongchaoHuang/semantic_fusion).
FEATURE_NAMES: tuple[str, ...] = (
    "is_noun", "is_verb", "is_adj",
    "is_subject", "is_object", "is_head",
    "is_bos", "is_eos", "is_comma", "is_question",
    "pos_low", "pos_med", "pos_high",
    "neg_low", "neg_med", "neg_high",
    "str_low", "str_med", "str_high",
    "coref_subject", "is_capitalized", "is_pronoun",
)
FEATURE_INDEX: dict[str, int] = {name: i for i, name in enumerate(FEATURE_NAMES)}
NUM_FEATURES: int = len(FEATURE_NAMES)

#: Names that take graded values (triplets); every other predicate is binary {0, 1}.
GRADED_FEATURES: tuple[str, ...] = tuple(n for n in FEATURE_NAMES if n.endswith(("_low", "_med", "_high")))


def _is_tensor(x) -> bool:
    """True for a torch tensor, without importing torch (this module stays numpy-only)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def membership(x, centre, tau: float = TAU):
    """Power-kernel membership ``0.9 ** (|x - c| / tau)`` (Eq. 1), the one implementation.

    Works on Python floats, numpy arrays (computed in float64) and torch tensors (kept
    on their device, in their floating dtype, and differentiable): the expression only uses
    ``abs``, ``-``, ``/`` and ``**``, which both libraries define. ``centre`` may be an
    array or tensor that broadcasts against ``x``.
    """
    if tau <= 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    if not _is_tensor(x):
        x = np.asarray(x, dtype=np.float64)
    return BASE ** (abs(x - centre) / tau)


def triangular_memberships(x, centres: Sequence[float] = CENTRES, tau: float = TAU):
    """The low / med / high triplet ``Tri(x; C, tau)``; output shape ``x.shape + (len(centres),)``.

    A numpy array (float64) for numpy / float input, a tensor of ``x``'s floating dtype
    (float32 for integer tensors) on ``x``'s device for tensor input.
    """
    if _is_tensor(x):
        import torch

        dtype = x.dtype if x.is_floating_point() else torch.get_default_dtype()
        centres_like_x = torch.tensor(tuple(centres), dtype=dtype, device=x.device)
    else:
        x = np.asarray(x, dtype=np.float64)
        centres_like_x = np.asarray(centres, dtype=np.float64)
    return membership(x[..., None], centres_like_x, tau)


def feature_index(name: str) -> int:
    """Column of a predicate in the semantic matrix, with a clear error for unknown names."""
    if name not in FEATURE_INDEX:
        raise ValueError(f"unknown feature {name!r}; valid names: {', '.join(FEATURE_NAMES)}")
    return FEATURE_INDEX[name]
