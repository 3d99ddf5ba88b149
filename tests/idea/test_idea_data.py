"""WikiText loading, the byte-level BPE, token blocks, domains, and the retention metrics (paper B)."""

import math
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from semlm.data.bpe import bpe_tokenizer, load_tokenizer, train_bpe
from semlm.data.wikitext import downloads_allowed, load_corpus
from semlm.idea.profiles import AUTHORS_STOPWORDS, idea_profile, profile_differences
from semlm.idea.data import TokenBlocks, TokenStream, take_chars
from semlm.idea.generation import authors_stickiness, load_domains
from semlm.idea.loss import training_gate
from semlm.profiles import check_parameters
from semlm.core.metrics import NO_TARGET, distinct_n, repetition_rate, stickiness, unique_domain_density, words_of

LINES = [" The storm moved west and the storm weakened .\n", " The band recorded the album in 1999 .\n"] * 30


def test_bpe_is_deterministic_and_reloads_through_transformers(tmp_path):
    a, b = train_bpe(LINES, 300), train_bpe(LINES, 300)
    assert a.to_str() == b.to_str()
    tokenizer = bpe_tokenizer(LINES, 300, tmp_path / "tok")
    again = load_tokenizer(tmp_path / "tok")
    assert isinstance(again, PreTrainedTokenizerFast)
    ids = again(" The storm moved west")["input_ids"]
    assert again.decode(ids) == " The storm moved west" and ids == tokenizer(" The storm moved west")["input_ids"]
    assert again.eos_token == "<|endoftext|>"


