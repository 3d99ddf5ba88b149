import json
import math
from dataclasses import replace

import pytest
import torch

from semlm.fusion.losses import FusionLoss
from semlm.fusion.synthetic_experiment import model_config, prepare_data
from semlm.fusion.model import build_model
from semlm.fusion.profiles import synthetic_profile
from semlm.core.train import CheckpointMismatch, set_seed, train
from semlm.core.train_config import TrainConfig, execution_fields


@pytest.fixture(scope="module")
def setup():
    profile = synthetic_profile("smoke", seed=3)
    data = prepare_data(profile.corpus, "causal")
    return profile, data


def fresh(setup, kind="fusion"):
    profile, data = setup
    set_seed(profile.seed)
    return build_model(model_config(profile, kind, len(data.vocab), "causal"))


def run(setup, run_dir=None, config=None, seed=None, **kwargs):
    profile, data = setup
    model = fresh(setup)
    config = config or profile.train
    result = train(model, data.train, data.val, config, FusionLoss.from_config(config, data.adjective_classes),
                   seed=profile.seed if seed is None else seed, run_dir=run_dir, progress=False, **kwargs)
    return model, result


def epochs(setup, n):
    """The optimiser steps of ``n`` epochs of the setup's training data."""
    profile, data = setup
    return n * math.ceil(len(data.train) / profile.train.batch_size)


def test_training_lowers_validation_perplexity(setup):
    _, result = run(setup)
    ppl = result.val_ppl_per_epoch
    assert ppl[-1] < ppl[0] / 10


def test_same_seed_gives_identical_runs(setup):
    model_a, a = run(setup)
    model_b, b = run(setup)
    assert a.val_ppl_per_epoch == b.val_ppl_per_epoch
    for (name, pa), (_, pb) in zip(model_a.state_dict().items(), model_b.state_dict().items()):
        assert torch.equal(pa, pb), name


def test_different_seed_gives_a_different_run(setup):
    profile, _ = setup
    _, a = run(setup)
    _, b = run(setup, seed=99)
    assert a.val_ppl_per_epoch != b.val_ppl_per_epoch


def test_run_folder_from_another_seed_is_refused(setup, tmp_path):
    run(setup, tmp_path / "run", stop_after_step=epochs(setup, 1))
    with pytest.raises(CheckpointMismatch, match=r"differs in: seed"):
        run(setup, tmp_path / "run", seed=99)


def test_a_loss_is_required_and_must_be_callable(setup):
    profile, data = setup
    with pytest.raises(TypeError, match="loss_fn must be a callable .* semlm.fusion.losses.FusionLoss"):
        train(fresh(setup), data.train, data.val, profile.train, data.adjective_classes, seed=0, progress=False)


def test_interrupted_run_resumes_to_the_same_result(setup, tmp_path):
    reference_model, reference = run(setup)
    _, partial = run(setup, tmp_path / "run", stop_after_step=epochs(setup, 3))
    assert partial.status == "interrupted" and len(partial.history) == 3
    assert (tmp_path / "run" / "checkpoint" / "model.safetensors").exists()
    assert not (tmp_path / "run" / "final").exists()  # a partial run never looks finished
    resumed_model, resumed = run(setup, tmp_path / "run")
    assert resumed.status == "resumed"
    assert resumed.val_ppl_per_epoch == reference.val_ppl_per_epoch
    # CPU time is counted per segment and summed over the sessions, as the wall time is
    parts = [row["cpu_seconds"] for row in resumed.history]
    assert all(p > 0 for p in parts) and resumed.cpu_seconds == pytest.approx(sum(parts))
    assert resumed.history[2]["train_cpu_seconds"] == partial.cpu_seconds
    for (name, pa), (_, pb) in zip(reference_model.state_dict().items(), resumed_model.state_dict().items()):
        assert torch.equal(pa, pb), name


def test_finished_run_is_never_trained_again(setup, tmp_path):
    run(setup, tmp_path / "run")
    weights = (tmp_path / "run" / "final" / "model.safetensors").read_bytes()
    with pytest.raises(FileExistsError, match="finished run"):
        run(setup, tmp_path / "run")
    assert (tmp_path / "run" / "final" / "model.safetensors").read_bytes() == weights


def test_run_folder_from_another_config_is_refused_and_kept(setup, tmp_path):
    profile, _ = setup
    run(setup, tmp_path / "run")
    before = json.loads((tmp_path / "run" / "run.json").read_text())
    other = TrainConfig(**{**vars(profile.train), "lr": 1e-3})
    with pytest.raises(CheckpointMismatch, match=r"different configuration \(differs in: train_config\)"):
        run(setup, tmp_path / "run", config=other)
    assert json.loads((tmp_path / "run" / "run.json").read_text()) == before
    assert (tmp_path / "run" / "final" / "model.safetensors").exists()


@pytest.mark.parametrize("kwargs, message", [({"epochs": 0}, "epochs"), ({"lr": -1.0}, "lr"),
                                             ({"warmup_fraction": 1.5}, "warmup_fraction")])
