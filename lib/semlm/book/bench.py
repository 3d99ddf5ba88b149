"""The benchmarks chapter (chapter 98), whose measurements ``python -m semlm.bench`` also runs (:mod:`.bench_cli`).

Paper A's synthetic experiment timed (:func:`run_benchmark`, written to ``bench.json``), paper B's gated / plain
GPT time ratio against its FLOP ratio (:func:`run_idea_benchmark`; a verdict, never a timed test), the book
build's chapter times and CPU-seconds, and the chapter's tables. Paper A's benchmarks that need nothing of the book
(controlled generation timed, the training variants, what bf16 costs a step) live in :mod:`semlm.fusion.bench`.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Sequence

import pandas as pd
import psutil
import torch

from semlm.book.flops import (idea_flop_ratios, model_flops_utilisation, nominal_cpu_peak_flops,
                              synthetic_forward_flops_per_position)
from semlm.core.precision import autocast
from semlm.core.records import Interval
from semlm.core.runs import peak_rss_mb
from semlm.data.fetch import CHAPTER_DATA, FIX, missing_files
from semlm.data.paths import REPO_ROOT
from semlm.fusion.bench import best_seconds, bf16_decision, compare_training_variants, time_controlled_generation
from semlm.fusion.synthetic_experiment import prepare_data, train_causal_models, model_config as synthetic_model_config
from semlm.fusion.profiles import synthetic_profile
from semlm.idea import sparse_decoding as sparse
from semlm.idea.model import IdeaGPTForCausalLM, parameter_count
from semlm.idea.profiles import idea_profile
from semlm.idea.data import TokenBlocks
from semlm.idea.loss import autocast_for, idea_loss_fn
from semlm.idea.wikitext_experiment import model_config
from semlm.profiles import CPU_BF16_VARIABLE, cpu_computes_bf16
from semlm.book.records import BenchmarkRecord
from semlm.book.recorded_runs import (AUTHORS_COMPARISON, AUTHORS_COMPARISON_FOLDERS, AUTHORS_COMPARISON_RECORD,
                                     RECORDED_DIR, load_recorded)
from semlm.book.report import metrics_dir, write_chapter_metrics
from semlm.book.runner import read_manifest, trained_model as _trained_model

TARGET_SECONDS = 60.0


def run_benchmark(profile: str = "cpu", seed: int = 111, workers: int | None = None, progress: bool = True,
                  variants_profile: str | None = "smoke", variant_seeds: int = 3, fresh: bool = False,
                  sparse_decoding: bool = True) -> dict:
    """Time the whole synthetic experiment (both causal models trained and evaluated); return and write the record.

    The models come from the build's run cache (chapter 2 trains the same runs): the wall time is then their
    training time as the build measured it (the longer of the two: they train side by side) plus the loading
    and evaluation here, as ``training_source`` says; ``fresh`` trains them, and the training variants
    (``compare_training_variants`` at ``variants_profile``, None: skipped), in an empty run folder.
    """
    config = synthetic_profile(profile, seed)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="semlm-bench-") if fresh else contextlib.nullcontext() as runs_dir:
        runs = train_causal_models(config, runs_dir, workers, progress)
        wall = time.perf_counter() - start
        generation = time_controlled_generation(runs["fusion"].load(), config)
        variants = None if variants_profile is None else compare_training_variants(
            synthetic_profile(variants_profile), tuple(range(seed, seed + variant_seeds)), workers=workers,
            runs_dir=runs_dir)
    reused = all(r.status == "loaded" for r in runs.values())
    if reused:  # trained earlier in the build: its training time, as measured then, plus what ran here
        wall += max(r.train_seconds for r in runs.values())
    record = {
        "experiment": "synthetic, causal, baseline + fusion, training + evaluation",
        "training_source": ("the build's run cache: the models chapter 2 trained (their training seconds as "
                            "measured then, plus loading and evaluation here)" if reused
                            else "trained here" + (" from an empty run folder" if fresh else "")),
        "scale": {"n_train": config.corpus.n_train, "n_val": config.corpus.n_val, "epochs": config.train.epochs,
                  "d_model": config.backbone.d_model, "n_layers": config.backbone.n_layers},
        "workers": workers or min(2, os.cpu_count() or 1),
        "wall_seconds": round(wall, 2),
        "train_seconds": {k: round(r.train_seconds, 2) for k, r in runs.items()},
        "peak_rss_mb": {"runner": round(peak_rss_mb(), 1), **{k: round(r.peak_rss_mb, 1) for k, r in runs.items()}},
        "target_seconds": TARGET_SECONDS,
        "meets_target": wall <= TARGET_SECONDS if profile != "smoke" else None,
        "val_ppl": {k: r.metrics.ppl for k, r in runs.items()},
        "generation": generation,
        "generations_per_second": generation["generations_per_second"],
        "flops": synthetic_flops_record(config, runs),
    }
    if variants is not None:
        record["training_variants"] = variants
    # the precision paper A's config trains in on this machine, and why (semlm.fusion.profiles.paper_a_cpu_precision)
    record["precision"] = {"profile": config.name, "autocast": config.train.autocast or "float32",
                           "cpu_computes_bf16": cpu_computes_bf16(),
                           CPU_BF16_VARIABLE: os.environ.get(CPU_BF16_VARIABLE) or "auto"}
    record["bf16_decision"] = bf16_decision(record.get("training_variants"), record["precision"],
                                            recorded_precision_comparison())
    record["idea"] = run_idea_benchmark(profile, seed, threads=1)
    if sparse_decoding:  # chapter 6's gated model, loaded from the build's run cache (trained if absent)
        missing = missing_files(CHAPTER_DATA["06_idea_gating"])
        record["idea"]["sparse_decoding"] = (
            {"skipped": f"chapter 6's data is missing ({', '.join(missing)}): {FIX}"} if missing
            else sparse.bench_section(idea_profile(profile, seed)))
    record["seed_stacking"] = seed_stacking(profile)  # a few training steps per kind: seconds
    previous = previous_authors_comparison()  # measured on request (--authors-script); kept, never re-run here
    if previous is not None:
        record["authors_comparison"] = previous
    write_chapter_metrics("bench", profile, seed, BenchmarkRecord(extra=record), wall)
    return record


# --- paper A: FLOPs reached, and what bf16 / length bucketing change --------------------------
#
# How close does a training step of the small synthetic models come to what the CPU can do? Their FLOPs
# per position, counted from the config, over the measured training time, against a measured peak (one
# large float32 matrix product per thread, the same BLAS) and the datasheet-style ``nominal_cpu_peak_flops``.


@contextlib.contextmanager
def torch_threads(threads: int | None):
    """PyTorch's intra-op threads set to ``threads`` (None: left as they are) inside, as they were after."""
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def measured_matmul_flops(n: int = 512, repeats: int = 20) -> float:
    """Best float32 FLOP/s of an ``n x n`` matrix product on one thread: the practical peak per core (512 x 512
    operands fit in L2, so not memory-bound; the best of ``repeats``, as neighbours only slow it)."""
    with torch_threads(1):
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
        return 2 * n ** 3 / best_seconds(lambda: a @ b, repeats)


