"""Paper A's claims table, faithful to the paper (issue 44): the book's extensions counted apart from the paper's
claims, SST-2 rows that say what was measured, and a summary in plain words generated from the final verdicts."""

from semlm.book import report
from semlm.book.claims import CLAIMS, evaluate_claims
from semlm.core.verdicts import BY_CONSTRUCTION, NOT_COMPARABLE, REPRODUCED
from semlm.fusion.claims import SST2_UNPUBLISHED
from semlm.book.recorded_runs import load_recorded

EXTENSIONS = {"A-soft-control", "A-intensity"}


def pilot_rows() -> dict[str, dict]:
    run = {run.slug: run for run in load_recorded()}["cpu-book-e3e2d4f"]
    return {row["id"]: row for row in evaluate_claims(run.book_metrics)}


def test_extensions_are_not_counted_as_the_papers_claims():
    rows = evaluate_claims({})
    assert {row["id"] for row in rows if row["kind"] == "extension"} == EXTENSIONS
    assert {row["kind"] for row in rows} == {"paper", "extension"}
    # every extension reproduced, every claim of the paper something else: the paper's column counts no success
    claims = [{**row, "status": REPRODUCED if row["kind"] == "extension" else BY_CONSTRUCTION} for row in rows]
    counts = report.verdict_counts(claims)
    assert REPRODUCED not in counts["paper A"] and counts[report.count_column("A", "extension")] == {REPRODUCED: 2}
    summary = report.plain_summary(claims)["A"]
    assert "0 hold" not in summary and "The book adds 2 claims of its own" in summary
    assert summary.split("The book adds")[0].count("holds") == 0


def test_sst2_reasons_state_what_was_measured():
    rows = pilot_rows()
    ppl = rows["A-T7-ppl-fusion"]
    assert ppl["status"] == NOT_COMPARABLE
    for number in ("316.42", "265.19", "197.83", "165.54", "3.885", "1.111"):  # causal, reads ahead, the paper's
        assert number in ppl["reason"], number
    for claim in ("A-T7-ppl-baseline", "A-T7-ppl-fusion", "A-T7-mse", "A-T7-control"):
        assert "causal mask" not in rows[claim]["reason"], claim
    assert rows["A-T7-mse"]["status"] == NOT_COMPARABLE and SST2_UNPUBLISHED in rows["A-T7-mse"]["reason"]
    assert rows["A-T7-control"]["status"] == BY_CONSTRUCTION
    assert "the decoder, not the fused features, controls" in rows["A-T7-control"]["reason"]


def test_intensity_reason_says_the_authors_decoder_cannot_move_intensity():
    assert "the authors' decoder cannot move intensity" in pilot_rows()["A-intensity"]["reason"]


def test_the_plain_summary_names_every_claim_of_each_paper_once():
    rows = evaluate_claims({})
    summary = report.plain_summary(rows)
    assert set(summary) == {"A", "B"}
    for claim in CLAIMS:
        assert summary[claim.paper].count(claim.id + ",") + summary[claim.paper].count(claim.id + ")") \
            + summary[claim.paper].count(claim.id + " ") == 1, claim.id
    assert "could not be tested here" in summary["A"]


def test_the_claims_table_marks_the_books_extensions():
    html = report.claims_table(evaluate_claims({}))._repr_html_()
    assert html.count("the book's extension") == len(EXTENSIONS)


def _pilot_audit() -> dict:
    import copy

    run = {run.slug: run for run in load_recorded()}["cpu-book-e3e2d4f"]
    return copy.deepcopy(run.book_metrics["04_leakage_audit"])


def test_table6_reason_says_which_context_the_papers_number_is_of_the_size_of():
    audit = _pilot_audit()
    assert "split by the adjective" not in {r["id"]: r for r in evaluate_claims({"04_leakage_audit": audit})}[
        "A-T6-exclaim"]["reason"]  # a record written before the split says nothing of it
    split = {"after_trained": {"values": [0.0025, 0.0019, 0.0013], "counts": [40, 44, 44]},
             "after_held_out": {"values": [6.11, 7.51, 5.76], "counts": [60, 58, 60]}}
    audit["focus_ce_by_context"] = {"!": {"published fusion": split}}
    reason = {r["id"]: r for r in evaluate_claims({"04_leakage_audit": audit})}["A-T6-exclaim"]["reason"]
    assert "of the size of the held-out part" in reason and "58% of the cases" in reason
    alike = {"after_trained": {"values": [5.0, 5.2, 5.1], "counts": [40, 44, 44]},
             "after_held_out": {"values": [5.5, 5.4, 5.6], "counts": [60, 58, 60]}}
    audit["focus_ce_by_context"] = {"!": {"published fusion": alike}}
    reason = {r["id"]: r for r in evaluate_claims({"04_leakage_audit": audit})}["A-T6-exclaim"]["reason"]
    assert "the two parts are of one size here" in reason


def test_feature_steering_reason_names_the_mirror_requests_and_the_design():
    audit = _pilot_audit()
    audit["feature_steering"]["differing_predicates"] = ["pos_high", "neg_high"]
    row = {r["id"]: r for r in evaluate_claims({"04_leakage_audit": audit})}["A-feature-steering"]
    assert "differ in pos_high, neg_high only" in row["reason"] and "apply_control but never calls it" in row["reason"]
    assert "mirror images" in row["rule"] and "polarity columns swapped" in row["rule"]
