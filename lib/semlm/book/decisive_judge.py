"""The claims code applied to a CPU seed recording (issue 45): its seed files judged, claim by claim, by the rules of
:mod:`semlm.book.claims` (:func:`~semlm.book.claims.decisive_rows`). Shared by ``collect-decisive``
(:mod:`semlm.book.cpu_decisive`), which writes the result, and :func:`semlm.book.recorded.recorded_verdicts`, which
reads every recording live; apart from both so that neither imports the other.
"""

from __future__ import annotations

from semlm.book.cpu_seeds import FAMILIES, per_seed, variance_split


def judged(results: dict[str, list[dict]], pilot: bool) -> tuple[list[dict], dict, dict, str]:
    """The claims' rows (:func:`semlm.book.claims.decisive_rows`) of a recording's seed results (``{family: [results]}``,
    :func:`semlm.book.cpu_seeds.read_results`), the seeds per claim, the variance splits and the profile: what
    ``collect`` writes and what :func:`semlm.book.recorded.recorded_verdicts` reads of a recording, live."""
    from semlm.book.claims import DECISIVE_EFFECTS, decisive_rows

    values, seeds, skipped, split, profiles = {}, {}, {}, {}, set()
    for family, rows in results.items():
        profiles |= {r["profile"] for r in rows}
        for claim in FAMILIES[family].claims:
            values[claim] = per_seed(rows, claim)
            seeds[claim] = [r["seed"] for r in rows]
            skipped[claim] = [r["seed"] for r in rows if r["values"][claim] is None]  # not comparable
            rule = DECISIVE_EFFECTS.get(claim)
            names = None if rule is None else (*rule.comparisons, *((rule.guard.name,) if rule.guard else ()))
            if (parts := variance_split(rows, claim, names)) is not None:
                split[claim] = parts
    profile = ", ".join(sorted(profiles))
    return decisive_rows(values, seeds, profile, "pilot" if pilot else "registered", skipped), seeds, split, profile
