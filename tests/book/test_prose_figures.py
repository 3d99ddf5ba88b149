"""Every result figure in the pages a reader sees without building has a source (issue 32).

The README, ``book/about.md`` and ``book/recorded/README.md`` are read on the repository's page, so a
figure there must be checkable from the repository. A figure is a number with a decimal point, a
thousands separator or an exponent (``1,660``, ``27.7``, ``3e-7``), a percentage, an ``x`` ratio or a
``k`` / ``M`` count. It has a source when it is

(a) a numeric value of a recorded JSON file in a folder of ``book/recorded/`` that its paragraph (or
    table row, or list item) names, rounded as the prose writes it (``1,660 s`` is 1659.7; ``27.7 min``
    is 1659.7 / 60; ``97%`` is 0.965; ``576k`` is 575906); ``cpu-book-*`` names every folder it matches;
(b) one of the papers' own values, read from :mod:`semlm.reference`, in a paragraph that says so (it
    mentions the paper or the authors);
(c) a design constant, read from the code that uses it (:func:`design_constants`);
(d) one of the few facts in :data:`OTHER_SOURCES`, each with where it comes from.

Skipped: code blocks and inline code, link targets, the generated verdicts block of the README,
section numbers (``§3.2``), arXiv identifiers and ``Python 3.11``. Plain integers (``3 seeds``,
``600 iterations``) and years are not figures here. Any value of the named folders matches, whichever
file and field it comes from: the check catches a figure typed without a file, not one quoted from the
wrong field of the right folder.
"""

from __future__ import annotations

import fnmatch
import inspect
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from semlm import reference

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("book/about.md", "README.md", "book/recorded/README.md")
RECORDED = ROOT / "book" / "recorded"

GENERATED = re.compile(r"<!-- recorded-verdicts:start -->.*?<!-- recorded-verdicts:end -->", re.S)
NOT_PROSE = (
    re.compile(r"`[^`]*`"),                                               # inline code
    re.compile(r"\]\([^)]*\)"),                                            # link targets
    re.compile(r"<!--.*?-->"),                                             # comments
    re.compile(r"§\s*\d+(?:\.\d+)*(?:\s*[-,]\s*\d+(?:\.\d+)*)*"),         # section numbers: §2-3.2, §5, 6.3
    re.compile(r"arXiv \d{4}\.\d{4,5}"),                                   # arXiv identifiers
    re.compile(r"Python \d+\.\d+"),                                        # versions
)
FIGURE = re.compile(
    r"(?<![\w.])(?P<sign>[−+]|(?<=[\s\[(])-)?"
    r"(?P<number>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?e[-+]\d+|\d+\.\d+|\d+)(?![\w.,]\d)"
    r"(?P<suffix>\s?%|\s?[×x](?!\w)|k(?!\w)|\s?M(?=\s))?"
)


@dataclass(frozen=True)
class Figure:
    line: int
    text: str
    value: float
    tolerance: float     # half a unit of the last digit written
    scales: tuple        # what a source value is multiplied by before comparing (unit conversions)
    folders: frozenset   # the recorded folders its paragraph names
    cites_paper: bool    # its paragraph mentions a paper or its authors


def recorded_folders(root: Path = RECORDED) -> list[str]:
    return sorted(path.name for path in root.iterdir() if path.is_dir())


def named_folders(text: str, folders: list[str]) -> frozenset:
    """The recorded folders ``text`` names, by name or by a glob such as ``cpu-book-*``."""
    named = {folder for folder in folders if re.search(rf"(?<![\w-]){re.escape(folder)}(?![\w-])", text)}
    for glob in re.findall(r"[\w-]+\*", text):
        named |= {folder for folder in folders if fnmatch.fnmatch(folder, glob)}
    return frozenset(named)


