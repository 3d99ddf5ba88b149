"""One final verdict per claim, from a fixed order of sources (issue 43): a registered decisive recording, else this
build's verdict, else, for a claim the profile cannot test, the competent recorded run its rule names; the recorded
column lists each recorded result once; the counts and the multiplicity sentence read the final column."""

import json

import pytest

from semlm.book import report
from semlm.book.claims import INCONCLUSIVE, NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED


def row(claim, status, recorded=()):
    return {"id": claim, "paper": claim[0], "claim": "c", "status": status, "ci": None, "reason": "r", "rule": "x",
            "paper_value": 1.0, "published_value": None, "causal_value": 0.5, "profile": "cpu",
            "recorded": [{"folder": folder, "folders": [folder], "commit": "abc1234", "commits": ["abc1234"],
                          "status": s, "value_mean": 0.1} for folder, s in recorded]}


def finals(rows, decisive=None, competent=None):
    return {r["id"]: r["final"] for r in report.final_verdicts(rows, decisive or {}, competent or {})}


def test_a_decisive_recording_is_final_even_where_this_build_decides():
    got = finals([row("A-x", REPRODUCED, [("decisive-a", NOT_REPRODUCED), ("other", REPRODUCED)])],
                 decisive={"A-x": "decisive-a"})
    assert got["A-x"] == {"status": NOT_REPRODUCED, "source": "decisive-a", "build_status": REPRODUCED,
                          "flag": True}


def test_this_build_decides_unless_it_cannot_test_the_claim():
    rows = [row("B-x", INCONCLUSIVE, [("cpu-long-seeds", REPRODUCED)]),
            row("B-y", NOT_TESTABLE, [("cpu-long-seeds", REPRODUCED)]),
            row("B-z", NOT_TESTABLE, [("elsewhere", REPRODUCED)])]
    got = finals(rows, competent={c: "cpu-long-seeds" for c in ("B-x", "B-y", "B-z")})
    # a recorded verdict never replaces one this build could give, whatever it says
    assert got["B-x"]["status"] == INCONCLUSIVE and got["B-x"]["source"] == report.THIS_BUILD
    assert got["B-y"] == {"status": REPRODUCED, "source": "cpu-long-seeds", "build_status": NOT_TESTABLE,
                          "flag": False}
    # the rule's run holds no verdict: the claim stays with this build's status, not with another folder
    assert got["B-z"]["status"] == NOT_TESTABLE and got["B-z"]["source"] == report.THIS_BUILD


def test_a_decisive_recording_without_the_claim_is_a_clear_error():
    with pytest.raises(ValueError, match="A-x: its decisive recording book/recorded/missing holds no verdict"):
        report.final_verdicts([row("A-x", REPRODUCED)], {"A-x": "missing"}, {})


def test_counts_and_the_multiplicity_sentence_read_the_final_column():
    rows = report.final_verdicts([row("A-1", REPRODUCED), row("B-1", NOT_TESTABLE, [("long", NOT_REPRODUCED)]),
                                  row("B-2", INCONCLUSIVE)], {}, {"B-1": "long"})
    table = report.verdict_summary(rows)
    assert table.loc[NOT_REPRODUCED, "paper B"] == 1 and NOT_TESTABLE not in table.index
    sentence = report.multiplicity_sentence(rows)
    assert "decides 2 of 3 claims" in sentence and "about 0.10 of them" in sentence
    html = report.claims_table(rows)._repr_html_()
    assert "this build: not testable at this scale" in html and "(disagree)" not in html
    flagged = report.final_verdicts([row("A-1", REPRODUCED, [("d", NOT_REPRODUCED)])], {"A-1": "d"}, {})
    assert "(disagree)" in report.claims_table(flagged)._repr_html_()


def _recorded_build(root, name, fusion_shift):
    """A recorded book folder whose chapter 4 decides A-T1-fusion-better on ``fusion_shift`` per seed."""
    from tests.book.test_claims import audit_record

    folder = root / name
    (folder / "metrics").mkdir(parents=True)
    (folder / "provenance.json").write_text(json.dumps({"kind": "cpu-book", "git_commit": name * 8,
                                                        "date": "2026-11-28"}))
    (folder / "metrics" / "04_leakage_audit.json").write_text(json.dumps(audit_record(fusion_shift=fusion_shift)))


def test_recorded_folders_with_the_same_result_are_one_entry_naming_each(tmp_path):
    from semlm.book.recorded import recorded_verdicts

    _recorded_build(tmp_path, "a", (-0.2, -0.3, -0.25))
    _recorded_build(tmp_path, "b", (-0.2, -0.3, -0.25))
    _recorded_build(tmp_path, "c", (-0.1, -0.3, -0.25))
    (same, other) = recorded_verdicts(tmp_path)["A-T1-fusion-better"]
    assert same["folders"] == ["a", "b"] and len(same["commits"]) == 2 and other["folders"] == ["c"]
    html = report.claims_table(report.attach_recorded([row("A-T1-fusion-better", REPRODUCED)],
                                                      recorded_verdicts(tmp_path)))._repr_html_()
    assert "a (aaaaaaa), b (bbbbbbb)" in html
