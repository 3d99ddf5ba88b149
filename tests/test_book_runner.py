"""The book runner's fast paths: usage errors answer at once, on one line, with exit status 2,
before anything is executed or written. Building the book is tested elsewhere (slow)."""

import os

import pytest

from semlm import book
from semlm.data.paths import REPO_ROOT


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err.strip()


@pytest.fixture
def fake_notebooks(tmp_path, monkeypatch):
    """A notebooks/ folder with two chapters and two files that are not chapters."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for name in ("02_beta.py", "01_alpha.py", "01_alpha.ipynb", "notes.md"):
        (folder / name).write_text("# %%\n")
    monkeypatch.setattr(book, "NOTEBOOKS_DIR", folder)
    return folder


def test_unknown_profile_exits_2_with_one_line_listing_profiles(capsys, tmp_path):
    assert book.main(["run", "--profile", "huge", "--build-dir", str(tmp_path / "build")]) == 2
    assert one_error_line(capsys) == "error: unknown profile 'huge'; choose one of: smoke, cpu, paper"
    assert not (tmp_path / "build").exists()


def test_unknown_chapter_exits_2_with_one_line_listing_chapters(capsys, tmp_path):
    assert book.main(["run", "--profile", "smoke", "--only", "99_nope", "--build-dir", str(tmp_path / "build")]) == 2
    line = one_error_line(capsys)
    assert line.startswith("error: unknown chapter '99_nope'; choose one of: ")
    assert all(chapter in line for chapter in book.list_chapters())
    assert not (tmp_path / "build").exists()


def test_unknown_chapter_message_names_every_chapter_in_order(capsys, fake_notebooks):
    assert book.main(["run", "--profile", "smoke", "--only", "03"]) == 2
    assert one_error_line(capsys) == "error: unknown chapter '03'; choose one of: 01_alpha, 02_beta"


def test_missing_profile_is_a_one_line_usage_error(capsys):
    assert book.main(["run"]) == 2
    assert "--profile" in one_error_line(capsys)


def test_list_chapters_is_the_sorted_stems_of_the_notebooks():
    assert book.list_chapters() == sorted(path.stem for path in (REPO_ROOT / "notebooks").glob("*.py"))


def test_list_chapters_sorts_and_ignores_other_files(fake_notebooks):
    assert book.list_chapters() == ["01_alpha", "02_beta"]


@pytest.mark.parametrize("name", ["01_alpha", "01_alpha.py", "notebooks/01_alpha.py", "01", "01_al"])
def test_only_accepts_a_name_file_name_or_unique_prefix(name, fake_notebooks):
    assert book.resolve_chapter(name, book.list_chapters()) == "01_alpha"


def test_an_ambiguous_prefix_is_a_usage_error(fake_notebooks):
    with pytest.raises(book.BookError, match=r"ambiguous chapter '0'; choose one of: 01_alpha, 02_beta") as info:
        book.resolve_chapter("0", book.list_chapters())
    assert info.value.exit_code == 2


def test_profiles_match_the_library():
    from semlm.profiles import PROFILES

    assert book.PROFILES == PROFILES


def test_chapter_environment_is_offline_absolute_and_restored(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SEMLM_DATA_DIR", "data-here")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with book.chapter_environment(tmp_path / "build", allow_downloads=False):
        assert os.environ["SEMLM_DATA_DIR"] == str(tmp_path.resolve() / "data-here")
        assert os.environ["SEMLM_RUNS_DIR"] == str(tmp_path / "build" / "runs")
        assert os.environ["HF_HUB_OFFLINE"] == os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert os.environ["SEMLM_DATA_DIR"] == "data-here"
    assert "HF_HUB_OFFLINE" not in os.environ


def test_allow_downloads_leaves_the_hub_variables_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with book.chapter_environment(tmp_path, allow_downloads=True):
        assert "HF_HUB_OFFLINE" not in os.environ


def test_a_failed_build_is_summarised_by_its_error_line():
    log = "Running Sphinx\nTraceback (most recent call last):\n  File \"x.py\", line 1\n" \
          "yaml.parser.ParserError: while parsing a flow node\n  in line 59\n    ^\n====\n"
    assert book._last_meaningful_line(log) == "yaml.parser.ParserError: while parsing a flow node"
    assert book._last_meaningful_line("Sphinx said no\n=====\n") == "Sphinx said no"


def test_the_html_loads_mathjax_from_the_installed_package():
    assert (book.mathjax_dir() / "tex-chtml.js").is_file()


def test_missing_data_directory_exits_2_before_running_anything(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("SEMLM_DATA_DIR", str(tmp_path / "no-such-dir"))
    assert book.main(["run", "--profile", "smoke", "--build-dir", str(tmp_path / "build")]) == 2
    line = one_error_line(capsys)
    assert line.startswith("error: SEMLM_DATA_DIR=") and "is not a directory" in line and "data/README.md" in line
    assert not (tmp_path / "build").exists()
