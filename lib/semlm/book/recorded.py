"""Recorded runs: what ran once elsewhere (a GPU run, a long CPU run, a whole book build), kept in ``book/recorded/``.

A build computes its own numbers; a recorded run can only be *shown*, labelled, beside them. This module
collects a run into ``book/recorded/<folder>/`` with a ``provenance.json`` (machine, packages, date, commit), shows
the chapters' recorded tables (``recorded_*_frame``), judges the folders' metrics with this commit's claims
(:func:`recorded_verdicts`) and compares two builds claim by claim (:func:`diff_builds`).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import psutil

from semlm.book.claims import CLAIMS, evaluate_claims
from semlm.book.flops import model_flops_utilisation, training_flops_per_token
from semlm.book.recorded_runs import (AUTHORS_COMPARISON, AUTHORS_COMPARISON_ONE_WORKER, AUTHORS_COMPARISON_RECORD,
                                      BENCH, BOOK_MANIFEST,
                                      BOOK_METRICS, BOOK_SOURCE_LABEL, CPU_SOURCE_LABEL, GPU_THROUGHPUT, IDEA_PRECISION,
                                      PROVENANCE, RECORDED_DIR, REPORT, SOURCE_LABEL, TRAINING_VARIANTS, RecordedRun,
                                      load_recorded, read_json)
from semlm.book.report import (PACKAGES, attach_recorded, cpu_model, final_status, final_verdicts, git_commit,
                               load_metrics, multiplicity_sentence, plain_summary, verdict_counts)
from semlm.book.tables import table_cell
from semlm.core.verdicts import NOT_RUN
from semlm.core.versions import package_versions
from semlm.data.paths import REPO_ROOT, portable_text
from semlm.idea.profiles import idea_profile, lora_profile
from semlm.profiles import cpu_computes_bf16

LABEL = "recorded GPU run: measured on a GPU machine by .ci/run-gpu, not by this build"
CPU_LABEL = "recorded CPU run: a long run of one chapter by .ci/run-long, from a pinned clone, not by this build"
BOOK_LABEL = ("recorded book build: the whole book from a fresh clone with an empty run cache (`make book`), "
              "collected by `python -m semlm.book.recorded collect-book`, not this build")
CHAPTERS = ("06_idea_gating", "07_xray_and_sweeps", "08_lora_4bit_idea_gating", "09_topic_drift")
GPU_TRACE = "gpu_throughput.trace.txt"
VERDICTS = "VERDICTS.md"     # the claims of a recorded book build, for a reader browsing the repository
VARIANTS_LABEL = ("recorded CPU run: paper A's models trained in float32 and in bf16 over 3 seeds by "
                  "`python -m semlm.bench --only precision`, not by this build")
IDEA_VARIANTS_LABEL = ("recorded CPU run: paper B's models (chapters 6, 7, 9) trained in float32 and in bf16, paired "
                       "by seed, by `python -m semlm.bench --only precision-idea`, not by this build")
#: the file and provenance label of each precision comparison, by the record's paper
PRECISION_FILES = {"A": (TRAINING_VARIANTS, VARIANTS_LABEL), "B": (IDEA_PRECISION, IDEA_VARIANTS_LABEL)}
CHAPTER_FILES = "[0-9][0-9]_*.json"  # a chapter's metrics file (not a benchmark, a manifest or a report)
README_START, README_END = "<!-- recorded-verdicts:start -->", "<!-- recorded-verdicts:end -->"


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
    """The claims code applied to every recorded folder (a book build's ``metrics/`` or a run's chapter files; dry
    runs skipped), apart from the build's own verdicts: ``{claim id: [{folder, folders, commit, commits, machine,
    date, profile, seeds, seed_range, status, value_mean, ci_low, ci_high}, ...]}``, one entry per recorded result:
    folders that hold the same result (:func:`same_result`: the same status, seeds and per-seed values, or where a
    claim keeps no per-seed values the same value and interval) are one entry naming every one of them (``folders``,
    ``commits``; ``folder`` and ``commit`` are the first). ``seeds``: how many training seeds the claim's interval
    rests on (None where the claim does not say); ``seed_range``: the first and last of them, where the claim says."""
    out: dict[str, list[dict]] = {}
    results: dict[str, list[tuple]] = {}  # the same_result of each entry of out[claim id], in its order
    for run in load_recorded(root):
        metrics = run.book_metrics or run.chapters
        if run.dry_run or not (metrics or run.decisive):
            continue
        for row in _decisive_rows(run) if run.decisive else evaluate_claims(metrics):
            if row["status"] == NOT_RUN:
                continue
            result = same_result(row)
            entries, seen = out.setdefault(row["id"], []), results.setdefault(row["id"], [])
            if result not in seen:  # a result no earlier folder holds: a new entry
                low, high = row["ci"] if row.get("ci") else (None, None)
                seen.append(result)
                entries.append({"folder": run.slug, "folders": [], "commit": run.commit[:12], "commits": [],
                                "machine": run.machine, "date": run.date, "profile": row.get("profile"),
                                "seeds": row.get("seeds"), "seed_range": (row.get("power") or {}).get("seed_range"),
                                "status": row["status"], "value_mean": _mean(row.get("causal_value")),
                                "ci_low": low, "ci_high": high})
            entry = entries[seen.index(result)]
            entry["folders"].append(run.slug)
            entry["commits"].append(run.commit[:12])
    return out


def _decisive_rows(run) -> list[dict]:
    """The claims code applied to a CPU seed recording's seed files, as ``collect-decisive`` judges them."""
    from semlm.book.decisive_judge import judged
    from semlm.book.cpu_seeds import read_results

    results = read_results(run.folder)
    return judged(results, run.provenance.get("pilot", True))[0] if results else []


