"""Benchmarks: ``python -m semlm.bench`` (``make bench``) and the book's benchmarks chapter (chapter 98).

* Paper A (``run_benchmark``): both causal synthetic models trained (through the build's run cache, or from
  an empty run folder with ``--fresh``) and evaluated, wall time and peak memory (target: 60 s on a 2-core
  CPU), batched hard-controlled generation of 200 sentences (target: 1 s), the FLOP/s training reached, and
  the fp32 / length-bucketing / bf16 comparison, whose runs go through :mod:`semlm.core.runs` like every run;
  written to ``<metrics dir>/bench.json``. The chapter calls the same function, so it shows that build's numbers.
* Paper B (``run_idea_benchmark``, ``--only idea``): the idea-gated GPT against the plain GPT, the FLOP ratio
  counted from the config next to the measured time ratio, for a training step and a cached generation step
  (targets: time ratio at most 1.05 x and 1.1 x the FLOP ratio); printed with a verdict, never a timed test.
* The authors' script against ours (``--authors-script PATH``, ``make bench AUTHORS=PATH``): their
  ``SemanticFusion.py`` (or their notebook's code cells; downloaded by the user, never shipped) and our
  synthetic experiment as whole processes in turn, on this machine; only on request, never in the book build.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd
import torch

from semlm.book.flops import (idea_flop_ratios, model_flops_utilisation, nominal_cpu_peak_flops,
                              synthetic_forward_flops_per_position)
from semlm.core import runs as runner
from semlm.fusion.decoding import PAPER_MIXTURE, ClauseGrammar, Controls, DecodingConfig, generate
from semlm.fusion.synthetic_experiment import (SYNTHETIC, SyntheticExperiment, SyntheticRun, peak_rss_mb, prepare_data,
                                               synthetic_runs)
from semlm.fusion.profiles import synthetic_profile
from semlm.profiles import CPU_BF16_VARIABLE, PROFILES, cpu_computes_bf16
from semlm.book.records import BenchmarkRecord
from semlm.book.report import write_chapter_metrics

TARGET_SECONDS = 60.0


GENERATION_TARGET_SECONDS = 1.0


def time_controlled_generation(model, config, n: int = 200, repeats: int = 5) -> dict:
    """Best-of-``repeats`` time to decode ``n`` hard-controlled positive sentences in one batch."""
    data = prepare_data(config.corpus)
    grammar = ClauseGrammar(data.vocab)
    controls = Controls({"pos_high": 0.95, "str_high": 0.9})
    decoding = DecodingConfig(hard=True, mixture=PAPER_MIXTURE["positive"])
    threads = torch.get_num_threads()
    times = []
    for seed in range(repeats + 1):  # the first call warms up
        t0 = time.perf_counter()
        generate(model, data.featurizer, grammar, n, controls, config=decoding, seed=seed)
        times.append(time.perf_counter() - t0)
    best = min(times[1:])
    return {"sentences": n, "seconds": round(best, 4), "generations_per_second": round(n / best, 1),
            "threads": threads, "target_seconds": GENERATION_TARGET_SECONDS,
            "meets_target": best <= GENERATION_TARGET_SECONDS}


def _train_synthetic(config, runs_dir, workers: int | None, progress: bool) -> dict:
    """Both causal models of the synthetic experiment through the run cache (``runs_dir``; None: the build's)."""
    context = runner.RunContext(config.name, runs_dir, workers, progress)
    return runner.nested(runner.run_many(SYNTHETIC, synthetic_runs(config, settings=("causal",)), context), "name")


def run_benchmark(profile: str = "cpu", seed: int = 111, workers: int | None = None, progress: bool = True,
                  variants_profile: str | None = "smoke", variant_seeds: int = 3, fresh: bool = False) -> dict:
    """Time the whole synthetic experiment (both causal models trained and evaluated); returns (and
    writes) the bench record.

    By default the models come from the run cache of the build (chapter 2 trains the same runs), so
    the book does not train them twice: the wall time is then their training time as the build
    measured it (the longer of the two, as they train side by side) plus the loading and evaluation
    measured here, and ``training_source`` says so. ``fresh`` (``python -m semlm.bench --fresh``)
    trains both from an empty run folder instead and times the whole. The record also holds the
    FLOP/s the training reached (``synthetic_flops_record``) and, unless ``variants_profile`` is
    None, the fp32 / length-bucketing / bf16 comparison over ``variant_seeds`` seeds at that profile
    (``compare_training_variants``, through the same run cache, or the empty folder with ``fresh``;
    ``smoke`` by default because at ``cpu`` scale it trains 6 x ``variant_seeds`` models, several minutes).
    """
    config = synthetic_profile(profile, seed)
    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        runs_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="semlm-bench-")) if fresh else None
        runs = _train_synthetic(config, runs_dir, workers, progress)
        wall = time.perf_counter() - start
        generation = time_controlled_generation(runs["fusion"].load(), config)
        variants = None if variants_profile is None else compare_training_variants(
            variants_profile, tuple(range(seed, seed + variant_seeds)), workers=workers, runs_dir=runs_dir)
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
    # the precision paper A's config trains in on this machine, and why (semlm.profiles.paper_a_cpu_precision)
    record["precision"] = {"profile": config.name, "autocast": config.train.autocast or "float32",
                           "cpu_computes_bf16": cpu_computes_bf16(),
                           CPU_BF16_VARIABLE: os.environ.get(CPU_BF16_VARIABLE) or "auto"}
    record["bf16_decision"] = bf16_decision(record.get("training_variants"), record["precision"],
                                            recorded_precision_comparison())
    record["idea"] = run_idea_benchmark(profile, seed, threads=1)
    previous = previous_authors_comparison()  # measured on request (--authors-script); kept, never re-run here
    if previous is not None:
        record["authors_comparison"] = previous
    write_chapter_metrics("bench", profile, seed, BenchmarkRecord(extra=record), wall)
    return record


# --- paper A: FLOPs reached, and what bf16 / length bucketing change --------------------------
#
# The synthetic models are small (d = 128), so how close does a training step come to what the
# CPU can do? We count the model's floating-point operations per position from its config
# (a multiply-add counts 2; a training step is three forward passes' worth) and divide by the
# measured training time; the peak is measured, not looked up: the FLOP/s of one large float32
# matrix product per thread (``measured_matmul_flops``), the practical ceiling of the same
# BLAS the model uses. ``nominal_cpu_peak_flops`` states the datasheet-style formula next to it.


