# mk/photos.mk — real photographs.
#
#   make photos   installs Debian's mate-backgrounds (46 MB: 14 JPEG
#                 photographs, 1280x1024 to 5640x3172) and cuts from them
#                 an ImageNet-shaped set into data/photos (tools/photo-set:
#                 14 classes, 200 train + 25 val images each; PHOTOS_ARGS
#                 passes more). Not part of `make deps`: the tests use
#                 generated JPEGs, so `make test` does not need 46 MB.
PHOTO_PKGS  := mate-backgrounds
PHOTOS_ARGS ?=

build/tools/photo_set: tools/photo_set.c $(call libs_of,cpu,image common)
	@mkdir -p build/tools
	$(CC) $(TOOL_CFLAGS) -o $@ $(filter %.c %.a,$^) $(LIBS)

photos: deps build/tools/photo_set
	$(call apt_install,$(PHOTO_PKGS))
	tools/photo-set --out data/photos $(PHOTOS_ARGS)

.PHONY: photos

# bench_photos: fidelity and speed per core on the photo set, against the
# bare libjpeg-turbo decode (docs/BENCH-PHOTOS.md)
build/tools/bench_photos: tools/bench_photos.c $(call libs_of,cpu,loader image common)
	@mkdir -p build/tools
	$(CC) $(TOOL_CFLAGS) -o $@ $(filter %.c %.a,$^) $(LIBS)

# ---------------------------------------------------------------- peers
# The loaders ImageNet users pick, from PyPI into the python3 first on PATH
# (not Debian's /usr/bin/python3): torchvision + Pillow (with whatever torch
# is there, else PyPI's, which pulls CUDA libraries: pass
# PEER_PIP_ARGS='--index-url https://download.pytorch.org/whl/cpu' for CPU
# wheels), tensorflow-cpu (1.3 GB installed) and DALI (nvidia-dali-cuda130,
# 0.5 GB plus nvimgcodec; its CPU pipeline needs no GPU). Pillow-SIMD gets
# its own venv (bench-pillow-simd below): it installs the same PIL package
# as Pillow and would replace it for every user of the interpreter.
# torch and torchvision also run the torch-tensor peer (decode_jpeg +
# transforms v2, no Pillow), which needs torchvision >= 0.16 (v2 stable):
# Debian's 0.14 under /usr/bin/python3 has no v2, so it runs only here.
PEER_PIP      := torch torchvision pillow numpy tensorflow-cpu nvidia-dali-cuda130
PEER_PIP_ARGS ?=
bench-photos-deps: bench-pillow-simd
	python3 -m pip install --quiet $(PEER_PIP_ARGS) $(PEER_PIP) || \
	  echo "bench-photos-deps: some peers did not install; tools/bench-photos skips them and says why"
bench-deps: bench-photos-deps

# bench-pillow-simd: uploadcare's Pillow-SIMD (resize and a few filters in
# SSE4/AVX2; decode is still libjpeg-turbo), built from its sdist with AVX2
# as its README says (CC="cc -mavx2"; --no-cache-dir so a cached SSE4 wheel
# is never reused), into build/venv-pillow-simd: a venv over Debian's
# /usr/bin/python3 with --system-site-packages, so the torch peer there runs
# Debian's torch and torchvision on it and only PIL differs from the stock
# torch peer (tools/bench-photos --peers torch,torch-simd). About 30 MB and
# half a minute on 2 cores. AVX2 only where this CPU has it (the build then
# runs only on AVX2 CPUs), else Pillow-SIMD's default SSE4. Reruns only
# install when the venv lacks PILLOW_SIMD_VERSION (rm -rf the venv to
# rebuild with another PILLOW_SIMD_CC). A failure says so and does not stop
# bench-deps; bench-photos then skips the peer with the reason.
PILLOW_SIMD_VENV    := build/venv-pillow-simd
PILLOW_SIMD_VERSION ?= 12.1.1.post0
PILLOW_SIMD_CC      ?= cc$(shell grep -qw avx2 /proc/cpuinfo 2>/dev/null && echo ' -mavx2')
PILLOW_SIMD_PKGS    := python3-venv python3-dev libjpeg62-turbo-dev zlib1g-dev python3-torch python3-torchvision
PILLOW_SIMD_CHECK   := from importlib.metadata import version; import PIL; \
  assert version("pillow-simd") == PIL.__version__ and PIL.__file__.startswith(sys.prefix), PIL.__file__; \
  print("bench-pillow-simd: PIL", PIL.__version__, "from", PIL.__file__)
bench-pillow-simd:
	-$(call apt_install,$(PILLOW_SIMD_PKGS))
	@{ test -x $(PILLOW_SIMD_VENV)/bin/python || /usr/bin/python3 -m venv --system-site-packages $(PILLOW_SIMD_VENV); } && \
	  { $(PILLOW_SIMD_VENV)/bin/python -c 'import sys; $(PILLOW_SIMD_CHECK)' 2>/dev/null | grep -qF "PIL $(PILLOW_SIMD_VERSION) " || \
	    CC="$(PILLOW_SIMD_CC)" $(PILLOW_SIMD_VENV)/bin/python -m pip install --quiet --no-cache-dir \
	      --no-binary pillow-simd pillow-simd==$(PILLOW_SIMD_VERSION); } && \
	  $(PILLOW_SIMD_VENV)/bin/python -c 'import sys; $(PILLOW_SIMD_CHECK)' || \
	  echo "bench-pillow-simd: Pillow-SIMD did not install; tools/bench-photos skips torch-simd and says why"

BENCH_PHOTOS_N      ?= 384
BENCH_PHOTOS_ROUNDS ?= 3
bench-photos: train build/tools/bench_photos
	@test -d data/photos/train || $(MAKE) --no-print-directory photos
	build/tools/bench_photos --n 300 --keys 3 --fidelity-only data/photos/train /usr/share/backgrounds/mate
	tools/bench-photos --n $(BENCH_PHOTOS_N) --rounds $(BENCH_PHOTOS_ROUNDS) --out build/bench/photos.md
BENCH_TARGETS += bench-photos

.PHONY: bench-photos bench-photos-deps bench-pillow-simd
