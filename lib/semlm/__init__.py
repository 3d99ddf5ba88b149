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

from semlm import _auto_registration

# AutoConfig / AutoModelForCausalLM find the book's models after `import semlm` alone: the real
# registration (semlm.models, torch and transformers' modelling code) waits for the first lookup.
_auto_registration.install()
