"""Data-parallel training of the idea-gated GPT (paper B) through the book's own runner and ``accelerate``.

    accelerate launch --multi_gpu --num_processes 4 -m semlm.distributed --profile paper
    ACCELERATE_USE_CPU=1 torchrun --nproc_per_node 2 -m semlm.distributed --synthetic 20000 --steps 10
    python -m semlm.distributed ...          # the same run in one process

Chapter 6's gated run (:data:`semlm.idea.wikitext_experiment.IDEA`) goes through :func:`semlm.core.runs.run_one`
with an :class:`accelerate.Accelerator`: every process draws the same global batch (``--batch``, in
``--accumulation`` micro-batches) and trains on its share of the rows, so N processes make the updates of one
(tested). The run has one cache key (the launch's world size is in it), one lock (taken by the main process, so a
second launch into the same ``--output`` waits, then finds the run) and one record: a second launch trains nothing,
and a chapter loads the run by naming the world size in its spec. An interrupted launch resumes from the last
checkpoint. ``--synthetic N`` trains on a seeded synthetic stream of N tokens instead of WikiText
(:data:`STREAM`). A process that dies stops the others: the launcher ends them, and a collective waits at most
``--timeout`` seconds for a lost peer.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, fields, replace

import torch

from semlm.core import runs
from semlm.core.runs import RunSpec
import semlm.idea.wikitext_experiment as ie
from semlm.idea.data import TokenBlocks, TokenStream
from semlm.idea.loss import idea_loss_fn
from semlm.idea.model import IdeaGPTForCausalLM, quiet_transformers
from semlm.idea.profiles import idea_profile


@dataclass(frozen=True)
class RunArgs:
    """The command line's options (``--vocab-size`` sets ``vocab_size``), each described in :data:`HELP`."""

    profile: str = "smoke"
    seed: int = 111
    steps: int | None = None
    batch: int | None = None
    accumulation: int | None = None
    synthetic: int | None = None
    vocab_size: int = 256
    output: str = "book/_build/runs/distributed"
    timeout: int = 60


HELP = {"profile": "smoke, cpu or paper (semlm.idea.wikitext_experiment)",
        "steps": "optimiser steps (default: the profile's; a cap keeps warmup and ramp shares)",
        "batch": "global batch per optimiser step, split over micro-batches and processes (default: the profile's)",
        "accumulation": "micro-batches per optimiser step (default: the profile's)",
        "synthetic": "train on a synthetic stream of this many tokens instead of WikiText (no dataset needed)",
        "vocab_size": "vocabulary of the synthetic stream",
        "output": "the runs folder (the run goes in <output>/<experiment>/<group>/<name>-seed<seed>-<key>)",
        "timeout": "seconds a process waits for a lost peer before the launch stops"}


def synthetic_stream(n_tokens: int, vocab_size: int, seed: int) -> torch.Tensor:
    """A learnable id stream: a random walk over the vocabulary (each token is near the last one)."""
    if n_tokens < 2 or vocab_size < 8:
        raise ValueError(f"need n_tokens >= 2 and vocab_size >= 8, got {n_tokens}, {vocab_size}")
    generator = torch.Generator().manual_seed(seed)
    steps = torch.randint(-2, 3, (n_tokens,), generator=generator)
    return (steps.cumsum(0) % (vocab_size - 1) + 1).long()   # id 0 stays free as the eos / pad id


def gated_run(args: RunArgs) -> RunSpec:
    """Chapter 6's gated GPT of ``args.profile``, capped at ``--steps``, with ``--batch`` / ``--accumulation``."""
    profile = idea_profile(args.profile, seed=args.seed)
    if args.steps is not None and args.steps < 1:
        raise ValueError(f"--steps must be >= 1, got {args.steps}")
    spec = ie.idea_run(profile, "gated", True, steps=args.steps)
    t = spec.config.train
    accumulation = args.accumulation or t.accumulation
    # the command line's split of the batch is the run's on every device: no separate CUDA micro-batch
    train = replace(t, batch_size=args.batch or t.batch_size, accumulation=accumulation, cuda_micro_batch=None)
    return replace(spec, config=replace(spec.config, train=train))


