"""SST-2 loader on a hand-written fixture (tests/fixtures/sst2: made-up rows, not the real data)."""

from pathlib import Path

import pytest

from semlm.data.sst2 import load_sst2, read_sst2_tsv, tree_leaves

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture
def fixture_data(monkeypatch):
    monkeypatch.setenv("SEMLM_DATA_DIR", str(FIXTURES))


def test_loader_returns_a_dataset_with_sentences_and_labels(fixture_data):
    train = load_sst2("train")
    assert train.column_names == ["sentence", "label"]
    assert len(train) == 24
    assert train[0] == {"sentence": "a warm and funny little film about two stubborn neighbours", "label": 1}
    assert train.features["label"].names == ["negative", "positive"]
    assert set(load_sst2("dev")["label"]) == {0, 1}


def test_trailing_space_before_the_tab_is_not_part_of_the_sentence(fixture_data):
    assert all(not s.endswith(" ") for s in load_sst2("dev")["sentence"])


def test_malformed_row_names_file_and_line(monkeypatch):
    monkeypatch.setenv("SEMLM_DATA_DIR", str(FIXTURES / "sst2-malformed"))
    with pytest.raises(ValueError, match=r"sst2/train\.tsv:5: expected 2 tab-separated fields \(sentence, label\), got 3"):
        load_sst2("train")


@pytest.mark.parametrize("row, problem", [
    ("a fine film \t2", r":3: label must be 0 or 1, got '2'"),
    (" \t1", r":3: empty sentence"),
    ("no label at all", r":3: expected 2 tab-separated fields"),
])
def test_each_kind_of_bad_row_is_reported_with_its_line(tmp_path, row, problem):
    path = tmp_path / "train.tsv"
    path.write_text(f"sentence\tlabel\ngood stuff \t1\n{row}\n")
    with pytest.raises(ValueError, match=problem):
        read_sst2_tsv(path)


def test_wrong_header_is_rejected_on_line_1(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("text\tlabel\ngood stuff \t1\n")
    with pytest.raises(ValueError, match=r"train\.tsv:1: header must be 'sentence<TAB>label'"):
        read_sst2_tsv(path)


def test_missing_file_gives_one_line_naming_file_and_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("SEMLM_DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError) as info:
        load_sst2("dev")
    message = str(info.value)
    assert "\n" not in message
    assert str(tmp_path / "sst2" / "dev.tsv") in message and "data/README.md" in message


def test_unknown_split_and_source_are_refused(fixture_data):
    with pytest.raises(ValueError, match="unknown SST-2 split 'test'"):
        load_sst2("test")
    with pytest.raises(ValueError, match="unknown source 'web'"):
        load_sst2("dev", source="web")


def test_hub_copy_needs_the_explicit_opt_in(monkeypatch):
    monkeypatch.delenv("SEMLM_ALLOW_DOWNLOADS", raising=False)
    with pytest.raises(ValueError, match="set SEMLM_ALLOW_DOWNLOADS=1"):
        load_sst2("train", source="hub")


def test_phrase_tree_leaves_keep_words_labels_and_case():
    tree = "(3 (2 The) (4 (3 (2 film) (4 Works)) (2 .)))"
    assert tree_leaves(tree) == [("The", 2), ("film", 2), ("Works", 4), (".", 2)]