def same_result(row: dict) -> tuple:
    """What makes two recorded folders' results of a claim (rows of ``evaluate_claims``) one result: the status,
    profile and seeds, and the per-seed values where the row keeps them (a summary's ``values``), else its value,
    interval and, for an effect claim, the per-seed SDs of its comparisons (``power.sd_observed``)."""
    value, power = row.get("causal_value"), row.get("power") or {}
    values = value.get("values") if isinstance(value, dict) else None
    numbers = (tuple(values),) if values else (
        _mean(value), tuple(row["ci"]) if row.get("ci") else None, power.get("seed_range"),
        tuple(sorted((power.get("sd_observed") or {}).items())))
    return (row["status"], row.get("profile"), row.get("seeds"), *numbers)


def _build_side(folder: str | Path) -> dict:
    """One side of :func:`diff_builds`: ``{folder, commit, metrics, report, report_file}`` of a recorded book build
    (``metrics/`` and ``report.json``), a build directory (``metrics/*.json`` and ``metrics/report.json``) or a
    recorded run whose chapter files sit in the folder itself (``cpu-long``)."""
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
    metrics = {name: record for name, record in load_metrics(source).items() if name in {p.stem for p in chapters}}
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
    """Two builds' verdicts (a recorded book build, a build directory, or a recorded run), claim by claim, in two
    comparisons kept apart: ``current``, both sides' metrics judged by this commit's claims code, and ``stored``,
    their own ``report.json`` (None unless both have one); with the counts of status changes, value changes beyond
    the intervals and (stored) claims on one side only. A missing folder, no chapter metrics or bad JSON: an error.
    """
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


def readme_verdicts_section(root: str | Path | None = None) -> str:
    """The README's section between its markers: the final-verdict counts per paper of the latest recorded book
    build that keeps its verdicts (``report.json``), re-judged by this commit's claims code (:func:`final_claims`),
    with its commit, machine, date, ``VERDICTS.md`` and the multiplicity sentence. A test compares it with README.md;
    ``python -m semlm.book.recorded readme`` rewrites it after a change to the claims code or to book/recorded."""
    builds = [run for run in load_recorded(root) if run.report is not None and not run.dry_run and run.book_metrics]
    run = max(builds, key=lambda run: run.date, default=None)
    if run is None:
        return (f"{README_START}\nNo recorded build keeps its verdicts yet: `python -m semlm.book.recorded "
                f"collect-book` after a `make book` from a fresh clone writes one.\n{README_END}")
    claims = final_claims(run, root)
    counts = verdict_counts(claims)
    statuses = sorted({status for column in counts.values() for status in column})
    papers = list(counts)
    link = f"book/recorded/{run.slug}/{VERDICTS}"
    lines = [README_START,
             f"The latest recorded `{run.provenance.get('profile')}` build ([{run.slug}]({link}): commit "
             f"`{run.commit[:7]}`, {run.machine}, {run.date[:10]}), its metrics judged by this commit's claims code, "
             f"gives each claim one final verdict: a claim's registered decisive recording, else that build's own "
             f"verdict, else, for a claim its profile cannot test, the competent recorded run the rule names (not the "
             f"verdicts of your own build; `{VERDICTS}` keeps the reasons and rules as that build's own code gave "
             f"them):", "",
             "| status | " + " | ".join(papers) + " |",
             "|---|" + "---|" * len(papers)]
    lines += [f"| {status} | " + " | ".join(str(counts[p].get(status, 0)) for p in papers) + " |"
              for status in statuses]
    summary = [f"- {text}" for text in plain_summary(claims).values()]
    return "\n".join([*lines, "", "In plain words:", "", *summary, "", multiplicity_sentence(claims), README_END])


