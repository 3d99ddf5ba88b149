"""The idea-gated GPT: gate laws, causality, transformers round trip and generate() (paper B, Section 3)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import LogitsProcessor, LogitsProcessorList

from semlm.idea.model import (GATE_VARIANTS, ConcentrationDecay, IdeaGate, IdeaGPTConfig, IdeaGPTForCausalLM,
                              gated_logits, pad_vocabulary)


def idea_gate(z, alpha, beta=-2.0, variant="clamp_then_scale", eps=1e-8):
    """The gate of ``IdeaGate(alpha, beta, variant, eps)``; a tensor ``alpha`` is one strength per row."""
    if isinstance(alpha, torch.Tensor):
        return IdeaGate(0.0, beta, variant, eps).apply(z, alpha)
    return IdeaGate(alpha, beta, variant, eps).apply(z)


def tiny(idea=True, **kw):
    torch.manual_seed(0)
    config = IdeaGPTConfig(vocab_size=61, n_positions=16, n_embd=24, n_layer=2, n_head=2, dropout=0.0,
                           idea_head=idea, **kw)
    return IdeaGPTForCausalLM(config).eval()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-60, 60), min_size=1, max_size=20), st.floats(0, 3), st.floats(-5, -0.01),
       st.sampled_from(GATE_VARIANTS))
def test_gate_is_bounded_below_and_nonpositive(z, alpha, beta, variant):
    gate = idea_gate(torch.tensor(z), alpha, beta, variant)
    floor = beta if variant == "scale_then_clamp" else alpha * beta
    assert (gate >= floor - 1e-5).all()
    assert (gate <= alpha * math.log1p(1e-8) + 1e-6).all()


@pytest.mark.parametrize("variant", GATE_VARIANTS)
def test_gate_is_zero_at_alpha_zero(variant):
    assert torch.equal(idea_gate(torch.randn(50) * 30, 0.0, -2.0, variant), torch.zeros(50))


def test_variants_follow_the_published_formulas():
    z = torch.linspace(-12, 12, 97)
    log_p = torch.log(torch.sigmoid(z) + 1e-8)
    assert torch.allclose(idea_gate(z, 0.5, -2.0, "clamp_then_scale"), 0.5 * log_p.clamp(min=-2.0), atol=1e-6)
    assert torch.allclose(idea_gate(z, 0.5, -2.0, "scale_then_clamp"), (0.5 * log_p).clamp(min=-2.0), atol=1e-6)


def test_unknown_variant_is_rejected():
    with pytest.raises(ValueError, match="unknown gate variant 'v3'"):
        idea_gate(torch.zeros(2), 0.5, -2.0, "v3")
    with pytest.raises(ValueError, match="unknown gate variant"):
        IdeaGPTForCausalLM(IdeaGPTConfig(vocab_size=10, n_embd=8, n_head=2, n_layer=1, gate_variant="v3"))


@pytest.mark.parametrize("variant", GATE_VARIANTS)
def test_alpha_zero_gives_exactly_the_baseline_head(variant):
    gated = tiny(gate_variant=variant)
    baseline = tiny(idea=False)
    baseline.load_state_dict({k: v for k, v in gated.state_dict().items() if not k.startswith("idea_head")})
    x = torch.randint(0, 61, (3, 12))
    out = gated(x, alpha=0.0)
    assert torch.equal(out.logits, out.token_logits)
    assert torch.equal(out.logits, baseline(x).logits)
    assert not torch.equal(gated(x, alpha=0.5).logits, out.logits)


def test_prediction_at_t_ignores_tokens_after_t():
    model = tiny()
    x = torch.randint(0, 61, (2, 14))
    changed = x.clone()
    changed[:, 9:] = (changed[:, 9:] + 7) % 61
    a, b = model(x), model(changed)
    for name in ("logits", "token_logits", "idea_logits"):
        assert torch.allclose(getattr(a, name)[:, :9], getattr(b, name)[:, :9], atol=1e-6), name
    assert not torch.allclose(a.logits[:, 9:], b.logits[:, 9:])


def test_left_padding_does_not_change_the_real_tokens_logits():
    model = tiny()
    x = torch.randint(1, 61, (1, 6))
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), x], 1)
    mask = torch.cat([torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 6, dtype=torch.long)], 1)
    assert torch.allclose(model(padded, attention_mask=mask).logits[:, 3:], model(x).logits, atol=1e-5)


def test_token_head_is_tied_and_idea_head_is_not():
    model = tiny()
    assert model.lm_head.weight is model.transformer.wte.weight
    assert model.idea_head[2].weight.data_ptr() != model.lm_head.weight.data_ptr()
    assert [type(m).__name__ for m in model.idea_head] == ["Linear", "ReLU", "Linear"]


def test_save_and_from_pretrained_give_identical_logits(tmp_path):
    model = tiny(alpha=0.7, gate_variant="scale_then_clamp", beta=-1.5)
    model.save_pretrained(tmp_path)
    again = IdeaGPTForCausalLM.from_pretrained(tmp_path).eval()
    assert (again.config.alpha, again.config.gate_variant, again.config.beta) == (0.7, "scale_then_clamp", -1.5)
    assert again.lm_head.weight is again.transformer.wte.weight
    x = torch.randint(0, 61, (2, 10))
    a, b = model(x), again(x)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.idea_logits, b.idea_logits)


def test_a_padded_vocabulary_computes_the_same_logits_and_gradients_and_reloads(tmp_path):
    """pad_vocabulary: 61 -> 64 rows in the embedding and both heads, logits cut back to 61 columns; the same
    values and, on the real rows, the same gradients; the extra rows get none; save / load keep the padding."""
    model = tiny().train()
    padded = pad_vocabulary(model, 32)
    assert padded.lm_head.weight.shape[0] == padded.idea_head[2].weight.shape[0] == 64
    assert padded.lm_head.weight is padded.transformer.wte.weight
    x = torch.randint(0, 61, (2, 10))
    a, b = model(x, alpha=0.5), padded(x, alpha=0.5)
    assert b.logits.shape[-1] == b.idea_logits.shape[-1] == 61
    assert torch.allclose(a.logits, b.logits, atol=1e-6) and torch.allclose(a.idea_logits, b.idea_logits, atol=1e-6)
    for out in (a, b):
        (out.logits.logsumexp(-1).sum() + out.idea_logits.sigmoid().sum()).backward()
    for (name, p), q in zip(model.named_parameters(), padded.parameters()):
        real = q.grad[tuple(slice(0, n) for n in p.shape)]
        assert torch.allclose(real, p.grad, atol=1e-5), name
        assert not q.grad[p.shape[0]:].any(), name  # nothing flows into the padded rows
    padded.save_pretrained(tmp_path)
    again = IdeaGPTForCausalLM.from_pretrained(tmp_path)
    assert again.config.vocab_pad_multiple == 32 and torch.equal(again.eval()(x).logits, padded.eval()(x).logits)


def with_alpha(model, alpha):
    """A copy of ``model`` whose own gate is at ``alpha`` (its config's)."""
    copy = IdeaGPTForCausalLM(IdeaGPTConfig.from_dict({**model.config.to_dict(), "alpha": alpha}))
    copy.load_state_dict(model.state_dict())
    return copy.eval()


@pytest.mark.parametrize("use_cache", [False, True])
def test_generate_with_a_gate_decodes_as_the_model_whose_own_gate_it_is(use_cache):
    model = tiny(alpha=0.5)
    x = torch.randint(1, 61, (2, 4))
    kwargs = dict(max_new_tokens=20, do_sample=False, use_cache=use_cache, pad_token_id=0, eos_token_id=None)
    passed = model.generate(x, gate=model.gate.with_alpha(20.0), **kwargs)
    assert passed.shape == (2, 24)  # longer than n_positions=16: the model crops its context
    assert torch.equal(passed, with_alpha(model, 20.0).generate(x, **kwargs))
    assert not torch.equal(passed, model.generate(x, **kwargs))  # the model's own gate (0.5) decodes otherwise
    assert model.config.alpha == 0.5 and model.gate == IdeaGate(0.5, -2.0)


def test_idea_gate_with_one_strength_per_row_equals_the_gate_at_each_strength():
    z = torch.randn(3, 40, generator=torch.Generator().manual_seed(1)) * 8
    alphas = torch.tensor([0.25, 0.5, 2.0])
    for variant in GATE_VARIANTS:
        rows = idea_gate(z, alphas[:, None], -2.0, variant)
        for row, alpha in enumerate(alphas.tolist()):
            expected = naive_gate(z[row], alpha, -2.0, variant).float()
            assert torch.allclose(rows[row], expected, atol=1e-6), (variant, alpha)


def decayed_reference(model, x, gate, steps):
    """Greedy decoding written out: each step the ungated logits of the whole (cropped) context, plus the gate at
    each row's decayed strength from the last position's idea logits and the last ``window`` tokens."""
    ids = x
    for _ in range(steps):
        out = model(ids[:, -model.config.n_positions:], alpha=0.0)
        idea = out.idea_logits[:, -1].float()
        strength = gate.decay.strength(gate.alpha, ids[:, -gate.decay.window:], idea)
        scores = out.token_logits[:, -1] + gate.apply(idea, strength[:, None])
        ids = torch.cat([ids, scores.argmax(-1, keepdim=True)], 1)
    return ids


@pytest.mark.parametrize("use_cache", [False, True])
def test_a_decaying_gate_decodes_as_the_written_out_loop(use_cache):
    model = tiny(alpha=1.0)
    gate = model.gate.with_alpha(3.0)
    gate = IdeaGate(gate.alpha, gate.beta, gate.variant, gate.eps, decay=ConcentrationDecay(top_k=5, window=8))
    x = torch.randint(1, 61, (3, 3))
    out = model.generate(x, gate=gate, max_new_tokens=18, do_sample=False, use_cache=use_cache, pad_token_id=0,
                         eos_token_id=None)
    assert torch.equal(out, decayed_reference(model, x, gate, 18))
    strength = model(out[:, -16:], gate=gate).gate_strength
    assert strength.shape == (3,) and ((strength >= 0) & (strength <= 3.0)).all()
    undecayed = model.generate(x, gate=model.gate.with_alpha(3.0), max_new_tokens=18, do_sample=False,
                               use_cache=use_cache, pad_token_id=0, eos_token_id=None)
    assert not torch.equal(out, undecayed)  # the decay changes what is decoded


def idea_processors():
    """Every transformers ``LogitsProcessor`` of paper B's modules, and the repetition penalty its generation uses."""
    import importlib
    import inspect
    import pkgutil

    import semlm.idea
    from semlm.idea.compounding_penalty import CompoundingRepetitionPenalty

    found = {CompoundingRepetitionPenalty}
    for info in pkgutil.iter_modules(semlm.idea.__path__):
        module = importlib.import_module(f"semlm.idea.{info.name}")
        found |= {value for value in vars(module).values() if inspect.isclass(value)
                  and issubclass(value, LogitsProcessor) and value.__module__.startswith("semlm.")}
    return found


def model_state(model) -> dict:
    return {"tensors": {k: v.clone() for k, v in model.state_dict().items()},
            "hooks": [(name, dict(m._forward_hooks), dict(m._forward_pre_hooks), dict(m._backward_hooks))
                      for name, m in model.named_modules()],
            "config": model.config.to_dict(), "generation": model.generation_config.to_dict()}


def test_logits_processors_do_not_mutate_the_model():
    from semlm.idea.compounding_penalty import CompoundingRepetitionPenalty

    assert idea_processors() == {CompoundingRepetitionPenalty}, "a new processor: add it to this test's generation"
    model = tiny(alpha=0.5)
    before = model_state(model)
    decaying = IdeaGate(1.0, -2.0, decay=ConcentrationDecay(top_k=5, window=8))
    for use_cache in (False, True):
        model.generate(torch.randint(1, 61, (2, 4)), gate=decaying, max_new_tokens=20, do_sample=True, use_cache=use_cache,
                       pad_token_id=0, eos_token_id=None,
                       logits_processor=LogitsProcessorList([CompoundingRepetitionPenalty(1.2, window=16)]))
    after = model_state(model)
    assert after["hooks"] == before["hooks"] and after["config"] == before["config"]
    assert after["generation"] == before["generation"]
    assert all(torch.equal(before["tensors"][k], v) for k, v in after["tensors"].items())


def test_concentration_is_one_when_the_plan_is_what_was_just_said():
    decay = ConcentrationDecay(top_k=2, window=4)
    ids = torch.tensor([[5, 6, 7, 8]])
    logits = torch.full((1, 10), -5.0)
    logits[0, [7, 8]] = 5.0
    assert decay.concentration(ids, logits).item() == 1.0
    assert decay.strength(0.8, ids, logits).item() == 0.0


# --- KV cache ------------------------------------------------------------------------------------


def fed_lengths(model):
    """Record how many tokens each forward call feeds (a hook on the token embedding)."""
    lengths = []
    handle = model.transformer.wte.register_forward_hook(lambda m, i, o: lengths.append(i[0].shape[1]))
    return lengths, handle


def greedy(model, x, n, use_cache, **kw):
    return model.generate(x, max_new_tokens=n, do_sample=False, use_cache=use_cache, pad_token_id=0,
                          eos_token_id=None, **kw)


@pytest.mark.parametrize("new_tokens", [8, 20])  # 4 + 20 > n_positions = 16: the crop is exercised too
@pytest.mark.parametrize("variant", GATE_VARIANTS)
def test_cached_and_uncached_greedy_generate_give_identical_tokens(new_tokens, variant):
    model = tiny(alpha=0.8, gate_variant=variant)
    x = torch.randint(1, 61, (3, 4))
    lengths, handle = fed_lengths(model)
    cached = greedy(model, x, new_tokens, use_cache=True)
    handle.remove()
    assert torch.equal(cached, greedy(model, x, new_tokens, use_cache=False))
    # prefill with the prompt, one token per step while the sequence fits n_positions = 16, then the
    # last 16 tokens afresh each step (the crop)
    assert lengths == [4 if i == 0 else 1 if 4 + i <= 16 else 16 for i in range(new_tokens)]


def test_generate_uses_the_cache_by_default():
    model = tiny()
    lengths, handle = fed_lengths(model)
    model.generate(torch.randint(1, 61, (1, 5)), max_new_tokens=4, do_sample=False, pad_token_id=0, eos_token_id=None)
    handle.remove()
    assert lengths == [5, 1, 1, 1]


def test_cached_step_logits_equal_the_full_forward():
    """Feed a sequence as prefix + chunks + single tokens through one cache: every position's gated,
    token and idea logits match one uncached forward of the whole sequence."""
    from transformers import DynamicCache

    model = tiny(alpha=0.5)
    x = torch.randint(0, 61, (2, 15))
    full = model(x)
    cache, outs = DynamicCache(), []
    for start, stop in [(0, 5), (5, 9), *[(t, t + 1) for t in range(9, 15)]]:
        outs.append(model(x[:, start:stop], past_key_values=cache, use_cache=True))
        assert cache.get_seq_length() == stop
    for name in ("logits", "token_logits", "idea_logits"):
        stepped = torch.cat([getattr(o, name) for o in outs], 1)
        assert torch.allclose(stepped, getattr(full, name), atol=1e-5), name


def test_cached_prediction_at_t_ignores_tokens_after_t():
    """The causality law of tests/test_causality.py, on the cached path: changing tokens after t
    leaves the logits at t (computed through the cache) unchanged and changes later ones."""
    from transformers import DynamicCache

    model = tiny()
    x = torch.randint(0, 61, (2, 14))
    changed = x.clone()
    changed[:, 9:] = (changed[:, 9:] + 7) % 61

    def stepped(ids):
        cache = DynamicCache()
        outs = [model(ids[:, :6], past_key_values=cache, use_cache=True)]
        outs += [model(ids[:, t:t + 1], past_key_values=cache, use_cache=True) for t in range(6, 14)]
        return {n: torch.cat([getattr(o, n) for o in outs], 1) for n in ("logits", "token_logits", "idea_logits")}

    a, b = stepped(x), stepped(changed)
    for name in a:
        assert torch.allclose(a[name][:, :9], b[name][:, :9], atol=1e-6), name
    assert not torch.allclose(a["logits"][:, 9:], b["logits"][:, 9:])


def test_cached_forward_rejects_a_mask_of_the_wrong_length():
    from transformers import DynamicCache

    model, cache = tiny(), DynamicCache()
    model(torch.randint(1, 61, (1, 4)), past_key_values=cache, use_cache=True)
    with pytest.raises(ValueError, match="attention_mask covers 1 positions, expected past \\+ new = 5"):
        model(torch.randint(1, 61, (1, 1)), attention_mask=torch.ones(1, 1, dtype=torch.long),
              past_key_values=cache, use_cache=True)


def test_batched_left_padded_generation_matches_each_prompt_alone_with_and_without_cache():
    model = tiny(alpha=0.5)
    prompts = [torch.randint(1, 61, (n,)) for n in (2, 5, 3)]
    width = max(len(p) for p in prompts)
    ids = torch.stack([torch.cat([torch.zeros(width - len(p), dtype=torch.long), p]) for p in prompts])
    mask = torch.stack([torch.cat([torch.zeros(width - len(p), dtype=torch.long), torch.ones(len(p), dtype=torch.long)])
                        for p in prompts])
    cached = greedy(model, ids, 8, use_cache=True, attention_mask=mask)
    assert torch.equal(cached, greedy(model, ids, 8, use_cache=False, attention_mask=mask))
    for row, prompt in enumerate(prompts):
        alone = greedy(model, prompt[None], 8, use_cache=True)
        assert torch.equal(cached[row, width:], alone[0, len(prompt):]), row


def test_beam_search_reorders_the_cache_and_matches_the_uncached_beams():
    model = tiny(alpha=0.5)
    x = torch.randint(1, 61, (2, 4))
    cached = greedy(model, x, 8, use_cache=True, num_beams=3)
    assert torch.equal(cached, greedy(model, x, 8, use_cache=False, num_beams=3))


def naive_gate(z, alpha, beta, variant, eps=1e-8):
    """The published formulas written out in float64, differentiated by autograd (the reference)."""
    log_p = torch.log(torch.sigmoid(z.double()) + eps)
    return alpha * log_p.clamp(min=beta) if variant == "clamp_then_scale" else (alpha * log_p).clamp(min=beta)


@pytest.mark.parametrize("variant", GATE_VARIANTS)
@pytest.mark.parametrize("alpha,beta", [(0.5, -2.0), (1.0, -0.5), (0.003, -2.0), (0.5, -25.0)])
def test_fused_gate_values_and_gradients_equal_the_naive_gate(variant, alpha, beta):
    # (0.003, -2) in v2 and beta = -25 put the clamp far below log(eps): the eps-exact branch runs
    g = torch.Generator().manual_seed(3)
    token = torch.randn(4, 7, 97, generator=g, requires_grad=True)
    z = (torch.randn(4, 7, 97, generator=g) * 12).requires_grad_()
    upstream = torch.randn(4, 7, 97, generator=g)
    fast = gated_logits(token, z, IdeaGate(alpha, beta, variant))
    (fast * upstream).sum().backward()
    token_ref = token.detach().double().requires_grad_()
    z_ref = z.detach().double().requires_grad_()
    reference = token_ref + naive_gate(z_ref, alpha, beta, variant)
    (reference * upstream.double()).sum().backward()
    assert torch.allclose(fast.double(), reference, atol=1e-5)
    assert torch.allclose(token.grad.double(), token_ref.grad)
    assert torch.allclose(z.grad.double(), z_ref.grad, rtol=1e-4, atol=1e-6)
    with torch.no_grad():
        assert torch.allclose(gated_logits(token, z, IdeaGate(alpha, beta, variant)).double(), reference, atol=1e-5)
        assert torch.allclose(idea_gate(z, alpha, beta, variant).double(), naive_gate(z, alpha, beta, variant),
                              atol=1e-5)


def test_fused_gate_runs_in_bfloat16_like_the_reference():
    z = torch.randn(3, 50) * 5
    token = torch.randn(3, 50)
    fast = gated_logits(token.bfloat16(), z.bfloat16(), IdeaGate(0.5, -2.0))
    assert fast.dtype == torch.bfloat16
    assert torch.allclose(fast.float(), token + naive_gate(z.bfloat16().float(), 0.5, -2.0, "clamp_then_scale").float(),
                          atol=0.07)


def test_gated_training_loss_gradients_equal_the_naive_reference():
    """The model's fused gate + sparse BCE give the parameter gradients of the naive dense computation."""
    from semlm.core.metrics import NO_TARGET
    from semlm.idea.targets import idea_targets, vocabulary_mask, window_ids
    from semlm.idea.targets import idea_gated_loss

    model = tiny(alpha=0.5).train()
    g = torch.Generator().manual_seed(5)
    future = torch.randint(0, 61, (3, 12 + 3), generator=g)
    future[0, -2:] = NO_TARGET
    inputs, targets = future[:, :12].clamp_min(0), future[:, 1:13]
    vocab_mask = vocabulary_mask(61, [0, 1, 2])
    out = model(inputs, alpha=0.4)
    loss, _, _ = idea_gated_loss(out.logits, targets, out.idea_logits, window_ids(future[:, 1:], 3, 12), vocab_mask,
                                 0.1, 5.0, "mean", ignore_index=NO_TARGET)
    fast = torch.autograd.grad(loss, list(model.parameters()))
    out = model(inputs, alpha=0.0)
    logits = out.token_logits.double() + naive_gate(out.idea_logits, 0.4, model.config.beta, "clamp_then_scale")
    ce = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=NO_TARGET)
    bags = idea_targets(future[:, 1:], 3, 61, length=12).double()
    bce = torch.nn.functional.binary_cross_entropy_with_logits(out.idea_logits.double(), bags, reduction="none",
                                                               pos_weight=torch.tensor(5.0, dtype=torch.float64))
    scored = (targets != NO_TARGET).double()
    bce = ((bce * vocab_mask.double()).sum(-1) / vocab_mask.sum() * scored).sum() / scored.sum()
    naive = torch.autograd.grad(ce + 0.1 * bce, list(model.parameters()))
    assert torch.allclose(loss.double(), ce + 0.1 * bce, atol=1e-5)
    for (name, _), a, b in zip(model.named_parameters(), fast, naive):
        assert torch.allclose(a.double(), b.double(), rtol=1e-4, atol=1e-6), name


