"""trainloader: train's loader inside a Python training script.

    import torch, trainloader
    loader = trainloader.Loader("photos/train", batch=256, workers=8, prefetch=2,
                                random_resized_crop=224, hflip=0.5, seed=1)
    for epoch in range(epochs):
        loader.set_epoch(epoch)            # or implicit: each pass is the next epoch
        for images, labels in loader:      # images: uint8 N,C,H,W (a view of the ring)
            x = torch.from_dlpack(images)  # no copy
            ...

Keyword arguments are train's command-line options (`train --help`), with
'_' for '-': workers=8 is --workers 8, random_resized_crop=224 is
--random-resized-crop 224, shuffle=False is --no-shuffle; train's own parser
reads them, with train's defaults and messages. rank/world_size cut every
global batch as `mpirun ... train` does; train=False gives the evaluation
transforms (no augmentation) in file order.

Lifetime: the images of a batch are the loader's ring slot itself. The slot
goes back to the workers when the next batch is asked for (the next step of
the loop); after that the Array refuses new views, and tensors made from it
earlier see the slot refilled. Keep a batch with images.copy() (or
torch.from_dlpack(images).clone()). Labels are a small int64 copy. Views
outlive the loader: close() stops its processes, and the ring stays mapped
(the held batch untouched) until the last view of it is gone.

See docs/PYTHON.md.
"""

import atexit
import operator
import os
import weakref

from . import _trainloader as _c
from ._trainloader import Array, BadInput, LoaderError, WorkerLost

__all__ = ["Loader", "Array", "LoaderError", "BadInput", "WorkerLost"]

_SUPERVISOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trainloader-supervisor")

# the loader's options are those of train --help's sections Data, Shards
# behind URLs, Images and Loader (read from train's own option table), less what makes no sense for
# one Loader, plus pin; anything else is refused, so that a typo or a
# training option does not pass silently
_LOADER_SECTIONS = ("Data", "Shards", "Images", "Loader")
_NOT_LOADER = {"check", "val", "loader-only"}
_ALSO_LOADER = {"pin", "no-pin"}


def _is_loader_option(name):
    section = _c.option_section(name) or ""
    return name in _ALSO_LOADER or (section.startswith(_LOADER_SECTIONS)
                                     and name not in _NOT_LOADER)


_live = weakref.WeakSet()


def _argv(path, options, extra=()):
    """train's command line for path and the keyword options (extra: more
    of train's arguments as they are, e.g. its hidden test hooks)."""
    argv = ["trainloader", "--loader-only", "--no-progress", *extra]
    for key, value in options.items():
        twin = key[3:] if key.startswith("no_") else None
        if value is not None and twin in options and options[twin] is not None:
            raise ValueError(f"{twin}= and {key}= are one option (--{twin.replace('_', '-')} "
                             f"and --{key.replace('_', '-')}): give one of them")
    for key, value in options.items():
        if value is None:
            continue
        name = key.replace("_", "-")
        kind = _c.option_arg(name)
        if kind < 0 or not _is_loader_option(name):
            why = "is not a loader option" if kind >= 0 else "is not an option of train"
            raise TypeError(f"Loader() got an unexpected keyword argument '{key}': "
                            f"--{name} {why} (see train --help, sections Data, Shards, Images, Loader)")
        if kind == 0:  # a flag: True sets it, False sets its --no- twin when there is one
            if _bool_kw(key, value):
                argv.append("--" + name)
            elif _c.option_arg("no-" + name) == 0:
                argv.append("--no-" + name)
            continue
        if isinstance(value, bool):
            if kind == 1:  # a number or a word, never a truth value (batch=True is no batch size)
                raise TypeError(f"{key}= takes a value for --{name}, not bool ({value!r})")
            value = "on" if value else "off"  # --pin=on
        elif isinstance(value, (bytes, os.PathLike)):  # root=, cache=: paths as the data path
            value = os.fsdecode(value)
        elif isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        _no_nul(f"{key}=", str(value))
        if kind == 2:
            argv.append(f"--{name}={value}")
        else:
            argv += ["--" + name, str(value)]
    path = _path_kw("the data path", path)
    _no_nul("the data path", path)
    return argv + ["--", path]


def _bool_kw(key, value):
    """A truth keyword: True or False only (train="no" is not False)."""
    if not isinstance(value, bool):
        raise TypeError(f"{key}= takes True or False, not {type(value).__name__} ({value!r})")
    return value


