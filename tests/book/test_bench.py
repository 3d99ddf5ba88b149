"""semlm.book.bench, semlm.book.bench_cli and semlm.book.flops: the FLOP counter behind the idea-gate benchmark
(checked against the real model), the comparison with the authors' script (their side a tiny script; our side's
timing never asserted) and the command line's sections."""

import json
import os
import subprocess
import sys
import time

import pytest
import torch

from semlm.book import bench, bench_cli
from semlm.book.bench import verdict
from semlm.fusion.bench import best_seconds
from semlm.book.flops import (elementwise_flops_per_position, forward_flops_per_position, idea_flop_ratios,
                              model_flops_utilisation, training_flops_per_token)
from semlm.idea.model import IdeaGPTConfig, IdeaGPTForCausalLM


@pytest.mark.parametrize("idea", [False, True])
def test_matmul_flops_are_twice_the_linear_weights_of_the_model(idea):
    config = IdeaGPTConfig(vocab_size=97, n_positions=16, n_embd=24, n_layer=3, n_head=2, idea_head=idea)
    model = IdeaGPTForCausalLM(config)
    weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    parts = forward_flops_per_position(3, 24, 97, context=5, idea_head=idea)
    assert parts["total"] - parts["attention scores"] == 2 * weights
    assert parts["attention scores"] == 3 * 4 * 5 * 24
    assert (parts["idea head"] > 0) == idea


def test_training_counts_three_forward_passes_over_the_mean_causal_context():
    forward = forward_flops_per_position(2, 32, 50, context=(8 + 1) / 2, idea_head=True)["total"]
    assert training_flops_per_token(2, 32, 50, 8, True) == 3 * forward


def test_flop_ratio_is_above_one_and_grows_with_the_vocabulary():
    small, large = (idea_flop_ratios(6, 384, v, 256, 8, 32) for v in (2048, 50257))
    for r in (small, large):
        assert 1 < r["training"]["ratio"] < 2 and 1 < r["generation"]["ratio"] < 2
    assert large["training"]["ratio"] > small["training"]["ratio"]
    assert large["generation"]["context"] == 8 + 16


def test_mfu_uses_the_dense_bf16_peak_of_known_gpus_only():
    assert model_flops_utilisation(1e6, 989e6, "NVIDIA H100 80GB HBM3") == pytest.approx(1.0)
    assert model_flops_utilisation(1e6, 989e6 / 2, "NVIDIA H200") == pytest.approx(0.5)
    assert model_flops_utilisation(1e6, 1e6, "cpu") is None and model_flops_utilisation(1e6, 1e6, None) is None


def test_verdict_compares_time_ratio_with_target_times_flop_ratio():
    assert verdict(1.5, 1.5, 1.05).startswith("meets")
    assert verdict(1.6, 1.5, 1.05).startswith("MISSES")


def test_flop_count_adds_the_gate_and_losses_elementwise_work_over_the_vocabulary():
    plain, gated = (elementwise_flops_per_position(100, idea) for idea in (False, True))
    assert plain["total"] == plain["token loss"] == 5 * 100                 # softmax CE, forward + backward
    assert gated["idea gate"] == 11 * 100 and gated["idea loss"] == 10 * 100
    assert elementwise_flops_per_position(100, False, "generation")["total"] == 0
    assert elementwise_flops_per_position(100, True, "generation")["idea gate"] == 7 * 100
    ratios = idea_flop_ratios(2, 128, 2048, 64, 8, 32)["training"]
    assert ratios["ratio"] > ratios["matmul_ratio"]                         # the gate's work is counted
    matmul = training_flops_per_token(2, 128, 2048, 64, True)
    assert ratios["gated_flops_per_token"] == matmul + gated["total"] / 100 * 2048
    with pytest.raises(ValueError, match="unknown kind 'decode'"):
        elementwise_flops_per_position(100, True, "decode")