@pytest.mark.parametrize("variant,reduction", [("clamp_then_scale", "sum_vocab"), ("scale_then_clamp", "mean")])
def test_training_loss_with_the_fused_gate_equals_the_models_own_gate(variant, reduction):
    """idea_loss_fn's fused path (gate applied inside the loss) gives the loss, parts and parameter gradients of
    the model's gated logits + idea_gated_loss, early in the alpha ramp (eps-exact gate in v2) and at its end."""
    from dataclasses import replace

    from semlm.core.metrics import NO_TARGET
    from semlm.idea.data import TokenBlocks
    from semlm.idea.loss import idea_loss_fn
    from semlm.idea.profiles import IdeaSettings

    model = tiny(gate_variant=variant).train()
    settings = replace(IdeaSettings(window=3, idea_weight=0.1, idea_loss_reduction=reduction, alpha=0.5,
                                    alpha_ramp_steps=100), pos_weight=5.0, gate_variant=variant)
    ids = torch.randint(0, 61, (3 * 12 + 3,), generator=torch.Generator().manual_seed(2))
    batch = next(TokenBlocks.from_stream(ids, 12, 3).batches(3))
    batch.targets[0, -3:], batch.future[0, -5:] = NO_TARGET, NO_TARGET  # a text that ends: pad targets and windows
    for step in (1, 100):
        results = []
        for fused in (True, False):
            loss, parts = idea_loss_fn(settings, [0, 1, 2], True, fused=fused)(model, batch, step)
            results.append((loss, parts, torch.autograd.grad(loss, list(model.parameters()))))
        (loss_a, parts_a, grads_a), (loss_b, parts_b, grads_b) = results
        assert torch.allclose(loss_a, loss_b, rtol=1e-6, atol=1e-6)
        assert all(torch.allclose(torch.as_tensor(parts_a[k]), torch.as_tensor(parts_b[k]), rtol=1e-6) for k in parts_b)
        for (name, _), a, b in zip(model.named_parameters(), grads_a, grads_b):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-7), name


