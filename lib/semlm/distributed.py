"""``python -m semlm.distributed``: data-parallel training through accelerate. The code lives in :mod:`semlm.core.distributed`.

This file only keeps the documented command working; import :mod:`semlm.core.distributed` instead.
"""

import sys

if __name__ == "__main__":
    from semlm.core.distributed import main

    sys.exit(main())
