"""Recorded GPU runs: what ``.ci/run-gpu`` measured on a GPU machine, kept in ``book/recorded/<gpu>/``.

The book is built on a CPU; its numbers are computed by the build that renders them. A GPU run of
the ``paper`` profile (``make test-gpu`` on a machine with a GPU) is different: it happened once,
elsewhere, and the book can only *show* what it recorded. This module keeps the two apart:

* ``collect`` (called by ``.ci/run-gpu``) writes ``book/recorded/<gpu-slug>/provenance.json`` (GPU,
  driver, package versions, date, git commit, each step's pass/fail and wall time, tokens/s and MFU)
  next to the metrics JSON that each chapter wrote during that run;
* :func:`load_recorded` reads those folders into :class:`RecordedRun` records;
* :func:`recorded_frame` gives, for one chapter, a table whose every row is labelled
  "recorded GPU run" with its GPU, date and commit; an empty table and a one-line message when
  nothing is recorded. Chapters show it *next to* their own numbers, never merged into them;
* :func:`diff_builds` (``python -m semlm.book.recorded diff A B``) compares two builds' verdicts claim by claim
  (a recorded book build, a recorded run or ``book/_build``): status changes and values beyond their intervals.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import re
import shutil
import sys
from pathlib import Path

import pandas as pd

from semlm.book.recorded_runs import (BENCH, BOOK_MANIFEST, BOOK_METRICS, BOOK_SOURCE_LABEL, CPU_SOURCE_LABEL,
                                      GPU_THROUGHPUT, PROVENANCE, RECORDED_DIR, REPORT, SOURCE_LABEL, TRAINING_VARIANTS,
                                      RecordedRun, competent_recorded_runs, load_recorded, read_json)
from semlm.data.paths import REPO_ROOT

LABEL = "recorded GPU run: measured on a GPU machine by .ci/run-gpu, not by this build"
CPU_LABEL = "recorded CPU run: a long run of one chapter by .ci/run-long, from a pinned clone, not by this build"
BOOK_LABEL = ("recorded book build: the whole book from a fresh clone with an empty run cache (`make book`), "
              "collected by `python -m semlm.book.recorded collect-book`, not this build")
CHAPTERS = ("06_idea_gating", "07_xray_and_sweeps", "08_lora_4bit_idea_gating", "09_topic_drift")
GPU_TRACE = "gpu_throughput.trace.txt"
VERDICTS = "VERDICTS.md"     # the claims of a recorded book build, for a reader browsing the repository
VARIANTS_LABEL = ("recorded CPU run: paper A's models trained in float32 and in bf16 over 3 seeds by "
                  "`python -m semlm.bench --only precision`, not by this build")


def gpu_slug(name: str | None) -> str:
    """``"NVIDIA H100 80GB HBM3"`` -> ``"h100"``; an unknown name -> its letters and digits; no GPU -> ``"cpu"``."""
    if not name:
        return "cpu"
    for known in ("H200", "H100", "A100", "L40S", "L4", "A10G", "V100", "T4"):
        if re.search(rf"\b{known}\b", name.upper().replace("-", " ")):
            return known.lower()
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "gpu"


def _mean(value):
    """A number, or the ``mean`` of a summary dict (``semlm.core.metrics.summarise``), else None."""
    if isinstance(value, dict):
        value = value.get("mean")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def recorded_verdicts(root: str | Path | None = None) -> dict[str, list[dict]]:
    """The claims code applied to every recorded folder, apart from the build's own verdicts: ``{claim id:
    [{folder, commit, machine, date, profile, seeds, status, value_mean, ci_low, ci_high}, ...]}``, one entry per
    folder that holds what the claim needs (a claim the folder's chapters cannot judge, "not run", is left out).
    ``seeds`` is the number of training seeds the claim's interval rests on (None where the claim does not say);
    ``value`` repeats ``value_mean`` for older callers. A folder's metrics are a book build's ``metrics/`` or a
    run's chapter files; dry runs are skipped."""
    from semlm.book.claims import NOT_RUN, evaluate_claims

    out: dict[str, list[dict]] = {}
    for run in load_recorded(root):
        metrics = run.book_metrics or run.chapters
        if run.dry_run or not metrics:
            continue
        for row in evaluate_claims(metrics):
            if row["status"] == NOT_RUN:
                continue
            low, high = row["ci"] if row.get("ci") else (None, None)
            out.setdefault(row["id"], []).append(
                {"folder": run.slug, "commit": run.commit[:12], "machine": run.machine, "date": run.date,
                 "profile": row.get("profile"), "seeds": row.get("seeds"), "status": row["status"],
                 "value_mean": _mean(row.get("causal_value")), "value": _mean(row.get("causal_value")),
                 "ci_low": low, "ci_high": high})
    return out


CHAPTER_FILES = "[0-9][0-9]_*.json"  # a chapter's metrics file (not a benchmark, a manifest or a report)


def _build_side(folder: str | Path) -> dict:
    """One side of :func:`diff_builds`: ``{folder, commit, metrics, report, report_file}`` of a recorded book build
    (``metrics/`` and ``report.json``), a build directory (``metrics/*.json`` and ``metrics/report.json``) or a
    recorded run whose chapter files sit in the folder itself (``cpu-long``)."""
    from semlm.book.report import load_metrics

    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder; give a recorded build (book/recorded/cpu-book-*) or a "
                                f"build directory (book/_build)")
    source = folder / BOOK_METRICS if any((folder / BOOK_METRICS).glob(CHAPTER_FILES)) else folder
    chapters = sorted(source.glob(CHAPTER_FILES))
    if not chapters:
        raise ValueError(f"{folder} holds no chapter metrics (neither {BOOK_METRICS}/{CHAPTER_FILES} nor "
                         f"{CHAPTER_FILES}): nothing to judge; a recorded build collected before chapter metrics were "
                         f"kept has only its manifest and provenance")
    metrics = {name: record for name, record in load_metrics(source).items()
               if any(path.stem == name for path in chapters)}
    for name, record in metrics.items():
        if not isinstance(record, dict):
            raise ValueError(f"{source / name}.json is not a chapter's metrics (a JSON object)")
    commits = sorted({str(record["git_commit"])[:12] for record in metrics.values() if record.get("git_commit")})
    report_file = next((path for path in (folder / REPORT, folder / BOOK_METRICS / REPORT) if path.is_file()), None)
    report = read_json(report_file) if report_file else None
    if report is not None and not isinstance(report.get("claims"), list):
        raise ValueError(f"{report_file} has no 'claims' list: it is not a claims report")
    return {"folder": str(folder), "commit": ", ".join(commits) or "unknown", "metrics": metrics,
            "report": report, "report_file": str(report_file) if report_file else None}