def test_idea_benchmark_records_wall_and_cpu_time_ratios_next_to_the_flop_ratio():
    from semlm.book.bench import run_idea_benchmark

    record = run_idea_benchmark("smoke", steps=1, repeats=2, threads=1, new_tokens=4, generation_batch=2)
    flops = idea_flop_ratios(record["n_layer"], record["n_embd"], record["vocab_size"], record["block_size"],
                             record["prompt_tokens"], record["new_tokens"])
    assert record["step_flop_ratio"] == flops["training"]["ratio"] > flops["training"]["matmul_ratio"]
    assert len(record["gated"]["step_seconds_all"]) == 2
    # the ratios are medians of the repeats' interleaved gated / plain ratios (wall and process CPU time)
    for key, seconds in (("step_time_ratio", "step_seconds_all"), ("step_cpu_time_ratio", "step_cpu_seconds_all")):
        ratios = [g / p for g, p in zip(record["gated"][seconds], record["plain"][seconds])]
        assert record[f"{key}_all"] == ratios and len(ratios) == 2
        assert record[key] == pytest.approx(sum(ratios) / 2)
    assert record["step_cpu_time_over_flops"] == pytest.approx(record["step_cpu_time_ratio"] / record["step_flop_ratio"])


# --- the authors' script against ours (python -m semlm.bench --authors-script) -------------------


@pytest.fixture
def fast_ours(monkeypatch):
    """Our side as a 0.1 s process: the real one trains the synthetic experiment (tens of seconds)."""
    sleep = [sys.executable, "-c", "import time; time.sleep(0.1)"]
    monkeypatch.setattr(bench_cli, "_ours_command", lambda *args: sleep)


def _script(tmp_path, body="import time\ntime.sleep(0.1)\nprint('done')\n"):
    path = tmp_path / "SemanticFusion.py"
    path.write_text(body)
    return path


def _bench(argv):
    return bench_cli.main(["--profile", "smoke", "--runs", "2", *argv])


