"""``python -m semlm.book seeds``: many training seeds of chapter 6's competent recipe, one process per seed, each
seed's result a small JSON file written as soon as the seed finishes (issue 46).

For every seed the command trains chapter 6's plain and gated GPT at the ``cpu-long`` recipe (``--profile``;
``smoke`` in the tests), then scores the pair once:

* validation PPL of both (what ``B-ppl`` judges), and the bigram reference of the competence check;
* the book's stickiness on the rule-chosen prompts (:mod:`semlm.idea.rule_prompts`), for the plain GPT, the gated
  GPT and the sharpening control (the plain GPT at the gated GPT's next-token entropy), per generation draw: each
  draw is one sampling seed shared by the three arms, so the variance split (within and between seeds) can be read
  off the files;
* the authors' protocol on their four domains (``B-distinct``'s distinct-2, their stickiness) for the same arms.

The file ``<folder>/seeds/<seed>.json`` holds per-seed values only (no weights): a later call, on any machine,
skips the seeds whose file exists. ``collect`` (:func:`collect`) turns a folder holding exactly the registered
seeds into ``provenance.json``, the assembled chapter-6 record, ``report.json`` and ``VERDICTS.md``.

A deciding call (not ``--pilot``) refuses to start unless a registration is committed
(:data:`semlm.book.registration.B_SEEDS`), and, where the checkout is a git clone and ``$SEMLM_COMMIT`` is unset,
unless the tree is clean apart
from the recording's ``seeds/`` folder, HEAD descends from the registration commit and the registered files are
unchanged since it. On a machine sent the files alone (a bare GPU machine: its ``.git``, if any, is not this tree's
history) the command takes the commit from ``$SEMLM_COMMIT`` and records the registered files' SHA-256, which ``collect`` checks against the
registration commit.

The module imports torch, transformers, tokenizers, numpy and semlm only: no papermill, jupytext or spaCy (the
stop list comes from ``$SEMLM_STOP_WORDS`` where spaCy is missing).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from semlm.data.paths import REPO_ROOT

#: Seeds a pilot may use (never a registered seed); registered seeds start at 1001.
PILOT_SEEDS = range(501, 1000)
#: The chapter-6 record a recording assembles from its seed files.
CHAPTER = "06_idea_gating"


class SeedsError(Exception):
    """A one-line reason the command cannot go on; nothing was written."""


@dataclass(frozen=True)
class Protocol:
    """What one seed trains and how it is scored: the profile's recipe, the rule-chosen prompts (their digest),
    samples per prompt and the generation draws (sampling seeds, shared by the arms within a draw)."""

    profile: str = "cpu-long"
    samples_per_prompt: int = 3
    draws: tuple[int, ...] = (0, 1)
    compile: bool = False

    def generation(self, config):
        return replace(config.generation, samples_per_prompt=self.samples_per_prompt, seeds=tuple(self.draws))


# -- one seed ----------------------------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def code_hash() -> str:
    """SHA-256 over the package's Python files (the training and scoring code of a seed), sorted by path."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _specs(config):
    from semlm.idea.wikitext_experiment import idea_run, profile_form_run

    return [idea_run(config, "baseline", False), idea_run(config, profile_form_run(config), True)]


def _means(scores: dict, metrics) -> dict:
    """``{domain: {metric: mean over samples}}`` of a protocol's DomainScores."""
    return {domain: {m: s.summary[m].mean for m in metrics} for domain, s in scores.items()}


def _draw_means(scores: dict, metric: str, draws) -> dict:
    """``{domain: [mean over the draw's samples, per draw]}``."""
    out = {}
    for domain, s in scores.items():
        out[domain] = [sum(r[metric] for r in rows) / len(rows) if (rows := [r for r in s.samples if r["seed"] == d])
                       else None for d in draws]
    return out


