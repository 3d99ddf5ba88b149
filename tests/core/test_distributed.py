"""Data-parallel training through accelerate gives the one-process result: two CPU processes (gloo,
started by accelerate's debug_launcher) with a global batch split between them train the same
idea-gated GPT as one process with that whole batch, on a synthetic stream (no dataset)."""

import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from semlm.core.distributed import BlockDataset, as_batch, synthetic_stream

ARGS = ["--synthetic", "6000", "--steps", "3", "--batch", "8", "--accumulation", "2", "--seed", "5"]
TWO_PROCESSES = """import sys
from accelerate import debug_launcher
from semlm.core import distributed
debug_launcher(distributed.main, args=(sys.argv[1:],), num_processes=2)
"""


def run(code_or_module: list[str], output, timeout=120):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
    done = subprocess.run([sys.executable, *code_or_module, *ARGS, "--output", str(output)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((output / "history.json").read_text()), load_file(output / "model" / "model.safetensors")


def test_two_processes_train_the_same_model_as_one_with_the_same_global_batch(tmp_path):
    one, weights_one = run(["-m", "semlm.core.distributed"], tmp_path / "one")
    two, weights_two = run(["-c", TWO_PROCESSES], tmp_path / "two")
    assert one["processes"] == 1 and two["processes"] == 2
    assert one["global_batch"] == two["global_batch"] == 8
    losses_one = [row["loss"] for row in one["history"]]
    losses_two = [row["loss"] for row in two["history"]]
    assert len(losses_one) == len(losses_two) == 3
    assert losses_one == pytest.approx(losses_two, rel=1e-5)
    assert losses_one[-1] < losses_one[0]  # it trains
    assert set(weights_one) == set(weights_two)
    for name, tensor in weights_one.items():
        torch.testing.assert_close(tensor, weights_two[name], rtol=1e-4, atol=1e-5, msg=name)


def test_synthetic_stream_is_seeded_and_keeps_id_zero_free():
    a, b = synthetic_stream(500, 64, 3), synthetic_stream(500, 64, 3)
    assert torch.equal(a, b) and not torch.equal(a, synthetic_stream(500, 64, 4))
    assert int(a.min()) >= 1 and int(a.max()) < 64
    with pytest.raises(ValueError, match="vocab_size >= 8"):
        synthetic_stream(500, 4, 0)


def test_block_dataset_order_is_the_same_for_every_process_and_batches_shift_targets():
    from semlm.idea.wikitext_experiment import TokenBlocks

    blocks = TokenBlocks.from_stream(torch.arange(1, 200), block_size=8, window=3)
    first, second = BlockDataset(blocks, seed=1), BlockDataset(blocks, seed=1)
    assert torch.equal(first.order, second.order) and sorted(first.order.tolist()) == list(range(len(blocks)))
    batch = as_batch(torch.stack([first[0], first[1]]), 8)
    assert torch.equal(batch.targets[:, :-1], batch.inputs[:, 1:])
    assert batch.future.shape[1] == 8 + 3 - 1
