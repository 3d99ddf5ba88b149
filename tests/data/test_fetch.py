"""`make data`: the writers reproduce the releases' bytes, fetch keeps only files whose SHA-256
matches the pinned value, verify names the fix. Everything runs on small local fixtures
(a fake hub loader and a fake download); nothing touches the network."""

import hashlib
import re

import pytest

from semlm.book.runner import list_chapters
from semlm.data import fetch as data_fetch
from semlm.data.__main__ import main as data_main
from semlm.data.paths import REPO_ROOT

WIKI = b" \n = Title = \n \n Some text @-@ here . \n \n = = Part = = \n \n More <unk> text . \n \n"
HUB_WIKI = [{"text": ""}, {"text": " = Title = \n"}, {"text": ""}, {"text": " Some text @-@ here . \n"},
            {"text": ""}, {"text": " = = Part = = \n"}, {"text": ""}, {"text": " More <unk> text . \n"},
            {"text": ""}]
SST2_TRAIN = [{"sentence": "hide new secretions ", "label": 0, "idx": 0},
              {"sentence": "a gorgeous film ", "label": 1, "idx": 1}]
SST2_TRAIN_BYTES = b"sentence\tlabel\nhide new secretions \t0\na gorgeous film \t1\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(autouse=True)
def every_host_answers(monkeypatch):
    """No test reaches the network: the reachability probe says every host answers."""
    monkeypatch.setattr(data_fetch, "reachable", lambda url, timeout=5.0: "")


def test_wikitext_writer_restores_the_release_blank_lines_and_line_endings():
    assert data_fetch.wikitext_lines(HUB_WIKI) == WIKI
    assert data_fetch.wikitext_lines(HUB_WIKI, newline="\r\n") == WIKI.replace(b"\n", b"\r\n")


def test_glue_writer_keeps_the_header_trailing_space_and_the_unlabelled_test_layout():
    assert data_fetch.glue_tsv(SST2_TRAIN) == SST2_TRAIN_BYTES
    test_rows = [{"idx": 0, "sentence": "uneasy mishmash .", "label": -1}]
    assert data_fetch.glue_tsv(test_rows, test=True) == b"index\tsentence\n0\tuneasy mishmash .\n"
    assert data_fetch.ptb_trees([{"ptb_tree": "(3 (2 a) (3 film)) "}]) == b"(3 (2 a) (3 film))\n"


class FakeHub:
    """Stands in for datasets.load_dataset: rows per (repository, config, split), and a call log."""

    def __init__(self, rows):
        self.rows, self.calls = rows, []

    def __call__(self, repository, config, split):
        self.calls.append((repository, config, split))
        return self.rows[(repository, config, split)]


def wikitext_hub(rows=HUB_WIKI):
    return FakeHub({("Salesforce/wikitext", "wikitext-2-v1", split): rows for split in ("train", "validation", "test")})


def wikitext_sums(data=WIKI):
    return {f"wikitext-2/{name}": sha(data) for name in ("train.txt", "valid.txt", "test.txt")}


def test_fetch_writes_the_layout_the_loader_reads_and_verifies_it(tmp_path, monkeypatch):
    hub, lines = wikitext_hub(), []
    statuses = data_fetch.fetch(tmp_path, ["wikitext-2"], load=hub, checksums=wikitext_sums(), echo=lines.append)
    assert [s.state for s in statuses] == ["ok"] * 3
    assert (tmp_path / "wikitext-2" / "valid.txt").read_bytes() == WIKI
    assert ("Salesforce/wikitext", "wikitext-2-v1", "validation") in hub.calls
    assert any("load_dataset('Salesforce/wikitext', 'wikitext-2-v1', split='train')" in line for line in lines)
    # the loader of chapters 6-8 reads what fetch wrote
    from semlm.data.wikitext import load_wikitext2

    monkeypatch.setenv("SEMLM_DATA_DIR", str(tmp_path))
    assert load_wikitext2().valid == [" = Title = \n", " Some text @-@ here . \n", " = = Part = = \n",
                                      " More <unk> text . \n"]
    # a second fetch finds everything in place and asks the hub for nothing
    again = wikitext_hub()
    data_fetch.fetch(tmp_path, ["wikitext-2"], load=again, checksums=wikitext_sums(), echo=lines.append)
    assert again.calls == []


def test_fetch_refuses_a_rebuild_whose_hash_differs_and_keeps_no_partial_file(tmp_path):
    lines = []
    changed = [{"text": " a different release \n"}]
    statuses = data_fetch.fetch(tmp_path, ["wikitext-2"], load=wikitext_hub(changed), checksums=wikitext_sums(),
                                echo=lines.append)
    assert [s.state for s in statuses] == ["missing"] * 3
    assert sum(line.startswith("FAILED") and "not the pinned" in line for line in lines) == 3
    folder = tmp_path / "wikitext-2"
    assert not folder.exists() or not any(folder.iterdir())