def test_the_model_compiles_whole_and_the_compiled_forward_and_backward_equal_eager():
    """What ``TrainConfig.compile_on_cuda`` compiles on a GPU, traced here with no graph break (fullgraph)
    by torch.compile's aot_eager backend: same logits, idea logits and gradients as eager."""
    model = tiny(alpha=0.0).train()
    x = torch.randint(0, 61, (2, 12), generator=torch.Generator().manual_seed(5))
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    outputs = []
    for forward in (model, compiled):
        model.zero_grad(set_to_none=True)
        out = forward(x, alpha=0.0)
        (out.logits.square().mean() + out.idea_logits.sigmoid().mean()).backward()
        outputs.append((out.logits.detach(), out.idea_logits.detach(),
                        {n: p.grad.clone() for n, p in model.named_parameters()}))
    (la, ia, ga), (lb, ib, gb) = outputs
    assert torch.allclose(la, lb, atol=1e-6) and torch.allclose(ia, ib, atol=1e-6)
    assert all(torch.allclose(ga[n], gb[n], atol=1e-6) for n in ga)


def test_hidden_states_follow_transformers():
    """``output_hidden_states=True``: one tensor per layer input plus the final normalised states, embeddings first,
    as transformers' GPT-2 returns them; without it, none."""
    model = tiny().eval()
    ids = torch.randint(1, 50, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        plain = model(ids)
        out = model(ids, output_hidden_states=True)
    assert plain.hidden_states is None
    states = out.hidden_states
    assert isinstance(states, tuple) and len(states) == model.config.n_layer + 1
    assert all(s.shape == (2, 7, model.config.n_embd) for s in states)
    positions = torch.arange(7)[None]
    embeddings = model.transformer.wte(ids) + model.transformer.wpe(positions)
    assert torch.allclose(states[0], embeddings)
    assert torch.allclose(model.lm_head(states[-1])[..., :model.config.vocab_size], out.token_logits, atol=1e-6)
    assert torch.equal(out.logits, plain.logits)
