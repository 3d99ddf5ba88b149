"""The effect claims' power at a glance, for the report: :func:`power_frame` of the claims table's power blocks
(:func:`semlm.core.verdicts.power_block`, where the effect ladder and its power live) beside the registration that
fixed each claim's decisive seeds (:func:`registrations`)."""

from __future__ import annotations

from typing import Mapping, Sequence


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
    from semlm.book.report import registered_claims

    out = {}
    for reg, claims, registration_commit in registered_claims():
        out.update(dict.fromkeys(claims, f"{reg.name} {(registration_commit() or 'uncommitted')[:7]}"))
    return out