def test_fetch_replaces_a_corrupt_file(tmp_path):
    (tmp_path / "wikitext-2").mkdir()
    (tmp_path / "wikitext-2" / "train.txt").write_bytes(b"truncated")
    hub = wikitext_hub()
    data_fetch.fetch(tmp_path, ["wikitext-2"], load=hub, checksums=wikitext_sums(), echo=lambda line: None)
    assert (tmp_path / "wikitext-2" / "train.txt").read_bytes() == WIKI
    assert len(hub.calls) == 3


def test_the_fineweb_sample_comes_from_its_pinned_commit_not_the_hub(tmp_path):
    text = b"First document.\r\n\r\nSecond document."
    urls = []

    def download(url):
        urls.append(url)
        return text

    sums = {"fineweb-edu-sample/fineweb_edu.txt": sha(text)}
    statuses = data_fetch.fetch(tmp_path, ["fineweb-edu-sample"], load=FakeHub({}), download=download,
                                checksums=sums, echo=lambda line: None)
    assert statuses[0].state == "ok"
    assert urls == [data_fetch.FINEWEB_URL] and data_fetch.FINEWEB_COMMIT in urls[0]


def test_verify_names_missing_and_corrupt_files_and_the_fix(tmp_path):
    (tmp_path / "wikitext-2").mkdir()
    (tmp_path / "wikitext-2" / "train.txt").write_bytes(WIKI)
    (tmp_path / "wikitext-2" / "valid.txt").write_bytes(WIKI + b"extra")
    states = {s.name: s for s in data_fetch.verify(tmp_path, wikitext_sums())}
    assert states["wikitext-2/train.txt"].state == "ok"
    assert states["wikitext-2/valid.txt"].state == "corrupt" and "make data" in states["wikitext-2/valid.txt"].line()
    assert states["wikitext-2/test.txt"].state == "missing" and "make data" in states["wikitext-2/test.txt"].line()


