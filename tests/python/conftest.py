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
