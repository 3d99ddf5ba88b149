"""The book around the library: the chapter runner (:mod:`~semlm.book.runner`, ``python -m semlm.book``),
the claims table and report, recorded GPU runs, the site check and the benchmarks.

Torch-free on import (the runner's usage errors cost no torch import).
"""

from semlm.book.chapter import open_chapter as open  # noqa: A001  (book.open: a chapter's setup, see chapter.py)
from semlm.book.runner import main

__all__ = ["main"]