@dataclass(frozen=True)
class StreamRun:
    """Chapter 6's gated run on :func:`synthetic_stream` instead of WikiText (the last tenth validates)."""

    run: object          # the gated run's semlm.idea.wikitext_experiment.IdeaRun
    n_tokens: int
    vocab_size: int


class StreamExperiment(runs.Experiment):
    """The idea-gated GPT on a synthetic token stream: a run needs no dataset (tests, a first multi-GPU launch)."""

    name = "idea-stream"

    def data_key(self, spec: RunSpec):
        return spec.config.n_tokens, spec.config.vocab_size, spec.seed, spec.config.run.size, spec.config.run.idea

    def prepare(self, spec: RunSpec):
        config = spec.config
        stream = synthetic_stream(config.n_tokens, config.vocab_size, spec.seed)
        split, L, K = len(stream) * 9 // 10, config.run.size.block_size, config.run.idea.window
        return TokenStream(stream[:split], L, K), TokenBlocks.from_stream(stream[split:], L, K)

    def build(self, spec: RunSpec, data) -> IdeaGPTForCausalLM:
        run = spec.config.run
        return IdeaGPTForCausalLM(ie.model_config(run, spec.config.vocab_size, True, run.idea))

    def fit(self, spec: RunSpec, data) -> runs.Fit:
        return runs.Fit(data[0], data[1], spec.config.run.train, idea_loss_fn(spec.config.run.idea, [], True))

    def evaluate(self, spec: RunSpec, data, model, result) -> dict:
        return {"val_ppl": result.history[-1]["val_ppl"] if result.history else None}

    def total_steps(self, spec: RunSpec) -> int:
        return spec.config.run.train.max_steps


STREAM = StreamExperiment()


def launch_run(args: RunArgs, world_size: int = 1) -> tuple[runs.Experiment, RunSpec]:
    """The experiment and spec a launch of ``world_size`` processes trains: chapter 6's gated run
    (:func:`gated_run`), on WikiText or, with ``--synthetic``, on :data:`STREAM`."""
    spec = replace(gated_run(args), world_size=world_size)
    if args.synthetic is None:
        return ie.IDEA, spec
    return STREAM, replace(spec, group="synthetic", config=StreamRun(spec.config, args.synthetic, args.vocab_size))


def train(args: RunArgs) -> runs.RunRecord:
    """Train (or find in the cache) the run on every process ``accelerate`` started (or just this one)."""
    from datetime import timedelta

    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs

    if args.timeout < 1:
        raise ValueError(f"--timeout must be >= 1 second, got {args.timeout}")
    accelerator = Accelerator(kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=args.timeout))])
    experiment, spec = launch_run(args, accelerator.num_processes)
    with quiet_transformers():
        record = runs.run_one(experiment, spec, args.output, accelerator=accelerator,
                              device=None if accelerator.num_processes > 1 else str(accelerator.device))
    if accelerator.is_main_process:
        print(f"{record.status}: {record.run_dir} ({record.world_size} process"
              f"{'es' if record.world_size > 1 else ''}, {record.steps} steps, val PPL "
              f"{record.history[-1]['val_ppl']:.3f})", flush=True)
    accelerator.end_training()
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m semlm.distributed", description=__doc__.splitlines()[0])
    for option in fields(RunArgs):
        parser.add_argument(f"--{option.name.replace('_', '-')}", default=option.default, help=HELP.get(option.name),
                            type=int if option.default is None else type(option.default))
    try:
        train(RunArgs(**vars(parser.parse_args(argv))))
    except (ValueError, FileNotFoundError, FileExistsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
