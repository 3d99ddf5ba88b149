"""semlm.core.records (the one interval type, Record) and the chapter records built on it (torch-free)."""

import json
import math
import subprocess
import sys

import pytest

from semlm.core.records import Interval, t_quantile_975
from semlm.fusion.records import LeakageAuditRecord
from semlm.idea.records import TopicDriftRecord
from semlm.book.records import RECORDS, load_record


def test_records_modules_import_without_torch():
    """core's machinery, each paper's records and the book's chapter map: the report needs no torch."""
    code = ("import sys, semlm.core.records, semlm.fusion.records, semlm.idea.records, semlm.book.records; "
            "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_of_mean_is_the_hand_computed_t_interval_and_clips_to_bounds():
    got = Interval.of_mean([1.0, 2.0, 3.0])  # mean 2, sd 1, t(0.975, 2) = 4.302653
    half = 4.302653 / math.sqrt(3)
    assert (got.mean, got.n) == (2.0, 3)
    assert got.low == pytest.approx(2 - half) and got.high == pytest.approx(2 + half)
    assert got.half_width == pytest.approx(half)
    clipped = Interval.of_mean([0.0, 1.0, 1.0], bounds=(0.0, 1.0))
    assert clipped.low == 0.0 and clipped.high == 1.0
    one = Interval.of_mean([5.0])
    assert (one.low, one.high) == (5.0, 5.0)
    assert t_quantile_975(100) == pytest.approx(1.984, abs=1e-3)
    with pytest.raises(ValueError, match="at least one value"):
        Interval.of_mean([])


#: t_{0.975, df} from published tables (e.g. NIST/SEMATECH e-Handbook, table 1.3.6.7.2, to 3-4 decimals); 1,000 from
#: the series t = z + (z^3 + z) / (4 df) + ..., which is exact to 1e-6 there.
KNOWN_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 5: 2.571, 10: 2.228, 20: 2.086, 29: 2.045, 30: 2.042, 31: 2.040,
              40: 2.021, 60: 2.000, 120: 1.980, 1000: 1.962}


def test_t_quantiles_are_exact():
    for df, known in KNOWN_T975.items():
        assert t_quantile_975(df) == pytest.approx(known, rel=1e-3), df
    # beyond 30 degrees of freedom it is no longer the normal quantile (3.9% too narrow at 31 before)
    assert t_quantile_975(31) > 1.96 * 1.03
    assert t_quantile_975(2.5) == pytest.approx(3.6, abs=0.05)  # Welch's fractional df lies between 2 and 3
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_quantile_975(0)


def test_of_proportion_is_wilson_and_exact_at_the_ends():
    all_hits = Interval.of_proportion(200, 200)
    assert all_hits.high == 1.0 and 0.98 < all_hits.low < 0.99
    half = Interval.of_proportion(10, 20)
    assert half.mean == 0.5 and half.low == pytest.approx(0.2993, abs=1e-3) and half.high == pytest.approx(0.7007, abs=1e-3)
    assert math.isnan(Interval.of_proportion(0, 0).mean)
    with pytest.raises(ValueError, match="successes <= n"):
        Interval.of_proportion(3, 2)


def test_paired_differences_need_the_same_seeds():
    diff = Interval.paired([3.0, 3.1, 3.2], [2.8, 2.9, 3.1])
    assert diff.mean == pytest.approx((0.2 + 0.2 + 0.1) / 3)
    assert diff.above(0) and not diff.below(0) and not diff.above(diff.mean) and not diff.below(diff.mean)
    with pytest.raises(ValueError, match="same seeds"):
        Interval.paired([1.0, 2.0], [1.0])


def test_an_interval_formats_one_way():
    interval = Interval(0.1234, 0.1, 0.15)
    assert format(interval) == str(interval) == "0.123 [0.100, 0.150]"
    assert f"{interval:.2f}" == "0.12 [0.10, 0.15]"
    assert f"{Interval(-0.02, -0.05, 0.01):+.3f}" == "-0.020 [-0.050, +0.010]"
    assert Interval(float("nan"), 0.0, 1.0).format() == "undefined"
    with pytest.raises(ValueError, match="'.Nf'"):
        f"{interval:d}"