def test_authors_comparison_writes_both_sides_medians_and_numeric_ratios(tmp_path, fast_ours):
    out = tmp_path / "bench.json"
    out.write_text(json.dumps({"wall_seconds": 1.0}))           # an earlier entry survives the merge
    assert _bench(["--authors-script", str(_script(tmp_path)), "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    record = written["authors_comparison"]
    assert written["wall_seconds"] == 1.0 and record["runs"] == 2
    for side in ("authors_script", "ours"):
        for measure in ("wall_seconds", "cpu_seconds", "peak_mb"):
            assert isinstance(record[side][measure], float) and len(record[side][f"{measure}_runs"]) == 2
    for measure in ("wall_seconds", "cpu_seconds", "peak_mb"):
        assert isinstance(record["ratios"][measure]["median"], float)
        assert len(record["ratios"][measure]["per_pair"]) == 2
    assert record["authors_script"]["stdout_tail"] == ["done"]
    assert record["ours"]["workload"]["training_sentences_x_epochs"] > 0
    assert record["cpu_model"] and record["authors_script"]["parameters"] == "unknown"


def test_authors_script_checked_before_training(tmp_path, monkeypatch, capsys):
    """A missing file, a file that is neither .py nor .ipynb, a fake notebook and a script that does not parse: each
    one error line and exit 2 before our side trains, and the earlier comparison in bench.json stays."""
    trained = []
    monkeypatch.setattr(bench_cli, "_ours_command", lambda *args: trained.append(args) or [sys.executable, "-V"])
    out = tmp_path / "bench.json"
    out.write_text(json.dumps({"authors_comparison": {"ratios": "earlier"}}))
    fake = tmp_path / "SemanticFusion.ipynb"
    fake.write_text("not json")
    broken = _script(tmp_path, "def broken(:\n")
    readme = tmp_path / "README.md"
    readme.write_text("# x")
    for script, expected in ((tmp_path / "nowhere.py", "not found"), (readme, "neither a .py nor an .ipynb"),
                             (fake, "not a readable notebook"), (broken, "not Python that parses")):
        assert _bench(["--authors-script", str(script), "--out", str(out)]) == 2, script
        error = capsys.readouterr().err.strip()
        assert len(error.splitlines()) == 1 and expected in error, (script, error)
    assert trained == [] and json.loads(out.read_text()) == {"authors_comparison": {"ratios": "earlier"}}


def test_a_failing_script_names_the_run_and_replaces_nothing(tmp_path, fast_ours, capsys):
    script = _script(tmp_path, "raise SystemExit('no data here')\n")
    out = tmp_path / "b.json"
    out.write_text(json.dumps({"authors_comparison": {"ratios": "earlier"}}))
    assert _bench(["--authors-script", str(script), "--out", str(out)]) != 0
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "failed on run 1" in error and "no data here" in error
    assert "nothing was written" in error and json.loads(out.read_text())["authors_comparison"]["ratios"] == "earlier"


def test_a_notebook_runs_its_code_cells_without_magics(tmp_path, fast_ours, capsys):
    cells = [{"cell_type": "markdown", "source": ["# title"]},
             {"cell_type": "code", "source": ["%matplotlib inline\n", "!pip install x\n", "x = 2\n"]},
             {"cell_type": "code", "source": "print(x * 21)"}]
    notebook = tmp_path / "SemanticFusion.ipynb"
    notebook.write_text(json.dumps({"cells": cells}))
    out = tmp_path / "b.json"
    assert _bench(["--authors-script", str(notebook), "--out", str(out)]) == 0
    their_side = json.loads(out.read_text())["authors_comparison"]["authors_script"]
    assert their_side["stdout_tail"] == ["42"] and "2 magic/shell line(s) skipped" in their_side["kind"]
    notebook.write_text(json.dumps({"cells": cells[:1]}))
    capsys.readouterr()
    assert _bench(["--authors-script", str(notebook), "--out", str(out)]) != 0
    assert "has no code cells" in capsys.readouterr().err


def test_fewer_than_two_runs_is_refused_and_our_default_side_trains_the_synthetic_experiment(capsys):
    assert bench_cli.main(["--profile", "smoke", "--authors-script", "x.py", "--runs", "1"]) == 2
    assert "at least 2" in capsys.readouterr().err
    assert bench_cli._ours_command("smoke", 111, None)[1:] == ["-m", "semlm.fusion", "--profile", "smoke",
                                                           "--seed", "111"]


def test_our_side_is_a_process_that_imports_only_the_experiment():
    """Its peak memory is the experiment's: no pandas, pyarrow or plotting loaded beside torch and transformers."""
    loaded = subprocess.run([sys.executable, "-c", "import sys, semlm.fusion.__main__; print(*sys.modules)"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert "torch" in loaded and "semlm.fusion.synthetic_experiment" in loaded
    heavy = {"pandas", "pyarrow", "matplotlib", "seaborn", "datasets"}
    assert not [m for m in loaded if m.split(".")[0] in heavy or m.startswith("semlm.book")]


def test_a_recorded_comparison_is_written_with_provenance_and_shown_when_the_build_has_none(
        tmp_path, fast_ours, monkeypatch, capsys):
    from semlm.book import recorded_runs

    monkeypatch.setattr(recorded_runs, "RECORDED_DIR", tmp_path / "recorded")
    assert bench_cli.main(["--profile", "smoke", "--runs", "2", "--authors-script", str(_script(tmp_path)),
                           "--record"]) == 2
    assert "--profile cpu" in capsys.readouterr().err  # a smoke comparison never replaces the recorded one
    assert bench_cli.main(["--record"]) == 2 and "--authors-script" in capsys.readouterr().err
    monkeypatch.setattr(bench_cli, "compare_with_authors_script", lambda *args: {
        "runs": 2, "profile": "cpu", "cpu_model": "test CPU", "cpu_count": 2, "date": "2026-01-01",
        "git_commit": "c" * 40, "ours": {"wall_seconds": 1.0, "cpu_seconds": 2.0, "peak_mb": 500.0,
                                         "workload": {"training_sentences": 8, "epochs": 1, "parameters": {"a": 1}}},
        "authors_script": {"wall_seconds": 4.0, "cpu_seconds": 8.0, "peak_mb": 400.0},
        "ratios": {"wall_seconds": {"median": 0.25}, "cpu_seconds": {"median": 0.25}, "peak_mb": {"median": 1.25}}})
    out = tmp_path / "bench.json"
    assert bench_cli.main(["--profile", "cpu", "--authors-script", str(_script(tmp_path)), "--out", str(out),
                           "--record"]) == 0
    folder = tmp_path / "recorded" / "authors-comparison"
    run = {r.slug: r for r in recorded_runs.load_recorded(tmp_path / "recorded")}["authors-comparison"]
    assert run.on_cpu and run.authors_comparison["authors_comparison"]["ratios"]["peak_mb"]["median"] == 1.25
    assert "--record" in run.provenance["command"] and "packages" in run.provenance
    assert sorted(p.name for p in folder.iterdir()) == ["authors_comparison.json", "provenance.json"]
    frame, note = bench.authors_comparison_frame({}, root=tmp_path / "recorded")
    assert note.startswith("From book/recorded/authors-comparison/ (ours with 2 training processes)")
    assert not frame.empty
    assert "Peak memory: ours / theirs 1.25, target <= 1.30, met" in note  # two workers' targets
    assert "Wall time: ours / theirs 0.25, target <= 0.33, met" in note
    frame, note = bench.authors_comparison_frame({}, root=tmp_path / "nowhere")
    assert frame.empty and "No comparison" in note


def test_a_one_worker_comparison_is_recorded_apart_and_judged_by_its_own_targets(tmp_path, monkeypatch):
    from semlm.book import bench_cli, recorded_runs

    monkeypatch.setattr(recorded_runs, "RECORDED_DIR", tmp_path / "recorded")
    monkeypatch.setattr(bench_cli, "compare_with_authors_script", lambda *args: {
        "runs": 2, "profile": "cpu", "cpu_model": "test CPU", "cpu_count": 2, "date": "2026-01-01",
        "git_commit": "c" * 40, "ours": {"wall_seconds": 2.4, "cpu_seconds": 2.0, "peak_mb": 396.0, "workload": {
            "training_sentences": 8, "epochs": 1, "parameters": {"a": 1}, "workers": args[-1]}},
        "authors_script": {"wall_seconds": 4.0, "cpu_seconds": 8.0, "peak_mb": 400.0},
        "ratios": {"wall_seconds": {"median": 0.6}, "cpu_seconds": {"median": 0.25}, "peak_mb": {"median": 0.99}}})
    assert bench_cli.main(["--profile", "cpu", "--authors-script", str(_script(tmp_path)), "--workers", "1",
                           "--out", str(tmp_path / "bench.json"), "--record"]) == 0
    run = {r.slug: r for r in recorded_runs.load_recorded(tmp_path / "recorded")}["authors-comparison-one-worker"]
    assert "--workers 1" in run.provenance["command"]
    assert not (tmp_path / "recorded" / "authors-comparison").exists()  # the two-worker record is not replaced
    (frame, note), = bench.authors_comparison_frames({}, root=tmp_path / "recorded")
    assert "(ours with 1 training process)" in note
    assert "Peak memory: ours / theirs 0.99, target <= 1.00, met" in note
    assert "Wall time: ours / theirs 0.60, target <= 0.50, NOT met" in note


def test_the_chapter_shows_a_written_comparison_and_otherwise_says_how_to_make_one(tmp_path, fast_ours):
    frame, note = bench.authors_comparison_frame({}, root=tmp_path)
    assert frame.empty and "--authors-script" in note and "make bench AUTHORS=" in note
    out = tmp_path / "elsewhere.json"
    assert _bench(["--authors-script", str(_script(tmp_path)), "--out", str(out)]) == 0
    assert bench.previous_authors_comparison(out) == json.loads(out.read_text())["authors_comparison"]
    frame, note = bench.authors_comparison_frame({}, out)
    assert list(frame.columns) == ["ours (smoke)", "authors' script", "ours / theirs (median of pairs)"]
    assert "2 runs of each side" in note and "unknown" in note
    assert bench.previous_authors_comparison(tmp_path / "none.json") is None


def test_book_times_report_core_use_and_whether_models_came_from_an_earlier_build(tmp_path):
    from semlm.book.bench import book_build_times

    def times(**manifest):
        (tmp_path / "manifest.json").write_text(json.dumps({"chapters": chapters, **manifest}))
        return book_build_times(tmp_path)

    run = {"experiment": "e", "group": "g", "name": "a", "seed": 1, "train_seconds": 1.0}
    chapters = {"01_a": {"profile": "cpu", "status": "ok", "seconds": 100.0, "cpu_seconds": 150.0, "cores": 2,
                         "utilisation": 0.75, "runs": {"trained": 1, "resumed": 0, "loaded": 0},
                         "run_list": [{**run, "status": "trained"}]},
                "02_b": {"profile": "cpu", "status": "ok", "seconds": 100.0, "cpu_seconds": 190.0, "cores": 2,
                         "utilisation": 0.95, "runs": {"trained": 0, "resumed": 0, "loaded": 1},
                         "run_list": [{**run, "status": "loaded"}]}}
    first = times()
    assert first["utilisation"] == 0.85 and first["from_scratch"] and first["total_minutes"] == round(200 / 60, 2)
    chapters["02_b"]["run_list"][0]["name"] = "trained-by-an-earlier-build"
    assert not times()["from_scratch"]
    # a model shared between chapters is named by its owner's run: loading it in a later chapter is not "earlier"
    chapters["02_b"]["run_list"][0]["model"] = ["e", "g", "a", 1]
    assert times()["from_scratch"]
    # a model the runner trained beside the chapters, which a chapter then loaded, was trained in this build
    chapters["02_b"]["run_list"][0]["model"] = ["e", "g", "ahead", 1]
    assert not times()["from_scratch"]
    ahead = {"status": "ok", "seconds": 50.0, "runs": {"trained": 1, "resumed": 0, "loaded": 0},
             "run_list": [{**run, "name": "ahead", "status": "trained"}]}
    assert times(train_ahead=ahead)["from_scratch"] and times(train_ahead=ahead)["trained_ahead"] == 1


def test_cpu_breakdown_splits_training_by_paper_and_counts_each_model_once():
    run = {"group": "g", "seed": 1, "status": "trained", "cpu_seconds": 10.0}
    a = {**run, "experiment": "semlm.fusion.synthetic_experiment:SYNTHETIC", "name": "fusion"}
    b = {**run, "experiment": "semlm.idea.wikitext_experiment:IDEA", "name": "gated", "cpu_seconds": 30.0}
    manifest = {"train_ahead": {"run_list": [a, b]},
                "chapters": {"02": {"cpu_seconds": 100.0, "run_list": [{**a, "status": "loaded"}]},
                             "06": {"cpu_seconds": 50.0, "run_list": [b]}},  # b's record seen twice, counted once
                "complete": True, "cpu_seconds": 170.0}
    parts = {row["part"]: row["cpu_seconds"] for row in bench.cpu_breakdown(manifest)}
    assert parts == {"training, paper A": 10.0, "training, paper B": 30.0,
                     "chapters: evaluation, generation, notebooks": 110.0, "HTML and the runner": 20.0}
    # a newer manifest: each kernel's start-up CPU time and jupyter-book's own time are parts of their own
    newer = {**manifest, "html_cpu_seconds": 15.0,
             "chapters": {"02": {**manifest["chapters"]["02"], "startup_cpu_seconds": 8.0},
                          "06": {**manifest["chapters"]["06"], "startup_cpu_seconds": 9.0}}}
    parts = {row["part"]: row["cpu_seconds"] for row in bench.cpu_breakdown(newer)}
    assert parts == {"training, paper A": 10.0, "training, paper B": 30.0, "kernels: start and imports": 17.0,
                     "chapters: evaluation, generation, notebooks": 93.0, "HTML (jupyter-book)": 15.0,
                     "the runner": 5.0}
    assert sum(parts.values()) == newer["cpu_seconds"]
    del b["cpu_seconds"]  # an older manifest: no per-model CPU time, the chapters are one part
    assert [row["part"] for row in bench.cpu_breakdown(manifest)] == ["chapters (training included)",
                                                                      "HTML and the runner"]


def test_a_chapter_logs_its_kernels_start_up_cpu_time_for_the_manifest(tmp_path, monkeypatch):
    from semlm.book.chapter import open_chapter
    from semlm.book.runner import run_entry

    log = tmp_path / "01.runs.jsonl"
    monkeypatch.setenv("SEMLM_RUN_LOG", str(log))
    open_chapter("01_feature_bank", profile="smoke", seed=111)
    entry = run_entry("ok", 1.0, log)
    assert 0 < entry["startup_cpu_seconds"] and entry["run_list"] == [] and "notices" not in entry


# --- python -m semlm.bench: one function per --only section -------------------------------------


def test_each_only_section_runs_its_function_from_the_dispatch_table(monkeypatch, capsys):
    choices = next(a.choices for a in bench_cli._parser()._actions if a.dest == "only")
    assert list(choices) == list(bench_cli.SECTIONS) and "all" in choices
    seen = []
    for name in bench_cli.SECTIONS:
        monkeypatch.setitem(bench_cli.SECTIONS, name, lambda args, name=name: seen.append((name, args.seed)) or 3)
        assert bench_cli.main(["--only", name, "--seed", "7"]) == 3
    assert seen == [(name, 7) for name in bench_cli.SECTIONS]
    monkeypatch.setitem(bench_cli.SECTIONS, "book", lambda args: None)  # a section that only prints exits 0
    assert bench_cli.main(["--only", "book"]) == 0
    monkeypatch.setitem(bench_cli.SECTIONS, "book", lambda args: (_ for _ in ()).throw(ValueError("no manifest")))
    assert bench_cli.main(["--only", "book"]) == 2
    assert capsys.readouterr().err.strip() == "error: no manifest"


def test_best_seconds_leaves_the_warm_up_call_out():
    calls = []

    def run():
        calls.append(None)
        time.sleep(0.3 if len(calls) == 1 else 0.0)

    assert best_seconds(run, 3) < 0.1 and len(calls) == 4


def test_the_flop_formulas_import_without_torch():
    import subprocess

    code = "import sys, semlm.book.flops; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_measure_process_counts_pages_a_forked_child_shares_once():
    # 200 MB written by the parent, then shared unchanged with a forked child: summed RSS counts them
    # twice, the summed PSS (the tree's peak_mb) once
    code = ("import os, time\nb = bytearray(200 * 2 ** 20)\nb[::4096] = b'x' * len(b[::4096])\n"
            "pid = os.fork()\ntime.sleep(1.5)\nif pid:\n    os.waitpid(pid, 0)\n")
    run = bench.measure_process([sys.executable, "-c", code], dict(os.environ), ".")
    assert run["returncode"] == 0
    assert run["peak_rss_sum_mb"] - run["peak_mb"] > 150 and run["peak_mb"] > 190


def test_seed_stacking_measures_each_small_model_kind_alone_and_stacked(tmp_path, monkeypatch):
    """At smoke, the synthetic kind (no data needed) is measured both ways, with a ratio and a decision by the rule;
    the command writes it under seed_stacking, keeping the bench JSON's other entries."""
    import json

    result = bench.seed_stacking("smoke", seeds=2, steps=1)
    synthetic = result["kinds"]["paper A synthetic"]
    assert synthetic["alone_ms_per_model_step"] > 0 and synthetic["seeds"] == 2
    if synthetic["ratio"] is not None:
        assert synthetic["adopted"] == (synthetic["ratio"] <= bench.STACKING_ADOPT_RATIO)
        assert synthetic["stacked_ms_per_model_step"] > 0
    else:
        assert synthetic["why"].startswith("not stackable")
    assert set(result["kinds"]) == {label for label, _, _ in bench.STACKING_KINDS}
    frame, note = bench.seed_stacking_frame({"seed_stacking": result})
    assert "paper A synthetic" in frame.index and "adopted for: " in note
    out = tmp_path / "bench.json"
    out.write_text(json.dumps({"kept": 1}))
    monkeypatch.setattr(bench, "seed_stacking", lambda profile: result)
    assert bench_cli.main(["--only", "stacking", "--profile", "smoke", "--out", str(out)]) in (0, None)
    assert json.loads(out.read_text()) == {"kept": 1, "seed_stacking": json.loads(json.dumps(result))}
