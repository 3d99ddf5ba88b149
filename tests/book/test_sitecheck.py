"""The rendered-site checks themselves: they must catch what they claim to catch."""

import base64
import html

import pytest

from semlm.book.sitecheck import broken_internal_links, long_code_lines, problems_of, render_check


def test_link_check_finds_missing_files_and_anchors_and_accepts_good_links(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.html").write_text('<h1 id="top">B</h1>')
    (tmp_path / "a.html").write_text(
        '<a href="sub/b.html#top">ok</a> <a href="#here">ok</a> <span id="here"></span>'
        '<a href="https://example.org/x">external</a> <a href="missing.html">bad</a>'
        '<a href="sub/b.html#nowhere">bad anchor</a> <img src="img/none.png">')
    problems = broken_internal_links(tmp_path)
    assert problems == sorted([
        "a.html: a.href -> missing.html (no such file)",
        "a.html: a.href -> sub/b.html#nowhere (no anchor #nowhere)",
        "a.html: img.src -> img/none.png (no such file)",
    ])


def test_render_check_reports_raw_tex_broken_images_and_script_errors(tmp_path, chromium):
    page = tmp_path / "page.html"
    page.write_text('<html><head></head><body><p>Energy $$E = mc^2$$ and \\(x\\).</p>'
                    '<img src="missing.png"><script>undefinedFunction();</script></body></html>')
    report = render_check(page, chromium)
    assert set(report["raw_tex"]) == {"$$", "\\("}
    assert report["broken_images"] == ["missing.png"]
    assert any("undefinedFunction" in e for e in report["js_errors"])


def test_render_check_passes_a_clean_page(tmp_path, chromium):
    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
    (tmp_path / "dot.png").write_bytes(png)
    page = tmp_path / "page.html"
    page.write_text('<html><head></head><body><p>plain text</p><img src="dot.png"></body></html>')
    report = render_check(page, chromium)
    assert report["raw_tex"] == [] and report["broken_images"] == [] and report["js_errors"] == []
    assert report["images"] == 1


def code_page(tmp_path, code: str, output: str = "", prose: str = "") -> "Path":
    page = tmp_path / "code.html"
    page.write_text('<html><head><style>main { width: 760px; } pre { overflow-x: auto; font: 14px monospace; }'
                    '</style></head><body><main>'
                    f'<p>{html.escape(prose)}</p>'
                    f'<div class="cell_input"><div class="highlight"><pre>{html.escape(code)}</pre></div></div>'
                    f'<div class="cell_output"><pre>{html.escape(output)}</pre></div></main></body></html>')
    return page


def test_render_check_fails_a_code_cell_that_scrolls_sideways_and_names_its_line(tmp_path, chromium):
    long_line = "result = some_function(" + ", ".join(f"argument_{i}=value_{i}" for i in range(12)) + ")"
    report = render_check(code_page(tmp_path, f"short = 1\n{long_line}\n"), chromium)
    assert report["wide_code"] == [long_line[:100]]
    assert "wide_code" in problems_of(report)
    eighty = "x = [" + ", ".join(["1"] * 24) + "]"
    assert len(eighty) <= 80
    assert render_check(code_page(tmp_path, eighty), chromium)["wide_code"] == []


def test_render_check_fails_an_absolute_path_in_an_output_but_not_in_prose(tmp_path, chromium):
    page = code_page(tmp_path, "print(where)", output="metrics in /home/alice/semlm/book/_build/metrics\n"
                                                       "data: data/sst2 (relative, fine)",
                     prose="an example command: jupytext -o /tmp/04.ipynb")
    report = render_check(page, chromium)
    assert report["absolute_paths"] == ["/home/alice/semlm/book/_build/metrics"]
    assert "absolute_paths" in problems_of(report)
    clean = render_check(code_page(tmp_path, "print(where)", output="metrics in book/_build/metrics"), chromium)
    assert problems_of(clean) == {}


def test_long_code_lines_reports_visible_code_only(tmp_path):
    wide = "y = " + "1 + " * 30 + "1"
    (tmp_path / "01_chapter.py").write_text(
        "# %% [markdown]\n# " + "prose " * 30 + "\n\n"
        f"# %%\nx = 1\n{wide}\n\n"
        f'# %% tags=["remove-input"]\n{wide}\n')
    assert long_code_lines(tmp_path) == [f"01_chapter.py:6: {len(wide)} chars"]


def test_render_check_flags_a_pandas_series_printed_as_text(tmp_path, chromium):
    series = "causal     0.000000\npublished  0.058429\nName: largest change, dtype: float64"
    report = render_check(code_page(tmp_path, "pd.Series(changes)", output=series), chromium)
    assert report["series_outputs"] == ["Name: largest change, dtype: float64"]
    assert "series_outputs" in problems_of(report)
    table = render_check(code_page(tmp_path, "frame", output="   value\ncausal 0.0"), chromium)
    assert table["series_outputs"] == []


def test_render_check_flags_references_to_files_outside_the_repository(tmp_path, chromium):
    page = code_page(tmp_path, "x = 1", prose="as measured in NOTES.md; data in ../shared/data/sst2")
    assert render_check(page, chromium)["outside_references"] == ["NOTES.md", "../shared/data/sst2"]
    assert render_check(code_page(tmp_path, "x = 1", prose="see data/README.md"), chromium)["outside_references"] == []


def test_render_check_flags_a_dtype_line_anywhere_in_an_output(tmp_path, chromium):
    printed = "a    1\nb    x\ndtype: object\nand a line printed after it"
    report = render_check(code_page(tmp_path, "print(series); print('and')", output=printed), chromium)
    assert report["series_outputs"] == ["dtype: object"]
    assert "series_outputs" in problems_of(report)
    prose = render_check(code_page(tmp_path, "x = 1", output="the column's dtype is float64",
                                   prose="dtype: object"), chromium)
    assert prose["series_outputs"] == []


def table_page(tmp_path, columns: int, cell: str = "value", css: str = "", scroll: bool = False) -> "Path":
    head = "".join(f"<th>column {i}</th>" for i in range(columns))
    row = "".join(f"<td>{cell}</td>" for _ in range(columns))
    box = ' style="overflow-x: auto"' if scroll else ""
    page = tmp_path / "table.html"
    page.write_text(f'<html><head><style>main {{ width: 760px; }} td {{ white-space: nowrap; }} {css}</style></head>'
                    f'<body><main><div class="cell_output"{box}><table><thead><tr>{head}</tr>'
                    f"</thead><tbody><tr>{row}</tr></tbody></table></div></main></body></html>")
    return page


def test_render_check_flags_a_table_cut_off_at_its_column_and_names_its_columns(tmp_path, chromium):
    report = render_check(table_page(tmp_path, 12, cell="a rather long cell value"), chromium)
    assert len(report["wide_tables"]) == 1 and report["scrolling_tables"] == []
    assert "760px column" in report["wide_tables"][0] and "column 0, column 1" in report["wide_tables"][0]
    assert "wide_tables" in problems_of(report)


def test_a_wide_table_scrolling_in_its_own_box_is_listed_not_failed(tmp_path, chromium):
    report = render_check(table_page(tmp_path, 12, cell="a rather long cell value", scroll=True), chromium)
    assert report["wide_tables"] == [] and len(report["scrolling_tables"]) == 1
    assert problems_of(report) == {}


def test_render_check_passes_a_table_that_fits_its_column(tmp_path, chromium):
    report = render_check(table_page(tmp_path, 4), chromium)
    assert report["wide_tables"] == [] and report["narrow_columns"] == []
    # the same wide content fits when the table is laid out to the column and its lines break between words
    fitted = table_page(tmp_path, 6, cell="a rather long cell value, and longer still",
                        css="table { width: 100%; table-layout: fixed; } td { white-space: normal; }")
    report = render_check(fitted, chromium)
    assert report["wide_tables"] == [] and report["narrow_columns"] == []


@pytest.mark.parametrize("css, how", [
    ("overflow-wrap: anywhere;", "breaks over"),   # one letter per line: the report's claims table at 1400 px
    ("", "spills out of its cell"),                 # a fixed column narrower than the word: it runs into the next
])
def test_render_check_flags_a_column_narrower_than_its_longest_word(tmp_path, chromium, css, how):
    page = table_page(tmp_path, 12, cell="a recorded-run verdict",
                      css=f"table {{ width: 100%; table-layout: fixed; }} th, td {{ white-space: normal; {css} }}"
                          "th:nth-child(3) { width: 1%; }")
    narrow = render_check(page, chromium)["narrow_columns"]
    assert any(line.startswith('"column 2": ') and how in line for line in narrow), narrow
    assert "narrow_columns" in problems_of(render_check(page, chromium))


def test_a_line_may_break_between_words_and_after_a_hyphen(tmp_path, chromium):
    page = table_page(tmp_path, 3, cell="A-feature-steering gated gated gated gated",
                      css="table { table-layout: fixed; width: 100%; } td { white-space: normal; }"
                          "td:nth-child(2) { width: 90px; }")
    assert render_check(page, chromium)["narrow_columns"] == []


def test_tables_are_checked_at_a_wide_and_a_small_window(tmp_path, chromium):
    from semlm.book.sitecheck import TABLE_WINDOWS

    assert {width for width, _ in TABLE_WINDOWS} == {1400, 800}
    report = render_check(table_page(tmp_path, 2), chromium, window=(800, 900))
    assert report["window"] == [800, 900]


def test_render_check_flags_a_visible_glue_call_but_not_a_hidden_one(tmp_path, chromium):
    code = 'table = frame()\nglue("rate", rate, display=False)\ntable'
    report = render_check(code_page(tmp_path, code), chromium)
    assert report["visible_glue"] == ['glue("rate", rate, display=False)']
    assert "visible_glue" in problems_of(report)
    hidden = tmp_path / "hidden.html"  # a hide-input cell: the input sits in a closed <details>
    hidden.write_text('<html><body><main><details class="hide above-input"><summary>Show code cell source'
                      '</summary><div class="cell_input"><pre>glue("rate", rate, display=False)</pre></div>'
                      '</details><div class="cell_input"><pre>table = frame()</pre></div></main></body></html>')
    assert render_check(hidden, chromium)["visible_glue"] == []


def exercises_page(*items: str, open_attribute: str = "") -> str:
    """A chapter page as Jupyter Book renders it: sphinx-design dropdowns are <details> elements."""
    return ('<html><body><section id="the-leak"><h2>The leak</h2><details open><summary>Solution</summary>'
            '</details></section><section id="exercises"><h2>Exercises</h2><p>Try first.</p>'
            '<ol class="arabic">' + "".join(f"<li><p><strong>Exercise</strong></p>{item}</li>" for item in items)
            + '</ol><ol><li>not an exercise</li></ol></section></body></html>')


def dropdown(title: str, open_attribute: str = "") -> str:
    return (f'<details class="sd-sphinx-override sd-dropdown sd-card sd-mb-3"{open_attribute}>'
            f'<summary class="sd-summary-title sd-card-header"><span class="sd-summary-text">{title}</span>'
            '<svg><path d="M0"></path></svg></summary><div class="sd-card-body"><ol><li>step</li></ol>'
            '<div class="highlight"><pre>x = 1</pre></div></div></details>')


def test_exercise_check_passes_when_every_exercise_has_a_collapsed_solution(tmp_path, chromium):
    both = dropdown("Hint") + dropdown("Solution")
    page = tmp_path / "exercises.html"
    page.write_text(exercises_page(both, both, dropdown("Solution")))
    assert render_check(page, chromium)["exercises"] == []
    # a page without exercises, and an open dropdown outside the Exercises section, are not checked
    page.write_text("<html><body><details open><summary>Solution</summary></details></body></html>")
    assert render_check(page, chromium)["exercises"] == []


def test_exercise_check_fails_a_missing_or_open_solution(tmp_path, chromium):
    page = tmp_path / "exercises.html"
    page.write_text(exercises_page(dropdown("Hint") + dropdown("Solution"), dropdown("Hint"),
                                   dropdown("Solution", ' open="open"'), "<p>no dropdown at all</p>"))
    report = render_check(page, chromium)
    assert report["exercises"] == [
        "exercise 2: no Solution dropdown",
        "exercise 3: the Solution dropdown is open (it must start collapsed)",
        "exercise 4: no Solution dropdown",
    ]
    assert "exercises" in problems_of(report)
    page.write_text('<html><body><section id="exercises"><h2>Exercises</h2><p>1. prose</p></section></body></html>')
    assert render_check(page, chromium)["exercises"] == ["the Exercises section has no numbered list of exercises"]


def test_render_check_reports_exercises_and_solutions_that_render_open(tmp_path, chromium):
    page = tmp_path / "exercises.html"
    page.write_text(exercises_page(dropdown("Solution"), dropdown("Solution", " open")))
    report = render_check(page, chromium)
    assert report["exercises"] == ["exercise 2: the Solution dropdown is open (it must start collapsed)"]
    assert report["open_solutions"] == ["Solution"]  # as the browser shows it
    assert {"exercises", "open_solutions"} <= set(problems_of(report))
    page.write_text(exercises_page(dropdown("Solution"), dropdown("Hint") + dropdown("Solution")))
    assert problems_of(render_check(page, chromium)) == {}
