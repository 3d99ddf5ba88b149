"""Chapter 9's deciding comparison as arithmetic on counts: matched perplexity, the controls, the intervals.

The claim under test (paper B, Sections 3 and 5) is "less topic drift at comparable perplexity". Comparing a
plain and a gated model at equal optimiser steps lets a perplexity difference stand in for a drift
difference, and a gate that merely sharpens the next-token distribution (what a lower temperature does)
also switches topic less. So for every training seed the decision compares the gated model at the largest
budget with

* **the plain model at matched perplexity**: its drift interpolated, linearly in validation perplexity,
  between the two checkpoints of its (longer) run whose perplexities bracket the gated model's, never
  extrapolated (:func:`bracket`; a seed without a bracket is *not comparable* and counts against power);
* **the sharpened plain model**: the same two checkpoints sampled at the temperature that gives them the
  gated model's mean next-token entropy (teacher-forced on held-out text), interpolated the same way;
* **the gate off**: the gated model decoded at alpha = 0 (shown, not part of the rule).

Everything here is a pure, torch-free function of per-prompt counts (:class:`PromptCounts`), so the claims
and their tests can feed it simulated builds. Intervals are Student-t over seeds, or, where that has zero width,
a bootstrap over prompts nested within seeds; an interpolated arm's is widened by its interpolation error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from semlm.core.records import Interval
from semlm.core.verdicts import widened
from semlm.idea.records import TopicDecision

#: The arms every comparable seed has: ``gated`` (largest budget, gate on), ``plain`` (at the gated model's
#: validation PPL), ``sharpened`` (plain at matched PPL, at the gated model's entropy), ``gate_off`` (alpha 0).
ARMS = ("gated", "plain", "sharpened", "gate_off")
BOOTSTRAP_RESAMPLES = 2000


@dataclass(frozen=True)
class PromptCounts:
    """Sentence-level counts of one model's continuations, one column per prompt (its samples pooled): the rows
    are topic switches, transitions between single-topic sentences, mixed and topical sentences."""

    counts: np.ndarray  # [4, prompts], float

    @classmethod
    def of(cls, rows: Sequence[tuple[int, int, int, int]]) -> "PromptCounts":
        """From ``(switches, transitions, mixed, topical)`` per prompt (at least one)."""
        counts = np.array([[int(v) for v in r] for r in rows], dtype=float).reshape(-1, 4).T
        if counts.shape[1] == 0:
            raise ValueError("PromptCounts needs (switches, transitions, mixed, topical) of at least one prompt")
        if (counts[0] > counts[1]).any():
            raise ValueError("a prompt cannot have more switches than transitions")
        return cls(counts)

    @property
    def prompts(self) -> int:
        return self.counts.shape[1]


@dataclass(frozen=True)
class Arm:
    """One arm of one seed: a weighted sum of measured models (one, or two bracketing checkpoints)."""

    parts: tuple[tuple[float, PromptCounts], ...]

    @classmethod
    def single(cls, counts: PromptCounts) -> "Arm":
        return cls(((1.0, counts),))

    @classmethod
    def interpolated(cls, first: PromptCounts, second: PromptCounts, weight: float) -> "Arm":
        """``(1 - weight) * first + weight * second`` (``weight`` in [0, 1], the share of ``second``)."""
        if not 0.0 <= weight <= 1.0:
            raise ValueError(f"an interpolation weight lies in [0, 1], got {weight}")
        return cls(((1.0 - weight, first), (weight, second)))

    @property
    def prompts(self) -> int:
        return self.parts[0][1].prompts

    def rates(self, index: np.ndarray | None = None) -> tuple[float, float]:
        """(switch rate, mix rate), each part's pooled over the prompts ``index`` (all by default), weighted."""
        switch = mix = 0.0
        for weight, counts in self.parts:
            a = counts.counts if index is None else counts.counts[:, index]
            s, t, m, k = a.sum(axis=1)
            switch += weight * (s / t if t else math.nan)
            mix += weight * (m / k if k else math.nan)
        return switch, mix

    @property
    def interpolation_error(self) -> float:
        """``min(w, 1 - w) * |r_b - r_a|`` for two checkpoints (0 for one model)."""
        if len(self.parts) == 1:
            return 0.0
        (w0, a), (w1, b) = self.parts
        ra, rb = Arm.single(a).rates()[0], Arm.single(b).rates()[0]
        return min(w0, w1) * abs(rb - ra)

    @property
    def complete(self) -> bool:
        """Every part has at least one transition (a switch rate is defined)."""
        return all(c.counts[1].sum() > 0 for _, c in self.parts)


@dataclass(frozen=True)
class SeedArms:
    """One training seed's arms (:data:`ARMS`) and the gated model's validation PPL (the matched point).
    ``arms`` is None for a seed whose plain checkpoints do not bracket that PPL (not comparable)."""

    seed: int
    matched_ppl: float
    arms: Mapping[str, Arm] | None
    temperature: float | None = None  # the sharpening temperature (mean of the two checkpoints')

    def __post_init__(self):
        if self.arms is not None:
            missing = sorted(set(ARMS) - set(self.arms))
            if missing:
                raise ValueError(f"seed {self.seed} lacks the arm(s) {', '.join(missing)}; each seed needs {ARMS}")
            sizes = {counts.prompts for arm in self.arms.values() for _, counts in arm.parts}
            if len(sizes) > 1:
                raise ValueError(f"seed {self.seed}: every arm must score the same prompts, got {sorted(sizes)} prompts")

    @property
    def comparable(self) -> bool:
        return self.arms is not None and all(self.arms[a].complete for a in ARMS)


