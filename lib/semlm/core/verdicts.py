"""How a claim is judged, for both papers: the statuses, a :class:`Verdict`, the :class:`Claim` a paper's rule
builds, the helpers a judge reads its records with, and the effect ladder with its power.

A claim's judge reads this build's ``{chapter: record}`` (typed records; ``semlm.book.claims`` loads them from the
metrics files) and returns a :class:`Verdict`: our values, one of :data:`STATUSES` (:data:`STATUS_MEANINGS` says
what each means) and the ``rule`` it was judged by. A rate whose interval has a half-width above
:data:`INCONCLUSIVE_HALF_WIDTH` is inconclusive whatever its centre.

Effect rules that can say no: a frozen smallest effect of interest, one ladder, and power computed through the rule.

An *effect claim* says that something moves a quantity in the paper's direction (fusion lowers a perplexity, the gate
lowers topic drift). Its judge orients each comparison so that the paper's direction is positive and hands the
95% t-intervals over training seeds to :func:`effect_verdict`, which checks, in this order:

1. fewer seeds than the rule needs, or an undefined interval: inconclusive;
2. **not reproduced** if any comparison's upper end lies below ``m``, the smallest effect of interest: an effect as
   large as ``m`` is excluded (equivalence testing against a smallest effect of interest, two one-sided tests);
3. not reproduced if the rule's veto holds;
4. **reproduced** if every comparison's lower end lies above 0 and the rule's requirement holds;
5. inconclusive otherwise.

``m`` is half the effect the paper reports, computed with the book's statistic at the level of a named pilot
recording (replications are powered for a fraction of the original effect); it is frozen here, beside the rule,
before the runs that decide the claim.

:class:`EffectRule` carries a claim's ``m``, its pilot (per-seed SDs, their correlation) and its planned seeds;
:func:`power` simulates records at ``n`` seeds and runs each through :meth:`EffectRule.decide`, the function the
claim's judge calls, so the power is that of the rule as written: ``at_zero`` (the chance of "not reproduced" when
every true effect is 0) and ``at_m`` (the chance of "reproduced" when every true effect is ``m``). The planning SD
inflates the pilot's by its one-sided 80% upper-confidence factor, ``sqrt(df / chi2_{0.20, df})``, since an SD from
a few seeds is itself uncertain. :func:`least_seeds` is the smallest ``n`` at which both reach :data:`POWER_TARGET`.

Torch-free; numpy and scipy only.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable, Mapping, Sequence

import numpy as np

from semlm.core.records import ChapterRecord, Interval, t_quantile_975

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"  # the measurement ran but its intervals cannot separate the two outcomes
NOT_MEANINGFUL = "not meaningful as published"
NOT_RUN = "not run at this profile"
BY_CONSTRUCTION = "holds by construction"  # the decoder guarantees it, whatever the model
NOT_TESTABLE = "not testable at this scale"  # the model fails the claim's competence check (paper B)
NOT_COMPARABLE = "not comparable"  # the paper's number comes from a setting it does not publish
STATUSES = (REPRODUCED, NOT_REPRODUCED, NOT_MEANINGFUL, NOT_COMPARABLE, NOT_RUN, INCONCLUSIVE, BY_CONSTRUCTION,
            NOT_TESTABLE)
#: What each status means, in one sentence: the report's legend is generated from it.
STATUS_MEANINGS = {
    REPRODUCED: "our causal (language-model) result supports the claim, judged by its rule: for an effect, every "
                "comparison's 95% interval lies above 0",
    NOT_REPRODUCED: "our causal result contradicts the claim: for an effect, an effect as large as the smallest effect "
                    "of interest (half the paper's) is excluded by a 95% interval; the reason gives our numbers",
    NOT_MEANINGFUL: "the paper's number comes from a model that reads the word it predicts (paper A's encoder "
                    "without a causal mask); we show that setting's value and the causal model's",
    NOT_RUN: "this build did not run the chapter or the scale the claim needs",
    INCONCLUSIVE: "the measurement ran, but its 95% intervals neither exclude 0 nor exclude the smallest effect of "
                  "interest (or too few seeds ran); more seeds can decide it",
    BY_CONSTRUCTION: "the decoder guarantees the result whatever the model, so it says nothing about the model",
    NOT_TESTABLE: "the models fail the competence check the claim needs; the reason names the number and threshold",
    NOT_COMPARABLE: "the paper's number comes from a setting the paper does not publish, so ours cannot be compared "
                    "with it; the reason gives ours",
}
#: A rate (accuracy, hit rate) whose 95% interval is wider than +-0.15 decides nothing.
INCONCLUSIVE_HALF_WIDTH = 0.15

#: A rule is planned so that both ``at_zero`` and ``at_m`` reach this.
POWER_TARGET = 0.85
#: Simulated records behind each power figure.
POWER_SIMULATIONS = 2000
#: Paper A's pilot, and that of paper B's LoRA and topic-drift rules: the latest recorded cpu book build (3
#: training seeds of chapter 4, 5 of chapters 9 and 10).
PILOT_A = "cpu-book-e3e2d4f"
#: The CPU claims' pilot (issue 45's registration): their decisive protocol (two generation draws per seed, topic
#: drift over worlds) on planning seeds 501-510, ``python -m semlm.book decisive --pilot``.
PILOT_CPU = "cpu-pilot-39b0955"


@dataclass(frozen=True)
class Verdict:
    status: str
    reason: str
    published_value: object = None
    causal_value: object = None
    ci: tuple[float, float] | None = None
    profile: str | None = None
    rule: str = ""  # the rule the status was judged by, in words
    seeds: int | None = None  # how many training seeds the decided interval rests on, where it is over seeds
    #: an effect claim's oriented comparisons as judged, and the training seeds they rest on (its power block)
    observed: Mapping[str, Interval] | None = None
    seed_ids: tuple[int, ...] | None = None

    @classmethod
    def on(cls, status: str, reason: str, decided: Interval, published_value: object = None,
           seeds: int | None = None, observed: Mapping[str, Interval] | None = None,
           seed_ids: Sequence[int] | None = None) -> Verdict:
        """A verdict whose causal value is ``decided``'s mean, with its interval (None if undefined) and, unless
        given, the number of seeds it rests on; an effect claim passes its ``observed`` comparisons and seeds."""
        ci = (decided.low, decided.high) if decided.finite else None
        return cls(status, reason, published_value, decided.mean, ci,
                   seeds=seeds_of(decided) if seeds is None else seeds, observed=observed,
                   seed_ids=None if seed_ids is None else tuple(seed_ids))


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str  # "A" (semantic fusion) or "B" (idea-gated)
    claim: str
    paper_value: object
    judge: Callable[[Mapping[str, ChapterRecord]], Verdict]
    effect: EffectRule | None = None  # an effect claim's rule: its smallest effect of interest and power
    #: "paper" for a claim of the paper, "extension" for a test of what this book adds (never the paper's success)
    kind: str = "paper"


class Missing(KeyError):
    """What a judge needs is not in this build's records: the claim is not run."""


