"""No record names the folders of the machine that wrote it (issue 49): recorded files and a smoke build's metrics
hold paths relative to the data folder (``$SEMLM_DATA_DIR``) or the repository, never absolute ones."""

from pathlib import Path

from semlm.book.recorded import TEXT_SUFFIXES
from semlm.data.paths import REPO_ROOT, absolute_paths, data_dir, portable_path, portable_text

RECORDED = Path(__file__).resolve().parents[2] / "book" / "recorded"


def test_the_pattern_finds_machine_paths_and_nothing_else():
    assert absolute_paths('"source": "/work/shared/data/x.txt"') and absolute_paths("in /home/me/semlm/lib")
    assert absolute_paths("installed into /tmp/site") and absolute_paths(" /opt/torch/.venv/bin/python")
    assert not absolute_paths("https://github.com/a/b and 12 tokens/s, gated / baseline, $SEMLM_DATA_DIR/x/y")
    assert not absolute_paths("<site-packages>/torch/nn and /usr/lib/python3 and ./lib/semlm and ~/data/x")


def test_no_absolute_paths_in_records():
    found = {}
    for path in sorted(p for p in RECORDED.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES):
        hits = absolute_paths(path.read_text())
        if hits:
            found[str(path.relative_to(RECORDED))] = hits[:2]
    assert not found, (f"{len(found)} recorded files name machine folders (mend them with `python -m "
                       f"semlm.book.recorded mend-paths`): {found}")


def test_portable_paths_name_the_data_folder_and_the_repository():
    assert portable_path(data_dir() / "fineweb-edu-sample" / "fineweb_edu.txt") == \
        "$SEMLM_DATA_DIR/fineweb-edu-sample/fineweb_edu.txt"
    assert portable_path(REPO_ROOT / "lib" / "semlm" / "x.py") == "lib/semlm/x.py"
    assert portable_text(f"repo {REPO_ROOT}, home {Path.home()}/x") == "repo ., home ~/x"
    assert not absolute_paths(portable_text("at /work/main/lib/semlm and /opt/torch/.venv/lib/python3.12/"
                                            "site-packages/torch and /tmp/site/x"))
