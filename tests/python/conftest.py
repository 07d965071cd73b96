"""Fixtures of the trainloader suite: real data sets made by the project's
tools (Fashion-MNIST PNGs, JPEGs), train's own binary, and a reader for
its --dump-batches files."""

import os
import subprocess
import time

import numpy as np
import pytest

ROOT = os.environ.get("TRAIN_ROOT") or os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
TRAIN = os.environ.get("TRAIN_BIN") or os.path.join(ROOT, "build/cpu/train")
TOOLS = os.path.join(ROOT, "build/tools")


@pytest.fixture(scope="session")
def fm(tmp_path_factory):
    """500 Fashion-MNIST training images as 28x28 grey PNGs and their CSV."""
    out = tmp_path_factory.mktemp("fm")
    subprocess.run([os.path.join(TOOLS, "fashion_mnist"), "--out", str(out), "--limit", "500"],
                   check=True, stdout=subprocess.DEVNULL)
    return str(out / "train.csv")


@pytest.fixture(scope="session")
def jpegs(tmp_path_factory):
    """60 JPEGs of 200x150 (q90) and their CSV."""
    out = tmp_path_factory.mktemp("jpegs")
    subprocess.run([os.path.join(TOOLS, "jpeg_set"), "--n", "60", "--out", str(out), "--width",
                    "200", "--height", "150"], check=True, stdout=subprocess.DEVNULL)
    return str(out / "train.csv")


@pytest.fixture(scope="session")
def odd_photos(tmp_path_factory):
    """A class folder of the files real photo folders hold that made
    decodes go wrong (issue 25): grey JPEGs whose one component declares
    2x2 sampling (PIL's grey JPEG, its SOF byte patched from 0x11 to 0x22,
    as `jpegtran -grayscale` writes them; PIL reads both alike), progressive
    and 4:2:0 colour JPEGs and PNGs, 64-300 pixels a side."""
    from PIL import Image
    out = tmp_path_factory.mktemp("odd")
    rng = np.random.default_rng(25)
    for k in range(24):
        cls = out / f"c{k % 3}"
        cls.mkdir(exist_ok=True)
        h, w = int(rng.integers(64, 300)), int(rng.integers(64, 300))
        yy, xx = np.mgrid[0:h, 0:w]
        rgb = np.stack([xx * 255 // w, yy * 255 // h, (xx + yy) % 256], -1).astype(np.uint8)
        rgb = (rgb + rng.integers(0, 8, rgb.shape)).astype(np.uint8)
        im = Image.fromarray(rgb)
        kind = k % 4
        if kind == 0:  # grey, 2x2 declared
            path = cls / f"{k}.jpg"
            im.convert("L").save(path, quality=90)
            b = bytearray(path.read_bytes())
            sof = b.index(b"\xff\xc0")
            assert b[sof + 9] == 1 and b[sof + 11] == 0x11, "PIL's grey JPEG: one 1x1 component"
            b[sof + 11] = 0x22
            path.write_bytes(bytes(b))
        elif kind == 1:
            im.save(cls / f"{k}.jpg", quality=88, progressive=True)
        elif kind == 2:
            im.save(cls / f"{k}.jpg", quality=90, subsampling=2)
        else:
            im.save(cls / f"{k}.png")
    return str(out)


def read_dump(path, sample_shape):
    """train --dump-batches: [(epoch, index, indices, labels, images)]"""
    raw = open(path, "rb").read()
    per = int(np.prod(sample_shape))
    out, at = [], 0
    while at < len(raw):
        epoch, index, count = np.frombuffer(raw, np.uint32, 3, at)
        at += 12
        indices = np.frombuffer(raw, np.uint32, count, at)
        at += 4 * count
        labels = np.frombuffer(raw, np.int32, count, at)
        at += 4 * count
        images = np.frombuffer(raw, np.uint8, count * per, at).reshape((count, *sample_shape))
        at += count * per
        out.append((int(epoch), int(index), indices.tolist(), labels.tolist(), images))
    return out


def pass_of(loader):
    """One pass: [(indices, labels, images)] with copies of the data."""
    got = []
    for images, labels in loader:
        got.append((list(loader.last_indices), np.asarray(labels).tolist(),
                    np.array(images, copy=True)))
    return got


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pids, seconds=5.0):
    """The pids still alive after waiting up to seconds."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if alive(p)]