def test_bad_train_config_is_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kwargs)


def test_progress_bars_are_off_when_the_book_runner_says_so(monkeypatch):
    from semlm.core.train import progress_bar

    assert not progress_bar(10, "x").disable
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert progress_bar(10, "x").disable


def test_ablation_variants_train_the_right_model_with_the_right_losses(tmp_path):
    from semlm.core import runs as runner
    from semlm.fusion.synthetic_experiment import SYNTHETIC, synthetic_runs

    profile = synthetic_profile("smoke", seed=4)
    specs = synthetic_runs(profile, ("fusion", "fusion_no_gate", "fusion_no_aux", "fusion_no_uniformizer"), ("causal",))
    records = runner.run_many(SYNTHETIC, specs, runner.RunContext(profile.name, tmp_path, workers=1, progress=False))
    runs = runner.nested(records, "name")
    assert runs["fusion_no_gate"].load().gate is None and runs["fusion"].load().gate is not None
    histories = {name: tuple(run.val_ppl_per_epoch) for name, run in runs.items()}
    assert len(set(histories.values())) == 4  # each ablation changes training
    assert len({run.run_dir for run in runs.values()}) == 4


def test_unknown_model_variant_lists_the_choices(tmp_path):
    from semlm.fusion.synthetic_experiment import synthetic_runs

    with pytest.raises(ValueError, match="unknown model 'fusion_no_foo'; choose from: baseline, fusion, fusion_no_gate"):
        synthetic_runs(synthetic_profile("smoke"), ("fusion_no_foo",))


# --- step mode: paper B's loop (random windows of a token stream, accumulation, cosine_min_lr) -------


def idea_setup(**train_kwargs):
    """A tiny idea-gated GPT, a token stream, validation blocks, the authors' v1 recipe at a few steps."""
    from dataclasses import replace as dc_replace

    from semlm.idea.data import TokenBlocks, TokenStream
    from semlm.idea.loss import idea_loss_fn
    from semlm.idea.wikitext_experiment import model_config
    from semlm.idea.model import IdeaGPTForCausalLM
    from semlm.idea.profiles import authors_v1_training, idea_profile

    profile = idea_profile("smoke")
    idea = dc_replace(profile.idea, window=4, alpha_ramp_steps=4)
    ids = torch.randint(1, 32, (3000,), generator=torch.Generator().manual_seed(0))
    stream = TokenStream(ids[:2500], profile.size.block_size, idea.window)
    val = TokenBlocks.from_stream(ids[2500:], profile.size.block_size, idea.window)
    config = dc_replace(authors_v1_training(max_steps=6, micro_batch=4, accumulation=2, lr=3e-3,
                                            min_lr=3e-4, warmup_steps=2, eval_every=2), **train_kwargs)
    torch.manual_seed(1)
    model = IdeaGPTForCausalLM(model_config(profile, 32, True, idea))
    return model, stream, val, config, idea_loss_fn(idea, [1, 2], True), idea


def train_steps_run(run_dir=None, **kwargs):
    train_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k not in ("stop_after_step",)}
    model, stream, val, config, loss_fn, idea = idea_setup(**train_kwargs)
    result = train(model, stream, val, config, loss_fn, seed=7, run_dir=run_dir, progress=False, **kwargs)
    return model, result, config, idea


def test_step_mode_runs_max_steps_of_random_windows_with_the_authors_schedule_and_ramp():
    import math

    from semlm.idea.loss import training_gate

    model, result, config, idea = train_steps_run(eval_every=1)
    assert result.steps == config.max_steps == len(result.history)
    assert [row["step"] for row in result.history] == list(range(1, 7)) and "epoch" not in result.history[0]

    def get_lr(step):  # the authors' get_lr
        if step < config.warmup_steps:
            return config.lr * step / config.warmup_steps
        ratio = (step - config.warmup_steps) / (config.max_steps - config.warmup_steps)
        return config.min_lr + 0.5 * (1 + math.cos(math.pi * ratio)) * (config.lr - config.min_lr)

    # row of step s: the learning rate and alpha that optimiser step s - 1 used
    assert [row["lr"] for row in result.history] == pytest.approx([get_lr(s) for s in range(6)], rel=1e-9)
    assert [row["alpha"] for row in result.history] == [training_gate(idea).at_step(s).alpha for s in range(6)]
    assert result.history[0]["alpha"] == 0.0 and result.history[-1]["alpha"] == idea.alpha


def test_step_mode_resumes_bit_identically(tmp_path):
    whole, full, _, _ = train_steps_run()
    _, part, _, _ = train_steps_run(tmp_path / "run", stop_after_step=2)
    assert part.status == "interrupted" and part.steps == 2
    resumed, again, _, _ = train_steps_run(tmp_path / "run")
    assert again.status == "resumed" and again.steps == 6
    assert [r["val_ppl"] for r in again.history] == [r["val_ppl"] for r in full.history]
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name


