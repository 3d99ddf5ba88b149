"""Named control values for steering (paper A, Sections 2 and 3.2).

A control is a predicate of the feature bank (``pos_high``, ``neg_high``, ``str_high``,
``str_med``, ``is_question``, ...) set to a value in [0, 1]. The same names the model
learned to reconstruct are the knobs at decoding time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

from semlm.fusion.fuzzy import FEATURE_NAMES

#: Above this net polarity (or is_question) a "hard" request restricts the choice outright.
HARD_THRESHOLD = 0.6


@dataclass(frozen=True)
class Controls:
    values: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self):
        for name, value in self.values.items():
            if name not in FEATURE_NAMES:
                raise ValueError(f"unknown control {name!r}; valid controls: {', '.join(FEATURE_NAMES)}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not 0.0 <= value <= 1.0:
                raise ValueError(f"control {name} must be a number in [0, 1], got {value!r}")
        object.__setattr__(self, "values", {k: float(v) for k, v in self.values.items()})

    def get(self, name: str) -> float:
        return self.values.get(name, 0.0)

    @property
    def polarity(self) -> float:
        """Net requested polarity in [-1, 1]: pos_high - neg_high."""
        return self.get("pos_high") - self.get("neg_high")

    @property
    def strength(self) -> float:
        """Requested strength in [0, 1] (the triplet's centres weighted by the requested memberships)."""
        weights = {"str_low": 0.2, "str_med": 0.6, "str_high": 1.0}
        total = sum(self.get(n) for n in weights)
        return sum(self.get(n) * c for n, c in weights.items()) / total if total else 0.0

    @property
    def wants_question(self) -> bool:
        return self.get("is_question") > HARD_THRESHOLD

    @property
    def hard_class(self) -> str | None:
        """"positive" / "negative" when the request is strong enough to restrict the adjective class."""
        if self.polarity > HARD_THRESHOLD:
            return "positive"
        if -self.polarity > HARD_THRESHOLD:
            return "negative"
        return None
