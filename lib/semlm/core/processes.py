"""Processes that die with their parent: a worker or kernel whose parent is killed (a closed terminal, SIGKILL) must
not live on holding memory and files, so each asks Linux to signal it when its parent exits."""

from __future__ import annotations

import os
import signal
import sys

#: ``prctl`` option: the signal this process gets when its parent thread exits (Linux, ``<sys/prctl.h>``).
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Have this process receive SIGTERM when its parent exits (``prctl(PR_SET_PDEATHSIG)``), and receive it now
    if the parent is already gone; nothing changes where the platform has no such call."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    if parent == 1 or os.getppid() != parent:  # the parent died before the call took effect
        os.kill(os.getpid(), signal.SIGTERM)