def test_to_dict_keeps_the_shapes_of_the_metrics_files():
    mean = {"mean": 2.0, "ci_low": 1.0, "ci_high": 3.0, "values": [1.0, 2.0, 3.0]}
    rate = {"value": 0.5, "ci_low": 0.3, "ci_high": 0.7, "k": 10, "n": 20}
    summary = {"mean": 0.4, "ci_low": 0.3, "ci_high": 0.5, "n": 12}
    rate_as_mean = {"mean": 0.15, "ci_low": 0.09, "ci_high": 0.24, "k": 12, "n": 80}
    for shape in (mean, rate, summary, rate_as_mean):
        assert Interval.from_dict(shape).to_dict() == shape
    assert Interval.of_proportion(10, 20).to_dict()["k"] == 10
    assert math.isnan(Interval.from_dict({"mean": None, "ci_low": None, "ci_high": None}).mean)  # JSON null = NaN
    with pytest.raises(ValueError, match="'mean'"):
        Interval.from_dict({"low": 1})


def test_a_record_round_trips_through_json_and_keeps_extra_fields():
    data = {"profile": "cpu", "seed": 111, "wall_seconds": 5.0,
            "table1": {"causal": {"fusion": {"ppl": {"mean": 3.0, "ci_low": 2.9, "ci_high": 3.1, "values": [2.9, 3.1]},
                                             "history": [1, 2]}}},
            "floors": {"ppl": 2.87, "focus_ce": {"!": 1.8}}}
    record = load_record("04_leakage_audit", data)
    assert isinstance(record, LeakageAuditRecord)
    assert record.table1["causal"].fusion.ppl.high == 3.1
    assert record.table1["causal"].baseline is None and record.control is None  # not written: None
    assert record.floors.focus_ce["!"] == 1.8
    assert record.extra["wall_seconds"] == 5.0
    assert json.loads(json.dumps(record.to_dict())) == data


def test_a_record_built_from_summaries_types_them_and_rejects_a_wrong_shape():
    record = TopicDriftRecord(plain={"drift_rate": {"mean": 0.1, "ci_low": 0.05, "ci_high": 0.15}})
    assert isinstance(record.plain.drift_rate, Interval)
    with pytest.raises(ValueError, match="TopicModelSummary.drift_rate must be an interval"):
        TopicDriftRecord(plain={"drift_rate": 0.1})
    with pytest.raises(ValueError, match="pass plain as field"):
        TopicDriftRecord(extra={"plain": {}})
    with pytest.raises(ValueError, match="no record type for chapter '42_x'"):
        load_record("42_x", {})
    with pytest.raises(ValueError, match="needs a LeakageAuditRecord"):
        load_record("04_leakage_audit", record)


def test_every_record_knows_its_chapter():
    assert all(cls.chapter == name for name, cls in RECORDS.items())
    assert {"04_leakage_audit", "05_sst2", "06_idea_gating", "08_lora_4bit_idea_gating", "09_topic_drift"} <= set(RECORDS)


def test_write_chapter_metrics_writes_a_record_with_its_provenance_and_reads_it_back(tmp_path):
    from semlm.book.report import load_metrics, write_chapter_metrics

    record = TopicDriftRecord(plain={"drift_rate": {"mean": 0.1, "ci_low": 0.05, "ci_high": 0.15, "values": [0.05, 0.15]}},
                              extra={"seeds": [1, 2]})
    write_chapter_metrics("09_topic_drift", "smoke", 7, record, 1.0, directory=tmp_path)
    written = load_metrics(tmp_path)["09_topic_drift"]
    assert written["profile"] == "smoke" and written["seeds"] == [1, 2] and "git_commit" in written
    back = load_record("09_topic_drift", written)
    assert back.plain == record.plain and back.profile == "smoke"
    with pytest.raises(ValueError, match="chapter 04_leakage_audit writes a LeakageAuditRecord, got a TopicDriftRecord"):
        write_chapter_metrics("04_leakage_audit", "smoke", 7, record, 1.0, directory=tmp_path)


def test_welch_difference_of_independent_samples():
    diff = Interval.welch([1.0, 2.0, 3.0, float("nan")], [0.0, 1.0])
    assert diff.mean == pytest.approx(1.5) and diff.n == (3, 2)
    assert diff.low < 1.5 < diff.high and not diff.above(0)  # two tiny samples: wide
    assert Interval.from_dict(diff.to_dict()) == diff
    assert diff.to_dict()["n"] == [3, 2]
    one_side = Interval.welch([1.0], [0.0, 1.0])
    assert one_side.mean == pytest.approx(0.5) and not one_side.finite and one_side.format() == "undefined"
    same = Interval.welch([1.0, 1.0], [0.5, 0.5])
    assert (same.low, same.high) == (0.5, 0.5)