def _compare_rows(rows_a: list[dict], rows_b: list[dict], values: bool) -> list[dict]:
    """Claim by claim (A's order, then B's extra claims): each side's status, value and interval, and whether the
    status changed, the claim is on one side only or (``values``: both sides have a value and a finite 95% interval)
    the two intervals do not overlap."""
    def interval(row):
        ci = row and row.get("ci")
        finite = ci and len(ci) == 2 and all(isinstance(x, (int, float)) and x == x for x in ci)
        return (float(ci[0]), float(ci[1])) if finite else None

    by_a, by_b, out = {r["id"]: r for r in rows_a}, {r["id"]: r for r in rows_b}, []
    for claim in {**by_a, **by_b}:
        a, b = by_a.get(claim), by_b.get(claim)
        both = a is not None and b is not None
        (va, vb), (ia, ib) = [row and _mean(row.get("causal_value")) for row in (a, b)], map(interval, (a, b))
        out.append({"id": claim, "only_in": None if both else "A" if b is None else "B",
                    "a_status": a and a.get("status"), "b_status": b and b.get("status"),
                    "a_value": va, "b_value": vb, "a_ci": ia, "b_ci": ib,
                    "status_changed": both and a.get("status") != b.get("status"),
                    "beyond_intervals": both and values and None not in (va, vb, ia, ib)
                    and (ia[1] < ib[0] or ib[1] < ia[0])})
    return out


def diff_builds(a: str | Path, b: str | Path) -> dict:
    """Compare two builds' verdicts claim by claim (a recorded book build, a build directory, or a recorded run).

    Two comparisons, kept apart: ``current``, both sides' chapter metrics judged by this commit's claims code, and
    ``stored``, the statuses in the two sides' own ``report.json`` (None unless both have one); with counts of
    status changes, value changes beyond the intervals and (stored) claims on one side only.
    Raises ``FileNotFoundError``/``ValueError`` for a missing folder, one without chapter metrics or malformed JSON.
    """
    from semlm.book.claims import evaluate_claims

    sides, judged = [_build_side(a), _build_side(b)], []
    for side in sides:
        try:
            judged.append(evaluate_claims(side["metrics"]))
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise ValueError(f"the claims code cannot judge the metrics of {side['folder']}: "
                             f"{type(error).__name__}: {error}") from None
    current = _compare_rows(*judged, values=True)
    stored = (_compare_rows(sides[0]["report"]["claims"], sides[1]["report"]["claims"], values=False)
              if all(side["report"] is not None for side in sides) else None)
    both = [row for row in current if row["only_in"] is None]
    return {**{key: {k: side[k] for k in ("folder", "commit", "report_file")} for key, side in zip("ab", sides)},
            "current": current, "stored": stored, "compared": len(both),
            "status_changes": sum(row["status_changed"] for row in both),
            "value_changes": sum(row["beyond_intervals"] for row in both),
            "stored_status_changes": None if stored is None else sum(row["status_changed"] for row in stored),
            "stored_one_side": None if stored is None else sum(row["only_in"] is not None for row in stored)}


def _shown(value, ci) -> str:
    text = "no value" if value is None else f"{value:.4g}"
    return text + (f" [{ci[0]:.4g}, {ci[1]:.4g}]" if ci else "")


def diff_lines(diff: dict) -> list[str]:
    """:func:`diff_builds` as the lines ``python -m semlm.book.recorded diff`` prints: a header naming both sides,
    one line per differing claim and comparison, and a summary line."""
    lines = [f"{side}: {diff[key]['folder']} (commit {diff[key]['commit']}; stored verdicts: "
             f"{diff[key]['report_file'] or 'none'})" for side, key in (("A", "a"), ("B", "b"))]
    for kind, label in (("current", "current claims code"), ("stored", "stored report.json")):
        for row in diff[kind] or ():
            if row["only_in"]:
                status = row["a_status"] if row["only_in"] == "A" else row["b_status"]
                lines.append(f"{row['id']} [{label}]: only in {row['only_in']} ({status})")
            elif row["status_changed"] or row["beyond_intervals"]:
                text = f"{row['a_status']} -> {row['b_status']}" if row["status_changed"] else \
                    f"{row['a_status']} on both"
                if row["beyond_intervals"]:
                    text += (f"; value {_shown(row['a_value'], row['a_ci'])} -> {_shown(row['b_value'], row['b_ci'])}"
                             f" (the intervals do not overlap)")
                lines.append(f"{row['id']} [{label}]: {text}")
    summary = (f"{diff['compared']} claims compared, {diff['status_changes']} status changes, "
               f"{diff['value_changes']} value changes beyond the intervals (current claims code)")
    if diff["stored"] is None:
        summary += "; stored report.json: not compared (not on both sides)"
    else:
        summary += (f"; stored report.json: {diff['stored_status_changes']} status changes, "
                    f"{diff['stored_one_side']} claims on one side only")
    return [*lines, summary]


