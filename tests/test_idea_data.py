"""WikiText loading, the byte-level BPE, token blocks, domains, and the retention metrics (paper B)."""

from dataclasses import replace

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from semlm.data.bpe import bpe_tokenizer, load_tokenizer, train_bpe
from semlm.data.wikitext import downloads_allowed, load_corpus
from semlm.idea_experiment import (AUTHORS_STOPWORDS, PAD_ID, TokenBlocks, TokenStream, alpha_at, authors_stickiness,
                                   idea_profile, learning_rate, load_domains, profile_differences)
from semlm.profiles import check_parameters
from semlm.metrics import distinct_n, repetition_rate, stickiness, unique_domain_density, words_of

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
    assert batch.future.tolist() == [[1, 2, 3, 4], [7, 8, 9, PAD_ID]]
    order = [b.inputs[:, 0].tolist() for b in blocks.batches(2, torch.Generator().manual_seed(0), shuffle=True)]
    again = [b.inputs[:, 0].tolist() for b in blocks.batches(2, torch.Generator().manual_seed(0), shuffle=True)]
    assert order == again and sorted(sum(order, [])) == [0, 3, 6]


def test_alpha_ramps_linearly_to_its_target():
    settings = idea_profile("paper").idea
    assert [alpha_at(s, settings) for s in (0, 1000, 2000, 5000)] == [0.0, 0.25, 0.5, 0.5]


def test_profiles_follow_the_authors_v1_at_paper_scale():
    paper = idea_profile("paper")
    assert (paper.size.n_layer, paper.size.n_head, paper.size.n_embd, paper.size.block_size) == (6, 6, 384, 256)
    assert (paper.size.dropout, paper.size.dropout_scope, paper.size.init) == (0.1, "embeddings", "authors_v1")
    assert (paper.vocab_size, paper.tokenizer, paper.dataset) == (50257, "gpt2", "wikitext-103")
    assert (paper.idea.window, paper.idea.idea_weight, paper.idea.beta, paper.idea.pos_weight) == (20, 0.01, -2.0, 5.0)
    assert (paper.idea.idea_loss_reduction, paper.idea.alpha, paper.idea.alpha_ramp_steps) == ("sum_vocab", 0.5, 2000)
    assert paper.idea.stopword_list == AUTHORS_STOPWORDS and len(AUTHORS_STOPWORDS) == 18
    t = paper.train
    assert (t.max_steps, t.micro_batch, t.accumulation, t.lr, t.min_lr, t.warmup_steps) == (50_000, 8, 4, 3e-4, 3e-5, 1000)
    assert (t.weight_decay, t.grad_clip) == (0.01, None)
    g = paper.generation
    assert (g.temperature, g.repetition_penalty, g.penalty_form, g.authors_samples, g.authors_new_tokens) == (
        0.6, 1.2, "authors", 20, 100)
    assert profile_differences(paper) == []
    with pytest.raises(ValueError, match="unknown profile"):
        idea_profile("laptop")


def test_learning_rate_warms_up_from_zero_and_ends_on_the_floor():
    t = idea_profile("paper").train
    assert learning_rate(0, t) == 0.0 and learning_rate(500, t) == pytest.approx(1.5e-4)
    assert learning_rate(1000, t) == pytest.approx(3e-4)
    assert learning_rate(50_000, t) == pytest.approx(3e-5) and learning_rate(60_000, t) == pytest.approx(3e-5)
    assert 3e-5 < learning_rate(25_500, t) < 3e-4


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


def test_authors_init_and_dropout_placement():
    from semlm.idea_experiment import apply_authors_choices, model_config
    from semlm.models.idea import IdeaGPTForCausalLM

    profile = idea_profile("smoke")
    size = replace(profile.size, dropout=0.1, dropout_scope="embeddings", init="authors_v1")
    torch.manual_seed(0)
    model = apply_authors_choices(IdeaGPTForCausalLM(model_config(replace(profile, size=size), 64, True)), size)
    dropouts = {n: m.p for n, m in model.named_modules() if isinstance(m, torch.nn.Dropout)}
    assert dropouts.pop("transformer.drop") == 0.1 and set(dropouts.values()) == {0.0}
    assert all(b.abs().max() > 0 for n, b in model.named_parameters() if n.endswith(".bias") and "ln" not in n)
    proj = model.transformer.h[0].attn.c_proj.weight
    assert 0.015 < float(proj.detach().std()) < 0.025  # N(0, 0.02), no residual scaling


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
