"""Data-parallel training of the idea-gated GPT (paper B) with Hugging Face ``accelerate``.

    accelerate launch --multi_gpu --num_processes 4 -m semlm.distributed --profile paper --output runs/ddp
    ACCELERATE_USE_CPU=1 torchrun --nproc_per_node 2 -m semlm.distributed --synthetic 20000 --steps 10
    python -m semlm.distributed ...          # the same run in one process

(On CPUs, ``accelerate launch --cpu --num_processes 2`` starts several processes only through MPI;
``torchrun`` with ``ACCELERATE_USE_CPU=1``, or ``accelerate.debug_launcher`` as in the tests, gives
two gloo processes without it.)

Everything that defines the experiment comes from :mod:`semlm.idea.wikitext_experiment`: the profile
(model size, idea settings, learning rate), the WikiText token blocks and stopwords, the model
configuration and the loss (CE on the gated logits + lambda * idea BCE, alpha ramped). This
module only adds what several processes need, through :class:`accelerate.Accelerator`:

* ``prepare`` wraps the model (DistributedDataParallel on several processes), the optimiser, the
  learning-rate schedule and the data loader;
* the loader runs with ``split_batches=True``: ``--batch`` is the *global* micro-batch, and each of
  N processes gets a 1/N slice of it, so a run on N processes sees exactly the batches of a
  one-process run with the same arguments (the test checks losses and weights agree);
* ``accumulate`` handles gradient accumulation (``--accumulation`` micro-batches per step);
* the model is saved once, by the main process (``save_pretrained`` with accelerate's
  ``save_function`` and gathered ``state_dict``), as ``<output>/model`` plus ``history.json``.

``--synthetic N`` trains on a seeded synthetic token stream of N tokens instead of WikiText,
so the multi-process path can be tested without any dataset.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from semlm.idea import wikitext_experiment as ie
from semlm.idea.model import IdeaGPTForCausalLM


@dataclass(frozen=True)
class RunArgs:
    profile: str = "smoke"
    seed: int = 111
    steps: int | None = None          # optimiser steps (default: the profile's)
    batch: int | None = None          # global micro-batch: sequences per forward, over all processes
    accumulation: int = 1             # micro-batches per optimiser step
    synthetic: int | None = None      # tokens of a synthetic stream instead of WikiText
    vocab_size: int = 256             # vocabulary of the synthetic stream
    output: str = "book/_build/runs/distributed"


def synthetic_stream(n_tokens: int, vocab_size: int, seed: int) -> torch.Tensor:
    """A learnable id stream: a random walk over the vocabulary (each token is near the last one)."""
    if n_tokens < 2 or vocab_size < 8:
        raise ValueError(f"need n_tokens >= 2 and vocab_size >= 8, got {n_tokens}, {vocab_size}")
    generator = torch.Generator().manual_seed(seed)
    steps = torch.randint(-2, 3, (n_tokens,), generator=generator)
    return (steps.cumsum(0) % (vocab_size - 1) + 1).long()   # id 0 stays free as the eos / pad id


class BlockDataset(torch.utils.data.Dataset):
    """The rows of :class:`semlm.idea.wikitext_experiment.TokenBlocks` in a fixed, seeded order (the same on every process)."""

    def __init__(self, blocks, seed: int):
        self.blocks = blocks
        self.order = torch.randperm(len(blocks), generator=torch.Generator().manual_seed(seed))

    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.blocks.input_ids[self.order[index]]


def as_batch(rows: torch.Tensor, block_size: int):
    """Rows of L + K ids -> the inputs / targets / idea windows the loss reads (as ``TokenBlocks.batch``)."""
    return ie.TokenBatch(rows[:, :block_size].clamp_min(0), rows[:, 1:block_size + 1], rows[:, 1:])


def _data(args: RunArgs, profile):
    """(train blocks, vocabulary size, stopword ids): WikiText through the chapter's pipeline, or synthetic."""
    if args.synthetic is not None:
        stream = synthetic_stream(args.synthetic, args.vocab_size, args.seed)
        return ie.TokenBlocks.from_stream(stream, profile.size.block_size, profile.idea.window), args.vocab_size, []
    data = ie.prepare_data(profile)
    return data.blocks("train", profile), len(data.tokenizer), list(data.stopword_ids)


