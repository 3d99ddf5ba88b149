"""The rendered-site checks themselves: they must catch what they claim to catch."""

from semlm.sitecheck import broken_internal_links, render_check


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
    import base64

    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
    (tmp_path / "dot.png").write_bytes(png)
    page = tmp_path / "page.html"
    page.write_text('<html><head></head><body><p>plain text</p><img src="dot.png"></body></html>')
    report = render_check(page, chromium)
    assert report["raw_tex"] == [] and report["broken_images"] == [] and report["js_errors"] == []
    assert report["images"] == 1
