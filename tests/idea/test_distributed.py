"""Data-parallel training through the one trainer gives the one-process result: two CPU processes (gloo,
started by accelerate's debug_launcher) with a global batch split between them train the same
idea-gated GPT as one process with that whole batch, on a synthetic stream (no dataset)."""

import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from semlm.idea.distributed import RunArgs, gated_run, synthetic_stream

ARGS = ["--synthetic", "6000", "--steps", "3", "--batch", "8", "--accumulation", "2", "--seed", "5"]
TWO_PROCESSES = """import sys
from accelerate import debug_launcher
from semlm.idea import distributed
debug_launcher(distributed.main, args=(sys.argv[1:],), num_processes=2)
"""


def run(code_or_module: list[str], output, timeout=180):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
    done = subprocess.run([sys.executable, *code_or_module, *ARGS, "--output", str(output)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((output / "history.json").read_text()), load_file(output / "train" / "final" / "model.safetensors")


def test_two_processes_train_the_same_model_as_one_with_the_same_global_batch(tmp_path):
    one, weights_one = run(["-m", "semlm.distributed"], tmp_path / "one")
    two, weights_two = run(["-c", TWO_PROCESSES], tmp_path / "two")
    assert one["processes"] == 1 and two["processes"] == 2
    assert one["global_batch"] == two["global_batch"] == 8
    losses_one = [row["train_loss"] for row in one["history"]]
    losses_two = [row["train_loss"] for row in two["history"]]
    assert len(losses_one) == len(losses_two) == 3
    assert losses_one == pytest.approx(losses_two, rel=1e-5)
    assert losses_one[-1] < losses_one[0]  # it trains
    assert [r["val_ppl"] for r in one["history"]] == pytest.approx([r["val_ppl"] for r in two["history"]], rel=1e-4)
    assert (tmp_path / "one" / "model" / "config.json").is_file()  # save_pretrained for from_pretrained
    assert set(weights_one) == set(weights_two)
    for name, tensor in weights_one.items():
        torch.testing.assert_close(tensor, weights_two[name], rtol=1e-4, atol=1e-5, msg=name)


def test_the_distributed_run_is_chapter_6s_gated_run_with_the_one_trainer_recipe():
    from semlm.idea.profiles import idea_profile
    from semlm.idea.wikitext_experiment import idea_run

    spec = gated_run(RunArgs(profile="smoke", seed=5, steps=3, batch=8, accumulation=2))
    chapter = idea_run(idea_profile("smoke", seed=5), "gated", True, steps=3)
    t, theirs = spec.config.train, chapter.config.train
    assert (t.batch_size, t.accumulation) == (8, 2) and spec.seed == chapter.seed == 5
    assert (t.max_steps, t.schedule, t.warmup_steps, t.sampling, t.autocast) == \
        (theirs.max_steps, theirs.schedule, theirs.warmup_steps, theirs.sampling, "bf16_on_cuda")
    assert spec.config.idea == chapter.config.idea  # the alpha ramp keeps its share of the capped run


def test_synthetic_stream_is_seeded_and_keeps_id_zero_free():
    a, b = synthetic_stream(500, 64, 3), synthetic_stream(500, 64, 3)
    assert torch.equal(a, b) and not torch.equal(a, synthetic_stream(500, 64, 4))
    assert int(a.min()) >= 1 and int(a.max()) < 64
    with pytest.raises(ValueError, match="vocab_size >= 8"):
        synthetic_stream(500, 4, 0)


def test_a_batch_that_does_not_split_over_the_processes_is_refused(tmp_path):
    from semlm.idea import distributed

    assert distributed.main(["--synthetic", "3000", "--steps", "1", "--batch", "6", "--accumulation", "4",
                             "--output", str(tmp_path)]) == 1
