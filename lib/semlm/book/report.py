"""Chapter metrics files: ``<metrics dir>/<chapter>.json`` with provenance.

Every chapter ends with ``chapter.close(record)`` (:mod:`semlm.book.chapter`), which calls
:func:`write_chapter_metrics`; the record carries the profile, seed, wall time, package versions and git
commit next to the numbers, so each figure in the book can be traced to the run that produced it.
"""

from __future__ import annotations

import ast
import html
import json
import math
import os
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path

from semlm.core.versions import package_versions
from semlm.data.paths import REPO_ROOT

PACKAGES = ("torch", "transformers", "tokenizers", "datasets", "peft", "bitsandbytes", "accelerate", "numpy", "pandas",
            "matplotlib", "seaborn", "papermill", "jupyter-book")


def metrics_dir() -> Path:
    """``$SEMLM_METRICS_DIR`` (set by the book runner) or ``book/_build/metrics``."""
    return Path(os.environ.get("SEMLM_METRICS_DIR", REPO_ROOT / "book" / "_build" / "metrics"))


def git_commit() -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=10)
        sha = commit.stdout.strip() or "unknown"
        return sha + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _clean(value):
    """JSON-safe: NaN/inf become None (JSON has no NaN), tuples become lists."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def cpu_model() -> str:
    """The CPU's marketing name (Linux ``/proc/cpuinfo``), else ``platform.processor()``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def gpu_name() -> str | None:
    try:
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:  # a broken CUDA install must not stop a chapter from writing its record
        return None


