"""The reproducibility report: claims judged from metrics records, parameters read from notebooks."""

import json

import pytest

from semlm.claims import CLAIMS, NOT_MEANINGFUL, NOT_REPRODUCED, NOT_RUN, REPRODUCED, STATUSES, evaluate_claims
from semlm.report import chapter_parameters, load_metrics


def summary(values):
    mean = sum(values) / len(values)
    return {"mean": mean, "ci_low": min(values), "ci_high": max(values), "values": values}


def audit_record(ood_pos=(0.6, 0.62, 0.64), hard=1.0):
    table1 = {s: {k: {m: summary([v, v + 0.1, v + 0.2]) for m in ("ppl", "ppl_seen_only")}
                  for k, v in (("baseline", 3.0), ("fusion", 2.8))} for s in ("causal", "published")}
    for s in table1:
        table1[s]["fusion"]["sem_mse"] = summary([0.009, 0.01, 0.011])
    acc = {"adj_acc": summary([hard] * 3), "punct_acc": summary([1.0] * 3)}
    return {"profile": "cpu", "table1": table1, "floors": {"ppl": 2.87, "ppl_seen_only": 2.5,
                                                            "focus_ce": {"!": 1.8, "?": 2.9}},
            "control": {s: {"hard": {"pos": acc, "neg": acc}} for s in ("causal", "published")},
            "confusion_diagonal": {"causal": summary([1.0] * 3), "published": summary([1.0] * 3)},
            "ood_hit": {s: {"pos": summary(list(ood_pos)), "neg": summary([0.4, 0.45, 0.5])} for s in ("causal", "published")},
            "focus_ce": {t: {"causal baseline": 5.0, "causal fusion": 4.0, "published fusion": 1.0} for t in ("!", "?")}}


def by_id(rows):
    return {row["id"]: row for row in rows}


def test_every_claim_gets_a_known_status_even_with_no_chapters():
    rows = evaluate_claims({})
    assert [r["id"] for r in rows] == [c.id for c in CLAIMS]
    assert {r["status"] for r in rows} == {NOT_RUN}
    assert all(r["reason"] for r in rows)


def test_non_causal_perplexities_are_flagged_not_meaningful_and_other_claims_judged():
    rows = by_id(evaluate_claims({"04_leakage_audit": audit_record()}))
    assert rows["A-T1-ppl-fusion"]["status"] == NOT_MEANINGFUL
    assert "no causal mask" in rows["A-T1-ppl-fusion"]["reason"]
    assert rows["A-T1-fusion-better"]["status"] == REPRODUCED
    assert rows["A-T2-adj"]["status"] == REPRODUCED
    assert rows["A-T4-ood-pos"]["status"] == REPRODUCED
    assert rows["A-T7-ppl-fusion"]["status"] == NOT_RUN
    assert all(r["status"] in STATUSES for r in rows.values())


def test_a_result_that_contradicts_the_paper_is_not_reproduced():
    rows = by_id(evaluate_claims({"04_leakage_audit": audit_record(ood_pos=(0.1, 0.12, 0.14), hard=0.9)}))
    assert rows["A-T4-ood-pos"]["status"] == NOT_REPRODUCED
    assert rows["A-T2-adj"]["status"] == NOT_REPRODUCED


def test_parameters_are_read_from_the_notebooks():
    params = chapter_parameters()
    assert params["04_leakage_audit"] == {"profile": "cpu", "seed": 111, "workers": 2, "n_seeds": 3}
    assert all(p.get("profile") == "cpu" for p in params.values())


def test_a_corrupt_metrics_file_names_the_file_and_the_fix(tmp_path):
    (tmp_path / "01_feature_bank.json").write_text(json.dumps({"profile": "cpu"}))
    (tmp_path / "02_fusion_training.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"02_fusion_training.json is not valid JSON .*re-run that chapter"):
        load_metrics(tmp_path)