def measured_matmul_flops(n: int = 512, repeats: int = 20) -> float:
    """Best float32 FLOP/s of an ``n x n`` matrix product on one thread: the practical peak per core.

    512 x 512 operands fit in a server core's L2 cache, so this is the arithmetic ceiling, not
    a memory-bound figure; best of ``repeats`` because neighbours on a shared machine only slow it.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
        a @ b  # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - t0)
        return 2 * n ** 3 / min(times)
    finally:
        torch.set_num_threads(previous)


def synthetic_flops_record(config, runs: dict, threads_per_run: int = 1) -> dict:
    """FLOP/s each model's training reached, against the measured and the nominal per-core peak."""
    from semlm.fusion.synthetic_experiment import model_config as synthetic_model_config

    data = prepare_data(config.corpus)
    # positions computed in one shuffled epoch: batches are trimmed to their longest row
    batches = data.train.batches(config.train.batch_size, torch.Generator().manual_seed(0), shuffle=True)
    positions = sum(b.input_ids.numel() for b in batches) * config.train.epochs
    real = int(data.train.mask.sum()) * config.train.epochs
    context = (data.train.lengths.float() + 1).mean().item() / 2  # mean keys attended (causal)
    peak, nominal = measured_matmul_flops(), nominal_cpu_peak_flops()
    out = {"computed_positions": positions, "real_positions": real, "peak_measured_per_thread": peak,
           "peak_nominal_per_core": nominal["per_core"], "nominal_formula": nominal["formula"],
           "threads_per_run": threads_per_run, "autocast": config.train.autocast or "float32", "models": {}}
    for kind, run in runs.items():
        mc = synthetic_model_config(config, kind, len(data.vocab), "causal")
        per_position = 3 * synthetic_forward_flops_per_position(mc.backbone, len(data.vocab), kind,
                                                                mc.n_features, context)["total"]
        seconds = run.train_seconds  # includes the per-epoch validation passes (small)
        achieved = per_position * positions / seconds if seconds else None
        out["models"][kind] = {
            "training_flops_per_position": per_position, "train_seconds": seconds, "flops_per_second": achieved,
            "share_of_measured_peak": achieved / (peak * threads_per_run) if achieved else None,
            "share_of_nominal_peak": (achieved / (nominal["per_core"] * threads_per_run)
                                      if achieved and nominal["per_core"] else None)}
    return out


#: The training variants ``compare_training_variants`` puts side by side:
#: label -> (length bucketing pool in batches, 0 = off; autocast precision).
TRAINING_VARIANTS: dict[str, tuple[int, str | None]] = {
    "fp32, shuffled batches (reference)": (0, None),
    "fp32, length-bucketed": (50, None),
    "bf16 autocast, shuffled batches": (0, "bf16"),
}


@dataclass(frozen=True)
class VariantRun(SyntheticRun):
    """A causal synthetic run trained with length bucketing (pool in batches, 0 = off) and an autocast precision."""

    bucket_batches: int = 0
    autocast: str | None = None


class TrainingVariantExperiment(SyntheticExperiment):
    """Paper A's models trained as a :class:`VariantRun` says, through :mod:`semlm.core.runs` like every run: one
    thread each, cached, their training seconds and CPU seconds kept in the run's history."""

    name = "synthetic-variants"

    def fit(self, spec: runner.RunSpec, data) -> runner.Fit:
        fit, run = super().fit(spec, data), spec.config
        return dataclasses.replace(fit, config=dataclasses.replace(fit.config, autocast=run.autocast),
                                   train_data=dataclasses.replace(fit.train_data, bucket_batches=run.bucket_batches))


TRAINING_VARIANT_RUNS = TrainingVariantExperiment()


def compare_training_variants(profile: str = "smoke", seeds: Sequence[int] = (111, 112, 113),
                              kinds: Sequence[str] = ("baseline", "fusion"), workers: int | None = None,
                              variants: dict[str, tuple[int, str | None]] | None = None,
                              runs_dir: str | Path | None = None) -> dict:
    """Train every variant of ``TRAINING_VARIANTS`` for every seed and model; compare with the reference.

    A variant is **within the seed interval** of a metric when its mean over seeds lies inside the
    reference's two-sided 95% Student-t interval over the same seeds, for every model. Speed is the
    training CPU time (the trainer's, validation excluded, kept in the run's history, so a run loaded from
    the cache (``runs_dir``; None: the build's) reports what it measured when it trained; less sensitive to a
    busy neighbour than wall time), mean over seeds, as a ratio to the reference. bf16 is worth turning
    on only if it is both faster (ratio < 1) and within the intervals; the record says which holds.
    """
    variants = dict(variants or TRAINING_VARIANTS)
    jobs = [(name, kind, seed) for name in variants for kind in kinds for seed in seeds]
    specs = [runner.RunSpec(kind, seed, VariantRun(synthetic_profile(profile, seed), kind, "causal", *variants[name]),
                            group=f"bucket{variants[name][0]}-{variants[name][1] or 'float32'}")
             for name, kind, seed in jobs]
    records = runner.run_many(TRAINING_VARIANT_RUNS, specs, runner.RunContext(profile, runs_dir, workers, False))
    results = {job: {"ppl": r.metrics.ppl, "ppl_seen_only": r.metrics.ppl_seen_only, "train_seconds": r.train_seconds,
                     "train_cpu_seconds": r.cpu_seconds} for job, r in zip(jobs, records)}
    return summarise_training_variants(results, profile, variants)


def summarise_training_variants(results: dict[tuple[str, str, int], dict], profile: str,
                                variants: dict[str, tuple[int, str | None]] | None = None) -> dict:
    """The comparison record from ``{(variant, kind, seed): _train_variant(...)}`` (first variant = reference)."""
    from semlm.core.metrics import mean_interval

    variants = dict(variants or TRAINING_VARIANTS)
    reference = next(iter(variants))
    kinds = list(dict.fromkeys(kind for _, kind, _ in results))
    seeds = sorted({seed for _, _, seed in results})
    missing = [job for job in ((n, k, s) for n in variants for k in kinds for s in seeds) if job not in results]
    if missing:
        raise ValueError(f"training-variant results are missing {len(missing)} runs, e.g. {missing[0]}")
    by = {(name, kind): [results[name, kind, seed] for seed in seeds] for name in variants for kind in kinds}
    table = {}
    for name in variants:
        row = {"bucket_batches": variants[name][0], "autocast": variants[name][1] or "none (float32)"}
        for kind in kinds:
            rows = by[name, kind]
            row[kind] = {metric: mean_interval([r[metric] for r in rows]) for metric in ("ppl", "ppl_seen_only")}
            row[kind]["train_cpu_seconds"] = sum(r["train_cpu_seconds"] for r in rows) / len(rows)
            row[kind]["train_seconds"] = sum(r["train_seconds"] for r in rows) / len(rows)
            # paired by seed: the same seed gives the same initial weights in every variant
            row[kind]["ppl_paired_change"] = mean_interval(
                [r["ppl"] / ref["ppl"] - 1 for r, ref in zip(rows, by[reference, kind])])
        table[name] = row
    for name, row in table.items():
        ref = table[reference]
        row["cpu_time_ratio"] = (sum(row[k]["train_cpu_seconds"] for k in kinds)
                                 / sum(ref[k]["train_cpu_seconds"] for k in kinds))
        row["within_seed_intervals"] = all(
            ref[k][m]["ci_low"] <= row[k][m]["mean"] <= ref[k][m]["ci_high"]
            for k in kinds for m in ("ppl", "ppl_seen_only"))
        row["faster"] = row["cpu_time_ratio"] < 1.0
    return {"profile": profile, "seeds": list(seeds), "kinds": list(kinds), "reference": reference,
            "rule": ("within: the variant's mean validation PPL (all targets and seen-only) lies inside the "
                     "reference's 95% t-interval over the seeds, for every model; faster: mean training CPU "
                     "seconds below the reference's; ppl_paired_change: relative PPL change against the "
                     "reference run of the same seed, mean and 95% interval over seeds"),
            "variants": table}


