"""GPU checks of paper B's models (``pytest -m cuda``; ``make test-gpu`` / ``.ci/run-gpu`` on a GPU machine).

Every test here is marked ``cuda`` and skips, with the reason, where ``torch.cuda.is_available()``
is false, so the CPU suite passes through them. On a GPU they check what the CPU suite cannot:
a bf16-autocast training step of the idea-gated GPT, the 4-bit NF4 backbone with double
quantisation and bf16 compute (bitsandbytes' CUDA kernels) under LoRA with the idea head, where
the gradients go, and that the KV cache gives the same tokens as no cache on the GPU's kernels.
"""

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs a CUDA GPU (torch.cuda.is_available() is False)")]

VOCAB = 96


def idea_gpt(n_positions=64, idea=True, **kw):
    from semlm.idea.model import IdeaGPTConfig, IdeaGPTForCausalLM

    torch.manual_seed(0)
    # initializer_range 0.1: logits spread wide enough that greedy decoding has no near-ties, so
    # the cached and uncached kernels' last-bit differences cannot flip a token
    config = IdeaGPTConfig(vocab_size=VOCAB, n_positions=n_positions, n_embd=64, n_layer=2, n_head=4, dropout=0.0,
                           idea_head=idea, initializer_range=0.1, **kw)
    return IdeaGPTForCausalLM(config).to("cuda")


def test_bf16_autocast_training_steps_of_the_idea_gpt_are_finite_and_lower_the_loss():
    from semlm.idea.profiles import IdeaSettings
    from semlm.idea.data import TokenBlocks
    from semlm.idea.loss import autocast_for, idea_loss_fn

    model = idea_gpt().train()
    settings = IdeaSettings(window=8, idea_weight=0.1, idea_loss_reduction="mean", alpha=0.5, alpha_ramp_steps=5)
    ids = torch.arange(4 * 32 + 8 + 1) % 17 + 1  # a periodic stream: learnable in a few steps
    blocks = TokenBlocks.from_stream(ids, 32, 8)
    blocks.device = "cuda"
    batch = next(blocks.batches(4))
    with autocast_for("cuda"):
        assert model(batch.inputs).logits.dtype == torch.bfloat16  # autocast is on
    loss_fn = idea_loss_fn(settings, [], True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(25):
        with autocast_for("cuda"):  # the trainer's precision for paper B on a GPU (TrainConfig.autocast)
            loss, parts = loss_fn(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(math.isfinite(x) for x in losses), losses
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())
    assert sum(losses[-3:]) / 3 < 0.7 * sum(losses[:3]) / 3, losses


def greedy(model, x, n, use_cache, **kw):
    return model.generate(x, max_new_tokens=n, do_sample=False, use_cache=use_cache, pad_token_id=0,
                          eos_token_id=None, **kw)


@pytest.mark.parametrize("new_tokens", [12, 40])  # 8 + 40 > n_positions = 32: the crop as well
def test_kv_cache_generate_on_cuda_equals_no_cache_generate(new_tokens):
    model = idea_gpt(n_positions=32, alpha=0.8).eval()
    x = torch.randint(1, VOCAB, (4, 8), generator=torch.Generator().manual_seed(0)).cuda()
    assert torch.equal(greedy(model, x, new_tokens, True), greedy(model, x, new_tokens, False))
    mask = torch.ones_like(x)
    mask[:2, :3] = 0  # left padding
    assert torch.equal(greedy(model, x, new_tokens, True, attention_mask=mask),
                       greedy(model, x, new_tokens, False, attention_mask=mask))


def test_cached_step_logits_on_cuda_equal_the_full_forward():
    from transformers import DynamicCache

    model = idea_gpt(alpha=0.5).eval()
    x = torch.randint(0, VOCAB, (2, 20), generator=torch.Generator().manual_seed(1)).cuda()
    with torch.no_grad():
        full = model(x)
        cache = DynamicCache()
        steps = [model(x[:, :8], past_key_values=cache, use_cache=True)]
        steps += [model(x[:, t:t + 1], past_key_values=cache, use_cache=True) for t in range(8, 20)]
    for name in ("logits", "idea_logits"):
        stepped = torch.cat([getattr(o, name) for o in steps], 1)
        assert torch.allclose(stepped, getattr(full, name), atol=1e-4), name


# --- 4-bit NF4 backbone + LoRA + idea head (chapter 8's setting) -----------------------------------


@pytest.fixture(scope="module")
def tiny_mistral(tmp_path_factory):
    """A randomly initialised two-layer Mistral saved with save_pretrained (no download)."""
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    config = MistralConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                           sliding_window=None, tie_word_embeddings=False)
    folder = tmp_path_factory.mktemp("tiny-mistral")
    MistralForCausalLM(config).save_pretrained(str(folder))
    return folder


def nf4_wrapper(path, idea=True):
    pytest.importorskip("bitsandbytes", reason="bitsandbytes is not installed (4-bit NF4 needs it)")
    from semlm.idea.lora_model import LoraIdeaConfig, LoraIdeaModel, load_backbone

    torch.manual_seed(0)
    backbone = load_backbone(path, "nf4", "cuda")
    return LoraIdeaModel(backbone, LoraIdeaConfig(idea_head=idea, quantization="nf4", n_positions=32))


