"""The book's one interval type and the typed-record machinery every chapter's record is built on.

:class:`Interval` is the book's one interval: a mean (or a rate) with its 95% bounds, built by
:meth:`Interval.of_mean` (Student t over seeds), :meth:`Interval.of_proportion` (Wilson),
:meth:`Interval.paired` (per-seed differences) or :meth:`Interval.welch` (two independent samples),
and printed one way, ``0.123 [0.100, 0.150]``.

:class:`Record` is a typed part of a metrics file and :class:`ChapterRecord` a whole one. Each paper's
records live beside that paper (:mod:`semlm.fusion.records`, :mod:`semlm.idea.records`); the
chapter -> record map the claims read through is :func:`semlm.book.records.load_record`. A record holds,
typed, exactly the fields the claims and the report read (``audit.table1["causal"].fusion.ppl_seen_only.low``);
everything else a chapter keeps rides along in ``extra``. A field a chapter did not write loads as ``None``
(the claim then says "not run at this profile").

A :class:`Section` is what a chapter shows of one result: its ``table()`` and the ``numbers()`` its prose
cites, a dataclass whose field names are the glue keys (``chapter.show(section)``,
:meth:`semlm.book.chapter.Chapter.show`).

This module imports no torch, so the report can be built without it.
"""

from __future__ import annotations

import functools
import math
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Mapping, Protocol, Sequence

# --- the interval ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def t_quantile_975(df: float) -> float:
    """The two-sided 95% Student-t quantile t_{0.975, df} for ``df`` degrees of freedom (exact, from
    ``scipy.stats.t``; a fractional ``df``, as Welch's, is allowed). scipy is imported on first use only."""
    if not df >= 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    from scipy import stats

    return float(stats.t.ppf(0.975, df))


_Z975 = 1.959963984540054  # the normal quantile, for Wilson intervals


def _number(value) -> float:
    """A float; ``None`` (how JSON writes NaN) becomes NaN."""
    return float("nan") if value is None else float(value)