def blocks(markdown: str) -> list[list[tuple[int, str]]]:
    """The page as paragraphs, table rows, list items and headings, each a list of ``(line number,
    line)``; code blocks and the generated verdicts block left out."""
    markdown = GENERATED.sub(lambda match: "\n" * match.group(0).count("\n"), markdown)
    found, current, in_code = [], [], False
    for number, line in enumerate(markdown.splitlines(), 1):
        fence = line.lstrip().startswith("```")
        if current and (fence or in_code or not line.strip() or re.match(r"\s{0,3}([|#]|[-*] |\d+\. )", line)):
            found.append(current)
            current = []
        if fence:
            in_code = not in_code
        elif line.strip() and not in_code:
            current.append((number, line))
    return found + ([current] if current else [])


def prose(line: str) -> str:
    """``line`` without what is not prose: inline code, link targets, section numbers, identifiers."""
    for pattern in NOT_PROSE:
        line = pattern.sub(" ", line)
    return line


def figures(markdown: str, folders: list[str] | None = None) -> list[Figure]:
    """The result figures of ``markdown``'s prose, each with the precision it is written at and the
    recorded folders its paragraph names."""
    folders = recorded_folders() if folders is None else folders
    found = []
    for block in blocks(markdown):
        text = " ".join(line for _, line in block)
        named, cites_paper = named_folders(text, folders), bool(re.search(r"\b(paper|authors)", text, re.I))
        for line_number, line in block:
            line = prose(line)
            for match in FIGURE.finditer(line):
                number, suffix = match["number"], (match["suffix"] or "").strip()
                exponent = "e" in number
                if not (suffix or exponent or "," in number or "." in number):
                    continue  # a plain integer: a count, a step, a year
                value = float(number.replace(",", "")) * (-1 if match["sign"] in ("−", "-") else 1)
                if exponent:
                    tolerance = 0.5 * 10 ** int(number.split("e")[1])
                else:
                    tolerance = 0.5 * 10 ** -len(number.split(".")[1]) if "." in number else 0.5
                unit = (line[match.end():].split() or [""])[0]
                scales = {"%": (100,), "k": (1e-3,), "M": (1e-6,)}.get(suffix, (1,))
                if unit.startswith("min"):
                    scales += (1 / 60,)  # minutes written for a value recorded in seconds
                found.append(Figure(line_number, match.group(0).strip(), value, tolerance, scales, named, cites_paper))
    return found


def numeric_leaves(value, path: str = ""):
    """``(path, number)`` for every number in a JSON value (booleans are not numbers)."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield path, float(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from numeric_leaves(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from numeric_leaves(item, f"{path}[{index}]")


def recorded_values(root: Path = RECORDED) -> dict[str, list[tuple[str, float]]]:
    """(a): per recorded folder, every numeric value of its JSON files."""
    return {folder: [(f"{path.relative_to(root)}{leaf}", number) for path in sorted((root / folder).rglob("*.json"))
                     for leaf, number in numeric_leaves(json.loads(path.read_text()))]
            for folder in recorded_folders(root)}


def paper_values() -> list[tuple[str, float]]:
    """(b): the papers' own numbers, as :mod:`semlm.reference` keeps them (its ``PAPER_*`` tables)."""
    return [(f"semlm.reference.{name}{leaf}", number) for name, table in vars(reference).items()
            if name.startswith("PAPER_") for leaf, number in numeric_leaves(table)]


