"""A chapter's bookkeeping in one object: ``chapter = book.open(name, profile=..., seed=...)`` under the parameters
cell resolves the profile (``make lab``'s ``$SEMLM_PROFILE``, :func:`~semlm.profiles.lab_profile`) and checks it
once (:func:`~semlm.profiles.check_profile`: ``chapter.profile`` is the checked name the paper's builders take as it
is), checks the other parameters (:func:`~semlm.profiles.check_parameters`) and starts the clock;
``chapter.close(record)`` writes ``<metrics dir>/<name>.json`` (:func:`~semlm.book.report.write_chapter_metrics`):
the book runner's metrics folder (``$SEMLM_METRICS_DIR``), or for a chapter run on its own (raw papermill,
JupyterLab) ``book/_build/lab/metrics``, never the build's; a chapter that fails before ``close`` writes nothing.
``chapter.show(section)`` displays a :class:`~semlm.core.records.Section`'s table and glues its numbers, so no
chapter wires a result by hand. Torch-free on import, like :mod:`semlm.book`.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import time
from pathlib import Path

from semlm.book.report import write_chapter_metrics
from semlm.core.records import glue_items
from semlm.data.paths import REPO_ROOT
from semlm.profiles import LONG_PROFILES, check_parameters, check_profile, lab_profile


#: Set (to 1) by ``python -m semlm.book run --allow-modified-data``: run on data that differs from the pinned release,
#: every number of the build marked so.
ALLOW_MODIFIED_DATA = "SEMLM_ALLOW_MODIFIED_DATA"
#: The mark a build on modified data carries beside its numbers.
MODIFIED_DATA_MARK = "data differs from the pinned release"
#: Set by the book runner for its kernels: the build's metrics folder.
METRICS_VARIABLE = "SEMLM_METRICS_DIR"
#: Where a chapter run outside the book runner (raw papermill, JupyterLab) writes its metrics: never the build's.
STANDALONE_METRICS_DIR = REPO_ROOT / "book" / "_build" / "lab" / "metrics"


class Chapter:
    """An open chapter: its name (the metrics file's stem), resolved profile, seed and clock."""

    def __init__(self, name: str, profile: str, seed: int):
        self.name, self.profile, self.seed = name, profile, seed
        self.opened = time.perf_counter()
        self.closed_after: float | None = None  # the wall time written by close
        self.metrics_path: Path | None = None
        self.modified_data: list[str] = []  # data files read that differ from the pinned release (allowed, marked)

    @property
    def seconds(self) -> float:
        """Seconds since opening; after :meth:`close`, the wall time it wrote."""
        return self.closed_after if self.closed_after is not None else time.perf_counter() - self.opened

    def close(self, record, directory: str | Path | None = None) -> None:
        """Write the chapter's record (a :mod:`semlm.core.records` record, or a dict for the report's own
        file) with its wall time; returns nothing, so a chapter's last cell shows no output."""
        seconds = time.perf_counter() - self.opened
        if directory is None and not os.environ.get(METRICS_VARIABLE):
            directory = STANDALONE_METRICS_DIR
            shown = directory.relative_to(REPO_ROOT) if directory.is_relative_to(REPO_ROOT) else directory
            print(f"metrics of this standalone run go to {shown}/ (the book build's stay untouched; "
                  f"`python -m semlm.book run` writes those)")
        marks = ({"modified_data": {"mark": MODIFIED_DATA_MARK, "files": self.modified_data}}
                 if self.modified_data else {})
        self.metrics_path = write_chapter_metrics(self.name, self.profile, self.seed, record, seconds, directory,
                                                  marks)
        self.closed_after = seconds

    def show(self, section, *, prefix: str = "", table: bool = True) -> None:
        """Display ``section.table()`` (unless ``table`` is False or it is None) and glue each field of
        ``section.numbers()`` under ``prefix`` + its name, for the prose's ``{glue:text}`` references; returns
        nothing, so the cell shows only the table."""
        from IPython.display import display

        shown = section.table() if table else None
        if shown is not None:
            display(shown)
        self.glue(**glue_items(section.numbers(), prefix))

    def glue(self, numbers=None, /, **values) -> None:
        """Glue each field of the dataclass ``numbers`` (a function's numbers with no table to show) and each
        keyword under its name (numbers the chapter computed itself)."""
        from myst_nb import glue

        for key, value in {**(glue_items(numbers) if numbers is not None else {}), **values}.items():
            glue(key, value, display=False)

    def notice(self, text: str) -> None:
        """A line whoever runs the chapter must see (a parameter the profile changed): in the notebook, on the
        kernel's own standard error (raw papermill's terminal shows it) and, under the book runner, in its log
        (the runner prints each notice it finds in the chapter's run log, ``$SEMLM_RUN_LOG``)."""
        line = f"{self.name}: {text}"
        sys.__stderr__.write(line + "\n")  # the kernel's real stderr: the notebook captures it too
        sys.__stderr__.flush()
        _append_run_log({"notice": text})

    def __repr__(self) -> str:
        return f"Chapter({self.name!r}, profile={self.profile!r}, seed={self.seed!r})"


#: The first line of the cell papermill injects with ``-p NAME VALUE`` (its ``PythonTranslator.codify``).
PAPERMILL_INJECTED = "# Parameters"


def injected_parameters(history: list[str] | None = None) -> set[str]:
    """The names papermill injected into this kernel (``-p NAME VALUE``): the assignments of the executed cell that
    starts with :data:`PAPERMILL_INJECTED`, read from IPython's input history (``In``); none outside a kernel."""
    if history is None:
        import builtins

        shell = getattr(builtins, "get_ipython", lambda: None)()  # IPython puts it there in a kernel
        history = list(shell.user_ns.get("In", [])) if shell is not None else []
    names: set[str] = set()
    for source in history:
        if isinstance(source, str) and source.lstrip().startswith(PAPERMILL_INJECTED):
            tree = ast.parse(source)
            names |= {target.id for node in tree.body if isinstance(node, ast.Assign)
                      for target in node.targets if isinstance(target, ast.Name)}
    return names


def open_chapter(name: str, *, profile: str, seed: int, declared: tuple[str, ...] = (), **parameters) -> Chapter:
    """Open chapter ``name`` with its parameters cell's values: ``profile`` (one of the shared profiles or the
    chapter's own long ones, :data:`~semlm.profiles.LONG_PROFILES`), ``seed`` and any of ``workers``, ``n_seeds``,
    ``max_steps`` (checked, not kept: the chapter keeps its own variables); ``declared`` names the parameters cell's
    other variables. A papermill parameter the chapter does not declare is a one-line ``ValueError`` before any
    work (papermill itself only warns)."""
    unknown = sorted(injected_parameters() - {"profile", "seed", *declared, *parameters})
    if unknown:
        known = ", ".join(["profile", "seed", *parameters, *declared])
        raise ValueError(f"chapter {name} has no parameter {', '.join(map(repr, unknown))}; its parameters are "
                         f"{known} (fix the -p option)")
    own_profiles = tuple(long for long, chapter in LONG_PROFILES.items() if chapter == name)
    profile = check_profile(lab_profile(profile), own_profiles)  # the one check: builders take it as it is
    check_parameters(seed=seed, **parameters)
    chapter = Chapter(name, profile, seed)
    chapter.modified_data = check_data(name)
    # Under the book runner, the kernel's CPU-seconds so far: its start and the imports of the chapter's first
    # cells (the benchmarks chapter's CPU picture shows them apart from the chapter's work).
    _append_run_log({"startup_cpu_seconds": round(time.process_time(), 2)})
    return chapter


def _append_run_log(line: dict) -> None:
    """One JSON line for the book runner's run log of this chapter (``$SEMLM_RUN_LOG``; none outside the runner)."""
    log = os.environ.get("SEMLM_RUN_LOG")
    if log:
        with open(log, "a") as out:
            out.write(json.dumps(line) + "\n")


def check_data(name: str) -> list[str]:
    """The data files chapter ``name`` reads that differ from the pinned release (:mod:`semlm.data.fetch`): a one-line
    ``ValueError`` naming the first, its checksum and the fix, unless ``$SEMLM_ALLOW_MODIFIED_DATA`` is 1 (then one
    line says so, and the chapter's metrics carry the mark). Missing files are the loaders' to report."""
    from semlm.data.fetch import differing_for_chapters, sha256_of
    from semlm.data.paths import data_dir

    differing = differing_for_chapters([name])
    if not differing:
        return []
    first = f"{differing[0]} (sha256 {sha256_of(data_dir() / differing[0])[:12]}…)"
    more = f" and {len(differing) - 1} more" if len(differing) > 1 else ""
    if os.environ.get(ALLOW_MODIFIED_DATA) != "1":
        raise ValueError(f"chapter {name} reads {first}{more}, which differs from the pinned release "
                         f"(lib/semlm/data/checksums.sha256); run `make data` to restore it, or `python -m semlm.book "
                         f"run --allow-modified-data` to run on it with every number marked")
    print(f"{MODIFIED_DATA_MARK}: {', '.join(differing)}; this chapter's numbers are not the book's")
    return differing
