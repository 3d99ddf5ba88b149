"""``python -m semlm.distributed``: paper B's data-parallel training through accelerate.

The code lives in :mod:`semlm.idea.distributed`; this file only keeps the documented command working.
"""

import sys

if __name__ == "__main__":
    from semlm.idea.distributed import main

    sys.exit(main())