def design_constants() -> list[tuple[str, float]]:
    """(c): the design constants the pages quote, read from the code that uses them."""
    from semlm.book.bench import AUTHORS_TARGETS
    from semlm.book.recorded import WIKITEXT103_VALID_TOKENS, paper_run_estimate, recorded_book_builds_frame
    from semlm.idea.competence import COMPETENCE_RATIO
    from semlm.fusion.profiles import sst2_profile
    from semlm.idea.profiles import idea_profile, topic_drift_profile

    paper = idea_profile("paper")
    return [
        # chapter 5 at `cpu`: the training phrases of the language models
        ("sst2_profile('cpu').n_train", sst2_profile("cpu").n_train),
        # chapters 6 and 8 at `cpu`, and `cpu-long`: the book's BPE vocabulary
        ("idea_profile('cpu').vocab_size", idea_profile("cpu").vocab_size),
        # chapter 6: the authors' iterations (`paper`) and the recorded CPU run's (`cpu-long`)
        ("idea_profile('paper').train.max_steps", idea_profile("paper").train.max_steps),
        ("idea_profile('cpu-long').train.max_steps", idea_profile("cpu-long").train.max_steps),
        # chapter 7 at `paper`: the iterations of each sweep run
        ("idea_profile('paper').sweep_steps", idea_profile("paper").sweep_steps),
        # chapter 9 at `paper`: the gated runs' steps and the plain runs'
        ("topic_drift_profile('paper').budgets[-1]", topic_drift_profile("paper").budgets[-1]),
        ("topic_drift_profile('paper').plain_steps", topic_drift_profile("paper").plain_steps),
        # chapter 6's competence check: a model's validation PPL at most this times the bigram's
        ("semlm.idea.competence.COMPETENCE_RATIO", COMPETENCE_RATIO),
        # the targets of our side against the authors' script: peak memory and wall time, ours / theirs
        *((f"semlm.book.bench.AUTHORS_TARGETS[{workers}][{key!r}]", target)
          for workers, targets in AUTHORS_TARGETS.items() for key, (_, target) in targets.items()),
        # the benchmarks chapter's core-use target for a whole build
        ("recorded_book_builds_frame(target_busy=...)",
         inspect.signature(recorded_book_builds_frame).parameters["target_busy"].default),
        # about.md's estimate of the authors' run: tokens per iteration, validation interval, validation tokens
        ("idea_profile('paper') tokens per iteration", paper.train.batch_size * paper.size.block_size),
        ("idea_profile('paper').train.eval_every", paper.train.eval_every),
        ("semlm.book.recorded.WIKITEXT103_VALID_TOKENS", WIKITEXT103_VALID_TOKENS),
        # ... and its minutes, computed by that code from the recorded throughput files the table names
        *((f"paper_run_estimate() {row['folder']} {row['model']} {key}", row[key]) for row in paper_run_estimate()
          for key in ("training_minutes", "validation_minutes", "total_minutes")),
    ]


#: (d) Figures with no file or constant in the repository, each with where it comes from. Keep it short.
OTHER_SOURCES = [
    # GLUE SST-2's training split: a fact of the dataset (data/README.md; the file `make data` writes
    # has 67,349 rows under its header, pinned by lib/semlm/data/checksums.sha256), not a result.
    ("SST-2 training phrases (data/README.md)", 67_349),
    # The MFU the GPU-throughput work aimed for (about.md, book/recorded/README.md): a goal, not a
    # measurement; no code compares against it.
    ("the GPU-throughput MFU goal", 0.20),
    # Disk to reserve for .venv, in the README's prerequisites (a fresh install with torch's CPU wheel
    # measured 2.2 GB with `du -sh .venv`): an instruction to the reader, not a result.
    ("disk for .venv (README prerequisites), GB", 2.5),
    # WikiText-103's validation split in words, from the dataset's release notes (Merity et al., 2016): the
    # basis of about.md's assumed validation tokens, a fact of the data, not a result.
    ("WikiText-103 validation words", 217_646),
]


def source_of(figure: Figure, recorded: dict[str, list[tuple[str, float]]], papers: list[tuple[str, float]],
              others: list[tuple[str, float]]) -> str | None:
    """The first value that ``figure`` writes at its precision: from the recorded folders its paragraph
    names, the papers' values if its paragraph cites a paper, then the design constants and the other
    sources; None if there is none."""
    candidates = [value for folder in sorted(figure.folders) for value in recorded.get(folder, [])]
    candidates += (papers if figure.cites_paper else []) + others
    for name, number in candidates:
        if any(abs(number * scale - figure.value) <= figure.tolerance + 1e-9 * abs(figure.value)
               for scale in figure.scales):
            return name
    return None


@pytest.fixture(scope="module")
def sources():
    return recorded_values(), paper_values(), design_constants() + OTHER_SOURCES


def unbacked(markdown: str, sources) -> list[Figure]:
    return [figure for figure in figures(markdown) if source_of(figure, *sources) is None]