#: The comparison that decides the ``cpu`` profile's precision: the float32 reference against bf16 only.
PRECISION_VARIANTS: dict[str, tuple[int, str | None]] = {
    name: TRAINING_VARIANTS[name] for name in ("fp32, shuffled batches (reference)", "bf16 autocast, shuffled batches")}
#: Where ``python -m semlm.bench --only precision`` records that comparison (``book/recorded/<name>``).
PRECISION_RECORD = "cpu-bf16-variants"


#: oneDNN instruction-set caps (``ONEDNN_MAX_CPU_ISA``) under which ``emulated_bf16_step_ratios`` times a step:
#: none (what this CPU has), AVX-512 without its BF16 instructions, and AVX2 (most laptops).
EMULATED_ISAS: tuple[str, ...] = ("ALL", "AVX512_CORE", "AVX2")


def bf16_step_ratio(profile: str = "cpu", steps: int = 30, seed: int = 111) -> dict:
    """Milliseconds per training step of paper A's fusion model (one thread, the same batches) in float32
    and under bf16 autocast, and their ratio: the cost of bf16 on this CPU as oneDNN runs it."""
    from semlm.fusion.synthetic_experiment import spec_for
    from semlm.core.precision import autocast

    torch.set_num_threads(1)
    spec = spec_for(synthetic_profile(profile, seed), "fusion")
    data = SYNTHETIC.data(spec)
    fit = SYNTHETIC.fit(spec, data)
    batches = list(fit.train_data.batches(fit.config.batch_size, torch.Generator().manual_seed(seed), shuffle=True))
    times = {}
    for precision in (None, "bf16"):
        torch.manual_seed(seed)
        model = SYNTHETIC.build(spec, data).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=fit.config.lr)
        for i in range(3 + steps):  # three warm-up steps
            if i == 3:
                start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            with autocast(precision, "cpu"):
                loss, _ = fit.loss_fn(model, batches[i % len(batches)], i)
            loss.backward()
            optimizer.step()
        times[precision or "float32"] = 1000 * (time.perf_counter() - start) / steps
    return {"float32_ms": times["float32"], "bf16_ms": times["bf16"], "ratio": times["bf16"] / times["float32"]}


def emulated_bf16_step_ratios(profile: str = "cpu", isas: Sequence[str] = EMULATED_ISAS) -> dict[str, dict]:
    """:func:`bf16_step_ratio` in a fresh process per oneDNN instruction-set cap (``ONEDNN_MAX_CPU_ISA``, read
    when oneDNN starts), so one machine shows what bf16 autocast costs on CPUs without native bf16."""
    import subprocess

    out = {}
    for isa in isas:
        code = ("import json; from semlm.book.bench import bf16_step_ratio; "
                f"print(json.dumps(bf16_step_ratio({profile!r})))")
        done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "ONEDNN_MAX_CPU_ISA": isa},
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"timing bf16 under ONEDNN_MAX_CPU_ISA={isa} failed: "
                               f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
        out[isa] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def record_precision_comparison(profile: str, seed: int = 111, workers: int | None = None, root=None) -> int:
    """``python -m semlm.bench --only precision``: train paper A's baseline and fusion in float32 and in bf16
    over 3 seeds at ``profile`` and record the comparison in ``book/recorded/cpu-bf16-variants/``."""
    from semlm.book.recorded import RECORDED_DIR, write_precision_comparison

    if profile == "none":
        raise ValueError("--only precision needs a profile to compare at; pass --variants-profile cpu")
    comparison = compare_training_variants(profile, tuple(range(seed, seed + 3)), workers=workers,
                                           variants=PRECISION_VARIANTS)
    comparison["emulated_bf16"] = emulated_bf16_step_ratios(profile)
    command = f"python -m semlm.bench --only precision --variants-profile {profile} --seed {seed}"
    dest = write_precision_comparison(comparison, root or RECORDED_DIR, PRECISION_RECORD, command)
    print(_bf16_summary(comparison))
    print(dest)
    return 0


def recorded_precision_comparison(root=None) -> dict | None:
    """The recorded ``cpu``-scale float32 / bf16 comparison (``book/recorded/cpu-bf16-variants``), or None."""
    from semlm.book.recorded_runs import load_recorded

    found = [run for run in load_recorded(root) if run.training_variants is not None]
    if not found:
        return None
    run = found[-1]
    return {**run.training_variants, "folder": f"book/recorded/{run.slug}", "date": run.date[:10],
            "commit": run.commit[:7], "machine": run.machine}


def _bf16_summary(comparison: dict) -> str:
    bf16 = next((row for row in comparison["variants"].values() if row["autocast"] == "bf16"), None)
    if bf16 is None:
        return "bf16 was not compared"
    quality = "within" if bf16["within_seed_intervals"] else "outside"
    return (f"{bf16['cpu_time_ratio']:.2f} x the float32 training CPU time "
            f"({'faster' if bf16['faster'] else 'slower'}), validation PPL {quality} the float32 seed intervals "
            f"({len(comparison['seeds'])} seeds)")


