#!/usr/bin/python3
"""peer_train.py — the PyTorch peer of train's lenet, for docs/BENCH-NN.md.

    /usr/bin/python3 tools/peer_train.py compute [--threads 1,2] [--runs 3]
        [--epochs 1] [--batch 64] [--limit N] [--idx DIR]
    /usr/bin/python3 tools/peer_train.py e2e --csv data/fashion-mnist/train.csv
        [--workers 0,2] [--threads 1,2] [--runs 3] [--epochs 1] [--batch 64] [--limit N]
    /usr/bin/python3 tools/peer_train.py duel [--bench build/tools/bench_nn]
        [--threads 1,2] [--runs 5] [--limit N]

Also reachable as `tools/bench-peer.py train ...` (the dispatcher imports this
file and calls main(argv)).

The same net as nn/model_zoo.c's lenet (conv 20@5x5 relu, maxpool 2, conv
50@5x5 relu, maxpool 2, fc 512 relu, fc 10), the same batch, optimiser and
defaults (SGD lr 0.01, momentum 0.95, weight decay 5e-4, cosine per step) and
the same normalisation ((x/255 - 0.5) / 0.5), with torch.set_num_threads.

compute: Fashion-MNIST from Debian's IDX files, held in memory as a u8
    tensor; each step's batch is gathered outside the timed region and the
    timed step is u8->float normalisation, forward, loss, backward, SGD — the
    same work bench_nn times around model_train_step.
duel: bench_nn and the compute peer alternately, run by run, so that both
    see the same load on a shared machine; prints the medians and the ratio.
e2e: a torchvision ImageFolder-like dataset over the PNG CSV written by
    tools/fashion-mnist (PIL decode, ToTensor, Normalize) through a
    DataLoader with --workers processes, shuffled; reports the epoch's wall
    time and the part spent in the training step.

Prints one line per run and a median line per configuration:
    peer compute threads 2: median 14.2 s/epoch, 4225 images/s
Use /usr/bin/python3: the python3 first on PATH may lack torch.
"""
import argparse
import csv
import gzip
import math
import os
import statistics
import sys
import time

IDX_DIR = "/usr/share/datasets/fashion-mnist"


def _torch():
    try:
        import torch  # noqa: F401
        import torch.nn as nn  # noqa: F401
    except ImportError:
        sys.exit("peer_train.py: PyTorch not found; run it with /usr/bin/python3 "
                 "(python3-torch, python3-torchvision)")
    import torch
    return torch


def lenet(torch, nclasses=10):
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(800, 512), nn.ReLU(), nn.Linear(512, nclasses))


def make_opt(torch, net, args, steps_per_epoch):
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.wd)
    total = max(1, args.epochs * steps_per_epoch)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1.0 + math.cos(math.pi * min(s, total) / total)))
    return opt, sched


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    n = int.from_bytes(data[4:8], "big")
    if magic == 0x803:
        rows, cols = int.from_bytes(data[8:12], "big"), int.from_bytes(data[12:16], "big")
        return data[16:], n, rows, cols
    if magic == 0x801:
        return data[8:], n, 0, 0
    sys.exit(f"{path}: not an IDX file")


def int_list(s):
    return [int(v) for v in s.split(",") if v != ""]


def report(kind, label, secs, n):
    med = statistics.median(secs)
    print(f"peer {kind} {label}: median {med:.2f} s/epoch, {n / med:.0f} images/s "
          f"(runs: {' '.join(f'{s:.2f}' for s in secs)})", flush=True)


def load_idx_tensors(torch, args):
    x8, n, rows, cols = read_idx(os.path.join(args.idx, "train-images-idx3-ubyte.gz"))
    y8, _, _, _ = read_idx(os.path.join(args.idx, "train-labels-idx1-ubyte.gz"))
    if args.limit:
        n = min(n, args.limit)
    X = torch.frombuffer(bytearray(x8[:n * rows * cols]), dtype=torch.uint8).view(n, 1, rows, cols)
    Y = torch.frombuffer(bytearray(y8[:n]), dtype=torch.uint8).long()
    return X, Y


def compute_run(torch, X, Y, threads, args, seed):
    """One run of args.epochs epochs; returns (compute seconds per epoch, last loss)."""
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    n = X.shape[0]
    steps = (n + args.batch - 1) // args.batch
    net = lenet(torch)
    opt, sched = make_opt(torch, net, args, steps)
    lossf = torch.nn.CrossEntropyLoss()
    compute, lv = 0.0, float("nan")
    for ep in range(args.epochs):
        g = torch.Generator().manual_seed(ep)
        perm = torch.randperm(n, generator=g)
        for s in range(steps):
            idx = perm[s * args.batch:(s + 1) * args.batch]
            xb, yb = X[idx].contiguous(), Y[idx]
            t0 = time.perf_counter()
            xf = (xb.float() / 255.0 - 0.5) / 0.5
            opt.zero_grad(set_to_none=True)
            loss = lossf(net(xf), yb)
            loss.backward()
            opt.step()
            sched.step()
            lv = loss.item()  # the loss comes back to the host, as in train
            compute += time.perf_counter() - t0
            if not math.isfinite(lv):
                sys.exit(f"peer: epoch {ep + 1} batch {s}: loss is {lv}")
    return compute / args.epochs, lv


