#!/usr/bin/env python3
"""resnet_speed.py — PyTorch CPU's training step for the same resnet20 as
train's (nn/model_zoo.c: 3x3 stem, 3 stages x 3 BasicBlocks of 16/32/64,
1x1/2 conv + bn projection shortcuts, convs before a bn without bias, gap,
fc), to compare with `build/tools/bench_nn --model resnet20` at the same
thread count. Times forward + backward + SGD(momentum) steps on random
images; prints ms per step and images/s. A benchmark, not a test.

  python3 tools/resnet_speed.py --threads 2 --batch 64 --size 28 --channels 1
  python3 tools/resnet_speed.py --threads 2 --channels-last

--channels-last stores the model and the batch NHWC
(torch.channels_last), the layout oneDNN's CPU convolutions prefer: on
this project's 2-core Sapphire Rapids it is 1.2-1.35x faster than the
default NCHW, so quote both.

Needs torch (pip install torch). Not a check of numerical agreement: that
is left to a later tools/resnet_check.py (see docs/BENCH-NN.md).
"""
import argparse
import time

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
        return torch.relu(y + (self.short(x) if self.short is not None else x))


def resnet20(cin, nclasses):
    layers = [nn.Conv2d(cin, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    c = 16
    for s, w in enumerate((16, 32, 64)):
        for k in range(3):
            layers.append(Block(c, w, 2 if s > 0 and k == 0 else 1))
            c = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, nclasses)]
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=28)
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--channels-last", action="store_true",
                    help="model and batch in torch.channels_last (NHWC)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    m = resnet20(a.channels, 10)
    layout = "channels_last" if a.channels_last else "NCHW"
    print(f"torch {torch.__version__}, {a.threads} threads, resnet20 "
          f"{sum(p.numel() for p in m.parameters())} params, batch {a.batch} of "
          f"{a.channels}x{a.size}x{a.size}, {layout}")
    if a.channels_last:
        m = m.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(a.batch, a.channels, a.size, a.size)
    y = torch.randint(0, 10, (a.batch,))
    if a.channels_last:
        x = x.to(memory_format=torch.channels_last)
    lossf = nn.CrossEntropyLoss()
    times = []
    for i in range(a.warmup + a.steps):
        t = time.perf_counter()
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        if i >= a.warmup:
            times.append(time.perf_counter() - t)
    times.sort()
    med = times[len(times) // 2]
    print(f"median step {med * 1e3:.1f} ms, {a.batch / med:.0f} images/s (min {times[0] * 1e3:.1f} ms)")


if __name__ == "__main__":
    main()
