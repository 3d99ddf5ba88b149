"""Benchmarks: ``python -m semlm.bench`` (``make bench``) runs the book's benchmarks (:mod:`semlm.book.bench`).

One function per ``--only`` section, and, only on request, ``--authors-script PATH``: their ``SemanticFusion.py``
(or their notebook's code cells; downloaded by the user, never shipped) and our synthetic experiment as whole
processes in turn (ours, theirs, ours, ...), so a busy neighbour slows both alike, recorded in the bench JSON.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from semlm.book import bench
from semlm.book.bench import AUTHORS_REPOSITORY, PRECISION_RECORD, measure_process
from semlm.book.report import cpu_model, git_commit, metrics_dir
from semlm.core.runs import write_atomic
from semlm.fusion import bench as fusion_bench
from semlm.fusion.profiles import synthetic_profile
from semlm.profiles import PROFILES

MEASURES = ("wall_seconds", "cpu_seconds", "peak_mb")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


# --- the authors' script against ours, both measured here ------------------------------------


def authors_script_file(path: str | Path, workdir: Path) -> tuple[Path, dict]:
    """The file to run for the authors' ``SemanticFusion.py`` / ``.ipynb`` at ``path``, and what is known of it.

    A notebook's code cells are joined into one script in ``workdir``, IPython lines (``%``, ``!``) left out.
    Refused in one line (FileNotFoundError, ValueError): a missing file, one that is neither a ``.py`` nor an
    ``.ipynb``, a notebook that is unreadable or has no code, and Python that does not parse.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"authors' script not found: {path} (download SemanticFusion.py or "
                                f"SemanticFusion.ipynb from {AUTHORS_REPOSITORY} and pass its path)")
    if path.suffix not in (".py", ".ipynb"):
        raise ValueError(f"--authors-script {path} is neither a .py nor an .ipynb; pass the authors' "
                         f"SemanticFusion.py or SemanticFusion.ipynb")
    about = {"file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
             "training_sentences_x_epochs": "unknown", "parameters": "unknown",
             "note": "their workload is whatever their script does; not read from it"}
    script, about["kind"] = path.resolve(), "script"
    if path.suffix == ".ipynb":
        try:
            cells = json.loads(path.read_text()).get("cells", [])
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{path} is not a readable notebook ({error})") from None
        sources = ["".join(cell.get("source", "")) for cell in cells if cell.get("cell_type") == "code"]
        if not any(source.strip() for source in sources):
            raise ValueError(f"{path} has no code cells; pass the authors' SemanticFusion.py or .ipynb")
        lines = "\n\n".join(sources).splitlines()
        kept = [line for line in lines if not line.lstrip().startswith(("%", "!"))]
        script = workdir / f"{path.stem}_code_cells.py"
        script.write_text("\n".join(kept) + "\n")
        about["kind"] = f"notebook: code cells joined, {len(lines) - len(kept)} magic/shell line(s) skipped"
    try:
        ast.parse(script.read_text(), filename=str(path))
    except (SyntaxError, UnicodeDecodeError) as error:
        raise ValueError(f"--authors-script {path} is not Python that parses ({error}); pass the authors' "
                         f"SemanticFusion.py or SemanticFusion.ipynb") from None
    return script, about


def _ours_command(profile: str, seed: int, workers: int | None) -> list[str]:
    """Our side: ``python -m semlm.fusion`` (both causal models trained from scratch in a temporary run folder,
    in a process that imports only what the experiment needs)."""
    command = [sys.executable, "-m", "semlm.fusion", "--profile", profile, "--seed", str(seed)]
    return command + (["--workers", str(workers)] if workers else [])


def _failure(run: dict) -> str | None:
    """``(exit N): <last stderr line>`` of a measured run that failed, else None."""
    return f"(exit {run['returncode']}): {(run['stderr_tail'] or ['no output'])[-1]}" if run["returncode"] else None


