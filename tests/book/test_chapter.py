"""semlm.book.chapter: a chapter's setup (profile, parameter check, clock) and its metrics file in one object."""

import gc
import json
import subprocess
import sys

import pytest

from semlm import book
from semlm.book.chapter import Chapter, open_chapter
from semlm.profiles import LAB_PROFILE_VARIABLE, check_parameters


@pytest.fixture(autouse=True)
def _no_lab_profile(monkeypatch):
    monkeypatch.delenv(LAB_PROFILE_VARIABLE, raising=False)


def test_book_open_is_the_chapter_context_and_imports_without_torch():
    assert book.open is open_chapter
    code = "import sys; from semlm import book; book.open; assert 'torch' not in sys.modules"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("parameters", [{"seed": "abc"}, {"seed": -1}, {"profile": "laptop"}, {"workers": 0},
                                        {"max_steps": "500"}, {"n_seeds": 0}, {"epochs": 3}])
def test_a_bad_parameter_fails_with_the_same_one_line_error_as_check_parameters(parameters):
    given = {"profile": "smoke", "seed": 111, **parameters}
    with pytest.raises(ValueError) as expected:
        check_parameters(**given)
    with pytest.raises(ValueError) as got:
        open_chapter("01_feature_bank", **given)
    assert str(got.value) == str(expected.value) and "\n" not in str(got.value)


def test_a_chapter_accepts_its_own_long_profile_and_no_other_chapters():
    assert open_chapter("06_idea_gating", profile="cpu-long", seed=111, max_steps=None).profile == "cpu-long"
    with pytest.raises(ValueError, match="cpu-long is a profile of 06_idea_gating only"):
        open_chapter("07_xray_and_sweeps", profile="cpu-long", seed=111)


def test_open_takes_the_lab_profile_in_an_interactive_kernel(monkeypatch, capsys):
    monkeypatch.delenv("SEMLM_BUILD_DIR", raising=False)
    monkeypatch.setenv(LAB_PROFILE_VARIABLE, "smoke")
    chapter = open_chapter("01_feature_bank", profile="cpu", seed=111)
    assert (chapter.profile, chapter.seed) == ("smoke", 111) and "lab: profile = 'smoke'" in capsys.readouterr().out


def test_close_writes_the_metrics_file_with_profile_seed_and_wall_time(tmp_path):
    chapter = open_chapter("report", profile="smoke", seed=7, workers=2)
    assert isinstance(chapter, Chapter) and chapter.seconds >= 0
    assert chapter.close({"claims": [], "answer": 42}, directory=tmp_path) is None  # a last cell shows nothing
    written = json.loads((tmp_path / "report.json").read_text())
    assert chapter.metrics_path == tmp_path / "report.json"
    assert (written["chapter"], written["profile"], written["seed"], written["answer"]) == ("report", "smoke", 7, 42)
    assert written["wall_seconds"] == round(chapter.seconds, 2) and "git_commit" in written
    assert chapter.seconds == chapter.seconds  # frozen at close: what a chapter glues is what it wrote


def test_close_writes_to_the_book_runners_metrics_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("SEMLM_METRICS_DIR", str(tmp_path / "metrics"))
    open_chapter("report", profile="smoke", seed=111).close({"claims": []})
    assert json.loads((tmp_path / "metrics" / "report.json").read_text())["seed"] == 111


def test_a_failing_chapter_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("SEMLM_METRICS_DIR", str(tmp_path))
    with pytest.raises(ValueError):
        open_chapter("01_feature_bank", profile="smoke", seed="abc")
    chapter = open_chapter("report", profile="smoke", seed=111)
    with pytest.raises(ValueError, match="must be a semlm.core.records record or a dict"):
        chapter.close(["not", "a", "record"])  # a record that cannot be written
    del chapter  # a chapter that stops before its metrics cell: nothing is written on the way out
    gc.collect()
    assert list(tmp_path.iterdir()) == []


def test_injected_parameters_are_read_from_papermills_cell():
    from semlm.book.chapter import injected_parameters

    history = ["", "profile = 'cpu'\nseed = 111\n", "# Parameters\nprofile = \"smoke\"\nbogus_param = 1\n", "x = 2"]
    assert injected_parameters(history) == {"profile", "bogus_param"}
    assert injected_parameters(["profile = 'cpu'"]) == set()
    assert injected_parameters() == set()  # outside a kernel: nothing injected


def test_unknown_parameter_fails_the_chapter(tmp_path):
    """Raw papermill with a parameter the chapter does not declare: the chapter stops at book.open with one line
    naming it and the chapter's parameters, before any work and without writing metrics."""
    import nbformat
    import papermill

    notebook = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python",
                                                                  "display_name": "Python 3"}})
    notebook.cells = [nbformat.v4.new_code_cell("profile = 'cpu'\nseed = 111\nworkers = 1",
                                                metadata={"tags": ["parameters"]}),
                      nbformat.v4.new_code_cell("from semlm import book\n"
                                                "chapter = book.open('toy', profile=profile, seed=seed, "
                                                "workers=workers)\nprint('work started')")]
    nbformat.write(notebook, tmp_path / "toy.ipynb")
    env = {"SEMLM_METRICS_DIR": str(tmp_path / "metrics")}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        with pytest.raises(papermill.PapermillExecutionError) as failure:
            papermill.execute_notebook(str(tmp_path / "toy.ipynb"), str(tmp_path / "out.ipynb"),
                                       parameters={"profile": "smoke", "bogus_param": 1}, progress_bar=False,
                                       log_output=False, kernel_name="python3")
        assert "chapter toy has no parameter 'bogus_param'; its parameters are profile, seed, workers" in str(
            failure.value.evalue)
        # the declared ones pass
        papermill.execute_notebook(str(tmp_path / "toy.ipynb"), str(tmp_path / "out2.ipynb"),
                                   parameters={"profile": "smoke", "workers": 2}, progress_bar=False,
                                   kernel_name="python3")
    assert "work started" in (tmp_path / "out2.ipynb").read_text()
    assert not (tmp_path / "metrics").exists()


