"""Data-parallel training through the one runner gives the one-process result, with one key, one lock and one
record (issue 50): two CPU processes (gloo, started by accelerate's debug_launcher or torchrun) with a global batch
split between them train the same idea-gated GPT as one process with that whole batch, on a synthetic stream (no
dataset); a second launch trains nothing; the chapter API loads the run by its world size; a killed rank stops the
launch and leaves no half-written run, and the next launch resumes."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
import torch
from safetensors.torch import load_file

from semlm.core import runs
from semlm.idea.distributed import STREAM, RunArgs, gated_run, launch_run, synthetic_stream

ARGS = ["--synthetic", "6000", "--steps", "3", "--batch", "8", "--accumulation", "2", "--seed", "5"]
RUN_ARGS = RunArgs(synthetic=6000, steps=3, batch=8, accumulation=2, seed=5)
TWO_PROCESSES = """import sys
from accelerate import debug_launcher
from semlm.idea import distributed
debug_launcher(distributed.main, args=(sys.argv[1:],), num_processes=2)
"""
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}


def launch(code_or_module: list[str], output, args=ARGS, timeout=180) -> str:
    done = subprocess.run([sys.executable, *code_or_module, *args, "--output", str(output)], env=ENV,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def folder_of(output, world_size: int, run_args: RunArgs = RUN_ARGS):
    experiment, spec = launch_run(run_args, world_size)
    return runs.run_folder(experiment, spec, output, "cpu", 1)


def run(code_or_module: list[str], output, world_size: int):
    launch(code_or_module, output)
    folder = folder_of(output, world_size)
    record = json.loads((folder / "record.json").read_text())
    return record, load_file(folder / "train" / "final" / "model.safetensors")


def test_two_processes_train_the_same_model_as_one_with_the_same_global_batch(tmp_path):
    one, weights_one = run(["-m", "semlm.distributed"], tmp_path / "one", 1)
    two, weights_two = run(["-c", TWO_PROCESSES], tmp_path / "two", 2)
    assert (one["world_size"], one["backend"]) == (1, "") and (two["world_size"], two["backend"]) == (2, "gloo")
    assert one["config"]["run"]["train"]["batch_size"] == two["config"]["run"]["train"]["batch_size"] == 8
    losses_one = [row["train_loss"] for row in one["history"]]
    losses_two = [row["train_loss"] for row in two["history"]]
    assert len(losses_one) == len(losses_two) == 3
    assert losses_one == pytest.approx(losses_two, rel=1e-5)
    assert losses_one[-1] < losses_one[0]  # it trains
    assert [r["val_ppl"] for r in one["history"]] == pytest.approx([r["val_ppl"] for r in two["history"]], rel=1e-4)
    assert set(weights_one) == set(weights_two)
    for name, tensor in weights_one.items():
        torch.testing.assert_close(tensor, weights_two[name], rtol=1e-4, atol=1e-5, msg=name)


def test_distributed_run_goes_through_run_one(tmp_path):
    output = tmp_path / "runs"
    first = launch(["-c", TWO_PROCESSES], output)
    assert first.startswith("trained: ") and "(2 processes, 3 steps" in first
    folders = [p for p in (output / STREAM.name / "synthetic").iterdir() if p.is_dir()]
    assert folders == [folder_of(output, 2)]  # one run folder: one key, and the world size is in it
    assert folder_of(output, 2) != folder_of(output, 1)
    record = json.loads((folders[0] / "record.json").read_text())
    assert (record["status"], record["world_size"], record["backend"]) == ("trained", 2, "gloo")
    weights = folders[0] / "train" / "final" / "model.safetensors"
    written = weights.stat().st_mtime_ns
    second = launch(["-c", TWO_PROCESSES], output)  # trains nothing: the record is found under the lock
    assert second.startswith("loaded: ") and weights.stat().st_mtime_ns == written
    # the chapter API loads it by naming the world size; it never trains one itself
    experiment, spec = launch_run(RUN_ARGS, 2)
    loaded = runs.run_one(experiment, spec, output)
    assert loaded.status == "loaded" and loaded.world_size == 2 and loaded.history == record["history"]
    assert loaded.load().__class__.__name__ == "IdeaGPTForCausalLM"
    with pytest.raises(ValueError, match="world size of 2: it trains only under a launch"):
        runs.run_one(experiment, spec, tmp_path / "empty")


LONG = ["--synthetic", "20000", "--batch", "8", "--accumulation", "1", "--seed", "6"]
LONG_ARGS = RunArgs(synthetic=20000, batch=8, accumulation=1, seed=6)


def test_killed_rank_leaves_no_half_written_run(tmp_path):
    output = tmp_path / "runs"
    folder = folder_of(output, 2, LONG_ARGS)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29517",
                "-m", "semlm.distributed", *LONG, "--output", str(output), "--timeout", "30"]
    launcher = subprocess.Popen(torchrun, env={**ENV, "ACCELERATE_USE_CPU": "1"}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (folder / "train" / "checkpoint" / "model.safetensors").is_file():
            assert launcher.poll() is None, launcher.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "no checkpoint was written"
            time.sleep(0.05)
        family = psutil.Process(launcher.pid).children(recursive=True)
        ranks = [p for p in family if "semlm.distributed" in " ".join(p.cmdline())]
        assert len(ranks) == 2
        os.kill(ranks[-1].pid, signal.SIGKILL)
        started = time.monotonic()
        launcher.communicate(timeout=90)
        assert launcher.returncode != 0 and time.monotonic() - started < 60
    finally:
        if launcher.poll() is None:
            launcher.kill()
    time.sleep(2)
    left = [p.pid for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert left == [], "processes of the launch outlived it"
    assert not (folder / "record.json").exists() and not (folder / "train" / "final").exists()
    # the next launch resumes from the last checkpoint and finishes the run
    done = subprocess.run(torchrun, env={**ENV, "ACCELERATE_USE_CPU": "1"}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((folder / "record.json").read_text())
    assert record["status"] == "resumed" and record["world_size"] == 2
    assert record["steps"] == record["config"]["run"]["train"]["max_steps"] > record["history"][0]["step"]


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
