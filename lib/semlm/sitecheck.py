"""``python -m semlm.sitecheck``: the checks of the rendered book. The code lives in :mod:`semlm.book.sitecheck`.

This file only keeps the documented command working; import :mod:`semlm.book.sitecheck` instead.
"""

import sys

if __name__ == "__main__":
    from semlm.book.sitecheck import main

    sys.exit(main())
