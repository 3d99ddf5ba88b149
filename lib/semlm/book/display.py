"""How the book's kernels show numbers: an IPython extension the runner loads, never an import side effect.

myst-nb formats glued numbers (``{glue:text}`x:.2f```) by parsing their ``text/plain`` form,
which numpy 2 writes as ``np.float64(1.59)``; without this extension every such number in the
prose fails to render. The book runner loads it in every chapter's kernel through an IPython
startup file (:func:`semlm.book.runner.chapter_environment`); in your own notebook,
``%load_ext semlm.book.display`` does the same.
"""

from __future__ import annotations


def plain_numpy_scalars(shell) -> None:
    """Show numpy scalars as plain numbers in ``shell`` (``1.59``, not ``np.float64(1.59)``)."""
    import numpy as np

    formatter = shell.display_formatter.formatters["text/plain"]
    # registered per concrete type: IPython's lookup finds its own `float` printer before an
    # abstract numpy base class such as np.floating
    for kind, convert in ((np.float16, float), (np.float32, float), (np.float64, float), (np.int8, int),
                          (np.int16, int), (np.int32, int), (np.int64, int), (np.uint8, int), (np.uint32, int),
                          (np.uint64, int), (np.bool_, bool)):
        formatter.for_type(kind, lambda value, printer, cycle, convert=convert: printer.text(repr(convert(value))))


def load_ipython_extension(shell) -> None:
    plain_numpy_scalars(shell)


#: The IPython startup file the runner writes for the chapters' kernels.
STARTUP = "get_ipython().extension_manager.load_extension('semlm.book.display')\n"
