"""The folders of ``book/recorded/``, read: what runs outside a build recorded (GPU runs, long CPU runs,
whole book builds, the precision comparison), each as a :class:`RecordedRun`.

Only reading, and torch-free, so the claims code can name a recorded run (:func:`competent_recorded_runs`)
without depending on what collects, judges or shows recorded runs (:mod:`semlm.book.recorded`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from semlm.data.paths import REPO_ROOT

RECORDED_DIR = REPO_ROOT / "book" / "recorded"
SOURCE_LABEL = "recorded GPU run"
CPU_SOURCE_LABEL = "recorded CPU run"
BOOK_SOURCE_LABEL = "recorded book build"
PROVENANCE = "provenance.json"
BENCH = "bench_idea.json"
GPU_THROUGHPUT = "gpu_throughput.json"
BOOK_MANIFEST = "manifest.json"
TRAINING_VARIANTS = "training_variants.json"
IDEA_PRECISION = "idea_precision.json"  # paper B's float32 / bf16 comparison (semlm.book.idea_precision)
AUTHORS_COMPARISON = "authors_comparison.json"  # python -m semlm.bench --authors-script ... --record
AUTHORS_COMPARISON_RECORD = "authors-comparison"  # the folder of book/recorded/ that holds it (two workers)
AUTHORS_COMPARISON_ONE_WORKER = "authors-comparison-one-worker"  # the same with --workers 1
AUTHORS_COMPARISON_FOLDERS = (AUTHORS_COMPARISON_RECORD, AUTHORS_COMPARISON_ONE_WORKER)
BOOK_METRICS = "metrics"     # a recorded book build's chapter metrics, in a sub-folder (not chapter runs)
REPORT = "report.json"       # the claims table of a recorded book build, as the claims code judged its metrics
#: The files of a folder read into a :class:`RecordedRun` field of their own; every other ``*.json`` but the
#: provenance is a chapter's metrics.
FIELDS = {BENCH: "bench", GPU_THROUGHPUT: "gpu_throughput", BOOK_MANIFEST: "book_manifest",
          TRAINING_VARIANTS: "training_variants", IDEA_PRECISION: "idea_precision", REPORT: "report",
          AUTHORS_COMPARISON: "authors_comparison"}


@dataclass
class RecordedRun:
    """One recorded GPU run: its provenance and the metrics each chapter wrote during it."""

    slug: str
    folder: Path
    provenance: dict
    chapters: dict[str, dict] = field(default_factory=dict)
    bench: dict | None = None
    gpu_throughput: dict | None = None   # python -m semlm.bench --only gpu (semlm.book.gpu_throughput)
    book_manifest: dict | None = None    # a whole book build's manifest.json (collect-book)
    training_variants: dict | None = None  # float32 / bf16 comparison (python -m semlm.bench --only precision)
    idea_precision: dict | None = None   # paper B's (python -m semlm.bench --only precision-idea)
    book_metrics: dict[str, dict] = field(default_factory=dict)  # a book build's chapter metrics (metrics/)
    report: dict | None = None           # a book build's report.json
    authors_comparison: dict | None = None  # the authors' script against ours (python -m semlm.bench --authors-script)

    @property
    def on_cpu(self) -> bool:
        """A CPU run (a long chapter run by ``.ci/run-long``, a whole book build, a benchmark), not a GPU run."""
        return self.provenance.get("kind") in ("cpu-long", "cpu-book", "cpu-variants", "cpu-bench", "cpu-decisive",
                                               "cpu-pilot")

    @property
    def decisive(self) -> bool:
        """A CPU claims' seed recording (``collect-decisive``): its verdicts are its ``report.json``'s rows, judged
        from per-seed values by :func:`semlm.book.claims.decisive_rows`, not from chapter metrics."""
        return self.provenance.get("kind") in ("cpu-decisive", "cpu-pilot")

    @property
    def machine(self) -> str:
        """The GPU, or for a CPU run its processor and core count."""
        if self.on_cpu:
            return f"{self.provenance.get('cpu_model') or 'unknown CPU'}, {self.provenance.get('cpu_count')} cores"
        return self.provenance.get("gpu") or "unknown GPU"

    @property
    def source(self) -> str:
        return (BOOK_SOURCE_LABEL if self.provenance.get("kind") == "cpu-book"
                else CPU_SOURCE_LABEL if self.on_cpu else SOURCE_LABEL)

    @property
    def date(self) -> str:
        return self.provenance.get("date", "unknown date")

    @property
    def commit(self) -> str:
        return self.provenance.get("git_commit", "unknown")

    @property
    def dry_run(self) -> bool:
        return bool(self.provenance.get("dry_run"))


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON ({error}); re-run .ci/run-gpu or delete the folder") from None


def load_recorded(root: str | Path | None = None) -> list[RecordedRun]:
    """Every ``<root>/<slug>/provenance.json`` with its chapter metrics, sorted by slug (root: ``book/recorded``)."""
    root = Path(root) if root is not None else RECORDED_DIR
    runs = []
    for provenance in sorted(root.glob(f"*/{PROVENANCE}")):
        folder = provenance.parent
        run = RecordedRun(folder.name, folder, read_json(provenance))
        for path in sorted(folder.glob("*.json")):
            if path.name in FIELDS:
                setattr(run, FIELDS[path.name], read_json(path))
            elif path.name != PROVENANCE:
                run.chapters[path.stem] = read_json(path)
        run.book_metrics = {path.stem: read_json(path) for path in sorted((folder / BOOK_METRICS).glob("*.json"))}
        runs.append(run)
    return runs


def competent_recorded_runs(chapter: str = "06_idea_gating", root: str | Path | None = None) -> list[str]:
    """``book/recorded/<folder>`` of every recorded run of ``chapter`` whose models pass its competence check."""
    try:
        runs = load_recorded(root)
    except ValueError:  # an unreadable folder: the claims table still builds; `recorded show` names it
        return []
    return [f"book/recorded/{run.slug}" for run in runs if not run.dry_run
            and (run.chapters.get(chapter, {}).get("competence") or {}).get("passes") is True]
