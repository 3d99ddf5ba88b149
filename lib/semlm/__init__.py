"""semlm: the library behind the reproducibility book on controllable language modelling.

Paper A (semantic fusion): :mod:`semlm.fuzzy`, :mod:`semlm.features`, :mod:`semlm.data`,
:mod:`semlm.models`, :mod:`semlm.losses`, :mod:`semlm.train`, :mod:`semlm.metrics`,
:mod:`semlm.experiment`. The book: :mod:`semlm.profiles`, :mod:`semlm.plots`,
:mod:`semlm.report`, :mod:`semlm.book`.
"""

__version__ = "0.1.0"
