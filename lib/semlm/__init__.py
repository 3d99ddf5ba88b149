"""semlm: the library behind the reproducibility book on controllable language modelling.

Paper A (semantic fusion): :mod:`semlm.fusion.fuzzy`, :mod:`semlm.fusion.features`, :mod:`semlm.data`,
:mod:`semlm.fusion.model`, :mod:`semlm.fusion.losses`, :mod:`semlm.core.train`, :mod:`semlm.core.metrics`,
:mod:`semlm.fusion.synthetic_experiment`. The book: :mod:`semlm.profiles`, :mod:`semlm.plots`,
:mod:`semlm.book.report`, :mod:`semlm.book`.
"""

__version__ = "0.1.0"

import logging as _logging

# transformers imports bitsandbytes, whose CPU backend logs a warning at import when the
# optional `kernels` package (a hub download) is absent. It falls back to its own kernel,
# so the message is noise in every notebook; silence that one logger only.
_logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(_logging.ERROR)

import warnings as _warnings

# transformers imports tqdm.auto, which in a Jupyter kernel without ipywidgets warns that it
# falls back to text bars. Our bars are off in rendered chapters anyway (TQDM_DISABLE).
_warnings.filterwarnings("ignore", message="IProgress not found")


def _plain_numpy_scalars_in_notebooks() -> None:
    """Show numpy scalars as plain numbers in a notebook (``1.59``, not ``np.float64(1.59)``).

    myst-nb formats glued numbers (``{glue:text}`x:.2f```) by parsing their text/plain form,
    which numpy 2 writes as ``np.float64(...)``; without this every such number in the prose
    failed to render. Only an IPython kernel is affected.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    import numpy as np

    formatter = shell.display_formatter.formatters["text/plain"]
    # registered per concrete type: IPython's lookup finds its own `float` printer before an
    # abstract numpy base class such as np.floating
    for kind, convert in ((np.float16, float), (np.float32, float), (np.float64, float), (np.int8, int),
                          (np.int16, int), (np.int32, int), (np.int64, int), (np.uint8, int), (np.uint32, int),
                          (np.uint64, int), (np.bool_, bool)):
        formatter.for_type(kind, lambda value, printer, cycle, convert=convert: printer.text(repr(convert(value))))


_plain_numpy_scalars_in_notebooks()