def run_seed(seed: int, protocol: Protocol, runs_dir: str | Path, device: str | None = None,
             threads: int = 1) -> dict:
    """Train seed ``seed``'s plain and gated GPT and score them (module docstring); returns the seed's result."""
    import torch

    from semlm.core import runs
    from semlm.idea.profiles import idea_profile
    from semlm.idea.rule_prompts import prompts_digest, wikitext2_rule_prompts, with_prompts
    from semlm.idea.sharpening import sharpening_temperature
    from semlm.idea.wikitext_experiment import (IDEA, SHARPENING_BLOCKS, authors_protocol, domain_retention,
                                                idea_data, load_domains, ngram_reference, stop_words)
    from semlm.reference import PAPER_B_EVAL_DOMAINS

    started, wall0 = _dt.datetime.now(_dt.timezone.utc), time.perf_counter()
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    config = idea_profile(protocol.profile, seed)
    if protocol.compile is False:
        config = replace(config, train=replace(config.train, compile_on_cuda=False))
    records = {name: runs.run_one(IDEA, spec, runs_dir, threads=threads, device=device)
               for name, spec in zip(("baseline", "gated"), _specs(config))}
    trained = time.perf_counter() - wall0
    data = idea_data(config)
    prompts = wikitext2_rule_prompts()
    domains = with_prompts(load_domains(), prompts)
    generation = protocol.generation(config)
    models = {name: record.load(device) for name, record in records.items()}
    val = data.blocks("valid", config)
    temperature, _ = sharpening_temperature(models["baseline"], models["gated"], val, generation.temperature,
                                            SHARPENING_BLOCKS)
    arms = {"baseline": (models["baseline"], generation), "gated": (models["gated"], generation),
            "sharpened": (models["baseline"], replace(generation, temperature=temperature))}
    book, authors = {}, {}
    for arm, (model, settings) in arms.items():
        scores = domain_retention(model, data.tokenizer, domains, settings)
        book[arm] = {"stickiness": _means(scores, ("stickiness",)), "draws": _draw_means(scores, "stickiness",
                                                                                         protocol.draws)}
        authors[arm] = _means(authors_protocol(model, data.tokenizer, PAPER_B_EVAL_DOMAINS, settings),
                              ("stickiness", "authors_stickiness", "distinct_2"))
    valid_tokens = val.input_ids[:, 1: config.size.block_size + 1].flatten()
    reference = ngram_reference(data.streams["train"][: config.train_tokens], valid_tokens[valid_tokens >= 0],
                                len(data.tokenizer))
    wall = time.perf_counter() - wall0
    return {
        "seed": seed, "protocol": asdict(protocol), "prompts_sha256": prompts_digest(prompts),
        "stop_words_sha256": hashlib.sha256(json.dumps(sorted(stop_words())).encode()).hexdigest(),
        "code_sha256": code_hash(), "device": device,
        "gpu": torch.cuda.get_device_name() if device.startswith("cuda") else None,
        "started_at": started.isoformat(timespec="seconds"), "wall_seconds": round(wall, 2),
        "train_seconds": round(trained, 2),
        # the process held the GPU for the whole seed: its GPU time is its wall time
        "gpu_seconds": round(wall, 2) if device.startswith("cuda") else 0.0,
        "steps": config.train.max_steps,
        "val_ppl": {name: r.metrics.val_ppl for name, r in records.items()},
        "val_ppl_ungated": records["gated"].metrics.val_ppl_ungated,
        "sharpening_temperature": temperature, "bigram": reference,
        "book": book, "authors": authors,
    }


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _one(seed: int, protocol: Protocol, runs_dir: str, out: str, device: str | None) -> tuple[int, float]:
    """Worker: one seed, its file written only once it has finished (a killed seed leaves no file)."""
    from semlm.core.processes import die_with_parent

    die_with_parent()
    result = run_seed(seed, protocol, runs_dir, device)
    write_atomic(Path(out) / f"{seed}.json", json.dumps(result, indent=1, sort_keys=True) + "\n")
    return seed, result["wall_seconds"]


# -- registration checks ---------------------------------------------------------------------------------------


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)


def current_commit() -> str:
    """HEAD (``+dirty`` with uncommitted changes), or ``$SEMLM_COMMIT`` where there is no ``.git``."""
    if os.environ.get("SEMLM_COMMIT") or not has_git():  # a machine sent the files alone may hold a stale .git
        return os.environ.get("SEMLM_COMMIT", "unknown")
    dirty = _git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return _git("rev-parse", "HEAD").stdout.strip() + ("+dirty" if dirty else "")


