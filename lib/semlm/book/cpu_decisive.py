"""``python -m semlm.book decisive`` and ``collect-decisive``: the CPU claims' decisive seeds (issue 45).

``decisive --claims A-T1-fusion-better,B-lora-ppl`` runs, for each family the claims belong to
(:data:`semlm.book.cpu_seeds.FAMILIES`), its registered seeds (:data:`semlm.book.registration_cpu.CPU_SEEDS`), one
one-thread process per seed, ``--workers`` at a time, in a new runs folder (no cached run is reused; it is removed
at the end, so no weights are kept). Each seed's result is one small file, ``<folder>/seeds/<family>/<seed>.json``,
written when the seed has finished; a later call skips the seeds whose file exists, so a stopped recording resumes.
Each call is logged in ``seeds/calls.jsonl`` (its start, then its end with the seeds done and failed: the recording's
own files all sit under ``seeds/``, so a resumed call finds the tree clean). A failed seed is replaced by the next
spare; no seed is added after a look.

A deciding call refuses to start unless the registration is committed, HEAD descends from it, the registered file is
unchanged since and the tree is clean apart from the recording's ``seeds/`` folder
(:func:`semlm.book.decisive.tree_checks`). ``--pilot`` runs planning seeds (501-999) into a pilot folder without
these checks.

``collect-decisive <folder>`` writes ``provenance.json`` (the registration, ``n_registered`` and ``seeds`` per claim,
each seed's start time and code hash, mixed hashes reported), ``report.json`` (the claims' rows, judged by
:func:`semlm.book.claims.decisive_rows`) and ``VERDICTS.md``; a deciding folder must hold exactly the registered
seeds of each family it decides.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

import semlm.book.registration_cpu as registration_cpu
from semlm.book.cpu_seeds import FAMILIES, family_of, one, prepare, protocol, read_results
from semlm.book.decisive import (add_collect_parser, check_calls, claim_lines, end_call, read_calls, registered_hashes,
                                 settle, start_call, tree_checks, write_collection)
from semlm.book.decisive_judge import judged
from semlm.book.report import cpu_model
from semlm.book.seeds import SeedsError, current_commit, machine, pilot_seeds, seed_range, spawn_context, utc_now
from semlm.data.paths import REPO_ROOT
from semlm.profiles import check_profile

#: The log of a recording's calls, in its seeds/ folder.
CALLS = "calls.jsonl"
#: Pilot seeds a --pilot call runs unless --seeds says otherwise.
DEFAULT_PILOT = range(501, 506)


def families_of(claims: str | None) -> list[str]:
    """The families that decide ``claims`` (comma-separated ids; None: every registered or known family)."""
    if claims is None:
        reg = registration_cpu.CPU_SEEDS
        return sorted(reg.n) if reg is not None else sorted(FAMILIES)
    names = [c.strip() for c in claims.split(",") if c.strip()]
    if not names:
        raise SeedsError("--claims is empty; give claim ids such as A-T1-fusion-better,B-lora-ppl")
    return list(dict.fromkeys(family_of(c).name for c in names))


def planned(args, families: list[str]) -> dict[str, tuple[list[int], list[int]]]:
    """``{family: (seeds wanted, spares in order)}`` of this call."""
    if args.pilot:
        seeds = pilot_seeds(args.seeds, DEFAULT_PILOT, "501-505")
        return {f: (seeds, []) for f in families}
    reg = registration_cpu.CPU_SEEDS
    if getattr(args, "recheck", False):
        if not args.seeds:
            raise SeedsError("--recheck needs --seeds: the registered seeds to run again, such as 1001-1002")
        seeds = seed_range(args.seeds, "501-505")
        outside = {f: [s for s in seeds if s not in reg.all_seeds(f)] for f in families}
        if any(outside.values()):
            raise SeedsError("--recheck runs registered seeds only; not registered: "
                             + "; ".join(f"{f} {v}" for f, v in outside.items() if v))
        return {f: (seeds, []) for f in families}
    if args.seeds:
        raise SeedsError("--seeds is for --pilot and --recheck only: a deciding call records exactly the registered "
                         "seeds")
    missing = [f for f in families if f not in reg.n]
    if missing:
        raise SeedsError(f"the registration {reg.name} registers no seeds for {', '.join(missing)}; it registers "
                         f"{', '.join(sorted(reg.n))}")
    return {f: (reg.seeds(f), reg.all_seeds(f)[reg.n[f]:]) for f in families}


def _failed(calls: Path) -> dict[str, set[int]]:
    """``{family: seeds that failed}`` in earlier calls of this recording."""
    out: dict[str, set[int]] = {}
    for call in read_calls(calls):
        for family, seed in call.get("failed", []):
            out.setdefault(family, set()).add(seed)
    return out


def _todo(out: Path, wanted: dict[str, tuple[list[int], list[int]]], failed: dict[str, set[int]]
          ) -> dict[str, list[int]]:
    """The seeds still to run per family: the wanted ones without a file, each failed one replaced by the next
    spare not yet used."""
    todo = {}
    for family, (seeds, spares) in wanted.items():
        bad = failed.get(family, set())
        queue = [s for s in seeds if s not in bad] + [s for s in spares if s not in bad][:len(bad & set(seeds))]
        todo[family] = [s for s in queue if not (out / family / f"{s}.json").is_file()]
    return todo


def decisive_command(args: argparse.Namespace) -> int:
    """Run every planned seed that has no file yet (module docstring); 1 if any seed failed."""
    start = time.monotonic()
    if args.workers < 1:
        raise SeedsError(f"--workers must be >= 1, got {args.workers}")
    if args.budget is not None and args.budget <= 0:
        raise SeedsError(f"--budget must be a positive number of seconds, got {args.budget}")
    reg = registration_cpu.CPU_SEEDS
    if not args.pilot and reg is None:
        raise SeedsError("no registration of the CPU claims' seeds is committed (semlm.book.registration_cpu.CPU_SEEDS "
                         "is None); run a pilot with --pilot (seeds 501-999), then commit the registration")
    if args.recheck and (args.pilot or reg is None or args.folder is None):
        raise SeedsError("--recheck runs registered seeds again into a folder of its own: give --folder (not the "
                         "registration's), without --pilot, once a registration is committed")
    families = families_of(args.claims)
    folder = Path(args.folder) if args.folder else REPO_ROOT / "book" / "recorded" / (
        "cpu-pilot" if args.pilot else reg.folder)
    if args.recheck and folder.resolve() == (REPO_ROOT / "book" / "recorded" / reg.folder).resolve():
        raise SeedsError(f"--recheck writes beside the recording, never into it: give another --folder than "
                         f"book/recorded/{reg.folder}")
    if args.pilot or args.recheck:
        checks = {"pilot": args.pilot, "recheck": args.recheck, "commit": current_commit()}
    else:
        checks = tree_checks(folder, registration_cpu.REGISTERED_FILES, registration_cpu.registration_commit())
    profile = check_profile(args.profile or ("cpu" if args.pilot else reg.profile))  # this entry's one check
    if not args.pilot and not args.recheck and profile != reg.profile:
        raise SeedsError(f"--profile {profile}: the registration decides at {reg.profile}")
    if not args.pilot and not args.recheck and protocol() != reg.protocol:
        differ = sorted(k for k in {**protocol(), **reg.protocol} if protocol().get(k) != reg.protocol.get(k))
        raise SeedsError(f"the seeds' protocol in semlm.book.cpu_seeds differs from the registered one in "
                         f"{', '.join(differ)}; a deciding run uses the registered protocol")
    wanted = planned(args, families)
    out = folder / "seeds"
    calls = out / CALLS
    todo = _todo(out, wanted, _failed(calls))
    total = sum(len(s) for s, _ in wanted.values())
    left = sum(len(s) for s in todo.values())
    print(f"decisive: {', '.join(families)} at {profile}: {total - left} of {total} seeds already recorded in {out}; "
          f"{left} to run, {args.workers} at a time", flush=True)
    if not left:
        return 0
    for family in families:
        _check_data(family)
    runs_dir = Path(args.runs_dir) if args.runs_dir else Path(tempfile.mkdtemp(prefix="semlm-decisive-"))
    if args.runs_dir and runs_dir.exists() and any(runs_dir.iterdir()):
        raise SeedsError(f"--runs-dir {runs_dir} is not empty; a decisive call trains in a new runs folder (no cached "
                         f"run is reused): give a new or empty folder")
    out.mkdir(parents=True, exist_ok=True)
    call = start_call(calls, checks, machine={**machine(), "cpu_model": cpu_model()}, profile=profile,
                      workers=args.workers)
    done, failed = [], []
    try:
        done, failed = _run(todo, profile, runs_dir, out, args.workers, args.budget, start)
    finally:
        end_call(calls, call, done, failed)
        if not args.runs_dir:
            shutil.rmtree(runs_dir, ignore_errors=True)
    if failed:
        print(f"decisive: {len(failed)} seed(s) failed; run the same command again: each is replaced by the next "
              f"spare", flush=True)
    return 1 if failed else 0


def _check_data(family: str) -> None:
    """A family's data is there, before anything trains (one line naming what is missing)."""
    from semlm.data.fetch import CHAPTER_DATA, missing_files

    gone = missing_files(dict.fromkeys(f for chapter in FAMILIES[family].needs for f in CHAPTER_DATA.get(chapter, ())))
    if gone:
        raise SeedsError(f"{family} needs {', '.join(gone)}, missing under the data folder; set SEMLM_DATA_DIR to the "
                         f"folder that holds it (or run `make data`)")


