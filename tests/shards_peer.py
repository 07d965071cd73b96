#!/usr/bin/env python3
"""shards_peer.py -- the peers' side of tests/test_shards.c: WebDataset
shards read and written by other programs than train.

  read-wds PATTERN CSV    the `webdataset` library reads the shards; every
                          sample must be the CSV's row of the same position:
                          the same image bytes and the class id that row has
                          (CSV labels are class names: ids are their sorted
                          positions, as train numbers them)
  read-dali CSV TAR...    DALI's readers.webdataset (CPU pipeline), with each
                          shard's .idx beside it: the same check
  write-wds OUT CSV N     webdataset's ShardWriter writes the CSV's rows,
                          N a shard, as OUT-000000.tar ...
  write-tar OUT CSV       plain tarfile (PAX format, the image before the
                          label, a folder entry, keys inside a folder)

Prints "ok N" (N samples checked, or written). Exits 77 when the peer's
module is not installed, 1 on a mismatch.
"""
import csv
import os
import sys


def rows(path):
    base = os.path.dirname(path)
    with open(path, newline="") as f:
        r = list(csv.reader(f))
    if r and r[0][0] == "path":
        r = r[1:]
    names = sorted({label for _, label in r})
    return [(os.path.join(base, p), names.index(label)) for p, label in r]


def check(samples, want):
    n = 0
    for (data, cls), (path, label) in zip(samples, want):
        with open(path, "rb") as f:
            if f.read() != data:
                sys.exit(f"sample {n}: image bytes differ from {path}")
        if int(cls) != label:
            sys.exit(f"sample {n}: class {cls!r}, the CSV says {label}")
        n += 1
    if n != len(want):
        sys.exit(f"{n} samples, the CSV has {len(want)}")
    print(f"ok {n}")


def image_of(sample):
    for k in ("jpg", "jpeg", "png", "ppm", "pgm", "bmp", "gif", "webp"):
        if k in sample:
            return sample[k]
    sys.exit(f"sample {sample.get('__key__')}: no image among {sorted(sample)}")


def read_wds(pattern, csv_path):
    try:
        import webdataset as wds
    except ImportError:
        sys.exit(77)
    ds = wds.WebDataset(pattern, shardshuffle=False)
    check(((image_of(s), s["cls"].decode()) for s in ds), rows(csv_path))


def read_dali(csv_path, tars):
    try:
        import numpy as np
        from nvidia.dali import fn, pipeline_def
    except ImportError:
        sys.exit(77)
    idx = [t[: -len(".tar")] + ".idx" for t in tars]
    want = rows(csv_path)

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        img, cls = fn.readers.webdataset(
            paths=tars, index_paths=idx, ext=["jpg;jpeg;png", "cls"],
            missing_component_behavior="error", random_shuffle=False, name="r")
        return img, cls

    p = pipe()
    p.build()
    got = []
    for _ in range(p.epoch_size("r")):
        img, cls = p.run()
        got.append((bytes(np.array(img[0])), bytes(np.array(cls[0])).decode()))
    check(got, want)


def write_wds(out, csv_path, per_shard):
    try:
        import webdataset as wds
    except ImportError:
        sys.exit(77)
    with wds.ShardWriter(out + "-%06d.tar", maxcount=int(per_shard), verbose=0) as w:
        for i, (path, label) in enumerate(rows(csv_path)):
            ext = os.path.splitext(path)[1][1:].lower()
            with open(path, "rb") as f:
                w.write({"__key__": f"sample{i:05d}", ext: f.read(), "cls": label})
    print(f"ok {i + 1}")


def write_tar(out, csv_path):
    import io
    import tarfile
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as t:
        d = tarfile.TarInfo("imgs")
        d.type = tarfile.DIRTYPE
        t.addfile(d)
        for i, (path, label) in enumerate(rows(csv_path)):
            ext = os.path.splitext(path)[1].lower()
            t.add(path, arcname=f"imgs/{i:04d}{ext}")
            data = str(label).encode()
            info = tarfile.TarInfo(f"imgs/{i:04d}.cls")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    print(f"ok {i + 1}")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "read-wds":
        read_wds(*args)
    elif cmd == "read-dali":
        read_dali(args[0], args[1:])
    elif cmd == "write-wds":
        write_wds(*args)
    elif cmd == "write-tar":
        write_tar(*args)
    else:
        sys.exit(f"unknown command {cmd}")