def final_claims(run: RecordedRun, root: str | Path | None = None) -> list[dict]:
    """A recorded book build's claims with their final verdicts: its stored ``report.json`` rows, each replaced by
    this commit's claims code's verdict wherever its metrics let that code judge the claim, with the recorded runs
    attached (:func:`recorded_verdicts`) and :func:`semlm.book.report.final_verdicts` applied."""
    kinds = {claim.id: claim.kind for claim in CLAIMS}
    rows = {row["id"]: {"kind": kinds.get(row["id"], "paper"), **row} for row in (run.report or {}).get("claims", [])}
    if run.book_metrics:
        rows.update({row["id"]: row for row in evaluate_claims(run.book_metrics) if row["status"] != NOT_RUN})
    return final_verdicts(attach_recorded(list(rows.values()), recorded_verdicts(root)), root=root)


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


def verdicts_markdown(report: dict, provenance: dict) -> str:
    """``VERDICTS.md`` of a recorded book build: the per-status counts per paper, then every claim with its
    status, value, interval, reason and rule (generated from ``report.json``, never edited by hand)."""
    lines = [f"# Verdicts of a recorded `{provenance.get('profile')}` book build",
             "",
             f"Generated by `python -m semlm.book.recorded collect-book` from `{REPORT}` beside this file: the "
             f"claims code of commit `{report.get('claims_commit', '?')[:12]}` applied to the chapter metrics in "
             f"`{BOOK_METRICS}/`, written by the build at commit `{provenance.get('git_commit', '?')[:12]}` on "
             f"{provenance.get('cpu_model')} ({provenance.get('cpu_count')} cores), {provenance.get('date')}.",
             "", *[f"- {text}" for text in (report.get("summary") or plain_summary(report["claims"])).values()],
             "", "| paper | status | claims |", "|---|---|---|"]
    for paper, counts in report["counts"].items():
        lines += [f"| {paper} | {status} | {n} |" for status, n in sorted(counts.items())]
    lines += ["", multiplicity_sentence(report["claims"]), "",
              "| claim | final status | source | this build's status | value | 95% interval | reason | rule |",
              "|---|---|---|---|---|---|---|---|"]
    for row in report["claims"]:
        ci = f"[{row['ci'][0]:.4g}, {row['ci'][1]:.4g}]" if row.get("ci") else ""
        source = (row.get("final") or {}).get("source", "this build")
        lines.append(f"| {row['id']}: {table_cell(row['claim'])} | {final_status(row)} | {source} | {row['status']} | "
                     f"{table_cell(row.get('causal_value'))} | {ci} | {table_cell(row.get('reason'))} | "
                     f"{table_cell(row.get('rule'))} |")
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
    """``(frame, message)``: one row per recorded run of ``chapter`` but the dry runs, labelled as recorded:
    source, machine, date, commit, profile, steps, status, wall seconds, tokens/s, MFU and :func:`key_metrics`."""
    rows = []
    for run in load_recorded(root):
        if run.dry_run or (chapter not in run.chapters and chapter not in run.provenance.get("chapters", {})):
            continue
        info, metrics = run.provenance.get("chapters", {}).get(chapter, {}), run.chapters.get(chapter, {})
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


@dataclass(frozen=True)
class RecordedCpuNumbers:
    recorded_cpu_folder: str
    recorded_cpu_plain: str
    recorded_cpu_gated: str
    recorded_cpu_bigram: str
    recorded_cpu_competence: str


def recorded_cpu_numbers(frame) -> RecordedCpuNumbers:
    """What a chapter's page cites from :func:`recorded_frame`: the latest recorded CPU run's folder,
    perplexities, bigram reference and competence verdict (``"none"`` / ``"n/a"`` where there is no such run)."""
    rows = frame if frame.empty else frame[frame["source"] == CPU_SOURCE_LABEL].sort_values("date")
    row = rows.iloc[-1] if len(rows) else {}

    def number(column) -> str:
        value = _mean(row.get(column))
        return f"{value:.2f}" if value is not None and value == value else "n/a"

    competence = {True: "passes", False: "fails"}.get(row.get("competent"))
    return RecordedCpuNumbers(
        recorded_cpu_folder=row.get("folder", "none (run .ci/run-long)"), recorded_cpu_plain=number("val PPL plain"),
        recorded_cpu_gated=number("val PPL gated"), recorded_cpu_bigram=number("bigram PPL"),
        recorded_cpu_competence=competence or ("has no result for" if len(rows) else "cannot pass"))


