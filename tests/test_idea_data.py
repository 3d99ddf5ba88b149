"""WikiText loading, the byte-level BPE, token blocks, domains, and the retention metrics (paper B)."""

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from semlm.data.bpe import bpe_tokenizer, load_tokenizer, train_bpe
from semlm.data.wikitext import downloads_allowed, load_corpus
from semlm.idea_experiment import PAD_ID, TokenBlocks, alpha_at, idea_profile, load_domains
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
    assert (paper.vocab_size, paper.idea.window, paper.idea.idea_weight, paper.idea.beta) == (50257, 20, 0.01, -2.0)
    with pytest.raises(ValueError, match="unknown profile"):
        idea_profile("laptop")


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
