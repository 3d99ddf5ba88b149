from semlm.experiment import ModelRun, epoch_curves, runs_table


def run(kind, setting, ppls, status="trained"):
    return ModelRun(kind, setting, 111, {}, [{"val_ppl": p} for p in ppls], {}, 12.34, status, "unused")


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
