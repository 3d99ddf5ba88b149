"""The README runs as written and every path the pages name exists (issue 49).

A path here is a backticked token or a link target that either ends in a file suffix the repository uses or starts
with a folder that exists at the repository root or in ``lib/semlm`` (so ``str_low/med/high`` is prose, while
``data/checksums.sha256`` must exist). It is resolved from the repository root, then from ``lib/semlm``, then, for
``book/recorded/`` rows that name a file of their own folder, from that folder. Placeholders (``<...>``), globs,
URLs, environment variables, home and temporary folders and ``book/_build/...`` (written by a build) are skipped.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "lib" / "semlm"
SUFFIXES = (".py", ".md", ".json", ".jsonl", ".yml", ".yaml", ".toml", ".txt", ".sha256", ".tsv", ".ipynb", ".cfg",
            ".log", ".lock", ".safetensors")
PAGES = [REPO / "README.md", *sorted((REPO / "book").glob("*.md")), REPO / "Makefile", REPO / "environment.yml",
         *sorted((REPO / "notebooks").glob("*.py"))]
TOKEN = re.compile(r"`([^`\s]+)`|\]\(([^)\s]+)\)")
SKIP = re.compile(r"[<>*?{}$~]|://|^#|^/tmp|^/dev|book/_build|^exported/|^\.venv/|^\.\.?/?$")


def _named(text: str) -> list[str]:
    out = []
    for match in TOKEN.finditer(text):
        token = (match.group(1) or match.group(2)).strip().rstrip(".,:;")
        token = token.split("::")[0].split("#")[0]
        if not token or SKIP.search(token):
            continue
        first = token.lstrip("./").split("/")[0]
        looks_like_path = token.endswith(SUFFIXES) or ("/" in token and (
            (REPO / first).exists() or (LIB / first).exists()))
        if looks_like_path:
            out.append(token)
    return out


#: Bare file names that name no file of this repository: the authors' files (their repositories, which the book
#: cites and never copies) and what an export writes.
ELSEWHERE = {"SemanticFusion.py", "SemanticFusion.ipynb", "train.py", "evaluate.py", "data.py", "model.py",
             "config.json"}


def _exists(token: str, page: Path) -> bool:
    if "/" not in token:  # a bare file name: some file of the repository has it, or it is named elsewhere
        return token in ELSEWHERE or any(p.name == token for p in REPO.rglob(token) if ".git" not in p.parts)
    return any((base / token).exists() for base in (REPO, LIB, page.parent)) or (LIB / token.removeprefix(
        "semlm/")).exists()


def test_named_paths_exist():
    missing = {}
    for page in PAGES:
        text = page.read_text()
        bad = sorted({t for t in _named(text) if not _exists(t, page)})
        if bad:
            missing[str(page.relative_to(REPO))] = bad
    assert not missing, f"paths named in the pages that do not exist: {missing}"


def test_the_path_rule_sees_paths_and_not_prose():
    assert _named("see `lib/semlm/data/checksums.sha256` and `data/checksums.sha256` and [x](book/about.md)") == [
        "lib/semlm/data/checksums.sha256", "data/checksums.sha256", "book/about.md"]
    assert _named("`str_low/med/high`, `tokens/s`, `<profile>/x.json`, `book/_build/metrics/a.json`, "
                  "`https://x.org/a.md`, `$SEMLM_DATA_DIR/x.txt`") == []
    assert _exists("data/checksums.sha256", REPO / "README.md")  # resolved from lib/semlm, as the rule says
    assert not _exists("data/nothing.sha256", REPO / "README.md") and not _exists("tests/test_x.py", REPO / "x")


def _bash_lines(text: str) -> list[str]:
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        lines += [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    return lines


def test_readme_runs_as_written():
    """Every README command: a make target that exists, a ``python -m semlm...`` subcommand that accepts ``--help``
    and every flag the line gives it, and files that exist. The export command and the Python block run as written
    in tests/book/test_export.py::test_readme_transformers_snippet."""
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    lines = _bash_lines((REPO / "README.md").read_text())
    assert lines
    for line in lines:
        words = line.split()
        if words[0] == "make":
            target = next(w for w in words[1:] if "=" not in w)
            assert target in targets, f"README: `{line}`: no make target {target!r}"
        elif words[0] == "bash":
            assert (REPO / words[1]).is_file(), f"README: `{line}`: no {words[1]}"
        elif words[0] == ".venv/bin/python" and words[1] == "-m":
            module, rest = words[2], words[3:]
            sub = [rest[0]] if rest and not rest[0].startswith("-") else []
            done = subprocess.run([sys.executable, "-m", module, *sub, "--help"], capture_output=True, text=True,
                                  cwd=REPO, timeout=300)
            assert done.returncode == 0, f"README: `{line}`: --help failed: {done.stderr[-500:]}"
            for flag in (w for w in rest if w.startswith("--")):
                assert flag in done.stdout, f"README: `{line}`: {module} {' '.join(sub)} has no {flag}"
        elif words[0] in (".venv/bin/jupytext", ".venv/bin/papermill"):
            for word in words[1:]:
                if word.endswith(".py") and not word.startswith("/tmp"):
                    assert (REPO / word).is_file(), f"README: `{line}`: no {word}"
        else:
            pytest.fail(f"README: `{line}`: a command this test does not know how to check; teach it")
