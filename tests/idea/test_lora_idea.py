"""The idea head + gate on a frozen LoRA backbone (paper B's FineWeb-Edu setting) and the FineWeb-Edu loader."""

import math
import random
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from transformers import MistralConfig, MistralForCausalLM

from safetensors.torch import load_file

from semlm.data.bpe import as_transformers, train_bpe
from semlm.data.fineweb import load_fineweb, read_documents, split_documents, split_text_into_documents
from semlm.idea.data import TokenBlocks
from semlm.idea.lora_experiment import (LORA, BackboneCheckpoint, BackboneUnavailable, LoraData, LoraRun,
                                        paper_scale_parameter_counts, lora_run, resolve_backbone)
from semlm.core.metrics import perplexity
from semlm.core.runs import RunContext, RunSpec, run_many
from semlm.idea.model import IdeaGate, IdeaGPTConfig, IdeaGPTForCausalLM
from semlm.idea.lora_model import LoraIdeaConfig, LoraIdeaModel, load_backbone
from semlm.idea.profiles import PAPER_BACKBONE, BookBackboneSpec, LoraSettings, lora_profile

FIXTURE = Path(__file__).parents[1] / "fixtures" / "fineweb_small.txt"
VOCAB, HIDDEN, LAYERS = 96, 64, 2  # bitsandbytes' CPU kernels need widths that are multiples of 64


@pytest.fixture(scope="module")
def tiny_mistral(tmp_path_factory) -> Path:
    """A randomly initialised two-layer Mistral saved with save_pretrained (no download)."""
    torch.manual_seed(0)
    config = MistralConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=128, num_hidden_layers=LAYERS,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                           sliding_window=None, tie_word_embeddings=False)
    folder = tmp_path_factory.mktemp("tiny-mistral")
    MistralForCausalLM(config).save_pretrained(str(folder))
    return folder


def wrapper(path, quantization="none", idea=True, **config) -> LoraIdeaModel:
    torch.manual_seed(0)
    return LoraIdeaModel(load_backbone(path, quantization, "cpu"),
                         LoraIdeaConfig(idea_head=idea, quantization=quantization, n_positions=32, **config))