def synthetic_flops_record(config, runs: dict) -> dict:
    """FLOP/s each model's training (one thread per run) reached, against the measured and the nominal peak."""
    data = prepare_data(config.corpus)
    # positions computed in one shuffled epoch: batches are trimmed to their longest row
    batches = data.train.batches(config.train.batch_size, torch.Generator().manual_seed(0), shuffle=True)
    positions = sum(b.input_ids.numel() for b in batches) * config.train.epochs
    real = int(data.train.mask.sum()) * config.train.epochs
    context = (data.train.lengths.float() + 1).mean().item() / 2  # mean keys attended (causal)
    peak, nominal = measured_matmul_flops(), nominal_cpu_peak_flops()
    out = {"computed_positions": positions, "real_positions": real, "peak_measured_per_thread": peak,
           "peak_nominal_per_core": nominal["per_core"], "nominal_formula": nominal["formula"],
           "threads_per_run": 1, "autocast": config.train.autocast or "float32", "models": {}}
    for kind, run in runs.items():
        mc = synthetic_model_config(config, kind, len(data.vocab), "causal")
        per_position = 3 * synthetic_forward_flops_per_position(mc.backbone, len(data.vocab), kind,
                                                                mc.n_features, context)["total"]
        seconds = run.train_seconds  # includes the per-epoch validation passes (small)
        achieved = per_position * positions / seconds if seconds else None
        out["models"][kind] = {
            "training_flops_per_position": per_position, "train_seconds": seconds, "flops_per_second": achieved,
            "share_of_measured_peak": achieved / peak if achieved else None,
            "share_of_nominal_peak": achieved / nominal["per_core"] if achieved and nominal["per_core"] else None}
    return out


#: Where ``python -m semlm.bench --only precision`` records that comparison (``book/recorded/<name>``).
PRECISION_RECORD = "cpu-bf16-variants"


def recorded_precision_comparison(root=None) -> dict | None:
    """The recorded ``cpu``-scale float32 / bf16 comparison (``book/recorded/cpu-bf16-variants``), or None."""
    run = next((run for run in reversed(load_recorded(root)) if run.training_variants is not None), None)
    return None if run is None else {**run.training_variants, "folder": f"book/recorded/{run.slug}",
                                     "date": run.date[:10], "commit": run.commit[:7], "machine": run.machine}


# --- paper B: idea-gated GPT, FLOPs against time ----------------------------------------------
#
# The idea head adds a d x d layer and a second d x V projection to every position. A time ratio (gated /
# plain) close to the FLOP ratio counted from the configs means the gate costs what its arithmetic costs
# and nothing more (no extra passes, no Python loops, no host syncs).

#: Issue targets: measured time ratio / FLOP ratio (gated over plain) at most these.
IDEA_STEP_TARGET, IDEA_GENERATION_TARGET = 1.05, 1.1


def verdict(time_ratio: float, flop_ratio: float, target: float) -> str:
    over = time_ratio / flop_ratio
    return (f"{'meets' if over <= target else 'MISSES'} (time ratio {time_ratio:.2f} = {over:.2f} x FLOP ratio "
            f"{flop_ratio:.2f}; target <= {target:.2f} x)")


