"""Checks of the rendered book: internal links resolve, and pages render in a real browser.

``broken_internal_links``: every relative ``href``/``src`` between the built HTML files finds its file and ``#anchor``.
``render_check`` opens a page in headless Chromium at a laptop's window size, waits for MathJax, and reports raw TeX,
broken images, script errors, code wider than the column, tables cut off at its edge, table columns narrower than a
word (at :data:`TABLE_WINDOWS` too), machine paths in outputs, a printed pandas
Series (``dtype: ...``; show a table: :func:`semlm.book.tables.show`), visible ``glue(`` calls, references to files
outside the repository and exercises whose ``Solution`` is missing or open. ``long_code_lines``: visible code lines
over 80 characters. Used by the book-build test and ``python -m semlm.sitecheck <html dir> | --code-width notebooks/``.
"""

from __future__ import annotations

import html as html_lib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: The reader's window: a laptop screen. The book's column must hold an 80-character code line.
WINDOW_SIZE = (1280, 900)
CODE_WIDTH = 80
#: Tables are checked again at a wide desktop window and at a small one: a column narrower than a word, or a table
#: cut off at the column's edge, fails at any of them.
TABLE_WINDOWS = ((1400, 900), (800, 900))
TABLE_KEYS = ("narrow_columns", "wide_tables")
#: Files that are not in the repository: the workspace's notes and shared folders.
OUTSIDE_REFERENCE = r"NOTES\.md|\.\./shared/[\w./-]*"
#: Absolute paths of a machine (POSIX home/work/temp folders, or a Windows drive) in page text.
ABSOLUTE_PATH = (r"(?:^|[\s'\"(=:,\[])((?:/(?:home|Users|work|tmp|root|mnt|opt|srv|private|usr|var|scratch)/"
                 r"|[A-Za-z]:\\)[^\s'\")\],]*)")
_SKIP_SCHEMES = {"http", "https", "mailto", "data", "javascript", "ftp"}


class _Page(HTMLParser):
    """The ids and the links of one HTML file."""

    def __init__(self, path: Path):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, str]] = []  # (tag.attr, url)
        self.feed(path.read_text(encoding="utf-8", errors="replace"))

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for attr in ("href", "src"):
            if attrs.get(attr) and not (tag == "link" and attrs.get("rel") in ("preconnect", "dns-prefetch")):
                self.links.append((f"{tag}.{attr}", attrs[attr]))


def broken_internal_links(html_dir: str | Path) -> list[str]:
    """``page: tag.attr -> url (why)`` for every relative link whose file or anchor is missing."""
    html_dir = Path(html_dir)
    pages = {p.resolve(): _Page(p) for p in html_dir.rglob("*.html")}
    problems = []
    for page, parsed in pages.items():
        for where, url in parsed.links:
            parts = urlsplit(url)
            if parts.scheme in _SKIP_SCHEMES or parts.netloc or url.startswith("{"):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if parts.path and target.is_dir():
                target = target / "index.html"
            label = f"{page.relative_to(html_dir.resolve())}: {where} -> {url}"
            if not target.exists():
                problems.append(f"{label} (no such file)")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _Page(target).ids
                if unquote(parts.fragment) not in ids:
                    problems.append(f"{label} (no anchor #{parts.fragment})")
    return sorted(problems)


def find_chromium() -> str | None:
    return next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)


