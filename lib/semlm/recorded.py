"""``python -m semlm.recorded``: recorded GPU runs. The code lives in :mod:`semlm.book.recorded`.

This file only keeps the documented command working; import :mod:`semlm.book.recorded` instead.
"""

import sys

if __name__ == "__main__":
    from semlm.book.recorded import main

    sys.exit(main())