def test_nf4_backbone_on_cuda_uses_double_quantisation_and_bf16_compute(tiny_mistral):
    model = nf4_wrapper(tiny_mistral)  # skips, with the reason, before the import below where bitsandbytes is missing
    import bitsandbytes as bnb

    layers = [m for m in model.backbone.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert layers, "no 4-bit linear layers in the backbone"
    for layer in layers:
        state = layer.weight.quant_state
        assert layer.weight.device.type == "cuda"
        assert state.quant_type == "nf4" and state.nested, "NF4 with double quantisation (nested quant state)"
        assert layer.compute_dtype == torch.bfloat16


def test_lora_gradients_reach_only_the_lora_and_idea_head_parameters_on_cuda(tiny_mistral):
    model = nf4_wrapper(tiny_mistral).train()
    x = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(2)).cuda()
    out = model(x, alpha=0.5)
    assert out.idea_logits is not None and torch.isfinite(out.logits).all()
    targets = torch.zeros_like(out.idea_logits, dtype=torch.float32)
    targets.scatter_(-1, x[:, :, None].expand(-1, -1, 1), 1.0)
    loss = (F.cross_entropy(out.logits[:, :-1].float().flatten(0, 1), x[:, 1:].flatten())
            + 0.1 * F.binary_cross_entropy_with_logits(out.idea_logits.float(), targets))
    loss.backward()
    trainable = model.trainable_parameters()
    assert trainable and all(".lora_" in n or n.startswith("idea_head.") for n in trainable)
    with_grad = {n for n, p in model.named_parameters() if p.grad is not None}
    assert with_grad == set(trainable), with_grad ^ set(trainable)
    # LoRA's B starts at zero, so A's first gradient is zero; B's and the idea head's are not
    assert all(trainable[n].grad.abs().sum() > 0 for n in trainable if ".lora_B" in n or n.startswith("idea_head."))
    assert model.trainable_parameter_counts()["other"] == 0


def test_nf4_wrapper_generates_with_the_kv_cache_from_gated_logits(tiny_mistral):
    """bf16 compute: cached and uncached tokens may differ in the last bit, so this checks the gate
    acts in cached generation (alpha changes the tokens) rather than token equality."""
    model = nf4_wrapper(tiny_mistral).eval()
    with torch.no_grad():
        for p in model.idea_head.parameters():
            p.normal_(0, 0.5, generator=torch.Generator("cuda").manual_seed(4))
    x = torch.randint(1, VOCAB, (2, 6), generator=torch.Generator().manual_seed(3)).cuda()
    kwargs = dict(max_new_tokens=10, do_sample=False, pad_token_id=0, eos_token_id=None, use_cache=True)
    gated, plain = model.generate(x, alpha=2.0, **kwargs), model.generate(x, alpha=0.0, **kwargs)
    assert gated.shape == plain.shape == (2, 16)
    assert not torch.equal(gated, plain)


# --- execution settings of the trainer on a GPU (TrainConfig.cuda_micro_batch, compile_on_cuda) -----


def _gated_trainer(micro_batch, compile_on_cuda, autocast):
    from semlm.core.train import Trainer
    from semlm.idea.profiles import IdeaSettings, authors_v1_training
    from semlm.idea.data import TokenStream
    from semlm.idea.loss import COMPILE_FALLBACKS, idea_loss_fn

    COMPILE_FALLBACKS.clear()  # each test's compiled loss gets its own try (a fallback is process-wide otherwise)

    settings = IdeaSettings(window=8, idea_weight=0.1, idea_loss_reduction="mean", alpha=0.5, alpha_ramp_steps=1)
    config = authors_v1_training(max_steps=4, micro_batch=4, accumulation=4, warmup_steps=1)
    config = replace(config, cuda_micro_batch=micro_batch, compile_on_cuda=compile_on_cuda, autocast=autocast)
    stream = TokenStream(torch.arange(4000) % 89 + 1, 32, 8)
    model = idea_gpt(n_positions=32).train()
    loss_fn = idea_loss_fn(settings, [1, 2, 3], True, compile_on_cuda=compile_on_cuda)
    return Trainer(model, stream, None, config, loss_fn, 0, validate=lambda *args: 0.0)


def _step_gradient(trainer):
    from semlm.core.train import step_batches

    step, batch = next(step_batches(trainer.train_data, trainer.config, 0, 1, trainer.steps_per_epoch))
    trainer.optimiser_step(step, batch)  # .grad keeps the accumulated gradient of the step
    return torch.cat([p.grad.float().flatten() for p in trainer.params]), float(trainer.running["train_loss"])


@pytest.mark.parametrize("compile_on_cuda", [False, True, "reduce-overhead"])
def test_one_micro_batch_on_cuda_applies_the_gradient_of_four_accumulated_ones(compile_on_cuda):
    """float32: the same 16 sequences in one micro-batch or four give the same step (summation order
    only); compiled (inductor: Triton kernels for the model and for gate + losses; with CUDA graphs) or eager."""
    reference, loss = _step_gradient(_gated_trainer(None, False, None))
    gradient, other = _step_gradient(_gated_trainer(16, compile_on_cuda, None))
    from semlm.idea.loss import COMPILE_FALLBACKS

    assert not COMPILE_FALLBACKS, COMPILE_FALLBACKS  # the compiled loss ran, not its eager fallback
    assert (gradient - reference).norm() / reference.norm() < 1e-4
    assert other == pytest.approx(loss, rel=1e-5)
    torch.compiler.reset()


def test_compiled_bf16_step_on_cuda_agrees_with_the_eager_bf16_step():
    reference, loss = _step_gradient(_gated_trainer(16, False, "bf16_on_cuda"))
    gradient, other = _step_gradient(_gated_trainer(16, True, "bf16_on_cuda"))
    from semlm.idea.loss import COMPILE_FALLBACKS

    assert not COMPILE_FALLBACKS, COMPILE_FALLBACKS
    assert (gradient - reference).norm() / reference.norm() < 0.05  # bf16 rounding in different places
    assert other == pytest.approx(loss, rel=1e-2)
    torch.compiler.reset()