_PROBE = """
<script>
(() => {
  // the result goes into an attribute of <body>, which --dump-dom serialises
  const write = value => document.body.setAttribute("data-semlm-check", JSON.stringify(value));
  write({error: "page never finished loading"});
  const inspect = () => {
    const report = {};
    report.mathjax = !!(window.MathJax && MathJax.startup);
    report.math_rendered = document.querySelectorAll("mjx-container").length;
    const text = document.body.innerText;
    report.raw_tex = ["\\\\(", "\\\\[", "$$"].filter(s => text.includes(s));
    report.js_errors = window.__semlmErrors || [];
    report.images = document.images.length;
    report.broken_images = Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0)
      .map(i => i.getAttribute("src"));
    // code that scrolls sideways: report its longest line
    report.wide_code = Array.from(document.querySelectorAll("div.cell_input pre, div.highlight pre"))
      .filter(p => p.offsetParent !== null && p.scrollWidth > p.clientWidth + 1)
      .map(p => p.textContent.split("\\n").reduce((a, b) => b.length > a.length ? b : a, "").trim().slice(0, 100));
    // a pandas Series (or .dtypes) printed as text, a "dtype: ..." line anywhere in an output:
    // the page should show a table instead
    report.series_outputs = Array.from(document.querySelectorAll(".cell_output pre"))
      .flatMap(p => p.textContent.split("\\n")).map(line => line.trim())
      .filter(line => /^(.*, )?dtype: \\w+$/.test(line)).map(line => line.slice(0, 100));
    // shown on the page: laid out, and not inside a closed <details> (a hide-input toggle)
    const shown = e => e.offsetParent !== null && !e.closest("details:not([open])");
    // a table wider than the text column it sits in: cut off at the edge (a failure), or scrolling sideways inside
    // its own box that fits the column (listed, not a failure: its words stay whole)
    const scroller = (t, column) => {
      for (let e = t.parentElement; e && e !== column; e = e.parentElement) {
        if (["auto", "scroll"].includes(getComputedStyle(e).overflowX)) return e;
      }
      return null;
    };
    report.wide_tables = [];
    report.scrolling_tables = [];
    for (const t of Array.from(document.querySelectorAll("table")).filter(shown)) {
      const column = t.closest("article, main") || document.body, box = t.getBoundingClientRect();
      const edge = column.getBoundingClientRect().right + 1;
      const heads = Array.from(t.querySelectorAll("th")).map(h => h.textContent.trim()).filter(h => h).slice(0, 6);
      if (box.right <= edge) continue;
      const line = (`${Math.round(box.width)}px table in a ${Math.round(column.clientWidth)}px column `
        + `(columns: ${heads.join(", ")})`).slice(0, 160);
      const box_ = scroller(t, column);
      (box_ && box_.getBoundingClientRect().right <= edge ? report.scrolling_tables : report.wide_tables).push(line);
    }
    // a table column narrower than a word of one of its cells: the word breaks across lines (one letter per line,
    // with overflow-wrap) or spills out of its cell. Each word's own boxes are measured (a Range over it): more
    // than one line box, or a right edge past the cell's content, is a narrow column. A line may break after "-".
    report.narrow_columns = Array.from(document.querySelectorAll("table")).filter(shown).flatMap(t => {
      const heads = Array.from(t.querySelectorAll("thead th")).map(h => h.textContent.trim());
      const found = new Map();
      for (const cell of t.querySelectorAll("th, td")) {
        const column = heads[cell.cellIndex] || `column ${cell.cellIndex + 1}`;
        if (found.has(column)) continue;
        const style = getComputedStyle(cell), right = cell.getBoundingClientRect().right
          - parseFloat(style.paddingRight) - parseFloat(style.borderRightWidth) + 1;
        const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node && !found.has(column); node = walker.nextNode()) {
          if (!shown(node.parentElement)) continue;
          for (const match of node.textContent.matchAll(/[^\\s\\u200b-]+-?/g)) {
            const range = document.createRange();
            range.setStart(node, match.index);
            range.setEnd(node, match.index + match[0].length);
            const boxes = Array.from(range.getClientRects()).filter(r => r.width > 0);
            const lines = new Set(boxes.map(r => Math.round(r.top))).size;
            if (lines > 1 || boxes.some(r => r.right > right)) {
              found.set(column, `"${column.slice(0, 40)}": "${match[0].slice(0, 40)}" `
                + (lines > 1 ? `breaks over ${lines} lines` : "spills out of its cell"));
              break;
            }
          }
        }
      }
      return Array.from(found.values());
    });
    // a cell whose visible input calls glue(...): bookkeeping a reader should not see
    report.visible_glue = Array.from(document.querySelectorAll("div.cell_input pre")).filter(shown)
      .map(p => p.textContent.split("\\n").find(line => line.includes("glue(")))
      .filter(line => line !== undefined).map(line => line.trim().slice(0, 100));
    // files of the authors' workspace that a reader of the book does not have
    report.outside_references = Array.from(new Set(text.match(new RegExp(__OUTSIDE__, "g")) || []));
    const pathPattern = new RegExp(__ABSOLUTE_PATH__, "g");
    report.absolute_paths = Array.from(document.querySelectorAll(".cell_output"))
      .flatMap(o => Array.from(o.textContent.matchAll(pathPattern), m => m[1]))
      .filter((v, i, all) => all.indexOf(v) === i).slice(0, 20);
    // a worked solution the reader sees before trying: an open "Solution" dropdown
    const isSolution = d => /^\\s*Solution/.test((d.querySelector("summary") || {}).textContent || "");
    report.open_solutions = Array.from(document.querySelectorAll("section#exercises details"))
      .filter(d => d.open && isSolution(d)).map(d => d.querySelector("summary").textContent.trim().slice(0, 100));
    // each item of the Exercises section's first numbered list needs a Solution dropdown, collapsed
    const exercises = document.querySelector("section#exercises");
    const list = exercises && exercises.querySelector("ol");
    const items = list ? Array.from(list.children).filter(e => e.tagName === "LI") : [];
    report.exercises = exercises && !items.length ? ["the Exercises section has no numbered list of exercises"]
      : items.flatMap((item, i) => {
        const solutions = Array.from(item.querySelectorAll("details")).filter(isSolution);
        return !solutions.length ? [`exercise ${i + 1}: no Solution dropdown`] : solutions.some(d => d.open)
          ? [`exercise ${i + 1}: the Solution dropdown is open (it must start collapsed)`] : [];
      });
    write(report);
  };
  addEventListener("load", () => {
    inspect();
    const typeset = window.MathJax && MathJax.startup && MathJax.startup.promise;
    if (typeset) { typeset.then(inspect, e => write({error: String(e)})); }
  });
})();
</script>
"""