def bf16_decision(comparison: dict | None, precision: dict, recorded: dict | None = None) -> str:
    """One sentence: does paper A's ``cpu`` profile train in bf16 on this machine, why, and the evidence: the
    ``recorded`` comparison at the ``cpu`` scale (``recorded_precision_comparison``) and this build's
    ``comparison`` (``compare_training_variants``, ``smoke`` scale by default)."""
    if precision["autocast"] == "bf16":
        state = "on in the cpu profile (this CPU computes bf16 natively)"
    elif precision.get(CPU_BF16_VARIABLE) == "off":
        state = f"off in the cpu profile ({CPU_BF16_VARIABLE}=off)"
    elif not precision.get("cpu_computes_bf16"):
        state = "off in the cpu profile (this CPU has no native bf16; emulated, it is slower than float32)"
    else:
        state = f"off in the {precision.get('profile')} profile (float32)"
    parts = [f"bf16 autocast for paper A is {state}"]
    if recorded is not None:
        parts.append(f"at the {recorded['profile']} scale it took {_bf16_summary(recorded)} "
                     f"(recorded in {recorded['folder']}, {recorded['date']}, {recorded['commit']})")
    if comparison is not None:
        parts.append(f"this build's check at the {comparison['profile']} scale: {_bf16_summary(comparison)}")
    return "; ".join(parts)


# --- paper B: idea-gated GPT, FLOPs against time ----------------------------------------------
#
# The idea head adds work to every position: a d x d layer and a second d x V projection, the
# same size as the token head. How much slower should the gated model be? We count the
# floating-point operations of both models from their configs and compare the ratio with the
# measured time ratio: a time ratio close to the FLOP ratio means the gate costs what its matrix
# products cost and nothing more (no extra passes, no Python loops, no host syncs).

#: Issue targets: measured time ratio / FLOP ratio (gated over plain) at most these.
IDEA_STEP_TARGET, IDEA_GENERATION_TARGET = 1.05, 1.1


def verdict(time_ratio: float, flop_ratio: float, target: float) -> str:
    over = time_ratio / flop_ratio
    return (f"{'meets' if over <= target else 'MISSES'} (time ratio {time_ratio:.2f} = {over:.2f} x FLOP ratio "
            f"{flop_ratio:.2f}; target <= {target:.2f} x)")


def run_idea_benchmark(profile: str = "cpu", seed: int = 111, steps: int = 4, repeats: int = 5,
                       threads: int | None = None, prompt_tokens: int = 8, new_tokens: int = 32,
                       generation_batch: int = 16) -> dict:
    """Gated / plain GPT at ``profile`` size: FLOP ratio (counted) next to the measured time ratio.

    Training step: one micro-batch of the profile (forward with the alpha-gated loss of the book,
    backward, AdamW), ``repeats`` runs of ``steps`` steps, plain and gated timed in turn; the step
    time ratio is the median over the repeats of each repeat's gated / plain ratio (wall and process
    CPU time), so a neighbour that slows one repeat moves one ratio, not the figure. Generation: greedy ``generate()``
    with the KV cache, time per new token = (time for ``new_tokens`` - time for 1) / (new_tokens - 1),
    so the prompt's prefill is not counted. Random weights and token ids: the cost of a step does not
    depend on what the model has learnt. On CUDA the models run in bf16 autocast and the record adds
    training tokens/s and model FLOPs utilisation (counted FLOPs / time / dense bf16 peak).
    """
    from semlm.idea.wikitext_experiment import TokenBlocks, idea_profile

    config = idea_profile(profile, seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
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
                  "flops": flops}
        jobs = _idea_jobs(config, V, seed, batches, prompt, new_tokens, device)
        record.update(_time_idea_jobs(jobs, repeats, steps, B * L, generation_batch, new_tokens, device))
        _add_idea_ratios(record, flops, device)
        return record
    finally:
        torch.set_num_threads(previous)


