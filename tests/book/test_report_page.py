"""The report page's tables: verdict summary first, a claims table that fits, a generated legend."""

import pytest

from semlm.book import report
from semlm.book.claims import evaluate_claims
from semlm.core.verdicts import STATUSES, STATUS_MEANINGS


def claim(id, paper, status, causal=None, ci=None, published=None):
    return {"id": id, "paper": paper, "claim": f"claim {id}", "paper_value": 1.5, "published_value": published,
            "causal_value": causal, "ci": ci, "status": status, "reason": f"reason of {id}",
            "profile": "smoke", "rule": f"rule of {id}"}


CLAIMS = [claim("A-1", "A", "not meaningful as published", causal=2.0, published=1.2),
          claim("A-2", "A", "reproduced", causal=0.41234, ci=[0.4, 0.42]),
          claim("B-1", "B", "inconclusive")]


def test_every_status_has_a_meaning_and_a_colour():
    assert set(STATUS_MEANINGS) == set(STATUSES) == set(report.STATUS_COLOURS)


def test_the_legend_lists_every_status_with_its_meaning():
    html = report.status_legend()._repr_html_()
    for status in STATUSES:
        assert f">{status}</span>" in html and STATUS_MEANINGS[status].split(";")[0].replace("'", "&#x27;") in html


def test_the_verdict_summary_counts_statuses_per_paper():
    table = report.verdict_summary(CLAIMS)
    assert list(table.index) == ["reproduced", "not meaningful as published", "inconclusive"]
    assert table.loc["reproduced"].tolist() == [1, 0, 1]
    assert table.loc["inconclusive"].tolist() == [0, 1, 1]
    assert table["all claims"].sum() == len(CLAIMS)


def test_the_claims_table_puts_verdicts_first_and_reason_and_rule_in_a_details_row():
    html = report.claims_table(CLAIMS)._repr_html_()
    assert html.index("A-2") < html.index("A-1") < html.index("B-1")
    assert "<th>status</th>" in html and "<th>why</th>" not in html and "<th>rule</th>" not in html
    detail = html.split('<tr class="semlm-claim-detail">')[1]
    assert "<details>" in detail and "reason of A-2" in detail and "rule of A-2" in detail
    assert "0.4123 [0.4, 0.42]" in html and "published setting: 1.2" in html


def test_the_claims_table_renders_every_real_claim_without_a_build():
    rows = evaluate_claims({})
    html = report.claims_table(rows)._repr_html_()
    assert html.count('<tr class="semlm-claim">') == len(rows)
    assert report.verdict_summary(rows)["all claims"].sum() == len(rows)


def test_recorded_verdicts_are_labelled_under_the_reason_and_never_replace_the_builds():
    recorded = {"A-2": [{"folder": "cpu-book-x", "commit": "abcdef123456", "machine": "AMD EPYC, 2 cores",
                         "date": "2026-11-25", "profile": "cpu", "status": "inconclusive", "value_mean": 0.3,
                         "ci_low": -0.1, "ci_high": 0.7}]}
    rows = report.attach_recorded(CLAIMS, recorded)
    assert [r["status"] for r in rows] == [r["status"] for r in CLAIMS]  # the build's own, untouched
    assert rows[1]["recorded"][0]["folder"] == "cpu-book-x" and rows[0]["recorded"] == []
    html = report.claims_table(rows)._repr_html_()
    # five columns, whatever the rows carry: the recorded runs sit in the claim's details row, labelled
    assert html.count("<th>") == 5 and 'colspan="5"' in html
    detail = html.split('<tr class="semlm-claim-detail">')[1]  # A-2's (verdicts first)
    assert "<b>recorded runs (not this build):</b>" in detail and "why: reproduced; 1 recorded run" in detail
    assert "<b>inconclusive</b> 0.3 [-0.1, 0.7]" in detail and "cpu-book-x (abcdef1)" in detail
    assert "recorded runs" not in report.claims_table(CLAIMS)._repr_html_()  # none without them


# --- on a real smoke build -------------------------------------------------------------------------

#: The chapters whose paper-A claims are decided on intervals; each takes well under a minute at smoke.
SMOKE_CHAPTERS = ("04_leakage_audit", "05_sst2", "10_intent_control")


@pytest.fixture(scope="module")
def smoke_metrics(tmp_path_factory):
    """The metrics files of a real smoke build of :data:`SMOKE_CHAPTERS` (those whose data are present),
    executed by the book runner as ``make book`` executes them (about two minutes on 2 cores)."""
    import os

    from semlm.book import runner as book
    from semlm.data.fetch import missing_for_chapters

    build_dir = tmp_path_factory.mktemp("smoke-claims")
    saved = dict(os.environ)
    try:
        for chapter in (c for c in SMOKE_CHAPTERS if c not in missing_for_chapters([c])):
            book.run("smoke", only=chapter, build_dir=build_dir, html=False)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return report.load_metrics(build_dir / "metrics")


@pytest.mark.slow
def test_shown_interval_contains_value(smoke_metrics):
    rows = evaluate_claims(smoke_metrics)
    html = report.claims_table(rows)._repr_html_()
    with_interval = [row for row in rows if row["ci"] is not None]
    judged = {row["id"] for row in with_interval}
    assert {"A-soft-control", "A-intensity", "A-feature-steering", "A-T1-fusion-better",
            "A-T6-exclaim"} <= judged  # not vacuous
    for row in with_interval:
        value, (low, high) = row["causal_value"], row["ci"]
        # a claim decided on an interval reports that quantity as a number, inside its interval ...
        assert isinstance(value, (int, float)), (row["id"], value)
        assert low <= value <= high, (row["id"], value, row["ci"])
        # ... and the page shows exactly those three numbers
        shown = report.shown_value(row)
        assert shown == f"{value:.4g} [{low:.4g}, {high:.4g}]" and shown in html, (row["id"], shown)


@pytest.mark.slow
def test_a_real_smoke_build_calls_holds_by_construction_only_on_the_allowlist(smoke_metrics):
    from semlm.book.claims import BY_CONSTRUCTION_ALLOWED
    from semlm.core.verdicts import BY_CONSTRUCTION

    rows = evaluate_claims(smoke_metrics)  # raises if a judge broke the allowlist
    by_construction = {row["id"] for row in rows if row["status"] == BY_CONSTRUCTION}
    assert by_construction and by_construction <= BY_CONSTRUCTION_ALLOWED