def has_git() -> bool:
    return (REPO_ROOT / ".git").exists() and _git("rev-parse", "HEAD").returncode == 0


def registration_checks(folder: Path) -> dict:
    """Refuse a deciding call that is not the registered one (module docstring); returns what was checked."""
    from semlm.book import registration

    reg = registration.B_SEEDS
    if reg is None:
        raise SeedsError("no registration of paper B's seeds is committed (semlm.book.registration.B_SEEDS is None); "
                         "run a pilot with --pilot (seeds 501-999), then commit the registration")
    files = {name: _sha256(REPO_ROOT / name) for name in registration.REGISTERED_FILES}
    if os.environ.get("SEMLM_COMMIT") or not has_git():  # the files came without (or with a stale) history
        commit = os.environ.get("SEMLM_COMMIT")
        if not commit:
            raise SeedsError("no .git here: set SEMLM_COMMIT to the commit these files come from (collect checks "
                             "the registered files' SHA-256 against the registration)")
        return {"commit": commit, "checked_by_git": False, "registered_files_sha256": files}
    commit = _git("rev-parse", "HEAD").stdout.strip()
    registered = registration.registration_commit()
    if registered is None:
        raise SeedsError(f"{registration.REGISTERED_FILES[0]} is not committed; commit the registration first")
    if _git("merge-base", "--is-ancestor", registered, commit).returncode != 0:
        raise SeedsError(f"HEAD {commit[:12]} does not descend from the registration {registered[:12]}")
    changed = _git("diff", "--name-only", registered, "HEAD", "--", *registration.REGISTERED_FILES).stdout.split()
    if changed:
        raise SeedsError(f"registered files changed since the registration {registered[:12]}: {', '.join(changed)}; "
                         f"a new registration needs a new commit and new seeds")
    seeds_dir = folder.resolve() / "seeds"
    dirty = [line[3:] for line in _git("status", "--porcelain", "--untracked-files=all").stdout.splitlines()]
    dirty = [p for p in dirty if not (REPO_ROOT / p).resolve().is_relative_to(seeds_dir)]
    if dirty:
        raise SeedsError(f"the tree has changes outside the recording's seeds/ folder ({', '.join(dirty[:3])}"
                         f"{', ...' if len(dirty) > 3 else ''}); a deciding run comes from a clean commit")
    return {"commit": commit, "checked_by_git": True, "registration": registered, "registered_files_sha256": files}


# -- the command ---------------------------------------------------------------------------------------------------


def planned_seeds(args) -> list[int]:
    from semlm.book import registration

    if args.seeds:
        try:
            first, _, last = args.seeds.partition("-")
            seeds = list(range(int(first), int(last or first) + 1))
        except ValueError:
            raise SeedsError(f"--seeds {args.seeds!r} is not a range such as 501-512") from None
    elif args.pilot:
        seeds = list(range(501, 513))
    else:
        seeds = list(registration.B_SEEDS.seeds)
    if args.pilot and not all(s in PILOT_SEEDS for s in seeds):
        raise SeedsError(f"--pilot uses seeds {PILOT_SEEDS.start}-{PILOT_SEEDS.stop - 1} only (a registered seed is "
                         f"never seen before its decisive run); got {seeds[0]}-{seeds[-1]}")
    if not args.pilot and registration.B_SEEDS is not None and not set(seeds) <= set(registration.B_SEEDS.all_seeds):
        raise SeedsError(f"seeds {seeds[0]}-{seeds[-1]} are not the registered ones "
                         f"({registration.B_SEEDS.seeds[0]}-{registration.B_SEEDS.seeds[-1]} and their spares)")
    return seeds


def default_folder(pilot: bool) -> Path:
    from semlm.book import registration

    if pilot:
        return REPO_ROOT / "book" / "recorded" / "gpu-pilot"
    return REPO_ROOT / "book" / "recorded" / registration.B_SEEDS.folder