def lookup(metrics: Mapping[str, ChapterRecord], chapter: str, *path: str, note: str = ""):
    """``chapter``'s typed record followed along ``path`` (attributes, or keys of mappings); ``Missing`` names the
    chapter that did not run or the first step that is absent or None (``note`` added to the last step's name)."""
    if chapter not in metrics:
        raise Missing(f"chapter {chapter} did not run in this build")
    value = metrics[chapter]
    for depth, step in enumerate(path, 1):
        value = value.get(step) if isinstance(value, Mapping) else getattr(value, step)
        if value is None:
            raise Missing(f"{chapter} has no {'.'.join(path[:depth])}{note if depth == len(path) else ''}")
    return value


def seeds_of(interval: Interval | None) -> int | None:
    """The number of replicates (seeds) ``interval`` was computed from, or None if it does not keep them."""
    return len(interval.values) if interval is not None and interval.values else None


def first(*rungs: tuple[bool, str, str]) -> tuple[str, str]:
    """The status and why of the first ``(holds, status, why)`` rung that holds (a ladder ends with ``True``)."""
    return next((status, why) for holds, status, why in rungs if holds)


def judged(chapter: str, rule: str | None = None):
    """A judge of ``chapter``'s record: a ``Missing`` it raises becomes a NOT_RUN verdict; any other verdict gets
    the chapter's profile and ``rule`` (unless None)."""
    def decorate(judge):
        def wrapped(metrics):
            try:
                verdict = judge(metrics)
            except Missing as missing:
                return Verdict(NOT_RUN, str(missing).strip("'\""))
            return replace(verdict, profile=lookup(metrics, chapter).profile, rule=rule or verdict.rule)
        return wrapped
    return decorate




def _n(interval: Interval) -> int:
    """The number of seeds an interval over seeds rests on."""
    return seeds_of(interval) or (interval.n if isinstance(interval.n, int) else 0)