def _idea_jobs(config, vocab_size: int, seed: int, batches, prompt, new_tokens: int, device: str) -> dict:
    """``{"plain" | "gated": (model, {"step" | "one" | "many": job})}`` for the idea benchmark: a training step over
    ``batches`` (bf16 autocast on CUDA, as the trainer runs paper B's GPTs) and greedy cached generation of one
    and of ``new_tokens`` tokens; each job waits for the GPU to finish."""
    from semlm.core.precision import autocast
    from semlm.idea.model import IdeaGPTForCausalLM
    from semlm.idea.wikitext_experiment import autocast_for, idea_loss_fn, model_config

    def train(model, optimizer, loss_fn):
        model.train()
        for batch in batches:
            with autocast("bf16_on_cuda", device):
                loss, _ = loss_fn(model, batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

    def generate(model, n: int):
        model.eval()
        with torch.no_grad(), autocast_for(device):
            model.generate(prompt, max_new_tokens=n, do_sample=False, use_cache=True, pad_token_id=0,
                           eos_token_id=None)

    def job(function, *args):
        def run():
            function(*args)
            if device == "cuda":
                torch.cuda.synchronize()
        return run

    jobs = {}
    for name, idea in (("plain", False), ("gated", True)):
        torch.manual_seed(seed)
        model = IdeaGPTForCausalLM(model_config(config, vocab_size, idea)).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        loss_fn = idea_loss_fn(config.idea, list(range(18)), idea)  # no step given: alpha at the end of its ramp
        jobs[name] = (model, {"step": job(train, model, optimizer, loss_fn), "one": job(generate, model, 1),
                              "many": job(generate, model, new_tokens)})
    return jobs


def _time_idea_jobs(jobs: dict, repeats: int, steps: int, tokens_per_step: int, generation_batch: int,
                    new_tokens: int, device: str) -> dict:
    """Each model's entry of the idea benchmark from its jobs run ``repeats`` times after a warm-up: best step and
    per-token times, throughputs, and every repeat's step time (wall, and process CPU time on a CPU)."""
    from semlm.idea.model import parameter_count

    # plain and gated alternate, so a busy neighbour on a shared machine slows both alike
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
    out = {}
    for name, (model, _) in jobs.items():
        t, step_seconds = times[name], min(times[name]["step"]) / steps
        per_token = max(min(t["many"]) - min(t["one"]), 1e-9) / (new_tokens - 1)
        out[name] = {"parameters": parameter_count(model), "step_seconds": step_seconds,
                     "generate_seconds": min(t["many"]), "seconds_per_new_token": per_token,
                     "train_tokens_per_second": tokens_per_step / step_seconds,
                     "generated_tokens_per_second": generation_batch / per_token,
                     "step_seconds_all": [x / steps for x in t["step"]]}
        if device == "cpu":
            out[name].update(step_cpu_seconds=min(t["step_cpu"]) / steps,
                             step_cpu_seconds_all=[x / steps for x in t["step_cpu"]])
    return out


def _add_idea_ratios(record: dict, flops: dict, device: str) -> None:
    """Add the gated / plain time and FLOP ratios, targets, verdicts (and on CUDA the MFU) to ``record``; a step's
    time ratio is the median of the repeats' interleaved gated / plain ratios (the mean of the middle two)."""
    gated, plain = record["gated"], record["plain"]
    step = [g / p for g, p in zip(gated["step_seconds_all"], plain["step_seconds_all"])]
    record.update(step_time_ratio=statistics.median(step), step_time_ratio_all=step,
                  generation_time_ratio=gated["seconds_per_new_token"] / plain["seconds_per_new_token"],
                  step_flop_ratio=flops["training"]["ratio"], generation_flop_ratio=flops["generation"]["ratio"])
    record["step_time_over_flops"] = record["step_time_ratio"] / record["step_flop_ratio"]
    if device == "cpu":
        cpu = [g / p for g, p in zip(gated["step_cpu_seconds_all"], plain["step_cpu_seconds_all"])]
        record.update(step_cpu_time_ratio=statistics.median(cpu), step_cpu_time_ratio_all=cpu,
                      step_cpu_time_over_flops=statistics.median(cpu) / record["step_flop_ratio"])
    record["generation_time_over_flops"] = record["generation_time_ratio"] / record["generation_flop_ratio"]
    targets = {"step": IDEA_STEP_TARGET, "generation": IDEA_GENERATION_TARGET}
    record["targets"] = {f"{key}_time_over_flops": target for key, target in targets.items()}
    record["meets_targets"] = {key: record[f"{key}_time_over_flops"] <= target for key, target in targets.items()}
    record["verdicts"] = {key: verdict(record[f"{key}_time_ratio"], record[f"{key}_flop_ratio"], target)
                          for key, target in targets.items()}
    if device == "cuda":
        record["device_name"] = torch.cuda.get_device_name()
        for kind in ("plain", "gated"):
            record[kind]["model_flops_utilisation"] = model_flops_utilisation(
                record[kind]["train_tokens_per_second"], flops["training"][f"{kind}_flops_per_token"],
                record["device_name"])


def print_idea_summary(idea: dict) -> None:
    """The chapter's ratio table (:func:`idea_ratio_frame`) with its verdict sentences."""
    print(f"idea-gated GPT ({idea['profile']}, {idea['device']}):\n{idea_ratio_frame(idea).to_string()}")
    print("\n".join(f"  {key}: {sentence}" for key, sentence in idea["verdicts"].items()))
    if "step_cpu_time_ratio" in idea:
        print(f"  step CPU time ratio {idea['step_cpu_time_ratio']:.2f} = {idea['step_cpu_time_over_flops']:.2f} x "
              "FLOP ratio (process CPU time, less moved by neighbours)")


# --- the whole book ---------------------------------------------------------------------------

#: The target for the whole ``cpu`` book built from scratch on a 2-core CPU.
BOOK_TARGET_MINUTES = 30.0  # issue 21: a from-scratch cpu build in <= 1,800 s (the long-term target is 20 min)


def _build_manifest(build_dir: str | Path | None) -> dict:
    """The runner's ``manifest.json`` of ``build_dir`` (default ``$SEMLM_BUILD_DIR``, else ``book/_build``)."""
    from semlm.book.runner import read_manifest
    from semlm.data.paths import REPO_ROOT

    return read_manifest(Path(build_dir or os.environ.get("SEMLM_BUILD_DIR") or REPO_ROOT / "book" / "_build"))


def book_build_times(build_dir: str | Path | None = None) -> dict:
    """Per-chapter wall time and trained / loaded model counts of the current (or last) book build, and
    ``trained_ahead``: the models the runner trained beside the chapters (a chapter that uses one loads it).

    Read from the runner's ``manifest.json`` (``$SEMLM_BUILD_DIR``, else ``book/_build``). Inside a
    build it holds the chapters executed so far (the benchmarks chapter runs after chapters 1-9).
    ``from_scratch`` is true when no chapter loaded a model that an earlier build had trained.
    """
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
    """Where a build's CPU-seconds went: ``[{part, cpu_seconds}]`` for training paper A's and paper B's models
    (each model trained in the build once, its ``cpu_seconds`` from the trainer), the chapters' other work
    (evaluation, generation, the notebooks themselves: the chapters' CPU-seconds, pool included, minus that
    training) and, for a finished build, the HTML and the runner (the whole build's CPU-seconds minus the
    chapters'). A trained model without ``cpu_seconds`` (an older manifest) leaves the training rows out."""
    runs = {}
    for entry in [manifest.get("train_ahead") or {}, *manifest.get("chapters", {}).values()]:
        for run in entry.get("run_list", []):
            if run["status"] in ("trained", "resumed"):
                runs[_trained_model(run)] = run
    chapters = sum(e.get("cpu_seconds") or 0.0 for e in manifest.get("chapters", {}).values())
    rows = []
    if runs and all(r.get("cpu_seconds") is not None for r in runs.values()):
        for paper, marker in (("A", ".fusion."), ("B", ".idea.")):
            seconds = sum(r["cpu_seconds"] for r in runs.values() if marker in r["experiment"])
            rows.append({"part": f"training, paper {paper}", "cpu_seconds": round(seconds, 1)})
        trained = sum(row["cpu_seconds"] for row in rows)
        rows.append({"part": "chapters: evaluation, generation, notebooks",
                     "cpu_seconds": round(max(chapters - trained, 0.0), 1)})
    else:
        rows.append({"part": "chapters (training included)", "cpu_seconds": round(chapters, 1)})
    if manifest.get("complete") and manifest.get("cpu_seconds"):
        rest = max(manifest["cpu_seconds"] - chapters, 0.0)
        rows.append({"part": "HTML and the runner", "cpu_seconds": round(rest, 1)})
    return rows


def cpu_breakdown_frame(build_dir: str | Path | None = None, root: str | Path | None = None):
    """:func:`cpu_breakdown` of this build's manifest (the chapters so far) and of every recorded whole-book build
    (``book/recorded/cpu-book-*``, labelled with its folder): columns build, part, cpu_seconds."""
    from semlm.book.recorded import load_recorded

    rows = [{"build": "this build (chapters so far)", **row} for row in cpu_breakdown(_build_manifest(build_dir))]
    for run in sorted(load_recorded(root), key=lambda r: r.date or ""):
        if run.book_manifest and not run.dry_run:
            rows += [{"build": f"recorded: {run.slug}", **row} for row in cpu_breakdown(run.book_manifest)]
    return pd.DataFrame(rows, columns=["build", "part", "cpu_seconds"])


def _trained_model(run: dict) -> tuple:
    """The trained model a manifest run names: its ``model`` (the owner's run for a model shared between chapters,
    e.g. chapter 10's baseline is chapter 4's), else its own experiment, group, name and seed (older manifests)."""
    return tuple(run.get("model") or (run["experiment"], run["group"], run["name"], run["seed"]))


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


# --- the authors' script against ours, both measured here ------------------------------------
#
# A time taken on another machine is not a measurement of this build, so the only comparison
# with the authors' script the book makes is one run here, on request (``python -m semlm.bench
# --authors-script PATH``): their script and our synthetic experiment as whole processes, in
# turn (ours, theirs, ours, theirs, ...), so a busy neighbour slows both alike.

AUTHORS_REPOSITORY = "github.com/YongchaoHuang/semantic_fusion"
#: Seconds between two samples of the process tree's resident memory.
MEMORY_SAMPLE_SECONDS = 0.05
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def notebook_code(path: str | Path) -> tuple[str, int]:
    """The code cells of a notebook joined into one script, and the number of IPython lines left out.

    Lines starting with ``%`` (magics) or ``!`` (shell) are not Python and are skipped.
    """
    try:
        notebook = json.loads(Path(path).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not a readable notebook ({error})") from None
    cells = [c for c in notebook.get("cells", []) if c.get("cell_type") == "code"]
    sources = ["".join(c["source"]) if isinstance(c.get("source"), list) else c.get("source", "") for c in cells]
    if not any(s.strip() for s in sources):
        raise ValueError(f"{path} has no code cells; pass the authors' SemanticFusion.py or .ipynb")
    lines = "\n\n".join(sources).splitlines()
    kept = [line for line in lines if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(kept) + "\n", len(lines) - len(kept)


def authors_script_file(path: str | Path, workdir: Path) -> tuple[Path, dict]:
    """The file to run for the authors' ``SemanticFusion.py`` / ``.ipynb`` at ``path``, and what is known of it.

    A notebook's code cells are written to ``workdir`` as one script (:func:`notebook_code`).
    """
    import hashlib

    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"authors' script not found: {path} (download SemanticFusion.py or "
                                f"SemanticFusion.ipynb from {AUTHORS_REPOSITORY} and pass its path)")
    about = {"file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
             "training_sentences_x_epochs": "unknown", "parameters": "unknown",
             "note": "their workload is whatever their script does; not read from it"}
    if path.suffix != ".ipynb":
        return path.resolve(), {**about, "kind": "script"}
    code, skipped = notebook_code(path)
    script = workdir / f"{path.stem}_code_cells.py"
    script.write_text(code)
    return script, {**about, "kind": f"notebook: code cells joined, {skipped} magic/shell line(s) skipped"}


def measure_process(command: Sequence[str], env: dict, cwd: str | Path) -> dict:
    """Run ``command`` to its end: wall seconds, CPU seconds and peak MB of its process tree, exit code.

    CPU: user + sys of the process and every descendant it waited for (the ``RUSAGE_CHILDREN``
    difference across the run; runs are measured one at a time). Memory: the tree's summed RSS,
    sampled every :data:`MEMORY_SAMPLE_SECONDS` (pages shared between processes, such as the PyTorch
    library, count once per process, as for the book's other summed peaks).
    """
    import resource
    import subprocess

    import psutil

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(list(command), env=env, cwd=cwd, stdout=out, stderr=err)
        root, peak = psutil.Process(process.pid), 0
        while process.poll() is None:  # the tree's summed resident memory, until it exits
            try:
                members = [root, *root.children(recursive=True)]
            except psutil.Error:
                members = []
            total = 0
            for member in members:
                with contextlib.suppress(psutil.Error):  # ended between listing and reading
                    total += member.memory_info().rss
            peak = max(peak, total)
            time.sleep(MEMORY_SAMPLE_SECONDS)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.seek(0), err.seek(0)
        stdout, stderr = (f.read().decode(errors="replace").strip().splitlines() for f in (out, err))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_seconds": round(wall, 3), "cpu_seconds": round(cpu, 3), "peak_mb": round(peak / 2 ** 20, 1),
            "returncode": process.returncode, "stdout_tail": stdout[-10:], "stderr_tail": stderr[-10:]}


MEASURES = ("wall_seconds", "cpu_seconds", "peak_mb")


def _side_summary(runs: list[dict]) -> dict:
    """Medians of the measures over ``runs`` and their per-run lists."""
    out = {m: round(statistics.median([r[m] for r in runs]), 3) for m in MEASURES}
    out.update({f"{m}_runs": [r[m] for r in runs] for m in MEASURES})
    return out


def pair_ratios(ours: list[dict], theirs: list[dict]) -> dict:
    """Ours / theirs of every measure, run by run (pair i = our i-th run and their i-th), and the median."""
    out = {"direction": "ours / authors' script"}
    for m in MEASURES:
        pairs = [o[m] / t[m] if t[m] else float("nan") for o, t in zip(ours, theirs)]
        out[m] = {"median": round(statistics.median(pairs), 4), "per_pair": [round(p, 4) for p in pairs]}
    return out


def _ours_workload(profile: str, seed: int, workers: int | None) -> dict:
    """What our side trains: sentences x epochs and the parameters of both models."""
    from semlm.fusion.model import build_model
    from semlm.fusion.synthetic_experiment import model_config as synthetic_model_config

    config = synthetic_profile(profile, seed)
    vocab = len(prepare_data(config.corpus).vocab)
    parameters = {kind: sum(p.numel() for p in build_model(
        synthetic_model_config(config, kind, vocab, "causal")).parameters()) for kind in ("baseline", "fusion")}
    return {"experiment": "synthetic, causal, baseline + fusion, training + evaluation (fresh, no cache)",
            "profile": profile, "seed": seed, "training_sentences": config.corpus.n_train,
            "epochs": config.train.epochs, "training_sentences_x_epochs": config.corpus.n_train * config.train.epochs,
            "parameters": parameters, "workers": workers or min(2, os.cpu_count() or 1)}


def _comparison_machine() -> dict:
    """CPU model, core count and the thread settings both sides start with."""
    from semlm.book.report import cpu_model, git_commit

    threads = torch.get_num_threads()
    return {"cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "torch_default_threads": threads,
            "thread_variables": {v: os.environ.get(v, "unset") for v in THREAD_VARIABLES},
            "threads": {"ours": f"training: one 1-thread process per model (up to the workers); evaluation: {threads}",
                        "authors_script": f"{threads} (PyTorch's default here, unless their script sets its own)"},
            "python": sys.version.split()[0], "torch": torch.__version__, "git_commit": git_commit(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _ours_command(profile: str, seed: int, workers: int | None) -> list[str]:
    """Our side: ``python -m semlm.bench --only synthetic`` (fresh training in a temporary run folder)."""
    command = [sys.executable, "-m", "semlm.bench", "--only", "synthetic", "--profile", profile, "--seed", str(seed)]
    return command + (["--workers", str(workers)] if workers else [])


def _failure(run: dict) -> str | None:
    """``(exit N): <last stderr line>`` of a measured run that failed, else None."""
    return None if run["returncode"] == 0 else \
        f"(exit {run['returncode']}): {(run['stderr_tail'] or ['no output'])[-1]}"


def compare_with_authors_script(script: str | Path, profile: str = "cpu", seed: int = 111, runs: int = 3,
                                workers: int | None = None, ours_command: Sequence[str] | None = None) -> dict:
    """The ``authors_comparison`` record: their script and our synthetic experiment, ``runs`` each, in turn.

    Bad input (a missing file, a notebook without code, a script that fails) does not stop our side:
    the record then has ``error`` (one line) and no ratios. ``ours_command`` replaces our side's
    command (tests only; the default trains the synthetic experiment for real).
    """
    if runs < 2:
        raise ValueError(f"--runs must be at least 2 (runs alternate ours / theirs), got {runs}")
    synthetic_profile(profile, seed)  # an unknown profile fails here, before anything runs
    # both sides: this environment, a non-interactive matplotlib, our ``semlm`` importable
    library, path = str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": library + (os.pathsep + path if path else "")}
    ours_command = list(ours_command or _ours_command(profile, seed, workers))
    record = {"runs": runs, "profile": profile, "order": "ours, theirs, ours, theirs, ...", **_comparison_machine()}
    error, ours, theirs = None, [], []
    with tempfile.TemporaryDirectory(prefix="semlm-authors-") as workdir:
        try:
            their_file, about = authors_script_file(script, Path(workdir))
        except (FileNotFoundError, ValueError) as problem:
            error, about = str(problem), {"file": str(script)}
        for i in range(runs):
            ours.append(measure_process(ours_command, env, workdir))
            if _failure(ours[-1]):
                raise RuntimeError(f"our synthetic experiment failed {_failure(ours[-1])}")
            if error is None:
                theirs.append(measure_process([sys.executable, str(their_file)], env, workdir))
                if _failure(theirs[-1]):
                    error = f"the authors' script {script} failed on run {i + 1} {_failure(theirs[-1])}"
    record["ours"] = {**_side_summary(ours), "workload": _ours_workload(profile, seed, workers)}
    record["authors_script"] = {**about, "path": str(script)}
    if error is None:
        record["authors_script"].update(_side_summary(theirs), stdout_tail=theirs[-1]["stdout_tail"])
        record["ratios"] = pair_ratios(ours, theirs)
    else:
        record["error"] = error
    return record


def _bench_json(path: str | Path | None) -> Path:
    """``path``, else the bench JSON of this metrics folder."""
    from semlm.book.report import metrics_dir

    return Path(path) if path else metrics_dir() / "bench.json"


def write_authors_comparison(record: dict, out: str | Path | None = None) -> Path:
    """Put ``record`` under ``authors_comparison`` in ``out`` (default: the bench JSON), keeping its other entries."""
    path, existing = _bench_json(out), {}
    if path.is_file():
        try:
            existing = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON ({error}); pass another --out or delete it") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({**existing, "authors_comparison": record}, indent=2))
    tmp.replace(path)
    return path


def previous_authors_comparison(path: str | Path | None = None) -> dict | None:
    """The ``authors_comparison`` record in ``path`` (default: the bench JSON of this metrics folder), or None."""
    try:
        return json.loads(_bench_json(path).read_text()).get("authors_comparison")
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
    from semlm.core.records import Interval

    variants = record.get("training_variants")
    if variants is None:
        return None, "the training variants were not compared (--variants-profile none)"
    rows = {}
    for name, row in variants["variants"].items():
        cells = {f"{kind} val PPL (95% interval)": f"{Interval.from_dict(row[kind]['ppl']):.3f}"
                 for kind in variants["kinds"]}
        for kind in variants["kinds"]:
            change = Interval.from_dict(row[kind]["ppl_paired_change"])
            cells[f"{kind} PPL change, paired by seed"] = (f"{change.mean:+.1%} "
                                                           f"[{change.low:+.1%}, {change.high:+.1%}]")
        cells["train CPU time / reference"] = round(row["cpu_time_ratio"], 2)
        cells["within seed intervals"] = row["within_seed_intervals"]
        rows[name] = cells
    caption = f"profile {variants['profile']}, seeds {variants['seeds']}; {record['bf16_decision']}"
    return pd.DataFrame(rows).T, caption


def recorded_precision_frame(record: dict, root=None):
    """``(frame, message)`` of the recorded ``cpu``-scale float32 / bf16 comparison (``training_variants_frame``
    columns), the message naming its folder, machine, date and commit and the recorded bf16 step-time ratios
    under oneDNN instruction-set caps; ``(None, how to record one)`` without it."""
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


def chapter_glue(record: dict, profile: str) -> dict:
    """The numbers the benchmarks chapter's prose quotes (``{glue:text}``), by name: this benchmark's and the
    book build's so far (:func:`book_build_times`)."""
    flops, idea, times = record["flops"], record["idea"], book_build_times()
    return {
        "bench_wall": record["wall_seconds"], "bench_profile": profile,
        "bench_source": record.get("training_source", "trained here"),
        "bench_generation": record["generation"]["generations_per_second"],
        "bench_verdict": {True: "meets", False: "misses", None: "is not comparable with"}[record["meets_target"]],
        "bench_peak_measured": flops["peak_measured_per_thread"] / 1e9,
        "bench_peak_formula": flops["nominal_formula"],
        "bench_autocast": ("bf16 autocast" if flops.get("autocast") == "bf16" else "float32"),
        "bench_peak_nominal": (flops["peak_nominal_per_core"] or float("nan")) / 1e9,
        "bench_padding": 100 * (1 - flops["real_positions"] / flops["computed_positions"]),
        "bench_fusion_share": 100 * flops["models"]["fusion"]["share_of_measured_peak"],
        "idea_step_flop_ratio": idea["step_flop_ratio"], "idea_step_over": idea["step_time_over_flops"],
        "idea_gen_over": idea["generation_time_over_flops"],
        "idea_step_verdict": "meets" if idea["meets_targets"]["step"] else "misses",
        "idea_gen_verdict": "meets" if idea["meets_targets"]["generation"] else "misses",
        "idea_bench_device": f"{idea['device']} ({idea['threads']} thread(s))",
        "book_minutes": times["total_minutes"], "book_target": times["target_minutes"],
        "book_ahead": times["trained_ahead"],
        "book_busy": "n/a" if times["utilisation"] is None else f"{times['utilisation']:.0%}",
        "book_scratch": "from scratch" if times["from_scratch"] else "partly from the run cache",
    }


def authors_comparison_frame(record: dict, path: str | Path | None = None):
    """``(frame, note)``: the authors' script against ours, both measured on one machine.

    The comparison is read from ``path`` if given, else from ``record`` (a comparison the bench JSON
    of this metrics folder held). None recorded: an empty frame and a note saying how to make one.
    """
    comparison = previous_authors_comparison(path) if path else record.get("authors_comparison")
    if not comparison:
        return pd.DataFrame(), (
            "No comparison with the authors' script is recorded. It runs only on request, on your machine: "
            f"download SemanticFusion.py (or .ipynb) from {AUTHORS_REPOSITORY}, then `python -m semlm.bench "
            "--authors-script PATH --profile cpu` (or `make bench AUTHORS=PATH`) writes it into the bench JSON, "
            "and the next build of this page shows it.")
    labels = {"wall_seconds": "wall seconds", "cpu_seconds": "CPU seconds (user + sys, process tree)",
              "peak_mb": "peak memory, MB (process tree)"}
    columns = {f"ours ({comparison['profile']})": comparison["ours"]}
    if "ratios" in comparison:
        columns["authors' script"] = comparison["authors_script"]
    frame = pd.DataFrame({name: {label: side[key] for key, label in labels.items()}
                          for name, side in columns.items()})
    if "ratios" in comparison:
        frame["ours / theirs (median of pairs)"] = [comparison["ratios"][key]["median"] for key in labels]
    workload = comparison["ours"]["workload"]
    note = (f"Medians of {comparison['runs']} runs of each side, in turn, measured by `python -m semlm.bench "
            f"--authors-script` on {comparison['cpu_model']} ({comparison['cpu_count']} cores) on "
            f"{comparison['date']} (commit {comparison['git_commit'][:10]}). Ours trains "
            f"{workload['training_sentences']} sentences x {workload['epochs']} epochs, "
            f"{sum(workload['parameters'].values()):,} parameters in both models; theirs: "
            f"{comparison['authors_script'].get('training_sentences_x_epochs', 'unknown')}.")
    if "error" in comparison:
        note += f" Their side did not run: {comparison['error']}"
    return frame.round(2), note


# --- python -m semlm.bench: one function per --only section ----------------------------------


def _write_json(path: str | Path, record: dict) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2))
    return path


def _run_all(args) -> int:
    """The whole benchmark (the chapter's record), printed as a summary, then the last book build's times."""
    record = run_benchmark(args.profile, args.seed, args.workers, fresh=args.fresh,
                           variants_profile=None if args.variants_profile == "none" else args.variants_profile)
    print(f"synthetic experiment ({args.profile}):\n{summary_frame(record).to_string()}")
    print(flops_frame(record).to_string())
    print(record["bf16_decision"])
    print_idea_summary(record["idea"])
    print(json.dumps(record, indent=2))
    print_book_times(book_build_times())
    return 0


def _run_idea(args) -> int:
    """The idea-gated GPT's FLOP / time ratios (what a GPU run wants); ``--out``: also written there."""
    idea = run_idea_benchmark(args.profile, args.seed, threads=None if torch.cuda.is_available() else 1)
    print_idea_summary(idea)
    print(json.dumps(idea, indent=2))
    if args.out:
        _write_json(args.out, idea)
    return 0


def _run_gpu(args) -> int:
    """Paper B's training through the trainer on a CUDA GPU; ``--out``: the record and its profiler tables."""
    from semlm.book.gpu_throughput import print_gpu_summary, run_gpu_throughput

    gpu = run_gpu_throughput(args.profile, args.seed)
    print_gpu_summary(gpu)
    if args.out:
        out = _write_json(args.out, gpu)
        tables = [f"{kind}\n{v['trace']['table']}" for kind, v in list(gpu["variants"].values())[-1].items()
                  if "table" in v.get("trace", {})]
        out.with_suffix(".trace.txt").write_text("\n\n".join(tables))
    return 0


def _run_book(args) -> int:
    print_book_times(book_build_times())
    return 0


def _run_synthetic(args) -> int:
    """Our side of ``--authors-script``: train and evaluate both models fresh in a temporary run folder."""
    config = synthetic_profile(args.profile, args.seed)
    with tempfile.TemporaryDirectory(prefix="semlm-bench-") as runs_dir:
        runs = _train_synthetic(config, runs_dir, args.workers, progress=False)
    print("validation PPL: " + ", ".join(f"{k} {r.metrics.ppl:.3f}" for k, r in runs.items()))
    return 0


def _run_precision(args) -> int:
    return record_precision_comparison(args.variants_profile, args.seed, args.workers)


def _run_authors(args) -> int:
    """``--authors-script``: measure, print, write; one error line and exit 1 if their side failed."""
    record = compare_with_authors_script(args.authors_script, args.profile, args.seed, args.runs, args.workers)
    frame, note = authors_comparison_frame({"authors_comparison": record})
    print(f"{frame.to_string()}\n{note}")
    print(f"written to {write_authors_comparison(record, args.out)} (authors_comparison)")
    if "error" in record:
        print(f"error: {record['error']}", file=sys.stderr)
        return 1
    return 0


#: ``--only`` section -> the function that runs it (``--authors-script`` runs ``_run_authors`` instead).
SECTIONS = {"all": _run_all, "idea": _run_idea, "gpu": _run_gpu, "book": _run_book, "synthetic": _run_synthetic,
            "precision": _run_precision}


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
                             "'synthetic': train and evaluate both synthetic models once, nothing written "
                             "(our side of --authors-script); 'precision': float32 against bf16 autocast for "
                             "paper A's models at --variants-profile over 3 seeds, recorded in "
                             f"book/recorded/{PRECISION_RECORD}/ (the evidence for the cpu profile's precision)")
    parser.add_argument("--out", default=None, help="with --only idea / gpu: also write the record to this JSON file; "
                                                    "with --authors-script: where to write it (default: bench.json)")
    parser.add_argument("--authors-script", default=None, metavar="PATH",
                        help="the authors' SemanticFusion.py or .ipynb (download it from "
                             f"{AUTHORS_REPOSITORY}): time it against our synthetic experiment on this machine")
    parser.add_argument("--runs", type=int, default=3, help="with --authors-script: runs of each side (>= 2)")
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
    try:
        return (_run_authors if args.authors_script is not None else SECTIONS[args.only])(args)
    except (ValueError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