def run_idea_benchmark(profile: str = "cpu", seed: int = 111, steps: int = 4, repeats: int = 5,
                       threads: int | None = None, prompt_tokens: int = 8, new_tokens: int = 32,
                       generation_batch: int = 16) -> dict:
    """Gated / plain GPT at ``profile`` size, random weights and token ids: FLOP ratio next to the time ratio.

    Training step: one micro-batch (the book's alpha-gated loss, backward, AdamW), ``repeats`` runs of ``steps``
    steps, plain and gated in turn (:func:`_time_idea_jobs`). Generation: greedy cached ``generate()``, per new
    token (time for ``new_tokens`` - time for 1) / (new_tokens - 1), prefill left out. On CUDA the models run in
    bf16 autocast, as the trainer runs paper B's GPTs.
    """
    config = idea_profile(profile, seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    synchronize = torch.cuda.synchronize if device == "cuda" else (lambda: None)  # each job waits for the GPU

    def train(model, optimizer, loss_fn):
        model.train()
        for batch in batches:
            with autocast("bf16_on_cuda", device):
                loss, _ = loss_fn(model, batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        synchronize()

    def generate(model, n: int):
        model.eval()
        with torch.no_grad(), autocast_for(device):
            model.generate(prompt, max_new_tokens=n, do_sample=False, use_cache=True, pad_token_id=0,
                           eos_token_id=None)
        synchronize()

    with torch_threads(threads):
        V, L, K = config.vocab_size, config.size.block_size, config.idea.window
        B = config.train.batch_size // config.train.accumulation  # one micro-batch
        new_tokens = max(2, min(new_tokens, L - prompt_tokens))  # stay inside n_positions: no crop
        g = torch.Generator().manual_seed(seed)
        blocks = TokenBlocks.from_stream(torch.randint(0, V, ((steps + 1) * B * L + K,), generator=g), L, K)
        blocks.device = device
        batches = list(blocks.batches(B))[:steps]
        prompt = torch.randint(1, V, (generation_batch, prompt_tokens), generator=g).to(device)
        flops = idea_flop_ratios(config.size.n_layer, config.size.n_embd, V, L, prompt_tokens, new_tokens)
        record = {"profile": profile, "device": device, "threads": torch.get_num_threads(), "vocab_size": V,
                  "block_size": L, "batch_size": B, "n_layer": config.size.n_layer, "n_embd": config.size.n_embd,
                  "prompt_tokens": prompt_tokens, "new_tokens": new_tokens, "generation_batch": generation_batch,
                  "flops": flops, **({"device_name": torch.cuda.get_device_name()} if device == "cuda" else {})}
        jobs = {}  # {"plain" | "gated": (model, {"step" | "one" | "many": job})}
        for name, idea in (("plain", False), ("gated", True)):
            torch.manual_seed(seed)
            model = IdeaGPTForCausalLM(model_config(config, V, idea)).to(device)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            loss_fn = idea_loss_fn(config.idea, list(range(18)), idea)  # no step given: alpha at the end of its ramp
            jobs[name] = (model, {"step": partial(train, model, optimizer, loss_fn),
                                  "one": partial(generate, model, 1), "many": partial(generate, model, new_tokens)})
        _time_idea_jobs(record, jobs, repeats, steps)
        return record


def _time_idea_jobs(record: dict, jobs: dict, repeats: int, steps: int) -> None:
    """Run the jobs ``repeats`` times after a warm-up, plain and gated in turn (a busy neighbour slows both alike),
    and add to ``record`` each model's best step and per-token times, throughputs and every repeat's step time
    (wall, and process CPU time on a CPU; on CUDA the MFU), then the gated / plain time ratios (a step's: the
    median of the repeats' ratios, the mean of the middle two) next to the FLOP ratios, targets and verdicts."""
    device, flops = record["device"], record["flops"]
    times = {name: {"step": [], "one": [], "many": [], "step_cpu": []} for name in jobs}
    for run in [run for _, model_jobs in jobs.values() for run in model_jobs.values()]:  # warm-up
        run()
    for _ in range(repeats):
        for name, (_, model_jobs) in jobs.items():
            for key, run in model_jobs.items():
                t0, cpu0 = time.perf_counter(), time.process_time()
                run()
                times[name][key].append(time.perf_counter() - t0)
                if key == "step":  # CPU time: what a busy neighbour on a shared CPU changes least
                    times[name]["step_cpu"].append(time.process_time() - cpu0)
    for name, (model, _) in jobs.items():
        t, step_seconds = times[name], min(times[name]["step"]) / steps
        per_token = max(min(t["many"]) - min(t["one"]), 1e-9) / (record["new_tokens"] - 1)
        record[name] = {"parameters": parameter_count(model), "step_seconds": step_seconds,
                        "generate_seconds": min(t["many"]), "seconds_per_new_token": per_token,
                        "train_tokens_per_second": record["batch_size"] * record["block_size"] / step_seconds,
                        "generated_tokens_per_second": record["generation_batch"] / per_token,
                        "step_seconds_all": [x / steps for x in t["step"]]}
        if device == "cpu":
            record[name].update(step_cpu_seconds=min(t["step_cpu"]) / steps,
                                step_cpu_seconds_all=[x / steps for x in t["step_cpu"]])
        else:
            record[name]["model_flops_utilisation"] = model_flops_utilisation(
                record[name]["train_tokens_per_second"], flops["training"][f"{name}_flops_per_token"],
                record["device_name"])
    gated, plain = record["gated"], record["plain"]
    record.update(step_flop_ratio=flops["training"]["ratio"], generation_flop_ratio=flops["generation"]["ratio"],
                  generation_time_ratio=gated["seconds_per_new_token"] / plain["seconds_per_new_token"])
    for step in ("step", "step_cpu") if device == "cpu" else ("step",):  # wall, and process CPU time on a CPU
        ratios = [g / p for g, p in zip(gated[f"{step}_seconds_all"], plain[f"{step}_seconds_all"])]
        record.update({f"{step}_time_ratio": statistics.median(ratios), f"{step}_time_ratio_all": ratios,
                       f"{step}_time_over_flops": statistics.median(ratios) / record["step_flop_ratio"]})
    record["generation_time_over_flops"] = record["generation_time_ratio"] / record["generation_flop_ratio"]
    targets = {"step": IDEA_STEP_TARGET, "generation": IDEA_GENERATION_TARGET}
    record["targets"] = {f"{key}_time_over_flops": target for key, target in targets.items()}
    record["meets_targets"] = {key: record[f"{key}_time_over_flops"] <= target for key, target in targets.items()}
    record["verdicts"] = {key: verdict(record[f"{key}_time_ratio"], record[f"{key}_flop_ratio"], target)
                          for key, target in targets.items()}


# --- the whole book ---------------------------------------------------------------------------

#: The target for the whole ``cpu`` book built from scratch on a 2-core CPU.
BOOK_TARGET_MINUTES = 30.0  # issue 21: a from-scratch cpu build in <= 1,800 s (the long-term target is 20 min)


def _build_manifest(build_dir: str | Path | None) -> dict:
    """The runner's ``manifest.json`` of ``build_dir`` (default ``$SEMLM_BUILD_DIR``, else ``book/_build``)."""
    return read_manifest(Path(build_dir or os.environ.get("SEMLM_BUILD_DIR") or REPO_ROOT / "book" / "_build"))


def book_build_times(build_dir: str | Path | None = None) -> dict:
    """Per-chapter wall time, core use and trained / loaded model counts of the current (or last) book build (its
    ``manifest.json``: inside a build, the chapters executed so far); ``trained_ahead``: the models the runner
    trained beside the chapters; ``from_scratch``: no chapter loaded a model an earlier build had trained."""
    manifest = _build_manifest(build_dir)
    chapters = manifest["chapters"]
    ahead = manifest.get("train_ahead") or {"run_list": [], "runs": {"trained": 0}}
    rows = [{"chapter": chapter, "profile": entry["profile"], "status": entry["status"],
             "minutes": round(entry["seconds"] / 60, 2), "cores busy": entry.get("utilisation"),
             "models trained": entry["runs"]["trained"],
             "models loaded": entry["runs"]["loaded"]} for chapter, entry in sorted(chapters.items())]
    total = sum(entry["seconds"] for entry in chapters.values()) / 60
    trained_here = {_trained_model(r) for e in [*chapters.values(), ahead] for r in e["run_list"]
                    if r["status"] == "trained"}
    loaded_from_earlier = [r for e in chapters.values() for r in e["run_list"] if r["status"] == "loaded"
                           and _trained_model(r) not in trained_here]
    cpu = sum(e.get("cpu_seconds") or 0.0 for e in chapters.values())
    core_seconds = sum(e["seconds"] * (e.get("cores") or 0) for e in chapters.values())
    return {"chapters": rows, "total_minutes": round(total, 2), "target_minutes": BOOK_TARGET_MINUTES,
            "utilisation": round(cpu / core_seconds, 3) if core_seconds and all(
                "cpu_seconds" in e for e in chapters.values()) else None,
            "profiles": sorted({r["profile"] for r in rows}), "from_scratch": not loaded_from_earlier,
            "trained_ahead": ahead["runs"]["trained"],
            "meets_target": total <= BOOK_TARGET_MINUTES if rows else None}


def cpu_breakdown(manifest: dict) -> list[dict]:
    """Where a build's CPU-seconds went, ``[{part, cpu_seconds}]``: training paper A's and paper B's models (each
    model once, its trainer's ``cpu_seconds``; an older manifest without them: no training rows), the kernels' start
    and imports (each chapter's kernel until ``book.open`` returned; older manifests: inside the next part), the
    chapters' other work (their CPU-seconds minus the above) and, for a finished build, the HTML (jupyter-book's
    own time, where recorded) and the runner."""
    entries = [manifest.get("train_ahead") or {}, *manifest.get("chapters", {}).values()]
    runs = {_trained_model(run): run for entry in entries for run in entry.get("run_list", [])
            if run["status"] in ("trained", "resumed")}
    chapters = sum(e.get("cpu_seconds") or 0.0 for e in manifest.get("chapters", {}).values())
    rows = []
    if runs and all(r.get("cpu_seconds") is not None for r in runs.values()):
        for paper, marker in (("A", ".fusion."), ("B", ".idea.")):
            seconds = sum(r["cpu_seconds"] for r in runs.values() if marker in r["experiment"])
            rows.append({"part": f"training, paper {paper}", "cpu_seconds": round(seconds, 1)})
        startup = [e["startup_cpu_seconds"] for e in manifest.get("chapters", {}).values()
                   if e.get("startup_cpu_seconds") is not None]
        if startup:
            rows.append({"part": "kernels: start and imports", "cpu_seconds": round(sum(startup), 1)})
        counted = sum(row["cpu_seconds"] for row in rows)
        rows.append({"part": "chapters: evaluation, generation, notebooks",
                     "cpu_seconds": round(max(chapters - counted, 0.0), 1)})
    else:
        rows.append({"part": "chapters (training included)", "cpu_seconds": round(chapters, 1)})
    if manifest.get("complete") and manifest.get("cpu_seconds"):
        rest = max(manifest["cpu_seconds"] - chapters, 0.0)
        html = manifest.get("html_cpu_seconds")
        if html is not None:
            rows.append({"part": "HTML (jupyter-book)", "cpu_seconds": round(min(html, rest), 1)})
            rows.append({"part": "the runner", "cpu_seconds": round(max(rest - html, 0.0), 1)})
        else:
            rows.append({"part": "HTML and the runner", "cpu_seconds": round(rest, 1)})
    return rows


def cpu_breakdown_frame(build_dir: str | Path | None = None, root: str | Path | None = None):
    """:func:`cpu_breakdown` of this build's manifest (the chapters so far) and of every recorded whole-book build
    (``book/recorded/cpu-book-*``, labelled with its folder): columns build, part, cpu_seconds."""
    rows = [{"build": "this build (chapters so far)", **row} for row in cpu_breakdown(_build_manifest(build_dir))]
    for run in sorted(load_recorded(root), key=lambda r: r.date or ""):
        if run.book_manifest and not run.dry_run:
            rows += [{"build": f"recorded: {run.slug}", **row} for row in cpu_breakdown(run.book_manifest)]
    return pd.DataFrame(rows, columns=["build", "part", "cpu_seconds"])


# --- the authors' script against ours (semlm.book.bench_cli), the bench JSON it is kept in ------

AUTHORS_REPOSITORY = "github.com/YongchaoHuang/semantic_fusion"
#: Our side's targets against the authors' script (ours / theirs), by the training processes our side used: with
#: one, the parallelism of their script (one model at a time); with two (the default on two cores), the book's.
AUTHORS_TARGETS = {1: {"peak_mb": ("Peak memory", 1.0), "wall_seconds": ("Wall time", 0.5)},
                   2: {"peak_mb": ("Peak memory", 1.3), "wall_seconds": ("Wall time", 0.33)}}


def comparison_workers(comparison: dict) -> int:
    """Our side's training processes in an ``authors_comparison`` record (2 where an early record did not say:
    the default it ran with)."""
    return int(comparison.get("ours", {}).get("workload", {}).get("workers") or 2)


#: Seconds between two samples of the process tree's resident memory.
MEMORY_SAMPLE_SECONDS = 0.05


def measure_process(command: Sequence[str], env: dict, cwd: str | Path) -> dict:
    """Run ``command`` to its end: wall seconds, CPU seconds and peak MB of its process tree, exit code.

    CPU: user + sys of the process and every descendant it waited for (the ``RUSAGE_CHILDREN``
    difference across the run; runs are measured one at a time). Memory: the tree's summed proportional
    set size (PSS: a page shared by n processes, such as the PyTorch library or what forked workers
    inherit, counts 1/n in each, so the sum is the memory the tree occupies), sampled every
    :data:`MEMORY_SAMPLE_SECONDS`; the summed RSS, which counts shared pages once per process, beside it.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(list(command), env=env, cwd=cwd, stdout=out, stderr=err)
        root, peak, peak_rss = psutil.Process(process.pid), 0, 0
        while process.poll() is None:  # the tree's summed memory, until it exits
            try:
                members = [root, *root.children(recursive=True)]
            except psutil.Error:
                members = []
            total = total_rss = 0
            for member in members:
                with contextlib.suppress(psutil.Error):  # ended between listing and reading
                    memory = member.memory_full_info()
                    total, total_rss = total + memory.pss, total_rss + memory.rss
            peak, peak_rss = max(peak, total), max(peak_rss, total_rss)
            time.sleep(MEMORY_SAMPLE_SECONDS)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.seek(0), err.seek(0)
        stdout, stderr = (f.read().decode(errors="replace").strip().splitlines() for f in (out, err))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_seconds": round(wall, 3), "cpu_seconds": round(cpu, 3), "peak_mb": round(peak / 2 ** 20, 1),
            "peak_rss_sum_mb": round(peak_rss / 2 ** 20, 1),
            "returncode": process.returncode, "stdout_tail": stdout[-10:], "stderr_tail": stderr[-10:]}


def previous_authors_comparison(path: str | Path | None = None) -> dict | None:
    """The ``authors_comparison`` record in ``path`` (default: the bench JSON of this metrics folder), or None."""
    try:
        return json.loads(Path(path or metrics_dir() / "bench.json").read_text()).get("authors_comparison")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None


# --- the benchmarks chapter's tables (notebooks/98_benchmarks.py) ----------------------------


def summary_frame(record: dict):
    """This build's wall time, memory and generation time next to their targets (no other machine's)."""
    generation = record["generation"]
    return pd.DataFrame(
        {"this build": [record["wall_seconds"], sum(record["peak_rss_mb"].values()), generation["seconds"]],
         "target": [TARGET_SECONDS, None, generation["target_seconds"]]},
        index=["wall seconds (train + evaluate both models)", "peak memory, MiB (summed over processes)",
               "seconds to generate 200 hard-controlled sentences (one batch)"])


def per_model_frame(record: dict):
    """Train seconds and peak MiB of each model's worker."""
    return pd.DataFrame({"train seconds": record["train_seconds"],
                         "peak MiB": {k: v for k, v in record["peak_rss_mb"].items() if k != "runner"}})


def flops_frame(record: dict):
    """Per model: training FLOPs per position, GFLOP/s reached and its share of the measured / nominal peak."""
    return pd.DataFrame({kind: {"training GFLOP per position": m["training_flops_per_position"] / 1e9,
                                "train seconds": m["train_seconds"], "GFLOP/s reached": m["flops_per_second"] / 1e9,
                                "share of measured peak": m["share_of_measured_peak"],
                                "share of nominal peak": m["share_of_nominal_peak"]}
                         for kind, m in record["flops"]["models"].items()}).T


def training_variants_frame(record: dict):
    """``(frame, caption)`` of the fp32 / bucketing / bf16 comparison; ``(None, message)`` if it did not run."""
    variants = record.get("training_variants")
    if variants is None:
        return None, "the training variants were not compared (--variants-profile none)"
    rows = {}
    for name, row in variants["variants"].items():
        rows[name] = cells = {f"{kind} val PPL (95% interval)": f"{Interval.from_dict(row[kind]['ppl']):.3f}"
                              for kind in variants["kinds"]}
        for kind in variants["kinds"]:
            change = Interval.from_dict(row[kind]["ppl_paired_change"])
            cells[f"{kind} PPL change, paired by seed"] = (f"{change.mean:+.1%} "
                                                           f"[{change.low:+.1%}, {change.high:+.1%}]")
        cells["train CPU time / reference"] = round(row["cpu_time_ratio"], 2)
        cells["within seed intervals"] = row["within_seed_intervals"]
    caption = f"profile {variants['profile']}, seeds {variants['seeds']}; {record['bf16_decision']}"
    return pd.DataFrame(rows).T, caption


def recorded_precision_frame(record: dict, root=None):
    """``(frame, message)`` of the recorded ``cpu``-scale float32 / bf16 comparison (as ``training_variants_frame``),
    the message naming its provenance and bf16 step-time ratios; ``(None, how to record one)`` without it."""
    recorded = recorded_precision_comparison(root)
    if recorded is None:
        return None, ("no recorded cpu-scale precision comparison "
                      "(python -m semlm.bench --only precision --variants-profile cpu)")
    frame, _ = training_variants_frame({"training_variants": recorded, "bf16_decision": record.get("bf16_decision")})
    emulated = "; ".join(f"{'this CPU as it is' if isa == 'ALL' else 'oneDNN capped at ' + isa} "
                         f"{timing['ratio']:.2f} x" for isa, timing in recorded.get("emulated_bf16", {}).items())
    return frame, (f"recorded CPU run, {recorded['folder']}: {recorded['machine']}, {recorded['date']}, "
                   f"commit {recorded['commit']}; not run by this build"
                   + (f"\nbf16 step time / float32 step time of the fusion model: {emulated}" if emulated else ""))


def recorded_idea_precision_frame(root=None):
    """``(frame, message)`` of paper B's recorded float32 / bf16 comparison (``book/recorded/cpu-bf16-idea``): per
    model, float32's mean and 95% seed interval, bf16's mean, the paired-by-seed change and the training CPU-time
    ratio; the message names its provenance, the X-ray overlaps and the verdict. ``(None, how to record one)``."""
    run = next((run for run in reversed(load_recorded(root)) if run.idea_precision is not None), None)
    if run is None:
        return None, "no recorded paper-B precision comparison (python -m semlm.bench --only precision-idea)"
    record, rows = run.idea_precision, {}
    six = record["chapter6"]["variants"]
    for kind in record["chapter6"]["kinds"]:
        f32, bf16 = six["float32"][kind], six["bf16"][kind]
        rows[f"chapter 6 {kind}: validation PPL"] = (f32["ppl"], bf16["ppl"]["mean"], bf16["ppl_paired_change"],
                                                     bf16["cpu_time_ratio"], "relative")
    drift = record["topic_drift"]
    for kind, values in drift["excess_drift"].items():
        rows[f"chapter 9 {kind}: excess drift"] = (values["float32"], values["bf16"]["mean"],
                                                   values["paired_difference"], drift["cpu_time_ratio"], "difference")
    frame = pd.DataFrame({name: {
        "float32 (95% seed interval)": f"{f['mean']:.3g} [{f['ci_low']:.3g}, {f['ci_high']:.3g}]",
        "bf16 mean": f"{b:.3g}",
        "bf16 - float32, paired by seed": (
            f"{c['mean']:+.1%} [{c['ci_low']:+.1%}, {c['ci_high']:+.1%}]" if kind == "relative"
            else f"{c['mean']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]"),
        "training CPU time bf16 / float32": round(ratio, 2)} for name, (f, b, c, ratio, kind) in rows.items()}).T
    xray, verdict = record["xray"], record["verdict"]
    overlap = "; ".join(f"{label}: {xray[key]['boosted']['mean']:.0%} of the top boosted, "
                        f"{xray[key]['suppressed']['mean']:.0%} of the top suppressed tokens shared"
                        for label, key in (("float32 vs bf16, same seed", "same_seed_float32_vs_bf16"),
                                           ("float32, neighbouring seeds", "float32_across_seeds")))
    return frame, (f"recorded CPU run, book/recorded/{run.slug}: {run.machine}, {run.date[:10]}, commit "
                   f"{run.commit[:7]}; not run by this build\nX-ray: {overlap}\nrule: {record['rule']}\nverdict: "
                   f"as good {verdict['as_good']}, faster {verdict['faster']} ({verdict['cpu_time_ratio']:.2f} x), "
                   f"adopt bf16 {verdict['adopt_bf16']}")


def idea_ratio_frame(idea: dict):
    """Training step and cached generation: FLOP ratio, time ratio, their quotient, target and verdict."""
    rows = {"training step": ("step", IDEA_STEP_TARGET),
            "generation, per new token (KV cache)": ("generation", IDEA_GENERATION_TARGET)}
    return pd.DataFrame({name: {"FLOP ratio gated / plain (counted)": round(idea[f"{key}_flop_ratio"], 3),
                                "time ratio gated / plain (measured)": round(idea[f"{key}_time_ratio"], 3),
                                "time ratio / FLOP ratio": round(idea[f"{key}_time_over_flops"], 3),
                                "target (time / FLOP ratio at most)": target,
                                "verdict": "meets" if idea["meets_targets"][key] else "misses"}
                         for name, (key, target) in rows.items()}).T


def idea_flop_parts_frame(idea: dict):
    """Forward FLOPs per position of the gated model by part, with each part's share."""
    parts = pd.Series(idea["flops"]["training"]["parts_gated"], name="FLOPs per position (forward)")
    return parts.to_frame().assign(share=lambda f: f.iloc[:, 0] / parts["total"])


@dataclass(frozen=True)
class BenchNumbers:
    """The numbers the benchmarks chapter's prose quotes (``{glue:text}``): this benchmark's and the book build's."""

    bench_wall: float
    bench_profile: str
    bench_source: str
    bench_generation: float
    bench_verdict: str
    bench_peak_measured: float
    bench_peak_formula: str
    bench_autocast: str
    bench_peak_nominal: float
    bench_padding: float
    bench_fusion_share: float
    idea_step_flop_ratio: float
    idea_step_over: float
    idea_gen_over: float
    idea_step_verdict: str
    idea_gen_verdict: str
    idea_bench_device: str
    book_minutes: float
    book_target: float
    book_ahead: int
    book_busy: str
    book_scratch: str


def chapter_numbers(record: dict, profile: str) -> BenchNumbers:
    """:class:`BenchNumbers` of ``record`` (:func:`run_benchmark`) and of the book build so far
    (:func:`book_build_times`)."""
    flops, idea, times = record["flops"], record["idea"], book_build_times()
    return BenchNumbers(
        bench_wall=record["wall_seconds"], bench_profile=profile,
        bench_source=record.get("training_source", "trained here"),
        bench_generation=record["generation"]["generations_per_second"],
        bench_verdict={True: "meets", False: "misses", None: "is not comparable with"}[record["meets_target"]],
        bench_peak_measured=flops["peak_measured_per_thread"] / 1e9, bench_peak_formula=flops["nominal_formula"],
        bench_autocast=("bf16 autocast" if flops.get("autocast") == "bf16" else "float32"),
        bench_peak_nominal=(flops["peak_nominal_per_core"] or float("nan")) / 1e9,
        bench_padding=100 * (1 - flops["real_positions"] / flops["computed_positions"]),
        bench_fusion_share=100 * flops["models"]["fusion"]["share_of_measured_peak"],
        idea_step_flop_ratio=idea["step_flop_ratio"], idea_step_over=idea["step_time_over_flops"],
        idea_gen_over=idea["generation_time_over_flops"],
        idea_step_verdict="meets" if idea["meets_targets"]["step"] else "misses",
        idea_gen_verdict="meets" if idea["meets_targets"]["generation"] else "misses",
        idea_bench_device=f"{idea['device']} ({idea['threads']} thread(s))",
        book_minutes=times["total_minutes"], book_target=times["target_minutes"], book_ahead=times["trained_ahead"],
        book_busy="n/a" if times["utilisation"] is None else f"{times['utilisation']:.0%}",
        book_scratch="from scratch" if times["from_scratch"] else "partly from the run cache")


@dataclass(frozen=True)
class SparseNumbers:
    """What the prose quotes of this build's sparse decoding (NaN, and the model saying why, where it was skipped)."""

    sparse_clamp: float
    sparse_kept: float
    sparse_outside: float
    sparse_kl: float
    sparse_speedup: float
    sparse_budget: int | float  # NaN where skipped
    sparse_model: str


def sparse_numbers(record: dict | None) -> SparseNumbers | None:
    """:class:`SparseNumbers` of ``bench.json``'s ``idea.sparse_decoding`` (None where it has none)."""
    if record is None:
        return None
    if "skipped" in record:  # the prose still renders: its numbers read nan, and the cell below says why
        return SparseNumbers(*[float("nan")] * 6, sparse_model="no model (" + record["skipped"] + ")")
    return SparseNumbers(sparse_clamp=record["clamp_share"]["mean"], sparse_kept=record["kept_share"],
                         sparse_outside=record["mass_outside"], sparse_kl=record["mean_step_kl"],
                         sparse_speedup=record["speedup_per_token"], sparse_budget=record["budget"],
                         sparse_model=f"{record['model']} gated model, {record['profile']} profile")


def recorded_sparse_decoding(root: str | Path | None = None) -> tuple[pd.DataFrame, dict] | None:
    """``(table, provenance)`` of ``book/recorded/sparse-decoding/``: the sparse head on competent models at
    three budgets and timed at the paper's size (random weights); None when the folder is absent."""
    path = Path(root or RECORDED_DIR) / "sparse-decoding" / "sparse_decoding.json"
    if not path.is_file():
        return None
    recorded = json.loads(path.read_text())
    rows = {f"{name}, budget {budget}": r for name, by_budget in recorded["models"].items()
            for budget, r in sorted(by_budget.items(), key=lambda item: int(item[0]))}
    return sparse.table(rows), recorded["provenance"] | {"paper_size": recorded["paper_size_random_weights"]}


def authors_comparison_frames(record: dict, path: str | Path | None = None,
                              root: str | Path | None = None) -> list[tuple["pd.DataFrame", str]]:
    """``[(frame, note), ...]``: the comparison read from ``path`` if given, else this build's (``record``), else
    every recorded one in ``root`` (default ``book/recorded``): two workers (the default), then one worker."""
    if path or record.get("authors_comparison"):
        return [authors_comparison_frame(record, path, root)]
    shown = [authors_comparison_frame(record, None, root, folder) for folder in AUTHORS_COMPARISON_FOLDERS]
    return [(frame, note) for frame, note in shown if not frame.empty] or [shown[0]]


def authors_comparison_frame(record: dict, path: str | Path | None = None, root: str | Path | None = None,
                             folder: str = AUTHORS_COMPARISON_RECORD):
    """``(frame, note)``: the authors' script against ours, both measured on one machine, read from ``path`` if
    given, else from ``record`` (this build's bench), else from the recorded comparison ``folder`` in ``root``
    (default: ``book/recorded``); none anywhere: an empty frame and a note saying how to make one. The note says
    whether the ratios meet :data:`AUTHORS_TARGETS` for the number of workers our side used."""
    comparison = previous_authors_comparison(path) if path else record.get("authors_comparison")
    source = f"`{path}`" if path else "the benchmark record"
    if not comparison and not path:
        source = f"book/recorded/{folder}/"
        comparison = previous_authors_comparison(Path(root or RECORDED_DIR) / folder / AUTHORS_COMPARISON)
    if not comparison:
        return pd.DataFrame(), (
            "No comparison with the authors' script is recorded. It runs only on request, on your machine: "
            f"download SemanticFusion.py (or .ipynb) from {AUTHORS_REPOSITORY}, then `python -m semlm.bench "
            "--authors-script PATH --profile cpu` (or `make bench AUTHORS=PATH`) writes it into the bench JSON, "
            "and the next build of this page shows it.")
    labels = {"wall_seconds": "wall seconds", "cpu_seconds": "CPU seconds (user + sys, process tree)",
              "peak_mb": "peak memory, MB (process tree, summed PSS)"}
    columns = {f"ours ({comparison['profile']})": comparison["ours"]}
    if "ratios" in comparison:
        columns["authors' script"] = comparison["authors_script"]
        columns["ours / theirs (median of pairs)"] = {key: comparison["ratios"][key]["median"] for key in labels}
    frame = pd.DataFrame({name: {label: side[key] for key, label in labels.items()} for name, side in columns.items()})
    workload, workers = comparison["ours"]["workload"], comparison_workers(comparison)
    note = (f"From {source} (ours with {workers} training process{'es' if workers > 1 else ''}): medians of "
            f"{comparison['runs']} runs of each side, in turn, measured by "
            f"`python -m semlm.bench --authors-script` on {comparison['cpu_model']} ({comparison['cpu_count']} cores) "
            f"on {comparison['date']} (commit {comparison['git_commit'][:10]}). Ours trains "
            f"{workload['training_sentences']} sentences x {workload['epochs']} epochs, "
            f"{sum(workload['parameters'].values()):,} parameters in both models; theirs: "
            f"{comparison['authors_script'].get('training_sentences_x_epochs', 'unknown')}.")
    if "error" in comparison:
        note += f" Their side did not run: {comparison['error']}"
    else:  # the targets for one worker, or two's for two or more
        note += "\n" + " ".join(
            f"{label}: ours / theirs {comparison['ratios'][key]['median']:.2f}, target <= {target:.2f}, "
            f"{'met' if comparison['ratios'][key]['median'] <= target else 'NOT met'}."
            for key, (label, target) in AUTHORS_TARGETS[1 if workers == 1 else 2].items())
    return frame.round(2), note


# --- seeds stacked in one process (issue 47, item 1): measured before adopting ----------------------
#
# Several seeds of a small model could train as one vectorised ensemble (PyTorch's "model ensembling" recipe:
# torch.func.stack_module_state + functional_call under vmap). Before any trainer uses it, this measures what it
# would save: for each small model kind of the book, the CPU time of a training step's forward and backward (the
# experiment's own batch and loss, one thread), for ``seeds`` models one after another and for the same models
# stacked. Adopted only where it saves at least a third (STACKING_ADOPT_RATIO).

#: Stacking is adopted for a model kind only if a stacked model's step costs at most this share of its step alone.
STACKING_ADOPT_RATIO = 2 / 3
#: The small model kinds: ``(label, experiment reference, chapter whose declared runs give the spec)``.
STACKING_KINDS = (("paper A synthetic", "semlm.fusion.synthetic_experiment:SYNTHETIC", "04_leakage_audit"),
                  ("chapter 10 intent", "semlm.fusion.intent_experiment:EXPERIMENT", "10_intent_control"),
                  ("chapter 9 topic", "semlm.idea.topic_experiment:TOPIC_DRIFT", "09_topic_drift"))


class _Functional(torch.nn.Module):
    """``base`` (on the meta device) called with given parameters and buffers: what a loss function sees as the
    model under vmap. Attributes other than calls (``config``, ``uses_features``) are the base module's."""

    def __init__(self, base, params, buffers):
        super().__init__()
        object.__setattr__(self, "_state", (base, params, buffers))

    def __call__(self, *args, **kwargs):
        from torch.func import functional_call

        base, params, buffers = self._state
        return functional_call(base, (params, buffers), args, kwargs)

    def __getattr__(self, name):
        return getattr(self._state[0], name)


def _stacking_one(experiment, spec, seeds: int, steps: int) -> dict:
    """The CPU milliseconds of one model's training step (forward + backward, no optimiser), alone and stacked."""
    import copy

    from torch.func import grad, stack_module_state, vmap

    from semlm.core.train import step_batches, set_seed

    data = experiment.data(spec)
    fit = experiment.fit(spec, data)
    batch = next(step_batches(fit.train_data, fit.config, spec.seed, 0, 1))[1]
    models = []
    for offset in range(seeds):
        set_seed(spec.seed + offset)
        models.append(experiment.build(spec, data).train())

    def step_alone() -> None:
        for model in models:
            model.zero_grad(set_to_none=True)
            fit.loss_fn(model, batch, 0)[0].backward()

    def cpu_seconds_per_model_step(step) -> float:
        step()  # warm-up
        start = time.process_time()
        for _ in range(steps):
            step()
        return (time.process_time() - start) / steps / seeds

    alone = cpu_seconds_per_model_step(step_alone)
    out = {"seeds": seeds, "steps": steps, "alone_ms_per_model_step": round(alone * 1000, 2)}
    try:
        params, buffers = stack_module_state(models)
        base = copy.deepcopy(models[0]).to("meta")
        loss = grad(lambda p, b: fit.loss_fn(_Functional(base, p, b), batch, 0)[0])
        stacked_step = vmap(loss, in_dims=(0, 0), randomness="different")
        stacked = cpu_seconds_per_model_step(partial(stacked_step, params, buffers))
    except Exception as error:  # noqa: BLE001  a loss or model vmap cannot run: measured as not stackable
        return {**out, "stacked_ms_per_model_step": None, "ratio": None, "adopted": False,
                "why": f"not stackable with torch.func: {type(error).__name__}: {str(error).splitlines()[0][:160]}"}
    ratio = stacked / alone
    return {**out, "stacked_ms_per_model_step": round(stacked * 1000, 2), "ratio": round(ratio, 3),
            "adopted": ratio <= STACKING_ADOPT_RATIO,
            "why": f"stacked / alone {ratio:.2f} {'<=' if ratio <= STACKING_ADOPT_RATIO else '>'} "
                   f"{STACKING_ADOPT_RATIO:.2f}"}


def seed_stacking(profile: str = "cpu", seeds: int = 4, steps: int = 3) -> dict:
    """``{kind: measurement}`` (:func:`_stacking_one`) for each of :data:`STACKING_KINDS`, at ``profile``, with one
    thread; a kind whose chapter's data are missing is skipped, saying so."""
    import warnings

    from semlm.book.plan import book_runs
    from semlm.core.runs import experiment_of
    from semlm.data.fetch import missing_for_chapters

    if seeds < 2 or steps < 1:
        raise ValueError(f"seed stacking needs seeds >= 2 and steps >= 1, got {seeds} and {steps}")
    out = {"profile": profile, "threads": 1, "adopt_ratio": round(STACKING_ADOPT_RATIO, 3), "kinds": {}}
    with torch_threads(1), warnings.catch_warnings():
        # vmap has no batching rule for the CPU's fused attention and says so per call; the measurement shows it
        warnings.filterwarnings("ignore", message="There is a performance drop because we have not yet")
        planned = book_runs(profile)
        for label, reference, chapter in STACKING_KINDS:
            missing = missing_for_chapters([chapter]).get(chapter)
            if missing:
                out["kinds"][label] = {"skipped": f"missing data: {', '.join(missing)}"}
                continue
            experiment = experiment_of(reference)
            spec = next(s for e in planned if e.chapter == chapter and e.experiment is experiment for s in e.specs)
            out["kinds"][label] = _stacking_one(experiment, spec, seeds, steps)
    return out


def seed_stacking_frame(record: dict) -> tuple[pd.DataFrame, str]:
    """The benchmark record's ``seed_stacking`` as a table (one row per model kind) and a note with the rule."""
    result = record.get("seed_stacking")
    if not result:
        return pd.DataFrame(), "This build's benchmark did not measure seed stacking."
    columns = {"alone_ms_per_model_step": "alone, ms per model step", "stacked_ms_per_model_step":
               "stacked, ms per model step", "ratio": "stacked / alone", "adopted": "adopted"}
    frame = pd.DataFrame({kind: {label: m.get(key) for key, label in columns.items()}
                          for kind, m in result["kinds"].items() if "skipped" not in m}).T
    skipped = [f"{kind} ({m['skipped']})" for kind, m in result["kinds"].items() if "skipped" in m]
    seeds = next(iter(result["kinds"].values())).get("seeds", "?")
    adopted = [kind for kind, m in result["kinds"].items() if m.get("adopted")]
    note = (f"Profile {result['profile']}, one thread, {seeds} seeds: a training step's forward and backward with the "
            f"experiment's own batch and loss. Stacking is adopted for a kind only if a stacked model's step costs at "
            f"most {result['adopt_ratio']:.2f} of its step alone; adopted for: {', '.join(adopted) or 'none'}."
            + (f" Skipped: {'; '.join(skipped)}." if skipped else ""))
    return frame, note