_ERROR_LISTENER = ('<script>window.__semlmErrors = []; addEventListener("error", '
                   'e => window.__semlmErrors.push(String(e.message)));</script>')


def render_check(page: str | Path, chromium: str | None = None, budget_ms: int = 20000,
                 window: tuple[int, int] = WINDOW_SIZE) -> dict:
    """Render ``page`` (after a ``<meta http-equiv="refresh">`` redirect: Jupyter Book's ``index.html``) in headless
    Chromium with a ``window`` (width, height) in pixels: ``{page, window, mathjax, math_rendered, images}`` and the
    lists of :data:`PROBLEM_KEYS` (``{page, error}`` if it never loaded); :func:`problems_of` picks the failures."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError("no Chromium found; install the Debian package `chromium` (apt-get install chromium)")
    page = Path(page).resolve()
    redirect = re.search(r'http-equiv="refresh"[^>]*url=([^"\'>]+)', page.read_text(encoding="utf-8"), re.IGNORECASE)
    page = (page.parent / unquote(redirect.group(1).strip())).resolve() if redirect else page
    probe_page = page.with_name(f".semlm-check-{page.name}")
    html = re.sub(r"(<head[^>]*>)", lambda m: m.group(1) + _ERROR_LISTENER, page.read_text(encoding="utf-8"), count=1)
    probe = (_PROBE.replace("__ABSOLUTE_PATH__", json.dumps(ABSOLUTE_PATH))
             .replace("__OUTSIDE__", json.dumps(OUTSIDE_REFERENCE)))
    probe_page.write_text(html.replace("</body>", probe + "</body>") if "</body>" in html else html + probe)
    try:
        with tempfile.TemporaryDirectory() as profile_dir:
            result = subprocess.run(
                [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--allow-file-access-from-files", f"--user-data-dir={profile_dir}",
                 f"--window-size={window[0]},{window[1]}", "--hide-scrollbars",
                 f"--virtual-time-budget={budget_ms}", "--dump-dom", probe_page.as_uri()],
                capture_output=True, text=True, timeout=120)
    finally:
        probe_page.unlink(missing_ok=True)
    match = re.search(r'data-semlm-check="([^"]*)"', result.stdout)
    if match is None:
        raise RuntimeError(f"Chromium did not run the page probe for {page.name}: {result.stderr.strip()[-300:]}")
    return {"page": page.name, "window": list(window), **json.loads(html_lib.unescape(match.group(1)))}


PROBLEM_KEYS = ("error", "raw_tex", "broken_images", "js_errors", "wide_code", "absolute_paths", "series_outputs",
                "outside_references", "wide_tables", "narrow_columns", "visible_glue", "exercises", "open_solutions")


def problems_of(report: dict) -> dict:
    """The non-empty problem fields of a :func:`render_check` report."""
    return {key: report[key] for key in PROBLEM_KEYS if report.get(key)}


def long_code_lines(notebooks: str | Path, limit: int = CODE_WIDTH) -> list[str]:
    """``chapter.py:line: N chars`` for every visible code line over ``limit`` characters in the
    jupytext chapters under ``notebooks`` (cells tagged remove-input/remove-cell/hide-input are not
    shown and are skipped). These are the lines that make a rendered code cell scroll sideways."""
    problems = []
    for path in sorted(Path(notebooks).glob("[0-9][0-9]_*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        shown = False  # a visible code cell's line
        for number, line in enumerate(lines, start=1):
            if line.startswith("# %%"):
                shown = not any(tag in line for tag in ("[markdown]", "[md]", '"remove-input"', '"remove-cell"',
                                                        '"hide-input"'))
                continue
            if shown and len(line) > limit:
                problems.append(f"{path.name}:{number}: {len(line)} chars")
    return problems


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "--code-width":
        lines = long_code_lines(argv[1])
        print("\n".join(lines) or f"every visible code line fits {CODE_WIDTH} characters")
        return 1 if lines else 0
    if len(argv) != 1:
        print("usage: python -m semlm.sitecheck <built html dir> | --code-width <notebooks dir>", file=sys.stderr)
        return 2
    html_dir = Path(argv[0])
    problems = broken_internal_links(html_dir)
    for line in problems:
        print(f"broken link: {line}")
    for page in [html_dir / "index.html", *sorted((html_dir / "notebooks").glob("*.html"))]:
        report = render_check(page)
        bad = problems_of(report)
        for window in TABLE_WINDOWS:
            tables = render_check(page, window=window)
            bad.update({f"{key} at {window[0]}px": tables[key] for key in TABLE_KEYS if tables.get(key)})
        print(f"{'FAIL' if bad else 'ok  '} {page.relative_to(html_dir)}: {bad or report}")
        problems += [page.name] if bad else []
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