def _int_kw(key, value):
    """An integer keyword: an int (or numpy's), not a bool, float or str."""
    if isinstance(value, bool):
        raise TypeError(f"{key}= takes an integer, not bool ({value!r})")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{key}= takes an integer, not {type(value).__name__} ({value!r})") from None


def _path_kw(what, value):
    """A path: str, bytes (os.fsdecode) or os.PathLike, as open() takes."""
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"{what} must be str, bytes or os.PathLike, not {type(value).__name__} "
                        f"({value!r})")
    return os.fsdecode(value)


def _no_nul(what, text):
    """train's command line is C strings: a NUL would cut the text short
    silently (root="\0" would make every path absolute)."""
    if isinstance(text, str) and "\0" in text:
        raise ValueError(f"{what} {text!r} contains a NUL character")


class Loader:
    """Batches of a CSV or class-folder data set, loaded by train's forked
    workers into a shared ring; iterate for (images, labels)."""

    _c = None  # also when __init__ fails before making it: __del__ has nothing to close
    pinned = False

    def __init__(self, path, *, rank=None, world_size=None, train=True, _extra=(), **options):
        if (rank is None) != (world_size is None):
            raise TypeError("give rank and world_size together")
        rank = 0 if rank is None else _int_kw("rank", rank)
        world_size = 1 if world_size is None else _int_kw("world_size", world_size)
        train = _bool_kw("train", train)
        pin = options.get("pin")
        self._c = None
        self._c = _c._Loader(_argv(path, options, _extra), _SUPERVISOR, rank, world_size, train)
        info = self._c.info()
        self.classes = info["classes"]
        self.sample_shape = info["sample_shape"]
        self.batch_size = info["batch"]
        self.samples = info["samples"]
        self.workers = info["workers"]
        self.mode = info["mode"]
        self.cache_note = info["cache_note"]  # --cache: built, reused, or why rebuilt
        self.rank, self.world_size, self.train = rank, world_size, train
        self._batches = info["batches_per_epoch"]
        self._ring = (info["ring_address"], info["ring_bytes"])
        self._next_epoch = 0
        self.last_indices = []
        self.pinned, self.pin_note = False, ""
        # pin=True / "on" page-locks; pin=False / "off" (as train's --pin=off) does not
        if pin is True or (isinstance(pin, str) and pin.lower() in ("on", "true", "1", "yes")):
            self._pin()
        _live.add(self)

    # -- page-locking through the CUDA runtime, when there is one
    def _pin(self):
        try:
            import torch
        except ImportError:
            self.pin_note = "no torch: the ring stays pageable"
            return
        if not torch.cuda.is_available():
            self.pin_note = "no CUDA device: the ring stays pageable"
            return
        rc = torch.cuda.cudart().cudaHostRegister(self._ring[0], self._ring[1], 0)
        if int(rc) != 0:
            self.pin_note = f"cudaHostRegister failed ({rc}): the ring stays pageable"
            return
        self.pinned = True

    def _unpin(self):
        if self.pinned:
            import torch
            torch.cuda.cudart().cudaHostUnregister(self._ring[0])
            self.pinned = False

    def __len__(self):
        """Batches per epoch (on this rank: its slice of each global batch)."""
        return self._batches

    def set_epoch(self, epoch):
        """The epoch of the next pass (it keys the shuffle and augmentation)."""
        self._next_epoch = int(epoch)

    def __iter__(self):
        if self._c is None:
            raise ValueError("the loader is closed")
        epoch = self._next_epoch
        self._c.begin(epoch)
        self._next_epoch = epoch + 1
        return self._batches_of_pass()

    def _batches_of_pass(self):
        while True:
            if self._c is None:
                raise ValueError("the loader is closed")
            got = self._c.next()
            if got is None:
                return
            images, labels, self.last_indices = got
            yield images, labels

    def stats(self):
        """The current (or last) pass's loader numbers: wait_pct, images_per_s,
        read_s, decode_s, transform_s, ..."""
        if self._c is None:
            raise ValueError("the loader is closed")
        return self._c.stats()

    def pids(self):
        """pids of the loader's supervisor and live workers."""
        return self._c.pids() if self._c is not None else []

    def ring(self):
        """(address, bytes) of the ring every batch is a view of."""
        return self._ring

    def close(self):
        """Stop and reap every loader process (also done when the loader is
        garbage-collected and at interpreter exit)."""
        if self._c is not None:
            self._unpin()
            self._c.close()
            self._c = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


@atexit.register
def _close_all():
    for loader in list(_live):
        loader.close()
