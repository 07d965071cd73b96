#!/usr/bin/env python3
"""resnet_check.py — train's resnet20 against PyTorch (docs/BENCH-NN.md,
"resnet20 against PyTorch"). A verification tool, not part of `make test`.

    python3 tools/resnet_check.py [--train ./train] [--dir /tmp/resnet_check]
        [--src data/fashion-mnist] [--batch 32] [--steps 50] [--lr 0.1]

Needs torch, numpy and PIL (the python3 first on PATH; Debian's
/usr/bin/python3 may lack them) and the PNGs of `tools/fashion-mnist`.

The PyTorch net is built from nn/model_zoo.c's layer list, in its order:
conv3x3 16 (no bias) bn relu; 3 stages x 3 BasicBlocks of 16/32/64
(conv3x3(stride) bn relu conv3x3 bn, shortcut: identity, or 1x1/stride
conv (no bias) + bn when the shape changes, add, relu); global average
pool; fc. Tensor names follow nn/model.c's numbering (convN, bnN, fc1 in
layer order; a block's projection conv comes after its two main convs).
Parameters come from train checkpoints, parsed as nn/checkpoint.c writes
them (tensor offsets are float offsets into the one parameter array, which
is 64-byte aligned per tensor; the running statistics are tensors too).

What is compared (every run of train: --workers 0 --no-shuffle --hflip 0
--threads 1, one CSV whose order is the batch order):
 1. one batch of B images, lr 0 (ck0: the initial parameters, running
    statistics after that batch): train-mode loss (the epoch loss of a
    one-batch epoch), eval-mode loss (--val on the same CSV: evaluated with
    ck0's running statistics) and the running statistics themselves;
 2. the same batch with lr L, momentum 0, wd 0 (ck1): the gradient
    g = (w0 - w1) / L per tensor against PyTorch's autograd gradient, and
    w1 against PyTorch's w0 - L*g; PyTorch in float64 as a third opinion;
 3. a 50-step loss curve: the B-image CSV for 50 epochs (one step each, so
    each epoch's loss is exactly that step's loss), const lr, the model's
    momentum 0.9 and wd 5e-4 on weights only (conv and fc weights; biases
    and bn parameters undecayed, as train's decay_weights_only), PyTorch's
    SGD with the same two parameter groups, in float32 and float64.
train reports losses, not logits, so the logits themselves are compared
only through the losses.
"""
import argparse
import csv
import json
import os
import struct
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image


# ------------------------------------------------------------- checkpoint
def read_ckpt(path):
    b = open(path, "rb").read()
    assert b[:8] == b"TRAINCKP", "not a train checkpoint"
    pos = 8

    def u32():
        nonlocal pos
        v = struct.unpack_from("<I", b, pos)[0]
        pos += 4
        return v

    def u64():
        nonlocal pos
        v = struct.unpack_from("<Q", b, pos)[0]
        pos += 8
        return v

    def f64():
        nonlocal pos
        v = struct.unpack_from("<d", b, pos)[0]
        pos += 8
        return v

    def s():
        nonlocal pos
        n = u32()
        v = b[pos:pos + n].decode()
        pos += n
        return v

    def floats(n):
        nonlocal pos
        v = np.frombuffer(b, dtype="<f4", count=n, offset=pos).copy()
        pos += 4 * n
        return v

    version, bom, size = u32(), u32(), u64()
    assert bom == 0x01020304 and size == len(b), "byte order or size"
    ck = {"version": version, "model": s()}
    C, H, W, ncls = u32(), u32(), u32(), u32()
    ck.update(C=C, H=H, W=W, nclasses=ncls, mean=floats(C), std=floats(C))
    ck["classes"] = [s() for _ in range(ncls)]
    tensors = []
    for _ in range(u32()):
        name, ndim = s(), u32()
        shape = [u32() for _ in range(4)][:ndim]
        off, n = u64(), u64()
        tensors.append((name, shape, off, n))
    nparams = u64()
    ck.update(epoch=u64(), step=u64(), seed=u64(), epochs=u64(), batch=u32(), schedule=u32(),
              lr=f64(), momentum=f64(), wd=f64())
    params, mom = floats(nparams), floats(nparams)
    assert pos + 8 == len(b), "trailing bytes before the checksum"
    ck["tensors"] = {}
    for name, shape, off, n in tensors:
        assert off % 16 == 0, "tensor offset not 64-byte aligned"
        ck["tensors"][name] = torch.from_numpy(params[off:off + n].reshape(shape).copy())
    ck["momentum_buf"] = {name: torch.from_numpy(mom[off:off + n].reshape(shape).copy())
                          for name, shape, off, n in tensors}
    return ck