def _run(todo: dict[str, list[int]], profile: str, runs_dir: Path, out: Path, workers: int,
         budget: float | None, start: float) -> tuple[list, list]:
    from tqdm.auto import tqdm

    prepared = {f: prepare(f, profile, runs_dir) for f, seeds in todo.items() if seeds}
    tasks = [(f, s) for f, seeds in todo.items() for s in seeds]
    for family in todo:
        (out / family).mkdir(parents=True, exist_ok=True)
    done, failed = [], []
    bar = tqdm(total=len(tasks), desc="decisive seeds", unit="seed", file=sys.stdout)
    with ProcessPoolExecutor(workers, mp_context=spawn_context()) as pool:
        pending, queue = {}, list(tasks)
        while queue or pending:
            while queue and len(pending) < workers:
                if budget is not None and time.monotonic() - start > budget:
                    print(f"decisive: --budget {budget:.0f} s passed; no new seed started ({len(queue)} left: run "
                          f"the same command again to go on)", flush=True)
                    queue = []
                    break
                family, seed = queue.pop(0)
                future = pool.submit(one, family, seed, profile, str(runs_dir), str(out / family), prepared[family])
                pending[future] = (family, seed)
            if not pending:
                break
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                family, seed = pending.pop(future)
                settle(future, [family, seed], f"decisive: {family} seed {seed}", done, failed)
                bar.update(1)
    bar.close()
    return done, failed


