"""A chapter opened and saved unchanged in JupyterLab stays byte-identical (issue 49).

JupyterLab reads and writes the chapters through jupytext's contents manager, configured by jupytext.toml and by each
chapter's header. Here that same manager (the asynchronous one jupyter_server uses) opens every chapter as a notebook
and saves it, twice, in a copy of the repository's layout: the .py must not change by a byte (no jupytext version lines
added), and the paired .ipynb appears beside it (git ignores it).
"""

import asyncio
import shutil
from pathlib import Path

import pytest

from semlm.data.paths import REPO_ROOT

CHAPTERS = sorted(path.name for path in (REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


@pytest.fixture(scope="module")
def lab_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    shutil.copy2(REPO_ROOT / "jupytext.toml", root / "jupytext.toml")
    (root / "notebooks").mkdir()
    for name in CHAPTERS:
        shutil.copy2(REPO_ROOT / "notebooks" / name, root / "notebooks" / name)
    return root


async def _open_and_save(root: Path, path: str) -> None:
    from jupytext import AsyncTextFileContentsManager

    manager = AsyncTextFileContentsManager(root_dir=str(root))
    model = await manager.get(path, content=True, type="notebook")
    assert model["type"] == "notebook" and model["content"]["cells"]
    await manager.save(model, path)


@pytest.mark.parametrize("name", CHAPTERS)
def test_lab_save_leaves_chapter_unchanged(lab_root, name):
    source = (REPO_ROOT / "notebooks" / name).read_bytes()
    for _ in range(2):  # the first save writes the paired notebook; the second reads from the pair
        asyncio.run(_open_and_save(lab_root, f"notebooks/{name}"))
        saved = (lab_root / "notebooks" / name).read_bytes()
        assert saved == source, f"saving {name} unchanged in JupyterLab rewrote it (compare its header)"
    assert (lab_root / "notebooks" / name).with_suffix(".ipynb").is_file()
