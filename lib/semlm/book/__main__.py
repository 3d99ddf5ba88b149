"""``python -m semlm.book``: see :mod:`semlm.book.runner`."""

import sys

from semlm.book.runner import main

sys.exit(main())