def status_counts(claims: list[dict]) -> dict[str, dict[str, int]]:
    """``{paper: {status: count}}`` of a claims table."""
    out: dict[str, dict[str, int]] = {}
    for row in claims:
        paper = out.setdefault(row["paper"], {})
        paper[row["status"]] = paper.get(row["status"], 0) + 1
    return out


README_START, README_END = "<!-- recorded-verdicts:start -->", "<!-- recorded-verdicts:end -->"


def latest_recorded_build(root: str | Path | None = None) -> RecordedRun | None:
    """The recorded book build that keeps its verdicts (``report.json``) with the latest provenance date."""
    builds = [run for run in load_recorded(root) if run.report is not None and not run.dry_run]
    return max(builds, key=lambda run: run.date, default=None)


def readme_verdicts_section(root: str | Path | None = None) -> str:
    """The README's section between its markers: the status counts per paper of :func:`latest_recorded_build`,
    with its commit, machine and date and a link to its ``VERDICTS.md`` (generated; a test compares)."""
    root = Path(root) if root is not None else RECORDED_DIR
    run = latest_recorded_build(root)
    if run is None:
        return (f"{README_START}\nNo recorded build keeps its verdicts yet: `python -m semlm.book.recorded "
                f"collect-book` after a `make book` from a fresh clone writes one.\n{README_END}")
    counts = run.report["counts"]
    statuses = sorted({status for paper in counts.values() for status in paper})
    papers = sorted(counts)
    link = f"book/recorded/{run.slug}/{VERDICTS}"
    lines = [README_START,
             f"The latest recorded `{run.provenance.get('profile')}` build ([{run.slug}]({link}): commit "
             f"`{run.commit[:7]}`, {run.machine}, {run.date[:10]}) judged the papers' claims so "
             f"(not the verdicts of your own build; the reasons and rules are in `{VERDICTS}`):", "",
             "| status | " + " | ".join(f"paper {p}" for p in papers) + " |",
             "|---|" + "---|" * len(papers)]
    lines += [f"| {status} | " + " | ".join(str(counts[p].get(status, 0)) for p in papers) + " |"
              for status in statuses]
    return "\n".join([*lines, README_END])


def update_readme(readme: Path, root: str | Path | None = None) -> bool:
    """Rewrite the README's recorded-verdicts section from :func:`readme_verdicts_section`; True if it changed."""
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        raise ValueError(f"{readme} has no {README_START} ... {README_END} section to update")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    new = head + readme_verdicts_section(root) + tail
    if new != text:
        readme.write_text(new)
    return new != text


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    text = value if isinstance(value, str) else json.dumps(value, default=str) if value is not None else ""
    return text.replace("|", "\\|").replace("\n", " ")


def verdicts_markdown(report: dict, provenance: dict) -> str:
    """``VERDICTS.md`` of a recorded book build: the per-status counts per paper, then every claim with its
    status, value, interval, reason and rule (generated from ``report.json``, never edited by hand)."""
    lines = [f"# Verdicts of a recorded `{provenance.get('profile')}` book build",
             "",
             f"Generated by `python -m semlm.book.recorded collect-book` from `{REPORT}` beside this file: the "
             f"claims code of commit `{report.get('claims_commit', '?')[:12]}` applied to the chapter metrics in "
             f"`{BOOK_METRICS}/`, written by the build at commit `{provenance.get('git_commit', '?')[:12]}` on "
             f"{provenance.get('cpu_model')} ({provenance.get('cpu_count')} cores), {provenance.get('date')}.",
             "", "| paper | status | claims |", "|---|---|---|"]
    for paper, counts in sorted(report["counts"].items()):
        lines += [f"| {paper} | {status} | {n} |" for status, n in sorted(counts.items())]
    lines += ["", "| claim | status | value | 95% interval | reason | rule |", "|---|---|---|---|---|---|"]
    for row in report["claims"]:
        ci = f"[{row['ci'][0]:.4g}, {row['ci'][1]:.4g}]" if row.get("ci") else ""
        lines.append(f"| {row['id']}: {_cell(row['claim'])} | {row['status']} | {_cell(row.get('causal_value'))} | "
                     f"{ci} | {_cell(row.get('reason'))} | {_cell(row.get('rule'))} |")
    return "\n".join(lines) + "\n"


def _stickiness(metrics: dict, model: str) -> float | None:
    values = [_mean(by_model.get(model, {}).get("stickiness"))
              for by_model in metrics.get("domains", {}).values() if isinstance(by_model, dict)]
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def key_metrics(chapter: str, metrics: dict) -> dict:
    """Validation perplexity of the plain and gated model and mean stickiness over domains, where the chapter has
    them."""
    baseline, gated = metrics.get("baseline", metrics.get("plain", {})), metrics.get("gated", {})
    competence = metrics.get("competence") if isinstance(metrics.get("competence"), dict) else {}
    numbers = {"val PPL plain": _mean(baseline.get("val_ppl")), "val PPL gated": _mean(gated.get("val_ppl")),
               "val PPL gated, gate off": _mean(gated.get("val_ppl_ungated")),
               "stickiness plain": _stickiness(metrics, "baseline"), "stickiness gated": _stickiness(metrics, "gated"),
               "bigram PPL": _mean(competence.get("bigram_val_ppl")), "competent": competence.get("passes")}
    if "drift_rate" in gated:  # chapter 9: the topic-drift rate of the data and of both models' generations
        numbers.update({"drift data": _mean(metrics.get("data", {}).get("drift_rate")),
                        "drift plain": _mean(baseline.get("drift_rate")), "drift gated": _mean(gated.get("drift_rate")),
                        "stickiness plain": _mean(baseline.get("stickiness")),
                        "stickiness gated": _mean(gated.get("stickiness"))})
    return numbers


