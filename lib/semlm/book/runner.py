"""Build the book: execute every chapter with papermill, then render the HTML with Jupyter Book.

    python -m semlm.book run --profile {smoke,cpu,paper} [--only CHAPTER] [--html] [--build-dir DIR]
                             [--fresh] [--no-solutions] [--allow-downloads]

Each chapter, the jupytext file ``notebooks/NN_name.py``, runs with ``profile`` as its papermill parameter; its
notebook replaces ``<build>/executed/<chapter>.ipynb`` only when every cell ran (a failing chapter's partial notebook
is kept as ``<chapter>.failed.ipynb``), tidied to read like a book page (:func:`tidy_executed_notebook`). Chapters
whose data files (:data:`semlm.data.fetch.CHAPTER_DATA`) are missing are skipped, in one line and in the HTML;
``--only`` such a chapter fails at once. The HTML is built from a staged copy of the book (``<build>/source/``, with
a local MathJax: the book reads offline) and replaces ``<build>/html`` only when Jupyter Book succeeds.

SIGTERM or Ctrl-C stops the build and every process it started (the papermill kernel, its worker pools).
Exit status: 0 on success, 1 when a chapter or the HTML build fails, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import psutil
import yaml

from semlm.book.chapter import ALLOW_MODIFIED_DATA, MODIFIED_DATA_MARK
from semlm.data.fetch import differing_for_chapters, missing_for_chapters
from semlm.data.paths import REPO_ROOT, data_dir

from semlm.book.cpumeter import CpuMeter
from semlm.book.report import parameter_assignments
# torch-free: the CLI's usage errors cost no torch import
from semlm.profiles import PROFILES, ProfileName, check_profile, cpu_bf16_setting
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
BOOK_DIR = REPO_ROOT / "book"
DEFAULT_BUILD_DIR = BOOK_DIR / "_build"
KERNEL_NAME = "python3"
#: Static folder of the staged source that holds MathJax; see the comment in _config.yml for
#: why it is not called ``_static``.
VENDOR_DIR = "_vendor"
PLACEHOLDER = """# {chapter} (not executed)

This chapter was not executed in this build; run `python -m semlm.book run --profile cpu`.
"""
SKIPPED_PAGE = """# {chapter} (skipped: data missing)

This build skipped this chapter because the data files it reads were not found:
{files}.

Run `make data` (it downloads them and checks their SHA-256 against `lib/semlm/data/checksums.sha256`),
or point `SEMLM_DATA_DIR` at a folder that has them (see `data/README.md`); then rebuild.
"""
SKIPPED_NOTE = """
```{{admonition}} Chapters skipped in this build
:class: warning
{lines}

Run `make data` to fetch the missing files (see `data/README.md`), then rebuild.
```
"""
SKIPPED_FILE = "skipped.json"
PUBLISHED_NOTE = """*This notebook is generated from `notebooks/{chapter}.py` of {url}. It imports the
`semlm` library of that repository: clone it and run `make lab` (pinned environment), or in a
hosted notebook run `%pip install "semlm @ git+{url}"` first. The `parameters` cell below
picks the scale: `profile = "smoke"` runs in seconds.*"""
PUBLISHED_NOTE_NO_URL = """*This notebook is generated from `notebooks/{chapter}.py` of the repository this book was
built from. It imports that repository's `semlm` library: clone it and run `make lab` (pinned
environment). The `parameters` cell below picks the scale: `profile = "smoke"` runs in seconds.*"""


def staged_config(config: dict) -> dict:
    """``_config.yml`` as the build uses it: without a repository URL, no repository, issues or launch
    buttons (nothing may point at a placeholder)."""
    if (config.get("repository") or {}).get("url"):
        return config
    html = {**config.get("html", {}), "use_repository_button": False, "use_issues_button": False,
            "use_edit_page_button": False}
    launch = {key: "" if key.endswith("_url") else value for key, value in config.get("launch_buttons", {}).items()}
    return {**config, "html": html, "launch_buttons": {**launch, "thebe": False}}


class BookError(Exception):
    """A failure shown to the user as one ``error:`` line; ``exit_code`` is the CLI's status."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


# --- chapters ---------------------------------------------------------------------------------