def recorded_over_seeds(chapter: str = "06_idea_gating", root: str | Path | None = None):
    """``(over_seeds, where)``: the seed comparison (an :class:`~semlm.idea.records.IdeaOverSeeds`) of the latest
    recorded run of ``chapter`` whose models pass its competence check and that compared at least two training seeds,
    and a phrase naming it (folder, commit, profile); ``(None, why)`` when there is none. For a build whose own models
    fail the check (chapter 6 at ``cpu``), which trains one seed of each and so has no seed comparison of its own."""
    from semlm.idea.records import IdeaOverSeeds

    found = [run for run in load_recorded(root) if not run.dry_run
             and ((metrics := run.chapters.get(chapter, {})).get("competence") or {}).get("passes") is True
             and len((metrics.get("over_seeds") or {}).get("seeds") or []) >= 2]
    if not found:
        return None, f"no recorded run of {chapter} passes the competence check over seeds (run .ci/run-long)"
    run = max(found, key=lambda r: r.date)
    metrics = run.chapters[chapter]
    return IdeaOverSeeds.from_dict(metrics["over_seeds"]), (
        f"book/recorded/{run.slug} (commit {run.commit[:7]}, profile {metrics.get('profile')}, {run.machine})")


def recorded_bench_frame(root: str | Path | None = None):
    """``(frame, message)``: the idea-gate benchmark of each recorded GPU run (FLOP ratio vs time ratio, MFU)."""
    rows = [{"source": run.source, **_run_columns(run), "profile": b.get("profile"), "workload": workload,
             "FLOP ratio": b.get(f"{key}_flop_ratio"), "time ratio": b.get(f"{key}_time_ratio"),
             "time / FLOP ratio": b.get(f"{key}_time_over_flops"),
             "target": (b.get("targets") or {}).get(f"{key}_time_over_flops"),
             "meets": (b.get("meets_targets") or {}).get(key),
             "MFU gated (training)": (b.get("gated") or {}).get("model_flops_utilisation") if key == "step" else None}
            for run in load_recorded(root) if (b := run.bench) and not (run.dry_run or run.on_cpu)
            for workload, key in (("training step", "step"), ("generation, per new token", "generation"))]
    frame, empty = _labelled(rows, LABEL, root, "GPU benchmark in {where} (run `make test-gpu` on a GPU machine)")
    return frame, empty or f"{SOURCE_LABEL}(s): measured on a GPU machine, not by this build"


def recorded_gpu_throughput_frame(root: str | Path | None = None):
    """``(frame, message)``: the trainer's tokens/s and MFU per execution setting of each recorded GPU run,
    with the same-update check of each setting (relative gradient difference, bf16 / float32) in
    ``frame.attrs["same_update"]``."""
    runs = [run for run in load_recorded(root) if run.gpu_throughput and not run.dry_run]
    rows = [{**_run_columns(run), "profile": run.gpu_throughput.get("profile"), "setting": setting, "model": kind,
             "micro-batches": v.get("micro_batches"), "compiled": v.get("compiled"),
             "tokens/s": v.get("tokens_per_second"), "MFU": v.get("mfu"),
             "ms / step": 1e3 * v["seconds_per_step"] if v.get("seconds_per_step") else None,
             "peak GiB": v.get("peak_memory_gib"), "profiled": "yes" if "table" in (v.get("trace") or {}) else "",
             "note": v.get("error") or v.get("skipped") or ""}
            for run in runs for setting, kinds in run.gpu_throughput.get("variants", {}).items()
            for kind, v in kinds.items()]
    frame, empty = _labelled(rows, LABEL, root, "GPU throughput in {where} (run `make test-gpu` on a GPU machine)")
    frame.attrs["same_update"] = {f"book/recorded/{run.slug}": run.gpu_throughput.get("same_update") or {}
                                  for run in runs}
    return frame, empty or f"{SOURCE_LABEL}(s): the trainer's speed per execution setting, measured on a GPU machine"


#: Validation tokens of WikiText-103 under GPT-2's tokeniser, about (its 217,646 words at about 1.15 tokens each):
#: an assumption of :func:`paper_run_estimate`, stated with it.
WIKITEXT103_VALID_TOKENS = 250_000