def oriented(interval: Interval) -> Interval:
    """``-interval``: a comparison written the other way round (gated - plain becomes plain - gated)."""
    values = None if interval.values is None else tuple(-v for v in interval.values)
    return Interval(-interval.mean, -interval.high, -interval.low, interval.n, values)


def effect_verdict(comparisons: Mapping[str, Interval], m: float, veto: tuple[bool, str] | None = None,
                   require: tuple[bool, str] | None = None, min_seeds: int = 2) -> tuple[str, str]:
    """The status and why of an effect claim from its oriented comparisons (the paper's direction positive), each
    with its 95% interval over training seeds; ``veto`` and ``require`` are ``(holds, why)`` of the rule's extra
    conditions. The ladder of the module docstring; strict inequalities (:meth:`Interval.above`, ``below``)."""
    if not comparisons:
        raise ValueError("an effect verdict needs at least one comparison")
    if not m > 0:
        raise ValueError(f"the smallest effect of interest must be > 0, got {m}")
    seeds = min(_n(i) for i in comparisons.values())
    if seeds < min_seeds:
        return INCONCLUSIVE, f"{seeds} seeds; the rule needs {min_seeds}"
    undefined = [name for name, i in comparisons.items() if not i.finite]
    if undefined:
        return INCONCLUSIVE, f"the interval of {', '.join(undefined)} is undefined"
    for name, i in comparisons.items():
        if i.below(m):
            kind = ("the opposite direction" if i.high < 0
                    else "present but smaller than the smallest effect of interest" if i.low > 0
                    else "smaller than the smallest effect of interest")
            return NOT_REPRODUCED, f"{name}'s upper end {i.high:+.3g} lies below m = {m:g}: {kind}"
    if veto is not None and veto[0]:
        return NOT_REPRODUCED, veto[1]
    straddling = [name for name, i in comparisons.items() if not i.above(0)]
    if straddling:
        return INCONCLUSIVE, (f"{' and '.join(straddling)} not shown above 0, and an effect of m = {m:g} not "
                              f"excluded")
    if require is not None and not require[0]:
        return INCONCLUSIVE, f"every comparison above 0, but {require[1]}"
    return REPRODUCED, f"every comparison above 0 (m = {m:g} not excluded)"


@dataclass(frozen=True)
class Pilot:
    """Where a rule's planning numbers come from: a recorded run (``book/recorded/<folder>``) and, per oriented
    comparison, the SD of its per-seed values there, their correlation, and the half-width each interval carries
    beside the seeds (an interpolation error; 0 where none)."""

    folder: str
    seeds: int
    sd: tuple[float, ...]
    correlation: float = 0.0
    carried: tuple[float, ...] = ()

    @property
    def inflation(self) -> float:
        """The one-sided 80% upper-confidence factor of an SD from ``seeds`` values: ``sqrt(df / chi2_{0.20, df})``
        (x2.12 at 3 seeds, x1.56 at 5)."""
        from scipy import stats

        df = self.seeds - 1
        return math.sqrt(df / stats.chi2.ppf(0.20, df))

    @property
    def sd_plan(self) -> tuple[float, ...]:
        return tuple(sd * self.inflation for sd in self.sd)


@dataclass(frozen=True)
class Guard:
    """A level the rule vetoes below and requires above (B-topic-drift: the gated model's excess drift against
    ``floor`` = -0.03), with its pilot mean and per-seed SD, and the (below, above) half-widths its interval carries
    beside the seeds (the data rate's), for the simulation."""

    name: str
    floor: float
    pilot_mean: float
    pilot_sd: float
    carried: tuple[float, float] = (0.0, 0.0)
    below_means: str = ""  # what a level wholly below the floor means, for the veto's reason

    def veto(self, level: Interval | None) -> tuple[bool, str]:
        holds = level is not None and level.finite and level.below(self.floor)
        meaning = f": {self.below_means}" if self.below_means else ""
        return holds, f"the {self.name} interval {level} lies wholly below {self.floor:g}{meaning}"

    def require(self, level: Interval | None) -> tuple[bool, str]:
        holds = level is not None and level.finite and level.above(self.floor)
        shown = "is missing" if level is None else f"{level} does not lie wholly above {self.floor:g}"
        return holds, f"the {self.name} interval {shown}"


