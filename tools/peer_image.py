"""peer_image.py — the PIL + torchvision peer of tools/bench_image.c.

    bench-peer.py image --csv FILE [--n N] [--set e1|png] [--runs R]
    bench-peer.py image --csv FILE [--n N] --dump OUT

Times, in one process with one torch thread, what a torchvision data set
does per sample on the same files as bench_image:
  e1:  open, convert("RGB"), Resize((96, 128)), CenterCrop(64),
       RandomHorizontalFlip(), ToTensor()
  png: open, convert("L"), RandomHorizontalFlip(), ToTensor()
(open + convert is torchvision's default_loader). Prints one line per run,
wall and process CPU time (user + system: the rate per core):
  peer image e1: n=1000 seconds=2.10 rate=476.2 cpu_seconds=2.05 cpu_rate=487.8
  cpu_us_per_image=2050.0
--dump writes, for the first N images, the raw RGB bytes of
Resize((96, 128)) applied to the full-size decode (H x W x 3 each), for
bench_image's agreement check.
"""
import argparse
import csv
import os
import sys
import time


def paths_of(csv_path, n):
    base = os.path.dirname(os.path.abspath(csv_path))
    out = []
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            p = row["path"]
            out.append(p if os.path.isabs(p) else os.path.join(base, p))
            if len(out) == n:
                break
    return out


def main(argv):
    ap = argparse.ArgumentParser(prog="bench-peer.py image")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--set", choices=("e1", "png"), default="e1")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--dump")
    args = ap.parse_args(argv)

    import torch
    import torchvision.transforms as T
    from PIL import Image

    torch.set_num_threads(1)
    paths = paths_of(args.csv, args.n)
    if not paths:
        sys.stderr.write("peer_image: %s lists no images\n" % args.csv)
        return 1

    if args.dump:
        resize = T.Resize((96, 128))
        with open(args.dump, "wb") as out:
            for p in paths:
                with open(p, "rb") as f:
                    img = Image.open(f).convert("RGB")
                out.write(resize(img).tobytes())
        return 0

    if args.set == "e1":
        mode = "RGB"
        tf = T.Compose([T.Resize((96, 128)), T.CenterCrop(64), T.RandomHorizontalFlip(),
                        T.ToTensor()])
    else:
        mode = "L"
        tf = T.Compose([T.RandomHorizontalFlip(), T.ToTensor()])

    def sample(p):
        with open(p, "rb") as f:
            img = Image.open(f).convert(mode)
        return tf(img)

    for p in paths[:20]:  # warm up: imports, allocator, page cache
        sample(p)
    for _ in range(args.runs):
        t0, c0 = time.perf_counter(), time.process_time()
        for p in paths:
            sample(p)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        print("peer image %s: n=%d seconds=%.4f rate=%.1f cpu_seconds=%.4f cpu_rate=%.1f "
              "cpu_us_per_image=%.1f" % (args.set, len(paths), dt, len(paths) / dt, dc,
                                         len(paths) / dc, 1e6 * dc / len(paths)), flush=True)
    return 0