@pytest.mark.parametrize("page", PAGES)
def test_every_result_figure_in_the_page_has_a_source(page, sources):
    missing = unbacked((ROOT / page).read_text(), sources)
    assert not missing, (
        f"{page}: figures with no recorded file, paper value or design constant behind them:\n"
        + "\n".join(f"  line {figure.line}: {figure.text} (recorded folders named: "
                    f"{', '.join(sorted(figure.folders)) or 'none'})" for figure in missing)
        + "\nName the recorded folder that holds the value in the same paragraph and round as its file "
          "rounds, or add the source to tests/book/test_prose_figures.py with a comment saying where it "
          "comes from.")


def test_a_typed_figure_without_a_source_fails(sources):
    page = ("`cpu-book-bf16`: 1,660 s (27.7 min), cores 97% busy, 3,204 CPU-seconds.\n"
            "A new build took 14.2 minutes at 41% busy, 3.7 x faster, 2,345 CPU-seconds, 3e-9 of drift.\n"
            "\n"
            "Without a recorded folder named, 1,660 s is a typed figure too.\n")
    assert [figure.text for figure in unbacked(page, sources)] == ["14.2", "41%", "3.7 x", "2,345", "3e-9",
                                                                     "1,660"]


def test_the_scan_skips_code_versions_sections_and_the_generated_block():
    page = ("Python 3.11, arXiv 2509.13357, paper A §2-3.2 and B §5, 6.3, `torch==2.13.0`, [x](a/1.5.md).\n"
            "```bash\nmake bench  # 9.99 s\n```\n"
            "<!-- recorded-verdicts:start -->\n| 12.5 | 81% |\n<!-- recorded-verdicts:end -->\n"
            "3 seeds, 600 iterations in 2026, commit 840e967; 0.5 left.\n")
    assert [(figure.line, figure.text) for figure in figures(page, [])] == [(8, "0.5")]


def test_a_paragraph_row_or_list_item_scopes_the_recorded_folders_it_names():
    page = ("| `cpu-long` | 4,619 s |\n| `cpu-book-*` | 1.5 |\n\n"
            "Built in `book/recorded/h100-a-checks`\nand 2.5 later.\n- item 0.1\n")
    folders = ["cpu-book-bf16", "cpu-book-scheduler", "cpu-long", "h100-a-checks"]
    assert [(figure.text, sorted(figure.folders)) for figure in figures(page, folders)] == [
        ("4,619", ["cpu-long"]), ("1.5", ["cpu-book-bf16", "cpu-book-scheduler"]),
        ("2.5", ["h100-a-checks"]), ("0.1", [])]


def test_the_precision_and_units_of_the_prose_decide_a_match():
    recorded = {"build": [("total_wall_seconds", 1659.7), ("utilisation", 0.965), ("mfu", 0.106589)]}
    written = {text: source_of(figures(f"`build`: {text}", ["build"])[0], recorded, [], [])
               for text in ("1,660 s", "27.7 min", "97%", "10.7%", "1,659.7 s", "1,661 s", "27.6 min", "0.97")}
    assert written == {"1,660 s": "total_wall_seconds", "27.7 min": "total_wall_seconds", "97%": "utilisation",
                       "10.7%": "mfu", "1,659.7 s": "total_wall_seconds", "1,661 s": None, "27.6 min": None,
                       "0.97": "utilisation"}


def test_the_papers_values_come_from_semlm_reference_and_count_where_a_paper_is_cited():
    values = paper_values()
    assert dict(values)["semlm.reference.PAPER_A_TABLE1.baseline.ppl"] == 2.249
    assert not any(name.startswith("semlm.reference.AUTHORS") for name, _ in values)
    cited, uncited = figures("The paper reports 2.249.", []), figures("We measured 2.249.", [])
    assert source_of(cited[0], {}, values, []) == "semlm.reference.PAPER_A_TABLE1.baseline.ppl"
    assert source_of(uncited[0], {}, values, []) is None


def test_every_other_source_is_still_quoted():
    """An entry of OTHER_SOURCES that no page quotes any more goes: the list stays short."""
    quoted = [figure for page in PAGES for figure in figures((ROOT / page).read_text())]
    for name, number in OTHER_SOURCES:
        assert any(source_of(figure, {}, [], [(name, number)]) for figure in quoted), f"{name} is no longer quoted"
