"""A worker or kernel dies with its parent (issue 48): killed parent, no orphan left holding memory."""

import subprocess
import sys
import time

import psutil
import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")

PARENT = """
import os, sys, time
from semlm.core.processes import die_with_parent
child = os.fork()
if child == 0:
    die_with_parent()
    time.sleep(60)
    os._exit(0)
print(child, flush=True)
time.sleep(60)
"""


def test_a_process_that_asked_dies_with_its_killed_parent():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child = psutil.Process(int(parent.stdout.readline()))
        time.sleep(0.5)  # the child has made its prctl call
        parent.kill()
        parent.wait(10)
        gone, alive = psutil.wait_procs([child], timeout=5)
        assert not alive, "the child outlived its killed parent"
    finally:
        parent.kill()


def test_the_runners_kernels_and_pool_workers_ask_to_die_with_their_parent():
    from semlm.book.display import STARTUP
    from semlm.core import runs

    assert "die_with_parent()" in STARTUP
    import inspect

    assert "die_with_parent()" in inspect.getsource(runs._inherit)
