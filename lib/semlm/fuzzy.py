"""Fuzzy memberships and the 22-predicate feature bank (semantic-fusion paper, Section 2, Eq. 1).

A graded predicate such as ``pos_high`` is the degree to which a scalar signal
``x`` in [0, 1] is close to a centre ``c``:

    mu(x; c, tau) = 0.9 ** (|x - c| / tau)          (Eq. 1)

Three centres (0.2, 0.6, 1.0) give the low / med / high triplet. The kernel never
reaches 0: a token with no sentiment at all still has pos_low = mu(0; 0.2, 0.35) ~ 0.94,
which is why the triplets look "flat" in the book's heatmaps.
"""

from __future__ import annotations

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


def membership(x, centre: float, tau: float = TAU):
    """Power-kernel membership ``0.9 ** (|x - c| / tau)``; works on floats and numpy arrays."""
    if tau <= 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    return BASE ** (np.abs(np.asarray(x, dtype=np.float64) - centre) / tau)


def triangular_memberships(x, centres: Sequence[float] = CENTRES, tau: float = TAU) -> np.ndarray:
    """The low / med / high triplet ``Tri(x; C, tau)``; output shape ``x.shape + (len(centres),)``."""
    x = np.asarray(x, dtype=np.float64)
    return np.stack([membership(x, c, tau) for c in centres], axis=-1)


def feature_index(name: str) -> int:
    """Column of a predicate in the semantic matrix, with a clear error for unknown names."""
    try:
        return FEATURE_INDEX[name]
    except KeyError:
        raise ValueError(
            f"unknown feature {name!r}; valid names: {', '.join(FEATURE_NAMES)}"
        ) from None
