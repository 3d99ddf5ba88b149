from semlm.fusion.training_report import epoch_curves, paper_comparison_frame, runs_table
from semlm.core.runs import RunRecord


def run(kind, setting, ppls, status="trained", metrics=None):
    return RunRecord("semlm.fusion.synthetic_experiment:SYNTHETIC", kind, 111, setting, {}, "key", "unused", status, 12.34,
                     len(ppls), [{"val_ppl": p} for p in ppls], metrics or {}, "cpu", 1, 0.0)


def test_runs_table_has_one_row_per_run_with_status_and_rounded_time():
    runs = {"causal": {"baseline": run("baseline", "causal", [3.0]), "fusion": run("fusion", "causal", [2.0])},
            "published": {"fusion": run("fusion", "published", [1.5], status="loaded")}}
    table = runs_table(runs)
    assert list(table.columns) == ["setting", "model", "status", "train seconds"]
    assert table.values.tolist() == [["causal", "baseline", "trained", 12.3], ["causal", "fusion", "trained", 12.3],
                                     ["published", "fusion", "loaded", 12.3]]


def test_epoch_curves_keys_setting_and_kind():
    runs = {"causal": {"fusion": run("fusion", "causal", [3.0, 2.5, 2.4])}}
    assert epoch_curves(runs) == {("causal", "fusion"): [3.0, 2.5, 2.4]}


def test_paper_comparison_frame_puts_the_paper_beside_each_setting():
    records = {"causal": {"fusion": run("fusion", "causal", [2.0], metrics={"ppl": 3.5})}}
    frame = paper_comparison_frame({"fusion": {"ppl": 1.2}}, records, "ppl", "paper (published)")
    assert frame.values.tolist() == [["paper (published)", "fusion", 1.2], ["this build: causal", "fusion", 3.5]]
