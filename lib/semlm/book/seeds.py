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
skips the seeds whose file exists. The command, its registration checks and ``collect-seeds`` (which turns a folder
holding exactly the registered seeds into ``provenance.json``, the assembled chapter-6 record, ``report.json`` and
``VERDICTS.md``) are in :mod:`semlm.book.decisive`.

The module imports torch, transformers, tokenizers, numpy and semlm only: no papermill, jupytext or spaCy (the
stop list comes from ``$SEMLM_STOP_WORDS`` where spaCy is missing).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from semlm.data.paths import REPO_ROOT

#: Seeds a pilot may use (never a registered seed); registered seeds start at 1001.
PILOT_SEEDS = range(501, 1000)
#: The chapter-6 record a recording assembles from its seed files.
CHAPTER = "06_idea_gating"


class SeedsError(Exception):
    """A one-line reason the command cannot go on; nothing was written."""


def seed_range(text: str, example: str = "501-512") -> list[int]:
    """The seeds of ``--seeds A-B`` (or one seed ``A``); a :class:`SeedsError` says what is wrong with ``text``."""
    try:
        first, _, last = text.partition("-")
        seeds = list(range(int(first), int(last or first) + 1))
    except ValueError:
        raise SeedsError(f"--seeds {text!r} is not a range such as {example}") from None
    if not seeds:
        raise SeedsError(f"--seeds {text!r} is an empty range (its first seed is after its last); give A-B with "
                         f"A <= B, such as {example}")
    return seeds


def pilot_seeds(text: str | None, default: range, example: str) -> list[int]:
    """The seeds of a ``--pilot`` call: ``--seeds`` (``text``) or ``default``, all of them :data:`PILOT_SEEDS`."""
    seeds = seed_range(text, example) if text else list(default)
    if not all(s in PILOT_SEEDS for s in seeds):
        raise SeedsError(f"--pilot uses seeds {PILOT_SEEDS.start}-{PILOT_SEEDS.stop - 1} only (a registered seed is "
                         f"never seen before its decisive run); got {seeds[0]}-{seeds[-1]}")
    return seeds


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second (a call's or a seed's start and end)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


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


def code_hash() -> str:
    """SHA-256 over the package's Python files (the training and scoring code of a seed), sorted by path."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _means(scores: dict, metrics) -> dict:
    """``{domain: {metric: mean over samples}}`` of a protocol's DomainScores."""
    return {domain: {m: s.summary[m].mean for m in metrics} for domain, s in scores.items()}


def _draw_means(scores: dict, metric: str, draws) -> dict:
    """``{domain: [mean over the draw's samples, per draw]}``."""
    def mean(rows):
        return sum(r[metric] for r in rows) / len(rows) if rows else None

    return {domain: [mean([r for r in s.samples if r["seed"] == d]) for d in draws] for domain, s in scores.items()}


def run_seed(seed: int, protocol: Protocol, runs_dir: str | Path, device: str | None = None,
             threads: int = 1) -> dict:
    """Train seed ``seed``'s plain and gated GPT and score them (module docstring); returns the seed's result."""
    import torch

    from semlm.core import runs
    from semlm.idea.profiles import idea_profile
    from semlm.idea.rule_prompts import prompts_digest, wikitext2_rule_prompts, with_prompts
    from semlm.idea.sharpening import sharpening_temperature
    from semlm.idea.competence import ngram_reference
    from semlm.idea.generation import SHARPENING_BLOCKS, authors_protocol, domain_retention, load_domains, stop_words
    from semlm.idea.wikitext_experiment import IDEA, idea_data, idea_run, profile_form_run
    from semlm.reference import PAPER_B_EVAL_DOMAINS

    started, wall0 = utc_now(), time.perf_counter()
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    config = idea_profile(protocol.profile, seed)
    if protocol.compile is False:
        config = replace(config, train=replace(config.train, compile_on_cuda=False))
    specs = {"baseline": idea_run(config, "baseline", False), "gated": idea_run(config, profile_form_run(config), True)}
    records = {name: runs.run_one(IDEA, spec, runs_dir, threads=threads, device=device) for name, spec in specs.items()}
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
        "started_at": started, "wall_seconds": round(wall, 2),
        "train_seconds": round(trained, 2),
        # the process held the GPU for the whole seed: its GPU time is its wall time
        "gpu_seconds": round(wall, 2) if device.startswith("cuda") else 0.0,
        "steps": config.train.max_steps,
        "val_ppl": {name: r.metrics.val_ppl for name, r in records.items()},
        "val_ppl_ungated": records["gated"].metrics.val_ppl_ungated,
        "sharpening_temperature": temperature, "bigram": reference,
        "book": book, "authors": authors,
    }


def run_seed_process(seed: int, protocol: Protocol, runs_dir: str, out: str,
                     device: str | None) -> tuple[int, float]:
    """Worker: one seed, its file written only once it has finished (a killed seed leaves no file)."""
    from semlm.core.processes import die_with_parent
    from semlm.core.runs import write_atomic

    die_with_parent()
    result = run_seed(seed, protocol, runs_dir, device)
    write_atomic(Path(out) / f"{seed}.json", json.dumps(result, indent=1, sort_keys=True) + "\n")
    return seed, result["wall_seconds"]


# -- registration checks ---------------------------------------------------------------------------------------


def git(*args: str) -> subprocess.CompletedProcess:
    """``git <args>`` in the repository, its output captured (a seeds command's registration checks)."""
    return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)


