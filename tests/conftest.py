import pytest
import torch

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

    from semlm.sitecheck import find_chromium

    path = find_chromium()
    if path is None and shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
                       capture_output=True, timeout=600)
        path = find_chromium()
    if path is None:
        pytest.skip("Chromium is not installed and could not be installed (apt-get install chromium)")
    return path
