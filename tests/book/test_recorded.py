"""Recorded runs and builds (semlm.book.recorded): collecting, loading, the labelled tables, verdicts and diffs."""

import json
from pathlib import Path

import pytest

from semlm.book.claims import CLAIMS
from semlm.core.verdicts import NOT_REPRODUCED, NOT_RUN, REPRODUCED
from semlm.book.flops import training_flops_per_token
from semlm.book.recorded import (LABEL, README_END, README_START, RecordedCpuNumbers, collect, collect_book,
                                 collect_long, diff_builds, diff_lines, gpu_slug, main, readme_verdicts_section,
                                 recorded_bench_frame,
                                 recorded_book_builds_frame, recorded_cpu_numbers, recorded_frame,
                                 recorded_gpu_throughput_frame, recorded_over_seeds, recorded_trace_frame,
                                 recorded_verdicts, update_readme, write_precision_comparison)
from semlm.book.recorded_runs import (BOOK_SOURCE_LABEL, CPU_SOURCE_LABEL, SOURCE_LABEL, competent_recorded_runs,
                                      load_recorded)
from semlm.data.paths import REPO_ROOT

FIXTURES = Path(__file__).parents[1] / "fixtures" / "recorded"


def test_fixture_runs_load_with_their_chapter_metrics():
    runs = {r.slug: r for r in load_recorded(FIXTURES)}
    assert set(runs) == {"fixture-gpu", "cpu-dry-run"}
    run = runs["fixture-gpu"]
    assert run.machine.startswith("FIXTURE") and run.commit.startswith("0123456789ab")
    assert set(run.chapters) == {"06_idea_gating"} and run.bench is None


def test_chapter_frame_is_labelled_recorded_and_leaves_dry_runs_out():
    frame, message = recorded_frame("06_idea_gating", FIXTURES)
    assert len(frame) == 1 and set(frame["source"]) == {SOURCE_LABEL} and frame.attrs["label"] == LABEL
    row = frame.iloc[0]
    assert (row["machine"], row["profile"], row["steps"], row["tokens/s"], row["MFU"]) == (
        "FIXTURE GPU (not a real run)", "paper", 200, 100000.0, 0.05)
    assert (row["val PPL plain"], row["val PPL gated"], row["val PPL gated, gate off"]) == (300.0, 310.0, 305.0)
    assert row["stickiness plain"] == pytest.approx(0.2) and row["stickiness gated"] == pytest.approx(0.3)
    assert "not by this build" in message


def test_a_chapter_that_failed_on_the_gpu_shows_its_status_without_numbers():
    frame, _ = recorded_frame("08_lora_4bit_idea_gating", FIXTURES)
    assert list(frame["status"]) == ["timeout"] and "val PPL gated" not in frame


def test_nothing_recorded_gives_an_empty_frame_and_one_line(tmp_path):
    frame, message = recorded_frame("07_xray_and_sweeps", tmp_path)
    assert frame.empty and "\n" not in message and "no recorded GPU run of 07_xray_and_sweeps" in message