def test_standalone_papermill_does_not_touch_the_build(tmp_path, monkeypatch, capsys):
    """A chapter run outside the book runner (no $SEMLM_METRICS_DIR: raw papermill, JupyterLab) writes its metrics
    to the standalone folder and says so; the build's metrics folder is never written."""
    import semlm.book.chapter as chapter_module
    from semlm.book.report import metrics_dir

    monkeypatch.delenv("SEMLM_METRICS_DIR", raising=False)
    real = chapter_module.STANDALONE_METRICS_DIR
    assert real.parts[-3:] == ("_build", "lab", "metrics") and real != metrics_dir()
    monkeypatch.setattr(chapter_module, "STANDALONE_METRICS_DIR", tmp_path / "lab" / "metrics")
    build = metrics_dir() / "report.json"
    before = build.stat().st_mtime_ns if build.exists() else None
    chapter = open_chapter("report", profile="smoke", seed=111)
    chapter.close({"claims": []})
    assert chapter.metrics_path == tmp_path / "lab" / "metrics" / "report.json"
    assert "the book build's stay untouched" in capsys.readouterr().out
    assert (build.stat().st_mtime_ns if build.exists() else None) == before


def test_modified_data_stops_the_chapter(tmp_path, monkeypatch, capsys):
    """A data file that differs from the pinned release stops book.open (raw papermill and JupyterLab too) with one
    line naming it, its checksum and the fix; allowed, the chapter runs and its metrics carry the mark."""
    import semlm.data.fetch as fetch
    from semlm.book import chapter as chapter_module
    from semlm.book.report import modified_data

    (tmp_path / "sst2").mkdir()
    (tmp_path / "sst2" / "dev.tsv").write_text("changed\n")
    monkeypatch.setenv("SEMLM_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(fetch, "read_checksums", lambda *a, **k: {"sst2/dev.tsv": "0" * 64})
    monkeypatch.setattr(fetch, "CHAPTER_DATA", {"05_sst2": ("sst2/dev.tsv",)})
    monkeypatch.delenv(chapter_module.ALLOW_MODIFIED_DATA, raising=False)
    with pytest.raises(ValueError) as refused:
        open_chapter("05_sst2", profile="smoke", seed=111)
    message = str(refused.value)
    assert "\n" not in message and "sst2/dev.tsv (sha256 " in message and "make data" in message
    assert "--allow-modified-data" in message
    monkeypatch.setenv(chapter_module.ALLOW_MODIFIED_DATA, "1")
    chapter = open_chapter("05_sst2", profile="smoke", seed=111)
    assert "data differs from the pinned release: sst2/dev.tsv" in capsys.readouterr().out
    chapter.close({"x": 1}, directory=tmp_path / "metrics")
    written = json.loads((tmp_path / "metrics" / "05_sst2.json").read_text())
    assert written["modified_data"] == {"mark": "data differs from the pinned release", "files": ["sst2/dev.tsv"]}
    assert modified_data({"05_sst2": written, "01": {"x": 1}}) == {"05_sst2": ["sst2/dev.tsv"]}
    # a chapter whose data is the pinned release carries no mark
    monkeypatch.setattr(fetch, "CHAPTER_DATA", {})
    assert open_chapter("05_sst2", profile="smoke", seed=111).modified_data == []


def test_the_runner_refuses_modified_data_before_any_kernel_and_marks_every_page_when_allowed(tmp_path, monkeypatch):
    import semlm.book.runner as runner

    monkeypatch.setattr(runner, "differing_for_chapters", lambda chapters: ["wikitext-2/valid.txt"])
    monkeypatch.setattr(runner, "ensure_kernel", lambda: pytest.fail("a kernel started"))
    with pytest.raises(runner.BookError) as refused:
        runner.run("smoke", only="01", build_dir=tmp_path / "build")
    message = str(refused.value)
    assert refused.value.exit_code == 2 and "wikitext-2/valid.txt in " in message
    assert "differs from the pinned release" in message
    assert "--allow-modified-data" in str(refused.value)
    (tmp_path / "build" / "metrics").mkdir(parents=True, exist_ok=True)
    (tmp_path / "build" / "metrics" / "06_idea_gating.json").write_text(json.dumps(
        {"modified_data": {"mark": "data differs from the pinned release", "files": ["wikitext-2/valid.txt"]}}))
    assert runner.modified_data_marks(tmp_path / "build") == {"06_idea_gating": ["wikitext-2/valid.txt"]}
    runner.stage_sources(tmp_path / "build", True)
    import yaml

    config = yaml.safe_load((tmp_path / "build" / "source" / "_config.yml").read_text())
    assert config["html"]["announcement"].startswith("data differs from the pinned release: wikitext-2/valid.txt")