@dataclass(frozen=True)
class Interval:
    """A mean (``kind="mean"``) or a rate (``kind="proportion"``) with its 95% interval ``[low, high]``.

    ``values`` are the replicates a mean was computed from (seeds), ``n`` their number (the number
    of trials of a rate, the two sample sizes of a Welch difference), ``successes`` the successes of a rate.
    """

    mean: float
    low: float
    high: float
    n: int | tuple[int, int] | None = None
    values: tuple[float, ...] | None = None
    kind: str = "mean"
    successes: int | None = None

    # -- constructors --
    @classmethod
    def of_mean(cls, values: Sequence[float], bounds: tuple[float, float] | None = None) -> Interval:
        """Mean and two-sided 95% Student-t interval of independent replicates (e.g. seeds).

        With one value the interval is that value (no spread can be estimated), which the book
        reports as n = 1. ``bounds`` clips the interval to the range the quantity can take
        (``(0, 1)`` for an accuracy).
        """
        values = tuple(float(v) for v in values)
        if not values:
            raise ValueError("an interval of a mean needs at least one value, got none")
        n = len(values)
        mean = sum(values) / n
        if n == 1:
            return cls(mean, mean, mean, n, values)
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
        half = t_quantile_975(n - 1) * sd / math.sqrt(n)
        low, high = mean - half, mean + half
        if bounds is not None:
            low, high = max(low, bounds[0]), min(high, bounds[1])
        return cls(mean, low, high, n, values)

    @classmethod
    def of_proportion(cls, successes: int, n: int) -> Interval:
        """The rate ``successes / n`` with its 95% Wilson score interval (well-behaved at 0 and 1, unlike the
        normal one; NaN for ``n = 0``)."""
        if n < 0 or successes < 0 or successes > n:
            raise ValueError(f"a proportion needs 0 <= successes <= n, got {successes} of {n}")
        if n == 0:
            return cls(float("nan"), float("nan"), float("nan"), n, None, "proportion", successes)
        p, z = successes / n, _Z975
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        # At 0 and n successes the bounds are exactly 0 and 1; say so instead of 0.999999...
        low = 0.0 if successes == 0 else max(0.0, centre - half)
        high = 1.0 if successes == n else min(1.0, centre + half)
        return cls(p, low, high, n, None, "proportion", successes)

    @classmethod
    def paired(cls, first: Sequence[float], second: Sequence[float]) -> Interval:
        """Mean and 95% t-interval of ``first[i] - second[i]`` (paired by seed)."""
        if len(first) != len(second):
            raise ValueError(f"paired values need the same seeds, got {len(first)} and {len(second)}")
        return cls.of_mean([a - b for a, b in zip(first, second)])

    @classmethod
    def welch(cls, first: Sequence[float], second: Sequence[float]) -> Interval:
        """Mean of ``first`` minus mean of ``second`` with a Welch 95% interval (independent samples, e.g.
        generations of two models; NaNs dropped). ``n`` is the pair of sample sizes; with fewer than two
        values on a side the bounds are NaN (no spread can be estimated)."""
        a = [float(x) for x in first if math.isfinite(float(x))]
        b = [float(x) for x in second if math.isfinite(float(x))]
        n = (len(a), len(b))
        if len(a) < 2 or len(b) < 2:
            diff = (sum(a) / len(a) if a else float("nan")) - (sum(b) / len(b) if b else float("nan"))
            return cls(diff, float("nan"), float("nan"), n)
        ma, mb = sum(a) / len(a), sum(b) / len(b)
        va = sum((x - ma) ** 2 for x in a) / (len(a) - 1) / len(a)
        vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1) / len(b)
        se = math.sqrt(va + vb)
        if se == 0:
            return cls(ma - mb, ma - mb, ma - mb, n)
        df = (va + vb) ** 2 / ((va ** 2) / (len(a) - 1) + (vb ** 2) / (len(b) - 1))
        half = t_quantile_975(max(1.0, df)) * se
        return cls(ma - mb, ma - mb - half, ma - mb + half, n)

    @classmethod
    def from_dict(cls, data: Mapping) -> Interval:
        """Read ``{mean, ci_low, ci_high[, values | n]}`` or a rate ``{value, ci_low, ci_high, k, n}``."""
        if isinstance(data, Interval):
            return data
        if not isinstance(data, Mapping) or not ("mean" in data or "value" in data):
            raise ValueError(f"an interval needs a mapping with 'mean' (or 'value'), 'ci_low' and 'ci_high', "
                             f"got {data!r}")
        proportion = "mean" not in data
        mean = _number(data["value"] if proportion else data["mean"])
        values = data.get("values")
        values = tuple(_number(v) for v in values) if values is not None else None
        n = data.get("n", len(values) if values is not None else None)
        n = tuple(int(x) for x in n) if isinstance(n, (list, tuple)) else int(n) if n is not None else None
        return cls(mean, _number(data.get("ci_low", mean)), _number(data.get("ci_high", mean)), n, values,
                   "proportion" if proportion else "mean", data.get("k"))

    def to_dict(self) -> dict:
        """The JSON shape of the metrics files: ``{mean, ci_low, ci_high, values}`` (``n`` when the
        values are not kept) or, for a rate, ``{value, ci_low, ci_high, k, n}``."""
        if self.kind == "proportion":
            out = {"value": self.mean, "ci_low": self.low, "ci_high": self.high, "k": self.successes, "n": self.n}
        else:  # ``k``: a rate written with a "mean" key (chapter 9's corpus drift)
            out = {"mean": self.mean, "ci_low": self.low, "ci_high": self.high,
                   "values": None if self.values is None else list(self.values),
                   "n": None if self.values is not None else list(self.n) if isinstance(self.n, tuple) else self.n,
                   "k": self.successes}
        return {key: value for key, value in out.items() if value is not None}

    # -- reading --
    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    @property
    def finite(self) -> bool:
        """All three numbers are finite (a rate of nothing, or NaN written as null, is not)."""
        return all(math.isfinite(x) for x in (self.mean, self.low, self.high))

    def above(self, x: float) -> bool:
        """The whole interval lies strictly above ``x``."""
        return self.low > x

    def below(self, x: float) -> bool:
        """The whole interval lies strictly below ``x``."""
        return self.high < x

    def format(self, digits: int = 3, signed: bool = False) -> str:
        """``0.123 [0.100, 0.150]`` (``+0.123 [+0.100, +0.150]`` if signed); ``undefined`` if not finite."""
        if not self.finite:
            return "undefined"
        spec = f"{'+' if signed else ''}.{digits}f"
        return f"{self.mean:{spec}} [{self.low:{spec}}, {self.high:{spec}}]"

    def __format__(self, spec: str) -> str:
        """``f"{interval:.2f}"``, ``f"{interval:+.3f}"``; an empty spec gives 3 digits."""
        if not spec:
            return self.format()
        signed = spec.startswith("+")
        body = spec.lstrip("+")
        if not (body.startswith(".") and body.endswith("f") and body[1:-1].isdigit()):
            raise ValueError(f"an interval formats as '.Nf' or '+.Nf', got {spec!r}")
        return self.format(int(body[1:-1]), signed)

    def __str__(self) -> str:
        return self.format()