def list_chapters() -> list[str]:
    """Chapter names (file stems of ``notebooks/NN_name.py``), in reading order."""
    return sorted(path.stem for path in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.py"))


def resolve_chapter(name: str, chapters: list[str]) -> str:
    """The chapter meant by ``name``: a chapter name, with or without ``.py``, or a unique prefix."""
    name = Path(name).name.removesuffix(".py")
    matches = [name] if name in chapters else [chapter for chapter in chapters if chapter.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    choices = ", ".join(chapters) or f"none found in {NOTEBOOKS_DIR}"
    problem = "ambiguous" if matches else "unknown"
    raise BookError(f"{problem} chapter {name!r}; choose one of: {choices}", exit_code=2)


def check_build_settings(profile: str) -> ProfileName:
    """A known profile (:func:`semlm.profiles.check_profile`, returned checked) and a valid ``SEMLM_CPU_BF16`` (the
    precision paper A's ``cpu`` runs take), as usage errors (exit code 2)."""
    try:
        cpu_bf16_setting()
        return check_profile(profile)
    except ValueError as exc:
        raise BookError(str(exc), exit_code=2) from None


# --- executing chapters -----------------------------------------------------------------------


@contextlib.contextmanager
def chapter_environment(build_dir: Path, allow_downloads: bool, allow_modified_data: bool = False):
    """Set the variables the chapters' kernels inherit, for the duration of the build only (restored afterwards,
    so ``run()`` called in-process by tests has no side effects)."""
    from semlm.book.display import STARTUP

    startup = build_dir / "ipython" / "profile_default" / "startup" / "00-semlm-display.py"
    startup.parent.mkdir(parents=True, exist_ok=True)
    startup.write_text(STARTUP)
    data = os.environ.get("SEMLM_DATA_DIR")
    updates = {"SEMLM_METRICS_DIR": str(build_dir / "metrics"), "SEMLM_RUNS_DIR": str(build_dir / "runs"),
               "SEMLM_BUILD_DIR": str(build_dir),
               "TQDM_DISABLE": "1",  # progress bars are for people watching a run, noise in a rendered page
               # A kernel's OpenMP threads sleep when they wait instead of spinning: beside the one-thread training
               # processes, spinning threads burnt 4-7 times the CPU of the work itself (same threads, same numbers).
               "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
               "IPYTHONDIR": str(build_dir / "ipython"),  # glued numpy numbers render (semlm.book.display)
               # the kernels run in the repository root, not in the caller's cwd
               **({"SEMLM_DATA_DIR": str(Path(data).expanduser().resolve())} if data else {}),
               # the loaders' own opt-in (WikiText-103, FineWeb-Edu, Mistral), else the Hub's offline switches:
               # a chapter must never fetch silently
               **({"SEMLM_ALLOW_DOWNLOADS": "1"} if allow_downloads else
                  dict.fromkeys(("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"), "1")),
               **({ALLOW_MODIFIED_DATA: "1"} if allow_modified_data else {})}
    with mock.patch.dict(os.environ, updates):
        yield


def ensure_kernel() -> None:
    """Make the ``python3`` kernel run this interpreter (this venv's semlm and pins): if a kernelspec from elsewhere
    on the Jupyter path would start another Python, or there is none, install one under ``sys.prefix``."""
    if _kernel_python()[1]:
        return
    install = subprocess.run([sys.executable, "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL_NAME],
                             capture_output=True, text=True)
    if install.returncode != 0:
        raise BookError(f"could not install the Jupyter kernel {KERNEL_NAME!r}: "
                        f"{_last_meaningful_line(install.stderr)}")
    found, ours = _kernel_python()
    if not ours:
        raise BookError(f"Jupyter kernel {KERNEL_NAME!r} starts {found}, not {sys.executable}; "
                        "remove that kernelspec (see `jupyter kernelspec list`) or set JUPYTER_PREFER_ENV_PATH=1")


def _kernel_python() -> tuple[str | None, bool]:
    """The interpreter the ``python3`` kernel would start (None: no such kernel; a bare ``python``/``python3``/
    ``python3.X`` command starts ``sys.executable``) and whether it lives in this interpreter's bin directory."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        command = KernelSpecManager().get_kernel_spec(KERNEL_NAME).argv[0]
    except NoSuchKernel:
        return None, False
    bare = {"python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info[:2])}
    python = sys.executable if command in bare else command
    return python, Path(os.path.abspath(python)).parent == Path(os.path.abspath(sys.executable)).parent


def chapter_notebook(chapter: str):
    """The chapter's jupytext source ``notebooks/<chapter>.py`` as a notebook for the ``python3`` kernel."""
    import jupytext

    notebook = jupytext.read(NOTEBOOKS_DIR / f"{chapter}.py")
    notebook.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": "Python 3", "language": "python"}
    return notebook


def execute_chapter(chapter: str, profile: str, build_dir: Path) -> Path:
    """Execute one chapter; its notebook replaces ``<build>/executed/<chapter>.ipynb`` only if every cell ran."""
    # Imported here: together about two seconds that the CLI's usage errors should not cost.
    import nbformat
    import papermill
    from traitlets.config import Config

    work, executed = build_dir / "work", build_dir / "executed"
    work.mkdir(parents=True, exist_ok=True)
    executed.mkdir(parents=True, exist_ok=True)
    source, running = work / f"{chapter}.source.ipynb", work / f"{chapter}.ipynb"
    nbformat.write(chapter_notebook(chapter), source)
    running.unlink(missing_ok=True)
    failed = executed / f"{chapter}.failed.ipynb"
    # A cells-executed bar on a terminal (how far along a long chapter is); nothing in logs. ``disable=False``
    # is explicit because the runner sets TQDM_DISABLE for the kernels' bars.
    progress = sys.stderr.isatty() and {"desc": f"  {chapter}", "disable": False, "leave": False, "dynamic_ncols": True}
    try:  # the kernel's sockets encrypted (CurveZMQ) where it can: else ipykernel warns about plain-text TCP
        papermill.execute_notebook(str(source), str(running), parameters={"profile": profile},
                                   kernel_name=KERNEL_NAME, cwd=str(REPO_ROOT), progress_bar=progress, log_output=False,
                                   config=Config({"KernelManager": {"transport_encryption": "auto"}}))
    except Exception as exc:  # a failing cell, or a kernel that died or never started
        partial = ""
        if running.exists():  # papermill wrote a partially executed notebook
            running.replace(failed)
            partial = f" (partial notebook: {_show(failed)})"
        # for a failing cell, the error raised in the kernel, on one line
        name, message = getattr(exc, "ename", type(exc).__name__), getattr(exc, "evalue", str(exc))
        raise BookError(f"chapter {chapter} failed: {name}: {' '.join(str(message).split())}{partial}") from exc
    failed.unlink(missing_ok=True)
    finished = nbformat.read(running, as_version=4)
    nbformat.write(tidy_executed_notebook(finished, build_dir), running)
    return running.replace(executed / f"{chapter}.ipynb")


# --- making an executed notebook read like a page -----------------------------------------------


def tidy_executed_notebook(notebook, build_dir: Path):
    """Hide papermill's injected cell, show the run's values under the parameters cell (``run with:
    profile='smoke', seed=111``: its defaults and papermill's injected values), and rewrite this machine's absolute
    paths in outputs and papermill's metadata: the build folder (repository-relative, else ``<build dir>``), the data
    folder and the repository (``<repo>/x`` -> ``x``), longest first."""
    import nbformat

    cells = {tag: cell for cell in notebook.cells for tag in cell.get("metadata", {}).get("tags", [])}
    values = {**parameter_assignments(cells["parameters"].source if "parameters" in cells else ""),
              **parameter_assignments(cells["injected-parameters"].source if "injected-parameters" in cells else "")}
    line = "run with: " + ", ".join(f"{name}={value}" for name, value in values.items()) if values else None
    build = Path(build_dir).resolve()
    shown_build = str(build.relative_to(REPO_ROOT)) if build.is_relative_to(REPO_ROOT) else "<build dir>"
    shown_data = "$SEMLM_DATA_DIR" if os.environ.get("SEMLM_DATA_DIR") else "data"
    pairs = sorted([(str(build), shown_build), (str(data_dir()), shown_data), (str(REPO_ROOT), ".")],
                   key=lambda pair: -len(pair[0]))

    def clean(text: str) -> str:
        for absolute, shown in pairs:
            text = text.replace(absolute + "/", "" if shown == "." else shown + "/").replace(absolute, shown)
        return text

    for cell in notebook.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
        if "parameters" in tags and line is not None and cell.cell_type == "code":
            cell.outputs = [o for o in cell.get("outputs", []) if not (
                o.get("output_type") == "stream" and str(o.get("text", "")).startswith("run with: "))]
            cell.outputs.insert(0, nbformat.v4.new_output("stream", name="stdout", text=line + "\n"))
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = clean(output["text"] if isinstance(output["text"], str) else "".join(output["text"]))
            for mime, value in output.get("data", {}).items():
                if (mime.startswith("text/") or mime == "application/json") and isinstance(value, str):
                    output["data"][mime] = clean(value)
            if "traceback" in output:
                output["traceback"] = [clean(entry) for entry in output["traceback"]]
    papermill_meta = notebook.metadata.get("papermill", {})
    for key in ("input_path", "output_path", "cwd"):
        if isinstance(papermill_meta.get(key), str):
            papermill_meta[key] = clean(papermill_meta[key])
    return notebook


#: An exercise's worked solution in a chapter's markdown: ``<details><summary>Solution</summary>`` up to its
#: ``</details>`` at the same indentation (HTML that both JupyterLab and the book render collapsed).
SOLUTION_BLOCK = re.compile(r"^([ \t]*)<details><summary>Solution</summary>\n.*?^\1</details>[ \t]*\n?", re.S | re.M)
STUDENT_NOTE = "*Solutions are left out of this copy of the book (a student build, `--no-solutions`).*"


def strip_solutions(notebook) -> int:
    """Remove every worked solution from ``notebook``'s markdown cells (hints stay); returns how many went."""
    removed = 0
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source, n = SOLUTION_BLOCK.subn("", cell.source)
            removed += n
    return removed


def write_published_notebooks(html_dir: Path, chapters: list[str], solutions: bool = True) -> None:
    """``<html>/notebooks/<chapter>.ipynb``: each chapter from its .py source, without outputs (launch/download);
    without the exercises' solutions unless ``solutions``."""
    import nbformat

    config = yaml.safe_load((REPO_ROOT / "_config.yml").read_text()) or {}
    repository = str((config.get("repository") or {}).get("url") or "").strip()  # what links and buttons point at
    note = PUBLISHED_NOTE if repository else PUBLISHED_NOTE_NO_URL
    (html_dir / "notebooks").mkdir(parents=True, exist_ok=True)
    for chapter in chapters:
        notebook = chapter_notebook(chapter)
        notebook.metadata.pop("jupytext", None)
        notebook.cells.insert(0, nbformat.v4.new_markdown_cell(note.format(chapter=chapter, url=repository)))
        if not solutions:
            strip_solutions(notebook)
        nbformat.write(notebook, html_dir / "notebooks" / f"{chapter}.ipynb")


# --- the HTML ---------------------------------------------------------------------------------


def stage_sources(build_dir: Path, solutions: bool = True) -> Path:
    """Assemble ``<build>/source/``, what Jupyter Book builds: a toc entry without an executed notebook gets a
    placeholder page; an executed chapter the toc leaves out (silently, in Jupyter Book) is reported; a chapter of
    ``<build>/skipped.json`` gets a page naming its missing files, and the first page lists them. Unless
    ``solutions``, the notebooks lose their solutions."""
    import nbformat

    skipped = read_skipped(build_dir)
    source = build_dir / "source"
    shutil.rmtree(source, ignore_errors=True)
    (source / "book").mkdir(parents=True)
    (source / "notebooks").mkdir()
    shutil.copy2(REPO_ROOT / "_toc.yml", source / "_toc.yml")
    config = staged_config(yaml.safe_load((REPO_ROOT / "_config.yml").read_text()) or {})
    marked = modified_data_marks(build_dir)
    if marked:  # every page of a build on modified data says so, above its numbers
        files = sorted({name for names in marked.values() for name in names})
        config["html"] = {**config.get("html", {}), "announcement": f"{MODIFIED_DATA_MARK}: {', '.join(files)} "
                                                                   f"(chapters {', '.join(marked)}); the numbers of "
                                                                   f"this build are not the book's"}
    (source / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    for page in sorted([*BOOK_DIR.glob("*.md"), *BOOK_DIR.glob("*.bib")]):
        shutil.copy2(page, source / "book" / page.name)
    root, toc = toc_pages(source / "_toc.yml")
    for notebook in sorted((build_dir / "executed").glob("*.ipynb")):
        if notebook.name.endswith(".failed.ipynb") or notebook.stem in skipped:
            continue
        if f"notebooks/{notebook.stem}" not in toc:
            print(f"note: {notebook.stem} is not in _toc.yml, so the HTML leaves it out")
        staged = shutil.copy2(notebook, source / "notebooks" / notebook.name)
        if not solutions and strip_solutions(page := nbformat.read(staged, as_version=4)):
            page.cells.append(nbformat.v4.new_markdown_cell(STUDENT_NOTE))  # the student build says so
            nbformat.write(page, staged)
    for entry in toc:
        page = source / entry
        missing = not any(page.with_name(page.name + suffix).exists() for suffix in (".ipynb", ".md"))
        if entry.startswith("notebooks/") and missing:
            text = (SKIPPED_PAGE.format(chapter=page.name, files=", ".join(f"`{f}`" for f in skipped[page.name]))
                    if page.name in skipped else PLACEHOLDER.format(chapter=page.name))
            page.with_name(page.name + ".md").write_text(text)
    root = source / f"{root}.md"
    if skipped and root.is_file():
        lines = "\n".join(f"* {chapter}: missing {', '.join(f'`{f}`' for f in files)}"
                          for chapter, files in skipped.items())
        text = root.read_text()
        heading_end = text.find("\n") + 1 if text.startswith("# ") else 0
        root.write_text(text[:heading_end] + SKIPPED_NOTE.format(lines=lines) + text[heading_end:])
    shutil.copytree(mathjax_dir(), source / VENDOR_DIR / "mathjax")
    shutil.copy2(BOOK_DIR / "semlm.css", source / VENDOR_DIR / "semlm.css")  # html_css_files
    return source


def read_skipped(build_dir: Path) -> dict[str, list[str]]:
    path = Path(build_dir) / SKIPPED_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def toc_pages(toc_path: Path) -> tuple[str, list[str]]:
    """A jb-book toc's ``root`` and every page it names (``root`` and ``file`` entries), at any depth."""

    def walk(node) -> list[str]:
        if isinstance(node, list):
            return [page for item in node for page in walk(item)]
        if isinstance(node, dict):
            own = [node[key] for key in ("root", "file") if key in node]
            return own + [page for value in node.values() for page in walk(value)]
        return []

    toc = yaml.safe_load(toc_path.read_text())
    return toc.get("root", ""), walk(toc)


def mathjax_dir() -> Path:
    """The es5 build of MathJax 3 shipped by the pinned ``django-static-mathjax`` wheel (package ``mathjax``)."""
    spec = importlib.util.find_spec("mathjax")
    locations = list(spec.submodule_search_locations or []) if spec else []
    es5 = Path(locations[0], "static", "mathjax", "es5") if locations else None
    if es5 is None or not (es5 / "tex-chtml.js").is_file():
        raise BookError("MathJax not found (python package django-static-mathjax, pinned in requirements.txt); "
                        "run `make venv`")
    return es5


def build_html(build_dir: Path, solutions: bool = True) -> Path:
    """Build the staged source with Jupyter Book; on success swap the result in as ``<build>/html`` (the student
    build, ``solutions`` False: ``<build>/html-student``, every worked solution left out)."""
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    if not jupyter_book.exists():
        raise BookError(f"jupyter-book not found next to {sys.executable}; run `make venv`")
    source, output, log = stage_sources(build_dir, solutions), build_dir / "jb", build_dir / "jupyter-book.log"
    shutil.rmtree(output, ignore_errors=True)  # a clean build: no stale pages or warnings hidden by caching
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run([str(jupyter_book), "build", str(source), "--path-output", str(output)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # jupyter-book's own CPU time (the benchmarks' picture)
    update_manifest(build_dir, html_cpu_seconds=round(after.ru_utime - before.ru_utime
                                                      + after.ru_stime - before.ru_stime, 1))
    output_text = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)  # Sphinx colours its output even into a pipe
    log.write_text(output_text)
    if result.returncode != 0:
        raise BookError(f"jupyter-book build failed: {_last_meaningful_line(output_text)} (full log: {_show(log)})")
    warnings = re.search(r"build succeeded, (\d+) warnings?", output_text)  # they do not fail the build
    print(f"jupyter-book: {int(warnings.group(1)) if warnings else 0} warning(s) (log: {_show(log)})")
    drop_duplicate_inline_scripts(output / "_build" / "html")
    write_published_notebooks(output / "_build" / "html", list_chapters(), solutions)
    # swapped in with two renames, so the old book stays until the new one is whole
    html = build_dir / ("html" if solutions else "html-student")
    old = html.with_name(html.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if html.exists():
        html.rename(old)
    (output / "_build" / "html").rename(html)
    shutil.rmtree(old, ignore_errors=True)
    return html / "index.html"


def drop_duplicate_inline_scripts(html_dir: Path) -> None:
    """Remove repeated identical inline ``<script>`` lines from every page (Jupyter Book 1.0.4 emits sphinx-thebe's
    ``const THEBE_JS_URL = ...`` twice per page: an error in every browser)."""
    for page in Path(html_dir).rglob("*.html"):
        lines, seen, kept = page.read_text(encoding="utf-8").splitlines(keepends=True), set(), []
        for line in lines:
            script = line.strip()
            if not (script.startswith("<script>") and script.endswith("</script>") and script in seen):
                seen.add(script)
                kept.append(line)
        if len(kept) < len(lines):
            page.write_text("".join(kept), encoding="utf-8")


def _last_meaningful_line(log: str) -> str:
    """The line of a failure log that names the problem: the last ``SomeError: message`` line of a
    traceback if there is one, else the last line with words in it (not a rule or a ``^`` marker)."""
    lines = [line.strip() for line in log.splitlines()]
    errors = [line for line in lines if re.match(r"[A-Za-z_][\w.]*(Error|Exception): ", line)]
    worded = [line for line in lines if re.search(r"[A-Za-z]{2}", line)]
    return (errors or worded or ["(no output)"])[-1]


def _show(path: Path) -> str:
    """``path`` relative to the cwd when it is under it (shorter messages), else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path.resolve())


# --- entry points -----------------------------------------------------------------------------


BUILD_LOCK = ".build.lock"  # in the build folder: one `run` writes a build folder at a time


@contextlib.contextmanager
def build_lock(build_dir: Path, wait: bool = True):
    """Hold ``<build>/.build.lock`` while a ``run`` writes the build folder: a second ``run`` waits, saying once which
    process holds it, or with ``wait`` False refuses in one line. The run cache keeps its per-run locks."""
    from filelock import FileLock, Timeout

    build_dir.mkdir(parents=True, exist_ok=True)
    lock, holder = FileLock(str(build_dir / BUILD_LOCK)), build_dir / (BUILD_LOCK + ".pid")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        who = holder.read_text().strip() if holder.is_file() else "another process"
        if not wait:
            raise BookError(f"{_show(build_dir)} is being built by {who}; wait for it, or give another --build-dir",
                            exit_code=2) from None
        print(f"waiting: {_show(build_dir)} is being built by {who} (one build per folder)", flush=True)
        lock.acquire()
    try:
        holder.write_text(f"process {os.getpid()} (python -m semlm.book run, started {time.strftime('%H:%M:%S')})")
        yield
    finally:
        holder.unlink(missing_ok=True)
        lock.release()


def run(profile: str, only: str | None = None, build_dir: Path | str | None = None, fresh: bool = False,
        html: bool = True, allow_downloads: bool = False, solutions: bool = True,
        allow_modified_data: bool = False, wait: bool = True) -> Path:
    """Execute the chapters (all, or ``only`` one, the whole book beside :func:`start_training_ahead`) with
    ``profile``, then build the HTML if ``html``. Returns the build directory (the book is
    ``<build>/html/index.html``); raises :class:`BookError` on usage errors (``exit_code`` 2) and failures (1)."""
    profile = check_build_settings(profile)
    data = os.environ.get("SEMLM_DATA_DIR")
    if data and not Path(data).expanduser().is_dir():  # a typo: say so before any chapter runs
        raise BookError(f"SEMLM_DATA_DIR={data} is not a directory; point it at the data folder "
                        "(see data/README.md) or unset it to use data/", exit_code=2)
    build_dir = Path(build_dir).resolve() if build_dir is not None else DEFAULT_BUILD_DIR
    wanted = [resolve_chapter(only, list_chapters())] if only is not None else list_chapters()
    missing = missing_for_chapters(wanted)
    differing = differing_for_chapters([chapter for chapter in wanted if chapter not in missing])
    if differing and not allow_modified_data:  # before any kernel starts or any folder is made; book.open() stops
        # a raw papermill run too
        one = len(differing) == 1
        raise BookError(f"{', '.join(differing)} in {_show(data_dir())} {'differs' if one else 'differ'} from the "
                        f"pinned release (lib/semlm/data/checksums.sha256); run `make data` to restore "
                        f"{'it' if one else 'them'}, or pass --allow-modified-data to run on "
                        f"{'it' if one else 'them'} with every number marked", exit_code=2)
    chapters = _chapters_with_data(build_dir, wanted, missing, only)
    if differing:
        print(f"{MODIFIED_DATA_MARK}: {', '.join(differing)}; every number of this build is marked", flush=True)
    with build_lock(build_dir, wait):  # one writer per build folder
        if fresh:
            shutil.rmtree(build_dir / "runs", ignore_errors=True)
        from_scratch = not any((build_dir / "runs").rglob("*.safetensors"))  # no trained model in the run cache
        meter = CpuMeter(include_self=True)
        with chapter_environment(build_dir, allow_downloads, bool(differing)), _stop_children_on_exit(meter), meter:
            ensure_kernel()
            ahead = start_training_ahead(profile, chapters, build_dir) if only is None else None
            try:
                for number, chapter in enumerate(chapters, 1):
                    _run_chapter(number, len(chapters), chapter, profile, build_dir)
                    if ahead is not None:  # the benchmarks chapter reads which models this build trained
                        ahead.record()
            finally:
                if ahead is not None:
                    ahead.finish()
            if html:
                print("jupyter-book: building HTML ...", flush=True)
                print(f"book: {_show(build_html(build_dir, solutions))}")
            else:
                print(f"executed notebooks: {_show(build_dir / 'executed')} (HTML not rebuilt; add --html)")
        manifest = read_manifest(build_dir)
        manifest.update(profile=profile, total_wall_seconds=round(meter.wall_seconds, 1), from_scratch=from_scratch,
                        **meter.summary(), chapters_run=chapters, complete=only is None and not missing and html,
                        modified_data={"mark": MODIFIED_DATA_MARK, "files": differing} if differing else None)
        unused = mark_used(manifest)
        _write_manifest(build_dir, manifest)
    for run in unused:  # trained or loaded for nothing: a declaration (semlm.book.plan) no chapter reads
        print(f"unused run: {run['experiment']}/{run['name']} seed {run['seed']} (no chapter asked for it)",
              file=sys.stderr, flush=True)
    scratch = "from scratch" if from_scratch else "with models from the run cache"
    print(f"build: {meter.wall_seconds:.0f} s {scratch}, cores {meter.utilisation:.0%} busy ({meter.cores} cores)",
          flush=True)
    return build_dir


def _chapters_with_data(build_dir: Path, chapters: list[str], skipped: dict[str, list], only: str | None) -> list[str]:
    """``chapters`` but those of ``skipped`` (``{chapter: missing files}``,
    :func:`semlm.data.fetch.missing_for_chapters`), which are said in one line (with ``--only``, a :class:`BookError`),
    kept in ``<build>/skipped.json``, their earlier metrics set aside as ``<chapter>.json.stale`` (the report never
    mixes builds)."""
    if skipped:
        files = sorted({name for names in skipped.values() for name in names})
        where = "SEMLM_DATA_DIR" if os.environ.get("SEMLM_DATA_DIR") else "data/"
        line = (f"missing data in {where}: {', '.join(files)} (needed by {', '.join(skipped)}); "
                "run `make data` or set SEMLM_DATA_DIR")
        if only is not None:
            raise BookError(line)
        print(f"skipping {len(skipped)} chapter(s): {line}", flush=True)
    build_dir.mkdir(parents=True, exist_ok=True)
    record = {**{chapter: files for chapter, files in read_skipped(build_dir).items() if chapter not in chapters},
              **skipped}
    path = build_dir / SKIPPED_FILE
    if record:
        path.write_text(json.dumps(record, indent=1))
    else:
        path.unlink(missing_ok=True)
    for chapter in skipped:
        metrics = build_dir / "metrics" / f"{chapter}.json"
        if metrics.exists():
            metrics.replace(metrics.with_name(f"{chapter}.json.stale"))
    return [chapter for chapter in chapters if chapter not in skipped]


def modified_data_marks(build_dir: Path) -> dict[str, list[str]]:
    """``{chapter: [files]}`` of this build's chapters that ran on data differing from the pinned release (their
    metrics carry ``modified_data``, :func:`semlm.book.chapter.check_data`)."""
    marks = {}
    for path in sorted((Path(build_dir) / "metrics").glob("*.json")):
        try:
            files = (json.loads(path.read_text()).get("modified_data") or {}).get("files")
        except (json.JSONDecodeError, AttributeError):
            continue
        if files:
            marks[path.stem] = files
    return marks


#: The log of the training ahead of the chapters and its run log, under ``<build>/work``.
AHEAD_LOG, AHEAD_RUN_LOG = "train-ahead.log", "train-ahead.runs.jsonl"


@dataclass
class TrainingAhead:
    """The training ahead of the chapters (:func:`start_training_ahead`): its process, the build it
    trains for and when it started (``time.time()``)."""

    process: subprocess.Popen
    build_dir: Path
    start: float

    def record(self, state: str | None = None) -> dict:
        """Write and return ``manifest["train_ahead"]``: its state (running, ok, failed or ``state``), wall
        seconds and the runs it trained so far (its run log)."""
        code = self.process.poll()
        state = state or ("running" if code is None else "ok" if code == 0 else "failed")
        log = self.build_dir / "work" / AHEAD_LOG
        end = log.stat().st_mtime if code is not None and log.is_file() else time.time()  # its last line, if it ended
        entry = run_entry(state, end - self.start, self.build_dir / "work" / AHEAD_RUN_LOG)
        return update_manifest(self.build_dir, train_ahead=entry)["train_ahead"]

    def finish(self) -> None:
        """After the chapters: stop it if it is still going (it trains only what the chapters declare, so it
        has finished unless a chapter failed) and record it in the manifest."""
        stopped = self.process.poll() is None
        if stopped:
            with contextlib.suppress(psutil.NoSuchProcess):
                root = psutil.Process(self.process.pid)
                stop_processes([root, *root.children(recursive=True)])
            self.process.wait()
        entry = self.record("stopped" if stopped else None)
        if entry["status"] != "ok":
            print(f"training beside the chapters {entry['status']}: see {_show(self.build_dir / 'work' / AHEAD_LOG)}",
                  flush=True)
        else:
            print(f"trained beside the chapters: {entry['runs']['trained']} models, {entry['runs']['loaded']} "
                  f"found in the cache ({entry['seconds']:.0f} s)", flush=True)


def start_training_ahead(profile: str, chapters: list[str], build_dir: Path) -> TrainingAhead | None:
    """Start ``python -m semlm.book plan --train`` for ``chapters``' declared runs beside the chapters (one pool of
    one-thread processes; a chapter that asks for a model being trained waits for it), or return None when none of
    them declares runs. Output: ``<build>/work/train-ahead.log``."""
    from semlm.book.plan import CHAPTERS

    update_manifest(build_dir, drop="train_ahead")  # an earlier build's
    wanted = [chapter for chapter in chapters if chapter in CHAPTERS]
    if not wanted:
        return None
    work = build_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    (work / AHEAD_RUN_LOG).unlink(missing_ok=True)
    env = {**os.environ, "SEMLM_RUN_LOG": str(work / AHEAD_RUN_LOG)}
    command = [sys.executable, "-m", "semlm.book", "plan", "--profile", profile, "--train", "--beside-chapters",
               "--chapters", ",".join(wanted)]
    with open(work / AHEAD_LOG, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(REPO_ROOT))
    print(f"training the models of {len(wanted)} chapters beside them (log: {_show(work / AHEAD_LOG)})", flush=True)
    return TrainingAhead(process, build_dir, time.time())


@contextlib.contextmanager
def _stop_children_on_exit(meter: CpuMeter):
    """Turn SIGTERM and SIGHUP into KeyboardInterrupt while the build runs, and on the way out end every process
    started below this one that is still alive (``meter``, entered inside this block, saw them all): the papermill
    kernel (its own session: a signal to our group misses it) and the worker pools it forked (orphans once it is
    killed)."""
    # SIGINT too: a process started in the background by a non-interactive shell (`nohup make test &`) inherits
    # it ignored, and Python then installs no KeyboardInterrupt handler.
    main_thread = threading.current_thread() is threading.main_thread()  # only it may set signal handlers
    # SIGHUP (the terminal closed) as well, unless it is ignored on purpose (`nohup`): the build stops, saying so
    hangup = (signal.SIGHUP,) if main_thread and signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN else ()
    previous = {signum: signal.signal(signum, _interrupted)
                for signum in (signal.SIGTERM, signal.SIGINT, *hangup)} if main_thread else {}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        stop_processes(meter.started_processes())


#: The loggers of the kernel client (papermill hands nbclient its own): once the build is interrupted, the kernel
#: it stops is expected to die, and "Kernel died while waiting for execute reply." is not news.
KERNEL_CLIENT_LOGGERS = ("papermill", "nbclient", "traitlets")


def _interrupted(signum, frame):
    """The build's signal handler: the kernel client falls silent before anything is stopped, then the interruption
    unwinds the build as Ctrl-C would (the one line is ``main``'s)."""
    import logging

    for name in KERNEL_CLIENT_LOGGERS:
        logging.getLogger(name).disabled = True
    raise KeyboardInterrupt


def stop_processes(processes, grace: float = 3.0) -> None:
    """SIGTERM ``processes`` (psutil), wait ``grace`` seconds, SIGKILL what is left."""
    for stop in (psutil.Process.terminate, psutil.Process.kill):
        for process in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                stop(process)
        _, processes = psutil.wait_procs(processes, timeout=grace)


MANIFEST_FILE = "manifest.json"


def read_manifest(build_dir: Path) -> dict:
    """The last builds' record: ``chapters`` (``{chapter: {profile, status, seconds, runs: {trained, resumed, loaded},
    run_list, cpu_seconds, cores, utilisation}}``), ``train_ahead`` (:func:`start_training_ahead`) and, once a ``run()``
    finished, ``total_wall_seconds`` (start to HTML), ``from_scratch`` (no model in the run cache at the start),
    ``cpu_seconds``, ``cores``, ``utilisation``, ``chapters_run`` and ``complete`` (every chapter and the HTML)."""
    path = Path(build_dir) / MANIFEST_FILE
    return json.loads(path.read_text()) if path.is_file() else {"chapters": {}}


def update_manifest(build_dir: Path, *, chapter: str | None = None, drop: str | None = None, **fields) -> dict:
    """Set ``fields`` as ``chapter``'s manifest entry (without ``chapter``: at its top level; ``drop`` removes a
    top-level key), written through a temporary file, and return them."""
    manifest = read_manifest(build_dir)
    manifest.pop(drop, None)
    if chapter is None:
        manifest.update(fields)
    else:
        manifest["chapters"][chapter] = fields
    _write_manifest(build_dir, manifest)
    return fields


def _write_manifest(build_dir: Path, manifest: dict) -> None:
    path = Path(build_dir) / MANIFEST_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1))
    tmp.replace(path)


def trained_model(run: dict) -> tuple:
    """The trained model a manifest run names: its ``model`` (the owner's run for a model shared between chapters,
    e.g. chapter 10's baseline is chapter 4's), else its own experiment, group, name and seed (older manifests)."""
    return tuple(run.get("model") or (run["experiment"], run["group"], run["name"], run["seed"]))


def mark_used(manifest: dict) -> list[dict]:
    """Give every run of ``manifest`` (the training pool's and each chapter's) ``used_by``: the chapters that asked
    for its model (trained it or loaded it), in the book's order. Returns the runs that no chapter asked for: training
    the build paid for and nothing it shows or judges read (:func:`run` names them)."""
    users: dict[tuple, list[str]] = {}
    for chapter, entry in manifest.get("chapters", {}).items():
        for run in entry.get("run_list", []):
            chapters = users.setdefault(trained_model(run), [])
            if chapter not in chapters:
                chapters.append(chapter)
    unused = []
    for entry in [manifest.get("train_ahead") or {}, *manifest.get("chapters", {}).values()]:
        for run in entry.get("run_list", []):
            run["used_by"] = users.get(trained_model(run), [])
            if not run["used_by"]:
                unused.append(run)
    return unused


def _run_log_lines(run_log: Path) -> list[dict]:
    return [json.loads(line) for line in run_log.read_text().splitlines() if line.strip()] \
        if run_log.is_file() else []


def run_entry(status: str, seconds: float, run_log: Path, meter: CpuMeter | None = None, **first) -> dict:
    """A manifest entry: ``first``, the ``status``, wall ``seconds`` and, from the run log that
    :mod:`semlm.core.runs` appended to, ``runs: {trained, resumed, loaded}``, ``run_list`` and (if any) the chapter's
    ``notices``; then the CPU use that ``meter`` (a finished :class:`~semlm.book.cpumeter.CpuMeter`) measured."""
    lines = _run_log_lines(run_log)
    # its runs (one line each, semlm.core.runs) and its notices (semlm.book.chapter.Chapter.notice), in order
    runs = [line for line in lines if "status" in line]
    notices = [line["notice"] for line in lines if "notice" in line]
    startup = [line["startup_cpu_seconds"] for line in lines if "startup_cpu_seconds" in line]
    kept = ("experiment", "name", "seed", "group", "status", "train_seconds", "cpu_seconds", "model")
    return {**first, "status": status, "seconds": round(seconds, 1),
            "runs": {state: sum(r["status"] == state for r in runs) for state in ("trained", "resumed", "loaded")},
            "run_list": [{k: r[k] for k in kept if k in r} for r in runs], **({"notices": notices} if notices else {}),
            **({"startup_cpu_seconds": startup[0]} if startup else {}), **(meter.summary() if meter else {})}


#: In a pipe or a log (CI, nohup), a chapter still running says so at least this often, in seconds.
HEARTBEAT_SECONDS = 60.0


def _progress(label: str, run_log: Path, started: float, stop: threading.Event, every: float) -> None:
    """Until ``stop``: a line per model the chapter's kernel trained (from its run log: name, seed, seconds) and per
    notice it gave, and every ``every`` seconds a heartbeat with the time so far and the models done (for a log, where
    papermill's bar does not show)."""
    shown, models, last = 0, 0, time.perf_counter()
    while True:
        done = stop.wait(min(every, 5.0))
        lines = _run_log_lines(run_log)
        for entry in lines[shown:]:
            if "notice" in entry:
                print(f"  {label}: {entry['notice']}", flush=True)
            if "status" not in entry:  # not a run: a notice, the kernel's start-up time
                continue
            seconds = entry.get("train_seconds")
            models += 1
            print(f"  {label}: {entry.get('status', 'done')} {entry.get('name')} seed {entry.get('seed')}"
                  + (f" ({seconds:.0f} s)" if isinstance(seconds, (int, float)) else ""), flush=True)
        shown = len(lines)
        if done:
            return
        if time.perf_counter() - last >= every:
            last = time.perf_counter()
            print(f"  {label}: still running, {last - started:.0f} s, {models} models done", flush=True)


def _run_chapter(number: int, total: int, chapter: str, profile: str, build_dir: Path) -> None:
    """Execute one chapter, printing ``[i/n] chapter ... ok (12.3 s; 2 models trained, 4 loaded)``; in a pipe or a
    log, with a line per trained model and a heartbeat at least every :data:`HEARTBEAT_SECONDS` between."""
    label = f"[{number}/{total}] {chapter}"
    print(f"{label} ...", flush=True)
    run_log = build_dir / "work" / f"{chapter}.runs.jsonl"
    run_log.parent.mkdir(parents=True, exist_ok=True)
    run_log.unlink(missing_ok=True)
    start, meter, failure = time.perf_counter(), CpuMeter(), None
    stop = threading.Event()
    watcher = None if sys.stderr.isatty() else threading.Thread(
        target=_progress, args=(chapter, run_log, start, stop, HEARTBEAT_SECONDS), daemon=True)
    if watcher is not None:
        watcher.start()
    try:  # the chapter's kernel inherits SEMLM_RUN_LOG; semlm.core.runs appends to it
        with mock.patch.dict(os.environ, SEMLM_RUN_LOG=str(run_log)), meter:
            execute_chapter(chapter, profile, build_dir)
    except BookError as exc:
        failure = exc
    finally:
        stop.set()
        if watcher is not None:
            watcher.join()
    entry = update_manifest(build_dir, chapter=chapter, **run_entry(
        "failed" if failure else "ok", time.perf_counter() - start, run_log, meter, profile=profile))
    if watcher is None:  # at a terminal the notices come with the chapter's end (a log had them as they came)
        for notice in entry.get("notices", []):
            print(f"  {chapter}: {notice}", flush=True)
    if failure:
        print(f"{label} FAILED ({entry['seconds']:.1f} s)", flush=True)
        raise failure
    runs = entry["runs"]
    models = f"; {runs['trained']} models trained, {runs['loaded']} loaded" if entry["run_list"] else ""
    busy = f", cores {entry['utilisation']:.0%} busy" if entry.get("utilisation") is not None else ""
    print(f"{label} ok ({entry['seconds']:.1f} s{busy}{models})", flush=True)


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors become one ``error:`` line and exit status 2 returned by main()."""

    def error(self, message: str):
        raise BookError(f"{message} (see `{self.prog} --help`)", exit_code=2)


def _workers(text: str) -> int:
    """``--workers``: a whole number of processes, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--workers must be a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--workers must be >= 1, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m semlm.book", description="Execute the book's chapters and build its HTML.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{run,plan,export,seeds,collect-seeds}")
    run_cmd = commands.add_parser("run", help="execute the chapters, then build the HTML",
                                  description="Execute the chapters with papermill, then build the HTML with "
                                              "Jupyter Book.")
    run_cmd.add_argument("--profile", required=True, metavar="{" + ",".join(PROFILES) + "}",
                         help="scale of every experiment: smoke (seconds), cpu (the default book), paper")
    run_cmd.add_argument("--only", metavar="CHAPTER",
                         help="execute one chapter (name, name.py or unique prefix such as 01); "
                              "skips the HTML unless --html")
    run_cmd.add_argument("--html", action="store_true", help="with --only: build the HTML as well")
    run_cmd.add_argument("--build-dir", type=Path, default=DEFAULT_BUILD_DIR, metavar="DIR",
                         help="where executed notebooks, metrics, trained models and the HTML go "
                              "(default: book/_build)")
    run_cmd.add_argument("--fresh", action="store_true", help="delete the trained-model cache (<build>/runs) first")
    run_cmd.add_argument("--no-solutions", action="store_true",
                         help="a student build: the HTML (in <build>/html-student) without the exercises' solutions")
    run_cmd.add_argument("--allow-downloads", action="store_true",
                         help="let chapters reach the Hugging Face Hub (default: HF_*_OFFLINE=1)")
    run_cmd.add_argument("--no-wait", action="store_true",
                         help="refuse at once, instead of waiting, when another run is building the same folder")
    run_cmd.add_argument("--allow-modified-data", action="store_true",
                         help="run on data files that differ from the pinned release (default: refuse), with every "
                              "metrics file, the manifest, the report and every page marked")
    plan_cmd = commands.add_parser("plan", help="list every chapter's trained models (and train them ahead)",
                                   description="List the runs every chapter declares; --train trains them before "
                                               "the chapters run, so the chapters load them from the cache.")
    plan_cmd.add_argument("--profile", required=True, choices=list(PROFILES), help="scale of every experiment")
    plan_cmd.add_argument("--train", action="store_true", help="train (or load) them now")
    plan_cmd.add_argument("--workers", type=_workers, default=None, help="worker processes (default: one per core)")
    plan_cmd.add_argument("--chapters", default=None, metavar="A,B",
                          help="only these chapters' runs (comma-separated names or unique prefixes such as 06, as "
                               "run --only takes them; default: every chapter's)")
    plan_cmd.add_argument("--beside-chapters", action="store_true",
                          help="as the book runner starts it beside the chapters: nothing where CUDA is available "
                               "(the chapters train there one run at a time)")
    import semlm.book.cpu_decisive as cpu_decisive  # torch-free at import
    import semlm.book.decisive as decisive  # torch-free at import

    for module in (decisive, cpu_decisive):  # seeds and collect-seeds, then decisive and collect-decisive
        module.parser(commands)
        module.collect_parser(commands)
    export_cmd = commands.add_parser("export", help="write a finished run as a folder transformers loads",
                                     description="Write a finished run (a folder of the run cache) as weights, "
                                                 "config with auto_map, tokenizer and a model card.")
    export_cmd.add_argument("run", type=Path, metavar="RUN",
                            help="the run's folder under book/_build/runs/, or its name up to the key (e.g. "
                                 "book/_build/runs/cpu/idea/wikitext-2/gated-mean-seed111)")
    export_cmd.add_argument("dir", type=Path, metavar="DIR", help="a new (or empty) folder to write")
    return parser


def plan_command(args: argparse.Namespace) -> int:
    """``python -m semlm.book plan``: list (and with ``--train`` train) every chapter's runs."""
    import semlm.book.plan as plan

    profile = check_build_settings(args.profile)
    wanted = plan.CHAPTERS if args.chapters is None else [c.strip() for c in args.chapters.split(",") if c.strip()]
    try:
        wanted = [resolve_chapter(c, list(plan.CHAPTERS)) for c in wanted]
    except BookError as exc:
        raise BookError(f"--chapters: {exc} (the chapters that declare runs; the others declare no runs)",
                        exit_code=2) from None
    planned = [e for e in plan.book_runs(profile) if e.chapter in wanted]
    print(plan.describe(planned, None if args.chapters is None else wanted), flush=True)
    if not args.train:
        return 0
    if args.beside_chapters:
        import torch

        if torch.cuda.is_available():
            print("CUDA is available: the chapters train their runs one at a time on it; nothing trained ahead")
            return 0
    try:
        plan.train_ahead(profile, planned, args.workers)
    except RuntimeError as exc:
        raise BookError(str(exc)) from exc
    print("trained: the chapters will load these runs from the cache")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The ``semlm-book`` command; returns the exit status."""
    try:
        args = _parser().parse_args(argv)
        if args.command == "plan":
            return plan_command(args)
        if args.command in ("seeds", "collect-seeds", "decisive", "collect-decisive"):
            import semlm.book.cpu_decisive as cpu_decisive
            import semlm.book.decisive as decisive
            from semlm.book.seeds import SeedsError

            try:
                if args.command == "seeds":
                    return decisive.seeds_command(args)
                if args.command == "decisive":
                    return cpu_decisive.decisive_command(args)
                collecting = decisive if args.command == "collect-seeds" else cpu_decisive
                print(f"collected: {collecting.collect(args.folder, pilot=args.pilot)}")
                return 0
            except (SeedsError, FileNotFoundError, ValueError) as exc:
                raise BookError(str(exc), exit_code=2) from exc
        if args.command == "export":
            # checked before the heavy imports below (torch, transformers: seconds)
            if not args.run.exists() and not args.run.parent.is_dir():
                raise BookError(f"export: {args.run} does not exist; give a run's folder under book/_build/runs/",
                                exit_code=2)
            if args.dir.exists() and (not args.dir.is_dir() or any(args.dir.iterdir())):
                raise BookError(f"export: {args.dir} exists and is not an empty folder; give a new folder (nothing "
                                f"was written)", exit_code=2)
            from semlm.book.export import ExportError, export_run, resolve_run

            try:
                resolve_run(args.run)  # a wrong path is one line before torch and transformers are imported
                print(f"exported to {export_run(args.run, args.dir)}")
            except (ExportError, FileNotFoundError) as exc:
                raise BookError(str(exc), exit_code=2) from exc
            return 0
        if args.build_dir.exists() and not args.build_dir.is_dir():
            raise BookError(f"--build-dir {args.build_dir} is a file, not a folder; give a folder (it is created if "
                            f"missing)", exit_code=2)
        run(args.profile, only=args.only, build_dir=args.build_dir, fresh=args.fresh,
            html=args.only is None or args.html, allow_downloads=args.allow_downloads,
            solutions=not args.no_solutions, allow_modified_data=args.allow_modified_data, wait=not args.no_wait)
    except BookError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        import logging

        # the interrupted cell's task still holds the kernel's traceback, which asyncio would print at exit under
        # this line: the line says what happened, the traceback is the interruption itself
        logging.getLogger("asyncio").disabled = True
        print("error: interrupted; the kernel and its workers were stopped", file=sys.stderr)
        return 130
    return 0