def parser(commands) -> argparse.ArgumentParser:
    cmd = commands.add_parser(
        "decisive", help="train and score the CPU claims' registered decisive seeds, one process per seed",
        description="For each family of the given claims, train and score its registered seeds (one one-thread "
                    "process per seed) in a new runs folder and write one small JSON per seed into the recording's "
                    "seeds/<family>/ folder; seeds whose file exists are skipped, so a second call resumes.")
    cmd.add_argument("--claims", default=None, metavar="A,B",
                     help="claim ids (default: every registered family's claims); a claim runs its whole family")
    cmd.add_argument("--pilot", action="store_true",
                     help="planning seeds (501-505 unless --seeds) into book/recorded/cpu-pilot/, without the "
                          "registration checks")
    cmd.add_argument("--seeds", metavar="A-B", help="with --pilot: a range of pilot seeds; with --recheck: of "
                                                     "registered seeds")
    cmd.add_argument("--recheck", action="store_true",
                     help="run registered seeds (--seeds) again into --folder, beside the recording, to compare "
                          "their result files with the recorded ones (decides nothing)")
    cmd.add_argument("--workers", type=int, default=2, help="seeds trained side by side (default 2)")
    cmd.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                     help="start no new seed after this many seconds (default: no limit)")
    cmd.add_argument("--profile", default=None, choices=("cpu", "smoke"),
                     help="the models' scale (default: the registration's; smoke for the tests' pilots)")
    cmd.add_argument("--folder", type=Path, default=None, help="the recording's folder (default: the registration's)")
    cmd.add_argument("--runs-dir", type=Path, default=None,
                     help="a new or empty runs folder, kept (default: a temporary one, removed at the end)")
    return cmd


# -- collect ---------------------------------------------------------------------------------------------------------


