"""Idea-head targets (multi-hot bags of the next K tokens) and the idea BCE (paper B, Section 3)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from semlm.core.metrics import NO_TARGET
from semlm.idea.model import IdeaGate
from semlm.idea.targets import idea_bce_sparse, idea_targets, top_frequent_ids, vocabulary_mask, window_ids
from semlm.idea.targets import idea_gated_loss


def idea_bce(idea_logits, targets, mask=None, pos_weight=None, reduction="sum_vocab", vocab_mask=None):
    """The reference: the idea BCE against dense multi-hot ``targets``, as the paper writes it."""
    weight = None if pos_weight is None else torch.tensor(float(pos_weight))
    per_entry = torch.nn.functional.binary_cross_entropy_with_logits(idea_logits.float(), targets.float(),
                                                                     pos_weight=weight, reduction="none")
    columns = per_entry.shape[-1]
    if vocab_mask is not None:
        per_entry, columns = per_entry * vocab_mask, vocab_mask.sum()
    per_position = per_entry.sum(-1) / (columns if reduction == "mean" else 1)
    mask = torch.ones(per_position.shape) if mask is None else mask.float()
    return (per_position * mask).sum() / mask.sum().clamp_min(1.0)


def bag(row):
    return set(row.nonzero().flatten().tolist())


def test_targets_match_a_hand_example_with_window_edges_padding_and_keep_stopwords_in_the_bag():
    # next-token targets continued past the block; the text ends after 5 tokens (then padding)
    future = torch.tensor([[4, 2, 4, 7, 5, NO_TARGET, NO_TARGET]])
    bags = idea_targets(future, window=3, vocab_size=8, length=5)
    assert bags.shape == (1, 5, 8)
    assert [bag(bags[0, t]) for t in range(5)] == [
        {2, 4},      # 4 2 4: a repeated token counts once
        {2, 4, 7},   # 2 4 7
        {4, 5, 7},   # 4 7 5: 5 stays in the bag even if it is a stopword (the loss masks it)
        {5, 7},      # 7 5 <pad>
        {5},         # 5 <pad> <pad>
    ]


def test_stopword_columns_get_exactly_zero_gradient_and_the_other_columns_do():
    future = torch.tensor([[4, 2, 4, 7, 5, NO_TARGET, NO_TARGET]])
    mask = vocabulary_mask(8, [5, 0])
    for reduction in ("sum_vocab", "mean"):
        logits = torch.randn(1, 5, 8, requires_grad=True)
        idea_bce_sparse(logits, window_ids(future, 3, 5), None, 5.0, reduction, mask).backward()
        assert torch.all(logits.grad[..., [0, 5]] == 0)       # neither positive (5) nor negative (0) signal
        assert torch.all(logits.grad[..., [1, 2, 3, 4, 6, 7]] != 0)


def test_masked_loss_equals_the_loss_over_the_unmasked_columns_only():
    g = torch.Generator().manual_seed(0)
    future = torch.randint(0, 9, (2, 8), generator=g)
    logits = torch.randn(2, 5, 9, generator=g)
    keep = [1, 2, 3, 5, 6, 8]
    targets = idea_targets(future, 4, 9, length=5)
    masked = idea_bce(logits, targets, None, 5.0, "mean", vocabulary_mask(9, [0, 4, 7]))
    restricted = idea_bce(logits[..., keep], targets[..., keep], None, 5.0, "mean")
    assert torch.allclose(masked, restricted)
    summed = idea_bce(logits, targets, None, 5.0, "sum_vocab", vocabulary_mask(9, [0, 4, 7]))
    assert torch.allclose(summed, restricted * len(keep))


def test_paper_b_total_loss_is_gated_token_ce_plus_lambda_times_masked_idea_bce():
    g = torch.Generator().manual_seed(1)
    logits, idea = torch.randn(2, 4, 6, generator=g), torch.randn(2, 4, 6, generator=g)
    targets = torch.randint(0, 6, (2, 4), generator=g)
    targets[1, 3] = NO_TARGET
    future = torch.cat([targets, torch.randint(0, 6, (2, 2), generator=g)], 1)
    positives = window_ids(future, 3, 4)
    mask = vocabulary_mask(6, [2])
    total, ce, bce = idea_gated_loss(logits, targets, idea, positives, mask, 0.01, 5.0, "sum_vocab")
    assert torch.allclose(ce, torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(),
                                                                ignore_index=NO_TARGET))
    assert torch.allclose(bce, idea_bce_sparse(idea, positives, targets != NO_TARGET, 5.0, "sum_vocab", mask))
    assert torch.allclose(total, ce + 0.01 * bce)
    plain, plain_ce, none = idea_gated_loss(logits, targets, None, None, None, 0.01)
    assert none is None and torch.allclose(plain, ce)
    with pytest.raises(ValueError, match="needs the window ids"):
        idea_gated_loss(logits, targets, idea, None, mask, 0.01)


def test_vocabulary_mask_rejects_ids_outside_the_vocabulary():
    assert vocabulary_mask(4, [1]).tolist() == [1.0, 0.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="stopword ids must be in"):
        vocabulary_mask(4, [4])


def test_windows_past_the_given_future_are_truncated():
    future = torch.tensor([[1, 2, 3]])
    bags = idea_targets(future, window=2, vocab_size=5, length=3)
    assert [bag(bags[0, t]) for t in range(3)] == [{1, 2}, {2, 3}, {3}]


def test_default_length_gives_every_position_a_full_window():
    future = torch.arange(10)[None]
    assert idea_targets(future, window=4, vocab_size=10).shape == (1, 7, 10)


def test_bad_inputs_raise_one_clear_error():
    with pytest.raises(ValueError, match="window K must be >= 1"):
        idea_targets(torch.zeros(1, 3, dtype=torch.long), window=0, vocab_size=4)
    with pytest.raises(ValueError, match="future ids must be in"):
        idea_targets(torch.tensor([[9]]), window=1, vocab_size=4)
    with pytest.raises(ValueError, match="unknown reduction"):
        idea_bce_sparse(torch.zeros(1, 1, 3), torch.zeros(1, 1, 1, dtype=torch.long), reduction="max")


def test_top_frequent_ids_breaks_ties_by_smaller_id():
    ids = torch.tensor([3, 3, 1, 1, 2, 0, NO_TARGET])
    assert top_frequent_ids(ids, 2) == [1, 3]
    assert top_frequent_ids(ids, 3) == [1, 3, 0] and top_frequent_ids(ids, 9) == [1, 3, 0, 2]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 12), st.integers(1, 6), st.integers(2, 9), st.integers(0, 10_000),
       st.sampled_from(["sum_vocab", "mean"]), st.sampled_from([None, 5.0]))
def test_sparse_bce_equals_dense_bce(batch, length, window, vocab, seed, reduction, pos_weight):
    g = torch.Generator().manual_seed(seed)
    future = torch.randint(-1, vocab, (batch, length + window - 1), generator=g)
    vocab_mask = vocabulary_mask(vocab, [0]) if vocab > 3 else None
    logits = torch.randn(batch, length, vocab, generator=g)
    mask = torch.rand(batch, length, generator=g) > 0.3
    dense = idea_bce(logits, idea_targets(future, window, vocab, length=length), mask, pos_weight, reduction, vocab_mask)
    sparse = idea_bce_sparse(logits, window_ids(future, window, length), mask, pos_weight, reduction, vocab_mask)
    assert torch.allclose(dense, sparse, rtol=1e-5, atol=1e-5)


def test_window_ids_hold_each_positive_once():
    future = torch.tensor([[4, 2, 4, 7, 5, NO_TARGET, NO_TARGET]])
    positives = window_ids(future, 3, 5)
    assert [sorted(set(r.tolist()) - {NO_TARGET}) for r in positives[0]] == [[2, 4], [2, 4, 7], [4, 5, 7], [5, 7], [5]]
    assert all(len([x for x in r.tolist() if x != NO_TARGET]) == len(set(r.tolist()) - {NO_TARGET})
               for r in positives[0])


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 12), st.integers(1, 6), st.integers(2, 9), st.integers(0, 10_000),
       st.sampled_from(["sum_vocab", "mean"]), st.sampled_from([None, 5.0]))
def test_sparse_bce_gradient_equals_the_naive_dense_gradient(batch, length, window, vocab, seed, reduction, pos_weight):
    """The hand-written backward of the sparse BCE against autograd through a dense float64 BCE."""
    g = torch.Generator().manual_seed(seed)
    future = torch.randint(-1, vocab, (batch, length + window - 1), generator=g)
    vocab_mask = vocabulary_mask(vocab, [0]) if vocab > 3 else None
    logits = (torch.randn(batch, length, vocab, generator=g) * 6).requires_grad_()
    mask = torch.rand(batch, length, generator=g) > 0.3
    idea_bce_sparse(logits, window_ids(future, window, length), mask, pos_weight, reduction, vocab_mask).backward()
    dense_logits = logits.detach().double().requires_grad_()
    targets = idea_targets(future, window, vocab, length=length).double()
    weight = None if pos_weight is None else torch.tensor(pos_weight, dtype=torch.float64)
    per_entry = torch.nn.functional.binary_cross_entropy_with_logits(dense_logits, targets, pos_weight=weight,
                                                                     reduction="none")
    columns = vocab
    if vocab_mask is not None:
        per_entry, columns = per_entry * vocab_mask.double(), vocab_mask.sum().item()
    per_position = per_entry.sum(-1) / (columns if reduction == "mean" else 1)
    scored = mask.double()
    ((per_position * scored).sum() / scored.sum().clamp_min(1.0)).backward()
    # float32 precision of a position's gradient scale: a confident positive's gradient is sigmoid(z) -
    # (w (1 - sigmoid(z)) + sigmoid(z)) in float32 (dense column + window correction), exact only in float64
    row_weight = 1.0 / float(scored.sum().clamp_min(1.0)) / (columns if reduction == "mean" else 1)
    assert torch.allclose(logits.grad.double(), dense_logits.grad, rtol=1e-5, atol=1e-6 * row_weight)


def test_sparse_bce_and_its_gradient_match_the_dense_bce_for_extreme_logits():
    logits = torch.tensor([[[25.0, -30.0, 0.5, 90.0, -90.0, 19.9, 20.1]]], requires_grad=True)
    dense_logits = logits.detach().clone().requires_grad_()
    future = torch.tensor([[3, 1, 6]])
    vocab_mask = vocabulary_mask(7, [2])
    dense = idea_bce(dense_logits, idea_targets(future, 3, 7, length=1), None, 5.0, "sum_vocab", vocab_mask)
    sparse = idea_bce_sparse(logits, window_ids(future, 3, 1), None, 5.0, "sum_vocab", vocab_mask)
    assert torch.allclose(dense, sparse, rtol=1e-6)
    dense.backward(), sparse.backward()
    assert torch.allclose(logits.grad, dense_logits.grad, atol=1e-6)


def _gated_loss_inputs(seed, B=3, T=11, V=97, K=4, masked=True):
    g = torch.Generator().manual_seed(seed)
    token = torch.randn(B, T, V, generator=g) * 3
    idea = torch.randn(B, T, V, generator=g) * 12           # wide: many entries clamped, some saturated
    future = torch.randint(0, V, (B, T + K - 1), generator=g)
    future[0, -5:] = NO_TARGET                                 # pad targets and truncated windows
    vocab_mask = vocabulary_mask(V, [0, 1, 2, 50]) if masked else None
    targets = future[:, :T]
    token[1, 2, targets[1, 2]] -= 150.0                     # a target whose softmax underflows: CE ~ 150
    return token, idea, targets, window_ids(future, K, T), vocab_mask


@pytest.mark.parametrize("variant", ["clamp_then_scale", "scale_then_clamp"])
@pytest.mark.parametrize("alpha,beta", [(0.5, -2.0), (1.0, -0.5), (0.003, -2.0), (0.5, -25.0), (0.0, -2.0)])
@pytest.mark.parametrize("reduction,pos_weight", [("sum_vocab", None), ("mean", 5.0)])
@pytest.mark.parametrize("masked,chunk", [(True, 4), (False, 64)])
def test_fused_gated_loss_and_its_gradients_equal_the_unfused_path(variant, alpha, beta, reduction, pos_weight, masked,
                                                                  chunk):
    """Gate + CE + sparse BCE fused and chunked == the one gate formula (idea_gate, plain autograd), then
    idea_gated_loss (values and gradients).

    (0.003, -2) in v2 and beta = -25 take the gate's eps-exact branch, alpha = 0 switches it off."""
    from semlm.idea.targets import idea_gated_loss_fused

    token, idea, targets, positives, vocab_mask = _gated_loss_inputs(7, masked=masked)
    t1, i1 = token.clone().requires_grad_(), idea.clone().requires_grad_()
    reference = idea_gated_loss(t1 + IdeaGate(alpha, beta, variant).apply(i1), targets, i1, positives, vocab_mask, 0.1,
                                pos_weight, reduction, ignore_index=NO_TARGET)
    (2.5 * reference[0]).backward()
    t2, i2 = token.clone().requires_grad_(), idea.clone().requires_grad_()
    fused = idea_gated_loss_fused(t2, i2, IdeaGate(alpha, beta, variant), targets, positives, vocab_mask, 0.1,
                                  pos_weight, reduction, NO_TARGET, chunk_positions=chunk)
    (2.5 * fused[0]).backward()
    for a, b in zip(reference, fused):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    assert torch.allclose(t1.grad, t2.grad, rtol=1e-5, atol=1e-8)
    assert torch.allclose(i1.grad, i2.grad, rtol=1e-4, atol=1e-8)
    if vocab_mask is not None:  # the BCE sends stopword columns nothing: only the gate's CE gradient reaches them
        stop = vocab_mask == 0
        assert torch.equal(i2.grad[..., stop] == 0, i1.grad[..., stop] == 0)
    with torch.no_grad():
        values = idea_gated_loss_fused(token, idea, IdeaGate(alpha, beta, variant), targets, positives, vocab_mask, 0.1,
                                       pos_weight, reduction, NO_TARGET, chunk_positions=chunk)
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(reference, values))


