from collections import Counter

import pytest

from semlm.data import synthetic as syn
from semlm.data.dataset import encode_corpus
from semlm.data.paths import dataset_file
from semlm.data.vocab import Vocabulary, detokenize
from semlm.fusion.features import SyntheticFeatures


@pytest.fixture(scope="module")
def corpus():
    return syn.make_corpus()


def test_seed_111_gives_the_published_held_out_split():
    split = syn.held_out_split(111)
    assert set(split.positive_held_out) == {"wonderful", "excellent", "great"}
    assert set(split.negative_held_out) == {"terrible", "awful", "unpleasant"}
    assert len(split.positive_train) == len(split.negative_train) == 2


def test_split_depends_on_seed():
    assert len({syn.held_out_split(seed) for seed in range(10)}) > 1


def test_corpus_sizes_and_length_cap(corpus):
    assert len(corpus.train) == 8000 and len(corpus.val) == 1200
    assert max(len(s) + 2 for s in corpus.train + corpus.val) <= 28


def test_training_never_contains_held_out_adjectives(corpus):
    words = Counter(w for s in corpus.train for w in s)
    assert not set(corpus.split.held_out) & set(words)
    assert set(corpus.split.positive_train) <= set(words)


def test_validation_uses_all_adjectives(corpus):
    words = {w for s in corpus.val for w in s}
    assert set(syn.POSITIVE_ADJECTIVES + syn.NEGATIVE_ADJECTIVES) <= words


def test_second_clause_rate_is_about_0_6_and_uses_the_subjects_pronoun(corpus):
    two = [s for s in corpus.train if s[7] in syn.CONJUNCTIONS]
    assert 0.57 < len(two) / len(corpus.train) < 0.63
    assert all(s[8] == syn.PRONOUN_OF[s[0]] for s in two)


def test_every_sentence_follows_the_clause_template(corpus):
    for s in corpus.train[:500]:
        assert s[0] in syn.SUBJECTS and s[1] in syn.VERBS and s[2] == "the" and s[3] in syn.OBJECTS
        assert s[4] == "," and s[5] in syn.INTENSIFIERS and s[-1] in syn.END_PUNCTUATION


def test_corpus_is_deterministic_for_a_seed():
    config = syn.SyntheticConfig(n_train=50, n_val=10, corpus_seed=5)
    assert syn.make_corpus(config).train == syn.make_corpus(config).train
    other = syn.SyntheticConfig(n_train=50, n_val=10, corpus_seed=6)
    assert syn.make_corpus(config).train != syn.make_corpus(other).train


@pytest.mark.parametrize("kwargs, message", [
    ({"second_clause_prob": 1.5}, "second_clause_prob"),
    ({"n_train": 0}, "n_train"),
    ({"max_len": 5}, "max_len"),
])
def test_bad_corpus_config_is_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        syn.SyntheticConfig(**kwargs)


def test_vocabulary_round_trip_and_unknown_word(vocab):
    ids = vocab.encode(["Bob", "cooks"])
    assert ids[0] == vocab.bos_id and ids[-1] == vocab.eos_id
    assert vocab.decode(ids) == ["Bob", "cooks"]
    with pytest.raises(ValueError, match="'banana' is not in the vocabulary"):
        vocab.id("banana")


def test_detokenize_attaches_punctuation():
    assert detokenize(["Bob", "cooks", "the", "meal", ",", "very", "good", "!"]) == "Bob cooks the meal, very good!"


def test_encoded_corpus_shifts_targets_by_one(vocab):
    data = encode_corpus([["Bob", "cooks", "the", "meal", ",", "very", "good", "."]], vocab, SyntheticFeatures(vocab))
    assert data.input_ids[0, 0] == vocab.bos_id
    assert data.targets[0, :-1].tolist() == data.input_ids[0, 1:].tolist()
    assert data.targets[0, -1] == vocab.eos_id
    assert data.features.shape == (1, 9, 22) and bool(data.mask.all())


def test_missing_dataset_file_names_the_file_and_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SEMLM_DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"missing dataset file .*sst2/train.tsv.*SEMLM_DATA_DIR.*GLUE"):
        dataset_file("sst2", "train.tsv")


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown dataset 'imdb'; known: fineweb-edu-sample"):
        dataset_file("imdb", "train.tsv")


def test_present_dataset_file_is_found(tmp_path, monkeypatch):
    (tmp_path / "wikitext-2").mkdir()
    (tmp_path / "wikitext-2" / "valid.txt").write_text("x")
    monkeypatch.setenv("SEMLM_DATA_DIR", str(tmp_path))
    assert dataset_file("wikitext-2", "valid.txt").read_text() == "x"


def test_streamed_fineweb_keeps_the_first_long_enough_documents(monkeypatch):
    import sys
    import types

    from semlm.data import fineweb

    rows = [{"text": "short"}, {"text": "a long one\r\n"}, {"text": "x" * 3}, {"text": "another long"}, {"text": "never"}]
    datasets = types.ModuleType("datasets")
    datasets.load_dataset = lambda *args, **kwargs: iter(rows)
    monkeypatch.setitem(sys.modules, "datasets", datasets)
    monkeypatch.setenv("SEMLM_ALLOW_DOWNLOADS", "1")
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    assert fineweb.stream_documents(2, min_characters=6) == ["a long one", "another long"]