def collect(folder: Path, pilot: bool = False) -> Path:
    """Write ``provenance.json``, ``report.json`` and ``VERDICTS.md`` into ``folder`` from its seed files (module
    docstring)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SeedsError(f"{folder} is not a folder; give the recording's folder, e.g. book/recorded/cpu-decisive-c1")
    results = read_results(folder)
    if not results:
        raise SeedsError(f"{folder}/seeds holds no seed files; run `python -m semlm.book decisive` first")
    calls = read_calls(folder / "seeds" / CALLS)
    reg = registration_cpu.CPU_SEEDS
    failed = _failed(folder / "seeds" / CALLS)
    if not pilot:
        if reg is None:
            raise SeedsError("no registration is committed; collect a pilot with --pilot")
        check_calls(calls, registered_hashes(registration_cpu.REGISTERED_FILES))
        for family, rows in results.items():
            bad = failed.get(family, set())
            usable = [s for s in reg.all_seeds(family) if s not in bad][:reg.n[family]]
            if [r["seed"] for r in rows] != usable:
                raise SeedsError(f"{folder} holds {len(rows)} {family} seeds, not exactly the registered "
                                 f"{reg.n[family]} ({usable[0]}-{usable[-1]} after failed seeds' spares); run the "
                                 f"decisive command again (it resumes)")
    claims, seeds, split, profile = judged(results, pilot)
    mixed = sorted({r["code_sha256"] for rows in results.values() for r in rows})
    first = calls[0] if calls else {}
    provenance = {
        "label": "recorded CPU run: the CPU claims' decisive seeds, one process per seed "
                 "(python -m semlm.book decisive)",
        "kind": "cpu-pilot" if pilot else "cpu-decisive", "pilot": pilot,
        "registration": None if pilot or reg is None else registration_cpu.registration_commit(),
        "n_registered": None if pilot or reg is None else {c: reg.n[family_of(c).name] for c in seeds},
        "seeds": seeds, "profile": profile, "git_commit": first.get("commit") or "unknown",
        "cpu_model": (first.get("machine") or {}).get("cpu_model"),
        "cpu_count": (first.get("machine") or {}).get("cpu_count"), "date": first.get("started_at"), "calls": calls,
        "code_sha256": mixed, "mixed_code": len(mixed) > 1,
        "per_seed": {family: {r["seed"]: {k: r[k] for k in ("started_at", "wall_seconds", "cpu_seconds",
                                                             "code_sha256")} for r in rows}
                     for family, rows in results.items()},
        "cpu_seconds": round(sum(r["cpu_seconds"] for rows in results.values() for r in rows), 1),
        "cpu_seconds_per_seed": {family: round(sum(r["cpu_seconds"] for r in rows) / len(rows), 1)
                                 for family, rows in results.items()},
        "variance_split": split,
        "collected_at": utc_now(),
    }
    return write_collection(folder, claims, provenance, verdicts_markdown)


def verdicts_markdown(report: dict, provenance: dict) -> str:
    """``VERDICTS.md`` of a CPU decisive recording, generated from its ``report.json`` and ``provenance.json``."""
    kind = "Pilot" if provenance["pilot"] else "Decisive"
    lines = [f"# {kind} seeds of the CPU claims", "",
             f"Generated by `python -m semlm.book collect-decisive` from `seeds/<family>/*.json` beside this file: "
             f"each seed trained and scored in its own one-thread process at the {provenance['profile']} profile, at "
             f"commit `{str(provenance.get('git_commit'))[:12]}` ({provenance['cpu_seconds']:,.0f} CPU-seconds in "
             f"all); the claims code of commit `{str(report.get('claims_commit'))[:12]}` judged them."
             + (" A pilot: these seeds plan a registration and never decide a claim." if provenance["pilot"] else
                f" Registration `{str(provenance.get('registration'))[:12]}`."),
             "", *claim_lines(report["claims"], seeds=True)]
    if provenance.get("variance_split"):
        lines += ["", "Variance split of the claims judged on generated text (two generation draws per seed, each "
                  "shared by the arms it compares): one draw's variance within a seed, and the variance between "
                  "seeds of a seed's mean of two draws less its sampling part.", "",
                  "| claim | comparison | seeds | mean | within-seed variance | between-seed variance |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {claim} | {name} | {v['seeds']} | {v['mean']:+.4f} | {v['within']:.3g} | {v['between']:.3g} |"
                  for claim, parts in provenance["variance_split"].items() for name, v in parts.items()]
    per_seed = provenance.get("cpu_seconds_per_seed") or {}
    if per_seed:
        lines += ["", "CPU-seconds per seed: " + ", ".join(f"{f} {v:,.0f}" for f, v in per_seed.items()) + "."]
    return "\n".join(lines) + "\n"


def collect_parser(commands) -> None:
    add_collect_parser(commands, "collect-decisive", "a CPU decisive recording", "seeds/<family>/*.json: "
                       "provenance.json, report.json and VERDICTS.md", "book/recorded/cpu-decisive-... or a pilot's")


def registration_progress(root: str | Path | None = None) -> str:
    """One sentence for the report: the CPU claims' registration, its commit, and how many of its decisive seeds are
    recorded per family (the final column takes their claims from the recording once it is collected)."""
    reg = registration_cpu.CPU_SEEDS
    if reg is None:
        return ("The CPU claims are not yet registered for decisive seeds: their final verdicts come from the sources "
                "the table names.")
    root = Path(root) if root is not None else REPO_ROOT / "book" / "recorded"
    done = {f: len(list((root / reg.folder / "seeds" / f).glob("*.json"))) for f in reg.n}
    commit = registration_cpu.registration_commit()
    collected = (root / reg.folder / "report.json").is_file()
    return (f"The CPU claims are registered (registration {reg.name}, commit "
            f"{commit[:7] if commit else 'unknown: no git history here'}): "
            + ", ".join(f"{f} {min(done[f], reg.n[f])} of {reg.n[f]} seeds" for f in sorted(reg.n))
            + f" recorded in book/recorded/{reg.folder}; "
            + ("the final column takes their claims from it." if collected else
               "until it is complete and collected, their final verdicts come from the sources the table names."))