def test_fused_gated_loss_rejects_mismatched_shapes_with_one_clear_error():
    from semlm.idea.targets import idea_gated_loss_fused

    token, idea, targets, positives, vocab_mask = _gated_loss_inputs(1)
    with pytest.raises(ValueError, match="must agree"):
        idea_gated_loss_fused(token, idea[:, :-1], IdeaGate(0.5, -2.0), targets, positives, vocab_mask, 0.1)
    with pytest.raises(ValueError, match="window_ids"):
        idea_gated_loss_fused(token, idea, IdeaGate(0.5, -2.0), targets, positives[:, :-1], vocab_mask, 0.1)
    with pytest.raises(ValueError, match="gate variant"):
        idea_gated_loss_fused(token, idea, IdeaGate(0.5, -2.0, "v3"), targets, positives, vocab_mask, 0.1)


@pytest.mark.parametrize("variant", ["clamp_then_scale", "scale_then_clamp"])
@pytest.mark.parametrize("alpha,beta", [(0.5, -2.0), (1.0, -0.5), (0.0, -2.0)])
@pytest.mark.parametrize("reduction,pos_weight,masked", [("sum_vocab", None, True), ("mean", 5.0, False)])
@pytest.mark.parametrize("compiled", [False, True])
def test_autograd_gated_loss_for_torch_compile_equals_the_models_gate_then_the_loss(variant, alpha, beta, reduction,
                                                                                     pos_weight, masked, compiled):
    """The GPU's compiled loss (idea_gated_loss_autograd) == gated_logits then idea_gated_loss, values and
    gradients; ``compiled`` traces it whole (fullgraph) with torch.compile's aot_eager backend, the graph
    inductor compiles on a GPU, so the compiled path is checked without one."""
    from semlm.idea.model import gated_logits
    from semlm.idea.targets import idea_gated_loss_autograd

    token, idea, targets, positives, vocab_mask = _gated_loss_inputs(3, masked=masked)
    t1, i1 = token.clone().requires_grad_(), idea.clone().requires_grad_()
    reference = idea_gated_loss(gated_logits(t1, i1, IdeaGate(alpha, beta, variant)), targets, i1, positives,
                                vocab_mask, 0.1, pos_weight, reduction, ignore_index=NO_TARGET)
    (2.5 * reference[0]).backward()
    loss = idea_gated_loss_autograd
    if compiled:
        torch._dynamo.reset()
        loss = torch.compile(idea_gated_loss_autograd, backend="aot_eager", fullgraph=True)
    t2, i2 = token.clone().requires_grad_(), idea.clone().requires_grad_()
    ours = loss(t2, i2, torch.tensor(alpha), beta, variant, 1e-8, targets, positives, vocab_mask, 0.1, pos_weight,
                reduction, NO_TARGET)
    (2.5 * ours[0]).backward()
    for a, b in zip(reference, ours):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    assert torch.allclose(t1.grad, t2.grad, rtol=1e-5, atol=1e-8)
    assert torch.allclose(i1.grad, i2.grad, rtol=1e-4, atol=1e-8)
    plain = loss(t2.detach(), None, torch.tensor(0.0), beta, variant, 1e-8, targets, None, None, 0.0)
    assert torch.allclose(plain[0], idea_gated_loss(token, targets, None, None, None, 0.0, ignore_index=NO_TARGET)[0])