def _run_columns(run: RecordedRun) -> dict:
    """The columns a recorded table gives every row: the run's folder, machine, date and commit."""
    return {"folder": f"book/recorded/{run.slug}", "machine": run.machine, "date": run.date, "commit": run.commit[:12]}


def _labelled(rows: list[dict], label: str, root, nothing: str) -> tuple[pd.DataFrame, str | None]:
    """``rows`` as a frame labelled ``label`` (``attrs``) and, if there are none, the message naming the folder
    searched: ``no recorded <nothing> in <root> (<how to record one>)``; else None."""
    frame = pd.DataFrame(rows)
    frame.attrs["label"] = label
    return frame, (f"no recorded {nothing.format(where=Path(root) if root is not None else RECORDED_DIR)}"
                   if frame.empty else None)


def recorded_frame(chapter: str, root: str | Path | None = None):
    """``(frame, message)``: one row per recorded GPU run of ``chapter``, every row labelled as recorded.

    Columns: source, GPU, date, commit, profile, steps, status, wall seconds, tokens/s, MFU and the
    chapter's key metrics (validation perplexity plain / gated, stickiness). Dry runs (the CPU
    plumbing check) are left out. Nothing recorded: an empty frame and a message saying so.
    """
    rows = []
    for run in load_recorded(root):
        if run.dry_run or (chapter not in run.chapters and chapter not in run.provenance.get("chapters", {})):
            continue
        info, metrics = run.chapter_info(chapter), run.chapters.get(chapter, {})
        capped = "max_steps" in info.get("papermill_parameters", "")
        steps = metrics.get("max_steps") or (run.provenance.get("max_steps") if capped else "profile's own")
        rows.append({"source": run.source, **_run_columns(run), "profile": info.get("profile", metrics.get("profile")),
                     "steps": steps, "status": info.get("status", "unknown"),
                     "wall seconds": info.get("wall_seconds", metrics.get("wall_seconds")),
                     "tokens/s": info.get("tokens_per_second"), "MFU": info.get("mfu"),
                     **key_metrics(chapter, metrics)})
    frame, empty = _labelled(rows, LABEL, root,
                             f"GPU run of {chapter} in {{where}} (run `make test-gpu` on a GPU machine)")
    if empty:
        return frame, empty
    frame = frame.dropna(axis=1, how="all")
    n_cpu = int((frame["source"] == CPU_SOURCE_LABEL).sum())
    frame.attrs["label"] = f"{LABEL}; {CPU_LABEL}" if n_cpu else LABEL
    return frame, (f"{len(frame) - n_cpu} {SOURCE_LABEL}(s) and {n_cpu} {CPU_SOURCE_LABEL}(s) of {chapter}; "
                   f"measured elsewhere, not by this build")


def recorded_cpu_numbers(frame) -> dict:
    """Glue values for a chapter's page from :func:`recorded_frame`: the latest recorded CPU run's folder,
    perplexities, bigram reference and competence verdict (``"none"`` / None where there is no such run)."""
    def number(value) -> str:
        value = _mean(value)
        return f"{value:.2f}" if value is not None and value == value else "n/a"

    rows = frame[frame["source"] == CPU_SOURCE_LABEL] if not frame.empty and "source" in frame else frame.iloc[0:0]
    if rows.empty:
        return {"recorded_cpu_folder": "none (run .ci/run-long)", "recorded_cpu_plain": "n/a",
                "recorded_cpu_gated": "n/a", "recorded_cpu_bigram": "n/a", "recorded_cpu_competence": "cannot pass"}
    row = rows.sort_values("date").iloc[-1]
    verdict = {True: "passes", False: "fails"}.get(row.get("competent"), "has no result for")
    return {"recorded_cpu_folder": row["folder"], "recorded_cpu_plain": number(row.get("val PPL plain")),
            "recorded_cpu_gated": number(row.get("val PPL gated")),
            "recorded_cpu_bigram": number(row.get("bigram PPL")),
            "recorded_cpu_competence": verdict}


def recorded_bench_frame(root: str | Path | None = None):
    """``(frame, message)``: the idea-gate benchmark of each recorded GPU run (FLOP ratio vs time ratio, MFU)."""
    rows = []
    for run in load_recorded(root):
        if run.dry_run or not run.bench or run.on_cpu:
            continue
        b = run.bench
        for workload, key in (("training step", "step"), ("generation, per new token", "generation")):
            rows.append({"source": run.source, **_run_columns(run), "profile": b.get("profile"), "workload": workload,
                         "FLOP ratio": b.get(f"{key}_flop_ratio"), "time ratio": b.get(f"{key}_time_ratio"),
                         "time / FLOP ratio": b.get(f"{key}_time_over_flops"),
                         "target": (b.get("targets") or {}).get(f"{key}_time_over_flops"),
                         "meets": (b.get("meets_targets") or {}).get(key),
                         "MFU gated (training)": (b.get("gated") or {}).get("model_flops_utilisation")
                         if key == "step" else None})
    frame, empty = _labelled(rows, LABEL, root, "GPU benchmark in {where} (run `make test-gpu` on a GPU machine)")
    return frame, empty or f"{SOURCE_LABEL}(s): measured on a GPU machine, not by this build"


