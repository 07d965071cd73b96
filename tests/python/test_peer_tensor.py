"""tools/peer_photos.py --peer torch-tensor (issue 29): torchvision.io.decode_image
+ transforms v2 on uint8 tensors reads every image a photo folder holds (RGB,
grey and CMYK JPEGs, a PNG named .JPEG as ImageNet has one) as 3x224x224
uint8, in both recipes, in-process and in workers.

The suite runs under Debian's python3, whose torch has no torchvision:
the peer runs under the first interpreter that imports torchvision with
transforms v2 (this one, then python3 on PATH, where `make bench-deps`
installs PyPI's torch and torchvision); skipped, with the reason, where
none does."""

import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.environ.get("TRAIN_ROOT") or os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
PEER = os.path.join(ROOT, "tools", "peer_photos.py")


def tensor_python():
    for py in [sys.executable, shutil.which("python3")]:
        if py and subprocess.run([py, "-c", "import torchvision.transforms.v2, torchvision.io, PIL"],
                                 capture_output=True).returncode == 0:
            return py
    return None


PY = tensor_python()
pytestmark = pytest.mark.skipif(PY is None, reason="no python with torchvision (transforms v2) and PIL: "
                                "make bench-deps installs them into python3 on PATH")

# one colour, one grey, one CMYK JPEG (CMYK as Photoshop writes it: Adobe
# marker, inverted), one PNG named .JPEG; sizes that are not 224 or 256
# and not square
MAKE = """
import sys
from PIL import Image
d = sys.argv[1]
Image.new("RGB", (300, 200), (200, 40, 10)).save(d + "/rgb.jpg", quality=90)
Image.new("L", (180, 260), 90).save(d + "/grey.jpg", quality=90)
Image.new("CMYK", (240, 320), (10, 200, 30, 5)).save(d + "/cmyk.jpg", quality=90)
Image.new("RGB", (230, 410), (20, 90, 160)).save(d + "/png.JPEG", format="PNG")
for f in ("rgb.jpg", "grey.jpg", "cmyk.jpg", "png.JPEG"):
    im = Image.open(d + "/" + f)
    print(f, im.format + "/" + im.mode)
"""

# every sample on its own, with the peer's own load code
CHECK = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
import peer_photos
out = {}
for recipe in ("rrc", "val"):
    tf = peer_photos.tensor_transform(recipe)
    for path in sys.argv[2:]:
        x = peer_photos.tensor_load(path, tf)
        out[recipe + " " + path.rsplit("/", 1)[1]] = [list(x.shape), str(x.dtype)]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    d = tmp_path_factory.mktemp("tensor")
    modes = subprocess.run([PY, "-c", MAKE, str(d)], check=True, capture_output=True, text=True).stdout.split()
    assert modes == ["rgb.jpg", "JPEG/RGB", "grey.jpg", "JPEG/L", "cmyk.jpg", "JPEG/CMYK",
                     "png.JPEG", "PNG/RGB"]
    paths = [str(d / f) for f in ("rgb.jpg", "grey.jpg", "cmyk.jpg", "png.JPEG")]
    lst = d / "list.csv"
    lst.write_text("path,label\n" + "".join(f"{p},{i}\n" for i, p in enumerate(paths)))
    return paths, str(lst)


def test_every_sample_is_3x224x224_uint8(three):
    paths, _ = three
    out = subprocess.run([PY, "-c", CHECK, os.path.join(ROOT, "tools")] + paths, check=True,
                         capture_output=True, text=True).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert len(got) == 8
    for key, (shape, dtype) in got.items():
        assert shape == [3, 224, 224] and dtype == "torch.uint8", key


@pytest.mark.parametrize("recipe", ["rrc", "val"])
@pytest.mark.parametrize("workers", [0, 2])
def test_peer_reads_every_image(three, recipe, workers):
    _, lst = three
    out = subprocess.run([PY, PEER, "--peer", "torch-tensor", "--recipe", recipe, "--workers", str(workers),
                          "--list", lst], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    assert rec["peer"] == "torch-tensor" and rec["images"] == 4, rec
    assert rec["cpu_s"] > 0 and rec["wall_s"] > 0
    assert "torchvision" in rec["lib"] and "PIL" not in rec["lib"]