def test_verify_cli_exit_status_and_one_error_line(tmp_path, monkeypatch, capsys):
    sums_file = tmp_path / "sums"
    sums_file.write_text("".join(f"{digest}  {name}\n" for name, digest in wikitext_sums().items()))
    monkeypatch.setattr(data_fetch, "CHECKSUMS", sums_file)
    data = tmp_path / "data"
    assert data_main(["verify", "--data-dir", str(data)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "3 file(s) missing or corrupt" in err[0] and "make data" in err[0]
    for name in ("train.txt", "valid.txt", "test.txt"):
        (data / "wikitext-2").mkdir(parents=True, exist_ok=True)
        (data / "wikitext-2" / name).write_bytes(WIKI)
    assert data_main(["verify", "--data-dir", str(data)]) == 0
    assert "3/3 files verified" in capsys.readouterr().out


def test_committed_checksums_cover_every_file_of_every_source():
    sums = data_fetch.read_checksums()
    expected = {f"{s.folder}/{name}" for s in data_fetch.SOURCES.values() for name in s.files}
    assert set(sums) == expected
    assert all(re.fullmatch(r"[0-9a-f]{64}", digest) for digest in sums.values())
    assert {name for files in data_fetch.CHAPTER_DATA.values() for name in files} <= expected


def test_every_chapter_that_reads_real_data_declares_it():
    chapters = list_chapters()
    assert set(data_fetch.CHAPTER_DATA) <= set(chapters)
    readers = ("sst2_experiment", "idea_experiment", "lora_experiment", "load_sst2", "load_corpus", "load_fineweb")
    for chapter in chapters:
        source = (REPO_ROOT / "notebooks" / f"{chapter}.py").read_text()
        if any(reader in source for reader in readers):
            assert chapter in data_fetch.CHAPTER_DATA, f"{chapter} reads a dataset but CHAPTER_DATA omits it"


def test_missing_for_chapters_lists_only_the_chapters_that_cannot_run(tmp_path):
    (tmp_path / "sst2").mkdir()
    for name in ("train.tsv", "dev.tsv"):
        (tmp_path / "sst2" / name).write_text("x")
    missing = data_fetch.missing_for_chapters(["01_feature_bank", "05_sst2", "06_idea_gating"], tmp_path)
    assert missing == {"06_idea_gating": ["wikitext-2/train.txt", "wikitext-2/valid.txt", "wikitext-2/test.txt"]}


def test_unknown_folder_is_a_one_line_value_error(tmp_path):
    with pytest.raises(ValueError, match=r"unknown data folder 'imdb'; choose from: sst2"):
        data_fetch.fetch(tmp_path, ["imdb"], checksums={})


def test_data_needing_tests_skip_with_the_missing_files_and_make_data(tmp_path):
    """What `make test` does on a clone without data: the needs_data marker and fixture skip, with the reason."""
    import os
    import subprocess
    import sys

    (tmp_path / "conftest.py").write_text((REPO_ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "test_uses_data.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.needs_data('05_sst2')\n"
        "def test_marked():\n    raise AssertionError('ran without data')\n\n"
        "def test_fixture(needs_data):\n    needs_data('wikitext-2/train.txt')\n    raise AssertionError('ran')\n\n"
        "def test_plain():\n    assert True\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "SEMLM_DATA_DIR": str(empty), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "1 passed, 2 skipped" in done.stdout
    assert "missing data: sst2/train.tsv, sst2/dev.tsv (run `make data`" in done.stdout
    assert "missing data: wikitext-2/train.txt (run `make data`" in done.stdout


def test_present_files_whose_hash_differs_are_named(tmp_path):
    (tmp_path / "sst2").mkdir()
    (tmp_path / "sst2" / "train.tsv").write_bytes(SST2_TRAIN_BYTES)
    sums = {"sst2/train.tsv": sha(SST2_TRAIN_BYTES), "sst2/dev.tsv": sha(b"x")}
    assert data_fetch.differing_for_chapters(["05_sst2"], tmp_path, sums) == []
    (tmp_path / "sst2" / "dev.tsv").write_bytes(b"a local edit")
    assert data_fetch.differing_for_chapters(["01_feature_bank", "05_sst2"], tmp_path, sums) == ["sst2/dev.tsv"]


def test_an_unreachable_hub_costs_its_folders_one_line_each_and_the_other_sources_still_come(tmp_path):
    text = b"First document.\r\n\r\nSecond document."
    hub, lines = wikitext_hub(), []
    sums = {**wikitext_sums(), "fineweb-edu-sample/fineweb_edu.txt": sha(text)}
    probe = lambda url: "huggingface.co unreachable (timeout)" if "huggingface" in url else ""  # noqa: E731
    statuses = data_fetch.fetch(tmp_path, ["wikitext-2", "fineweb-edu-sample"], load=hub, download=lambda url: text,
                                checksums=sums, echo=lines.append, probe=probe)
    assert hub.calls == []  # no retries against a host that did not answer the probe
    assert [line for line in lines if line.startswith("FAILED")] == [
        "FAILED   wikitext-2: huggingface.co unreachable (timeout); nothing fetched (check the network, then run "
        "`make data` again)"]
    assert {s.name: s.state for s in statuses}["fineweb-edu-sample/fineweb_edu.txt"] == "ok"


def test_a_failing_dataset_does_not_stop_the_others_and_the_command_exits_non_zero(tmp_path, monkeypatch, capsys):
    def load(repository, config, split):
        if repository == "nyu-mll/glue":
            raise ConnectionError("503 Service Unavailable\n(retrying)")
        return HUB_WIKI

    monkeypatch.setattr(data_fetch, "_load_hub", load)
    monkeypatch.setattr(data_fetch, "read_checksums", lambda path=None: {**wikitext_sums(),
                                                                        "sst2/train.tsv": sha(SST2_TRAIN_BYTES)})
    status = data_main(["fetch", "--data-dir", str(tmp_path), "--only", "sst2", "wikitext-2"])
    out = capsys.readouterr()
    assert status == 1
    assert "FAILED   sst2/train.tsv: ConnectionError: 503 Service Unavailable (retrying)" in out.out
    assert (tmp_path / "wikitext-2" / "train.txt").read_bytes() == WIKI  # fetched after sst2 failed
    assert len([line for line in out.err.splitlines() if line.startswith("error:")]) == 1


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(data_fetch.os, "replace", broken_replace)
    lines = []
    data_fetch.fetch(tmp_path, ["wikitext-2"], load=wikitext_hub(), checksums=wikitext_sums(), echo=lines.append)
    assert sum("No space left on device" in line for line in lines) == 3
    assert list((tmp_path / "wikitext-2").iterdir()) == []


def test_the_pinned_hashes_and_domain_lists_are_package_data():
    """A non-editable install (a hosted notebook) carries what the loaders and `make data` read."""
    import tomllib

    import semlm
    from semlm.idea.generation import DOMAINS_DIR

    package = REPO_ROOT / "lib" / "semlm"
    assert data_fetch.CHECKSUMS.parent == package / "data" and data_fetch.CHECKSUMS.is_file()
    assert DOMAINS_DIR.parent == package / "data" and any(DOMAINS_DIR.glob("*.txt"))
    assert str(REPO_ROOT) not in str(data_fetch.CHECKSUMS.relative_to(semlm.__path__[0]))
    shipped = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["semlm.data"]
    assert {"checksums.sha256", "domains/*.txt"} <= set(shipped)


def test_offline_fetch_says_each_failure_once_and_an_optional_folder_asked_for_fails(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(data_fetch, "reachable", lambda url: "huggingface.co unreachable (gaierror)")
    assert data_main(["fetch", "--data-dir", str(tmp_path)]) == 1
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert len(lines) == len(data_fetch.SOURCES) + 1  # one FAILED line per folder, then the summary
    assert all(line.startswith("FAILED") for line in lines[:-1]) and "make data`" not in out.err
    assert len(out.err.strip().splitlines()) == 1
    # the book treats the phrase trees as optional, but a user who asks for them and gets nothing must know
    assert data_main(["fetch", "--data-dir", str(tmp_path), "--only", "sst-phrases"]) == 1
    assert "error: 3 file(s) not fetched (sst-phrases)" in capsys.readouterr().err