def perturb_trainable(model: LoraIdeaModel, scale: float = 0.05) -> None:
    """LoRA's B matrices start at zero; move every trainable weight so the adapter matters."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.trainable_parameters().values():
            p.add_(scale * torch.randn(p.shape, generator=generator))


def inputs(batch=2, length=12, seed=0):
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


# --- what trains -------------------------------------------------------------------------------


def test_trainable_parameters_are_exactly_the_lora_matrices_and_the_idea_head(tiny_mistral):
    model = wrapper(tiny_mistral)
    names = set(model.trainable_parameters())
    expected_lora = {f"backbone.base_model.model.model.layers.{layer}.self_attn.{proj}.lora_{ab}.default.weight"
                     for layer in range(LAYERS) for proj in ("q_proj", "v_proj") for ab in "AB"}
    expected_idea = {"idea_head.0.weight", "idea_head.0.bias", "idea_head.2.weight", "idea_head.2.bias"}
    assert names == expected_lora | expected_idea
    r, kv_width = 8, 2 * HIDDEN // 4  # v_proj: 2 kv heads of head_dim 16
    lora = LAYERS * ((HIDDEN * r + r * HIDDEN) + (HIDDEN * r + r * kv_width))
    idea = HIDDEN * HIDDEN + HIDDEN + HIDDEN * VOCAB + VOCAB
    assert model.trainable_parameter_counts() == {"lora": lora, "idea_head": idea, "output_adapter": 0, "other": 0}
    # the token head and the embeddings stay frozen
    assert not model.backbone.get_output_embeddings().weight.requires_grad
    assert not model.backbone.get_input_embeddings().weight.requires_grad


def test_the_baseline_trains_only_lora_and_honours_other_target_modules(tiny_mistral):
    model = wrapper(tiny_mistral, idea=False, lora=LoraSettings(target_modules=("k_proj", "o_proj")))
    names = model.trainable_parameters()
    assert names and all(".lora_" in n and ("k_proj" in n or "o_proj" in n) for n in names)
    assert model.idea_head is None and model.trainable_parameter_counts()["idea_head"] == 0


# --- the capacity control ----------------------------------------------------------------------


def test_the_capacity_control_trains_as_many_parameters_as_the_idea_head_and_starts_as_the_baseline(tiny_mistral):
    gated = wrapper(tiny_mistral)
    control = wrapper(tiny_mistral, idea=False, output_adapter=True)
    g, c = gated.trainable_parameter_counts(), control.trainable_parameter_counts()
    assert c["output_adapter"] == g["idea_head"] and c["lora"] == g["lora"] and c["idea_head"] == 0
    assert sum(c.values()) == sum(g.values())
    baseline = wrapper(tiny_mistral, idea=False)
    x = inputs()
    with torch.no_grad():  # zero-initialised output layer, fresh LoRA: the baseline's logits exactly
        torch.testing.assert_close(control(x).logits, baseline(x).logits)
    out = control(x)
    out.logits.logsumexp(-1).sum().backward()
    assert control.output_adapter[2].weight.grad.abs().sum() > 0  # the adapter learns from the token loss
    assert out.idea_logits is None


def test_the_capacity_control_adds_its_adapter_to_the_token_logits(tiny_mistral):
    control = wrapper(tiny_mistral, idea=False, output_adapter=True).eval()
    perturb_trainable(control)
    with torch.no_grad():
        full = control.backbone(input_ids=inputs(), output_hidden_states=True, use_cache=False)
        hidden, head = full.hidden_states[-1], control.backbone.get_output_embeddings()
        expected = torch.nn.functional.linear(hidden, head.weight, head.bias) + control.output_adapter(hidden)
    torch.testing.assert_close(full.logits, expected)
    assert control.idea_head is None and hidden.shape[-1] == HIDDEN
    with pytest.raises(ValueError, match="not both"):
        LoraIdeaConfig(idea_head=True, output_adapter=True)


def test_capacity_control_runs_add_the_control_and_every_further_seed():
    from semlm.idea.lora_experiment import capacity_control_runs, lora_runs

    profile = lora_profile("cpu")
    backbone = BackboneCheckpoint("b", "x", {})
    extra = capacity_control_runs(profile, backbone)
    assert [(s.name, s.seed) for s in extra] == [
        ("control-nf4", 111), ("baseline-nf4", 112), ("gated-nf4", 112), ("control-nf4", 112),
        ("baseline-nf4", 113), ("gated-nf4", 113), ("control-nf4", 113)]
    assert extra[0].config.output_adapter and not extra[0].config.gated
    assert len(extra) + len(lora_runs(profile, backbone)) == 11 and profile.n_seeds == 3
    assert len(capacity_control_runs(lora_profile("smoke"), backbone)) == 4
    assert LORA.data_key(extra[0]) == LORA.data_key(extra[1])  # one data set for every run


# --- the gate ----------------------------------------------------------------------------------


def test_gated_logits_are_the_token_logits_plus_the_idea_gate(tiny_mistral):
    model = wrapper(tiny_mistral).eval()
    perturb_trainable(model)
    with torch.no_grad():
        out = model(inputs(), alpha=0.5)
    expected = out.token_logits + IdeaGate(0.5, -2.0, "scale_then_clamp").apply(out.idea_logits)
    torch.testing.assert_close(out.logits, expected)
    assert out.idea_logits.shape == (2, 12, VOCAB)


def test_alpha_zero_and_fresh_adapters_give_the_backbones_own_logits(tiny_mistral):
    model = wrapper(tiny_mistral).eval()
    plain = load_backbone(tiny_mistral, "none", "cpu")
    with torch.no_grad():
        torch.testing.assert_close(model(inputs(), alpha=0.0).logits, plain(inputs()).logits)


def test_prediction_at_t_ignores_tokens_after_t(tiny_mistral):
    model = wrapper(tiny_mistral).eval()
    perturb_trainable(model)
    x = inputs(1, 10)
    y = x.clone()
    y[:, 6:] = (y[:, 6:] + 1) % VOCAB
    with torch.no_grad():
        torch.testing.assert_close(model(x).logits[:, :6], model(y).logits[:, :6])
        torch.testing.assert_close(model(x).idea_logits[:, :6], model(y).idea_logits[:, :6])


def greedy(model, prompt, alpha, steps):
    ids = prompt
    with torch.no_grad():
        for _ in range(steps):
            ids = torch.cat([ids, model(ids, alpha=alpha).logits[:, -1:].argmax(-1)], dim=1)
    return ids


@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_generate_decodes_from_the_gated_logits_with_the_kv_cache(tiny_mistral, alpha):
    model = wrapper(tiny_mistral).eval()
    perturb_trainable(model, scale=0.5)
    prompt = inputs(2, 4) + 1  # no pad token (0) in the prompt
    out = model.generate(prompt, alpha=alpha, attention_mask=torch.ones_like(prompt), max_new_tokens=6,
                         do_sample=False, pad_token_id=0, eos_token_id=None, use_cache=True)
    assert torch.equal(out, greedy(model, prompt, alpha, 6))
    assert model._gate == model.gate  # generate() leaves the configured gate in place


def test_the_wrapper_accepts_any_causal_lm_such_as_the_books_gpt():
    torch.manual_seed(0)
    gpt = IdeaGPTForCausalLM(IdeaGPTConfig(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=1, n_head=2,
                                           idea_head=False, dropout=0.0))
    model = LoraIdeaModel(gpt, LoraIdeaConfig(lora=LoraSettings(target_modules=("c_attn",))))
    out = model(inputs(2, 8))
    out.logits.sum().backward()
    assert set(model.trainable_parameter_counts()) == {"lora", "idea_head", "output_adapter", "other"}
    assert model.trainable_parameter_counts()["other"] == 0
    assert all(p.grad is not None for p in model.trainable_parameters().values())


# --- 4-bit on CPU ------------------------------------------------------------------------------


def test_nf4_wrapper_runs_forward_and_backward_on_cpu(tiny_mistral):
    import bitsandbytes as bnb

    model = wrapper(tiny_mistral, "nf4").train()
    assert isinstance(model.backbone.base_model.model.model.layers[0].mlp.up_proj, bnb.nn.Linear4bit)
    assert model.backbone.get_memory_footprint() < load_backbone(tiny_mistral, "none", "cpu").get_memory_footprint()
    out = model(inputs(), alpha=0.5)
    out.logits.logsumexp(-1).mean().backward()
    grads = {n: p.grad for n, p in model.trainable_parameters().items()}
    assert all(g is not None and torch.isfinite(g).all() for g in grads.values())
    assert all(g.abs().sum() > 0 for n, g in grads.items() if "lora_B" in n)  # A gets none while B = 0


def test_nf4_adapters_still_get_gradients_after_an_evaluation_pass(tiny_mistral):
    """bitsandbytes repacks 4-bit weights for a backward-less kernel on the first no-grad eval forward
    on AVX512-BF16 CPUs; load_backbone switches that off so LoRA keeps learning after validation."""
    model = wrapper(tiny_mistral, "nf4")
    perturb_trainable(model)
    model.eval()
    with torch.no_grad():
        model(inputs())
    model.train()
    model(inputs(seed=1)).logits.logsumexp(-1).mean().backward()
    lora_a = [p.grad for n, p in model.trainable_parameters().items() if "lora_A" in n]
    assert lora_a and all(g is not None and g.abs().sum() > 0 for g in lora_a)


# --- the paper profile without its requirements -------------------------------------------------


def test_paper_profile_without_gpu_or_network_fails_with_one_clear_line(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.delenv("SEMLM_ALLOW_DOWNLOADS", raising=False)
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    with pytest.raises(BackboneUnavailable) as info:
        resolve_backbone(lora_profile("paper"))
    message = str(info.value)
    assert "\n" not in message and PAPER_BACKBONE in message
    assert "not in the local Hugging Face cache" in message and "--allow-downloads" in message
    if not torch.cuda.is_available():
        assert "no CUDA GPU" in message


def test_profiles_follow_the_authors_lora_run_at_paper_scale():
    paper = lora_profile("paper")
    assert paper.backbone == PAPER_BACKBONE and paper.quantizations == ("nf4",)
    assert (paper.lora.r, paper.lora.lora_alpha, paper.lora.lora_dropout) == (8, 32, 0.05)
    assert paper.lora.target_modules == ("q_proj", "v_proj")
    t, idea = paper.train, paper.idea
    assert (t.lr, t.max_steps, t.eval_every, t.patience, paper.block_size) == (2e-4, 5000, 200, 10, 512)
    assert (idea.alpha, idea.alpha_ramp_steps, idea.idea_weight, idea.window) == (0.5, 1000, 0.1, 20)
    assert idea.gate_variant == "scale_then_clamp" and idea.idea_loss_reduction == "mean"
    assert idea.stopword_list == () and idea.pos_weight is None  # no stopword mask, no pos_weight in v2
    # the authors' v2 train.py: AdamW(lr=2e-4) at a constant rate (torch's default weight decay), clipping at 1.0,
    # a stream of fresh documents (each window read once)
    assert (t.schedule, t.warmup_steps, t.weight_decay, t.grad_clip, t.sampling) == (
        "constant", 0, 0.01, 1.0, "in_order")
    assert (t.label_smoothing, t.aux_weight, t.uniformizer_weight) == (0.0, 0.0, 0.0)
    assert (t.batch_size, t.accumulation) == (32, 8)
    for name in ("smoke", "cpu"):
        assert lora_profile(name).backbone == "book" and lora_profile(name).quantizations[0] == "nf4"
    with pytest.raises(ValueError, match="unknown profile"):
        lora_profile("gpu")


def test_lora_max_steps_caps_the_run_and_keeps_the_ramp_share():
    capped = lora_profile("paper", max_steps=500)
    assert (capped.train.max_steps, capped.idea.alpha_ramp_steps, capped.capped_from) == (500, 100, 5000)
    assert (capped.train.warmup_steps, capped.train.eval_every) == (0, 100)
    assert lora_profile("smoke", max_steps=10_000) == lora_profile("smoke")
    with pytest.raises(ValueError, match="max_steps must be an int >= 1 or None"):
        lora_profile("cpu", max_steps=-1)
    cpu = lora_profile("cpu")
    with pytest.raises(ValueError, match="schedule must be one of constant, cosine"):
        replace(cpu, train=replace(cpu.train, schedule="cosine_min_lr"))
    with pytest.raises(ValueError, match="a LoRA run needs max_steps"):
        replace(cpu, train=replace(cpu.train, max_steps=None))


def test_mistral_7b_counts_follow_from_its_shape_without_weights():
    counts = paper_scale_parameter_counts()
    d, kv, layers, vocab, r = 4096, 1024, 32, 32000, 8
    assert counts["baseline"]["lora"] == counts["gated"]["lora"] == layers * (2 * d * r + d * r + r * kv)
    assert counts["gated"]["idea_head"] == d * d + d + d * vocab + vocab
    assert counts["baseline"]["idea_head"] == counts["gated"]["other"] == 0
    assert counts["control"]["output_adapter"] == counts["gated"]["idea_head"]
    assert counts["control"]["lora"] == counts["baseline"]["lora"] and counts["control"]["idea_head"] == 0


# --- training loop -----------------------------------------------------------------------------


def _run(profile, gated: bool) -> LoraRun:
    backbone = BackboneCheckpoint("x", "x", {})
    return lora_run(profile, backbone, "nf4", gated).config


def test_the_lora_recipe_maps_onto_the_shared_training_loop():
    paper = lora_profile("paper")
    config = _run(paper, True).train_config()
    assert (config.max_steps, config.batch_size, config.accumulation, config.lr, config.weight_decay,
            config.grad_clip) == (5000, 32, 8, 2e-4, 0.01, 1.0)
    # each window once in stream order, constant lr, early stopping only after the 1,000-step alpha ramp
    assert (config.sampling, config.schedule, config.warmup_steps) == ("in_order", "constant", 0)
    assert (config.eval_every, config.patience, config.patience_from_step) == (200, 10, 1000)
    assert _run(paper, False).train_config().patience_from_step == 0  # no gate, nothing ramps
    cpu = _run(lora_profile("cpu"), True).train_config()
    assert (cpu.sampling, cpu.schedule, cpu.warmup_steps, cpu.patience_from_step) == ("shuffle", "cosine", 12, 60)
    gated = _run(paper, True)
    assert [gated.alpha_at(s) for s in (0, 500, 1000, 4000)] == [0.0, 0.25, 0.5, 0.5]
    assert replace(gated, gated=False).alpha_at(4000) == 0.0
    assert LORA.data_key(RunSpec("a", 0, gated)) == LORA.data_key(RunSpec("b", 0, _run(paper, False)))
    with pytest.raises(ValueError, match="accumulation must be >= 1 and divide batch_size"):
        replace(paper, train=replace(paper.train, batch_size=10, accumulation=4))


def test_fresh_documents_refuse_a_stream_too_short_for_the_run():
    profile = lora_profile("paper")
    blocks = TokenBlocks.from_stream(torch.arange(1, 400), 16, 4)
    profile = replace(profile, train=replace(profile.train, max_steps=10, batch_size=8, accumulation=1))
    run = _run(profile, True)
    with pytest.raises(ValueError, match="sampling='in_order'. needs 80 training windows .* give 24"):
        LORA.fit(RunSpec("gated-none", 0, run), LoraData(None, blocks, blocks))


def test_micro_batches_of_token_batches_partition_them_in_order():
    from semlm.idea.data import TokenBatch
    from semlm.core.train import split_batch

    rows = torch.arange(8 * 5).view(8, 5)
    batch = TokenBatch(rows, rows + 1, rows + 2)
    pieces = split_batch(batch, 4)
    assert len(pieces) == 4 and all(p.inputs.shape == (2, 5) for p in pieces)
    assert torch.equal(torch.cat([p.future for p in pieces]), batch.future)
    assert split_batch(batch, 1) == [batch]


@pytest.fixture(scope="module")
def tiny_book_backbone(tmp_path_factory) -> BackboneCheckpoint:
    """A tiny Mistral saved with save_pretrained next to its own byte-level BPE (trained on the FineWeb fixture)."""
    folder = tmp_path_factory.mktemp("tiny-book-backbone")
    tokenizer = as_transformers(train_bpe(read_documents(FIXTURE), 320))
    torch.manual_seed(0)
    config = MistralConfig(vocab_size=320, hidden_size=HIDDEN, intermediate_size=128, num_hidden_layers=1,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                           sliding_window=None, tie_word_embeddings=False, eos_token_id=tokenizer.eos_token_id)
    MistralForCausalLM(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return BackboneCheckpoint("tiny", str(folder), config.to_dict(), status="test")


@pytest.mark.parametrize("fresh_documents, batch_size, accumulation", [(False, 4, 1), (True, 2, 2)])
def test_lora_training_stops_early_keeps_the_best_weights_and_is_cached(tiny_book_backbone, tmp_path, monkeypatch,
                                                                        fresh_documents, batch_size, accumulation):
    (tmp_path / "data" / "fineweb-edu-sample").mkdir(parents=True)
    (tmp_path / "data" / "fineweb-edu-sample" / "fineweb_edu.txt").write_bytes(FIXTURE.read_bytes())
    monkeypatch.setenv("SEMLM_DATA_DIR", str(tmp_path / "data"))
    profile = lora_profile("smoke")
    sampling = "in_order" if fresh_documents else "shuffle"
    profile = replace(profile, validation_fraction=0.34, block_size=16, train_tokens=None, eval_tokens=None,
                      train=replace(profile.train, max_steps=6, eval_every=2, patience=1, batch_size=batch_size,
                                    sampling=sampling, accumulation=accumulation))
    ramp = profile.idea.alpha_ramp_steps
    context = RunContext(profile.name, tmp_path / "runs")
    [run] = run_many(LORA, [lora_run(profile, tiny_book_backbone, "none", True)], context)
    assert run.status == "trained" and run.steps <= 6 and run.stopped_early == (run.steps < 6)
    assert [row["step"] for row in run.history] == list(range(2, run.steps + 1, 2))
    best = next(row for row in run.history if row["step"] == run.best_step)
    if run.best_step >= ramp:  # validated at the full gate strength, as the final model is
        assert math.isclose(run.metrics.val_ppl, best["val_ppl"], rel_tol=1e-4)
    assert run.metrics.trainable_params == sum(run.metrics.trainable.values()) > 0
    assert run.metrics.val_ppl_ungated > 0 and run.metrics.frozen_params > 0
    # only the adapters and the idea head are checkpointed, never the frozen backbone
    model = run.load("cpu")
    saved = load_file(Path(run.run_dir) / "train" / "final" / "model.safetensors")
    assert set(saved) == set(model.trainable_parameters())
    # the reloaded model is the kept (best) one: it reproduces the recorded perplexity
    data = LORA.data(run.spec)
    assert math.isclose(perplexity(model, data.validation, batch_size=32), run.metrics.val_ppl, rel_tol=1e-5)
    [again] = run_many(LORA, [lora_run(profile, tiny_book_backbone, "none", True)], context)
    assert again.status == "loaded" and again.metrics == run.metrics and again.run_dir == run.run_dir


@pytest.mark.needs_data("06_idea_gating")
def test_the_book_backbone_is_pretrained_once_and_saved_as_a_from_pretrained_folder(tmp_path):
    from transformers import AutoModelForCausalLM

    from semlm.idea.lora_experiment import BACKBONE_PRETRAINING, backbone_runs

    spec = BookBackboneSpec(vocab_size=300, hidden_size=64, intermediate_size=128, num_layers=1, num_heads=2,
                            num_kv_heads=1, block_size=16, bpe_lines=300, train_tokens=2_000, eval_tokens=500,
                            train=replace(BookBackboneSpec.train, epochs=1, batch_size=16))
    profile = replace(lora_profile("smoke"), book_backbone=spec)
    context = RunContext(profile.name, tmp_path)
    first = resolve_backbone(profile, run_many(BACKBONE_PRETRAINING, backbone_runs(profile), context))
    assert first.status == "trained" and first.config["hidden_size"] == 64 and first.n_parameters > 0
    assert len(first.history) == 1 and first.history[0]["val_ppl"] > 1
    # the saved folder is the trained model: loaded as a Hub checkpoint would be, it gives the recorded perplexity
    reloaded = AutoModelForCausalLM.from_pretrained(first.path)
    data = BACKBONE_PRETRAINING.data(RunSpec("backbone-wikitext-2", profile.seed, spec))
    assert math.isclose(perplexity(reloaded, data.validation), first.wikitext_val_ppl, rel_tol=1e-5)
    assert first.tokenizer("a test").input_ids == data.tokenizer("a test").input_ids
    again = resolve_backbone(profile, run_many(BACKBONE_PRETRAINING, backbone_runs(profile), context))
    assert (again.status, again.path, again.wikitext_val_ppl) == ("loaded", first.path, first.wikitext_val_ppl)
    assert backbone_runs(lora_profile("paper")) == []
    with pytest.raises(ValueError, match="needs its backbone run"):
        resolve_backbone(profile)


# --- FineWeb-Edu loader ------------------------------------------------------------------------


def test_fixture_has_crlf_line_endings():
    raw = FIXTURE.read_bytes()
    assert b"\r\n\r\n" in raw and raw.count(b"\n") == raw.count(b"\r\n")


def test_documents_are_split_on_blank_lines_and_lose_their_carriage_returns():
    documents = read_documents(FIXTURE)
    assert len(documents) == 6
    assert documents[0].startswith("Photosynthesis in plants\nPlants turn light")
    assert not any("\r" in doc for doc in documents)
    assert split_text_into_documents("a\r\nb\r\n\r\nc\rd\n \nlast\n") == ["a\nb", "c\nd", "last"]


def test_split_is_deterministic_disjoint_complete_and_independent_of_order():
    documents = read_documents(FIXTURE)
    train, validation = split_documents(documents, 0.34, seed=0)
    assert len(validation) == 2 and sorted(train + validation) == sorted(documents)
    assert split_documents(documents, 0.34, seed=0) == (train, validation)
    shuffled = documents[:]
    random.Random(3).shuffle(shuffled)
    assert set(split_documents(shuffled, 0.34, seed=0)[1]) == set(validation)
    assert set(split_documents(documents, 0.34, seed=1)[1]) != set(validation) or len(documents) < 3


def test_load_fineweb_reads_the_data_dir_and_names_a_missing_file(monkeypatch, tmp_path):
    folder = tmp_path / "fineweb-edu-sample"
    folder.mkdir()
    (folder / "fineweb_edu.txt").write_bytes(FIXTURE.read_bytes())
    monkeypatch.setenv("SEMLM_DATA_DIR", str(tmp_path))
    loaded = load_fineweb(validation_fraction=0.2)
    assert loaded.dataset == "fineweb-edu-sample" and loaded.n_documents == 6 and len(loaded.validation) == 1
    assert len(load_fineweb(max_documents=3).train) == 2
    monkeypatch.setenv("SEMLM_DATA_DIR", str(tmp_path / "elsewhere"))
    with pytest.raises(FileNotFoundError) as info:
        load_fineweb()
    assert "fineweb_edu.txt" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(FileNotFoundError, match="missing FineWeb-Edu file"):
        read_documents(tmp_path / "nope.txt")


def test_bad_fineweb_requests_fail_with_one_line(monkeypatch, tmp_path):
    monkeypatch.delenv("SEMLM_ALLOW_DOWNLOADS", raising=False)
    with pytest.raises(ValueError, match="SEMLM_ALLOW_DOWNLOADS=1"):
        load_fineweb("stream", max_documents=10)
    with pytest.raises(ValueError, match="unknown FineWeb source 'hub'"):
        load_fineweb("hub")
    empty = tmp_path / "empty.txt"
    empty.write_text("\r\n\r\n")
    with pytest.raises(ValueError, match="holds no documents"):
        read_documents(empty)
    with pytest.raises(ValueError, match="validation_fraction"):
        split_documents(["a", "b"], 1.5)