def train(args: RunArgs) -> dict:
    """Train on every process ``accelerate`` started (or just this one); returns the history record."""
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration, set_seed
    from transformers import get_cosine_schedule_with_warmup

    profile = ie.idea_profile(args.profile, seed=args.seed)
    t = profile.train
    steps = args.steps if args.steps is not None else getattr(t, "max_steps", None)
    if not steps or steps < 1:
        raise ValueError(f"--steps must be >= 1, got {args.steps}")
    batch = args.batch or t.batch_size // t.accumulation  # one micro-batch of the profile
    accelerator = Accelerator(gradient_accumulation_steps=args.accumulation,
                              dataloader_config=DataLoaderConfiguration(split_batches=True))
    if batch % accelerator.num_processes:
        raise ValueError(f"--batch {batch} must be divisible by the number of processes ({accelerator.num_processes})")

    blocks, vocab_size, stop_ids = _data(args, profile)
    if len(blocks) < batch:
        raise ValueError(f"{len(blocks)} training blocks are fewer than one batch of {batch}; add data or lower --batch")
    loader = torch.utils.data.DataLoader(BlockDataset(blocks, args.seed), batch_size=batch, shuffle=False,
                                         drop_last=True)
    set_seed(args.seed)                                   # the same initial weights on every process
    model = IdeaGPTForCausalLM(ie.model_config(profile, vocab_size, idea=True))
    if hasattr(ie, "apply_authors_choices"):
        model = ie.apply_authors_choices(model, profile.size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=t.lr, weight_decay=getattr(t, "weight_decay", 0.01))
    warmup = min(getattr(t, "warmup_steps", 0), steps // 10)
    schedule = get_cosine_schedule_with_warmup(optimizer, warmup, steps)
    model, optimizer, loader, schedule = accelerator.prepare(model, optimizer, loader, schedule)
    loss_fn = ie.idea_loss_fn(profile.idea, stop_ids, idea=True)
    takes_advance = "advance" in inspect.signature(loss_fn).parameters
    grad_clip = getattr(t, "grad_clip", None)

    history, micro_losses, micro, step = [], [], 0, 0
    model.train()
    while step < steps:
        for rows in loader:
            batch_rows = as_batch(rows, profile.size.block_size)
            with accelerator.accumulate(model):
                extra = {"advance": micro % args.accumulation == 0} if takes_advance else {}
                loss, _ = loss_fn(model, batch_rows, **extra)
                accelerator.backward(loss)
                if accelerator.sync_gradients and grad_clip is not None:
                    accelerator.clip_grad_norm_(model.parameters(), grad_clip)
                optimizer.step()
                schedule.step()
                optimizer.zero_grad()
            micro += 1
            micro_losses.append(accelerator.gather(loss.detach()[None]).mean().item())
            if accelerator.sync_gradients:
                step += 1
                history.append({"step": step, "loss": sum(micro_losses) / len(micro_losses)})
                micro_losses = []
                if step >= steps:
                    break

    output = Path(args.output)
    accelerator.wait_for_everyone()
    unwrapped = accelerator.unwrap_model(model)
    unwrapped.save_pretrained(str(output / "model"), is_main_process=accelerator.is_main_process,
                              save_function=accelerator.save, state_dict=accelerator.get_state_dict(model))
    record = {"processes": accelerator.num_processes, "global_batch": batch, "accumulation": args.accumulation,
              "steps": steps, "profile": profile.name, "seed": args.seed,
              "data": "synthetic" if args.synthetic is not None else profile.dataset, "history": history}
    if accelerator.is_main_process:
        (output / "history.json").write_text(json.dumps(record, indent=1))
    accelerator.wait_for_everyone()
    accelerator.end_training()
    return record


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m semlm.distributed", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="smoke", help="smoke, cpu or paper (semlm.idea.wikitext_experiment)")
    parser.add_argument("--seed", type=int, default=111)
    parser.add_argument("--steps", type=int, default=None, help="optimiser steps (default: the profile's)")
    parser.add_argument("--batch", type=int, default=None,
                        help="global micro-batch, split over the processes (default: the profile's)")
    parser.add_argument("--accumulation", type=int, default=1, help="micro-batches per optimiser step")
    parser.add_argument("--synthetic", type=int, default=None, metavar="N",
                        help="train on a synthetic stream of N tokens (no dataset needed)")
    parser.add_argument("--vocab-size", type=int, default=256, help="vocabulary of the synthetic stream")
    parser.add_argument("--output", default=RunArgs.output, help="folder for model/ and history.json")
    return parser


def main(argv: list[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    try:
        train(RunArgs(**{key.replace("-", "_"): value for key, value in vars(options).items()}))
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
