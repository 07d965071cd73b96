#!/usr/bin/env python3
"""peer_photos.py — one loader peer on the ImageNet recipe, for tools/bench-photos.

    peer_photos.py --peer torch|torch-simd|torch-tensor|tf|dali --recipe rrc|val --workers W --list FILES.csv
                   [--epochs E]

Reads the files listed in FILES.csv (path,label; written by bench-photos),
runs E epochs (the first is a warm-up) of the recipe, loader only, batch 64,
and prints one JSON line for the last epoch: images, wall seconds, CPU
seconds of this process and its children (per-core rate = images / CPU s),
and the versions of what ran ("lib").

Recipes (u8 CHW out, as train's ring holds):
  rrc  RandomResizedCrop(224, scale 0.08-1, ratio 3/4-4/3) + horizontal flip
  val  Resize(256) + CenterCrop(224)
Peers:
  torch  torchvision 0.2x on PIL (Image.open().convert("RGB")), transforms
         v1, PILToTensor, DataLoader(num_workers=W; W=0 loads in-process)
  torch-simd  the same code, but refuses to run unless PIL is Pillow-SIMD
         installed in this interpreter's own prefix (a venv, e.g.
         build/venv-pillow-simd from `make bench-pillow-simd`): the
         distribution pillow-simd at PIL's version, PIL under sys.prefix
  torch-tensor  PyTorch's fastest CPU path without Pillow: the file's bytes
         (torchvision.io.read_file), torchvision.io.decode_image(mode=RGB:
         decode_jpeg for a JPEG, grey and CMYK ones as 3 channels, and a
         PNG named .JPEG, as ImageNet has, decoded too), transforms v2 on
         uint8 CHW tensors: RandomResizedCrop(224, antialias=True) +
         RandomHorizontalFlip (rrc) or Resize(256, antialias=True) +
         CenterCrop(224) (val); the same DataLoader, threads and timing as
         torch. Every batch is checked: uint8, 3x224x224
  tf     tf.data: read_file, sample_distorted_bounding_box +
         decode_and_crop_jpeg (rrc) or decode_image + resize + crop (val);
         a file that is not a JPEG (tf.io.is_jpeg) is decoded whole by
         decode_image and sliced (the fused crop decodes JPEGs only),
         tf.image.resize bilinear (antialias=True, as PIL), flip,
         transpose; map(num_parallel_calls=W or 1), batch, prefetch;
         private thread pool of max(W,1) threads, intra-op 1
  dali   DALI CPU pipeline (device_id=None, num_threads=max(W,1)):
         readers.file, decoders.image_random_crop (rrc) or decoders.image
         + resize(resize_shorter=256) (val), resize, crop_mirror_normalize
         to u8 CHW with a coin-flip mirror
"""
import argparse
import csv
import json
import os
import resource
import sys
import time

BATCH = 64


def cpu_now():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def read_list(path):
    with open(path) as f:
        rows = list(csv.reader(f))
    if rows and rows[0] == ["path", "label"]:
        rows = rows[1:]
    return [r[0] for r in rows], [int(r[1]) for r in rows]


def pillow_simd_check():
    """Why this PIL is not Pillow-SIMD from this interpreter's prefix, or None.
    A venv made with --system-site-packages also sees Debian's Pillow: the
    label must not silently fall back to it."""
    from importlib import metadata

    import PIL

    try:
        dist = metadata.version("pillow-simd")
    except metadata.PackageNotFoundError:
        return f"no pillow-simd distribution for {sys.executable} (PIL {PIL.__version__} at {PIL.__file__})"
    if dist != PIL.__version__:
        return f"PIL {PIL.__version__} at {PIL.__file__} is not pillow-simd {dist}"
    if not os.path.realpath(PIL.__file__).startswith(os.path.realpath(sys.prefix) + os.sep):
        return f"PIL at {PIL.__file__} is outside {sys.prefix}"
    return None


def tensor_transform(recipe):
    """torch-tensor's recipe: transforms v2 on uint8 CHW tensors."""
    from torchvision.transforms import v2 as T

    if recipe == "rrc":
        return T.Compose([T.RandomResizedCrop(224, antialias=True), T.RandomHorizontalFlip()])
    return T.Compose([T.Resize(256, antialias=True), T.CenterCrop(224)])


def tensor_load(path, tf):
    """One torch-tensor sample: the file's bytes, decode_image (decode_jpeg
    for a JPEG; a PNG named .JPEG too) to RGB, tf."""
    from torchvision.io import ImageReadMode, decode_image, read_file

    return tf(decode_image(read_file(path), mode=ImageReadMode.RGB))


def torch_epochs(files, labels, recipe, workers, epochs, lib, tensor=False):
    import torch
    import torchvision

    lib.update(torch=torch.__version__, torchvision=torchvision.__version__)
    torch.set_num_threads(1)  # DataLoader's workers set 1 thread each as well
    if tensor:
        tf = tensor_transform(recipe)
        load = lambda path: tensor_load(path, tf)
    else:
        import PIL
        from PIL import Image
        from torchvision import transforms as T

        lib.update(PIL=PIL.__version__)
        if recipe == "rrc":
            tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])
        else:
            tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])

        def load(path):
            with open(path, "rb") as f:
                img = Image.open(f).convert("RGB")
            return tf(img)

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, i):
            return load(files[i]), labels[i]

    dl = torch.utils.data.DataLoader(DS(), batch_size=BATCH, shuffle=True, num_workers=workers,
                                     persistent_workers=False)
    for e in range(epochs):
        t0, c0, n = time.perf_counter(), cpu_now(), 0
        for x, _ in dl:
            if tensor and (x.dtype != torch.uint8 or tuple(x.shape[1:]) != (3, 224, 224)):
                sys.exit(f"peer_photos: torch-tensor: batch {tuple(x.shape)} {x.dtype}, not Nx3x224x224 uint8")
            n += x.shape[0]
        yield n, time.perf_counter() - t0, cpu_now() - c0