# ------------------------------------------------------------- the net
def resnet_spec(blocks=3, widths=(16, 32, 64)):
    """nn/model_zoo.c's build_resnet (CIFAR stem) as a list of ops:
    ('convbn', conv n, bn n, stride, pad), ('relu',), ('block', a, b, proj)
    with a, b, proj such (n, n, stride, pad) tuples (proj None: identity),
    ('gap',), ('fc', n); the numbers are nn/model.c's tensor names."""
    ops = []
    nconv = nbn = 0

    def conv_bn(stride, pad):
        nonlocal nconv, nbn
        nconv += 1
        nbn += 1
        return (nconv, nbn, stride, pad)

    ops.append(("convbn",) + conv_bn(1, 1))
    ops.append(("relu",))
    c = widths[0]
    for s, w in enumerate(widths):
        for k in range(blocks):
            stride = 2 if s > 0 and k == 0 else 1
            a = conv_bn(stride, 1)
            bb = conv_bn(1, 1)
            proj = conv_bn(stride, 0) if (stride != 1 or c != w) else None
            ops.append(("block", a, bb, proj))
            c = w
    ops.append(("gap",))
    ops.append(("fc", 1))
    return ops


def forward(ops, P, x, train, bn_momentum=0.1, eps=1e-5):
    """P: name -> tensor (parameters and running statistics); in train
    mode the running statistics are updated in place, as nn.BatchNorm2d."""
    def cb(x, spec):
        n, m, stride, pad = spec
        y = F.conv2d(x, P["conv%d.weight" % n], None, stride, pad)
        return F.batch_norm(y, P["bn%d.running_mean" % m], P["bn%d.running_var" % m],
                            P["bn%d.weight" % m], P["bn%d.bias" % m], train, bn_momentum, eps)

    for op in ops:
        if op[0] == "convbn":
            x = cb(x, op[1:])
        elif op[0] == "relu":
            x = F.relu(x)
        elif op[0] == "block":
            _, a, bb, proj = op
            y = cb(F.relu(cb(x, a)), bb)
            x = F.relu(y + (cb(x, proj) if proj else x))
        elif op[0] == "gap":
            x = x.mean(dim=(2, 3))
        elif op[0] == "fc":
            x = F.linear(x, P["fc%d.weight" % op[1]], P["fc%d.bias" % op[1]])
    return x


# ------------------------------------------------------------- data
def load_csv(path, mean, std):
    root = os.path.dirname(path)
    xs, ys = [], []
    with open(path) as f:
        rows = list(csv.reader(f))
    for r in rows[1:]:
        img = np.asarray(Image.open(os.path.join(root, r[0])).convert("L"), dtype=np.float32)
        xs.append(img[None])
        ys.append(int(r[1]))
    x = torch.from_numpy(np.stack(xs))
    m = torch.from_numpy(mean).view(1, -1, 1, 1)
    s = torch.from_numpy(std).view(1, -1, 1, 1)
    return (x / 255.0 - m) / s, torch.tensor(ys)


