import pytest
import torch

from semlm.data.fetch import CHAPTER_DATA, missing_files
from semlm.data.synthetic import LEXICON
from semlm.data.vocab import Vocabulary


@pytest.fixture(scope="session")
def vocab() -> Vocabulary:
    return Vocabulary.build(LEXICON)


@pytest.fixture(autouse=True)
def _single_thread_determinism():
    torch.manual_seed(0)
    yield


@pytest.fixture(scope="session")
def chromium() -> str:
    """Headless Chromium for the rendered-site checks: found on PATH, or installed from the Debian
    package ``chromium`` when the tests run as root with apt (CI); otherwise the test is skipped."""
    import os
    import shutil
    import subprocess

    from semlm.book.sitecheck import find_chromium

    path = find_chromium()
    if path is None and shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
                       capture_output=True, timeout=600)
        path = find_chromium()
    if path is None:
        pytest.skip("Chromium is not installed and could not be installed (apt-get install chromium)")
    return path


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "needs_data(*files): the test reads these dataset files (folder/file under SEMLM_DATA_DIR, or a "
        "chapter name from semlm.data.fetch.CHAPTER_DATA); skipped with the missing files and `make data` if absent")


def data_skip_reason(names) -> str | None:
    """Why a test that reads ``names`` (files, or chapters whose files count) cannot run, or None."""
    files = [file for name in names for file in (CHAPTER_DATA.get(name, ()) if "/" not in name else (name,))]
    missing = missing_files(dict.fromkeys(files))
    return f"missing data: {', '.join(missing)} (run `make data` or set SEMLM_DATA_DIR)" if missing else None


def pytest_runtest_setup(item):
    for marker in item.iter_markers("needs_data"):
        reason = data_skip_reason(marker.args)
        if reason:
            pytest.skip(reason)


@pytest.fixture
def needs_data():
    """``needs_data("sst2/train.tsv", "06_idea_gating")`` inside a test: skip it with the reason if a file is missing."""

    def check(*names):
        reason = data_skip_reason(names)
        if reason:
            pytest.skip(reason)

    return check
