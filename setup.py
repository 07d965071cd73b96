"""Builds trainloader with the project's Makefile (`make python`): the
extension (CPython stable ABI, 3.11+), the loader's supervisor program and
the Python layer, then packages them. See docs/PYTHON.md."""

import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
BUILT = os.path.join(HERE, "build", "python", "trainloader")


class BuildWithMake(build_py):
    """build_py that first runs `make python` for this interpreter."""

    def run(self):
        subprocess.run(["make", "-s", "python", f"PY_BUILD={sys.executable}"], cwd=HERE, check=True)
        super().run()
        dst = os.path.join(self.build_lib, "trainloader")
        for name in ("_trainloader.abi3.so", "trainloader-supervisor"):
            shutil.copy2(os.path.join(BUILT, name), dst)


class BinaryDistribution(Distribution):
    """A wheel for this platform: the package holds compiled files."""

    def has_ext_modules(self):
        return True


setup(
    packages=["trainloader"],
    package_dir={"": "python"},
    cmdclass={"build_py": BuildWithMake},
    distclass=BinaryDistribution,
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