def test_missing_wikitext_names_the_file_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("SEMLM_DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"wikitext-2/train.txt .*load_dataset\('wikitext'"):
        load_corpus("wikitext-2")
    with pytest.raises(ValueError, match="unknown dataset 'ptb'"):
        load_corpus("ptb")


def test_wikitext2_reads_the_same_lines_with_or_without_datasets_installed(tmp_path, monkeypatch):
    text = " = Title = \r\n \n Some text\x0c here .\n\n Line\u2028 two .\r More <unk> text ."
    (tmp_path / "wikitext-2").mkdir()
    for split in ("train", "valid", "test"):
        (tmp_path / "wikitext-2" / f"{split}.txt").write_text(text, encoding="utf-8", newline="")
    monkeypatch.setenv("SEMLM_DATA_DIR", str(tmp_path))
    with_datasets = load_corpus("wikitext-2")
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` now raises ImportError
    without = load_corpus("wikitext-2")
    assert with_datasets == without
    assert without.train == [" = Title = \n", " Some text\x0c here .\n", " Line\u2028 two .\n", " More <unk> text .\n"]


def test_wikitext103_falls_back_to_wikitext2_without_permission(tmp_path, monkeypatch):
    for split in ("train", "valid", "test"):
        (tmp_path / "wikitext-2").mkdir(exist_ok=True)
        (tmp_path / "wikitext-2" / f"{split}.txt").write_text(" = Title = \n \n Some text here .\n")
    monkeypatch.setenv("SEMLM_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("SEMLM_ALLOW_DOWNLOADS", raising=False)
    assert not downloads_allowed()
    splits = load_corpus("wikitext-103")
    assert splits.dataset == "wikitext-2" and splits.requested == "wikitext-103"
    assert "SEMLM_ALLOW_DOWNLOADS" in splits.note
    assert splits.train == [" = Title = \n", " Some text here .\n"]


def test_blocks_hold_inputs_targets_and_idea_windows_past_the_block():
    blocks = TokenBlocks.from_stream(torch.arange(10), block_size=3, window=2)
    assert len(blocks) == 3  # (10 - 1) // 3
    batch = blocks.batch(torch.tensor([0, 2]))
    assert batch.inputs.tolist() == [[0, 1, 2], [6, 7, 8]]
    assert batch.targets.tolist() == [[1, 2, 3], [7, 8, 9]]
    assert batch.future.tolist() == [[1, 2, 3, 4], [7, 8, 9, NO_TARGET]]
    order = [b.inputs[:, 0].tolist() for b in blocks.batches(2, torch.Generator().manual_seed(0), shuffle=True)]
    again = [b.inputs[:, 0].tolist() for b in blocks.batches(2, torch.Generator().manual_seed(0), shuffle=True)]
    assert order == again and sorted(sum(order, [])) == [0, 3, 6]


def test_alpha_ramps_linearly_to_its_target():
    settings = idea_profile("paper").idea
    gate = training_gate(settings)
    assert [gate.at_step(s).alpha for s in (0, 1000, 2000, 5000)] == [0.0, 0.25, 0.5, 0.5]
    assert gate.at_step(None) == gate and gate.at_step(0).off


def test_profiles_follow_the_authors_v1_at_paper_scale():
    paper = idea_profile("paper")
    assert (paper.size.n_layer, paper.size.n_head, paper.size.n_embd, paper.size.block_size) == (6, 6, 384, 256)
    assert (paper.size.dropout, paper.size.dropout_scope, paper.size.init) == (0.1, "embeddings", "authors_v1")
    assert (paper.vocab_size, paper.tokenizer, paper.dataset) == (50257, "gpt2", "wikitext-103")
    assert (paper.idea.window, paper.idea.idea_weight, paper.idea.beta, paper.idea.pos_weight) == (20, 0.01, -2.0, 5.0)
    assert (paper.idea.idea_loss_reduction, paper.idea.alpha, paper.idea.alpha_ramp_steps) == ("sum_vocab", 0.5, 2000)
    assert paper.idea.stopword_list == AUTHORS_STOPWORDS and len(AUTHORS_STOPWORDS) == 18
    t = paper.train  # 8 windows x 4 accumulated micro-batches per iteration
    assert (t.max_steps, t.batch_size, t.accumulation, t.lr, t.min_lr, t.warmup_steps) == (50_000, 32, 4, 3e-4, 3e-5, 1000)
    assert (t.weight_decay, t.grad_clip, t.sampling, t.schedule) == (0.01, None, "random_windows", "cosine_min_lr")
    g = paper.generation
    assert (g.temperature, g.repetition_penalty, g.penalty_form, g.authors_samples, g.authors_new_tokens) == (
        0.6, 1.2, "authors", 20, 100)
    assert profile_differences(paper) == []
    with pytest.raises(ValueError, match="unknown profile"):
        idea_profile("laptop")


def authors_get_lr(step, t):
    """The authors' ``get_lr`` (their v1 ``train.py``), as the book's ``learning_rate`` wrote it before the one loop."""
    if step < t.warmup_steps:
        return t.lr * step / t.warmup_steps
    if step > t.max_steps:
        return t.min_lr
    ratio = (step - t.warmup_steps) / max(1, t.max_steps - t.warmup_steps)
    return t.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (t.lr - t.min_lr)


@pytest.mark.parametrize("profile", ["paper", "cpu", "smoke"])
def test_the_loops_cosine_min_lr_schedule_is_the_authors_get_lr(profile):
    """transformers' cosine-with-min-lr schedule, as the one loop makes it, gives optimiser step i the
    authors' get_lr(i) exactly (same step, no offset; equal up to float rounding): warmup from 0, the
    peak at the end of warmup, the floor at max_steps."""
    from semlm.core.train import make_scheduler

    t = idea_profile(profile).train
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=t.lr)
    scheduler = make_scheduler(optimizer, t, t.max_steps)
    steps = sorted({0, 1, t.warmup_steps // 2, t.warmup_steps, t.warmup_steps + 1, t.max_steps // 2,
                    t.max_steps - 1, t.max_steps})
    lrs = {}
    for step in range(t.max_steps + 1):
        lrs[step] = scheduler.get_last_lr()[0]  # what the loop uses for optimiser step ``step``
        optimizer.step()
        scheduler.step()
    for step in steps:
        assert lrs[step] == pytest.approx(authors_get_lr(step, t), rel=1e-9, abs=1e-15), step
    assert lrs[0] == 0.0 and lrs[t.warmup_steps] == pytest.approx(t.lr) and lrs[t.max_steps] == pytest.approx(t.min_lr)


def test_max_steps_caps_a_profile_compresses_its_schedule_and_shows_in_the_differences():
    capped = idea_profile("paper", max_steps=1000)
    assert (capped.train.max_steps, capped.train.warmup_steps, capped.idea.alpha_ramp_steps) == (1000, 20, 40)
    assert capped.sweep_steps == 100  # the sweeps keep their share (5,000 of 50,000)
    assert capped.capped_from == 50_000 and idea_profile("paper").capped_from is None
    assert {row["setting"] for row in profile_differences(capped)} >= {"train.max_steps", "train.warmup_steps",
                                                                       "idea.alpha_ramp_steps"}
    assert idea_profile("smoke", max_steps=10_000) == idea_profile("smoke")  # a cap above the profile changes nothing
    with pytest.raises(ValueError, match="max_steps must be an int >= 1 or None"):
        idea_profile("cpu", max_steps=0)
    check_parameters(max_steps=None)
    check_parameters(max_steps=500)
    with pytest.raises(ValueError, match="parameter max_steps must be an int >= 1 or None"):
        check_parameters(max_steps="500")


def test_differences_from_the_authors_are_read_from_the_configs():
    rows = {row["setting"]: row for row in profile_differences(idea_profile("cpu"))}
    assert rows["train.max_steps"]["authors' run"] == 50_000
    assert rows["train.max_steps"]["this run"] == idea_profile("cpu").train.max_steps
    assert "idea.window" not in rows and "train.seed" not in rows


def test_random_windows_hold_inputs_targets_and_the_idea_future():
    stream = TokenStream(torch.arange(100), block_size=4, window=3)
    batch = stream.sample(5, torch.Generator().manual_seed(0))
    starts = batch.inputs[:, 0]
    for row, s in enumerate(starts.tolist()):
        assert batch.inputs[row].tolist() == list(range(s, s + 4))
        assert batch.targets[row].tolist() == list(range(s + 1, s + 5))
        assert batch.future[row].tolist() == list(range(s + 1, s + 7))
    with pytest.raises(ValueError, match="need more than 7 training tokens"):
        TokenStream(torch.arange(7), block_size=4, window=3)


def test_authors_init_and_dropout_placement_are_the_models_own():
    from semlm.idea.wikitext_experiment import model_config
    from semlm.idea.model import IdeaGPTForCausalLM

    profile = idea_profile("smoke")
    size = replace(profile.size, n_layer=2, dropout=0.1, dropout_scope="embeddings", init="authors_v1")
    torch.manual_seed(0)
    model = IdeaGPTForCausalLM(model_config(replace(profile, size=size), 64, True))
    dropouts = {n: m.p for n, m in model.named_modules() if isinstance(m, torch.nn.Dropout)}
    assert dropouts.pop("transformer.drop") == 0.1 and set(dropouts.values()) == {0.0}
    assert {m.dropout for m in model.modules() if hasattr(m, "c_attn")} == {0.0}  # attention weights too
    assert all(b.abs().max() > 0 for n, b in model.named_parameters() if n.endswith(".bias") and "ln" not in n)
    proj = model.transformer.h[0].attn.c_proj.weight
    assert 0.015 < float(proj.detach().std()) < 0.025  # N(0, 0.02), no residual scaling
    # GPT-2's scheme (the model's default): zero biases, residual projections scaled by 1/sqrt(2 n_layer)
    gpt2 = IdeaGPTForCausalLM(model_config(replace(profile, size=replace(size, init="gpt2_scaled",
                                                                        dropout_scope="everywhere")), 64, True))
    assert float(gpt2.transformer.h[0].attn.c_proj.bias.detach().abs().max()) == 0.0
    assert 0.007 < float(gpt2.transformer.h[0].attn.c_proj.weight.detach().std()) < 0.013  # 0.02 / 2
    assert {m.p for m in gpt2.modules() if isinstance(m, torch.nn.Dropout)} == {0.1}


def test_authors_stickiness_on_a_hand_example():
    text = "The stock market is rising. The bank and the market, money"
    # words: stock market rising bank market money (the/is/and removed): 4 of 6 in the list
    assert authors_stickiness(text, {"market", "bank", "money"}) == pytest.approx(4 / 6)
    assert authors_stickiness("the and of", {"market"}) == 0.0


def test_domains_have_prompts_and_terms():
    domains = load_domains()
    assert len(domains) >= 4
    for domain in domains.values():
        assert domain.prompts and all(p.startswith(" ") for p in domain.prompts)
        assert len(domain.terms) >= 20 and all(t == t.lower() for t in domain.terms)


def test_retention_metrics_on_a_hand_example():
    words = words_of("The storm @-@ surge hit ; the storm weakened .")
    assert words == ["the", "storm-surge", "hit", "the", "storm", "weakened"]
    assert stickiness(words, {"storm", "weakened"}, {"the"}) == pytest.approx(2 / 4)
    assert unique_domain_density(words, {"storm", "weakened", "rain"}) == pytest.approx(100 * 2 / 6)
    assert distinct_n(["a", "b", "a", "b"], 2) == pytest.approx(2 / 3)
    assert repetition_rate(list("abcabcabc"), 3) == pytest.approx(4 / 7)
    assert repetition_rate(list("abcdef"), 3) == 0.0


def test_paper_b_profiles_need_no_torch_and_name_the_models_choices():
    code = ("import sys; from semlm.idea.profiles import idea_profile, topic_drift_profile; "
            "idea_profile('cpu'); topic_drift_profile('cpu'); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    from semlm.idea.model import GATE_VARIANTS
    from semlm.idea.profiles import IDEA_GATE_VARIANTS, IdeaSettings

    assert IDEA_GATE_VARIANTS == GATE_VARIANTS
    with pytest.raises(ValueError, match="unknown gate variant 'clamp'"):
        IdeaSettings(gate_variant="clamp")


def test_the_idea_loss_takes_alpha_from_the_step_and_keeps_no_counter():
    from semlm.idea.loss import idea_loss_fn
    from semlm.idea.wikitext_experiment import model_config
    from semlm.idea.model import IdeaGPTForCausalLM

    profile = idea_profile("smoke")
    settings = replace(profile.idea, alpha=0.5, alpha_ramp_steps=4)
    torch.manual_seed(0)
    model = IdeaGPTForCausalLM(model_config(profile, 64, True, settings)).eval()
    batch = TokenStream(torch.arange(400) % 64, profile.size.block_size, settings.window).sample(
        2, torch.Generator().manual_seed(0))
    loss_fn = idea_loss_fn(settings, [1, 2], True)
    alphas = [loss_fn(model, batch, step)[1]["alpha"] for step in (0, 2, 2, 4, 100, 2)]
    assert alphas == [0.0, 0.25, 0.25, 0.5, 0.5, 0.25]  # the same step gives the same alpha, in any order
    assert loss_fn(model, batch)[1]["alpha"] == 0.5     # no step: the end of the ramp
    assert loss_fn(model, batch, 2)[0].item() == loss_fn(model, batch, 2)[0].item()
    plain = idea_loss_fn(settings, [1, 2], False)(IdeaGPTForCausalLM(model_config(profile, 64, False)), batch, 0)
    assert set(plain[1]) == {"token_ce"}


@pytest.mark.needs_data("06_idea_gating")
def test_smoke_runs_train_once_then_reload_with_their_metrics(tmp_path, monkeypatch):
    from semlm.core.metrics import perplexity
    from semlm.core.runs import RunContext, nested, run_many
    from semlm.idea.wikitext_experiment import IDEA, idea_data, idea_gating_runs, idea_run, with_chosen_gated

    monkeypatch.setenv("SEMLM_RUNS_DIR", str(tmp_path))  # the tokeniser cache too
    profile = idea_profile("smoke")
    context = RunContext(profile.name)
    runs, chosen = with_chosen_gated(nested(run_many(IDEA, idea_gating_runs(profile), context), "name"))
    assert set(runs) == {"baseline", "gated-sum", "gated-mean", "gated"} and runs["gated"] is runs[chosen]
    assert {r.status for r in runs.values()} == {"trained"} and {r.steps for r in runs.values()} == {20}
    assert runs["baseline"].metrics.val_ppl_ungated is None and runs["gated"].metrics.val_ppl_ungated > 1
    assert runs["gated-sum"].spec.config.idea.idea_loss_reduction == "sum_vocab"
    assert [row["step"] for row in runs["gated"].history] == [10, 20]
    again, _ = with_chosen_gated(nested(run_many(IDEA, idea_gating_runs(profile), context), "name"))
    assert {r.status for r in again.values()} == {"loaded"}
    assert again["baseline"].metrics == runs["baseline"].metrics
    model = again["gated"].load("cpu")
    data = idea_data(profile)
    assert data is IDEA.data(runs["gated"].spec)  # the experiment's copy, prepared once in this process
    assert perplexity(model, data.blocks("valid", profile)) == pytest.approx(runs["gated"].metrics.val_ppl, rel=1e-5)
    spec = idea_run(profile, "short", True, replace(profile.idea, window=10), 6_000, 8)
    [run] = run_many(IDEA, [spec], context)
    assert run.steps == 8 and run.metrics.train_tokens == 6_001
    assert run.config["idea"]["window"] == 10 and run.config["idea"]["alpha_ramp_steps"] == 2  # 5 x 8 / 20


def test_take_chars_keeps_the_lines_up_to_the_one_that_reaches_the_budget():
    lines = ["abc", "de", "fgh", "ij"]
    assert take_chars(lines, None) == lines
    assert take_chars(lines, 3) == ["abc"] and take_chars(lines, 4) == ["abc", "de"]
    assert take_chars(lines, 0) == [] and take_chars(lines, 100) == lines
