"""trainloader under a hostile peer (issue 26): close() returns when the
supervisor is stopped."""

import os
import signal
import subprocess
import sys
import time

import pytest

import trainloader
from conftest import wait_gone

STOPPED = """
import os, signal, sys, time, trainloader
loader = trainloader.Loader(sys.argv[1], batch=50, workers=2, channels=1)
next(iter(loader))
while len(loader.pids()) < 3:
    time.sleep(0.01)
pids = loader.pids()
print(*pids, flush=True)
os.kill(pids[0], signal.SIGSTOP)
t0 = time.monotonic()
loader.close()
print(time.monotonic() - t0, flush=True)
"""


def test_close_returns_when_the_supervisor_is_stopped(fm):
    # a process of its own: before the fix close() never returned
    p = subprocess.Popen([sys.executable, "-c", STOPPED, fm], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    pids = [int(x) for x in p.stdout.readline().split()]
    try:
        out, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        pytest.fail("close() did not return within 20 s of stopping the supervisor")
    assert p.returncode == 0, err
    assert float(out) < 7, f"close() took {float(out):.1f} s"
    assert len(pids) == 3 and wait_gone(pids) == []
    assert f"supervisor {pids[0]} did not exit within 2 s; killed" in err, err
