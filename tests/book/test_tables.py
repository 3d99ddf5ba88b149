"""How chapters show tables and configurations: no 0..n index, rounded floats, short configs."""

from dataclasses import dataclass, field

import pandas as pd
import pytest

from semlm.book.tables import config_table, flat_settings, show, show_config


@dataclass(frozen=True)
class Size:
    n_layer: int = 2
    n_embd: int = 32


@dataclass(frozen=True)
class Profile:
    name: str = "smoke"
    size: Size = field(default_factory=Size)
    budgets: tuple = (4, 8)
    lr: float = 0.003


def test_show_hides_a_default_index_and_rounds_floats():
    html = show(pd.DataFrame({"model": ["plain", "gated"], "ppl": [12.3456789, float("nan")]})).to_html()
    assert "12.346" in html and "12.3456" not in html and "–" in html
    assert ">0<" not in html and ">1<" not in html


def test_show_keeps_a_meaningful_index_and_turns_a_series_into_a_table():
    html = show(pd.Series({"plain": 0.123456, "gated": 0.5}, name="drift"), decimals=2).to_html()
    assert ">plain<" in html and "0.12" in html and "drift" in html and "dtype" not in html


def test_config_table_reads_dotted_fields_of_nested_dataclasses():
    table = config_table(Profile(), ["size.n_layer", "budgets", "lr"])
    assert list(table.columns) == ["setting", "value"]
    assert table.to_dict("records") == [{"setting": "size.n_layer", "value": "2"},
                                        {"setting": "budgets", "value": "4, 8"},
                                        {"setting": "lr", "value": "0.003"}]


def test_config_table_names_the_valid_settings_for_an_unknown_one():
    with pytest.raises(ValueError, match=r"no setting 'size.n_head'.*size\.n_layer"):
        config_table(Profile(), ["size.n_head"])
    with pytest.raises(ValueError, match="no setting"):
        show_config(Profile(), ["steps"])


def test_show_config_is_a_short_table_with_the_full_config_behind_a_toggle():
    summary = show_config(Profile(), ["size.n_layer"])
    html = summary._repr_html_()
    short, full = html.split("<details")
    assert "size.n_layer" in short and "size.n_embd" not in short
    assert "<summary>full configuration (smoke, 5 settings)</summary>" in full and "size.n_embd" in full
    assert repr(summary) == "size.n_layer: 2"
    assert flat_settings(Profile()) == {"name": "smoke", "size.n_layer": 2, "size.n_embd": 32,
                                        "budgets": (4, 8), "lr": 0.003}


def test_the_display_extension_hides_a_default_index_and_shows_a_series_as_a_table():
    from semlm.book.display import frame_html

    plain = frame_html(pd.DataFrame({"a": [1.5]}))
    assert "<th>0</th>" not in plain and "1.5" in plain
    labelled = frame_html(pd.DataFrame({"a": [1.5]}, index=["plain"]))
    assert "plain" in labelled
    series = frame_html(pd.Series({"x": 1}, dtype=object))
    assert "dtype" not in series and "<table" in series


def test_show_turns_snake_case_headers_into_words_so_they_can_wrap():
    html = show(pd.DataFrame({"switch_rate_low": [0.1], 3: [1]})).to_html()
    assert "switch rate low" in html and "switch_rate_low" not in html


def test_the_display_extension_hides_the_default_index_of_a_styler_too():
    from semlm.book.display import styler_html

    html = styler_html(pd.DataFrame({"a": [1.5, 2.5]}).style.format("{:.1f}"))
    assert "1.5" in html and ">0<" not in html
    kept = styler_html(pd.DataFrame({"a": [1.5]}, index=["plain"]).style)
    assert ">plain<" in kept
