"""e4_peers.py — the PyPI peers of E4 (tools/bench-e4), one measurement a run.

    python3 tools/e4_peers.py files-http --base URL --csv FILE --workers W [--epochs 1]
    python3 tools/e4_peers.py wds --urls U1,U2,.. --workers W [--cache-dir DIR] [--epochs 2]
    python3 tools/e4_peers.py dali --shards S1,S2,.. --workers W [--epochs 2]

Prints one JSON line: {"tool", "images", "epochs": [{"epoch", "s", "img_s"}]}.
Every peer does the same recipe as `train --random-resized-crop 224`:
torchvision's RandomResizedCrop(224) (scale 0.08-1, ratio 3/4-4/3), a
horizontal flip with probability 0.5, uint8 CHW out, batches of --batch
(64). An epoch is timed from the creation of the loader's iterator (worker
start included) to its last batch; no model runs (loader only).

  files-http  a torch Dataset whose __getitem__ GETs one file (http.client,
              one kept-alive connection per worker process) and decodes it
              with PIL; DataLoader(num_workers=W)
  wds         webdataset.WebDataset(urls) (http:// URLs are read by its
              curl pipe; paths from disk), .shuffle(1000).decode("pil"),
              DataLoader(num_workers=W); --cache-dir: webdataset's own shard
              cache, so epoch 2 of a remote run reads local copies
  dali        DALI's fn.readers.webdataset over local paths with their .idx
              (it takes paths, not URLs), fn.decoders.image_random_crop
              (RandomResizedCrop fused with the decode) + resize 224 +
              coin-flip + transpose to CHW, CPU only, num_threads=W
Run with the python3 that has torch, torchvision, webdataset and DALI.
"""
import argparse
import csv
import http.client
import io
import json
import os
import sys
import time
import urllib.parse


def transform():
    from torchvision.transforms import v2

    return v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(), v2.PILToTensor()])


class HttpFiles:
    """A map-style data set of files behind an HTTP base URL."""

    def __init__(self, base, rows):
        u = urllib.parse.urlsplit(base)
        self.host, self.port, self.prefix = u.hostname, u.port or 80, u.path
        self.rows = rows
        self.tf = transform()
        self.conn, self.pid = None, None

    def __len__(self):
        return len(self.rows)

    def get(self, path):
        for attempt in range(3):
            if self.conn is None or self.pid != os.getpid():
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
                self.pid = os.getpid()
            try:
                self.conn.request("GET", self.prefix + urllib.parse.quote(path))
                r = self.conn.getresponse()
                data = r.read()
                if r.status != 200:
                    raise RuntimeError("GET %s: HTTP %d" % (path, r.status))
                return data
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def __getitem__(self, i):
        from PIL import Image

        path, label = self.rows[i]
        img = Image.open(io.BytesIO(self.get(path))).convert("RGB")
        return self.tf(img), label


def run_loader(loader, epochs):
    out, images = [], 0
    for e in range(epochs):
        t0, n = time.perf_counter(), 0
        for x, _ in loader:
            assert x.dtype.is_floating_point is False and x.shape[1:] == (3, 224, 224), x.shape
            n += x.shape[0]
        s = time.perf_counter() - t0
        out.append({"epoch": e + 1, "s": s, "img_s": n / s})
        images = n
    return images, out


def files_http(a):
    import torch

    with open(a.csv, newline="") as f:
        rows = [(r["path"], r["label"]) for r in csv.DictReader(f)]
    names = sorted({lab for _, lab in rows})
    rows = [(p, names.index(lab)) for p, lab in rows]
    ds = HttpFiles(a.base, rows)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers)
    return run_loader(loader, a.epochs)


def wds_loader(a):
    import torch
    import webdataset as wds

    tf = transform()
    kw = {"cache_dir": a.cache_dir} if a.cache_dir else {}
    ds = (wds.WebDataset(a.urls.split(","), shardshuffle=100, empty_check=False, **kw)
          .shuffle(1000).decode("pil").to_tuple("jpg;jpeg;png", "cls").map_tuple(tf, int))
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, num_workers=a.workers)
    return run_loader(loader, a.epochs)


def dali(a):
    from nvidia.dali import fn, pipeline_def, types

    paths = a.shards.split(",")
    idx = [p[:-len(".tar")] + ".idx" for p in paths]

    @pipeline_def(batch_size=a.batch, num_threads=a.workers, device_id=None)
    def pipe():
        img, cls = fn.readers.webdataset(paths=paths, index_paths=idx, ext=["jpg;jpeg;png", "cls"],
                                         random_shuffle=True, name="r")
        img = fn.decoders.image_random_crop(img, device="cpu", output_type=types.RGB)
        img = fn.resize(img, resize_x=224, resize_y=224)
        img = fn.flip(img, horizontal=fn.random.coin_flip())
        return fn.transpose(img, perm=[2, 0, 1]), cls

    out, images = [], 0
    t0 = time.perf_counter()
    p = pipe()
    p.build()
    size = p.epoch_size("r")
    for e in range(a.epochs):
        n = 0
        while n < size:
            x, _ = p.run()
            shape = x.at(0).shape
            assert tuple(shape) == (3, 224, 224), shape
            n += len(x)
        s = time.perf_counter() - t0
        out.append({"epoch": e + 1, "s": s, "img_s": size / s})
        images = size
        t0 = time.perf_counter()
    return images, out


def main(argv):
    ap = argparse.ArgumentParser(prog="e4_peers.py")
    ap.add_argument("tool", choices=["files-http", "wds", "dali"])
    ap.add_argument("--base")
    ap.add_argument("--csv")
    ap.add_argument("--urls")
    ap.add_argument("--shards")
    ap.add_argument("--cache-dir")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=1)
    a = ap.parse_args(argv)
    fn = {"files-http": files_http, "wds": wds_loader, "dali": dali}[a.tool]
    images, epochs = fn(a)
    print(json.dumps({"tool": a.tool, "images": images, "epochs": epochs}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