@dataclass(frozen=True)
class EffectRule:
    """An effect claim's rule: its oriented comparisons, its frozen smallest effect of interest ``m`` (with where it
    comes from), the pilot its planning SDs come from, the seeds it is planned for, and an optional :class:`Guard`.

    ``n_planned`` is :func:`least_seeds` at the time the rule was frozen; where that many seeds are not affordable
    (``affordable`` False), ``n_planned`` is the number that is, and ``note`` says so."""

    claim: str
    comparisons: tuple[str, ...]
    m: float
    m_source: str
    pilot: Pilot
    n_planned: int
    min_seeds: int = 2
    guard: Guard | None = None
    affordable: bool = True
    note: str = ""

    def __post_init__(self):
        if len(self.pilot.sd) != len(self.comparisons):
            raise ValueError(f"{self.claim}: the pilot gives {len(self.pilot.sd)} SDs for {len(self.comparisons)} "
                             f"comparisons")

    def decide(self, comparisons: Mapping[str, Interval], level: Interval | None = None) -> tuple[str, str]:
        """The claim's status and why: :func:`effect_verdict` of ``comparisons`` (keyed by :attr:`comparisons`)
        with the guard's veto and requirement on ``level``. Every judge and every simulation goes through here."""
        missing = [name for name in self.comparisons if name not in comparisons]
        if missing:
            raise ValueError(f"{self.claim}: no interval for {', '.join(missing)}")
        veto = require = None
        if self.guard is not None:
            veto, require = self.guard.veto(level), self.guard.require(level)
        return effect_verdict({name: comparisons[name] for name in self.comparisons}, self.m, veto, require,
                              self.min_seeds)

    @property
    def smallest_effect(self) -> dict:
        return {"value": self.m, "source": self.m_source}


def widened(interval: Interval, below: float, above: float) -> Interval:
    return Interval(interval.mean, interval.low - below, interval.high + above, interval.n, interval.values)


def simulate(rule: EffectRule, effects: Sequence[float], n: int, simulations: int = POWER_SIMULATIONS,
             seed: int | None = None, level: float | None = None) -> dict[str, float]:
    """The share of each status over ``simulations`` records of ``n`` seeds whose per-seed comparisons are drawn
    from a normal with means ``effects``, the rule's planning SDs and its pilot's correlation (and, with a guard, a
    per-seed level of mean ``level``, default the pilot's), each judged by :meth:`EffectRule.decide`."""
    if len(effects) != len(rule.comparisons):
        raise ValueError(f"{rule.claim}: {len(effects)} effects for {len(rule.comparisons)} comparisons")
    rng = np.random.default_rng(zlib.crc32(rule.claim.encode()) if seed is None else seed)
    sd = np.array(rule.pilot.sd_plan)
    k = len(sd)
    correlation = np.full((k, k), rule.pilot.correlation)
    np.fill_diagonal(correlation, 1.0)
    draws = rng.multivariate_normal(np.asarray(effects, float), np.outer(sd, sd) * correlation, size=(simulations, n))
    carried = rule.pilot.carried or (0.0,) * k
    levels = None
    if rule.guard is not None:
        g = rule.guard
        levels = rng.normal(g.pilot_mean if level is None else level, g.pilot_sd * rule.pilot.inflation,
                            size=(simulations, n))
    counts = Counter()
    for s in range(simulations):
        comparisons = {name: widened(Interval.of_mean(draws[s, :, j]), carried[j], carried[j])
                       for j, name in enumerate(rule.comparisons)}
        guard = None if levels is None else widened(Interval.of_mean(levels[s]), *rule.guard.carried)
        counts[rule.decide(comparisons, guard)[0]] += 1
    return {status: count / simulations for status, count in counts.items()}


@lru_cache(maxsize=None)
def power(rule: EffectRule, n: int | None = None, simulations: int = POWER_SIMULATIONS) -> tuple[float, float]:
    """``(at_zero, at_m)`` of ``rule`` at ``n`` seeds (default its planned seeds): the chance of "not reproduced"
    when every true effect is 0, and of "reproduced" when every true effect is ``m``."""
    n = rule.n_planned if n is None else n
    k = len(rule.comparisons)
    at_zero = simulate(rule, (0.0,) * k, n, simulations).get(NOT_REPRODUCED, 0.0)
    at_m = simulate(rule, (rule.m,) * k, n, simulations).get(REPRODUCED, 0.0)
    return at_zero, at_m


