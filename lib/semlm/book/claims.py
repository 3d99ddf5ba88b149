"""The claims table of the reproducibility report, computed from the chapters' metrics files.

Each claim of the two papers is a :class:`~semlm.core.verdicts.Claim` with the paper's value and a judge that reads
this build's ``{chapter: record}`` (typed records, or the dicts :func:`semlm.book.report.write_chapter_metrics`
wrote, read through :func:`semlm.book.records.load_record`) and returns a :class:`~semlm.core.verdicts.Verdict`: our
values, one of :data:`~semlm.core.verdicts.STATUSES` and the ``rule`` it was judged by. A rule gives "reproduced" only
if a model without the property would fail it: intervals (over seeds, or Wilson intervals of rates), never signs of
means. An effect claim (``Claim.effect``) is judged by one ladder against a frozen smallest effect of interest, so it
can say "not reproduced" when an effect that large is excluded, and carries its power (:mod:`semlm.core.verdicts`).

The claims and their rules live beside the records they read: paper A's in :mod:`semlm.fusion.claims`, paper B's
in :mod:`semlm.idea.claims`. This module is their registry: it builds paper B's from the registration
(:mod:`semlm.book.registration`), judges every claim (:func:`evaluate_claims`) and the decisive recordings'
per-seed values (:func:`decisive_rows`), and says where a claim's final verdict comes from.

Nothing here is typed by hand except the papers' own values and the rules.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Mapping, Sequence

from semlm.book.records import load_record
from semlm.book.recorded_runs import competent_recorded_runs
from semlm.book.registration import B_SEEDS, B_STICKINESS_CORRELATION, B_STICKINESS_SD
from semlm.core.records import ChapterRecord, Interval
from semlm.core.verdicts import (BY_CONSTRUCTION, INCONCLUSIVE, INCONCLUSIVE_HALF_WIDTH, NOT_TESTABLE, STATUSES, Claim,
                                 EffectRule, ladder, power_block, widened)
from semlm.fusion import claims as paper_a
from semlm.fusion.claims import (A_T1_RULE, A_T6_RULES, FEATURE_STEERING_EFFECT, MSE_RULE, OOD_RULE,
                                 SOFT_CONTROL_EFFECT, mse_status, ood_status)
from semlm.idea import claims as paper_b
from semlm.idea.claims import LORA_EFFECT, TOPIC_DRIFT_EFFECT, TOPIC_MAX_MIXED

#: B-stickiness's rule, frozen by the registration (its smallest effect of interest, pilot SDs and seeds).
STICKINESS_EFFECT = paper_b.stickiness_effect(B_SEEDS, B_STICKINESS_SD, B_STICKINESS_CORRELATION)
CLAIMS: tuple[Claim, ...] = paper_a.CLAIMS + paper_b.claims(STICKINESS_EFFECT, competent_recorded_runs)
#: The chapters the claims read, each loaded once as its typed record for the judges.
CHAPTERS = paper_a.CHAPTERS + paper_b.CHAPTERS


# --- where a claim's final verdict comes from ----------------------------------------------------

#: A claim's registered decisive recording (a ``book/recorded/`` folder), once it is recorded complete: its verdict
#: is the claim's final one, whatever this build says. The registration issue fills this; none is complete yet.
DECISIVE_RECORDINGS: dict[str, str] = {}
#: For a claim this build's profile cannot test ("not testable at this scale": paper B's generation claims at
#: ``cpu``), the competent recorded run whose verdict stands in, as its rule names it.
COMPETENT_RECORDINGS: dict[str, str] = {claim: "cpu-long-seeds" for claim in ("B-ppl", "B-stickiness", "B-distinct")}

#: The only claims that may be judged "holds by construction": a decoder (the class mask, the mixture sampler) or
#: the input itself (a head reconstructing its own input) guarantees them whatever the model. A claim about what a
#: model learnt can never hold by construction, so :func:`evaluate_claims` refuses the status for any other id.
BY_CONSTRUCTION_ALLOWED: frozenset[str] = frozenset({
    "A-T1-mse",                              # the auxiliary head reconstructs its own input
    "A-T2-adj", "A-T2-punct", "A-T3-diagonal",  # the grammar / class mask
    "A-T4-ood-pos", "A-T4-ood-neg",          # the mixture sampler's uniform part
    "A-T7-control",                          # the SST-2 decoder's restriction of the sentiment words
})


def _row(claim: Claim, published, causal, ci, seeds: int | None, status: str, reason: str, profile: str | None,
         rule: str, seed_ids: Sequence[int] | None = None, **more) -> dict:
    """A claims-table row of ``claim`` (``seed_ids``, where given, after ``seeds``; ``more`` after ``rule``)."""
    ids = {} if seed_ids is None else {"seed_ids": seed_ids}
    return {"id": claim.id, "paper": claim.paper, "kind": claim.kind, "claim": claim.claim,
            "paper_value": claim.paper_value, "published_value": published, "causal_value": causal, "ci": ci,
            "seeds": seeds, **ids, "status": status, "reason": reason, "profile": profile, "rule": rule, **more}


def evaluate_claims(metrics: Mapping[str, dict | ChapterRecord]) -> list[dict]:
    """The claims table as rows: ``{id, paper, kind, claim, paper_value, published_value, causal_value, ci, seeds,
    status, reason, profile, rule}`` (``seeds``: how many training seeds the decided interval rests on, None where
    unknown);
    an effect claim's row adds ``smallest_effect`` (``{value, source}``) and ``power``
    (:func:`semlm.core.verdicts.power_block`: planned and used seeds, planning and observed SDs, ``at_zero``, ``at_m``).

    Raises ``ValueError`` if a judge returns an unknown status, or "holds by construction" for a claim not on
    :data:`BY_CONSTRUCTION_ALLOWED`."""
    rows = []
    records = {chapter: load_record(chapter, data) for chapter, data in metrics.items() if chapter in CHAPTERS}
    for claim in CLAIMS:
        verdict = claim.judge(records)
        if verdict.status not in STATUSES:
            raise ValueError(f"claim {claim.id}: unknown status {verdict.status!r}; choose one of: "
                             f"{', '.join(STATUSES)}")
        if verdict.status == BY_CONSTRUCTION and claim.id not in BY_CONSTRUCTION_ALLOWED:
            raise ValueError(f"claim {claim.id} was judged {BY_CONSTRUCTION!r}, which only "
                             f"{', '.join(sorted(BY_CONSTRUCTION_ALLOWED))} may be (a decoder or the input guarantees "
                             f"them); a claim about the model must be judged on its numbers")
        rows.append(_row(claim, verdict.published_value, verdict.causal_value, list(verdict.ci) if verdict.ci else None,
                         verdict.seeds, verdict.status, verdict.reason, verdict.profile, verdict.rule))
        if claim.effect is not None:
            rows[-1]["smallest_effect"] = claim.effect.smallest_effect
            rows[-1]["power"] = power_block(claim.effect, verdict.observed, verdict.seed_ids)
    return rows


# --- decisive recordings: the CPU claims judged on their registered seeds' values (issue 45) -------------------

#: The rule of each claim a CPU decisive recording decides from per-seed values: an effect claim's
#: :class:`~semlm.core.verdicts.EffectRule`, or a threshold claim's status function of its interval over seeds.
DECISIVE_EFFECTS: dict[str, EffectRule] = {
    "A-T1-fusion-better": A_T1_RULE, "A-T6-exclaim": A_T6_RULES["!"], "A-T6-question": A_T6_RULES["?"],
    "A-feature-steering": FEATURE_STEERING_EFFECT, "A-soft-control": SOFT_CONTROL_EFFECT,
    "B-topic-drift": TOPIC_DRIFT_EFFECT, "B-lora-ppl": LORA_EFFECT}
DECISIVE_THRESHOLDS: dict[str, tuple[Callable[[Interval], tuple[str, str]], str, tuple[float, float] | None]] = {
    "A-T1-mse": (mse_status, MSE_RULE, None),
    "A-T4-ood-neg": (partial(ood_status, cls="neg"), OOD_RULE.format(w=INCONCLUSIVE_HALF_WIDTH), (0.0, 1.0))}


def decisive_rows(values: Mapping[str, Mapping[str, Sequence[float]]], seeds: Mapping[str, Sequence[int]],
                  profile: str, which: str = "registered",
                  not_comparable: Mapping[str, Sequence[int]] | None = None) -> list[dict]:
    """Claims-table rows (as :func:`evaluate_claims` writes them) of the claims in ``values`` (``{claim:
    {comparison: [value per seed]}}``, the seeds ``seeds[claim]``), each judged by its rule here: an effect claim by
    its :class:`~semlm.core.verdicts.EffectRule` on the 95% t-interval of each comparison over seeds, a threshold
    claim by the status function its chapter judge uses; ``which`` names the seeds in the reason ("registered", or
    "pilot"). As chapter 9 judges B-topic-drift: a comparison with ``"<comparison> interpolation error"`` values is
    widened by their mean, the guard reads the values named as it is, the claim is not testable where a
    ``"mixed share ..."`` mean exceeds :data:`TOPIC_MAX_MIXED`, and ``not_comparable[claim]`` (seeds whose models
    could not be compared) count against power. A ValueError names a claim with no decisive rule."""
    by_id = {c.id: c for c in CLAIMS}
    rows = []
    for claim_id, comparisons in values.items():
        claim, ids = by_id[claim_id], list(seeds[claim_id])
        if claim_id in DECISIVE_EFFECTS:
            rule = DECISIVE_EFFECTS[claim_id]
            skipped = list((not_comparable or {}).get(claim_id, ()))
            used = [s for s in ids if s not in skipped]
            if not comparisons:
                rows.append(_row(claim, None, None, None, 0, INCONCLUSIVE, f"none of the {len(ids)} {which} seeds is "
                                 f"comparable ({skipped})", profile, ladder(rule), seed_ids=ids))
                continue

            def error(name):
                found = comparisons.get(f"{name} interpolation error")
                return sum(found) / len(found) if found else 0.0

            observed = {name: widened(Interval.of_mean(list(comparisons[name])), error(name), error(name))
                        for name in rule.comparisons}
            level = Interval.of_mean(list(comparisons[rule.guard.name])) if rule.guard is not None else None
            mixed = {k.removeprefix("mixed share "): sum(v) / len(v) for k, v in comparisons.items()
                     if k.startswith("mixed share ")}
            if any(m > TOPIC_MAX_MIXED for m in mixed.values()):
                status, why = NOT_TESTABLE, (f"mixed shares {', '.join(f'{k} {v:.2f}' for k, v in mixed.items())}: "
                                             f"above {TOPIC_MAX_MIXED}, the models have not learnt the sentences")
            else:
                status, why = rule.decide(observed, level)
            decided = observed[rule.comparisons[0]]
            reason = (f"over {len(used)} {which} seeds: " + ", ".join(f"{n} {i:+.4f}" for n, i in observed.items())
                      + (f"; {rule.guard.name} {level:+.4f}" if level is not None else "") + f" ({why})"
                      + (f"; not comparable: {skipped}, counted against power" if skipped else ""))
            row_rule, extra = ladder(rule), {"smallest_effect": rule.smallest_effect,
                                             "power": power_block(rule, observed, used)}
        elif claim_id in DECISIVE_THRESHOLDS:
            judge, row_rule, bounds = DECISIVE_THRESHOLDS[claim_id]
            (name, per_seed), = comparisons.items()
            decided = Interval.of_mean(list(per_seed), bounds)
            status, why = judge(decided)
            reason, extra = f"over {len(ids)} {which} seeds, {name} {decided:.4f}: {why}", {}
        else:
            raise ValueError(f"claim {claim_id} has no decisive rule; those with one are "
                             f"{', '.join(sorted({**DECISIVE_EFFECTS, **DECISIVE_THRESHOLDS}))}")
        rows.append(_row(claim, None, decided.mean, [decided.low, decided.high], len(ids), status, reason, profile,
                         row_rule, seed_ids=ids, **extra))
    return rows