def seeds_command(args: argparse.Namespace) -> int:
    """Run the seeds in batches of ``--processes``, skipping those whose file exists; no new batch after
    ``--budget`` seconds."""
    from semlm.book import registration

    start = time.monotonic()
    if args.processes < 1:
        raise SeedsError(f"--processes must be >= 1, got {args.processes}")
    if args.budget is not None and args.budget <= 0:
        raise SeedsError(f"--budget must be a positive number of seconds, got {args.budget}")
    if not args.pilot and registration.B_SEEDS is None:
        registration_checks(Path("."))  # raises the one-line reason
    folder = Path(args.folder) if args.folder else default_folder(args.pilot)
    checks = {"pilot": True, "commit": current_commit()} if args.pilot else registration_checks(folder)
    seeds = planned_seeds(args)
    protocol = Protocol(profile=args.profile) if args.pilot else registration.B_SEEDS.protocol
    if args.profile != protocol.profile:
        protocol = replace(protocol, profile=args.profile)
    out = folder / "seeds"
    todo = [s for s in seeds if not (out / f"{s}.json").is_file()]
    print(f"seeds: {len(seeds) - len(todo)} of {len(seeds)} already recorded in {out}; {len(todo)} to run, "
          f"{args.processes} at a time", flush=True)
    if not todo:
        return 0
    import torch

    from semlm.idea.profiles import idea_profile
    from semlm.idea.rule_prompts import wikitext2_rule_prompts
    from semlm.idea.wikitext_experiment import idea_data, stop_words

    stop_words(), wikitext2_rule_prompts()  # a missing stop list or data file stops here, before any training
    idea_data(idea_profile(protocol.profile, seeds[0]))  # the tokeniser, once, before the workers need it
    runs_dir = Path(args.runs_dir)
    out.mkdir(parents=True, exist_ok=True)
    calls = folder / "calls.jsonl"
    call = {"started_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), **checks,
            "argv": sys.argv[1:], "machine": machine()}
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    call["device"] = device
    with open(calls, "a") as f:  # the call's start, so that a call killed from outside still names itself
        f.write(json.dumps({**call, "event": "start"}, default=str) + "\n")
    done, failed = [], []
    for i in range(0, len(todo), args.processes):
        if args.budget is not None and time.monotonic() - start > args.budget:
            print(f"seeds: --budget {args.budget:.0f} s passed; no new batch started ({len(todo) - i} seeds left: "
                  f"run the same command again to go on)", flush=True)
            break
        batch = todo[i: i + args.processes]
        t0 = time.monotonic()
        with ProcessPoolExecutor(len(batch), mp_context=_spawn()) as pool:
            futures = {s: pool.submit(_one, s, protocol, str(runs_dir), str(out), device) for s in batch}
            for seed, future in futures.items():
                try:
                    future.result()
                    done.append(seed)
                except Exception as exc:  # one seed's failure is reported; the others go on
                    failed.append(seed)
                    print(f"seeds: seed {seed} failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
        print(f"seeds: batch {batch[0]}-{batch[-1]} finished in {time.monotonic() - t0:.0f} s "
              f"({len(done)} done, {len(failed)} failed, {time.monotonic() - start:.0f} s in all)", flush=True)
    call.update(ended_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), done=done, failed=failed,
                event="end")
    with open(calls, "a") as f:
        f.write(json.dumps(call, default=str) + "\n")
    return 1 if failed else 0


def _spawn():
    import multiprocessing

    return multiprocessing.get_context("spawn")


def machine() -> dict:
    import torch

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    driver = None
    if gpu:
        try:
            driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                    capture_output=True, text=True, timeout=30).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            pass
    from semlm.book.report import package_versions

    return {"gpu": gpu, "driver": driver, "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "machine": platform.machine(), "packages": package_versions(("torch", "transformers", "tokenizers",
                                                                       "numpy"))}


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


# -- collect --------------------------------------------------------------------------------------------------------


def read_seeds(folder: Path) -> list[dict]:
    files = sorted((Path(folder) / "seeds").glob("*.json"), key=lambda p: int(p.stem))
    if not files:
        raise SeedsError(f"{folder}/seeds holds no seed files; run `python -m semlm.book seeds` first")
    return [json.loads(p.read_text()) for p in files]


