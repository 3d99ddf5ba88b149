"""Sparse decoding of the idea-gated GPT: the token head only for the tokens the gate keeps (paper B, Section 6)."""

import pytest
import torch
from torch import nn

from semlm.idea.model import GATE_VARIANTS, IdeaGPTConfig, IdeaGPTForCausalLM
from semlm.idea.sparse_decoding import (clamp_share, decode, full_gated_logits, sparse_gated_logits,
                                        step_divergence)

V = 61


def tiny(**kw):
    """A tiny gated GPT whose idea head puts most of the vocabulary at the clamp (as trained ones do)."""
    torch.manual_seed(0)
    config = IdeaGPTConfig(vocab_size=V, n_positions=24, n_embd=24, n_layer=2, n_head=2, dropout=0.0, **kw)
    model = IdeaGPTForCausalLM(config).eval()
    with torch.no_grad():
        model.idea_head[2].bias.copy_(torch.randn(V) * 3 - 3)
    return model


def hidden_states(model, batch=3, length=10):
    with torch.no_grad():
        return model.transformer(torch.randint(0, V, (batch, length))).flatten(0, 1)  # [N, d]


@pytest.mark.parametrize("variant", GATE_VARIANTS)
def test_sparse_head_with_the_whole_vocabulary_is_the_gated_model(variant):
    model = tiny(gate_variant=variant)
    x = torch.randint(0, V, (3, 10))
    with torch.no_grad():
        sparse = sparse_gated_logits(model, model.transformer(x).flatten(0, 1), budget=V)
        torch.testing.assert_close(sparse, model(x).logits.flatten(0, 1))
        torch.testing.assert_close(full_gated_logits(model, model.transformer(x).flatten(0, 1)), sparse)


def test_full_path_decodes_like_generate_and_a_whole_vocabulary_budget_like_the_full_path():
    model = tiny()
    ids, mask = torch.randint(1, V, (2, 6)), torch.ones(2, 6, dtype=torch.long)
    mask[1, :2] = 0  # left padding
    expected = model.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False, pad_token_id=0,
                              eos_token_id=None)[:, 6:]
    assert torch.equal(decode(model, ids, mask, 8), expected)
    assert torch.equal(decode(model, ids, mask, 8, budget=V), expected)


@pytest.mark.parametrize("budget", [0, 3, 20])
def test_step_kl_is_minus_log_of_the_full_mass_on_the_kept_set(budget):
    model = tiny()
    h = hidden_states(model)
    with torch.no_grad():
        sparse, full = sparse_gated_logits(model, h, budget), full_gated_logits(model, h)
    kept, outside, kl = step_divergence(sparse, full).unbind(-1)
    mass = torch.softmax(full, -1).masked_fill(torch.isinf(sparse), 0).sum(-1)
    torch.testing.assert_close(kl, -mass.log(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(outside, 1 - mass, rtol=1e-4, atol=1e-6)
    assert (kept == torch.isfinite(sparse).sum(-1)).all() and (kl > 0).all()


def test_kept_set_is_the_gate_above_the_clamp_plus_the_budget_by_idea_probability():
    model, budget = tiny(), 4
    h = hidden_states(model)
    with torch.no_grad():
        idea = model.idea_head(h)
        sparse = sparse_gated_logits(model, h, budget)
    above = model.gate.apply(idea) > model.gate.clamped_value()
    assert 0 < above.sum() < above.numel() / 2
    best_clamped = idea.masked_fill(above, float("-inf")).topk(budget, -1).indices
    expected = above.clone().scatter_(1, best_clamped, True)
    assert torch.equal(torch.isfinite(sparse), expected)


def test_token_head_rows_of_dropped_tokens_are_never_read():
    model = tiny()
    h = hidden_states(model, batch=1, length=1)
    with torch.no_grad():
        kept = torch.isfinite(sparse_gated_logits(model, h, 2))[0]
        poisoned = model.lm_head.weight.detach().clone()
        poisoned[~kept] = float("nan")
        model.lm_head.weight = nn.Parameter(poisoned)  # unties the head; h was computed before
        model.lm_head.forward = lambda _: pytest.fail("the full token head was computed")
        sparse = sparse_gated_logits(model, h, 2)[0]
    assert not sparse.isnan().any() and torch.equal(torch.isfinite(sparse), kept)


def test_clamp_share_is_the_share_of_gates_at_the_clamp_per_position():
    model = tiny()
    batches = [torch.randint(0, V, (2, 8)), torch.randint(0, V, (3, 8))]
    share = clamp_share(model, batches)
    c = model.config
    with torch.no_grad():
        gates = [model.gate.apply(model(x).idea_logits) for x in batches]
    per_position = torch.cat([(g <= c.alpha * c.beta).float().mean(-1).flatten() for g in gates])
    assert share["n"] == 40 and share["mean"] == pytest.approx(per_position.mean().item())
    assert 0 <= share["q05"] <= share["q50"] <= share["q95"] <= 1 and share["q50"] > 0.5


def test_bad_arguments_give_one_line_errors():
    model, h = tiny(), torch.zeros(1, 24)
    for budget in (-1, 2.5, True):
        with pytest.raises(ValueError, match="budget must be an int >= 0") as error:
            sparse_gated_logits(model, h, budget)
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="alpha must be > 0"):
        sparse_gated_logits(tiny(alpha=0.0), h, 3)
    with pytest.raises(ValueError, match="exceed n_positions=24"):
        decode(model, torch.ones(1, 20, dtype=torch.long), torch.ones(1, 20, dtype=torch.long), 5, budget=3)


@pytest.mark.needs_data("06_idea_gating")
def test_bench_section_trains_the_smoke_model_and_reports_clamp_share_speed_and_divergence(tmp_path, monkeypatch):
    from semlm.idea.profiles import idea_profile
    from semlm.idea.sparse_decoding import bench_section

    monkeypatch.setenv("SEMLM_RUNS_DIR", str(tmp_path))
    section = bench_section(idea_profile("smoke"))
    assert section["profile"] == "smoke" and section["model"] in ("gated-sum", "gated-mean")
    assert 0 <= section["clamp_share"]["mean"] <= 1 and section["speedup_per_token"] > 0
    assert section["mean_step_kl"] > -1e-6 and -1e-6 < section["mass_outside"] <= 1
    assert section["kept_tokens"] >= section["budget"]
    assert set(section["samples"]) == {"full", "sparse"} and section["samples"]["sparse"]["distinct_2"]["n"] > 0
