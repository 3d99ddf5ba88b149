"""The book around the library: the chapter runner (:mod:`~semlm.book.runner`, ``python -m semlm.book``),
the claims table and report, recorded GPU runs, the site check and the benchmarks.

Torch-free on import (the runner's usage errors cost no torch import).
"""

from semlm.book.chapter import open_chapter as open  # noqa: A001  (book.open: a chapter's setup, see chapter.py)


def main(argv: list[str] | None = None) -> int:
    """The ``semlm-book`` command (:func:`semlm.book.runner.main`), imported when called: a chapter's ``from semlm
    import book`` does not load the runner, and no module of the book depends on it through the package."""
    from semlm.book.runner import main as run

    return run(argv)


__all__ = ["main", "open"]