def run_train(a, csvfile, tag, extra):
    js = os.path.join(a.dir, tag + ".json")
    cmd = [a.train, "--model", "resnet20", "--channels", "1", "--hflip", "0", "--no-shuffle",
           "--workers", "0", "--threads", "1", "--batch", str(a.batch), "--seed", str(a.seed),
           "--lr-schedule", "const", "--no-progress", "--json", js] + extra + [csvfile]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return [json.loads(l) for l in open(js) if '"record":"epoch"' in l]


def err(a, b):
    d = (a.double() - b.double()).abs()
    mx = d.max().item()
    scale = b.double().abs().max().item()
    return mx, mx / scale if scale > 0 else float("nan")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", default="./train")
    p.add_argument("--src", default="data/fashion-mnist", help="tools/fashion-mnist's output")
    p.add_argument("--dir", default="/tmp/resnet_check")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--lr", type=float, default=0.1, help="lr of the gradient step and the curve")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    os.makedirs(a.dir, exist_ok=True)
    a.train = os.path.abspath(a.train)

    # the batch: the first B rows of the training CSV, paths made absolute
    src = os.path.abspath(a.src)
    rows = list(csv.reader(open(os.path.join(src, "train.csv"))))[1:a.batch + 1]
    assert len(rows) == a.batch, "not enough images in %s/train.csv" % src
    bcsv = os.path.join(a.dir, "batch.csv")
    with open(bcsv, "w") as f:
        f.write("path,label\n")
        for r in rows:
            f.write("%s,%s\n" % (os.path.join(src, r[0]), r[1]))

    ck0p, ck1p = os.path.join(a.dir, "ck0.bin"), os.path.join(a.dir, "ck1.bin")
    e0 = run_train(a, bcsv, "step0", ["--epochs", "1", "--lr", "0", "--momentum", "0", "--wd", "0",
                                      "--val", bcsv, "--save", ck0p])[0]
    e1 = run_train(a, bcsv, "step1", ["--epochs", "1", "--lr", repr(a.lr), "--momentum", "0", "--wd", "0",
                                      "--save", ck1p])[0]
    ck0, ck1 = read_ckpt(ck0p), read_ckpt(ck1p)
    assert ck0["model"] == "resnet20"
    x, y = load_csv(bcsv, ck0["mean"], ck0["std"])
    ops = resnet_spec()

    # initial parameters: ck0's, with fresh running statistics (0, 1)
    T0 = ck0["tensors"]
    P = {}
    for k, v in T0.items():
        if k.endswith("running_mean"):
            P[k] = torch.zeros_like(v)
        elif k.endswith("running_var"):
            P[k] = torch.ones_like(v)
        else:
            P[k] = v.clone().requires_grad_(True)
    used = {k for k in P}
    logits = forward(ops, P, x, True)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    # the same in float64: the reference both float32 results are held to
    P64 = {k: (v.detach().double().requires_grad_(True) if v.requires_grad else v.double())
           for k, v in P.items()}
    loss64 = F.cross_entropy(forward(ops, P64, x.double(), True), y)
    loss64.backward()
    print("\n1. forward, one batch of %d (train lr 0 run)" % a.batch)
    print("   train mode loss: train %.9g  torch %.9g  abs %.3g  rel %.3g" %
          (e0["loss"], loss.item(), abs(e0["loss"] - loss.item()), abs(e0["loss"] - loss.item()) / loss.item()))
    with torch.no_grad():
        PE = {k: (T0[k] if "running" in k else P[k].detach()) for k in P}
        le = F.cross_entropy(forward(ops, PE, x, False), y).item()
    print("   eval mode loss:  train %.9g  torch %.9g  abs %.3g  rel %.3g" %
          (e0["val_loss"], le, abs(e0["val_loss"] - le), abs(e0["val_loss"] - le) / le))
    worst = 0.0
    for k in sorted(P):
        if "running" in k:
            mx, rel = err(T0[k], P[k])
            worst = max(worst, rel)
    print("   running statistics after the batch (%d tensors): worst rel %.3g" %
          (sum("running" in k for k in P), worst))

    print("\n2. gradients: g = (w0 - w1) / lr, lr %g, momentum 0, wd 0 (train loss %.9g)" % (a.lr, e1["loss"]))
    print("   rel: max abs difference / the tensor's max |g|; f64: PyTorch in float64")
    print("   %-20s %7s %10s %10s %10s %10s %10s %10s" % ("tensor", "n", "max|g|", "abs err", "rel err",
                                                    "w1 rel", "train-f64", "torch-f64"))
    T1 = ck1["tensors"]
    gw = gr = ww = t64 = p64 = 0.0
    for k in sorted(P, key=lambda s: (s.rstrip("0123456789.abcdefghijklmnopqrstuvwxyz_"), s)):
        if "running" in k:
            continue
        g_train = (T0[k].double() - T1[k].double()) / a.lr
        g_torch = P[k].grad
        mx, rel = err(g_train, g_torch)
        w1 = (P[k].detach() - a.lr * g_torch)
        _, wrel = err(T1[k], w1)
        _, rt64 = err(g_train, P64[k].grad)
        _, rp64 = err(g_torch, P64[k].grad)
        gw, gr, ww, t64, p64 = max(gw, mx), max(gr, rel), max(ww, wrel), max(t64, rt64), max(p64, rp64)
        print("   %-20s %7d %10.4g %10.3g %10.3g %10.3g %10.3g %10.3g" %
              (k, g_torch.numel(), g_torch.abs().max().item(), mx, rel, wrel, rt64, rp64))
    print("   worst: train vs torch abs %.3g rel %.3g; w1 rel %.3g; train vs f64 rel %.3g; "
          "torch float32 vs f64 rel %.3g" % (gw, gr, ww, t64, p64))
    assert used == set(T0), "tensors in the checkpoint not used by the PyTorch net"

    print("\n3. %d-step loss curve: the same batch each step, lr %g const, momentum 0.9, "
          "wd 5e-4 on weights" % (a.steps, a.lr))
    ec = run_train(a, bcsv, "curve", ["--epochs", str(a.steps), "--lr", repr(a.lr), "--momentum", "0.9",
                                      "--wd", "5e-4"])
    curves = {}
    for dt in (torch.float32, torch.float64):
        P = {k: (torch.zeros_like(v, dtype=dt) if k.endswith("running_mean") else
                 torch.ones_like(v, dtype=dt) if k.endswith("running_var") else
                 v.to(dt).clone().requires_grad_(True)) for k, v in T0.items()}
        weights = [v for k, v in P.items() if k.endswith(".weight") and not k.startswith("bn")]
        others = [v for k, v in P.items()
                  if "running" not in k and not (k.endswith(".weight") and not k.startswith("bn"))]
        opt = torch.optim.SGD([{"params": weights, "weight_decay": 5e-4},
                               {"params": others, "weight_decay": 0.0}], lr=a.lr, momentum=0.9)
        curves[dt] = []
        for i in range(a.steps):
            opt.zero_grad()
            l = F.cross_entropy(forward(ops, P, x.to(dt), True), y)
            l.backward()
            opt.step()
            curves[dt].append(l.item())
    c32, c64 = curves[torch.float32], curves[torch.float64]
    print("   step  train        torch f32    torch f64    |train-f32|  |train-f64|  |f32-f64|")
    w = [0.0] * 3
    for i in range(a.steps):
        t = ec[i]["loss"]
        d = (abs(t - c32[i]), abs(t - c64[i]), abs(c32[i] - c64[i]))
        w = [max(u, v) for u, v in zip(w, d)]
        if i < 5 or i % 5 == 4:
            print("   %4d  %.9f  %.9f  %.9f  %.3g  %.3g  %.3g" % ((i + 1, t, c32[i], c64[i]) + d))
    print("   worst abs over %d steps: train-f32 %.3g, train-f64 %.3g, f32-f64 %.3g" % ((a.steps,) + tuple(w)))


if __name__ == "__main__":
    main(sys.argv[1:])
