"""Effect rules that can say no: a frozen smallest effect of interest, one ladder, and power computed through the rule.

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
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping, Sequence

from semlm.core.records import Interval

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"  # the measurement ran but its intervals cannot separate the two outcomes

#: A rule is planned so that both ``at_zero`` and ``at_m`` reach this.
POWER_TARGET = 0.85
#: Simulated records behind each power figure.
POWER_SIMULATIONS = 2000


def _n(interval: Interval) -> int:
    """The number of seeds an interval over seeds rests on."""
    if interval.values:
        return len(interval.values)
    return interval.n if isinstance(interval.n, int) else 0


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


def _carry(interval: Interval, below: float, above: float) -> Interval:
    return Interval(interval.mean, interval.low - below, interval.high + above, interval.n, interval.values)


def simulate(rule: EffectRule, effects: Sequence[float], n: int, simulations: int = POWER_SIMULATIONS,
             seed: int | None = None, level: float | None = None) -> dict[str, float]:
    """The share of each status over ``simulations`` records of ``n`` seeds whose per-seed comparisons are drawn
    from a normal with means ``effects``, the rule's planning SDs and its pilot's correlation (and, with a guard, a
    per-seed level of mean ``level``, default the pilot's), each judged by :meth:`EffectRule.decide`."""
    import numpy as np

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
    counts: dict[str, float] = {}
    for s in range(simulations):
        comparisons = {name: _carry(Interval.of_mean(draws[s, :, j]), carried[j], carried[j])
                       for j, name in enumerate(rule.comparisons)}
        guard = None if levels is None else _carry(Interval.of_mean(levels[s]), *rule.guard.carried)
        status, _ = rule.decide(comparisons, guard)
        counts[status] = counts.get(status, 0) + 1
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
    from semlm.core.records import t_quantile_975

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
        import numpy as np

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


def power_frame(rows: Sequence[Mapping]):
    """The effect claims' rules at a glance, one row per claim of ``rows`` (``semlm.book.claims.evaluate_claims``)
    that carries a power block: ``m``, the planned and used seeds, ``at_zero``, ``at_m``, the planned and observed
    half-width of the deciding interval over ``m``, whether the planned seeds are affordable, and the commit of the
    registration that fixed the claim's decisive seeds (:func:`registrations`; "-" where none has)."""
    import pandas as pd

    registered = registrations()

    def rounded(value, digits=2):
        return None if value is None or value != value else round(value, digits)

    return pd.DataFrame([{
        "claim": row["id"], "m": row["smallest_effect"]["value"], "seeds planned": row["power"]["n_planned"],
        "seeds used": row["power"]["seeds_used"], "P(not reproduced | 0)": rounded(row["power"]["at_zero"]),
        "P(reproduced | m)": rounded(row["power"]["at_m"]),
        "half-width / m, planned": rounded(row["power"]["half_width_over_m"]["planned"]),
        "half-width / m, this build": rounded(row["power"]["half_width_over_m"]["observed"]),
        "affordable": "yes" if row["power"]["affordable"] else "no",
        "registration": registered.get(row["id"], "-"),
    } for row in rows if row.get("power")]).set_index("claim")


def registrations() -> dict[str, str]:
    """``{claim: "<name> <commit>"}`` of every registered claim: paper B's real-data claims
    (:mod:`semlm.book.registration`) and the CPU claims (:mod:`semlm.book.registration_cpu`); the commit is
    "uncommitted" where no git history names it."""
    import semlm.book.registration as registration
    import semlm.book.registration_cpu as registration_cpu
    from semlm.book.cpu_seeds import FAMILIES

    out = {}
    if registration.B_SEEDS is not None:
        commit = registration.registration_commit()
        out.update(dict.fromkeys(registration.B_CLAIMS, f"{registration.B_SEEDS.name} {(commit or 'uncommitted')[:7]}"))
    reg = registration_cpu.CPU_SEEDS
    if reg is not None:
        commit = registration_cpu.registration_commit()
        out.update(dict.fromkeys((c for f in reg.n for c in FAMILIES[f].claims),
                                 f"{reg.name} {(commit or 'uncommitted')[:7]}"))
    return out
