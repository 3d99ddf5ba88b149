"""How the book's kernels show numbers: an IPython extension the runner loads, never an import side effect.

myst-nb formats glued numbers (``{glue:text}`x:.2f```) by parsing their ``text/plain`` form,
which numpy 2 writes as ``np.float64(1.59)``; without this extension every such number in the
prose fails to render. The book runner loads it in every chapter's kernel through an IPython
startup file (:func:`semlm.book.runner.chapter_environment`); in your own notebook,
``%load_ext semlm.book.display`` does the same.

It also sets how pandas tables look on a page: a default ``0..n`` index is not shown (a reader
learns nothing from it; a meaningful index such as a model name stays), a ``pd.Series`` is shown
as a table (never as text ending ``dtype: object``), and floats are shown with
:data:`semlm.book.tables.DECIMALS` decimals unless a chapter formats them itself
(:func:`semlm.book.tables.show`).
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


def frame_html(frame) -> str:
    """A DataFrame's notebook HTML, without the index when it is the default ``0..n``."""
    import pandas as pd

    from semlm.book.tables import has_default_index

    if isinstance(frame, pd.Series):
        frame = frame.to_frame(frame.name if frame.name is not None else "value")
    if not has_default_index(frame):
        return frame._repr_html_()
    return frame.to_html(index=False, notebook=True, max_rows=pd.get_option("display.max_rows"),
                         max_cols=pd.get_option("display.max_columns"),
                         show_dimensions=pd.get_option("display.show_dimensions"))


def styler_html(styler) -> str:
    """A Styler's HTML, its index hidden when it is the default ``0..n`` (the Styler is changed in place)."""
    from semlm.book.tables import has_default_index

    if has_default_index(styler.data) and not any(styler.hide_index_):
        styler.hide(axis="index")
    return styler.to_html()


def readable_tables(shell) -> None:
    """Tables in ``shell`` without a 0..n index, Series as tables, floats rounded (module docstring)."""
    import pandas as pd
    from pandas.io.formats.style import Styler

    from semlm.book.tables import DECIMALS

    pd.set_option("display.precision", DECIMALS)
    pd.set_option("styler.format.precision", DECIMALS)
    formatter = shell.display_formatter.formatters["text/html"]
    formatter.for_type(pd.DataFrame, frame_html)
    formatter.for_type(pd.Series, frame_html)
    formatter.for_type(Styler, styler_html)


def kernel_log_to_file(shell) -> None:
    """The kernel's own log (``[IPKernelApp] ...``: not a cell's output, which reaches the notebook) goes to
    ``<build>/work/kernel.log`` instead of the runner's terminal, where an interrupted build printed a socket
    traceback under its one line. Outside a runner's build (no ``$SEMLM_BUILD_DIR``) nothing changes."""
    import logging
    import os

    build = os.environ.get("SEMLM_BUILD_DIR")
    kernel = getattr(shell, "kernel", None)
    if not build or kernel is None:
        return
    folder = os.path.join(build, "work")
    os.makedirs(folder, exist_ok=True)
    handler = logging.FileHandler(os.path.join(folder, "kernel.log"))
    handler.setFormatter(logging.Formatter("%(asctime)s [%(name)s] %(levelname)s | %(message)s"))
    for logger in {kernel.log, logging.getLogger(kernel.log.name)}:
        logger.handlers = [handler]
        logger.propagate = False


def load_ipython_extension(shell) -> None:
    plain_numpy_scalars(shell)
    readable_tables(shell)
    kernel_log_to_file(shell)


#: The IPython startup file the runner writes for the chapters' kernels.
STARTUP = ("get_ipython().extension_manager.load_extension('semlm.book.display')\n"
           # the runner's kernels die with the runner (a closed terminal, SIGKILL), and their workers with them
           "__import__('semlm.core.processes', fromlist=['die_with_parent']).die_with_parent()\n")