def tf_epochs(files, labels, recipe, workers, epochs, lib):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    lib.update(tensorflow=tf.__version__)

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(max(workers, 1))

    def box(shape):
        return tf.image.sample_distorted_bounding_box(
            shape, bounding_boxes=tf.zeros([1, 0, 4]), min_object_covered=0.0,
            aspect_ratio_range=(3 / 4, 4 / 3), area_range=(0.08, 1.0), max_attempts=10,
            use_image_if_no_bounding_boxes=True)

    def decode_any(data):
        img = tf.io.decode_image(data, channels=3, expand_animations=False)
        img.set_shape([None, None, 3])
        return img

    def rrc(path):
        data = tf.io.read_file(path)

        def jpeg():
            begin, size, _ = box(tf.io.extract_jpeg_shape(data))
            y, x, _ = tf.unstack(begin)
            h, w, _ = tf.unstack(size)
            return tf.image.decode_and_crop_jpeg(data, tf.stack([y, x, h, w]), channels=3)

        def other():
            img = decode_any(data)
            begin, size, _ = box(tf.shape(img))
            return tf.slice(img, begin, size)

        img = tf.cond(tf.io.is_jpeg(data), jpeg, other)
        img = tf.image.resize(img, [224, 224], antialias=True)
        img = tf.image.random_flip_left_right(img)
        return tf.transpose(tf.cast(tf.round(img), tf.uint8), [2, 0, 1])

    def val(path):
        img = decode_any(tf.io.read_file(path))
        hw = tf.cast(tf.shape(img)[:2], tf.float32)
        scale = 256.0 / tf.reduce_min(hw)
        img = tf.image.resize(img, tf.cast(hw * scale, tf.int32), antialias=True)
        img = tf.image.resize_with_crop_or_pad(img, 224, 224)
        return tf.transpose(tf.cast(tf.round(img), tf.uint8), [2, 0, 1])

    ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files))
    ds = ds.map(rrc if recipe == "rrc" else val,
                num_parallel_calls=workers if workers > 0 else 1).batch(BATCH).prefetch(2)
    opt = tf.data.Options()
    opt.threading.private_threadpool_size = max(workers, 1)
    opt.threading.max_intra_op_parallelism = 1
    ds = ds.with_options(opt)
    for e in range(epochs):
        t0, c0, n = time.perf_counter(), cpu_now(), 0
        for x in ds:
            n += int(x.shape[0])
        yield n, time.perf_counter() - t0, cpu_now() - c0


def dali_epochs(files, labels, recipe, workers, epochs, lib):
    import nvidia.dali
    from nvidia.dali import fn, pipeline_def, types

    lib.update(dali=nvidia.dali.__version__)

    @pipeline_def(batch_size=BATCH, num_threads=max(workers, 1), device_id=None, prefetch_queue_depth=2)
    def pipe():
        jpegs, _ = fn.readers.file(files=files, labels=labels, random_shuffle=True, name="r")
        if recipe == "rrc":
            img = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                                random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3],
                                                num_attempts=10)
            img = fn.resize(img, resize_x=224, resize_y=224, antialias=True)
            mirror = fn.random.coin_flip()
        else:
            img = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
            img = fn.resize(img, resize_shorter=256, antialias=True)
            mirror = 0
        return fn.crop_mirror_normalize(img, dtype=types.UINT8, output_layout="CHW", crop=(224, 224),
                                        mean=[0.0], std=[1.0], mirror=mirror)

    p = pipe()
    p.build()
    per_epoch = (len(files) + BATCH - 1) // BATCH
    for e in range(epochs):
        t0, c0, n = time.perf_counter(), cpu_now(), 0
        for _ in range(per_epoch):
            (out,) = p.run()
            n += len(out)
        yield n, time.perf_counter() - t0, cpu_now() - c0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", choices=["torch", "torch-simd", "torch-tensor", "tf", "dali"], required=True)
    ap.add_argument("--recipe", choices=["rrc", "val"], default="rrc")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--list", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    a = ap.parse_args()
    files, labels = read_list(a.list)
    if a.peer == "torch-simd":
        why = pillow_simd_check()
        if why:
            sys.exit(f"peer_photos: torch-simd: {why}")
    run = {"torch": torch_epochs, "torch-simd": torch_epochs, "tf": tf_epochs, "dali": dali_epochs,
           "torch-tensor": lambda *args: torch_epochs(*args, tensor=True)}[a.peer]
    lib = {"python": sys.executable}
    last = None
    for last in run(files, labels, a.recipe, a.workers, a.epochs, lib):
        pass
    n, wall, cpu = last
    print(json.dumps({"peer": a.peer, "recipe": a.recipe, "workers": a.workers, "images": n, "wall_s": wall,
                      "cpu_s": cpu, "lib": lib}))
    sys.stdout.flush()
    os._exit(0)  # DALI and TF threads can hang interpreter teardown


if __name__ == "__main__":
    main()
