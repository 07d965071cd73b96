"""trainloader misused or under a hostile peer (issue 26): a batch view kept
past the loader's close (numpy, DLPack/torch) reads its bytes instead of
killing the interpreter; close() returns when the supervisor is stopped;
NUL characters, contradictory flags and a failed constructor give one
clear exception and nothing else."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import trainloader
from conftest import wait_gone

# each snippet runs in a process of its own: before the fix, it died of SIGSEGV
KEEP_NUMPY = """
import numpy as np, sys, trainloader
with trainloader.Loader(sys.argv[1], batch=50, workers=2, prefetch=1, channels=1) as loader:
    images, labels = next(iter(loader))
    v = np.asarray(images)
    want = v.copy()
loader.close()  # again: a no-op
print(int(v.sum()), int(want.sum()), bool((v == want).all()), flush=True)
"""

KEEP_TORCH = """
import gc, sys, torch, trainloader
loader = trainloader.Loader(sys.argv[1], batch=50, workers=2, prefetch=1, channels=1)
images, labels = next(iter(loader))
t = torch.from_dlpack(images)
want = t.clone()
del loader, images, labels
gc.collect()
print(int(t.sum()), int(want.sum()), bool(torch.equal(t, want)), flush=True)
"""


@pytest.mark.parametrize("script", [KEEP_NUMPY, KEEP_TORCH], ids=["numpy-close", "torch-del"])
def test_a_view_kept_past_the_loader_reads_its_batch(fm, script):
    p = subprocess.run([sys.executable, "-c", script, fm], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, f"status {p.returncode}: {p.stderr}"
    got, want, same = p.stdout.split()
    assert got == want and same == "True", p.stdout
    assert int(want) > 0  # real pixels, not an all-zero page


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
    assert float(out) < 5, f"close() took {float(out):.1f} s"
    assert len(pids) == 3 and wait_gone(pids) == []
    assert f"supervisor {pids[0]} is stopped (signal {int(signal.SIGSTOP)}); killed" in err, err


@pytest.mark.parametrize("kw, names", [
    (dict(root="\0"), "root="), (dict(root="a\0b"), "root="), (dict(batch="1\x006"), "batch="),
    (dict(path_suffix="\0x"), "the data path"),
    (dict(_extra=["--root", "a\0b"]), "argument 4")],  # past the Python layer: the C one
    ids=["root", "root-mid", "batch", "path", "extra"])
def test_nul_in_a_string_raises_value_error_naming_it(fm, kw, names):
    path = fm + kw.pop("path_suffix", "")
    with pytest.raises(ValueError, match=f"{names}.*contains a NUL character"):
        trainloader.Loader(path, workers=0, channels=1, **kw)


def test_header_and_no_header_together_raise_naming_both(fm):
    with pytest.raises(ValueError, match="header=.*no_header="):
        trainloader.Loader(fm, workers=0, channels=1, header=True, no_header=True)
    with pytest.raises(ValueError, match="no_header="):
        trainloader.Loader(fm, workers=0, channels=1, header=False, no_header=True)


FAILED_INIT = """
import sys, trainloader
for kw in (dict(rank=1), dict(world_size="x", rank=0), dict(nonsense=1)):
    try:
        trainloader.Loader(sys.argv[1], **kw)
    except (TypeError, ValueError) as e:
        print(type(e).__name__, flush=True)
"""


def test_a_failed_constructor_raises_once_and_del_says_nothing(fm):
    p = subprocess.run([sys.executable, "-c", FAILED_INIT, fm], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["TypeError", "TypeError", "TypeError"]  # world_size="x": a type
    assert p.stderr == "", p.stderr


# keyword values checked by their kind (review of issue 26): before, train="no"
# was taken as true, batch=True reached train as "on", a bytes path failed
# with "bad argument type for built-in operation"
@pytest.mark.parametrize("kw, message", [
    (dict(train="no"), r"train= takes True or False, not str \('no'\)"),
    (dict(train=0), r"train= takes True or False, not int"),
    (dict(skip_bad="yes"), r"skip_bad= takes True or False, not str"),
    (dict(shuffle=1), r"shuffle= takes True or False, not int"),
    (dict(batch=True), r"batch= takes a value for --batch, not bool"),
    (dict(prefetch=False), r"prefetch= takes a value for --prefetch, not bool"),
    (dict(rank=True, world_size=2), r"rank= takes an integer, not bool"),
    (dict(rank=0, world_size=2.0), r"world_size= takes an integer, not float"),
    (dict(path=3), r"the data path must be str, bytes or os.PathLike, not int"),
    (dict(path=None), r"the data path must be str, bytes or os.PathLike, not NoneType"),
], ids=["train-str", "train-int", "skip-bad-str", "shuffle-int", "batch-bool", "prefetch-bool",
        "rank-bool", "world-size-float", "path-int", "path-none"])
def test_keyword_values_of_the_wrong_kind_raise_type_error_naming_them(fm, kw, message):
    path = kw.pop("path", fm)
    with pytest.raises(TypeError, match=message):
        trainloader.Loader(path, workers=0, channels=1, **kw)


def test_a_path_is_str_bytes_or_pathlike_alike(fm, tmp_path):
    import pathlib
    # a folder whose name is not UTF-8 (bytes only): the data behind a link
    odd = os.fsencode(str(tmp_path)) + b"/\xffdata"
    os.symlink(os.path.dirname(fm), odd)
    csv = odd + b"/train.csv"
    got = []
    for path, root in [(fm, None), (fm.encode(), None), (pathlib.Path(fm), None), (csv, None),
                       (fm, pathlib.Path(os.path.dirname(fm))), (fm, odd)]:
        with trainloader.Loader(path, root=root, workers=0, channels=1, batch=500,
                                shuffle=False) as loader:
            images, labels = next(iter(loader))
            got.append((loader.samples, int(np.asarray(images).sum()),
                        int(np.asarray(labels).sum())))
    assert got[0][0] == 500 and got[0][1] > 0
    assert got == [got[0]] * len(got), got


@pytest.mark.parametrize("pin, tries", [(True, True), ("on", True), (False, False),
                                        ("off", False), (None, False)])
def test_pin_off_as_a_word_does_not_page_lock(fm, pin, tries):
    # pin="off" is train's --pin=off: the ring is not page-locked (before the
    # fix any non-empty string tried to); an attempt always leaves a note
    # here (no CUDA device, or no torch), a skipped one none
    kw = {} if pin is None else {"pin": pin}
    with trainloader.Loader(fm, batch=8, workers=0, channels=1, **kw) as loader:
        assert (loader.pin_note != "" or loader.pinned) == tries, loader.pin_note