def test_a_compiled_gated_loss_is_not_recompiled_as_the_gate_strength_ramps():
    from semlm.idea.targets import idea_gated_loss_autograd

    token, idea, targets, positives, vocab_mask = _gated_loss_inputs(4)
    torch._dynamo.reset()
    counts = torch._dynamo.testing.CompileCounter()
    loss = torch.compile(idea_gated_loss_autograd, backend=counts, fullgraph=True)
    for alpha in (0.0, 0.1, 0.2, 0.5):  # alpha is a tensor: one graph for the whole ramp
        loss(token, idea, torch.tensor(alpha), -2.0, "clamp_then_scale", 1e-8, targets, positives, vocab_mask, 0.1)
    assert counts.frame_count == 1


def test_a_loss_whose_compile_fails_warns_once_and_runs_eagerly_with_the_same_numbers(monkeypatch):
    """A backend failure (Triton's on a GPU) must not end a run: one warning, the reason recorded, the eager loss."""
    import semlm.idea.loss as idea_loss
    from semlm.idea.targets import idea_gated_loss_autograd

    def broken_compile(fn, **options):
        def compiled(*args):
            raise torch._dynamo.exc.BackendCompilerFailed(fn, RuntimeError("PassManager::run failed"), None)
        return compiled

    monkeypatch.setattr(torch, "compile", broken_compile)
    monkeypatch.setattr(idea_loss, "COMPILE_FALLBACKS", [])
    idea_loss._compiled_gpu_loss.cache_clear()
    try:
        token, idea, targets, positives, vocab_mask = _gated_loss_inputs(5)
        args = (token, idea, torch.tensor(0.5), -2.0, "clamp_then_scale", 1e-8, targets, positives, vocab_mask, 0.1)
        with pytest.warns(RuntimeWarning, match="PassManager::run failed"):
            first = idea_loss._compiled_gpu_loss()(*args)
        second = idea_loss._compiled_gpu_loss()(*args)  # no second warning: the fallback is remembered
        assert len(idea_loss.COMPILE_FALLBACKS) == 1 and "PassManager" in idea_loss.COMPILE_FALLBACKS[0]
        for a, b, c in zip(first, second, idea_gated_loss_autograd(*args)):
            assert torch.equal(a, c) and torch.equal(b, c)
    finally:
        idea_loss._compiled_gpu_loss.cache_clear()