def peak_memory_mb() -> float:
    """Peak resident memory of this process and of its finished children (worker pools), MiB."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, children) / 1024, 1)  # Linux reports KiB


def write_chapter_metrics(chapter: str, profile: str, seed: int, numbers, wall_seconds: float,
                          directory: str | Path | None = None, marks: dict | None = None) -> Path:
    """Write ``<chapter>.json`` atomically (a crash never leaves a half-written file).

    ``numbers`` is the chapter's record (:mod:`semlm.core.records`, e.g. a ``LeakageAuditRecord``), written
    with its ``to_dict()``; a plain dict is accepted for files that have no record type (the report's own).
    """
    from semlm.core.records import Record
    from semlm.book.records import RECORDS

    if isinstance(numbers, Record):
        expected = RECORDS.get(chapter)
        if expected is not None and not isinstance(numbers, expected):
            raise ValueError(f"chapter {chapter} writes a {expected.__name__}, got a {type(numbers).__name__}")
        numbers = numbers.to_dict()
    elif not isinstance(numbers, dict):
        raise ValueError(f"chapter metrics must be a semlm.core.records record or a dict, got {type(numbers).__name__}")
    directory = Path(directory) if directory is not None else metrics_dir()
    directory.mkdir(parents=True, exist_ok=True)
    record = {
        "chapter": chapter,
        "profile": profile,
        "seed": seed,
        "wall_seconds": round(wall_seconds, 2),
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "gpu": gpu_name(),
        "peak_memory_mb": peak_memory_mb(),
        "packages": package_versions(PACKAGES),
        **(marks or {}),  # e.g. modified_data: the chapter ran on data that differs from the pinned release
        **_clean(numbers),
    }
    path = directory / f"{chapter}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=False))
    tmp.replace(path)
    return path


def load_metrics(directory: str | Path | None = None) -> dict[str, dict]:
    """Every chapter record in the metrics directory, ``{chapter: record}`` (the report's input)."""
    directory = Path(directory) if directory is not None else metrics_dir()
    records = {}
    for path in sorted(directory.glob("*.json")):
        if path.stem == "report":
            continue
        try:
            records[path.stem] = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON ({error}); re-run that chapter to rewrite it") from None
    return records


def parameter_assignments(source: str) -> dict[str, str]:
    """``name -> source of the value`` for the top-level assignments of a parameters cell."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    return {node.targets[0].id: ast.get_source_segment(source, node.value) for node in tree.body
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)}


def chapter_parameters(notebooks_dir: str | Path | None = None) -> dict[str, dict[str, object]]:
    """The papermill parameters of every chapter with their defaults, read from the notebooks'
    ``parameters`` cells (so the re-run page can never disagree with the notebooks)."""
    import jupytext

    notebooks_dir = Path(notebooks_dir) if notebooks_dir is not None else REPO_ROOT / "notebooks"
    return {path.stem: {name: ast.literal_eval(value) for cell in jupytext.read(path).cells
                        if "parameters" in cell.get("metadata", {}).get("tags", [])
                        for name, value in parameter_assignments(cell.source).items()}
            for path in sorted(notebooks_dir.glob("[0-9][0-9]_*.py"))}


# --- the reproducibility report's tables (notebooks/99_reproducibility_report.py) --------------

#: Background colour of each claim status in the report's table.
STATUS_COLOURS = {
    "reproduced": "#d8f0d8",
    "not reproduced": "#f6d5d5",
    "not meaningful as published": "#fbecc8",
    "not run at this profile": "#e6e6e6",
    "inconclusive": "#dde6f3",
    "holds by construction": "#ece3f5",
    "not testable at this scale": "#f3eadb",
    "not comparable": "#efe6d6",
}
#: Provenance fields of a chapter record that the run manifest lists.
MANIFEST_FIELDS = ("profile", "seed", "wall_seconds", "peak_memory_mb", "git_commit")


def _show_value(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


@dataclass
class HTMLBlock:
    """A piece of HTML a notebook cell displays (``_repr_html_``), with its text for a terminal."""

    html: str
    text: str = ""

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.text


def shown_value(row: dict) -> str:
    """What the page shows for a claim's causal value: the value and, if the claim has one, its 95% interval
    ``[low, high]``, all three at the same precision (the interval is of the quantity shown, so it contains it)."""
    value = _show_value(row["causal_value"])
    return value if row["ci"] is None else f"{value} [{', '.join(_show_value(float(x)) for x in row['ci'])}]"


def _ours(row: dict) -> str:
    parts = [] if row["causal_value"] is None else [html.escape(shown_value(row))]
    if row["published_value"] is not None:
        parts.append(f"published setting: {html.escape(_show_value(row['published_value']))}")
    return "<br>".join(parts) or "–"


def attach_recorded(claims: list[dict], recorded: dict[str, list[dict]]) -> list[dict]:
    """The build's claims, each with ``recorded``: the verdicts the same claims code gives the recorded folders
    (:func:`semlm.book.recorded.recorded_verdicts`), kept apart from the build's own ``status``."""
    return [{**row, "recorded": recorded.get(row["id"], [])} for row in claims]


def _recorded_cell(row: dict) -> str:
    parts = []
    for e in row.get("recorded") or []:
        value = "" if e.get("value_mean") is None else f" {e['value_mean']:.3g}"
        ci = "" if e.get("ci_low") is None else f" [{e['ci_low']:.3g}, {e['ci_high']:.3g}]"
        where = ", ".join(f"{folder} ({commit[:7]})" for folder, commit in zip(e.get("folders", [e["folder"]]),
                                                                               e.get("commits", [e["commit"]])))
        parts.append(f"<b>{html.escape(e['status'])}</b>{html.escape(value + ci)}<br><small>"
                     f"{html.escape(where)}</small>")
    return "<br>".join(parts) or "–"


def claims_table(claims: list[dict]) -> HTMLBlock:
    """The claims (``semlm.book.claims.evaluate_claims``) as a table of five columns that fits the text column, by
    paper and then in the order of ``STATUSES`` (verdicts first): id, claim, the paper's value, ours (causal, its 95%
    interval, the published setting's) and the final status, coloured, with its source and this build's own verdict
    under it. Each claim's reason, rule, profile and (where the rows carry them, :func:`attach_recorded`) the
    verdicts of recorded runs, labelled as not this build's, sit in a ``<details>`` row below it: no column is ever
    narrower than a word (the site check fails one)."""
    from semlm.core.verdicts import STATUSES

    claims = sorted(claims, key=lambda row: (row["paper"], STATUSES.index(final_status(row))))
    names = ("id", "claim", "paper value", "ours", "status")
    head = "".join(f"<th>{name}</th>" for name in names)
    rows = []
    for row in claims:
        status = final_status(row)
        under = ""
        if "final" in row:
            f = row["final"]
            flag = (' <b class="semlm-flag" title="one says reproduced, the other not reproduced">(disagree)</b>'
                    if f["flag"] else "")
            under = ("<br><small>this build's verdict</small>" if f["source"] == THIS_BUILD else
                     f"<br><small>from {html.escape(f['source'])}; this build: "
                     f"{html.escape(f['build_status'])}</small>{flag}")
        kind = "<br><small>the book's extension</small>" if row.get("kind", "paper") != "paper" else ""
        rows.append(f'<tr class="semlm-claim"><td class="semlm-id">{html.escape(row["id"])}{kind}</td>'
                    f"<td>{html.escape(row['claim'])}</td><td>{html.escape(_show_value(row['paper_value']))}</td>"
                    f"<td>{_ours(row)}</td><td><span class=\"semlm-status\" style=\"background-color: "
                    f"{STATUS_COLOURS[status]}\">{html.escape(status)}</span>{under}</td></tr>")
        rule = f"<p><b>rule:</b> {html.escape(row['rule'])}</p>" if row.get("rule") else ""
        source = (f"<p><b>final verdict from:</b> {html.escape(row['final']['source'])} "
                  f"({html.escape(row['final']['note'])})</p>" if row.get("final", {}).get("note") else "")
        recorded = row.get("recorded") or []
        runs = (f"<p><b>recorded runs (not this build):</b><br>{_recorded_cell(row)}</p>" if recorded else "")
        more = f"; {len(recorded)} recorded run{'s' if len(recorded) != 1 else ''}" if recorded else ""
        rows.append(f'<tr class="semlm-claim-detail"><td colspan="{len(names)}"><details><summary>why: '
                    f"{html.escape(status)}{more}</summary>{source}<p><b>this build's reason:</b> "
                    f"{html.escape(row['reason'])}</p>{rule}{runs}<p><b>profile:</b> "
                    f"{html.escape(row['profile'] or 'none')}</p></details></td></tr>")
    table = f'<table class="semlm-claims"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    return HTMLBlock(table, "\n".join(f"{row['id']}: {final_status(row)}" for row in claims))


def count_column(paper: str, kind: str = "paper") -> str:
    """The heading of a verdict count: ``paper A`` for the paper's own claims, ``paper A: the book's extensions``."""
    return f"paper {paper}" if kind == "paper" else f"paper {paper}: the book's extensions"


def verdict_counts(claims: list[dict]) -> dict[str, dict[str, int]]:
    """``{column: {status: n}}`` of the final statuses (:func:`final_verdicts`; a row's own status where it has none),
    per paper and kind (:func:`count_column`): an extension never counts as the paper's own."""
    counts: dict[str, dict[str, int]] = {}
    for row in sorted(claims, key=lambda r: (r["paper"], r.get("kind", "paper") != "paper")):
        column = counts.setdefault(count_column(row["paper"], row.get("kind", "paper")), {})
        column[final_status(row)] = column.get(final_status(row), 0) + 1
    return counts


def verdict_summary(claims: list[dict]):
    """How many claims have each final status, per paper and kind (:func:`verdict_counts`), the statuses used in
    ``STATUSES`` order, with the total."""
    import pandas as pd

    from semlm.core.verdicts import STATUSES

    counts = verdict_counts(claims)
    used = [status for status in STATUSES if any(status in column for column in counts.values())]
    table = pd.DataFrame({column: [n.get(status, 0) for status in used] for column, n in counts.items()},
                         index=pd.Index(used, name="status"))
    table["all claims"] = table.sum(axis=1)
    return table


#: The plain words of each final status (the report's opening sentences).
PLAIN_WORDS = {"reproduced": ("holds", "hold"), "not reproduced": ("does not hold", "do not hold"),
               "holds by construction": ("is guaranteed by the decoder or the input, whatever the model",
                                         "are guaranteed by the decoder or the input, whatever the model"),
               "inconclusive": ("is undecided", "are undecided")}


def _words(status: str, n: int) -> str:
    singular, plural = PLAIN_WORDS.get(status, (status, status))
    return singular if n == 1 else plural
#: Statuses that mean the claim could not be tested here.
UNTESTED = ("not testable at this scale", "not run at this profile", "not comparable", "not meaningful as published")


def plain_summary(claims: list[dict]) -> dict[str, str]:
    """Per paper, three or four sentences in plain words generated from the final verdicts: how many of the paper's
    claims hold, do not hold, are guaranteed by the decoder, are undecided or could not be tested here (naming
    them), and what the book's extensions found."""
    out = {}
    for paper in sorted({row["paper"] for row in claims}):
        own = [row for row in claims if row["paper"] == paper and row.get("kind", "paper") == "paper"]
        added = [row for row in claims if row["paper"] == paper and row.get("kind", "paper") != "paper"]

        def group(rows, statuses):
            return [row["id"] for row in rows if final_status(row) in statuses]

        parts = [f"{len(ids)} {_words(status, len(ids))} ({', '.join(ids)})" for status in PLAIN_WORDS
                 if (ids := group(own, (status,)))]
        untested = group(own, UNTESTED)
        sentences = [f"Paper {paper}: of its {len(own)} claims, " + ", ".join(parts[:-1])
                     + (" and " if len(parts) > 1 else "") + (parts[-1] if parts else "none is decided") + "."]
        if untested:
            sentences.append(f"{len(untested)} could not be tested here ({', '.join(untested)}): the reasons say "
                             f"why (a scale this build cannot reach, a setting the paper does not publish, or a "
                             f"published number that is not a language model's).")
        if added:
            found = ", ".join(f"{row['id']} {_words(final_status(row), 1)}" for row in added)
            sentences.append(f"The book adds {len(added)} claim{'s' if len(added) > 1 else ''} of its own, counted "
                             f"apart from the paper's: {found}.")
        out[paper] = " ".join(sentences)
    return out


def status_legend() -> HTMLBlock:
    """Every claim status with its colour and meaning, generated from ``semlm.core.verdicts.STATUS_MEANINGS``."""
    from semlm.core.verdicts import STATUS_MEANINGS, STATUSES

    items = "".join(f'<dt><span class="semlm-status" style="background-color: {STATUS_COLOURS[status]}">'
                    f"{html.escape(status)}</span></dt><dd>{html.escape(STATUS_MEANINGS[status])}</dd>"
                    for status in STATUSES)
    return HTMLBlock(f'<dl class="semlm-legend">{items}</dl>',
                     "\n".join(f"{status}: {STATUS_MEANINGS[status]}" for status in STATUSES))


def run_manifest_frame(metrics: dict[str, dict]):
    """One row per chapter record: profile, seed, wall time, peak memory and the commit it ran."""
    import pandas as pd

    return pd.DataFrame([{
        "chapter": name, "profile": rec.get("profile"), "seed": rec.get("seed"),
        "wall time (s)": rec.get("wall_seconds"), "peak memory (MiB)": rec.get("peak_memory_mb"),
        "git commit": (rec.get("git_commit") or "")[:10],
    } for name, rec in metrics.items()]).set_index("chapter")


def parameters_frame(params: dict[str, dict[str, object]]):
    """Every chapter's papermill parameters and defaults (:func:`chapter_parameters`)."""
    import pandas as pd

    return pd.DataFrame([{"chapter": name, "parameter": key, "default": repr(value)}
                         for name, values in params.items() for key, value in values.items()]
                        ).set_index(["chapter", "parameter"])


def report_manifest(metrics: dict[str, dict], params: dict[str, dict[str, object]]) -> dict:
    """The manifest the report writes: each chapter's provenance, the hardware the chapters ran on (from the
    first record) with their total wall time, packages, the benchmark record's top-level numbers (provenance
    fields left out) and the parameters."""
    first = next(iter(metrics.values()), {})
    hardware = {"CPU": first.get("cpu_model"), "CPU cores": first.get("cpu_count"), "GPU": first.get("gpu") or "none",
                "machine": first.get("machine"), "python": first.get("python"),
                "total chapter wall time (min)": round(sum(r.get("wall_seconds", 0) for r in metrics.values()) / 60, 1)}
    bench = {k: v for k, v in metrics.get("bench", {}).items()
             if isinstance(v, (int, float)) and not isinstance(v, bool)
             and k not in ("seed", "cpu_count", "wall_seconds", "peak_memory_mb")}
    return {"chapters": {name: {k: rec.get(k) for k in MANIFEST_FIELDS} for name, rec in metrics.items()},
            "hardware": hardware, "packages": first.get("packages", {}), "bench": bench, "parameters": params}


def modified_data(metrics: dict[str, dict]) -> dict[str, list[str]]:
    """``{chapter: [files]}`` of the chapters whose metrics say they ran on data that differs from the pinned
    release (``python -m semlm.book run --allow-modified-data``); empty for a build on the book's data."""
    return {name: (record.get("modified_data") or {}).get("files") for name, record in metrics.items()
            if isinstance(record, dict) and (record.get("modified_data") or {}).get("files")}


# --- one final verdict per claim --------------------------------------------------------------

THIS_BUILD = "this build"


def final_verdicts(claims: list[dict], decisive: dict[str, str] | None = None,
                   competent: dict[str, str] | None = None, root: str | Path | None = None) -> list[dict]:
    """The claims (with their ``recorded`` entries, :func:`attach_recorded`), each with ``final``: one verdict taken
    from a fixed order of sources, never chosen by which source decides:

    1. the claim's registered decisive recording (``decisive``, default ``semlm.book.claims.DECISIVE_RECORDINGS``
       and, once collected, paper B's registered GPU recording: :func:`registered_decisive`),
       when complete: it holds as many seeds as the claim's rule plans (``power.n_planned``);
    2. else this build's verdict;
    3. else, where this build cannot test the claim ("not testable at this scale"), the competent recorded run its
       rule names (``competent``, default ``COMPETENT_RECORDINGS``), where that run can test it.

    A source's verdict is taken whole: pilot and decisive seeds are never pooled. ``final`` is ``{status, source,
    build_status, flag, seeds, note}``: ``source`` is ``"this build"`` or a ``book/recorded/`` folder; ``flag`` marks
    a final and a build verdict of which one is "reproduced" and the other "not reproduced"; ``note`` says why this
    source. ``root``: the recorded folders (default ``book/recorded``).

    Raises ``FileNotFoundError`` if a registered decisive recording does not exist under ``root``, and
    ``ValueError`` if it exists but holds no verdict for its claim."""
    from semlm.book.claims import COMPETENT_RECORDINGS, DECISIVE_RECORDINGS
    from semlm.book.recorded_runs import RECORDED_DIR

    root = RECORDED_DIR if root is None else Path(root)
    decisive = {**registered_decisive(root), **DECISIVE_RECORDINGS} if decisive is None else decisive
    competent = COMPETENT_RECORDINGS if competent is None else competent
    for claim, folder in sorted(decisive.items()):
        if not (root / folder).is_dir():
            raise FileNotFoundError(f"claim {claim}: its decisive recording {root / folder} does not exist; record "
                                    f"it there or take {claim} out of semlm.book.claims.DECISIVE_RECORDINGS")
    return [{**row, "final": _final_verdict(row, decisive.get(row["id"]), competent.get(row["id"]))}
            for row in claims]


def registered_decisive(root: Path) -> dict[str, str]:
    """The registered claims and their decisive recording, once it is collected: paper B's real-data claims and
    their GPU recording (:mod:`semlm.book.registration`; ``collect-seeds``), the CPU claims and theirs
    (:mod:`semlm.book.registration_cpu`; ``collect-decisive``). Each collect writes ``report.json`` only when the
    folder holds exactly the registered seeds."""
    return {claim: reg.folder for reg, claims, _ in registered_claims()
            if (Path(root) / reg.folder / "report.json").is_file() for claim in claims}


def registered_claims() -> list[tuple]:
    """``(registration, its claims, its registration_commit function)`` of each committed registration of decisive
    seeds: paper B's real-data claims (:mod:`semlm.book.registration`), then the CPU claims
    (:mod:`semlm.book.registration_cpu`)."""
    import semlm.book.registration as registration
    import semlm.book.registration_cpu as registration_cpu
    from semlm.book.cpu_seeds import FAMILIES

    out = []
    if registration.B_SEEDS is not None:
        out.append((registration.B_SEEDS, registration.B_CLAIMS, registration.registration_commit))
    if (reg := registration_cpu.CPU_SEEDS) is not None:
        out.append((reg, [c for f in reg.n for c in FAMILIES[f].claims], registration_cpu.registration_commit))
    return out


def _recorded_entry(row: dict, folder: str) -> dict | None:
    """The entry of ``row["recorded"]`` that holds ``folder``'s verdict (folders with one result share an entry)."""
    return next((e for e in row.get("recorded") or () if folder in e.get("folders", [e.get("folder")])), None)


def _final_verdict(row: dict, decisive: str | None, competent: str | None) -> dict:
    """``final`` of one claim row (:func:`final_verdicts`), from its decisive and competent folders (or None)."""
    from semlm.core.verdicts import NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED

    def verdict(status, source, seeds, note):
        flag = {status, row["status"]} == {REPRODUCED, NOT_REPRODUCED}
        return {"status": status, "source": source, "build_status": row["status"], "flag": flag, "seeds": seeds,
                "note": note}

    note = "this build's verdict"
    if decisive is not None:
        entry = _recorded_entry(row, decisive)
        if entry is None:
            raise ValueError(f"claim {row['id']}: its decisive recording book/recorded/{decisive} holds no verdict "
                             f"for it (no metrics of its chapter); record them there or take {row['id']} out of "
                             f"semlm.book.claims.DECISIVE_RECORDINGS")
        planned = (row.get("power") or {}).get("n_planned")
        if not planned or (entry.get("seeds") or 0) >= planned:
            return verdict(entry["status"], decisive, entry.get("seeds"), "the claim's registered decisive recording")
        note = (f"this build's verdict: the decisive recording {decisive} is not complete ({entry.get('seeds') or 0} "
                f"of {planned} planned seeds)")
    if row["status"] == NOT_TESTABLE and competent is not None:
        entry = _recorded_entry(row, competent)
        if entry is not None and entry["status"] != NOT_TESTABLE:
            return verdict(entry["status"], competent, entry.get("seeds"),
                           "this build cannot test the claim; the competent recorded run its rule names")
        note = f"this build's verdict: the competent recorded run {competent} holds no verdict that tests the claim"
    return verdict(row["status"], THIS_BUILD, row.get("seeds"), note)


def final_status(row: dict) -> str:
    """A claim row's final status (its own status where it has no ``final``)."""
    return (row.get("final") or {}).get("status", row["status"])


def multiplicity_sentence(claims: list[dict], level: float = 0.95) -> str:
    """How many claims the final column decides (reproduced or not reproduced), and how many of those decisions are
    expected to be wrong by chance alone at ``level`` per claim (``(1 - level)`` x the number decided)."""
    from semlm.core.verdicts import NOT_REPRODUCED, REPRODUCED

    decided = sum(final_status(row) in (REPRODUCED, NOT_REPRODUCED) for row in claims)
    return (f"This report decides {decided} of {len(claims)} claims (reproduced or not reproduced); at {level:.0%} "
            f"per claim, about {decided * (1 - level):.2f} of those decisions are expected to be wrong by chance "
            f"alone (no correction for multiplicity is applied).")