def recorded_gpu_throughput_frame(root: str | Path | None = None):
    """``(frame, message)``: the trainer's tokens/s and MFU per execution setting of each recorded GPU run,
    with the same-update check of each setting (relative gradient difference, bf16 / float32) in
    ``frame.attrs["same_update"]``."""
    rows, same = [], {}
    for run in load_recorded(root):
        record = run.gpu_throughput
        if run.dry_run or not record:
            continue
        same[f"book/recorded/{run.slug}"] = record.get("same_update") or {}
        for setting, kinds in record.get("variants", {}).items():
            for kind, v in kinds.items():
                rows.append({**_run_columns(run), "profile": record.get("profile"), "setting": setting,
                             "model": kind, "micro-batches": v.get("micro_batches"), "compiled": v.get("compiled"),
                             "tokens/s": v.get("tokens_per_second"), "MFU": v.get("mfu"),
                             "ms / step": 1e3 * v["seconds_per_step"] if v.get("seconds_per_step") else None,
                             "peak GiB": v.get("peak_memory_gib"),
                             "profiled": "yes" if "table" in (v.get("trace") or {}) else ""})
    frame, empty = _labelled(rows, LABEL, root, "GPU throughput in {where} (run `make test-gpu` on a GPU machine)")
    frame.attrs["same_update"] = same
    return frame, empty or f"{SOURCE_LABEL}(s): the trainer's speed per execution setting, measured on a GPU machine"


def recorded_trace_frame(model: str = "plain", rows: int = 8, root: str | Path | None = None):
    """``(frame, message)``: the first ``rows`` entries by GPU time (host ops with the device time of the
    kernels they launched, and the kernels themselves) of the latest recorded profiler trace of ``model``
    ("plain" or "gated"); an empty frame and one line when no run recorded a trace."""
    traces = [run.folder / GPU_TRACE for run in load_recorded(root) if (run.folder / GPU_TRACE).is_file()]
    if not traces:
        return pd.DataFrame(), "no recorded profiler trace (python -m semlm.bench --only gpu writes one on a GPU)"
    lines = traces[-1].read_text(encoding="utf-8").splitlines()
    if model not in lines:
        raise ValueError(f"no {model!r} section in {traces[-1]}; choose plain or gated")
    header = [name.strip() for name in re.split(r"\s{2,}", lines[lines.index(model) + 2].strip())]
    table = []
    for line in lines[lines.index(model) + 4:]:
        if not line.strip() or line.startswith("-"):
            break
        table.append(dict(zip(header, re.split(r"\s{2,}", line.strip()))))
    frame = pd.DataFrame(table[:rows])[["Name", "Self CUDA", "Self CUDA %", "# of Calls"]]
    return frame, f"{SOURCE_LABEL}: {traces[-1].parent.name}/{GPU_TRACE}, {model} GPT"


def recorded_book_builds_frame(root: str | Path | None = None, target_minutes: float = 30.0,
                               target_busy: float = 0.9):
    """``(frame, chapters, message)``: one row per recorded whole-book build (start-to-HTML minutes, core use,
    from scratch or not, models trained beside the chapters, whether it meets ``target_minutes`` and
    ``target_busy``), and the latest one's minutes and core use per chapter. Nothing recorded: empty
    frames and a message saying how to record one."""
    rows, chapters = [], pd.DataFrame()
    builds = sorted((run for run in load_recorded(root) if run.book_manifest and not run.dry_run),
                    key=lambda run: run.date)
    for run in builds:
        manifest = run.book_manifest
        trained_ahead = ((manifest.get("train_ahead") or {}).get("runs") or {}).get("trained")
        rows.append({"build": run.slug, "date": run.date[:10], "commit": run.commit[:7],
                     "from scratch": manifest.get("from_scratch"),
                     "minutes": round(manifest["total_wall_seconds"] / 60, 1),
                     "cores busy": manifest.get("utilisation"),
                     "trained beside the chapters": "–" if trained_ahead is None else trained_ahead,
                     f"≤ {target_minutes:.0f} min": manifest["total_wall_seconds"] <= 60 * target_minutes,
                     f"cores ≥ {target_busy:.0%}": (manifest.get("utilisation") or 0) >= target_busy})
    if builds:
        chapters = pd.DataFrame([{"chapter": name, "minutes": round(entry["seconds"] / 60, 2),
                                  "cores busy": entry.get("utilisation"),
                                  "models trained": entry["runs"]["trained"], "models loaded": entry["runs"]["loaded"]}
                                 for name, entry in sorted(builds[-1].book_manifest.get("chapters", {}).items())])
    frame, empty = _labelled(rows, BOOK_LABEL, root, "book build in {where} (`make book` in a fresh clone, then "
                                                     "`python -m semlm.book.recorded collect-book`)")
    where = "; ".join(sorted({f"{run.machine}, profile {run.book_manifest.get('profile')}" for run in builds}))
    return frame, chapters, empty or (f"{BOOK_SOURCE_LABEL}(s) in book/recorded/ ({where}): measured in a fresh "
                                      "clone, not by this build")


def _read_tsv(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    lines = path.read_text().splitlines()
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:] if line.strip()]