def assembled_record(results: list[dict]) -> dict:
    """The chapter-6 record the claims code judges, from the seeds' results: validation PPL paired by seed, the
    competence check over every model, the book's stickiness on the rule-chosen prompts (per domain and "all")
    and the authors' protocol, each with the sharpening control as ``control``."""
    from semlm.core.records import Interval
    from semlm.idea.records import Competence, IdeaGatingRecord, IdeaOverSeeds, SeedPaired, ValidationScore
    from semlm.idea.wikitext_experiment import competence

    seeds = [r["seed"] for r in results]
    arms = ("baseline", "gated", "sharpened")

    def paired(table: str, metric: str) -> dict:
        domains = list(results[0][table]["baseline"] if table == "authors" else
                       results[0][table]["baseline"]["stickiness"])

        def value(r, arm, names):
            source = r[table][arm] if table == "authors" else r[table][arm]["stickiness"]
            return sum(source[d][metric] for d in names) / len(names)

        return {label: SeedPaired.of(*[[value(r, arm, names) for r in results] for arm in arms])
                for label, names in [*((d, [d]) for d in domains), ("all", domains)]}

    ppl = {f"{m} (seed {r['seed']})": r["val_ppl"][m] for r in results for m in ("baseline", "gated")}
    check = competence(ppl, results[0]["bigram"])
    over = IdeaOverSeeds(
        seeds=seeds, gated_run="gated",
        val_ppl=SeedPaired.of(*[[r["val_ppl"][m] for r in results] for m in ("baseline", "gated")]),
        domains={"book_stickiness": paired("book", "stickiness"),
                 **{m: paired("authors", m) for m in ("stickiness", "authors_stickiness", "distinct_2")}},
        sharpening_temperature=Interval.of_mean([r["sharpening_temperature"] for r in results]))
    record = IdeaGatingRecord(
        dataset="wikitext-2", competence=Competence(**{k: check[k] for k in (
            "passes", "worst_model", "worst_ratio", "threshold_ratio", "bigram_val_ppl", "model_val_ppl")}),
        baseline=ValidationScore(val_ppl=over.val_ppl.baseline.mean),
        gated=ValidationScore(val_ppl=over.val_ppl.gated.mean), over_seeds=over)
    return record.to_dict() if hasattr(record, "to_dict") else asdict(record)


def variance_split(results: list[dict], comparison: str = "gated - plain") -> dict:
    """The issue's split of the per-seed difference ``d`` (stickiness, all domains) into sampling noise within a
    seed (two draws: ``mean (d1 - d2)^2 / 2``) and between seeds (``Var(d bar) - within / 2``)."""
    import statistics

    other = {"gated - plain": "baseline", "gated - sharpened plain": "sharpened"}[comparison]

    def d(r, draw):
        book = r["book"]
        doms = list(book["gated"]["draws"])
        return sum(book["gated"]["draws"][x][draw] - book[other]["draws"][x][draw] for x in doms) / len(doms)

    n_draws = len(results[0]["protocol"]["draws"])
    if n_draws != 2:
        raise SeedsError(f"the variance split needs two draws per seed; these results have {n_draws}")
    d1, d2 = [d(r, 0) for r in results], [d(r, 1) for r in results]
    within = sum((a - b) ** 2 for a, b in zip(d1, d2)) / (2 * len(d1))
    means = [(a + b) / 2 for a, b in zip(d1, d2)]
    var_mean = statistics.variance(means) if len(means) > 1 else float("nan")
    return {"comparison": comparison, "seeds": len(results), "within": within, "between": var_mean - within / 2,
            "var_of_seed_means": var_mean, "mean": statistics.fmean(means), "sd_of_seed_means": var_mean ** 0.5}


