"""peer_loader.py — PyTorch's DataLoader running our experiments (E1-E4).

    /usr/bin/python3 tools/bench-peer.py loader --csv FILE
        [--mode lazy|preload] [--workers 0,2] [--prefetch 2] [--pin]
        [--batch 100] [--resize 96x128] [--preload-resize 128x170]
        [--crop 64] [--channels 3] [--model probe|lenet|none]
        [--epochs 1] [--threads 1] [--runs 1] [--limit N]

The same data, transforms and model as the matching ./train command:
  lazy     each __getitem__ opens the file with PIL, convert(RGB or L),
           Resize((H, W)), CenterCrop, RandomHorizontalFlip, ToTensor
           (torchvision's ImageFolder recipe)
  preload  the data set decodes, resizes (--preload-resize) and centre-
           crops every image once up front, in the main process, into a
           u8 tensor; __getitem__ flips and converts to float
  models   probe: Conv2d(C, C, 3, padding=1) + global average pool +
           Linear(C, classes) + cross-entropy (E1's "model");
           lenet: conv 20@5x5, pool, conv 50@5x5, pool, fc 512, fc classes;
           none: iterate the loader only
One line per epoch and a median line per configuration, e.g.
    peer loader lazy workers 2 pin 0: epoch 1 12.31 s 812 img/s wait 91.2%
    peer loader lazy workers 2 pin 0: median 12.31 s/epoch 812 img/s wait 91.2% build 0.00 s
(wait = time the training loop spent blocked in next(); build = preload).
Use /usr/bin/python3: the python3 first on PATH may lack torch.
"""
import argparse
import csv
import os
import statistics
import sys
import time


def read_csv(path, limit):
    base = os.path.dirname(os.path.abspath(path))
    rows = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            p = row["path"]
            rows.append((p if os.path.isabs(p) else os.path.join(base, p), int(row["label"])))
            if limit and len(rows) == limit:
                break
    return rows


def size(s):
    if "x" in s:
        h, w = s.split("x")
        return (int(h), int(w))
    return int(s)


def build(args):
    import torch
    import torch.nn as nn
    import torchvision.transforms as T
    from PIL import Image

    mode = "RGB" if args.channels == 3 else "L"

    class Lazy(torch.utils.data.Dataset):
        def __init__(self, rows):
            self.rows = rows
            steps = []
            if args.resize:
                steps.append(T.Resize(size(args.resize)))
            if args.crop:
                steps.append(T.CenterCrop(size(args.crop)))
            steps += [T.RandomHorizontalFlip(), T.ToTensor()]
            self.t = T.Compose(steps)

        def __len__(self):
            return len(self.rows)

        def __getitem__(self, i):
            path, label = self.rows[i]
            with Image.open(path) as im:
                return self.t(im.convert(mode)), label

    class Preload(torch.utils.data.Dataset):
        def __init__(self, rows):
            steps = []
            if args.preload_resize or args.resize:
                steps.append(T.Resize(size(args.preload_resize or args.resize)))
            if args.crop:
                steps.append(T.CenterCrop(size(args.crop)))
            steps.append(T.PILToTensor())
            t = T.Compose(steps)
            xs = []
            for path, _ in rows:
                with Image.open(path) as im:
                    xs.append(t(im.convert(mode)))
            self.x = torch.stack(xs)
            self.y = [label for _, label in rows]
            self.flip = T.RandomHorizontalFlip()

        def __len__(self):
            return len(self.y)

        def __getitem__(self, i):
            return self.flip(self.x[i]).float().div_(255.0), self.y[i]

    def model(nclasses):
        c = args.channels
        if args.model == "probe":
            return nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.AdaptiveAvgPool2d(1),
                                 nn.Flatten(), nn.Linear(c, nclasses))
        if args.model == "lenet":
            side = size(args.crop) if args.crop else 28
            side = side if isinstance(side, int) else side[0]
            feat = ((side - 4) // 2 - 4) // 2
            return nn.Sequential(nn.Conv2d(c, 20, 5), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                 nn.Linear(50 * feat * feat, 512), nn.ReLU(),
                                 nn.Linear(512, nclasses))
        return None

    return torch, Lazy, Preload, model


def run(args, workers, torch, Lazy, Preload, model, rows, nclasses):
    t0 = time.perf_counter()
    ds = Preload(rows) if args.mode == "preload" else Lazy(rows)
    build_s = time.perf_counter() - t0 if args.mode == "preload" else 0.0
    kw = dict(batch_size=args.batch, shuffle=True, num_workers=workers, pin_memory=args.pin,
              drop_last=False)
    if workers > 0:
        kw.update(prefetch_factor=args.prefetch, persistent_workers=True)
    dl = torch.utils.data.DataLoader(ds, **kw)
    net = model(nclasses)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9) if net is not None else None
    loss_fn = torch.nn.CrossEntropyLoss()
    out = []
    for epoch in range(args.epochs):
        wait = 0.0
        n = 0
        start = time.perf_counter()
        it = iter(dl)
        while True:
            t = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                break
            wait += time.perf_counter() - t
            n += len(y)
            if net is not None:
                opt.zero_grad()
                loss = loss_fn(net((x - 0.5) / 0.5), y)
                loss.backward()
                opt.step()
        secs = time.perf_counter() - start
        out.append((secs, n / secs, 100.0 * wait / secs))
    return build_s, out


def main(argv):
    ap = argparse.ArgumentParser(prog="bench-peer.py loader")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--mode", choices=("lazy", "preload"), default="lazy")
    ap.add_argument("--workers", default="0")
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--pin", action="store_true")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--resize")
    ap.add_argument("--preload-resize")
    ap.add_argument("--crop")
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--model", choices=("probe", "lenet", "none"), default="probe")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args(argv)

    torch, Lazy, Preload, model = build(args)
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    rows = read_csv(args.csv, args.limit)
    nclasses = max(label for _, label in rows) + 1
    for workers in (int(w) for w in args.workers.split(",")):
        label = "peer loader %s workers %d pin %d" % (args.mode, workers, int(args.pin))
        secs, rates, waits, builds = [], [], [], []
        for _ in range(args.runs):
            build_s, epochs = run(args, workers, torch, Lazy, Preload, model, rows, nclasses)
            builds.append(build_s)
            for e, (s, r, w) in enumerate(epochs):
                print("%s: epoch %d %.2f s %.0f img/s wait %.1f%%" % (label, e + 1, s, r, w))
                secs.append(s)
                rates.append(r)
                waits.append(w)
            sys.stdout.flush()
        print("%s: median %.2f s/epoch %.0f img/s wait %.1f%% build %.2f s" %
              (label, statistics.median(secs), statistics.median(rates),
               statistics.median(waits), statistics.median(builds)))
        sys.stdout.flush()
    return 0