def paper_run_estimate(root: str | Path | None = None) -> list[dict]:
    """What the authors' run (the ``paper`` profile: 50,000 iterations of 32 x 256 tokens, validation every 1,000)
    would take per recorded GPU throughput run, at its fastest setting per model: training ``I x B / r`` and
    validation ``(I / E) x V / (3 r)`` (a forward pass is about a third of a training step's work), with ``r`` the
    setting's training tokens/s, ``V`` = :data:`WIKITEXT103_VALID_TOKENS`. One row per run and model."""
    config = idea_profile("paper")
    train = config.train
    per_iteration = train.batch_size * config.size.block_size
    rows = []
    for run in load_recorded(root):
        if not run.gpu_throughput or run.dry_run:
            continue
        for model in ("plain", "gated"):
            rates = {setting: kinds[model]["tokens_per_second"]
                     for setting, kinds in run.gpu_throughput.get("variants", {}).items()
                     if (kinds.get(model) or {}).get("tokens_per_second")}
            if not rates:
                continue
            setting = max(rates, key=rates.get)
            rate = rates[setting]
            training = train.max_steps * per_iteration / rate
            validation = train.max_steps / train.eval_every * WIKITEXT103_VALID_TOKENS / (3 * rate)
            rows.append({"folder": run.slug, "gpu": run.gpu_throughput.get("device_name"), "model": model,
                         "setting": setting, "tokens_per_second": rate, "iterations": train.max_steps,
                         "tokens_per_iteration": per_iteration, "training_minutes": training / 60,
                         "validation_minutes": validation / 60, "total_minutes": (training + validation) / 60})
    return rows


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


def chapter_throughput(chapter: str, metrics: dict, gpu: str | None) -> dict:
    """Training tokens/s the chapter reports (the gated model's, else the first) and its MFU.

    Chapter 6 reports ``training.tokens_per_second`` per run, its MFU counted at the profile's GPT size. Chapter 8
    reports seconds per LoRA step, its tokens/s follow from the profile's batch, and a frozen 4-bit backbone's
    FLOPs are not what the counter counts: no MFU.
    """
    out = dict.fromkeys(("tokens_per_second", "mfu", "throughput_note"))
    profile, rates = metrics.get("profile"), metrics.get("training", {}).get("tokens_per_second")
    per_run = isinstance(rates, dict) and bool(rates)
    try:  # a throughput that cannot be computed is noted; the record must still be written
        if per_run:
            chosen = metrics.get("gated", {}).get("run") if isinstance(metrics.get("gated"), dict) else None
            name = (chosen if chosen in rates else "gated" if "gated" in rates
                    else next((n for n in rates if n.startswith("gated")), next(iter(rates))))
            out["tokens_per_second"] = _mean(rates[name])
            size = idea_profile(profile).size
            flops = training_flops_per_token(size.n_layer, size.n_embd, int(metrics.get("vocab_size")),
                                             size.block_size, not name.startswith("baseline"))
            out["mfu"] = model_flops_utilisation(out["tokens_per_second"], flops, gpu)
            out["throughput_note"] = f"{name} model; FLOPs from the {profile} profile's GPT size"
        elif chapter.startswith("08") and isinstance(metrics.get("by_quantization"), dict):
            config = lora_profile(profile)
            q = metrics.get("quantization") or next(iter(metrics["by_quantization"]))
            seconds = _mean(metrics["by_quantization"][q]["gated"].get("seconds_per_step"))
            if seconds:
                out["tokens_per_second"] = config.train.batch_size * config.block_size / seconds
                out["throughput_note"] = f"gated LoRA run ({q}); no MFU for a frozen 4-bit backbone"
    except Exception as error:  # noqa: BLE001
        out["throughput_note"] = f"{'MFU' if per_run else 'tokens/s'} not computed ({type(error).__name__}: {error})"
    return out