def collect(folder: Path, pilot: bool = False) -> Path:
    """Write ``provenance.json``, ``06_idea_gating.json``, ``report.json`` and ``VERDICTS.md`` into ``folder``
    from its seed files: a deciding folder must hold exactly the registered seeds (a pilot, any seeds)."""
    from semlm.book import registration
    from semlm.book.claims import evaluate_claims
    from semlm.book.report import plain_summary, verdict_counts

    folder = Path(folder)
    results = read_seeds(folder)
    seeds = [r["seed"] for r in results]
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines() if line.strip()] \
        if (folder / "calls.jsonl").is_file() else []
    reg = registration.B_SEEDS
    if not pilot:
        if reg is None:
            raise SeedsError("no registration is committed; collect a pilot with --pilot")
        if seeds != list(reg.seeds):
            raise SeedsError(f"{folder} holds {len(seeds)} seeds, not exactly the registered {reg.n} "
                             f"({reg.seeds[0]}-{reg.seeds[-1]}); run the seeds command again (it resumes)")
        expected = {name: _sha256(REPO_ROOT / name) for name in registration.REGISTERED_FILES}
        for call in calls:
            if call.get("registered_files_sha256") not in (None, expected):
                raise SeedsError(f"a call of {call.get('started_at')} ran with registered files other than the "
                                 f"registration's; its seeds cannot decide")
    mixed = sorted({r["code_sha256"] for r in results})
    record = assembled_record(results)
    record.update(chapter=CHAPTER, profile=results[0]["protocol"]["profile"], seed=seeds[0])
    chapters = {CHAPTER: record}
    claims = [row for row in evaluate_claims(chapters) if row["id"] in ("B-ppl", "B-distinct", "B-stickiness")]
    first = calls[0] if calls else {}
    provenance = {
        "label": "recorded GPU run: paper B's seeds, one process per seed (python -m semlm.book seeds)",
        "kind": "gpu-pilot" if pilot else "gpu-seeds", "pilot": pilot,
        "registration": None if pilot or reg is None else registration.registration_commit(),
        "n_registered": None if pilot or reg is None else reg.n, "seeds": seeds,
        "gpu": (first.get("machine") or {}).get("gpu"), "driver": (first.get("machine") or {}).get("driver"),
        "packages": (first.get("machine") or {}).get("packages"), "git_commit": first.get("commit"),
        "calls": calls, "code_sha256": mixed, "mixed_code": len(mixed) > 1,
        "per_seed": {r["seed"]: {k: r[k] for k in ("started_at", "wall_seconds", "train_seconds", "gpu_seconds",
                                                     "device")} for r in results},
        "protocol": results[0]["protocol"], "prompts_sha256": sorted({r["prompts_sha256"] for r in results}),
        "variance_split": {c: variance_split(results, c) for c in ("gated - plain", "gated - sharpened plain")},
        "collected_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    report = {"claims": claims, "claims_commit": _git("rev-parse", "HEAD").stdout.strip() if has_git() else "?",
              "counts": verdict_counts(claims), "summary": plain_summary(claims)}
    write_atomic(folder / f"{CHAPTER}.json", json.dumps(record, indent=1, default=str) + "\n")
    write_atomic(folder / "provenance.json", json.dumps(provenance, indent=1, default=str) + "\n")
    write_atomic(folder / "report.json", json.dumps(report, indent=1, default=str) + "\n")
    write_atomic(folder / "VERDICTS.md", verdicts_markdown(report, provenance))
    return folder


def verdicts_markdown(report: dict, provenance: dict) -> str:
    """``VERDICTS.md`` of a seeds recording, generated from its ``report.json`` and ``provenance.json``."""
    from semlm.book.recorded import _cell

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
    lines += ["", "| claim | status | value | 95% interval | reason |", "|---|---|---|---|---|"]
    for row in report["claims"]:
        ci = f"[{row['ci'][0]:.4g}, {row['ci'][1]:.4g}]" if row.get("ci") else ""
        lines.append(f"| {row['id']} | {row['status']} | {_cell(row.get('causal_value'))} | {ci} | "
                     f"{_cell(row.get('reason'))} |")
    return "\n".join(lines) + "\n"


def collect_parser(commands) -> argparse.ArgumentParser:
    cmd = commands.add_parser("collect-seeds", help="write a seeds recording's provenance, report and verdicts",
                              description="From a recording's seeds/*.json: provenance.json, the assembled chapter-6 "
                                          "record, report.json and VERDICTS.md.")
    cmd.add_argument("folder", type=Path, help="the recording's folder (book/recorded/gpu-...)")
    cmd.add_argument("--pilot", action="store_true", help="a pilot: any seeds, no registration")
    return cmd
