"""The deciding side of ``python -m semlm.book seeds`` (:mod:`semlm.book.seeds` trains and scores one seed): the
registration checks, the command that runs seeds in batches of processes, ``collect-seeds`` and the report's line
on the registration's progress. Apart from :mod:`semlm.book.seeds` because the registration
(:mod:`semlm.book.registration`) imports that module's :class:`~semlm.book.seeds.Protocol`.

A deciding call (not ``--pilot``) refuses to start unless a registration is committed
(:data:`semlm.book.registration.B_SEEDS`) and, where the checkout is a git clone and ``$SEMLM_COMMIT`` is unset,
unless the tree is clean apart from the recording's ``seeds/`` folder, HEAD descends from the registration commit
and the registered files are unchanged since it. On a machine sent the files alone (a bare GPU machine: its
``.git``, if any, is not this tree's history) the command takes the commit from ``$SEMLM_COMMIT`` and records the
registered files' SHA-256, which ``collect`` checks against the registration commit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from semlm.book.registration import B_CLAIMS, B_SEEDS, REGISTERED_FILES, registration_commit
from semlm.book.seeds import (CHAPTER, Protocol, SeedsError, assembled_record, current_commit, git, has_git, machine,
                              pilot_seeds, read_seeds, run_seed_process, seed_range, spawn_context, utc_now,
                              variance_split)
from semlm.data.paths import REPO_ROOT


def registered_hashes(files=REGISTERED_FILES) -> dict[str, str]:
    """SHA-256 of each file a registration freezes (default paper B's), as they are in this checkout."""
    return {name: hashlib.sha256((REPO_ROOT / name).read_bytes()).hexdigest() for name in files}


def tree_checks(folder: Path, files: tuple[str, ...], registered: str | None) -> dict:
    """The checks of a deciding call, whatever the registration: on a git clone (``$SEMLM_COMMIT`` unset), HEAD
    descends from the ``registered`` commit, the registered ``files`` are unchanged since it and the tree is clean
    apart from the recording's ``seeds/`` folder; without the history, the commit from ``$SEMLM_COMMIT``. Returns
    what was checked, with the registered files' SHA-256; raises :class:`SeedsError` with the reason."""
    hashes = registered_hashes(files)
    if os.environ.get("SEMLM_COMMIT") or not has_git():  # the files came without (or with a stale) history
        commit = os.environ.get("SEMLM_COMMIT")
        if not commit:
            raise SeedsError("no .git here: set SEMLM_COMMIT to the commit these files come from (collect checks "
                             "the registered files' SHA-256 against the registration)")
        return {"commit": commit, "checked_by_git": False, "registered_files_sha256": hashes}
    commit = git("rev-parse", "HEAD").stdout.strip()
    if registered is None:
        raise SeedsError(f"{files[0]} is not committed; commit the registration first")
    if git("merge-base", "--is-ancestor", registered, commit).returncode != 0:
        raise SeedsError(f"HEAD {commit[:12]} does not descend from the registration {registered[:12]}")
    changed = git("diff", "--name-only", registered, "HEAD", "--", *files).stdout.split()
    if changed:
        raise SeedsError(f"registered files changed since the registration {registered[:12]}: {', '.join(changed)}; "
                         f"a new registration needs a new commit and new seeds")
    seeds_dir = folder.resolve() / "seeds"
    dirty = [line[3:] for line in git("status", "--porcelain", "--untracked-files=all").stdout.splitlines()]
    dirty = [p for p in dirty if not (REPO_ROOT / p).resolve().is_relative_to(seeds_dir)]
    if dirty:
        raise SeedsError(f"the tree has changes outside the recording's seeds/ folder ({', '.join(dirty[:3])}"
                         f"{', ...' if len(dirty) > 3 else ''}); a deciding run comes from a clean commit")
    return {"commit": commit, "checked_by_git": True, "registration": registered, "registered_files_sha256": hashes}


# -- the command ---------------------------------------------------------------------------------------------------


def planned_seeds(args) -> list[int]:
    if args.pilot:
        return pilot_seeds(args.seeds, range(501, 513), "501-512")
    seeds = seed_range(args.seeds) if args.seeds else list(B_SEEDS.seeds)
    if B_SEEDS is not None and not set(seeds) <= set(B_SEEDS.all_seeds):
        raise SeedsError(f"seeds {seeds[0]}-{seeds[-1]} are not the registered ones "
                         f"({B_SEEDS.seeds[0]}-{B_SEEDS.seeds[-1]} and their spares)")
    return seeds


def seeds_command(args: argparse.Namespace) -> int:
    """Run the seeds in batches of ``--processes``, skipping those whose file exists; no new batch after
    ``--budget`` seconds."""
    start = time.monotonic()
    if args.processes < 1:
        raise SeedsError(f"--processes must be >= 1, got {args.processes}")
    if args.budget is not None and args.budget <= 0:
        raise SeedsError(f"--budget must be a positive number of seconds, got {args.budget}")
    if not args.pilot and B_SEEDS is None:
        raise SeedsError("no registration of paper B's seeds is committed (semlm.book.registration.B_SEEDS is None); "
                         "run a pilot with --pilot (seeds 501-999), then commit the registration")
    folder = Path(args.folder) if args.folder else REPO_ROOT / "book" / "recorded" / (
        "gpu-pilot" if args.pilot else B_SEEDS.folder)
    if args.pilot:
        checks = {"pilot": True, "commit": current_commit()}
    else:  # a deciding call that is not the registered one is refused (module docstring)
        checks = tree_checks(folder, REGISTERED_FILES, registration_commit())
    seeds = planned_seeds(args)
    protocol = replace(Protocol() if args.pilot else B_SEEDS.protocol, profile=args.profile)
    out = folder / "seeds"
    todo = [s for s in seeds if not (out / f"{s}.json").is_file()]
    print(f"seeds: {len(seeds) - len(todo)} of {len(seeds)} already recorded in {out}; {len(todo)} to run, "
          f"{args.processes} at a time", flush=True)
    if not todo:
        return 0
    import torch

    from semlm.idea.profiles import idea_profile
    from semlm.idea.rule_prompts import wikitext2_rule_prompts
    from semlm.idea.generation import stop_words
    from semlm.idea.wikitext_experiment import idea_data

    stop_words(), wikitext2_rule_prompts()  # a missing stop list or data file stops here, before any training
    idea_data(idea_profile(protocol.profile, seeds[0]))  # the tokeniser, once, before the workers need it
    runs_dir = Path(args.runs_dir)
    out.mkdir(parents=True, exist_ok=True)
    calls = folder / "calls.jsonl"
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    call = start_call(calls, checks, machine=machine(), device=device)
    done, failed = [], []
    for i in range(0, len(todo), args.processes):
        if args.budget is not None and time.monotonic() - start > args.budget:
            print(f"seeds: --budget {args.budget:.0f} s passed; no new batch started ({len(todo) - i} seeds left: "
                  f"run the same command again to go on)", flush=True)
            break
        batch = todo[i: i + args.processes]
        t0 = time.monotonic()
        with ProcessPoolExecutor(len(batch), mp_context=spawn_context()) as pool:
            futures = {s: pool.submit(run_seed_process, s, protocol, str(runs_dir), str(out), device) for s in batch}
            for seed, future in futures.items():
                settle(future, seed, f"seeds: seed {seed}", done, failed)
        print(f"seeds: batch {batch[0]}-{batch[-1]} finished in {time.monotonic() - t0:.0f} s "
              f"({len(done)} done, {len(failed)} failed, {time.monotonic() - start:.0f} s in all)", flush=True)
    end_call(calls, call, done, failed)
    return 1 if failed else 0


def settle(future, key, label: str, done: list, failed: list) -> None:
    """Add a finished seed's ``key`` to ``done``, or to ``failed`` with a line (``label``, then the error): one seed's
    failure is reported and the others go on."""
    try:
        future.result()
        done.append(key)
    except Exception as exc:
        failed.append(key)
        print(f"{label} failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)


def start_call(calls: Path, checks: dict, **more) -> dict:
    """A call's entry in a recording's log ``calls``: its start, its checks, its command line and ``more``, written
    at once, so that a call killed from outside still names itself; :func:`end_call` writes its end."""
    call = {"started_at": utc_now(), **checks, "argv": sys.argv[1:], **more}
    _log(calls, {**call, "event": "start"})
    return call


def end_call(calls: Path, call: dict, done: list, failed: list) -> None:
    """Write the end of ``call`` (:func:`start_call`) into the log ``calls``: the seeds done and failed."""
    _log(calls, {**call, "ended_at": utc_now(), "done": done, "failed": failed, "event": "end"})


def _log(calls: Path, entry: dict) -> None:
    with open(calls, "a") as f:
        f.write(json.dumps(entry, default=str) + "\n")


def parser(commands) -> argparse.ArgumentParser:
    cmd = commands.add_parser(
        "seeds", help="train and score many seeds of chapter 6's competent recipe, one process per seed",
        description="Train chapter 6's plain and gated GPT for each seed (one process per seed), score them once "
                    "with the registered protocol, and write one small JSON per seed into the recording's seeds/ "
                    "folder; seeds whose file exists are skipped, so a second call resumes.")
    cmd.add_argument("--pilot", action="store_true",
                     help="pilot seeds (501-512 unless --seeds) into book/recorded/gpu-pilot/, without the "
                          "registration checks")
    cmd.add_argument("--seeds", metavar="A-B", help="a range of seeds (default: the registration's, or 501-512)")
    cmd.add_argument("--processes", type=int, default=1, help="seeds trained side by side (default 1)")
    cmd.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                     help="start no new batch after this many seconds (default: no limit)")
    cmd.add_argument("--profile", default="cpu-long", choices=("cpu-long", "smoke"),
                     help="chapter 6's recipe (cpu-long, the competent one; smoke for the tests)")
    cmd.add_argument("--folder", type=Path, default=None, help="the recording's folder (default: the registration's)")
    cmd.add_argument("--runs-dir", type=Path, default=Path("/tmp/semlm-seeds-runs"),
                     help="run cache within this call (weights are not kept; default /tmp/semlm-seeds-runs)")
    cmd.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    return cmd


# -- collect ---------------------------------------------------------------------------------------------------------


def read_calls(path: Path) -> list[dict]:
    """The calls a recording logged (one JSON line each; none where the log is missing)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def check_calls(calls: list[dict], expected: dict[str, str]) -> None:
    """Refuse a recording any of whose calls ran with registered files other than the registration's."""
    for call in calls:
        if call.get("registered_files_sha256") not in (None, expected):
            raise SeedsError(f"a call of {call.get('started_at')} ran with registered files other than the "
                             f"registration's; its seeds cannot decide")


def write_collection(folder: Path, claims: list[dict], provenance: dict, markdown, more: dict | None = None) -> Path:
    """Write a collected recording: ``more``'s JSON files, ``provenance.json``, ``report.json`` (``claims``, judged
    by this commit's claims code) and ``VERDICTS.md`` (``markdown(report, provenance)``); returns ``folder``."""
    from semlm.book.report import plain_summary, verdict_counts
    from semlm.core.runs import write_atomic

    report = {"claims": claims, "claims_commit": git("rev-parse", "HEAD").stdout.strip() if has_git() else "?",
              "counts": verdict_counts(claims), "summary": plain_summary(claims)}
    for name, value in {**(more or {}), "provenance.json": provenance, "report.json": report}.items():
        write_atomic(folder / name, json.dumps(value, indent=1, default=str) + "\n")
    write_atomic(folder / "VERDICTS.md", markdown(report, provenance))
    return folder


def claim_lines(claims: list[dict], seeds: bool = False) -> list[str]:
    """``VERDICTS.md``'s claims table: status, value, 95% interval and reason per claim (with ``seeds``, a column
    of each claim's seed count)."""
    from semlm.book.tables import table_cell

    lines = ["| claim |" + (" seeds |" if seeds else "") + " status | value | 95% interval | reason |",
             "|---|---|---|---|---|" + ("---|" if seeds else "")]
    for row in claims:
        ci = f"[{row['ci'][0]:.4g}, {row['ci'][1]:.4g}]" if row.get("ci") else ""
        lines.append(f"| {row['id']} |" + (f" {row['seeds']} |" if seeds else "") + f" {row['status']} | "
                     f"{table_cell(row.get('causal_value'))} | {ci} | {table_cell(row.get('reason'))} |")
    return lines


def add_collect_parser(commands, name: str, what: str, files: str, folder: str) -> None:
    """``name``'s subcommand: collect a recording (``what``) from its seed files (``files``) in ``folder``."""
    cmd = commands.add_parser(name, help=f"write {what}'s provenance, report and verdicts",
                              description=f"From a recording's {files}.")
    cmd.add_argument("folder", type=Path, help=f"the recording's folder ({folder})")
    cmd.add_argument("--pilot", action="store_true", help="a pilot: any seeds, no registration")


def collect(folder: Path, pilot: bool = False) -> Path:
    """Write ``provenance.json``, ``06_idea_gating.json``, ``report.json`` and ``VERDICTS.md`` into ``folder``
    from its seed files: a deciding folder must hold exactly the registered seeds (a pilot, any seeds)."""
    from semlm.book.claims import evaluate_claims

    folder = Path(folder)
    results = read_seeds(folder)
    seeds = [r["seed"] for r in results]
    calls = read_calls(folder / "calls.jsonl")
    reg = B_SEEDS
    if not pilot:
        if reg is None:
            raise SeedsError("no registration is committed; collect a pilot with --pilot")
        if seeds != list(reg.seeds):
            raise SeedsError(f"{folder} holds {len(seeds)} seeds, not exactly the registered {reg.n} "
                             f"({reg.seeds[0]}-{reg.seeds[-1]}); run the seeds command again (it resumes)")
        check_calls(calls, registered_hashes())
    mixed = sorted({r["code_sha256"] for r in results})
    record = assembled_record(results)
    record.update(chapter=CHAPTER, profile=results[0]["protocol"]["profile"], seed=seeds[0])
    chapters = {CHAPTER: record}
    claims = [row for row in evaluate_claims(chapters) if row["id"] in B_CLAIMS]
    first = calls[0] if calls else {}
    machine_of = first.get("machine") or {}
    provenance = {
        "label": "recorded GPU run: paper B's seeds, one process per seed (python -m semlm.book seeds)",
        "kind": "gpu-pilot" if pilot else "gpu-seeds", "pilot": pilot,
        "registration": None if pilot or reg is None else registration_commit(),
        "n_registered": None if pilot or reg is None else reg.n, "seeds": seeds,
        "gpu": machine_of.get("gpu"), "driver": machine_of.get("driver"), "packages": machine_of.get("packages"),
        "git_commit": first.get("commit") or "unknown",
        "date": first.get("started_at") or min((r["started_at"] for r in results), default=None),
        "calls": calls, "code_sha256": mixed, "mixed_code": len(mixed) > 1,
        "per_seed": {r["seed"]: {k: r[k] for k in ("started_at", "wall_seconds", "train_seconds", "gpu_seconds",
                                                     "device")} for r in results},
        "protocol": results[0]["protocol"], "prompts_sha256": sorted({r["prompts_sha256"] for r in results}),
        "variance_split": {c: variance_split(results, c) for c in ("gated - plain", "gated - sharpened plain")},
        "collected_at": utc_now(),
    }
    return write_collection(folder, claims, provenance, verdicts_markdown, {f"{CHAPTER}.json": record})


def verdicts_markdown(report: dict, provenance: dict) -> str:
    """``VERDICTS.md`` of a seeds recording, generated from its ``report.json`` and ``provenance.json``."""
    split = provenance["variance_split"]
    lines = [f"# {'Pilot' if provenance['pilot'] else 'Decisive'} seeds of paper B's competent recipe",
             "", f"Generated by `python -m semlm.book collect-seeds` from `seeds/*.json` beside this file: "
             f"{len(provenance['seeds'])} training seeds ({provenance['seeds'][0]}-{provenance['seeds'][-1]}), "
             f"each trained and scored in its own process on {provenance.get('gpu') or 'the CPU'} at commit "
             f"`{str(provenance.get('git_commit'))[:12]}`; the claims code of commit "
             f"`{str(report.get('claims_commit'))[:12]}` judged them."
             + (" A pilot: these seeds plan a registration and never decide a claim." if provenance["pilot"] else
                f" Registration `{str(provenance.get('registration'))[:12]}`, {provenance.get('n_registered')} "
                f"registered seeds."), "",
             "Variance split of the per-seed stickiness difference (book's domains, rule-chosen prompts; two "
             "generation draws per seed):", "", "| comparison | mean | within-seed variance | between-seed variance |",
             "|---|---|---|---|"]
    lines += [f"| {c} | {v['mean']:+.5f} | {v['within']:.3g} | {v['between']:.3g} |" for c, v in split.items()]
    lines += ["", *claim_lines(report["claims"])]
    return "\n".join(lines) + "\n"


def registration_progress(root: str | Path | None = None) -> str:
    """One sentence for the report: paper B's registration, its commit, and how many of its decisive seeds are
    recorded (the final column takes its claims from the recording only once all are)."""
    reg = B_SEEDS
    if reg is None:
        return "Paper B's real-data claims are not yet registered for decisive GPU seeds."
    root = Path(root) if root is not None else REPO_ROOT / "book" / "recorded"
    done = len(list((root / reg.folder / "seeds").glob("*.json")))
    commit = registration_commit()
    return (f"Paper B's real-data claims ({', '.join(B_CLAIMS)}) are registered "
            f"(registration {reg.name}, commit {commit[:7] if commit else 'unknown: no git history here'}, "
            f"pilot book/recorded/{reg.pilot}): {done} of its {reg.n} decisive seeds "
            f"({reg.seeds[0]}-{reg.seeds[-1]}) are recorded in book/recorded/{reg.folder}; "
            + ("the final column takes these claims from it." if done >= reg.n else
               "until all are, their final verdicts come from the sources the table names, and the "
               "recorded seeds are not judged."))


def collect_parser(commands) -> None:
    add_collect_parser(commands, "collect-seeds", "a seeds recording", "seeds/*.json: provenance.json, the "
                       "assembled chapter-6 record, report.json and VERDICTS.md", "book/recorded/gpu-...")
