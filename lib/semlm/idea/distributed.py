"""Data-parallel training of the idea-gated GPT (paper B) through the one trainer and Hugging Face ``accelerate``.

    accelerate launch --multi_gpu --num_processes 4 -m semlm.distributed --profile paper --output runs/ddp
    ACCELERATE_USE_CPU=1 torchrun --nproc_per_node 2 -m semlm.distributed --synthetic 20000 --steps 10
    python -m semlm.distributed ...          # the same run in one process

Chapter 6's gated run (:data:`semlm.idea.wikitext_experiment.IDEA`) trained by :func:`semlm.core.train.train`
with an :class:`accelerate.Accelerator`: every process draws the same global batch (``--batch``, in
``--accumulation`` micro-batches) and trains on its share of the rows, so N processes make the updates of one
(tested). The data is prepared under ``main_process_first``; the run folder is ``<output>/train``, and the main
process also writes ``<output>/model`` and ``<output>/history.json``. ``--synthetic N`` trains on a seeded
synthetic stream of N tokens instead of WikiText.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path

import torch

from semlm.core import train as trainer
from semlm.core.runs import RunSpec
from semlm.idea import wikitext_experiment as ie
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


HELP = {"profile": "smoke, cpu or paper (semlm.idea.wikitext_experiment)",
        "steps": "optimiser steps (default: the profile's; a cap keeps warmup and ramp shares)",
        "batch": "global batch per optimiser step, split over micro-batches and processes (default: the profile's)",
        "accumulation": "micro-batches per optimiser step (default: the profile's)",
        "synthetic": "train on a synthetic stream of this many tokens instead of WikiText (no dataset needed)",
        "vocab_size": "vocabulary of the synthetic stream", "output": "folder for train/, model/ and history.json"}


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


def _fit(args: RunArgs, spec: RunSpec, accelerator):
    """(model, train data, validation data, loss, run description) of ``spec``, as chapter 6 builds them; with
    ``--synthetic``, on :func:`synthetic_stream` (the last tenth validates; no stopwords)."""
    run, description = spec.config, spec.description()
    if args.synthetic is not None:
        stream = synthetic_stream(args.synthetic, args.vocab_size, args.seed)
        split, L, K = len(stream) * 9 // 10, run.size.block_size, run.idea.window
        trainer.set_seed(spec.seed)  # the same initial weights on every process
        model = IdeaGPTForCausalLM(ie.model_config(run, args.vocab_size, True, run.idea))
        return (model, ie.TokenStream(stream[:split], L, K), ie.TokenBlocks.from_stream(stream[split:], L, K),
                ie.idea_loss_fn(run.idea, [], True), {**description, "data": "synthetic"})
    with accelerator.main_process_first():  # the main process writes the data caches, then the others read them
        data = ie.IDEA.data(spec)
        fit = ie.IDEA.fit(spec, data)
    trainer.set_seed(spec.seed)
    return ie.IDEA.build(spec, data), fit.train_data, fit.val_data, fit.loss_fn, {**description, "data": run.dataset}


def train(args: RunArgs) -> dict:
    """Train on every process ``accelerate`` started (or just this one); returns the history record."""
    from accelerate import Accelerator

    accelerator = Accelerator()
    spec = gated_run(args)
    model, train_data, val_data, loss_fn, description = _fit(args, spec, accelerator)
    output = Path(args.output)
    result = trainer.train(model, train_data, val_data, spec.config.train, loss_fn, seed=spec.seed,
                           run_dir=output / "train", run_description=description, accelerator=accelerator)
    record = {"processes": accelerator.num_processes, "global_batch": spec.config.train.batch_size,
              "accumulation": spec.config.train.accumulation, "steps": result.steps, "profile": args.profile,
              "seed": spec.seed, "data": description["data"], "history": result.history}
    if accelerator.is_main_process:
        with quiet_transformers():
            model.save_pretrained(str(output / "model"))
        (output / "history.json").write_text(json.dumps(record, indent=1))
    accelerator.wait_for_everyone()
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