def current_commit() -> str:
    """HEAD (``+dirty`` with uncommitted changes), or ``$SEMLM_COMMIT`` where there is no ``.git``."""
    if os.environ.get("SEMLM_COMMIT") or not has_git():  # a machine sent the files alone may hold a stale .git
        return os.environ.get("SEMLM_COMMIT", "unknown")
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return git("rev-parse", "HEAD").stdout.strip() + ("+dirty" if dirty else "")


def has_git() -> bool:
    return (REPO_ROOT / ".git").exists() and git("rev-parse", "HEAD").returncode == 0


def spawn_context():
    """The ``spawn`` multiprocessing context: each seed's process starts fresh (no forked torch state)."""
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

    def installed(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {"gpu": gpu, "driver": driver, "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "machine": platform.machine(),
            "packages": {name: installed(name) for name in ("torch", "transformers", "tokenizers", "numpy")}}


# -- collect --------------------------------------------------------------------------------------------------------


def seed_files(folder: Path) -> list[dict]:
    """The results in ``folder``'s ``<seed>.json`` files, by seed."""
    return [json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"), key=lambda p: int(p.stem))]


def read_seeds(folder: Path) -> list[dict]:
    if not Path(folder).is_dir():
        raise SeedsError(f"{folder} is not a folder; give the recording's folder, e.g. book/recorded/gpu-seeds-b1")
    results = seed_files(Path(folder) / "seeds")
    if not results:
        raise SeedsError(f"{folder}/seeds holds no seed files; run `python -m semlm.book seeds` first")
    return results


def assembled_record(results: list[dict]) -> dict:
    """The chapter-6 record the claims code judges, from the seeds' results: validation PPL paired by seed, the
    competence check over every model, the book's stickiness on the rule-chosen prompts (per domain and "all")
    and the authors' protocol, each with the sharpening control as ``control``."""
    from semlm.core.records import Interval
    from semlm.idea.records import Competence, IdeaGatingRecord, IdeaOverSeeds, SeedPaired, ValidationScore
    from semlm.idea.competence import competence

    seeds = [r["seed"] for r in results]
    arms = ("baseline", "gated", "sharpened")

    def paired(scores: list[dict], metric: str) -> dict:
        """``scores``: per result, each arm's ``{domain: {metric: mean}}``; per domain and "all", paired by seed."""
        domains = list(scores[0]["baseline"])

        def value(s, arm, names):
            return sum(s[arm][d][metric] for d in names) / len(names)

        return {label: SeedPaired.of(*[[value(s, arm, names) for s in scores] for arm in arms])
                for label, names in [*((d, [d]) for d in domains), ("all", domains)]}

    book = [{arm: r["book"][arm]["stickiness"] for arm in arms} for r in results]
    authors = [r["authors"] for r in results]
    ppl = {f"{m} (seed {r['seed']})": r["val_ppl"][m] for r in results for m in ("baseline", "gated")}
    check = competence(ppl, results[0]["bigram"])
    over = IdeaOverSeeds(
        seeds=seeds, gated_run="gated",
        val_ppl=SeedPaired.of(*[[r["val_ppl"][m] for r in results] for m in ("baseline", "gated")]),
        domains={"book_stickiness": paired(book, "stickiness"),
                 **{m: paired(authors, m) for m in ("stickiness", "authors_stickiness", "distinct_2")}},
        sharpening_temperature=Interval.of_mean([r["sharpening_temperature"] for r in results]))
    record = IdeaGatingRecord(
        dataset="wikitext-2", competence=Competence(**{k: check[k] for k in (
            "passes", "worst_model", "worst_ratio", "threshold_ratio", "bigram_val_ppl", "model_val_ppl")}),
        baseline=ValidationScore(val_ppl=over.val_ppl.baseline.mean),
        gated=ValidationScore(val_ppl=over.val_ppl.gated.mean), over_seeds=over)
    return record.to_dict()


def variance_split(results: list[dict], comparison: str = "gated - plain") -> dict:
    """The issue's split of the per-seed difference ``d`` (stickiness, all domains) into sampling noise within a
    seed (two draws: ``mean (d1 - d2)^2 / 2``) and between seeds (``Var(d bar) - within / 2``)."""
    other = {"gated - plain": "baseline", "gated - sharpened plain": "sharpened"}[comparison]

    def d(r, draw):
        book = r["book"]
        doms = list(book["gated"]["draws"])
        return sum(book["gated"]["draws"][x][draw] - book[other]["draws"][x][draw] for x in doms) / len(doms)

    n_draws = len(results[0]["protocol"]["draws"])
    if n_draws != 2:
        raise SeedsError(f"the variance split needs two draws per seed; these results have {n_draws}")
    split = two_draw_split([(d(r, 0), d(r, 1)) for r in results])
    return {"comparison": comparison, **split, "sd_of_seed_means": split["var_of_seed_means"] ** 0.5}


def two_draw_split(pairs: list[tuple[float, float]]) -> dict:
    """The split of per-seed values drawn twice (``pairs``: one (draw 1, draw 2) per seed) into sampling noise within
    a seed (``mean (d1 - d2)^2 / 2``: one draw's variance) and the variance between seeds (``Var(d bar) - within /
    2``), with the seed count, the variance of the seeds' means and their mean."""
    within = sum((a - b) ** 2 for a, b in pairs) / (2 * len(pairs))
    means = [(a + b) / 2 for a, b in pairs]
    var_mean = statistics.variance(means) if len(means) > 1 else float("nan")
    return {"seeds": len(pairs), "within": within, "between": var_mean - within / 2, "var_of_seed_means": var_mean,
            "mean": statistics.fmean(means)}
