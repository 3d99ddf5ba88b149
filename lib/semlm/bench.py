"""``python -m semlm.bench``: the benchmarks. The code lives in :mod:`semlm.book.bench`.

This file only keeps the documented command working; import :mod:`semlm.book.bench` instead.
"""

import sys

if __name__ == "__main__":
    from semlm.book.bench_cli import main

    sys.exit(main())