def bracket(steps: Sequence[int], ppl: Sequence[float], target: float) -> tuple[int, int, float] | None:
    """The first pair of consecutive checkpoints whose validation PPLs bracket ``target`` (``ppl[i] >= target
    >= ppl[i + 1]``): ``(steps[i], steps[i + 1], w)``, ``w`` the share of the second, so that interpolating
    linearly in PPL gives ``target``. None if no consecutive pair brackets it (no extrapolation)."""
    if len(steps) != len(ppl):
        raise ValueError(f"one PPL per checkpoint: got {len(steps)} steps and {len(ppl)} PPLs")
    for i in range(len(steps) - 1):
        hi, lo = ppl[i], ppl[i + 1]
        if hi >= target >= lo and math.isfinite(hi) and math.isfinite(lo):
            return steps[i], steps[i + 1], 0.0 if hi == lo else (hi - target) / (hi - lo)
    return None


def _nested_bootstrap(seeds: Sequence[SeedArms], statistic, resamples: int, rng: np.random.Generator
                      ) -> tuple[float, float]:
    """95% percentile interval of the mean over seeds of ``statistic(seed, prompt_index)``, resampling seeds
    and, within each drawn seed, its prompts (every arm of a seed shares the prompts)."""
    def resampled(seed: SeedArms) -> float:
        prompts = seed.arms["gated"].prompts
        return statistic(seed, rng.integers(0, prompts, prompts))

    n = len(seeds)
    means = np.array([sum(resampled(seeds[i]) for i in rng.integers(0, n, n)) / n for _ in range(resamples)])
    means = means[np.isfinite(means)]
    if not len(means):
        return math.nan, math.nan
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def _seed_interval(seeds: Sequence[SeedArms], statistic, widen: float, rng: np.random.Generator,
                   resamples: int) -> tuple[Interval, str]:
    """The per-seed ``statistic(seed, None)`` over seeds: a t-interval, or the nested bootstrap where the
    t-interval has zero width, widened by ``widen`` on both sides. Returns the interval and its method."""
    values = [statistic(s, None) for s in seeds]
    t, method = Interval.of_mean(values), "t over seeds"
    low, high = t.low, t.high
    if len(values) > 1 and t.high - t.low == 0:
        low, high = _nested_bootstrap(seeds, statistic, resamples, rng)
        low, high = min(low, t.mean), max(high, t.mean)
        method = "bootstrap over prompts nested within seeds"
    return Interval(t.mean, low - widen, high + widen, len(values), t.values), method


def decide(seeds: Sequence[SeedArms], data_rate: Interval, *, resamples: int = BOOTSTRAP_RESAMPLES,
           rng_seed: int = 0) -> TopicDecision:
    """Chapter 9's :class:`~semlm.idea.records.TopicDecision` from every comparable seed's arms: excess drift (switch
    rate - ``data_rate.mean``, widened by the data rate's interval) and the differences paired by seed, widened
    by the interpolated arm's mean interpolation error.
    """
    rng = np.random.default_rng(rng_seed)
    usable = [s for s in seeds if s.comparable]
    out: dict = {"seeds": [s.seed for s in usable], "not_comparable": [s.seed for s in seeds if not s.comparable],
                 "data_rate": data_rate}
    if not usable:
        return TopicDecision(**out)
    below, above = data_rate.mean - data_rate.low, data_rate.high - data_rate.mean
    methods = {}

    def error(arm):
        return float(np.mean([s.arms[arm].interpolation_error for s in usable]))

    # each arm's excess drift (less the data's rate, whose interval widens it), then gated - a control, paired
    for name, arm, control in (("gated", "gated", None), ("plain_at_matched_ppl", "plain", None),
                               ("sharpened_plain", "sharpened", None), ("gate_off", "gate_off", None),
                               ("gated_minus_plain", "gated", "plain"),
                               ("gated_minus_sharpened", "gated", "sharpened")):
        def switch(s, idx, arm=arm, control=control):
            return s.arms[arm].rates(idx)[0] - (data_rate.mean if control is None else s.arms[control].rates(idx)[0])

        i, methods[name] = _seed_interval(usable, switch, error(control or arm), rng, resamples)
        out[name] = i if control else widened(i, below, above)
    for name, arm in (("mix_gated", "gated"), ("mix_plain", "plain")):
        i, _ = _seed_interval(usable, lambda s, idx, a=arm: s.arms[a].rates(idx)[1], 0.0, rng, resamples)
        out[name] = Interval(i.mean, max(0.0, i.low), min(1.0, i.high), i.n, i.values)  # a share
    out["matched_ppl"] = Interval.of_mean([s.matched_ppl for s in usable])
    temperatures = [s.temperature for s in usable if s.temperature is not None]
    if temperatures:
        out["temperature"] = Interval.of_mean(temperatures)
    out["interpolation_error"] = {"plain": error("plain"), "sharpened": error("sharpened")}
    out["interval_method"] = methods
    return TopicDecision(**out)
