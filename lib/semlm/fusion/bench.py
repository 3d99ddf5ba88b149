"""Paper A's benchmarks that need nothing of the book: controlled generation timed, the training variants (length
bucketing, bf16 autocast) compared over seeds through the run cache, and what bf16 autocast costs a training step
on this CPU and under capped oneDNN instruction sets. The chapter (:mod:`semlm.book.bench`) runs and shows them."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from semlm.core import runs as runner
from semlm.core.metrics import mean_interval
from semlm.core.precision import autocast
from semlm.fusion.decoding import PAPER_MIXTURE, ClauseGrammar, DecodingConfig, generate
from semlm.fusion.profiles import SyntheticProfile
from semlm.fusion.request import PAPER_REQUESTS
from semlm.fusion.synthetic_experiment import SYNTHETIC, SyntheticExperiment, SyntheticRun, prepare_data, spec_for
from semlm.profiles import CPU_BF16_VARIABLE

#: Controlled generation of 200 sentences should take at most this many seconds.
GENERATION_TARGET_SECONDS = 1.0


def best_seconds(run, repeats: int) -> float:
    """Best wall seconds of ``repeats`` calls of ``run()`` after a warm-up call (a busy neighbour only slows one)."""
    run()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return min(times)


def time_controlled_generation(model, config, n: int = 200, repeats: int = 5) -> dict:
    """Best-of-``repeats`` time to decode ``n`` hard-controlled positive sentences in one batch."""
    data = prepare_data(config.corpus)
    grammar = ClauseGrammar(data.vocab)
    decoding = DecodingConfig(hard=True, mixture=PAPER_MIXTURE["positive"])
    seeds = iter(range(repeats + 1))  # a new seed per call
    best = best_seconds(lambda: generate(model, data.featurizer, grammar, n, PAPER_REQUESTS["pos"], config=decoding,
                                         seed=next(seeds)), repeats)
    return {"sentences": n, "seconds": round(best, 4), "generations_per_second": round(n / best, 1),
            "threads": torch.get_num_threads(), "target_seconds": GENERATION_TARGET_SECONDS,
            "meets_target": best <= GENERATION_TARGET_SECONDS}


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


def compare_training_variants(config: SyntheticProfile, seeds: Sequence[int] = (111, 112, 113),
                              kinds: Sequence[str] = ("baseline", "fusion"), workers: int | None = None,
                              variants: dict[str, tuple[int, str | None]] | None = None,
                              runs_dir: str | Path | None = None) -> dict:
    """Train every variant of ``variants`` (default ``TRAINING_VARIANTS``) of ``config`` (its seed replaced by each
    of ``seeds``) for every seed and model through the
    run cache (``runs_dir``; None: the build's) and compare them with the first (:func:`summarise_training_variants`).

    Speed is the trainer's CPU time (validation excluded; less moved by a busy neighbour than wall time), kept in
    the run's history, so a run loaded from the cache reports what it measured when it trained.
    """
    variants = dict(variants or TRAINING_VARIANTS)
    jobs = [(name, kind, seed) for name in variants for kind in kinds for seed in seeds]
    specs = [runner.RunSpec(kind, seed, VariantRun(dataclasses.replace(config, seed=seed), kind, "causal",
                                                       *variants[name]),
                            group=f"bucket{variants[name][0]}-{variants[name][1] or 'float32'}")
             for name, kind, seed in jobs]
    records = runner.run_many(TRAINING_VARIANT_RUNS, specs, runner.RunContext(config.name, runs_dir, workers, False))
    results = {job: {"ppl": r.metrics.ppl, "ppl_seen_only": r.metrics.ppl_seen_only, "train_seconds": r.train_seconds,
                     "train_cpu_seconds": r.cpu_seconds} for job, r in zip(jobs, records)}
    return summarise_training_variants(results, config.name, variants)


def summarise_training_variants(results: dict[tuple[str, str, int], dict], profile: str,
                                variants: dict[str, tuple[int, str | None]] | None = None,
                                metrics: Sequence[str] = ("ppl", "ppl_seen_only")) -> dict:
    """The comparison record from ``{(variant, kind, seed): {<each of metrics>, train_(cpu_)seconds}}``.

    A variant is within the seed intervals when its mean of each of ``metrics`` (validation PPLs: paper A's over
    all targets and seen-only) lies inside the first (reference) variant's 95% t-interval over the seeds for every
    model, faster when its mean training CPU time is below the reference's; bf16 is worth turning on only if both
    hold. ``cpu_time_ratio``: over all models, and per model.
    """
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
            row[kind] = {metric: mean_interval([r[metric] for r in rows]) for metric in metrics}
            row[kind].update({m: sum(r[m] for r in rows) / len(rows) for m in ("train_cpu_seconds", "train_seconds")})
            # paired by seed: the same seed gives the same initial weights in every variant
            row[kind]["ppl_paired_change"] = mean_interval(
                [r["ppl"] / ref["ppl"] - 1 for r, ref in zip(rows, by[reference, kind])])
        table[name] = row
        first = table[reference]  # the reference's row: it comes first
        for kind in kinds:
            row[kind]["cpu_time_ratio"] = row[kind]["train_cpu_seconds"] / first[kind]["train_cpu_seconds"]
        row["cpu_time_ratio"] = (sum(row[k]["train_cpu_seconds"] for k in kinds)
                                 / sum(first[k]["train_cpu_seconds"] for k in kinds))
        row["within_seed_intervals"] = all(
            first[k][m]["ci_low"] <= row[k][m]["mean"] <= first[k][m]["ci_high"] for k in kinds for m in metrics)
        row["faster"] = row["cpu_time_ratio"] < 1.0
    return {"profile": profile, "seeds": list(seeds), "kinds": list(kinds), "reference": reference,
            "rule": (f"within: the variant's mean validation PPL ({', '.join(metrics)}) lies inside the "
                     "reference's 95% t-interval over the seeds, for every model; faster: mean training CPU "
                     "seconds below the reference's; ppl_paired_change: relative PPL change against the "
                     "reference run of the same seed, mean and 95% interval over seeds"),
            "variants": table}


#: The comparison that decides the ``cpu`` profile's precision: the float32 reference against bf16 only.
PRECISION_VARIANTS: dict[str, tuple[int, str | None]] = {
    name: TRAINING_VARIANTS[name] for name in ("fp32, shuffled batches (reference)", "bf16 autocast, shuffled batches")}


#: oneDNN instruction-set caps (``ONEDNN_MAX_CPU_ISA``) under which ``emulated_bf16_step_ratios`` times a step:
#: none (what this CPU has), AVX-512 without its BF16 instructions, and AVX2 (most laptops).
EMULATED_ISAS: tuple[str, ...] = ("ALL", "AVX512_CORE", "AVX2")


def bf16_step_ratio(config: SyntheticProfile, steps: int = 30) -> dict:
    """Milliseconds per training step of paper A's fusion model (one thread, the same batches) in float32
    and under bf16 autocast, and their ratio: the cost of bf16 on this CPU as oneDNN runs it."""
    torch.set_num_threads(1)
    spec, seed = spec_for(config, "fusion"), config.seed
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
    out = {}
    for isa in isas:
        code = ("import json; from semlm.fusion.bench import bf16_step_ratio; "  # this process: an entry
                "from semlm.fusion.profiles import synthetic_profile; "
                f"print(json.dumps(bf16_step_ratio(synthetic_profile({profile!r}))))")
        done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "ONEDNN_MAX_CPU_ISA": isa},
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"timing bf16 under ONEDNN_MAX_CPU_ISA={isa} failed: "
                               f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
        out[isa] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def bf16_summary(comparison: dict) -> str:
    """How bf16 compared with float32 in ``comparison``: its CPU time ratio and whether PPL stayed within."""
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
        parts.append(f"at the {recorded['profile']} scale it took {bf16_summary(recorded)} "
                     f"(recorded in {recorded['folder']}, {recorded['date']}, {recorded['commit']})")
    if comparison is not None:
        parts.append(f"this build's check at the {comparison['profile']} scale: {bf16_summary(comparison)}")
    return "; ".join(parts)
