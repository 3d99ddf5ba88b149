"""One request to paper A's models: the feature-channel values it sets and the codes it is heard as.

A request sets some request predicates (``pos_*``, ``neg_*``, ``str_*``, ``is_question`` and, for the intent
channel, ``is_exclamation``) to values in [0, 1] and names the final punctuation it asks for. The synthetic
decoder writes :meth:`Request.features` into the newest position and steers by them, the intent channel writes
them at every position (:meth:`Request.vector`), the SST-2 study writes them into the causal bank, and the
control-code baseline hears :meth:`Request.codes` instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import torch

from semlm.data.synthetic import END_PUNCTUATION
from semlm.fusion.control_codes import POLARITY_CODES, PUNCTUATION_CODES
from semlm.fusion.fuzzy import triangular_memberships

#: The predicates a request may set: paper A's polarity, strength and question predicates, and one for "!".
REQUEST_FEATURES: tuple[str, ...] = ("pos_low", "pos_med", "pos_high", "neg_low", "neg_med", "neg_high",
                                     "str_low", "str_med", "str_high", "is_question", "is_exclamation")
POLARITIES: tuple[str, ...] = ("positive", "negative")
#: The request predicates by column group: what a request says about polarity, the question mark and strength.
COLUMN_GROUPS: dict[str, tuple[str, ...]] = {"polarity": REQUEST_FEATURES[:6], "is_question": ("is_question",),
                                             "strength": REQUEST_FEATURES[6:9]}
#: Above this net polarity a hard request restricts the adjective class outright.
HARD_THRESHOLD = 0.6


def strength_triplet(level: float) -> torch.Tensor:
    """``[str_low, str_med, str_high]`` as the training data write them for an intensifier of strength ``level``."""
    if not 0.0 <= level <= 1.0:
        raise ValueError(f"a strength level must be in [0, 1], got {level}")
    return triangular_memberships(torch.tensor(float(level))).float()


@dataclass(frozen=True)
class Request:
    """Predicate values (unset ones: 0 for steering, the training mean in the intent channel) and the final
    punctuation asked for; the polarity asked for is the larger side of ``pos_high`` / ``neg_high``."""

    values: Mapping[str, float] = field(default_factory=dict)
    punctuation: str | None = None

    def __post_init__(self):
        for name, value in self.values.items():
            if name not in REQUEST_FEATURES:
                raise ValueError(f"unknown request predicate {name!r}; choose from: {', '.join(REQUEST_FEATURES)}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) \
                    or not 0.0 <= value <= 1.0:
                raise ValueError(f"request predicate {name} must be a number in [0, 1], got {value!r}")
        if self.punctuation is not None and self.punctuation not in END_PUNCTUATION:
            raise ValueError(f"unknown punctuation {self.punctuation!r}; choose one of: {' '.join(END_PUNCTUATION)}")
        object.__setattr__(self, "values", {k: float(v) for k, v in self.values.items()})

    @classmethod
    def of(cls, polarity: str | None = None, punctuation: str | None = None, strength: float | None = None) -> Request:
        """The request as the training data write one: whole ``pos_*`` / ``neg_*`` triplets (of 1 and 0), the
        ``str_*`` triplet of an intensifier of ``strength`` (training never saw ``str_high`` move alone), and
        ``is_question`` / ``is_exclamation`` of 0 or 1; ``None`` sets nothing."""
        values = {}
        if polarity is not None:
            if polarity not in POLARITIES:
                raise ValueError(f"unknown polarity {polarity!r}; choose one of: {', '.join(POLARITIES)}")
            positive = float(polarity == "positive")
            triplets = [triangular_memberships(torch.tensor(v)).tolist() for v in (positive, 1 - positive)]
            values.update(zip(REQUEST_FEATURES[:6], triplets[0] + triplets[1]))
        if strength is not None:
            values.update(zip(REQUEST_FEATURES[6:9], strength_triplet(strength).tolist()))
        if punctuation is not None:
            values.update(is_question=float(punctuation == "?"), is_exclamation=float(punctuation == "!"))
        return cls(values, punctuation)

    def mirror_image(self) -> Request:
        """This request with every ``pos_*`` value swapped with its ``neg_*`` one (a side it leaves unset written as
        0, so both write the same predicates); strength, ``is_question`` and the punctuation are kept."""
        polarity = COLUMN_GROUPS["polarity"]
        if not any(name in self.values for name in polarity):
            raise ValueError(f"{self} sets no polarity predicate ({', '.join(polarity)}), so it has no mirror image")
        swapped = {name: self.get(("neg" if name.startswith("pos") else "pos") + name[3:]) for name in polarity
                   if name in self.values or "pos" + name[3:] in self.values or "neg" + name[3:] in self.values}
        return Request({**self.values, **swapped}, self.punctuation)

    def features(self) -> dict[str, float]:
        """The feature-channel values this request sets, by predicate name."""
        return dict(self.values)

    def codes(self) -> tuple[str, str]:
        """The request as a control-code model hears it: its polarity code and its punctuation code."""
        if self.polarity is None or self.punctuation is None:
            raise ValueError(f"a control-code request needs a polarity and a punctuation, got {self}")
        return POLARITY_CODES[self.polarity], PUNCTUATION_CODES[self.punctuation]

    def vector(self, mean: torch.Tensor) -> torch.Tensor:
        """[R] the predicates in ``REQUEST_FEATURES`` order, those this request leaves unset at ``mean``."""
        out = mean.clone().float()
        for name, value in self.values.items():
            out[REQUEST_FEATURES.index(name)] = value
        return out

    def get(self, name: str) -> float:
        return self.values.get(name, 0.0)

    @property
    def net_polarity(self) -> float:
        """Net requested polarity in [-1, 1]: pos_high - neg_high."""
        return self.get("pos_high") - self.get("neg_high")

    @property
    def polarity(self) -> str | None:
        """"positive" / "negative" by the sign of :attr:`net_polarity`; None when it is 0."""
        return "positive" if self.net_polarity > 0 else "negative" if self.net_polarity < 0 else None

    @property
    def strength(self) -> float:
        """Requested strength in [0, 1]: the ``str_*`` centres weighted by the requested memberships."""
        weights = {"str_low": 0.2, "str_med": 0.6, "str_high": 1.0}
        total = sum(self.get(n) for n in weights)
        return sum(self.get(n) * c for n, c in weights.items()) / total if total else 0.0

    @property
    def hard_class(self) -> str | None:
        """The polarity, when the request is strong enough to restrict the adjective class."""
        return self.polarity if abs(self.net_polarity) > HARD_THRESHOLD else None


#: The two requests of paper A's Tables 2-4: positive & strong with "!", negative with "?".
PAPER_REQUESTS = {"pos": Request({"pos_high": 0.95, "str_high": 0.9}, "!"),
                  "neg": Request({"neg_high": 0.95, "is_question": 1.0, "str_med": 0.6}, "?")}

#: A-feature-steering's two requests: the paper's positive request (positive & strong, "!") and its mirror image,
#: which differ only in the polarity columns (the paper's negative request also sets ``is_question`` and another
#: strength, so a difference between the paper's two requests need not come from polarity).
def mirror_pair(request: Request) -> dict[str, Request]:
    """``{"pos": request, "neg": its mirror image}`` for a positive ``request``, both writing the same predicates
    (the side ``request`` leaves unset written as 0): they differ only in the polarity columns."""
    if request.polarity != "positive":
        raise ValueError(f"mirror_pair takes a positive request, got {request} (polarity {request.polarity})")
    mirrored = request.mirror_image()
    completed = Request({**request.values, **{k: request.get(k) for k in mirrored.values}}, request.punctuation)
    return {"pos": completed, "neg": mirrored}


FEATURE_STEERING_REQUESTS = mirror_pair(PAPER_REQUESTS["pos"])


def describe_requests(requests: Mapping[str, Request]) -> str:
    """One line naming the predicates each request writes, e.g. ``pos: pos_high 0.95, neg_high 0, str_high 0.9 "!"``."""
    return "; ".join(f"{name}: " + ", ".join(f"{k} {v:g}" for k, v in request.values.items())
                     + (f' "{request.punctuation}"' if request.punctuation else "")
                     for name, request in requests.items())
