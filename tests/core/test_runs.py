"""The run machinery (semlm.core.runs): cache key, train-or-load, records, worker pool, run log."""

import json
import os
from dataclasses import replace

import pytest
import torch

from semlm.core import runs
from semlm.fusion.synthetic_experiment import SYNTHETIC, spec_for, synthetic_runs
from semlm.fusion.profiles import synthetic_profile


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


def test_the_cache_key_changes_with_config_seed_and_threads(profile):
    # code changes: tests/core/test_closure.py
    spec = spec_for(profile, "fusion")
    key = runs.run_key(SYNTHETIC, spec, "cpu", 1)
    assert runs.run_key(SYNTHETIC, spec_for(profile, "baseline"), "cpu", 1) != key
    assert runs.run_key(SYNTHETIC, spec_for(synthetic_profile("smoke", seed=6), "fusion"), "cpu", 1) != key
    assert runs.run_key(SYNTHETIC, spec, "cpu", 2) != key  # thread count changes float sums
    assert runs.run_key(SYNTHETIC, spec, "cpu", 1) == key


def test_a_finished_run_whose_evaluation_code_changed_is_re_evaluated_not_retrained(profile, tmp_path, monkeypatch):
    spec = spec_for(profile, "baseline")
    first = runs.run_one(SYNTHETIC, spec, tmp_path)
    weights = (runs.run_folder(SYNTHETIC, spec, tmp_path, "cpu", 1) / "train" / "final" / "model.safetensors")
    before = weights.read_bytes()
    monkeypatch.setattr(runs, "evaluation_key", lambda experiment: "edited")
    again = runs.run_one(SYNTHETIC, spec, tmp_path)
    assert again.status == "loaded" and again.evaluation_key == "edited"
    assert again.metrics == first.metrics and again.history == first.history
    assert weights.read_bytes() == before
    saved = json.loads((weights.parents[2] / "record.json").read_text())
    assert saved["status"] == "trained" and saved["evaluation_key"] == "edited"


def test_worker_processes_give_the_same_records_as_one_process(profile, tmp_path):
    specs = synthetic_runs(profile, ("baseline", "fusion"), ("causal",))
    serial = runs.run_many(SYNTHETIC, specs, runs.RunContext("smoke", tmp_path / "serial", 1, False))
    parallel = runs.run_many(SYNTHETIC, specs, runs.RunContext("smoke", tmp_path / "parallel", 2, False))
    for a, b in zip(serial, parallel):
        assert (a.name, a.status) == (b.name, b.status) == (a.name, "trained")
        timing = ("seconds", "train_seconds", "cpu_seconds", "train_cpu_seconds")  # the machine's, not the run's
        assert a.history == [{**row, **{k: r[k] for k in timing}} for row, r in zip(b.history, a.history)]
        assert a.metrics == b.metrics
    assert parallel[1].load().__class__.__name__ == "FusionLM"


def test_forked_workers_use_the_data_the_parent_prepared(profile, tmp_path, monkeypatch):
    calls, real = tmp_path / "prepared-by", SYNTHETIC.prepare

    def prepare(spec):  # who prepares the data: one pid per call
        with calls.open("a") as out:
            out.write(f"{os.getpid()}\n")
        return real(spec)

    monkeypatch.setattr(SYNTHETIC, "prepare", prepare)
    monkeypatch.setattr(SYNTHETIC, "_data_cache", {}, raising=False)
    specs = synthetic_runs(profile, ("baseline", "fusion"), ("causal",))
    records = runs.run_many(SYNTHETIC, specs, runs.RunContext("smoke", tmp_path / "runs", 2, False))
    assert [r.status for r in records] == ["trained", "trained"]
    assert calls.read_text().split() == [str(os.getpid())]  # once, here; the two workers inherit it


def test_duplicate_runs_are_refused(profile, tmp_path):
    spec = spec_for(profile, "fusion")
    with pytest.raises(ValueError, match="duplicates"):
        runs.run_many(SYNTHETIC, [spec, spec], runs.RunContext("smoke", tmp_path))


def test_two_processes_asking_for_one_run_train_it_once(profile, tmp_path, monkeypatch):
    # a chapter and the book's training ahead may ask for the same model at once: the run's lock makes
    # the second wait and load what the first trained (without it both would train it)
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv("SEMLM_RUN_LOG", str(log))
    spec = spec_for(profile, "fusion")
    first, second = runs.run_jobs([(SYNTHETIC, spec), (SYNTHETIC, spec)], tmp_path, workers=2, progress=False)
    assert sorted([first.status, second.status]) == ["loaded", "trained"]
    assert first.metrics == second.metrics and first.history == second.history
    assert sorted(json.loads(line)["status"] for line in log.read_text().splitlines()) == ["loaded", "trained"]


def test_a_failed_job_is_returned_and_the_others_go_on(profile, tmp_path):
    done = []
    bad = runs.RunSpec("broken", 0, config=None)
    outcomes = runs.run_jobs([(SYNTHETIC, bad), (SYNTHETIC, spec_for(profile, "baseline"))], tmp_path, workers=1,
                             progress=False, on_done=lambda experiment, spec, outcome: done.append(spec.name))
    assert isinstance(outcomes[0], Exception) and outcomes[1].status == "trained"
    assert sorted(done) == ["baseline", "broken"]


def test_an_evaluation_is_computed_once_per_run_and_setting_and_kept_with_the_run(tmp_path):
    """cached_evaluation: the second ask reads the file; another setting or another run computes anew; an unreadable
    file is computed again; nothing half-written is left (the scores of chapter 6's protocols go through it)."""
    from types import SimpleNamespace

    from semlm.core.metrics import distinct_n
    from semlm.core.records import Interval
    from semlm.core.runs import EVALUATIONS_DIR, cached_evaluation
    from semlm.idea.generation import DomainScores, _decode_scores, _encode_scores

    record = SimpleNamespace(key="k1", run_dir=str(tmp_path / "run"))
    calls = []

    def compute(value):
        calls.append(value)
        return {"music": DomainScores({"stickiness": Interval.of_mean([value, 0.25, 0.5])},
                                      [{"text": "a b", "ids": [1, 2]}])}

    def ask(setting, on=record):
        return cached_evaluation(on, distinct_n, setting, lambda: compute(setting), _encode_scores, _decode_scores)

    first = ask(0.1)
    again = ask(0.1)
    assert calls == [0.1] and again == first  # read back equal, intervals and samples included
    ask(0.2)
    ask(0.1, SimpleNamespace(key="k2", run_dir=record.run_dir))
    assert calls == [0.1, 0.2, 0.1]
    files = sorted((tmp_path / "run" / EVALUATIONS_DIR).iterdir())
    assert len(files) == 3 and all(f.name.startswith("distinct_n-") and f.suffix == ".json" for f in files)
    for f in files:
        f.write_text("{not json")
    assert ask(0.1) == first and calls[-1] == 0.1 and len(calls) == 4
    assert not list((tmp_path / "run" / EVALUATIONS_DIR).glob("*.tmp"))