def least_seeds(rule: EffectRule, target: float = POWER_TARGET, most: int = 400,
                simulations: int = POWER_SIMULATIONS) -> int | None:
    """The least ``n`` (from the rule's ``min_seeds``) at which both ``at_zero`` and ``at_m`` reach ``target``, by
    bisection (the power rises with ``n``); None if not even ``most`` seeds reach it."""
    def enough(n: int) -> bool:
        return min(power(rule, n, simulations)) >= target

    low, high = max(rule.min_seeds, 2), most
    if not enough(high):
        return None
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid + 1, high)
    return low


def planned_half_width(rule: EffectRule, n: int | None = None) -> float:
    """The expected half-width of the widest deciding interval at ``n`` seeds (default planned) and the planning
    SD, over ``m``: below about 0.5 the rule can tell 0 from ``m``."""
    n = rule.n_planned if n is None else n
    carried = rule.pilot.carried or (0.0,) * len(rule.comparisons)
    return max(t_quantile_975(n - 1) * sd / math.sqrt(n) + c for sd, c in zip(rule.pilot.sd_plan, carried)) / rule.m


def power_block(rule: EffectRule, observed: Mapping[str, Interval] | None = None,
                seeds: Sequence[int] | None = None) -> dict:
    """What the report shows of a rule's power: the planned and used seeds, planning and observed SDs, ``at_zero``
    and ``at_m`` at the planned seeds (:func:`power`), and the deciding interval's half-width over ``m``."""
    observed = observed or {}
    at_zero, at_m = power(rule)

    def sd(interval: Interval | None):
        values = interval.values if interval is not None else None
        if not values or len(values) < 2:
            return None
        mean = sum(values) / len(values)
        return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))

    used = [i for i in observed.values() if i is not None and i.finite]
    pairs = [observed.get(name) for name in rule.comparisons[:2]]
    correlation = None
    if len(pairs) == 2 and all(i is not None and i.values and len(i.values) > 2 for i in pairs):
        if len(pairs[0].values) == len(pairs[1].values) and min(np.std(i.values) for i in pairs) > 0:
            correlation = float(np.corrcoef(pairs[0].values, pairs[1].values)[0, 1])
    seeds = list(seeds) if seeds is not None else None
    return {"n_planned": rule.n_planned, "affordable": rule.affordable,
            "seeds_used": len(seeds) if seeds is not None else min((_n(i) for i in used), default=0),
            "seed_range": [min(seeds), max(seeds)] if seeds else None,
            "pilot": f"book/recorded/{rule.pilot.folder}", "pilot_seeds": rule.pilot.seeds,
            "inflation": round(rule.pilot.inflation, 4),
            "sd_plan": dict(zip(rule.comparisons, rule.pilot.sd_plan)),
            "sd_observed": {name: sd(observed.get(name)) for name in rule.comparisons},
            "correlation_plan": rule.pilot.correlation if len(rule.comparisons) > 1 else None,
            "correlation_observed": correlation,
            "at_zero": at_zero, "at_m": at_m, "simulations": POWER_SIMULATIONS,
            "half_width_over_m": {"planned": planned_half_width(rule),
                                  "observed": max((i.half_width for i in used), default=float("nan")) / rule.m
                                  if used else None},
            "note": rule.note}


def ladder(rule: EffectRule) -> str:
    """The effect ladder in words, with ``rule``'s smallest effect of interest, seeds and guard."""
    names = " and ".join(rule.comparisons)
    veto = require = ""
    if rule.guard is not None:
        g = rule.guard
        veto = f", or if the {g.name} interval lies wholly below {g.floor:g}"
        require = f" and the {g.name} interval lies wholly above {g.floor:g}"
    # the rule texts are registered: they name the ladder's first home, semlm.book.effects
    return (f"{names}, oriented so that the paper's direction is positive, each with its 95% Student-t interval "
            f"over training seeds, judged by one ladder (semlm.book.effects) against the smallest effect of interest "
            f"m = {rule.m:g} ({rule.m_source}): inconclusive with fewer than {rule.min_seeds} seeds or an undefined "
            f"interval; not reproduced if any interval's upper end lies below m (an effect as large as m is "
            f"excluded){veto}; reproduced if every interval's lower end lies above 0{require}; inconclusive "
            f"otherwise. Planned for {rule.n_planned} seeds (power in the record)")


def decided(rule: EffectRule, comparisons: Mapping[str, Interval], level: Interval | None = None) -> tuple[str, str]:
    """``rule.decide``'s status and its why in parentheses, for a reason."""
    status, why = rule.decide(comparisons, level)
    return status, f" ({why})"