def test_accumulated_micro_batches_make_the_same_update_as_one_batch():
    one, a, _, _ = train_steps_run(accumulation=1)
    two, b, _, _ = train_steps_run(accumulation=2)
    four, c, _, _ = train_steps_run(accumulation=4)
    for (name, x), y, z in zip(one.state_dict().items(), two.state_dict().values(), four.state_dict().values()):
        assert torch.allclose(x, y, atol=1e-5) and torch.allclose(x, z, atol=1e-5), name
    assert a.history[-1]["val_ppl"] == pytest.approx(c.history[-1]["val_ppl"], rel=1e-4)


def test_a_cuda_micro_batch_changes_the_micro_batches_on_a_cuda_device_only():
    config = TrainConfig(batch_size=32, accumulation=4, max_steps=3, cuda_micro_batch=32)
    assert config.micro_batches("cpu") == 4 and config.micro_batches("cuda") == 1
    assert TrainConfig(batch_size=32, accumulation=4).micro_batches("cuda") == 4
    with pytest.raises(ValueError, match="cuda_micro_batch must be >= 1 and divide batch_size 32"):
        TrainConfig(batch_size=32, cuda_micro_batch=12)
    assert TrainConfig(compile_on_cuda="reduce-overhead").compile_on_cuda == "reduce-overhead"
    with pytest.raises(ValueError, match="compile_on_cuda must be True, False or one of"):
        TrainConfig(compile_on_cuda="fastest")


def test_how_a_device_executes_a_run_is_not_part_of_its_description_or_key(tmp_path):
    """cuda_micro_batch and compile_on_cuda make the same updates: a run folder trained with one value
    is the same run (and resumes) under another."""
    from semlm.core.runs import RunSpec

    base = TrainConfig(batch_size=8, accumulation=2, max_steps=3)
    on_gpu = replace(base, cuda_micro_batch=8, compile_on_cuda=True)
    assert execution_fields(base) == {"cuda_micro_batch", "compile_on_cuda"}
    assert RunSpec("m", 1, base).description() == RunSpec("m", 1, on_gpu).description()
    _, first, _, _ = train_steps_run(tmp_path / "run", stop_after_step=2)
    _, again, _, _ = train_steps_run(tmp_path / "run", cuda_micro_batch=8, compile_on_cuda=True)
    assert first.status == "interrupted" and again.status == "resumed"


def test_random_windows_need_max_steps():
    with pytest.raises(ValueError, match="random_windows' has no epochs: set max_steps"):
        TrainConfig(sampling="random_windows")


@pytest.mark.parametrize("schedule", ["cosine", "cosine_min_lr", "constant", "constant_warmup"])
def test_learning_rate_schedules_equal_transformers_schedulers(schedule):
    from transformers import (get_constant_schedule, get_constant_schedule_with_warmup,
                              get_cosine_schedule_with_warmup, get_cosine_with_min_lr_schedule_with_warmup)

    from semlm.core.train import make_scheduler

    config = TrainConfig(lr=1e-3, min_lr=1e-4, warmup_steps=7, schedule=schedule, max_steps=50)
    ours_opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=config.lr)
    theirs_opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=config.lr)
    ours = make_scheduler(ours_opt, config, 50)
    theirs = {"cosine": lambda: get_cosine_schedule_with_warmup(theirs_opt, 7, 50),
              "cosine_min_lr": lambda: get_cosine_with_min_lr_schedule_with_warmup(theirs_opt, 7, 50, min_lr=1e-4),
              "constant": lambda: get_constant_schedule(theirs_opt),
              "constant_warmup": lambda: get_constant_schedule_with_warmup(theirs_opt, 7)}[schedule]()
    for _ in range(55):
        assert ours.get_last_lr()[0] == pytest.approx(theirs.get_last_lr()[0], rel=1e-12, abs=1e-15)
        ours_opt.step(), theirs_opt.step()
        ours.step(), theirs.step()


def test_precision_is_decided_by_the_config_and_the_device():
    from semlm.core.precision import autocast_dtype

    assert autocast_dtype(None, "cuda") is None and autocast_dtype(None, "cpu") is None
    assert autocast_dtype("bf16", "cpu") == autocast_dtype("bf16", "cuda") == torch.bfloat16
    assert autocast_dtype("bf16_on_cuda", "cpu") is None and autocast_dtype("bf16_on_cuda", "cuda") == torch.bfloat16
    with pytest.raises(ValueError, match="autocast must be one of"):
        TrainConfig(autocast="fp16")


def test_paper_b_trains_in_bf16_on_a_gpu_and_paper_a_in_float32():
    from semlm.idea.profiles import idea_profile, lora_profile, topic_drift_profile

    assert idea_profile("smoke").train.autocast == topic_drift_profile("smoke").train.autocast == "bf16_on_cuda"
    assert synthetic_profile("smoke").train.autocast is None
    assert lora_profile("smoke").book_backbone.train.autocast is None