def _utc(moment: _dt.datetime | None = None) -> str:
    """``moment`` (default: now) as the provenance writes dates, ``YYYY-MM-DDTHH:MM:SSZ`` in UTC."""
    return (moment or _dt.datetime.now(_dt.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write_folder(dest: Path, provenance: dict, files: dict[str, Path | str]) -> Path:
    """Write ``dest`` anew: ``files`` (name -> a file to copy, or a text) and ``provenance.json``, first into
    ``<dest>.tmp``, which replaces ``dest`` once complete (a failed collection leaves no half-written folder)."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for name, content in {**files, PROVENANCE: json.dumps(provenance, indent=2)}.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):  # text files are copied with machine paths made portable
            try:
                content = content.read_text()
            except UnicodeDecodeError:
                shutil.copy2(content, tmp / name)
                continue
        (tmp / name).write_text(portable_text(content))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.replace(dest)
    return dest


#: Recorded files that are text (the others, if any, are left as they are).
TEXT_SUFFIXES = (".json", ".jsonl", ".md", ".log", ".txt", ".tsv")


def mend_paths(root: str | Path | None = None) -> list[Path]:
    """Rewrite every recorded text file under ``root`` (default ``book/recorded``) with :func:`portable_text`;
    returns the files that changed. Values and verdicts are untouched: only the folders of the machines that
    wrote them go."""
    root = RECORDED_DIR if root is None else Path(root)
    changed = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES):
        text = path.read_text()
        mended = portable_text(text)
        if mended != text:
            path.write_text(mended)
            changed.append(path)
    return changed


def _read_tsv(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    lines = path.read_text().splitlines()
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:] if line.strip()]


def _number(text):
    for kind in (int, float):
        try:
            return kind(text)
        except (TypeError, ValueError):
            pass
    return text


def collect(work: Path, root: Path, commit: str, profile: str, max_steps: str, dry_run: bool, started: float,
            pytest_summary: str = "", idea_model_summary: str = "") -> Path:
    """Write ``<root>/<gpu-slug>/`` from a ``.ci/run-gpu`` work folder: the chapters' metrics JSON, the bench and
    GPU-throughput records and ``provenance.json`` (GPU, driver, packages, each step's status and wall time)."""
    environment = read_json(work / "environment.json") if (work / "environment.json").is_file() else {}
    gpu, smi, metrics = environment.get("gpu_name"), environment.get("nvidia_smi") or "", work / "metrics"
    chapters, files = {}, {}
    for row in _read_tsv(work / "chapters.tsv"):
        name, source = row["chapter"], metrics / f"{row['chapter']}.json"
        chapters[name] = {"status": row["status"], "rc": _number(row["rc"]), "wall_seconds": _number(row["seconds"]),
                          "profile": row["profile"], "papermill_parameters": row.get("parameters", ""),
                          "metrics_file": source.name if source.is_file() else None}
        if source.is_file():
            files[source.name] = source
            chapters[name].update(chapter_throughput(name, read_json(source), gpu))
    copied = (BENCH, GPU_THROUGHPUT, GPU_TRACE) if (metrics / GPU_THROUGHPUT).is_file() else (BENCH,)
    files.update({name: metrics / name for name in copied if (metrics / name).is_file()})
    bench = read_json(metrics / BENCH) if BENCH in files else None
    speed = read_json(metrics / GPU_THROUGHPUT) if GPU_THROUGHPUT in files else None
    slug = gpu_slug(gpu) + ("-dry-run" if dry_run else "")
    provenance = {
        "label": LABEL, "gpu": gpu, "gpu_slug": slug, "driver": smi.split(",")[0].strip() if "," in smi else None,
        "nvidia_smi": smi or None, "cuda": environment.get("torch_cuda"),
        "packages": {k: v for k, v in environment.items() if k not in ("gpu_name", "torch_cuda", "nvidia_smi",
                                                                      "cuda_available", "torch_error")},
        "python": sys.version.split()[0], "date": _utc(), "git_commit": commit, "profile": profile,
        "max_steps": _number(max_steps), "dry_run": dry_run,
        "total_seconds": round(_dt.datetime.now().timestamp() - started, 1),
        "steps": [{**row, "rc": _number(row.get("rc")), "seconds": _number(row.get("seconds"))}
                  for row in _read_tsv(work / "steps.tsv")],
        "pytest_summary": pytest_summary or None, "idea_model_tests": idea_model_summary or None,
        "chapters": chapters,
        "bench": None if bench is None else {
            **{k: bench.get(k) for k in ("profile", "device", "device_name", "step_flop_ratio", "step_time_ratio",
                                         "step_time_over_flops", "generation_flop_ratio", "generation_time_ratio",
                                         "generation_time_over_flops", "targets", "meets_targets", "verdicts")},
            **{kind: {k: bench[kind].get(k) for k in ("train_tokens_per_second", "model_flops_utilisation",
                                                      "generated_tokens_per_second")}
               for kind in ("plain", "gated") if isinstance(bench.get(kind), dict)}},
        "gpu_throughput": None if speed is None else {  # tokens/s and MFU per setting and model
            "profile": speed.get("profile"), "device_name": speed.get("device_name"),
            "variants": {setting: {kind: {k: v.get(k) for k in ("tokens_per_second", "mfu", "seconds_per_step",
                                                                 "peak_memory_gib", "micro_batches", "compiled")}
                                   for kind, v in kinds.items()}
                         for setting, kinds in speed.get("variants", {}).items()},
            "same_update": speed.get("same_update")},
    }
    return _write_folder(root / slug, provenance, files)


def _cpu_provenance(label: str, kind: str, machine: dict, commit: str, profile, command: str, **more) -> dict:
    """A recorded CPU folder's ``provenance.json``: the machine and packages ``machine`` names (a chapter's metrics,
    or this machine's), this machine's memory, the date (now unless ``more`` gives one), commit and command."""
    keys = ("cpu_model", "cpu_count", "machine", "packages", "python")
    return {"label": label, "kind": kind, "gpu": None, **{k: machine.get(k) for k in keys},
            "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "date": _utc(), "git_commit": commit, "profile": profile, "command": command, "dry_run": False, **more}


def _this_machine() -> dict:
    """This machine's processor, core count, architecture, packages and Python, in the fields a chapter's metrics
    record them in."""
    return {"cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "machine": platform.machine(),
            "packages": package_versions(PACKAGES), "python": platform.python_version()}


def _folder_name(prefix: str, name: str, default: str) -> str:
    return f"{prefix}{re.sub(r'[^a-z0-9-]+', '-', name.lower()).strip('-') or default}"


def collect_long(metrics_file: Path, calls: Path, root: Path, name: str, commit: str, command: str) -> Path:
    """Write ``<root>/cpu-<name>/``: chapter 6's metrics of a ``.ci/run-long`` call and its ``provenance.json``.

    The provenance names the machine, the pinned commit, the command, the wall time summed over every call that
    worked on the run (rows ``start<TAB>end<TAB>rc`` of ``calls``) and the tokens each model saw. Metrics from
    another profile than ``cpu-long``, or from an older commit, are refused.
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
    seconds, n_calls = metrics.get("wall_seconds"), 1
    if calls.is_file():
        rows = [line.split("\t") for line in calls.read_text().splitlines() if line.strip()]
        try:
            seconds, n_calls = float(sum(int(end) - int(start) for start, end, _ in rows)), len(rows)
        except ValueError:
            raise ValueError(f"{calls} is not the start/end/rc table .ci/run-long writes; "
                             "delete it and run again") from None
    per_step = metrics.get("training", {}).get("tokens_per_iteration")  # tokens seen: x each model's last step
    seen = {model: int(per_step) * int(history[-1]["step"]) for model in ("baseline", "gated")
            if per_step and (history := (metrics.get(model) or {}).get("history"))}
    rate = _mean((metrics.get("training", {}).get("tokens_per_second") or {}).get("gated"))
    provenance = _cpu_provenance(
        CPU_LABEL, "cpu-long", metrics, commit, "cpu-long", command,
        collected_at_commit=git_commit(),  # the code that wrote this folder (normally the same commit)
        wall_seconds=seconds, calls=n_calls, tokens_seen=seen, competence=metrics.get("competence"),
        chapters={metrics_file.stem: {"status": "ok", "profile": "cpu-long", "wall_seconds": seconds,
                                      "metrics_file": metrics_file.name,
                                      "papermill_parameters": "-p profile cpu-long -p workers 2",
                                      "tokens_per_second": rate,
                                      "throughput_note": "gated model, one thread, training only"}})
    return _write_folder(root / _folder_name("cpu-", name, "long"), provenance, {metrics_file.name: metrics_file})


def collect_book(build_dir: Path, root: Path, name: str, command: str) -> Path:
    """Write ``<root>/cpu-book-<name>/`` from a finished whole-book build that ran on a clean tree: its
    ``manifest.json`` (wall time and core use), ``provenance.json`` (machine, packages and commit, from the chapter
    metrics), every chapter's metrics (``metrics/``), the claims table (``report.json``: the build's report
    chapter's, else the collecting commit's claims code's) and ``VERDICTS.md``."""
    manifest_path = Path(build_dir) / "manifest.json"
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{manifest_path} does not exist: run `make book` first")
    manifest = read_json(manifest_path)
    if not manifest.get("complete") or "total_wall_seconds" not in manifest:
        raise ValueError(f"{manifest_path} is not a finished whole-book build (every chapter and the HTML); "
                         "run `make book` again")
    sources = sorted((Path(build_dir) / "metrics").glob(CHAPTER_FILES))  # the chapters' metrics (no weights, no HTML)
    chapters = {path.stem: read_json(path) for path in sources}
    dirty = sorted(name for name, record in chapters.items() if str(record.get("git_commit", "")).endswith("+dirty"))
    if dirty:
        raise ValueError(f"chapters {', '.join(dirty)} ran on a tree with uncommitted changes; a recorded build "
                         f"must come from a commit as it is (build from a fresh clone)")
    metrics = chapters[sources[0].stem] if sources else {}
    provenance = _cpu_provenance(
        BOOK_LABEL, "cpu-book", metrics, metrics.get("git_commit", "unknown"), manifest.get("profile"), command,
        date=_utc(_dt.datetime.fromtimestamp(manifest_path.stat().st_mtime, _dt.timezone.utc)),
        collected_at_commit=git_commit(),
        **{k: manifest.get(k) for k in ("total_wall_seconds", "from_scratch", "cpu_seconds", "cores", "utilisation")})
    built = Path(build_dir) / "metrics" / REPORT
    if built.is_file():  # the build's own verdicts, as its report chapter judged them
        report = read_json(built)
        report["claims_commit"] = report.get("git_commit", "unknown")
    else:
        report = {"claims": evaluate_claims(chapters), "claims_commit": provenance["collected_at_commit"]}
    if not all("final" in row for row in report["claims"]):  # a report written before final verdicts existed
        report["claims"] = final_verdicts(attach_recorded(report["claims"], recorded_verdicts(root)),
                                           root=root)
    report["counts"] = verdict_counts(report["claims"])
    report["summary"] = plain_summary(report["claims"])
    return _write_folder(root / _folder_name("cpu-book-", name, "build"), provenance, {
        BOOK_MANIFEST: manifest_path, **{f"{BOOK_METRICS}/{path.name}": path for path in sources},
        REPORT: json.dumps(report, indent=2, default=str), VERDICTS: verdicts_markdown(report, provenance)})


def write_precision_comparison(comparison: dict, root: Path, name: str, command: str, paper: str = "A") -> Path:
    """Write ``<root>/<name>/``: a float32 / bf16 comparison of ``paper``'s models (A: ``compare_training_variants``'s
    ``training_variants.json``; B: ``compare_idea_precisions``'s ``idea_precision.json``) and its
    ``provenance.json`` (this machine's CPU, whether it computes bf16 natively, packages, date, commit)."""
    import torch

    file, label = PRECISION_FILES[paper]
    provenance = _cpu_provenance(label, "cpu-variants", _this_machine(), git_commit(), comparison.get("profile"),
                                 command, cpu_computes_bf16=cpu_computes_bf16(),
                                 cpu_capability=torch.backends.cpu.get_cpu_capability())
    return _write_folder(Path(root) / name, provenance, {file: json.dumps(comparison, indent=2)})


def write_authors_comparison(record: dict, root: Path, command: str) -> Path:
    """Write ``<root>/authors-comparison/`` (``authors-comparison-one-worker/`` for a comparison whose side ran one
    training process, ``--workers 1``): the ``authors_comparison`` record of ``python -m semlm.bench
    --authors-script`` and its ``provenance.json`` (this machine, packages, date, commit). Their script is never
    copied: the record names it by file name and SHA-256."""
    label = ("recorded CPU run: the authors' script against our synthetic experiment, both measured in turn on one "
             "machine by `python -m semlm.bench --authors-script`, not by this build")
    provenance = _cpu_provenance(label, "cpu-bench", _this_machine(), git_commit(), record.get("profile"), command)
    one = (record.get("ours", {}).get("workload", {}).get("workers") or 2) == 1
    folder = AUTHORS_COMPARISON_ONE_WORKER if one else AUTHORS_COMPARISON_RECORD
    return _write_folder(Path(root) / folder, provenance,
                         {AUTHORS_COMPARISON: json.dumps({"authors_comparison": record}, indent=2)})


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m semlm.book.recorded", description="Recorded runs and builds.")
    sub = parser.add_subparsers(dest="command", required=True)
    commands = {"collect": "write book/recorded/<gpu>/ from a .ci/run-gpu work folder",
                "collect-long": "write book/recorded/cpu-<name>/ from a .ci/run-long clone",
                "collect-book": "write book/recorded/cpu-book-<name>/ from a finished `make book`",
                "diff": "compare two builds' verdicts claim by claim (recorded folders or book/_build)",
                "show": "print the recorded runs of a chapter",
                "readme": "rewrite README.md's recorded verdicts from book/recorded and this commit's claims code",
                "mend-paths": "rewrite machine paths in recorded text files as portable ones (semlm.data.paths)"}
    c, g, b, d, s, r, m = (sub.add_parser(name, help=text) for name, text in commands.items())
    for command in (c, g, b, s, r, m):
        command.add_argument("--root", default=RECORDED_DIR, type=Path)
    for command in (c, g):
        command.add_argument("--commit", default="unknown")
    c.add_argument("--work", required=True, type=Path)
    for flag, default in (("--profile", "paper"), ("--max-steps", ""), ("--dry-run", "0"),
                          ("--started", _dt.datetime.now().timestamp()), ("--pytest-summary", ""),
                          ("--idea-model-summary", "")):
        c.add_argument(flag, default=default, type=type(default))
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
        elif args.command == "readme":
            changed = update_readme(REPO_ROOT / "README.md", args.root)
            print("README.md: its recorded verdicts " + ("rewritten" if changed else "were already up to date"))
        elif args.command == "diff":
            print("\n".join(diff_lines(diff_builds(args.a, args.b))))
        elif args.command == "mend-paths":
            mended = mend_paths(args.root)
            print(f"{len(mended)} recorded files had machine paths, now portable" + "".join(f"\n  {p}" for p in mended))
        elif args.command == "collect-long":
            print(collect_long(args.metrics, args.calls, args.root, args.name, args.commit, args.run_command))
        elif args.command == "collect":
            print(collect(args.work, args.root, args.commit, args.profile, args.max_steps, args.dry_run == "1",
                          args.started, args.pytest_summary, args.idea_model_summary))
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