# --- records --------------------------------------------------------------------------------

_hints = functools.cache(typing.get_type_hints)


def _coerce(tp, value, where: str):
    """``value`` (JSON-shaped or already typed) as type ``tp``: Interval, a Record, dict/list of them."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _coerce(inner[0], value, where) if len(inner) == 1 else value
    if tp is Interval:
        if not isinstance(value, (Interval, Mapping)):
            raise ValueError(f"{where} must be an interval ({{mean, ci_low, ci_high}}), got {value!r}")
        return Interval.from_dict(value)
    if isinstance(tp, type) and issubclass(tp, Record):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"{where} must be a mapping for {tp.__name__}, got {value!r}")
        return tp.from_dict(value)
    if origin is dict:
        _, inner = typing.get_args(tp)
        if not isinstance(value, Mapping):
            raise ValueError(f"{where} must be a mapping, got {value!r}")
        return {k: _coerce(inner, v, f"{where}.{k}") for k, v in value.items()}
    if origin in (list, tuple):
        inner = typing.get_args(tp)[0]
        return [_coerce(inner, v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _encode(value):
    if isinstance(value, (Interval, Record)):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


@dataclass(frozen=True, kw_only=True)
class Record:
    """A typed part of a metrics file. Fields hold what the claims and the report read (``None``
    when the chapter did not write it); ``extra`` keeps the rest of the file as written.

    Fields accept their JSON shape too (a ``{mean, ci_low, ci_high}`` dict for an ``Interval``),
    converted on construction, so a chapter can pass the summaries it already computed.
    """

    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        shadowed = sorted(set(self.extra) & {f.name for f in fields(self)})
        if shadowed:
            raise ValueError(f"{type(self).__name__}: pass {', '.join(shadowed)} as field(s), not in extra")
        hints = _hints(type(self))
        for f in fields(self):
            if f.name != "extra":
                where = f"{type(self).__name__}.{f.name}"
                object.__setattr__(self, f.name, _coerce(hints[f.name], getattr(self, f.name), where))

    @classmethod
    def from_dict(cls, data: Mapping):
        if not isinstance(data, Mapping):
            raise ValueError(f"{cls.__name__} needs a mapping, got {type(data).__name__}")
        names = {f.name for f in fields(cls)} - {"extra"}
        return cls(**{k: v for k, v in data.items() if k in names},
                   extra={k: v for k, v in data.items() if k not in names})

    def to_dict(self) -> dict:
        out = dict(_encode(self.extra))
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "extra" and value is not None:
                out[f.name] = _encode(value)
        return out


@dataclass(frozen=True, kw_only=True)
class ChapterRecord(Record):
    """A chapter's metrics file. ``profile`` is read back from the provenance the writer adds."""

    chapter: ClassVar[str] = ""
    profile: str | None = None


class Section(Protocol):
    """One result a chapter shows: ``table()`` (a DataFrame or Styler, or None for none) and ``numbers()``, a
    dataclass instance whose fields are the numbers the prose cites, each under its glue key."""

    def table(self) -> Any: ...

    def numbers(self) -> Any: ...


def glue_items(numbers, prefix: str = "") -> dict[str, Any]:
    """``{prefix + field name: value}`` of a :class:`Section`'s ``numbers()`` dataclass."""
    return {prefix + f.name: getattr(numbers, f.name) for f in fields(numbers)}
