"""The whole book builds with the smoke profile: every chapter through papermill, then Jupyter Book."""

import json
import math
import os
from pathlib import Path

import jupytext
import nbformat
import papermill
import pytest

from semlm.book import runner as book
from semlm.core.runs import EVALUATIONS_DIR
from semlm.data.fetch import missing_for_chapters
from semlm.data.paths import REPO_ROOT

pytestmark = pytest.mark.slow

CHAPTER_02_KEYS = ["ppl", "ppl_seen_only", "focus_ce", "val_ppl_per_epoch"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    build_dir = tmp_path_factory.mktemp("book-build")
    saved = dict(os.environ)
    try:
        book.run("smoke", build_dir=build_dir)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return build_dir


def test_every_chapter_is_executed_without_errors(built):
    chapters = book.list_chapters()
    assert {"01_feature_bank", "02_fusion_training"} <= set(chapters)
    skipped = book.read_skipped(built)
    assert set(skipped) == set(missing_for_chapters(chapters))  # only chapters whose data are missing
    for chapter in (c for c in chapters if c not in skipped):
        nb = nbformat.read(built / "executed" / f"{chapter}.ipynb", as_version=4)
        outputs = [o for c in nb.cells for o in c.get("outputs", [])]
        assert not [o for o in outputs if o.get("output_type") == "error"], chapter
        # progress bars belong to terminals, not to the rendered book
        assert not [o for o in outputs if o.get("output_type") == "stream" and "it/s]" in o.get("text", "")], chapter


def test_the_declared_models_train_beside_the_chapters_and_only_once(built):
    from semlm.book import plan

    manifest = book.read_manifest(built)
    ahead = manifest["train_ahead"]
    skipped = book.read_skipped(built)
    declared = [e for e in plan.book_runs("smoke") if e.chapter not in skipped]
    assert ahead["status"] == "ok" and ahead["runs"]["trained"] + ahead["runs"]["loaded"] == sum(len(e.specs) for e in declared)
    ahead_models = {tuple(r["model"]) for r in ahead["run_list"] if r["status"] == "trained"}
    trained_by_chapters = [tuple(r["model"]) for e in manifest["chapters"].values() for r in e["run_list"]
                           if r["status"] == "trained"]
    assert not ahead_models & set(trained_by_chapters)  # no model trained twice in the build
    trained = [r for e in [ahead, *manifest["chapters"].values()] for r in e["run_list"] if r["status"] == "trained"]
    assert trained and all(r["cpu_seconds"] > 0 for r in trained)  # where the build's CPU time went, per model
    assert manifest["from_scratch"] and 0 < manifest["utilisation"] <= 1.05
    # the parts of the benchmarks chapter's CPU picture: each kernel's start-up, and jupyter-book's own time
    assert all(0 < e["startup_cpu_seconds"] < e["cpu_seconds"] for e in manifest["chapters"].values())
    assert 0 < manifest["html_cpu_seconds"] < manifest["cpu_seconds"]


def test_every_declared_run_is_used(built):
    """Every model the build trained or loaded, in the pool or in a chapter, was asked for by a chapter: no training
    that nothing shown or judged reads (the runner names any such run)."""
    manifest = book.read_manifest(built)
    runs = [r for e in [manifest["train_ahead"], *manifest["chapters"].values()] for r in e["run_list"]]
    assert runs and all("used_by" in r for r in runs)
    unused = [f"{r['experiment']}/{r['name']} seed {r['seed']}" for r in runs if not r["used_by"]]
    assert not unused, unused
    assert all(set(r["used_by"]) <= set(manifest["chapters"]) for r in runs)


def test_the_protocols_scores_are_kept_with_the_runs_they_score(built):
    """Chapter 6's authors' and book protocols and chapter 7's sweep scores are computed once per run and setting and
    kept in the run's folder (semlm.core.runs.cached_evaluation), where a rebuild or another chapter reads them."""
    if "06_idea_gating" in book.read_skipped(built):
        pytest.skip("chapter 6's data (WikiText-2) are missing, so it was skipped")
    kept = {p.name.split("-")[0] for p in (built / "runs").glob(f"*/idea/*/*/{EVALUATIONS_DIR}/*.json")}
    assert {"authors_protocol", "domain_retention"} <= kept


def test_chapters_write_metrics_with_provenance(built):
    for chapter in ("01_feature_bank", "02_fusion_training"):
        record = json.loads((built / "metrics" / f"{chapter}.json").read_text())
        assert record["profile"] == "smoke" and record["seed"] == 111
        assert {"wall_seconds", "git_commit", "packages"} <= set(record)
    record = json.loads((built / "metrics" / "02_fusion_training.json").read_text())
    for setting in ("causal", "published"):
        for kind in ("baseline", "fusion"):
            assert set(CHAPTER_02_KEYS) <= set(record[setting][kind]), (setting, kind)
        assert record[setting]["fusion"]["sem_mse"] > 0
    assert record["causal"]["fusion"]["future_sensitivity"] < 1e-5
    control = json.loads((built / "metrics" / "03_controllable_decoding.json").read_text())
    for cls in ("pos", "neg"):
        assert control["control"]["hard"][cls] == {"adj_acc": 1.0, "punct_acc": 1.0}
        assert set(control["control"]["soft"][cls]) == {"adj_acc", "punct_acc"}
        assert 0.0 <= control["ood_hit"][cls] <= 1.0
    assert control["confusion"]["hard"]["POS"]["POS"] == control["n_per_setting"]
    assert control["generations_per_second"] > 0
    audit = json.loads((built / "metrics" / "04_leakage_audit.json").read_text())
    assert len(audit["seeds"]) >= 2  # smoke: 2 seeds (an interval needs two); cpu: 5
    for setting in ("causal", "published"):
        for kind in ("baseline", "fusion"):
            for metric in ("ppl", "ppl_seen_only"):
                summary = audit["table1"][setting][kind][metric]
                assert len(summary["values"]) == len(audit["seeds"])
                assert summary["ci_low"] <= summary["mean"] <= summary["ci_high"]
    assert {"fusion_no_gate", "fusion_no_aux", "fusion_no_uniformizer"} <= set(audit["ablations"])
    assert {"ppl", "soft", "hard", "ood_hit"} <= set(audit["control_code_baseline"])
    # the corpus alone says no causal model goes below these; the causal models must not
    assert audit["table1"]["causal"]["fusion"]["ppl_seen_only"]["mean"] > audit["floors"]["ppl_seen_only"]
    assert record["published"]["fusion"]["future_sensitivity"] > 1e-3


@pytest.mark.needs_data("05_sst2", "06_idea_gating", "07_xray_and_sweeps", "08_lora_4bit_idea_gating")
def test_data_chapters_write_their_metrics(built):
    sst2 = json.loads((built / "metrics" / "05_sst2.json").read_text())
    assert sst2["profile"] == "smoke" and sst2["seed"] == 111
    for setting in ("causal", "published"):
        for kind in ("baseline", "fusion"):
            assert sst2[setting][kind]["ppl"] >= 1.0
    assert sst2["fusion"]["sem_mse"] > 0
    for mode in ("soft", "hard"):
        for cls in ("pos", "neg"):
            assert 0.0 <= sst2["control"][mode][cls]["acc"] <= 1.0
            assert 0.0 <= sst2["control"][mode][cls]["classifier_acc"] <= 1.0
    assert sst2["classifier"]["dev_acc"] > 0.65
    assert sst2["causal"]["fusion"]["future_sensitivity"] < 1e-5
    assert sst2["feature_leak"]["causal"] == 0.0
    idea = json.loads((built / "metrics" / "06_idea_gating.json").read_text())
    assert {"val_ppl"} <= set(idea["baseline"]) and {"val_ppl", "val_ppl_ungated"} <= set(idea["gated"])
    assert idea["step_time_ratio"] > 0 and idea["dataset"] == "wikitext-2"
    for name, by_model in idea["domains"].items():
        for model in ("baseline", "gated"):
            assert {"stickiness", "unique_density", "distinct_2"} <= set(by_model[model]), (name, model)
    lora = json.loads((built / "metrics" / "08_lora_4bit_idea_gating.json").read_text())
    assert lora["dataset"] == "fineweb-edu-sample" and lora["quantization"] == "nf4"
    assert lora["backbone"].startswith("book-mistral")
    assert lora["trainable_params"]["gated_by_group"]["other"] == 0
    assert lora["trainable_params"]["gated"] > lora["trainable_params"]["baseline"] > 0
    for model in ("baseline", "gated"):
        assert math.isfinite(lora[model]["val_ppl"]) and lora[model]["val_ppl"] > 1
    assert lora["peak_memory_mb"]["fp32"] > 0 and lora["peak_memory_mb"]["nf4"] > 0
    assert lora["weights_mb"]["nf4"] < lora["weights_mb"]["fp32"]
    sweeps = json.loads((built / "metrics" / "07_xray_and_sweeps.json").read_text())
    assert {"alpha", "beta", "k"} <= set(sweeps["sweeps"])
    assert [row["alpha"] for row in sweeps["sweeps"]["alpha"]] == [0.0, 0.25, 0.5, 0.75]
    assert all({"boosted", "suppressed"} <= set(x) for x in sweeps["xray"].values())


def page_text(path: Path) -> str:
    """The words of an HTML page (tags dropped, whitespace collapsed)."""
    import html
    import re

    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", path.read_text())).split())


def test_a_skipped_chapter_has_a_page_saying_why(built):
    skipped = book.read_skipped(built)
    if not skipped:
        pytest.skip("every chapter's data were there; nothing was skipped")
    for chapter, files in skipped.items():
        page = page_text(built / "html" / "notebooks" / f"{chapter}.html")
        assert "skipped" in page and "make data" in page and all(name in page for name in files)
    assert "Chapters skipped in this build" in page_text(built / "html" / "book" / "intro.html")


def test_pages_show_one_parameters_cell_with_a_run_with_line(built):
    page = page_text(built / "html" / "notebooks" / "01_feature_bank.html")
    assert "run with: profile=" in page and "smoke" in page
    assert "# Parameters" not in page  # papermill's injected cell is hidden


def test_each_chapter_is_published_as_a_notebook_without_outputs(built):
    for chapter in book.list_chapters():
        notebook = nbformat.read(built / "html" / "notebooks" / f"{chapter}.ipynb", as_version=4)
        assert any("parameters" in c.metadata.get("tags", []) for c in notebook.cells), chapter
        assert not [c for c in notebook.cells if c.cell_type == "code" and c.outputs], chapter


def test_html_has_every_chapter_and_renders_math_offline(built):
    html = built / "html"
    assert (html / "index.html").exists()
    for chapter in ("01_feature_bank", "02_fusion_training"):
        page = (html / "notebooks" / f"{chapter}.html").read_text()
        assert "mathjax/tex-chtml.js" in page
        assert "cdn.jsdelivr.net" not in page
    assert (html / "_static" / "mathjax" / "tex-chtml.js").exists()


def test_every_glued_number_renders(built):
    # myst-nb cannot format a glued value it cannot parse (e.g. numpy's ``np.float64(...)``)
    assert "Failed to format" not in (built / "jupyter-book.log").read_text()


def test_built_site_has_no_broken_internal_links(built):
    from semlm.book.sitecheck import broken_internal_links

    assert broken_internal_links(built / "html") == []


@pytest.mark.parametrize("page", ["index.html", *(f"notebooks/{c}.html" for c in book.list_chapters())])
def test_pages_render_in_a_browser_with_math_typeset_and_images_loaded(built, chromium, page):
    from semlm.book.sitecheck import render_check

    report = render_check(built / "html" / page, chromium)
    assert report.get("error") is None, report
    assert report["raw_tex"] == [], report
    assert report["broken_images"] == [], report
    assert report["js_errors"] == [], report
    assert report["absolute_paths"] == [], report
    assert report["wide_code"] == [], report
    assert report["wide_tables"] == [], report  # a table wider than the text column
    assert report["series_outputs"] == [], report  # a printed "dtype: ..." line
    assert report["visible_glue"] == [], report  # glue(...) bookkeeping shown to the reader
    assert report["exercises"] == [] and report["open_solutions"] == [], report  # solutions collapsed
    if page.endswith("02_fusion_training.html"):
        assert report["math_rendered"] > 0 and report["images"] > 0


@pytest.mark.parametrize("window", [(1400, 900), (800, 900)], ids=["1400px", "800px"])
@pytest.mark.parametrize("page", ["index.html", *(f"notebooks/{c}.html" for c in book.list_chapters())])
def test_no_table_column_narrower_than_a_word(built, chromium, page, window):
    """No table breaks a word over lines or lets it spill into the next cell (the report's claims table did, one
    letter per line, at 1400 px), and none is cut off at the column's edge; a wide output table scrolls in its box."""
    from semlm.book.sitecheck import TABLE_WINDOWS, render_check

    assert window in TABLE_WINDOWS
    report = render_check(built / "html" / page, chromium, window=window)
    assert report.get("error") is None, report
    assert report["narrow_columns"] == [] and report["wide_tables"] == [], report


def test_report_judges_every_claim_from_this_build(built):
    from semlm.book.claims import CLAIMS
    from semlm.core.verdicts import STATUSES

    report = json.loads((built / "metrics" / "report.json").read_text())
    claims = {c["id"]: c for c in report["claims"]}
    assert set(claims) == {c.id for c in CLAIMS}
    assert all(c["status"] in STATUSES and c["reason"] for c in claims.values())
    assert claims["A-T1-ppl-fusion"]["status"] == "not meaningful as published"
    # hard control is guaranteed by the class mask, whatever the model: never "reproduced"
    assert claims["A-T2-adj"]["status"] == "holds by construction"
    judged = [c for c in claims.values() if c["status"] != "not run at this profile"]
    assert judged and all(c.get("rule") for c in judged), "every verdict names the rule it was judged by"
    manifest = report["manifest"]
    assert {"01_feature_bank", "04_leakage_audit"} <= set(manifest["chapters"])
    assert manifest["hardware"]["CPU"] and manifest["packages"]["torch"]


def test_wrong_parameter_type_fails_with_one_clear_error(tmp_path):
    notebook = jupytext.read(REPO_ROOT / "notebooks" / "01_feature_bank.py")
    source = tmp_path / "01.ipynb"
    nbformat.write(notebook, source)
    with pytest.raises(papermill.PapermillExecutionError) as info:
        papermill.execute_notebook(source, tmp_path / "out.ipynb", parameters={"profile": "smoke", "seed": "abc"},
                                   kernel_name="python3", cwd=str(REPO_ROOT), progress_bar=False)
    assert info.value.ename == "ValueError"
    assert "parameter seed must be a non-negative int, got 'abc'" in info.value.evalue


def test_a_build_s_metrics_name_no_machine_folders(built):
    from semlm.data.paths import absolute_paths

    found = {p.name: absolute_paths(p.read_text())[:2] for p in sorted((built / "metrics").glob("*.json"))}
    assert not {name: hits for name, hits in found.items() if hits}
