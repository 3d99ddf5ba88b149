"""The run machinery (semlm.runs): cache key, train-or-load, records, worker pool, run log."""

import json
from dataclasses import replace

import pytest
import torch

from semlm import runs
from semlm.experiment import SYNTHETIC, run_grid, spec_for
from semlm.profiles import synthetic_profile


@pytest.fixture(scope="module")
def profile():
    smoke = synthetic_profile("smoke", seed=5)
    return replace(smoke, train=replace(smoke.train, epochs=2))


def test_a_finished_run_is_loaded_with_the_same_weights_and_metrics(profile, tmp_path, monkeypatch):
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv("SEMLM_RUN_LOG", str(log))
    spec = spec_for(profile, "fusion")
    first = runs.run_one(SYNTHETIC, spec, tmp_path)
    second = runs.run_one(SYNTHETIC, spec, tmp_path)
    assert (first.status, second.status) == ("trained", "loaded")
    assert second.metrics == first.metrics and second.history == first.history
    assert first.steps == SYNTHETIC.total_steps(spec)
    a, b = first.load(), second.load()
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(pa, pb), name
    record = json.loads((runs.run_folder(SYNTHETIC, spec, tmp_path, "cpu", 1) / "record.json").read_text())
    assert record["status"] == "trained" and record["threads"] == 1 and record["device"] == "cpu"
    assert [json.loads(line)["status"] for line in log.read_text().splitlines()] == ["trained", "loaded"]


def test_the_cache_key_changes_with_config_seed_and_training_code_but_not_presentation(profile, tmp_path, monkeypatch):
    spec = spec_for(profile, "fusion")
    key = runs.run_key(SYNTHETIC, spec, "cpu", 1)
    assert runs.run_key(SYNTHETIC, spec_for(profile, "baseline"), "cpu", 1) != key
    assert runs.run_key(SYNTHETIC, spec_for(synthetic_profile("smoke", seed=6), "fusion"), "cpu", 1) != key
    assert runs.run_key(SYNTHETIC, spec, "cpu", 2) != key  # thread count changes float sums
    original = runs.Path.read_bytes
    monkeypatch.setattr(runs.Path, "read_bytes", lambda self: original(self) + (b"#" if self.name == "plots.py" else b""))
    assert runs.run_key(SYNTHETIC, spec, "cpu", 1) == key
    monkeypatch.setattr(runs.Path, "read_bytes", lambda self: original(self) + (b"#" if self.name == "losses.py" else b""))
    assert runs.run_key(SYNTHETIC, spec, "cpu", 1) != key


def test_worker_processes_give_the_same_records_as_one_process(profile, tmp_path):
    jobs = [(profile, "baseline", "causal"), (profile, "fusion", "causal")]
    serial = run_grid(jobs, tmp_path / "serial", workers=1, progress=False)
    parallel = run_grid(jobs, tmp_path / "parallel", workers=2, progress=False)
    for a, b in zip(serial, parallel):
        assert (a.name, a.status) == (b.name, b.status) == (a.name, "trained")
        assert a.history == [{**row, "seconds": r["seconds"], "train_seconds": r["train_seconds"]}
                             for row, r in zip(b.history, a.history)]
        assert a.metrics == b.metrics
    assert parallel[1].load().__class__.__name__ == "FusionLM"


def test_duplicate_runs_are_refused(profile, tmp_path):
    spec = spec_for(profile, "fusion")
    with pytest.raises(ValueError, match="duplicates"):
        runs.run_many(SYNTHETIC, [spec, spec], tmp_path)