def _medians(runs: list[dict]) -> dict:
    """Medians of the measures over ``runs`` and their per-run lists."""
    return {**{m: round(statistics.median([r[m] for r in runs]), 3) for m in MEASURES},
            **{f"{m}_runs": [r[m] for r in runs] for m in MEASURES}}


def compare_with_authors_script(script: str | Path, profile: str = "cpu", seed: int = 111, runs: int = 3,
                                workers: int | None = None) -> dict:
    """The ``authors_comparison`` record: their script and our synthetic experiment, ``runs`` each, in turn,
    on this machine, with the ratios ours / theirs run by run (pair i: our i-th and their i-th) and their median.

    Bad input (a missing file, a notebook without code, Python that does not parse: :func:`authors_script_file`)
    is refused before our side runs. A script that fails does not stop our side: the record then has ``error``
    (one line) and no ratios. ``runs`` below 2 is refused: runs alternate ours / theirs.
    """
    from semlm.fusion.model import build_model
    from semlm.fusion.synthetic_experiment import model_config, prepare_data

    if runs < 2:
        raise ValueError(f"--runs must be at least 2 (runs alternate ours / theirs), got {runs}")
    config = synthetic_profile(profile, seed)  # an unknown profile fails here, before anything runs
    vocab = len(prepare_data(config.corpus).vocab)  # what our side trains: sentences x epochs, both models
    parameters = {kind: sum(p.numel() for p in build_model(model_config(config, kind, vocab, "causal")).parameters())
                  for kind in ("baseline", "fusion")}
    sentences, epochs = config.corpus.n_train, config.train.epochs
    workload = {"experiment": "synthetic, causal, baseline + fusion, training + evaluation (fresh, no cache)",
                "profile": profile, "seed": seed, "training_sentences": sentences, "epochs": epochs,
                "training_sentences_x_epochs": sentences * epochs, "parameters": parameters,
                "workers": workers or min(2, os.cpu_count() or 1)}
    # both sides: this environment, a non-interactive matplotlib, our ``semlm`` importable
    library, path = str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": library + (os.pathsep + path if path else "")}
    threads = torch.get_num_threads()
    record = {"runs": runs, "profile": profile, "order": "ours, theirs, ours, theirs, ...",
              "cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "torch_default_threads": threads,
              "thread_variables": {v: os.environ.get(v, "unset") for v in THREAD_VARIABLES},
              "threads": {"ours": "training: one 1-thread process per model (up to the workers); "
                                  f"evaluation: {threads}",
                          "authors_script": f"{threads} (PyTorch's default here, unless their script sets its own)"},
              "python": sys.version.split()[0], "torch": torch.__version__, "git_commit": git_commit(),
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with tempfile.TemporaryDirectory(prefix="semlm-authors-") as workdir:
        their_file, about = authors_script_file(script, Path(workdir))  # bad input: one line, before our side runs
        error, ours, theirs, ours_command = None, [], [], _ours_command(profile, seed, workers)
        for i in range(runs):
            ours.append(measure_process(ours_command, env, workdir))
            if _failure(ours[-1]):
                raise RuntimeError(f"our synthetic experiment failed {_failure(ours[-1])}")
            if error is None:
                theirs.append(measure_process([sys.executable, str(their_file)], env, workdir))
                if _failure(theirs[-1]):
                    error = f"the authors' script {script} failed on run {i + 1} {_failure(theirs[-1])}"
    record["ours"] = {**_medians(ours), "workload": workload}
    # the script's name only: a record never names the folders of the machine that wrote it
    record["authors_script"] = {**about, "path": Path(script).name}
    if error is not None:
        return {**record, "error": error}
    record["authors_script"].update(_medians(theirs), stdout_tail=theirs[-1]["stdout_tail"])
    record["ratios"] = {"direction": "ours / authors' script"}
    for m in MEASURES:
        pairs = [o[m] / t[m] if t[m] else float("nan") for o, t in zip(ours, theirs)]
        record["ratios"][m] = {"median": round(statistics.median(pairs), 4), "per_pair": [round(p, 4) for p in pairs]}
    return record


def _write_json(path: str | Path, record: dict) -> Path:
    """Write ``record`` to ``path`` through a temporary file beside it (never half-written)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(record, indent=2))
    return path


# --- one function per --only section -----------------------------------------------------------


def print_idea_summary(idea: dict) -> None:
    """The chapter's ratio table (:func:`~semlm.book.bench.idea_ratio_frame`) with its verdict sentences."""
    print(f"idea-gated GPT ({idea['profile']}, {idea['device']}):\n{bench.idea_ratio_frame(idea).to_string()}")
    print("\n".join(f"  {key}: {sentence}" for key, sentence in idea["verdicts"].items()))
    if "step_cpu_time_ratio" in idea:
        print(f"  step CPU time ratio {idea['step_cpu_time_ratio']:.2f} = {idea['step_cpu_time_over_flops']:.2f} x "
              "FLOP ratio (process CPU time, less moved by neighbours)")


def print_book_times(times: dict) -> None:
    """The chapter's table of the build's chapter times and one line: minutes, core use, from scratch, target."""
    if not times["chapters"]:
        print("book: no build recorded yet (run `make book`)")
        return
    verdict = {True: "meets", False: "MISSES", None: "n/a for"}[times["meets_target"]]
    scratch = "from scratch" if times["from_scratch"] else "NOT from scratch (some models came from an earlier build)"
    busy = f", cores {times['utilisation']:.0%} busy" if times.get("utilisation") is not None else ""
    print(f"{pd.DataFrame(times['chapters']).to_string(index=False)}\nbook ({', '.join(times['profiles'])}): "
          f"{times['total_minutes']:.1f} min{busy}, {scratch}, {times['trained_ahead']} model(s) trained beside the "
          f"chapters; {verdict} the {times['target_minutes']:.0f} min target")


def _run_all(args) -> None:
    """The whole benchmark (the chapter's record), printed as a summary, then the last book build's times."""
    record = bench.run_benchmark(args.profile, args.seed, args.workers, fresh=args.fresh,
                                 variants_profile=None if args.variants_profile == "none" else args.variants_profile)
    print(f"synthetic experiment ({args.profile}):\n{bench.summary_frame(record).to_string()}")
    print(bench.flops_frame(record).to_string())
    print(record["bf16_decision"])
    print_idea_summary(record["idea"])
    print(json.dumps(record, indent=2))
    print_book_times(bench.book_build_times())


def _run_idea(args) -> None:
    """The idea-gated GPT's FLOP / time ratios (what a GPU run wants); ``--out``: also written there."""
    idea = bench.run_idea_benchmark(args.profile, args.seed, threads=None if torch.cuda.is_available() else 1)
    print_idea_summary(idea)
    print(json.dumps(idea, indent=2))
    if args.out:
        _write_json(args.out, idea)


def _run_gpu(args) -> None:
    """Paper B's training through the trainer on a CUDA GPU; ``--out``: the record (rewritten after each measured
    variant) and its profiler tables. ``SEMLM_GPU_BENCH_SECONDS`` (default 300): start no variant after that."""
    from semlm.book.gpu_throughput import print_gpu_summary, run_gpu_throughput

    def write(record: dict) -> None:  # the trace tables of the setting with the fastest gated GPT so far
        out = _write_json(args.out, record)
        traced = [kinds for kinds in record["variants"].values() if "table" in kinds.get("gated", {}).get("trace", {})]
        if traced:
            best = max(traced, key=lambda kinds: kinds["gated"]["mfu"])
            out.with_suffix(".trace.txt").write_text("\n\n".join(
                f"{kind}\n{v['trace']['table']}" for kind, v in best.items() if "table" in v.get("trace", {})))

    budget = float(os.environ.get("SEMLM_GPU_BENCH_SECONDS", 300))
    print_gpu_summary(run_gpu_throughput(args.profile, args.seed, budget_seconds=budget,
                                         on_update=write if args.out else None))


def _run_precision(args, paper: str = "A") -> None:
    """Train ``paper``'s models in float32 and in bf16 over 3 seeds at ``--variants-profile`` and record the
    comparison in ``book/recorded/``: A, the baseline and fusion models (with the bf16 step times under oneDNN's
    instruction-set caps); B, chapters 6, 7 and 9's models, paired by seed (``semlm.book.idea_precision``)."""
    from semlm.book.idea_precision import IDEA_PRECISION_RECORD, compare_idea_precisions
    from semlm.book.recorded import write_precision_comparison
    from semlm.book.recorded_runs import RECORDED_DIR

    profile, seed, only = args.variants_profile, args.seed, "precision" if paper == "A" else "precision-idea"
    if profile in ("none", "smoke"):  # it replaces the recorded comparison: smoke models are too small to judge
        raise ValueError(f"--only {only} records book/recorded/ at a real scale, not at {profile!r}; "
                         "pass --variants-profile cpu")
    seeds = tuple(range(seed, seed + 3))
    if paper == "A":
        comparison = fusion_bench.compare_training_variants(synthetic_profile(profile), seeds,
                                                            workers=args.workers,
                                                            variants=fusion_bench.PRECISION_VARIANTS)
        comparison["emulated_bf16"] = fusion_bench.emulated_bf16_step_ratios(profile)
        print(fusion_bench.bf16_summary(comparison))
    else:
        comparison = compare_idea_precisions(profile, seeds, workers=args.workers)
        print(json.dumps(comparison["verdict"], indent=2))
    command = f"python -m semlm.bench --only {only} --variants-profile {profile} --seed {seed}"
    name = PRECISION_RECORD if paper == "A" else IDEA_PRECISION_RECORD
    print(write_precision_comparison(comparison, RECORDED_DIR, name, command, paper=paper))


def _merge_into(out: str | None, key: str, value: dict) -> Path:
    """Write ``value`` under ``key`` of the JSON file ``out`` (default: the bench JSON), its other entries kept."""
    path, existing = Path(out) if out else metrics_dir() / "bench.json", {}
    if path.is_file():
        try:
            existing = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON ({error}); pass another --out or delete it") from None
    return _write_json(path, {**existing, key: value})


def _run_authors(args) -> int | None:
    """``--authors-script``: measure, print, write under ``authors_comparison`` in ``--out`` (default: the bench
    JSON, its other entries kept) and, with ``--record``, in ``book/recorded/authors-comparison/``; one error line
    and exit 1 if their side failed (then nothing is recorded)."""
    if args.record and args.profile != "cpu":  # the recorded comparison is the book's scale, never a smoke run
        raise ValueError(f"--record keeps the comparison at the book's scale, not at {args.profile!r}; "
                         "pass --profile cpu")
    record = compare_with_authors_script(args.authors_script, args.profile, args.seed, args.runs, args.workers)
    frame, note = bench.authors_comparison_frame({"authors_comparison": record})
    print(f"{frame.to_string()}\n{note}")
    if "error" in record:  # a failed comparison never replaces one already written or recorded
        print(f"error: {record['error']}; nothing was written", file=sys.stderr)
        return 1
    print(f"written to {_merge_into(args.out, 'authors_comparison', record)} (authors_comparison)")
    if args.record:
        from semlm.book import recorded_runs
        from semlm.book.recorded import write_authors_comparison

        workers = f" --workers {args.workers}" if args.workers else ""
        command = (f"python -m semlm.bench --authors-script {Path(args.authors_script).name} --profile {args.profile} "
                   f"--seed {args.seed} --runs {args.runs}{workers} --record")
        print(f"recorded in {write_authors_comparison(record, recorded_runs.RECORDED_DIR, command)}")


def _run_stacking(args) -> None:
    """Seeds stacked with torch.func against one after another, per small model kind (bench.seed_stacking): printed
    and written under ``seed_stacking`` in ``--out`` (default: the bench JSON, its other entries kept)."""
    result = bench.seed_stacking(args.profile)
    rows = {kind: {k: m.get(k) for k in ("alone_ms_per_model_step", "stacked_ms_per_model_step", "ratio", "adopted")}
            for kind, m in result["kinds"].items()}
    print(pd.DataFrame(rows).T.to_string())
    for kind, m in result["kinds"].items():
        print(f"{kind}: {m.get('why') or m.get('skipped')}")
    print(f"written to {_merge_into(args.out, 'seed_stacking', result)} (seed_stacking)")


#: ``--only`` section -> the function that runs it, None or an exit code (``--authors-script`` runs ``_run_authors``).
SECTIONS = {"all": _run_all, "idea": _run_idea, "gpu": _run_gpu, "stacking": _run_stacking,
            "book": lambda args: print_book_times(bench.book_build_times()),
            "precision": _run_precision, "precision-idea": lambda args: _run_precision(args, "B")}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m semlm.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu", help=f"one of {', '.join(PROFILES)} (default: cpu = paper scale)")
    parser.add_argument("--seed", type=int, default=111)
    parser.add_argument("--workers", type=int, default=None, help="parallel training processes (default: up to 2)")
    parser.add_argument("--only", choices=tuple(SECTIONS), default="all",
                        help="'idea': only the idea-gated GPT's FLOP / time ratios (what a GPU run wants); "
                             "'gpu': paper B's training through the trainer on a CUDA GPU, tokens/s and MFU "
                             "per execution setting (semlm.book.gpu_throughput); "
                             "'book': the chapter times of the last book build (book/_build/manifest.json); "
                             "'precision': float32 against bf16 autocast for "
                             "paper A's models at --variants-profile over 3 seeds, recorded in "
                             f"book/recorded/{PRECISION_RECORD}/ (the evidence for the cpu profile's precision); "
                             "'precision-idea': the same for paper B's models of chapters 6, 7 and 9, paired by "
                             "seed (book/recorded/cpu-bf16-idea/)")
    parser.add_argument("--out", default=None, help="with --only idea / gpu: also write the record to this JSON file; "
                                                    "with --authors-script: where to write it (default: bench.json)")
    parser.add_argument("--authors-script", default=None, metavar="PATH",
                        help="the authors' SemanticFusion.py or .ipynb (download it from "
                             f"{AUTHORS_REPOSITORY}): time it against our synthetic experiment on this machine")
    parser.add_argument("--runs", type=int, default=3, help="with --authors-script: runs of each side (>= 2)")
    parser.add_argument("--record", action="store_true",
                        help="with --authors-script --profile cpu: also write the comparison and this machine's "
                             "provenance to book/recorded/authors-comparison/ (what the benchmarks chapter shows "
                             "when its build measured none)")
    parser.add_argument("--fresh", action="store_true",
                        help="train the synthetic models from an empty run folder (default: reuse the build's run "
                             "cache, as the benchmarks chapter does, and report their training time as measured then)")
    parser.add_argument("--variants-profile", default="smoke", choices=(*PROFILES, "none"),
                        help="profile of the fp32 / length-bucketing / bf16 comparison over 3 seeds "
                             "(default: smoke, seconds; cpu: paper scale, several minutes; none: skip it)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.workers is not None and args.workers < 1:
        print(f"error: --workers must be >= 1, got {args.workers}", file=sys.stderr)
        return 2
    if args.record and args.authors_script is None:
        print("error: --record keeps an --authors-script comparison; pass --authors-script PATH", file=sys.stderr)
        return 2
    try:
        return (_run_authors if args.authors_script is not None else SECTIONS[args.only])(args) or 0
    except (ValueError, RuntimeError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