def _number(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        try:
            return float(text)
        except (TypeError, ValueError):
            return text


def chapter_throughput(chapter: str, metrics: dict, gpu: str | None) -> dict:
    """Training tokens/s the chapter reports (the gated model's, else the first) and its MFU.

    Chapter 6 reports ``training.tokens_per_second`` per run; MFU = tokens/s x FLOPs per token
    (``semlm.book.flops.training_flops_per_token`` at the profile's GPT size) / dense bf16 peak. Chapter 8
    reports seconds per LoRA step; its tokens/s follow from the profile's batch, and no MFU is given
    (a frozen 4-bit backbone's FLOPs are not what the counter counts).
    """
    from semlm.book.flops import model_flops_utilisation, training_flops_per_token

    out = {"tokens_per_second": None, "mfu": None, "throughput_note": None}
    profile = metrics.get("profile")
    rates = metrics.get("training", {}).get("tokens_per_second")
    if isinstance(rates, dict) and rates:
        chosen = metrics.get("gated", {}).get("run") if isinstance(metrics.get("gated"), dict) else None
        name = (chosen if chosen in rates else "gated" if "gated" in rates
                else next((n for n in rates if n.startswith("gated")), next(iter(rates))))
        out["tokens_per_second"] = _mean(rates[name])
        try:
            from semlm.idea.profiles import idea_profile

            size = idea_profile(profile).size
            flops = training_flops_per_token(size.n_layer, size.n_embd, int(metrics.get("vocab_size")),
                                             size.block_size, not name.startswith("baseline"))
            out["mfu"] = model_flops_utilisation(out["tokens_per_second"], flops, gpu)
            out["throughput_note"] = f"{name} model; FLOPs from the {profile} profile's GPT size"
        except Exception as error:  # noqa: BLE001 - the record must still be written
            out["throughput_note"] = f"MFU not computed ({type(error).__name__}: {error})"
    elif chapter.startswith("08") and isinstance(metrics.get("by_quantization"), dict):
        try:
            from semlm.idea.profiles import lora_profile

            config = lora_profile(profile)
            q = metrics.get("quantization") or next(iter(metrics["by_quantization"]))
            seconds = _mean(metrics["by_quantization"][q]["gated"].get("seconds_per_step"))
            if seconds:
                out["tokens_per_second"] = config.train.batch_size * config.block_size / seconds
                out["throughput_note"] = f"gated LoRA run ({q}); no MFU for a frozen 4-bit backbone"
        except Exception as error:  # noqa: BLE001
            out["throughput_note"] = f"tokens/s not computed ({type(error).__name__}: {error})"
    return out


def gpu_throughput_summary(record: dict) -> dict:
    """The provenance's digest of ``python -m semlm.bench --only gpu``: tokens/s and MFU per setting and model."""
    return {"profile": record.get("profile"), "device_name": record.get("device_name"),
            "variants": {name: {kind: {k: v.get(k) for k in ("tokens_per_second", "mfu", "seconds_per_step",
                                                              "peak_memory_gib", "micro_batches", "compiled")}
                                for kind, v in kinds.items()}
                         for name, kinds in record.get("variants", {}).items()},
            "same_update": record.get("same_update")}


def collect(work: Path, root: Path, commit: str, profile: str, max_steps: str, dry_run: bool, started: float,
            pytest_summary: str = "", idea_model_summary: str = "") -> Path:
    """Write ``<root>/<gpu-slug>/``: the chapters' metrics JSON, the bench record and ``provenance.json``."""
    environment = read_json(work / "environment.json") if (work / "environment.json").is_file() else {}
    gpu = environment.get("gpu_name")
    slug = gpu_slug(gpu) + ("-dry-run" if dry_run else "")
    dest = root / slug
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    chapters = {}
    for row in _read_tsv(work / "chapters.tsv"):
        name = row["chapter"]
        info = {"status": row["status"], "rc": _number(row["rc"]), "wall_seconds": _number(row["seconds"]),
                "profile": row["profile"], "papermill_parameters": row.get("parameters", ""), "metrics_file": None}
        source = work / "metrics" / f"{name}.json"
        if source.is_file():
            shutil.copy2(source, dest / source.name)
            info["metrics_file"] = source.name
            info.update(chapter_throughput(name, read_json(source), gpu))
        chapters[name] = info
    bench = None
    if (work / "metrics" / BENCH).is_file():
        shutil.copy2(work / "metrics" / BENCH, dest / BENCH)
        record = read_json(work / "metrics" / BENCH)
        bench = {k: record.get(k) for k in ("profile", "device", "device_name", "step_flop_ratio", "step_time_ratio",
                                            "step_time_over_flops", "generation_flop_ratio", "generation_time_ratio",
                                            "generation_time_over_flops", "targets", "meets_targets", "verdicts")}
        for kind in ("plain", "gated"):
            if isinstance(record.get(kind), dict):
                bench[kind] = {k: record[kind].get(k) for k in ("train_tokens_per_second", "model_flops_utilisation",
                                                                "generated_tokens_per_second")}
    throughput = None
    if (work / "metrics" / GPU_THROUGHPUT).is_file():
        for name in (GPU_THROUGHPUT, GPU_TRACE):
            if (work / "metrics" / name).is_file():
                shutil.copy2(work / "metrics" / name, dest / name)
        throughput = gpu_throughput_summary(read_json(work / "metrics" / GPU_THROUGHPUT))
    driver = None
    smi = environment.get("nvidia_smi") or ""
    if smi and "," in smi:
        driver = smi.split(",")[0].strip()
    provenance = {
        "label": LABEL,
        "gpu": gpu, "gpu_slug": slug, "driver": driver, "nvidia_smi": smi or None,
        "cuda": environment.get("torch_cuda"),
        "packages": {k: v for k, v in environment.items() if k not in ("gpu_name", "torch_cuda", "nvidia_smi",
                                                                      "cuda_available", "torch_error")},
        "python": sys.version.split()[0],
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_commit": commit, "profile": profile, "max_steps": _number(max_steps), "dry_run": dry_run,
        "total_seconds": round(_dt.datetime.now().timestamp() - started, 1),
        "steps": [{**row, "rc": _number(row.get("rc")), "seconds": _number(row.get("seconds"))}
                  for row in _read_tsv(work / "steps.tsv")],
        "pytest_summary": pytest_summary or None,
        "idea_model_tests": idea_model_summary or None,
        "chapters": chapters,
        "bench": bench,
        "gpu_throughput": throughput,
    }
    (dest / PROVENANCE).write_text(json.dumps(provenance, indent=2))
    return dest


def _summed_wall_seconds(calls: Path) -> tuple[float, int]:
    """``(seconds, calls)`` summed over the rows ``start<TAB>end<TAB>rc`` that ``.ci/run-long`` appends per call."""
    rows = [line.split("\t") for line in calls.read_text().splitlines() if line.strip()]
    try:
        return float(sum(int(end) - int(start) for start, end, _ in rows)), len(rows)
    except ValueError:
        raise ValueError(f"{calls} is not the start/end/rc table .ci/run-long writes; "
                         "delete it and run again") from None


def tokens_seen(metrics: dict) -> dict[str, int]:
    """Training tokens each model of chapter 6's metrics saw: tokens per iteration x its last history step."""
    per_step = metrics.get("training", {}).get("tokens_per_iteration")
    out = {}
    for name in ("baseline", "gated"):
        history = (metrics.get(name) or {}).get("history") or []
        if per_step and history:
            out[name] = int(per_step) * int(history[-1]["step"])
    return out


def _this_commit() -> str:
    from semlm.book.report import git_commit

    return git_commit()


def _utc(moment: _dt.datetime | None = None) -> str:
    """``moment`` (default: now) as the provenance writes dates, ``YYYY-MM-DDTHH:MM:SSZ`` in UTC."""
    return (moment or _dt.datetime.now(_dt.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _memory_gb() -> float | None:
    try:
        return round(int(Path("/proc/meminfo").read_text().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        return None


@contextlib.contextmanager
def _new_folder(dest: Path):
    """A fresh ``<dest>.tmp`` to write into; it replaces ``dest`` only once the block has finished without an error,
    so a failed collection never leaves a half-written folder."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    yield tmp
    shutil.rmtree(dest, ignore_errors=True)
    tmp.replace(dest)


def _cpu_provenance(label: str, kind: str, machine: dict, commit: str, profile, command: str, **more) -> dict:
    """A recorded CPU folder's ``provenance.json``: the machine and packages ``machine`` names (a chapter's metrics,
    or this machine's), this machine's memory, the date (now unless ``more`` gives one), commit and command."""
    keys = ("cpu_model", "cpu_count", "machine", "packages", "python")
    return {"label": label, "kind": kind, "gpu": None, **{k: machine.get(k) for k in keys}, "memory_gb": _memory_gb(),
            "date": _utc(), "git_commit": commit, "profile": profile, "command": command, "dry_run": False, **more}


def _folder_name(prefix: str, name: str, default: str) -> str:
    return f"{prefix}{re.sub(r'[^a-z0-9-]+', '-', name.lower()).strip('-') or default}"


def collect_long(metrics_file: Path, calls: Path, root: Path, name: str, commit: str, command: str) -> Path:
    """Write ``<root>/cpu-<name>/``: chapter 6's metrics of a ``.ci/run-long`` call and its ``provenance.json``.

    The provenance names the machine (processor, cores, memory), the pinned commit, the command, the
    wall time summed over every call that worked on the run (resumed calls included) and the tokens each
    model saw. A metrics file from another profile than ``cpu-long``, or from an older commit, is refused.
    """
    if not metrics_file.is_file():
        raise FileNotFoundError(f"{metrics_file} does not exist: chapter 6 did not finish; run .ci/run-long again")
    metrics = read_json(metrics_file)
    if metrics.get("profile") != "cpu-long":
        raise ValueError(f"{metrics_file} is from profile {metrics.get('profile')!r}, not 'cpu-long'; "
                         f"run .ci/run-long to make it")
    if commit != "unknown" and metrics.get("git_commit") not in (commit, commit[:12], None):
        raise ValueError(f"{metrics_file} was written at commit {metrics.get('git_commit')}, not {commit[:12]}; "
                         f"run .ci/run-long again")
    seconds, n_calls = _summed_wall_seconds(calls) if calls.is_file() else (metrics.get("wall_seconds"), 1)
    dest = root / _folder_name("cpu-", name, "long")
    with _new_folder(dest) as tmp:
        shutil.copy2(metrics_file, tmp / metrics_file.name)
        rate = _mean((metrics.get("training", {}).get("tokens_per_second") or {}).get("gated"))
        provenance = _cpu_provenance(
            CPU_LABEL, "cpu-long", metrics, commit, "cpu-long", command,
            collected_at_commit=_this_commit(),  # the code that wrote this folder (normally the same commit)
            wall_seconds=seconds, calls=n_calls, tokens_seen=tokens_seen(metrics), competence=metrics.get("competence"),
            chapters={metrics_file.stem: {"status": "ok", "profile": "cpu-long", "wall_seconds": seconds,
                                          "metrics_file": metrics_file.name,
                                          "papermill_parameters": "-p profile cpu-long -p workers 2",
                                          "tokens_per_second": rate,
                                          "throughput_note": "gated model, one thread, training only"}})
        (tmp / PROVENANCE).write_text(json.dumps(provenance, indent=2))
    return dest


def collect_book(build_dir: Path, root: Path, name: str, command: str) -> Path:
    """Write ``<root>/cpu-book-<name>/``: a finished whole-book build's ``manifest.json`` (per-chapter wall time
    and core use, the start-to-HTML wall time, from scratch or not), its ``provenance.json`` (machine,
    packages and commit, from the build's chapter metrics), every chapter's metrics (``metrics/``), the claims
    table (``report.json``: the build's report chapter's, or the claims code's of the collecting commit where
    the build has none) and ``VERDICTS.md``. A build that did not finish,
    or that ran on a tree with uncommitted changes, is refused."""
    from semlm.book.claims import evaluate_claims
    from semlm.book.report import load_metrics

    manifest_path = Path(build_dir) / "manifest.json"
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{manifest_path} does not exist: run `make book` first")
    manifest = read_json(manifest_path)
    if not manifest.get("complete") or "total_wall_seconds" not in manifest:
        raise ValueError(f"{manifest_path} is not a finished whole-book build (every chapter and the HTML); "
                         "run `make book` again")
    sources = sorted((Path(build_dir) / "metrics").glob(CHAPTER_FILES))
    metrics = read_json(sources[0]) if sources else {}
    dirty = sorted(p.stem for p in sources if str(read_json(p).get("git_commit", "")).endswith("+dirty"))
    if dirty:
        raise ValueError(f"chapters {', '.join(dirty)} ran on a tree with uncommitted changes; a recorded build "
                         f"must come from a commit as it is (build from a fresh clone)")
    dest = root / _folder_name("cpu-book-", name, "build")
    with _new_folder(dest) as tmp:
        (tmp / BOOK_METRICS).mkdir()
        shutil.copy2(manifest_path, tmp / BOOK_MANIFEST)
        for source in sources:  # the chapters' metrics (no weights, no HTML)
            shutil.copy2(source, tmp / BOOK_METRICS / source.name)
        provenance = _cpu_provenance(
            BOOK_LABEL, "cpu-book", metrics, metrics.get("git_commit", "unknown"), manifest.get("profile"), command,
            date=_utc(_dt.datetime.fromtimestamp(manifest_path.stat().st_mtime, _dt.timezone.utc)),
            collected_at_commit=_this_commit(),
            **{k: manifest.get(k)
               for k in ("total_wall_seconds", "from_scratch", "cpu_seconds", "cores", "utilisation")})
        (tmp / PROVENANCE).write_text(json.dumps(provenance, indent=2))
        built = Path(build_dir) / "metrics" / REPORT
        if built.is_file():  # the build's own verdicts, as its report chapter judged them
            report = read_json(built)
            report["claims_commit"] = report.get("git_commit", "unknown")
        else:
            report = {"claims": evaluate_claims(load_metrics(tmp / BOOK_METRICS)), "claims_commit": _this_commit()}
        report["counts"] = status_counts(report["claims"])
        (tmp / REPORT).write_text(json.dumps(report, indent=2, default=str))
        (tmp / VERDICTS).write_text(verdicts_markdown(report, provenance))
    return dest


def write_precision_comparison(comparison: dict, root: Path, name: str, command: str) -> Path:
    """Write ``<root>/<name>/``: a ``compare_training_variants`` record (``training_variants.json``) and its
    ``provenance.json`` (this machine's CPU, whether it computes bf16 natively, packages, date, commit)."""
    import os
    import platform

    import torch

    from semlm.book.report import cpu_model, package_versions
    from semlm.profiles import cpu_computes_bf16

    commit = _this_commit()  # before the folder is written: writing it would mark the tree "+dirty"
    dest = Path(root) / name
    with _new_folder(dest) as tmp:
        (tmp / TRAINING_VARIANTS).write_text(json.dumps(comparison, indent=2))
        machine = {"cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "machine": platform.machine(),
                   "packages": package_versions(), "python": platform.python_version()}
        provenance = _cpu_provenance(VARIANTS_LABEL, "cpu-variants", machine, commit, comparison.get("profile"),
                                     command, cpu_computes_bf16=cpu_computes_bf16(),
                                     cpu_capability=torch.backends.cpu.get_cpu_capability())
        (tmp / PROVENANCE).write_text(json.dumps(provenance, indent=2))
    return dest


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m semlm.book.recorded", description="Recorded runs and builds.")
    sub = parser.add_subparsers(dest="command", required=True)
    commands = {"collect": "write book/recorded/<gpu>/ from a .ci/run-gpu work folder",
                "collect-long": "write book/recorded/cpu-<name>/ from a .ci/run-long clone",
                "collect-book": "write book/recorded/cpu-book-<name>/ from a finished `make book`",
                "diff": "compare two builds' verdicts claim by claim (recorded folders or book/_build)",
                "show": "print the recorded runs of a chapter"}
    c, g, b, d, s = (sub.add_parser(name, help=text) for name, text in commands.items())
    for command in (c, g, b, s):
        command.add_argument("--root", default=RECORDED_DIR, type=Path)
    for command in (c, g):
        command.add_argument("--commit", default="unknown")
    c.add_argument("--work", required=True, type=Path)
    c.add_argument("--profile", default="paper")
    c.add_argument("--max-steps", default="")
    c.add_argument("--dry-run", default="0")
    c.add_argument("--started", type=float, default=_dt.datetime.now().timestamp())
    c.add_argument("--pytest-summary", default="")
    c.add_argument("--idea-model-summary", default="")
    g.add_argument("--metrics", required=True, type=Path)
    g.add_argument("--calls", required=True, type=Path)
    g.add_argument("--name", default="long")
    g.add_argument("--command", dest="run_command", default="", help="the command that made the run (provenance)")
    b.add_argument("--build-dir", default=Path("book/_build"), type=Path)
    b.add_argument("--name", default="build")
    b.add_argument("--command", dest="run_command", default="make book", help="the command that made the build")
    d.add_argument("a", type=Path, help="a recorded build (book/recorded/cpu-book-*) or a build directory")
    d.add_argument("b", type=Path, help="the same, compared with A")
    s.add_argument("chapter", choices=CHAPTERS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "collect-book":
            print(collect_book(args.build_dir, args.root, args.name, args.run_command))
            if args.root == RECORDED_DIR and update_readme(REPO_ROOT / "README.md", args.root):
                print("README.md: its recorded verdicts now show this build")
        elif args.command == "diff":
            print("\n".join(diff_lines(diff_builds(args.a, args.b))))
        elif args.command == "collect-long":
            print(collect_long(args.metrics, args.calls, args.root, args.name, args.commit, args.run_command))
        elif args.command == "collect":
            dest = collect(args.work, args.root, args.commit, args.profile, args.max_steps, args.dry_run == "1",
                           args.started, args.pytest_summary, args.idea_model_summary)
            print(dest)
        else:
            frame, message = recorded_frame(args.chapter, args.root)
            print(message)
            if not frame.empty:
                print(frame.to_string(index=False))
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
