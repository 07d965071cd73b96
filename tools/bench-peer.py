#!/usr/bin/python3
"""bench-peer.py — the PyTorch / PIL peers our benchmarks compare against.

    /usr/bin/python3 tools/bench-peer.py <subcommand> [args...]

runs main(args) of tools/peer_<subcommand>.py, so a new peer (peer_train.py,
peer_loader.py, ...) is one new file and no edit here. Run it with Debian's
/usr/bin/python3 (python3-torch, python3-torchvision, python3-pil); the
python3 first on PATH may be a build without them.
"""
import importlib
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def available():
    return sorted(f[len("peer_"):-len(".py")] for f in os.listdir(HERE)
                  if f.startswith("peer_") and f.endswith(".py"))


def usage(out):
    out.write("usage: bench-peer.py <subcommand> [args...]\n"
              "subcommands: %s\n" % (", ".join(available()) or "(none)"))


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        usage(sys.stdout if len(argv) >= 2 else sys.stderr)
        return 0 if len(argv) >= 2 else 2
    name = argv[1]
    if not re.fullmatch(r"[a-z0-9_]+", name) or name not in available():
        sys.stderr.write("bench-peer.py: unknown subcommand '%s'\n" % name)
        usage(sys.stderr)
        return 2
    sys.path.insert(0, HERE)
    module = importlib.import_module("peer_" + name)
    return module.main(argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