def run_compute(args):
    torch = _torch()
    X, Y = load_idx_tensors(torch, args)
    n = X.shape[0]
    print(f"peer compute: torch {torch.__version__}, lenet, {n} images, batch {args.batch}, "
          f"lr {args.lr} momentum {args.momentum} wd {args.wd} cosine", flush=True)
    for threads in int_list(args.threads):
        secs = []
        for r in range(args.runs):
            sec, lv = compute_run(torch, X, Y, threads, args, r)
            secs.append(sec)
            print(f"  peer compute threads {threads} run {r + 1}: {sec:.2f} s/epoch "
                  f"({n / sec:.0f} images/s), last loss {lv:.4f}", flush=True)
        report("compute", f"threads {threads}", secs, n)
    return 0


def run_duel(args):
    """train's bench_nn and the peer, alternating run by run, so both see
    the same machine load; medians and the ratio per thread count."""
    import re
    import subprocess
    torch = _torch()
    X, Y = load_idx_tensors(torch, args)
    n = X.shape[0]
    print(f"duel: train ({args.bench}) vs torch {torch.__version__}, lenet compute step, {n} images, "
          f"batch {args.batch}, {args.runs} alternating runs per thread count", flush=True)
    for threads in int_list(args.threads):
        ours, peer = [], []
        for r in range(args.runs):
            cmd = [args.bench, "--threads", str(threads), "--runs", "1", "--epochs", str(args.epochs),
                   "--batch", str(args.batch)]
            if args.limit:
                cmd += ["--limit", str(args.limit)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            m = re.search(r"median ([0-9.]+) s/epoch", out)
            if not m:
                sys.exit(f"duel: no timing in the output of {' '.join(cmd)}:\n{out}")
            ours.append(float(m.group(1)))
            peer.append(compute_run(torch, X, Y, threads, args, r)[0])
            print(f"  threads {threads} run {r + 1}: train {ours[-1]:.2f} s, torch {peer[-1]:.2f} s",
                  flush=True)
        mo, mp = statistics.median(ours), statistics.median(peer)
        print(f"duel threads {threads}: train {mo:.2f} s/epoch ({n / mo:.0f} images/s), "
              f"torch {mp:.2f} s/epoch ({n / mp:.0f} images/s), ratio {mp / mo:.2f}x", flush=True)
    return 0


class CsvImages:
    """ImageFolder-like: (path, label) rows of a CSV, paths relative to it."""

    def __init__(self, csv_path, limit):
        from PIL import Image
        from torchvision import transforms
        self.Image = Image
        root = os.path.dirname(os.path.abspath(csv_path))
        self.rows = []
        with open(csv_path, newline="") as f:
            for i, row in enumerate(csv.reader(f)):
                if i == 0 and row and row[0] == "path":
                    continue
                self.rows.append((os.path.join(root, row[0]), int(row[1])))
                if limit and len(self.rows) == limit:
                    break
        self.tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        path, label = self.rows[i]
        with self.Image.open(path) as im:
            return self.tf(im.convert("L")), label


def run_e2e(args):
    torch = _torch()
    if not args.csv:
        sys.exit("peer_train.py e2e: --csv FILE is required (make it with tools/fashion-mnist)")
    ds = CsvImages(args.csv, args.limit)
    n = len(ds)
    steps = (n + args.batch - 1) // args.batch
    print(f"peer e2e: torch {torch.__version__}, lenet, {n} images from {args.csv}, "
          f"batch {args.batch}", flush=True)
    for threads in int_list(args.threads):
        torch.set_num_threads(threads)
        for workers in int_list(args.workers):
            secs = []
            for r in range(args.runs):
                torch.manual_seed(r)
                net = lenet(torch)
                opt, sched = make_opt(torch, net, args, steps)
                lossf = torch.nn.CrossEntropyLoss()
                dl = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True,
                                                 num_workers=workers)
                t0 = time.perf_counter()
                compute = 0.0
                for ep in range(args.epochs):
                    for xb, yb in dl:
                        t1 = time.perf_counter()
                        opt.zero_grad(set_to_none=True)
                        loss = lossf(net(xb), yb)
                        loss.backward()
                        opt.step()
                        sched.step()
                        loss.item()
                        compute += time.perf_counter() - t1
                wall = (time.perf_counter() - t0) / args.epochs
                secs.append(wall)
                print(f"  peer e2e workers {workers} threads {threads} run {r + 1}: {wall:.2f} s/epoch "
                      f"({n / wall:.0f} images/s), compute {compute / args.epochs:.2f} s", flush=True)
            report("e2e", f"workers {workers} threads {threads}", secs, n)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="peer_train.py",
                                description="PyTorch lenet peer of train (docs/BENCH-NN.md)")
    p.add_argument("mode", choices=["compute", "e2e", "duel"])
    p.add_argument("--threads", default=None, help="compute threads, a list (1,2)")
    p.add_argument("--workers", default="0", help="e2e: DataLoader workers, a list")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--limit", type=int, default=0, help="first N images only")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.95)
    p.add_argument("--wd", type=float, default=5e-4)
    p.add_argument("--idx", default=IDX_DIR, help="compute: folder of the IDX files")
    p.add_argument("--csv", default=None, help="e2e: the training CSV")
    p.add_argument("--bench", default="build/tools/bench_nn", help="duel: train's benchmark binary")
    args = p.parse_args(argv)
    if args.runs < 1 or args.epochs < 1 or args.batch < 1:
        p.error("--runs, --epochs and --batch must be positive")
    if args.mode in ("compute", "duel"):
        args.threads = args.threads or "1,2"
        return run_compute(args) if args.mode == "compute" else run_duel(args)
    args.threads = args.threads or "1,2"
    return run_e2e(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
