"""``python -m semlm.fusion``: paper A's synthetic experiment as one command, from scratch.

Trains and evaluates both causal models (baseline and fusion) at ``--profile`` in a temporary run folder, side by
side in forked one-thread workers as the book does, prints their validation perplexity and keeps nothing. It is
the process ``python -m semlm.bench --authors-script`` times against the authors' script, so it imports only what
the experiment needs (no pandas, no plotting, no benchmark code): the memory it reports is the experiment's.
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from semlm.fusion.profiles import synthetic_profile
from semlm.fusion.synthetic_experiment import train_causal_models
from semlm.profiles import PROFILES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m semlm.fusion", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu", choices=PROFILES, help="scale (default: cpu, the book's)")
    parser.add_argument("--seed", type=int, default=111)
    parser.add_argument("--workers", type=int, default=None, help="parallel training processes (default: up to 2)")
    args = parser.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        parser.error(f"--workers must be >= 1, got {args.workers}")
    with tempfile.TemporaryDirectory(prefix="semlm-synthetic-") as runs_dir:
        runs = train_causal_models(synthetic_profile(args.profile, args.seed), runs_dir, args.workers)
    print("validation PPL: " + ", ".join(f"{name} {run.metrics.ppl:.3f}" for name, run in runs.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