def test_malformed_provenance_fails_with_one_line_naming_the_file(tmp_path):
    (tmp_path / "h100").mkdir()
    (tmp_path / "h100" / "provenance.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"h100/provenance.json is not valid JSON"):
        load_recorded(tmp_path)


@pytest.mark.parametrize("name, slug", [("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
                                        ("NVIDIA A100-SXM4-40GB", "a100"), (None, "cpu"), ("Some New GPU", "some-new-gpu")])
def test_gpu_slug(name, slug):
    assert gpu_slug(name) == slug


def test_collect_writes_provenance_metrics_and_throughput_from_a_work_folder(tmp_path):
    work = tmp_path / "work"
    (work / "metrics").mkdir(parents=True)
    (work / "environment.json").write_text(json.dumps({
        "torch": "2.11.0", "transformers": "5.17.0", "cuda_available": True, "gpu_name": "NVIDIA H100 80GB HBM3",
        "torch_cuda": "13.0", "nvidia_smi": "580.1, NVIDIA H100 80GB HBM3, 81559 MiB"}))
    (work / "steps.tsv").write_text("step\tstatus\trc\tseconds\tnote\npytest-cuda\tok\t0\t30\t7 passed\n"
                                    "06_idea_gating\tok\t0\t120\tprofile paper\n")
    (work / "chapters.tsv").write_text("chapter\tstatus\trc\tseconds\tprofile\tparameters\n"
                                       "06_idea_gating\tok\t0\t120\tpaper\t-p profile paper -p max_steps 200\n"
                                       "07_xray_and_sweeps\ttimeout\t124\t170\tpaper\t-p profile paper\n")
    metrics = json.loads((FIXTURES / "fixture-gpu" / "06_idea_gating.json").read_text())
    (work / "metrics" / "06_idea_gating.json").write_text(json.dumps(metrics))
    dest = collect(work, tmp_path / "recorded", "abc123", "paper", "200", False, 0.0, "7 passed in 30s", "24 passed")
    assert dest.name == "h100" and sorted(p.name for p in dest.iterdir()) == ["06_idea_gating.json", "provenance.json"]
    provenance = json.loads((dest / "provenance.json").read_text())
    assert provenance["driver"] == "580.1" and provenance["git_commit"] == "abc123" and provenance["max_steps"] == 200
    assert provenance["packages"]["transformers"] == "5.17.0" and provenance["pytest_summary"] == "7 passed in 30s"
    chapter = provenance["chapters"]["06_idea_gating"]
    assert chapter["status"] == "ok" and chapter["tokens_per_second"] == 100000.0
    # MFU = tokens/s x training FLOPs per token of the paper GPT (gated) / 989 TFLOP/s
    expected = 100000.0 * training_flops_per_token(6, 384, 50257, 256, True) / 989e12
    assert chapter["mfu"] == pytest.approx(expected)
    assert provenance["chapters"]["07_xray_and_sweeps"] == {
        "status": "timeout", "rc": 124, "wall_seconds": 170, "profile": "paper",
        "papermill_parameters": "-p profile paper", "metrics_file": None}
    frame, _ = recorded_frame("06_idea_gating", tmp_path / "recorded")
    assert frame.iloc[0]["machine"] == "NVIDIA H100 80GB HBM3"


def test_bench_frame_of_a_collected_run_shows_both_workloads_and_no_dry_runs(tmp_path):
    work = tmp_path / "work"
    (work / "metrics").mkdir(parents=True)
    (work / "environment.json").write_text(json.dumps({"gpu_name": "NVIDIA H200"}))
    (work / "metrics" / "bench_idea.json").write_text(json.dumps({
        "profile": "paper", "step_flop_ratio": 1.6, "step_time_ratio": 1.8, "step_time_over_flops": 1.125,
        "generation_flop_ratio": 1.6, "generation_time_ratio": 1.2, "generation_time_over_flops": 0.75,
        "targets": {"step_time_over_flops": 1.05, "generation_time_over_flops": 1.1},
        "meets_targets": {"step": False, "generation": True}, "gated": {"model_flops_utilisation": 0.2}}))
    collect(work, tmp_path / "rec", "abc", "paper", "200", False, 0.0)
    collect(work, tmp_path / "rec", "abc", "smoke", "6", True, 0.0)  # a dry run next to it
    frame, message = recorded_bench_frame(tmp_path / "rec")
    assert list(frame["workload"]) == ["training step", "generation, per new token"]
    assert list(frame["meets"]) == [False, True] and frame.iloc[0]["MFU gated (training)"] == 0.2
    assert set(frame["machine"]) == {"NVIDIA H200"} and set(frame["source"]) == {SOURCE_LABEL}
    assert recorded_bench_frame(tmp_path / "nothing")[0].empty


def _long_metrics(tmp_path, profile="cpu-long", commit="c" * 40):
    metrics = {"chapter": "06_idea_gating", "profile": profile, "git_commit": commit, "cpu_model": "Test CPU",
               "cpu_count": 2, "machine": "x86_64", "training": {"tokens_per_iteration": 4096},
               "baseline": {"val_ppl": 40.0, "history": [{"step": 400}, {"step": 4000}]},
               "gated": {"val_ppl": 41.0, "history": [{"step": 4000}]},
               "competence": {"bigram_val_ppl": 59.0, "passes": True}}
    path = tmp_path / "clone" / "06_idea_gating.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(metrics))
    calls = tmp_path / "clone" / "calls.tsv"
    calls.write_text("100\t1100\t1\n2000\t5000\t0\n")  # an interrupted call, then the one that finished
    return path, calls


def test_a_long_cpu_run_is_collected_with_its_provenance_and_shown_as_a_cpu_run(tmp_path):
    metrics, calls = _long_metrics(tmp_path)
    dest = collect_long(metrics, calls, tmp_path / "recorded", "long", "c" * 40, "papermill ...")
    assert dest.name == "cpu-long"
    provenance = json.loads((dest / "provenance.json").read_text())
    assert provenance["wall_seconds"] == 4000 and provenance["calls"] == 2
    assert provenance["tokens_seen"] == {"baseline": 4096 * 4000, "gated": 4096 * 4000}
    assert provenance["git_commit"] == "c" * 40 and provenance["command"] == "papermill ..."
    frame, message = recorded_frame("06_idea_gating", tmp_path / "recorded")
    row = frame.iloc[0]
    assert row["source"] == CPU_SOURCE_LABEL and row["machine"] == "Test CPU, 2 cores"
    assert bool(row["competent"]) and row["bigram PPL"] == 59.0
    assert "1 recorded CPU run" in message
    _, bench_message = recorded_bench_frame(tmp_path / "recorded")
    assert "no recorded GPU benchmark" in bench_message


def test_collecting_a_long_run_refuses_another_profile_or_commit_and_writes_nothing(tmp_path):
    metrics, calls = _long_metrics(tmp_path, profile="cpu")
    with pytest.raises(ValueError, match="not 'cpu-long'"):
        collect_long(metrics, calls, tmp_path / "recorded", "long", "c" * 40, "")
    metrics, calls = _long_metrics(tmp_path / "b", commit="d" * 40)
    with pytest.raises(ValueError, match="written at commit"):
        collect_long(metrics, calls, tmp_path / "recorded", "long", "c" * 40, "")
    assert not (tmp_path / "recorded").exists()


def test_collecting_again_replaces_the_folder_and_reads_the_commit_before_writing_it(tmp_path, monkeypatch):
    """The collecting commit is read before anything is written (a half-written folder in the repository would
    mark it "+dirty"), and a second collection replaces the first whole, through a temporary folder."""
    root = tmp_path / "recorded"
    monkeypatch.setattr("semlm.book.recorded.git_commit", lambda: "e" * 40 + ("+dirty" if root.exists() else ""))
    metrics, calls = _long_metrics(tmp_path)
    dest = collect_long(metrics, calls, root, "long", "c" * 40, "")
    assert json.loads((dest / "provenance.json").read_text())["collected_at_commit"] == "e" * 40
    (dest / "stale.json").write_text("{}")
    collect_long(metrics, calls, root, "long", "c" * 40, "")
    assert sorted(p.name for p in root.iterdir()) == ["cpu-long"]
    assert sorted(p.name for p in dest.iterdir()) == ["06_idea_gating.json", "provenance.json"]


def test_only_recorded_runs_whose_models_pass_the_competence_check_are_named(tmp_path):
    metrics, calls = _long_metrics(tmp_path)
    collect_long(metrics, calls, tmp_path / "recorded", "long", "c" * 40, "")
    assert competent_recorded_runs("06_idea_gating", tmp_path / "recorded") == ["book/recorded/cpu-long"]
    assert competent_recorded_runs("06_idea_gating", FIXTURES) == []


def test_page_numbers_of_the_latest_recorded_cpu_run_and_of_none(tmp_path):
    frame, _ = recorded_frame("06_idea_gating", FIXTURES)
    assert recorded_cpu_numbers(frame).recorded_cpu_plain == "n/a"
    metrics, calls = _long_metrics(tmp_path)
    collect_long(metrics, calls, tmp_path / "recorded", "long", "c" * 40, "")
    numbers = recorded_cpu_numbers(recorded_frame("06_idea_gating", tmp_path / "recorded")[0])
    assert numbers == RecordedCpuNumbers(recorded_cpu_folder="book/recorded/cpu-long", recorded_cpu_plain="40.00",
                                         recorded_cpu_gated="41.00", recorded_cpu_bigram="59.00",
                                         recorded_cpu_competence="passes")


def test_a_build_without_its_own_seeds_shows_the_latest_competent_recorded_seed_comparison():
    """Chapter 6 at ``cpu`` trains one seed of each model (they fail the competence check): its over-seeds table is a
    recorded competent run's, named, or says there is none; the page's glue has the same keys either way."""
    from semlm.idea.records import NoOverSeeds

    over, where = recorded_over_seeds("06_idea_gating")
    assert over is not None and len(over.seeds) >= 2 and where.startswith("book/recorded/")
    folder = where.split()[0].removeprefix("book/recorded/")
    run = {r.slug: r for r in load_recorded()}[folder]
    assert run.chapters["06_idea_gating"]["competence"]["passes"] is True
    assert len(over.table()) > 1
    none, why = recorded_over_seeds("06_idea_gating", FIXTURES)  # the fixture run fails the competence check
    assert none is None and ".ci/run-long" in why
    assert type(NoOverSeeds().numbers()) is type(over.numbers()) and NoOverSeeds().numbers().n_seeds == 0
    assert NoOverSeeds().table() is None


def test_collect_long_from_the_command_line(tmp_path, capsys):
    metrics, calls = _long_metrics(tmp_path)
    assert main(["collect-long", "--metrics", str(metrics), "--calls", str(calls), "--root", str(tmp_path / "rec"),
                 "--commit", "c" * 40, "--command", "nice papermill x"]) == 0
    provenance = json.loads((tmp_path / "rec" / "cpu-long" / "provenance.json").read_text())
    assert provenance["command"] == "nice papermill x"
    assert main(["collect-long", "--metrics", str(tmp_path / "absent.json"), "--calls", str(calls)]) == 2
    assert "did not finish" in capsys.readouterr().err


def test_gpu_throughput_of_a_collected_run_is_its_own_table_not_a_chapter(tmp_path):
    work = tmp_path / "work"
    (work / "metrics").mkdir(parents=True)
    (work / "environment.json").write_text(json.dumps({"gpu_name": "NVIDIA H100 80GB HBM3"}))
    speed = {"micro_batches": 1, "compiled": True, "seconds_per_step": 0.02, "tokens_per_second": 400000.0,
             "mfu": 0.12, "peak_memory_gib": 6.0}
    (work / "metrics" / "gpu_throughput.json").write_text(json.dumps({
        "profile": "paper", "device_name": "NVIDIA H100 80GB HBM3",
        "variants": {"compiled, one micro-batch": {"plain": {**speed, "trace": {"table": "..."}}, "gated": speed}},
        "same_update": {"one micro-batch (float32)": 3e-7}}))
    collect(work, tmp_path / "rec", "abc", "paper", "200", False, 0.0)
    run = load_recorded(tmp_path / "rec")[0]
    assert run.chapters == {} and run.gpu_throughput["profile"] == "paper"
    frame, message = recorded_gpu_throughput_frame(tmp_path / "rec")
    assert list(frame["model"]) == ["plain", "gated"] and list(frame["profiled"]) == ["yes", ""]
    assert frame.iloc[0]["ms / step"] == pytest.approx(20.0) and frame.iloc[0]["MFU"] == 0.12
    assert frame.attrs["same_update"] == {"book/recorded/h100": {"one micro-batch (float32)": 3e-7}}
    assert "recorded GPU run" in message
    empty, note = recorded_gpu_throughput_frame(tmp_path / "nothing")
    assert empty.empty and "make test-gpu" in note


def test_trace_frame_reads_the_kernels_of_one_model_from_the_latest_recorded_trace(tmp_path):
    rule = "-" * 20 + "  " + "-" * 10
    head = "                Name    Self CPU %    Self CUDA   Self CUDA %    # of Calls"
    rows = {"plain": ["            aten::mm         5.40%      11.913ms        45.26%           153",
                      "   triton_red_fused_0         0.20%       2.627ms         9.98%             3"],
            "gated": ["         aten::addmm         1.00%       1.000ms        10.00%             7"]}
    folder = tmp_path / "h100-x"
    folder.mkdir()
    (folder / "provenance.json").write_text(json.dumps({"gpu": "NVIDIA H100"}))
    (folder / "gpu_throughput.trace.txt").write_text(
        "\n".join(line for model in ("plain", "gated") for line in [model, rule, head, rule, *rows[model], rule, ""]))
    frame, message = recorded_trace_frame("plain", 8, tmp_path)
    assert list(frame["Name"]) == ["aten::mm", "triton_red_fused_0"] and list(frame["# of Calls"]) == ["153", "3"]
    assert "h100-x" in message and list(recorded_trace_frame("gated", 8, tmp_path)[0]["Self CUDA"]) == ["1.000ms"]
    with pytest.raises(ValueError, match="no 'other' section"):
        recorded_trace_frame("other", 8, tmp_path)
    assert recorded_trace_frame("plain", 8, tmp_path / "none")[0].empty


def _finished_build(folder, complete=True):
    (folder / "metrics").mkdir(parents=True)
    (folder / "metrics" / "01_feature_bank.json").write_text(json.dumps(
        {"cpu_model": "AMD EPYC", "cpu_count": 2, "git_commit": "d" * 40, "packages": {"torch": "2.13.0"}}))
    chapter = {"profile": "cpu", "status": "ok", "seconds": 120.0, "cpu_seconds": 228.0, "cores": 2,
               "utilisation": 0.95, "runs": {"trained": 0, "resumed": 0, "loaded": 4}, "run_list": []}
    manifest = {"chapters": {"02_fusion_training": chapter}, "profile": "cpu", "total_wall_seconds": 1500.0,
                "from_scratch": True, "cpu_seconds": 2790.0, "cores": 2, "utilisation": 0.93, "complete": complete,
                "train_ahead": {"status": "ok", "seconds": 900.0, "runs": {"trained": 60, "resumed": 0, "loaded": 0},
                                "run_list": []}}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_a_whole_book_build_is_collected_and_shown_as_its_own_table_not_a_chapter(tmp_path):
    _finished_build(tmp_path / "build")
    dest = collect_book(tmp_path / "build", tmp_path / "recorded", "from scratch", "make book")
    assert dest.name == "cpu-book-from-scratch"
    (run,) = load_recorded(tmp_path / "recorded")
    assert run.on_cpu and run.source == BOOK_SOURCE_LABEL and not run.chapters and run.commit == "d" * 40
    assert run.provenance["total_wall_seconds"] == 1500.0 and run.provenance["from_scratch"] is True
    frame, chapters, message = recorded_book_builds_frame(tmp_path / "recorded")
    row = frame.iloc[0]
    assert (row["minutes"], row["cores busy"], row["trained beside the chapters"]) == (25.0, 0.93, 60)
    assert row["≤ 30 min"] and row["cores ≥ 90%"]
    assert not recorded_book_builds_frame(tmp_path / "recorded", target_minutes=20)[0].iloc[0]["≤ 20 min"]
    assert list(chapters["chapter"]) == ["02_fusion_training"] and "not by this build" in message
    assert recorded_frame("06_idea_gating", tmp_path / "recorded")[0].empty  # a book build is no chapter run


def test_a_recorded_book_build_keeps_its_metrics_verdicts_and_a_page_that_shows_them(tmp_path):
    _finished_build(tmp_path / "build")
    intent = {"profile": "cpu", "git_commit": "d" * 40, "intent": {"variants": {
        v: {"polarity_acc": {"mean": m, "ci_low": m - 0.02, "ci_high": m + 0.02, "values": [m - 0.01, m, m + 0.01]}}
        for v, m in (("intent", 0.95), ("shuffled", 0.35), ("baseline", 0.5))}}}
    (tmp_path / "build" / "metrics" / "10_intent_control.json").write_text(json.dumps(intent))
    dest = collect_book(tmp_path / "build", tmp_path / "recorded", "verdicts", "make book")
    assert sorted(p.name for p in (dest / "metrics").iterdir()) == ["01_feature_bank.json", "10_intent_control.json"]
    report = json.loads((dest / "report.json").read_text())
    assert [row["id"] for row in report["claims"]] == [c.id for c in CLAIMS]
    assert sum(sum(c.values()) for c in report["counts"].values()) == len(CLAIMS)
    page = (dest / "VERDICTS.md").read_text()
    assert "| A-soft-control:" in page and "make book" not in page.split("\n")[0]
    (run,) = load_recorded(tmp_path / "recorded")
    assert not run.chapters and set(run.book_metrics) == {"01_feature_bank", "10_intent_control"}
    verdicts = recorded_verdicts(tmp_path / "recorded")
    (entry,) = verdicts["A-soft-control"]
    assert entry["folder"] == "cpu-book-verdicts" and entry["commit"] == "d" * 12 and entry["status"] != NOT_RUN
    assert entry["seeds"] == 3 and entry["value_mean"] == pytest.approx(0.6)  # the schema
    assert entry["ci_low"] <= entry["value_mean"] <= entry["ci_high"]
    assert "A-T1-ppl-baseline" not in verdicts  # the chapter it needs is not in the folder: no entry
    # a build that ran on a tree with uncommitted changes is no recorded build
    dirty = json.loads((tmp_path / "build" / "metrics" / "01_feature_bank.json").read_text())
    dirty["git_commit"] += "+dirty"
    (tmp_path / "build" / "metrics" / "01_feature_bank.json").write_text(json.dumps(dirty))
    with pytest.raises(ValueError, match="uncommitted changes"):
        collect_book(tmp_path / "build", tmp_path / "recorded", "dirty", "make book")


def test_an_unfinished_book_build_is_refused_and_nothing_is_written(tmp_path):
    _finished_build(tmp_path / "build", complete=False)
    with pytest.raises(ValueError, match="not a finished whole-book build"):
        collect_book(tmp_path / "build", tmp_path / "recorded", "x", "make book")
    with pytest.raises(FileNotFoundError, match="make book"):
        collect_book(tmp_path / "nothing", tmp_path / "recorded", "x", "make book")
    frame, chapters, message = recorded_book_builds_frame(tmp_path / "recorded")
    assert frame.empty and chapters.empty and "collect-book" in message


def test_a_recorded_precision_comparison_is_loaded_with_its_provenance(tmp_path):
    from semlm.book.bench import recorded_precision_comparison, recorded_precision_frame
    from semlm.fusion.bench import bf16_decision, summarise_training_variants
    results = {(name, kind, seed): {"ppl": 5.0 + seed / 100, "ppl_seen_only": 3.0, "train_seconds": seconds,
                                    "train_cpu_seconds": seconds}
               for name, seconds in (("fp32, shuffled batches (reference)", 10.0),
                                     ("bf16 autocast, shuffled batches", 6.5))
               for kind in ("baseline", "fusion") for seed in (1, 2, 3)}
    variants = {"fp32, shuffled batches (reference)": (0, None), "bf16 autocast, shuffled batches": (0, "bf16")}
    comparison = summarise_training_variants(results, "cpu", variants)
    comparison["emulated_bf16"] = {"ALL": {"float32_ms": 60.0, "bf16_ms": 40.0, "ratio": 2 / 3},
                                   "AVX2": {"float32_ms": 60.0, "bf16_ms": 480.0, "ratio": 8.0}}
    assert recorded_precision_comparison(tmp_path) is None
    dest = write_precision_comparison(comparison, tmp_path, "cpu-bf16-variants",
                                      "python -m semlm.bench --only precision")
    assert not dest.with_name(dest.name + ".tmp").exists()
    (run,) = load_recorded(tmp_path)
    assert run.on_cpu and run.training_variants == comparison and run.provenance["kind"] == "cpu-variants"
    assert isinstance(run.provenance["cpu_computes_bf16"], bool) and run.provenance["command"].endswith("precision")
    recorded = recorded_precision_comparison(tmp_path)
    assert recorded["folder"] == "book/recorded/cpu-bf16-variants" and recorded["profile"] == "cpu"
    on = {"profile": "cpu", "autocast": "bf16", "cpu_computes_bf16": True, "SEMLM_CPU_BF16": "auto"}
    assert "at the cpu scale it took 0.65 x the float32 training CPU time (faster), validation PPL within" \
        in bf16_decision(None, on, recorded)
    frame, message = recorded_precision_frame({}, tmp_path)
    assert list(frame.index) == list(variants) and "commit" in message
    assert message.endswith("fusion model: this CPU as it is 0.67 x; oneDNN capped at AVX2 8.00 x")


def test_the_recorded_precision_frame_says_how_to_record_one_when_there_is_none(tmp_path):
    from semlm.book.bench import recorded_precision_frame

    frame, message = recorded_precision_frame({}, tmp_path)
    assert frame is None and "python -m semlm.bench --only precision --variants-profile cpu" in message


def test_the_readme_shows_the_latest_recorded_builds_verdict_counts():
    """The README's section equals the latest recorded build's final verdicts, re-judged by this commit's claims code
    (regenerate it with `python -m semlm.book.recorded readme`; `collect-book` rewrites it too)."""
    readme = (REPO_ROOT / "README.md").read_text()
    section = README_START + readme.split(README_START, 1)[1].split(README_END, 1)[0] + README_END
    assert section == readme_verdicts_section(), "README.md's recorded verdicts differ from book/recorded"


def test_the_readme_section_counts_a_recorded_builds_statuses(tmp_path):
    _finished_build(tmp_path / "build")
    claims = [{"id": f"{p}-{i}", "paper": p, "claim": "c", "status": s, "ci": None, "reason": "r", "rule": "x"}
              for i, (p, s) in enumerate([("A", "reproduced"), ("A", "inconclusive"), ("B", "inconclusive")])]
    (tmp_path / "build" / "metrics" / "report.json").write_text(json.dumps({"git_commit": "e" * 40, "claims": claims}))
    collect_book(tmp_path / "build", tmp_path / "recorded", "latest", "make book")
    section = readme_verdicts_section(tmp_path / "recorded")
    assert "| inconclusive | 1 | 1 |" in section and "| reproduced | 1 | 0 |" in section
    assert "book/recorded/cpu-book-latest/VERDICTS.md" in section
    readme = tmp_path / "README.md"
    readme.write_text("# x\n<!-- recorded-verdicts:start -->\nold\n<!-- recorded-verdicts:end -->\nafter\n")
    assert update_readme(readme, tmp_path / "recorded") and "| reproduced | 1 | 0 |" in readme.read_text()
    assert readme.read_text().endswith("after\n") and not update_readme(readme, tmp_path / "recorded")


def _build_with_intent(folder, intent, shuffled=(0.34, 0.35, 0.36), report=None):
    """A finished build whose chapter 10 decides A-soft-control on intent - shuffled polarity accuracy per seed;
    ``report``: claims rows written as the build's own ``metrics/report.json``."""
    _finished_build(folder)
    variants = {v: {"polarity_acc": {"mean": sum(a) / len(a), "ci_low": min(a), "ci_high": max(a), "values": list(a)}}
                for v, a in (("intent", intent), ("shuffled", shuffled), ("baseline", shuffled))}
    (folder / "metrics" / "10_intent_control.json").write_text(json.dumps(
        {"profile": "cpu", "git_commit": "d" * 40, "intent": {"variants": variants}}))
    if report is not None:
        (folder / "metrics" / "report.json").write_text(json.dumps({"git_commit": "e" * 40, "claims": report}))
    return folder


def _stored(**statuses):
    return [{"id": claim, "paper": "A", "claim": "c", "status": status, "ci": None, "reason": "r", "rule": "x"}
            for claim, status in statuses.items()]


def test_diff_of_a_recorded_build_and_a_build_shows_a_status_change_and_a_value_beyond_the_intervals(tmp_path):
    recorded = collect_book(_build_with_intent(tmp_path / "before", (0.94, 0.95, 0.96)), tmp_path / "rec", "before",
                            "make book")
    after = _build_with_intent(tmp_path / "after", (0.35, 0.36, 0.34))  # no better than the shuffled control
    diff = diff_builds(recorded, after)
    (row,) = [r for r in diff["current"] if r["status_changed"]]
    assert (row["id"], row["a_status"], row["b_status"]) == ("A-soft-control", REPRODUCED, NOT_REPRODUCED)
    assert row["beyond_intervals"] and row["a_ci"][0] > row["b_ci"][1]
    assert (diff["compared"], diff["status_changes"], diff["value_changes"]) == (len(CLAIMS), 1, 1)
    assert diff["stored"] is None and diff["a"]["commit"] == "d" * 12  # the build has no report.json of its own
    lines = diff_lines(diff)
    assert lines[0].startswith(f"A: {recorded} (commit {'d' * 12}") and lines[1].startswith(f"B: {after} (commit")
    assert lines[2].startswith("A-soft-control [current claims code]: reproduced -> not reproduced; value 0.6 [")
    assert "(the intervals do not overlap)" in lines[2] and len(lines) == 4
    assert lines[-1].startswith(f"{len(CLAIMS)} claims compared, 1 status changes, 1 value changes beyond the "
                                f"intervals (current claims code); stored report.json: not compared")


def test_diff_shows_a_value_change_with_the_same_status_and_the_stored_verdicts_apart(tmp_path):
    a = _build_with_intent(tmp_path / "a", (0.94, 0.95, 0.96),
                           report=_stored(**{"A-soft-control": "reproduced", "A-intensity": "inconclusive"}))
    b = _build_with_intent(tmp_path / "b", (0.64, 0.65, 0.66),  # still above the control, by half as much
                           report=_stored(**{"A-soft-control": "inconclusive", "B-new": "reproduced"}))
    diff = diff_builds(a, b)
    assert (diff["status_changes"], diff["value_changes"]) == (0, 1)
    assert (diff["stored_status_changes"], diff["stored_one_side"]) == (1, 2)
    lines = diff_lines(diff)
    assert lines[0].endswith(f"stored verdicts: {a / 'metrics' / 'report.json'})")
    assert [line.split(":")[0] for line in lines[2:-1]] == [
        "A-soft-control [current claims code]", "A-soft-control [stored report.json]",
        "A-intensity [stored report.json]", "B-new [stored report.json]"]
    assert "reproduced on both; value 0.6 [" in lines[2] and "-> 0.3 [" in lines[2]
    assert lines[3].endswith("reproduced -> inconclusive") and lines[4].endswith("only in A (inconclusive)")
    assert lines[-1].endswith("stored report.json: 1 status changes, 2 claims on one side only")


def test_diff_of_identical_builds_finds_no_change_and_exits_0(tmp_path, capsys):
    build = _build_with_intent(tmp_path / "build", (0.94, 0.95, 0.96))
    recorded = collect_book(build, tmp_path / "rec", "same", "make book")
    assert main(["diff", str(recorded), str(recorded)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[-1] == (f"{len(CLAIMS)} claims compared, 0 status changes, 0 value changes beyond "
                                         f"the intervals (current claims code); stored report.json: 0 status "
                                         f"changes, 0 claims on one side only")
    assert main(["diff", str(recorded), str(build)]) == 0  # the build and its own recording agree
    assert " 0 status changes, 0 value changes" in capsys.readouterr().out


def test_diff_of_bad_input_exits_2_with_one_line(tmp_path, capsys):
    good = _build_with_intent(tmp_path / "good", (0.94, 0.95, 0.96))
    old = tmp_path / "cpu-book-old"  # a recorded build from before chapter metrics were kept
    old.mkdir()
    (old / "provenance.json").write_text("{}")
    broken = _build_with_intent(tmp_path / "broken", (0.94, 0.95, 0.96))
    (broken / "metrics" / "10_intent_control.json").write_text("{not json")
    for other, message in ((tmp_path / "absent", "is not a folder"), (old, "holds no chapter metrics"),
                           (broken, "10_intent_control.json is not valid JSON")):
        assert main(["diff", str(good), str(other)]) == 2
        captured = capsys.readouterr()
        assert not captured.out and message in captured.err and captured.err.count("\n") == 1
