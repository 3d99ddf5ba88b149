"""The book's trained models, listed before any chapter runs (``python -m semlm.book plan``).

:func:`book_runs` calls every chapter's run declaration (``fusion_training_runs``, ``audit_runs``, ...) with its
default parameters, so the book runner can train them beside the chapters in one pool of one-thread processes
(:func:`train_ahead`); a chapter that asks for a model being trained waits for its file lock
(:func:`semlm.core.runs.run_lock`), so nothing is trained twice. Runs that depend on another run's result
(:data:`DEPENDENT`) are trained by their chapters.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

#: The chapters' default ``seed`` parameter (every chapter's ``parameters`` cell).
DEFAULT_SEED = 111

#: The chapters that declare runs, in the book's order (:func:`book_runs` lists them in this order).
CHAPTERS = ("02_fusion_training", "04_leakage_audit", "05_sst2", "06_idea_gating", "08_lora_4bit_idea_gating",
            "09_topic_drift", "10_intent_control")

#: Runs that can only be listed once another run has finished, and why.
DEPENDENT = {
    "07_xray_and_sweeps": "its beta / K sweep retrains the loss form chapter 6 chooses (chapter 6's runs first)",
    "08_lora_4bit_idea_gating": "its LoRA runs adapt the backbone listed here (the backbone first)",
}


@dataclass(frozen=True)
class ChapterRuns:
    """The runs one chapter trains (or loads) with its default parameters."""

    chapter: str
    experiment: object            # a semlm.core.runs.Experiment
    specs: tuple                  # of semlm.core.runs.RunSpec


def book_runs(profile: str, seed: int = DEFAULT_SEED) -> list[ChapterRuns]:
    """Every run the book's chapters declare at ``profile``, chapter by chapter (a model two chapters use
    is listed under the first, whether the second declares the same run or shares it through
    :meth:`~semlm.core.runs.Experiment.shared_run`; see :data:`DEPENDENT` for those listed later)."""
    from semlm.fusion.audit import audit_runs, audit_seeds, ood_seeds, steering_seeds
    from semlm.fusion.intent_experiment import EXPERIMENT as INTENT, intent_runs
    from semlm.fusion.sst2_experiment import SST2, sst2_runs
    from semlm.fusion.synthetic_experiment import SYNTHETIC, fusion_training_runs
    from semlm.idea.lora_experiment import BACKBONE_PRETRAINING, backbone_runs
    from semlm.idea.topic_experiment import TOPIC_DRIFT, topic_drift_runs
    from semlm.idea.wikitext_experiment import IDEA, idea_gating_runs
    from semlm.fusion.profiles import intent_profile, sst2_profile, synthetic_profile
    from semlm.idea.profiles import idea_profile, lora_profile, topic_drift_profile
    from semlm.profiles import resolved

    profile = resolved(profile)  # checked once here (or where it entered); the builders below take it as it is
    topic = topic_drift_profile(profile, seed)
    intent = intent_profile(profile, seed)
    synthetic = synthetic_profile(profile, seed)
    audit = audit_seeds(synthetic)
    declared = [  # (chapter, experiment, its runs: lists of RunSpec)
        ("02_fusion_training", SYNTHETIC, fusion_training_runs(synthetic)),
        ("04_leakage_audit", SYNTHETIC, audit_runs(synthetic, audit, steering_seeds(synthetic, audit)
                                                     + ood_seeds(synthetic, audit))),
        ("05_sst2", SST2, sst2_runs(sst2_profile(profile, seed))),
        ("06_idea_gating", IDEA, idea_gating_runs(idea_profile(profile, seed, None), None)),
        ("08_lora_4bit_idea_gating", BACKBONE_PRETRAINING, backbone_runs(lora_profile(profile, seed, None))),
        ("09_topic_drift", TOPIC_DRIFT, topic_drift_runs(topic, topic.seeds(seed))),
        ("10_intent_control", INTENT, intent_runs(intent, intent.seeds(seed))),
    ]
    seen: set = set()
    planned = []
    for chapter, experiment, specs in declared:  # chapter 4 re-uses chapter 2's models; chapter 10 some of 4's
        planned.append(ChapterRuns(chapter, experiment,
                                   tuple(s for s in specs if trained_model(experiment, s) not in seen)))
        seen.update(trained_model(experiment, s) for s in specs)
    return planned


def trained_model(experiment, spec) -> tuple:
    """What identifies the model a run trains: its experiment and spec, or its owner's for a shared run
    (:meth:`semlm.core.runs.Experiment.shared_run`)."""
    shared = experiment.shared_run(spec)
    if shared is not None:
        experiment, spec = shared
    return experiment.name, spec.group, spec.name, spec.seed, repr(spec.config)


def schedule(planned: list[ChapterRuns]) -> list[tuple]:
    """The order in which :func:`train_ahead` starts the runs, as ``(experiment, spec)``: the chapters in
    the book's order (a chapter waits only for its own models), and within a chapter the longest
    runs (most optimiser steps) first, so its last model does not start when the others are done."""
    return [(entry.experiment, spec) for entry in planned  # sorted is stable: declared order among equals
            for spec in sorted(entry.specs, key=lambda spec: -(entry.experiment.total_steps(spec) or 0))]


def train_ahead(profile: str, planned: list[ChapterRuns], workers: int | None = None) -> None:
    """Train (or load) the runs of ``planned`` (:func:`book_runs` at ``profile``) in :func:`schedule`'s order, in one
    pool of ``workers`` one-thread processes (default: one per core, capped by every experiment's
    :meth:`~semlm.core.runs.Experiment.max_workers`). A failed run is reported and the others go on (the chapter that
    needs it trains it again and shows the error); a RuntimeError names the failed runs at the end."""
    from semlm.core import runs

    jobs = schedule(planned)
    folder = runs.RunContext(profile).folder
    caps = [cap for e in planned if e.specs and (cap := e.experiment.max_workers(e.specs))]
    workers = min([workers or os.cpu_count() or 1, *caps])  # an experiment's cap holds for the whole pool
    outcomes = runs.run_jobs(jobs, folder, workers, label=f"book runs ({profile})",
                             on_done=_print_outcome)
    failed = [f"{experiment.name}/{spec.name} seed {spec.seed}: {outcome}"
              for (experiment, spec), outcome in zip(jobs, outcomes) if isinstance(outcome, BaseException)]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(jobs)} runs failed: " + "; ".join(failed))


def _print_outcome(experiment, spec, outcome) -> None:
    """One line per finished run (the book runner keeps them in ``<build>/work/train-ahead.log``)."""
    said = (f"FAILED: {type(outcome).__name__}: {outcome}" if isinstance(outcome, BaseException)
            else f"{outcome.status} ({outcome.train_seconds:.0f} s of training)")
    print(f"{experiment.name}/{spec.group + '/' if spec.group else ''}{spec.name} seed {spec.seed}: {said}", flush=True)


def _runs(n: int) -> str:
    return f"{n:3d} run" + ("" if n == 1 else "s")


def describe(planned: list[ChapterRuns], chapters: Sequence[str] | None = None) -> str:
    """The plan as a few lines of text: runs per chapter and experiment, and the runs listed later (of ``chapters``
    only, when given)."""
    lines = [f"{entry.chapter:28s} {entry.experiment.name:14s} {_runs(len(entry.specs))}" for entry in planned]
    lines.append(f"{'total':28s} {'':14s} {_runs(sum(len(e.specs) for e in planned))}")
    lines += [f"{chapter:28s} later: {why}" for chapter, why in DEPENDENT.items()
              if chapters is None or chapter in chapters]
    return "\n".join(lines)
