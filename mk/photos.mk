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
# 0.5 GB plus nvimgcodec; its CPU pipeline needs no GPU). Pillow-SIMD is
# left out: it builds from source and installs the same PIL package as
# Pillow, replacing it for every user of the interpreter.
PEER_PIP      := torch torchvision pillow numpy tensorflow-cpu nvidia-dali-cuda130
PEER_PIP_ARGS ?=
bench-photos-deps:
	python3 -m pip install --quiet $(PEER_PIP_ARGS) $(PEER_PIP) || \
	  echo "bench-photos-deps: some peers did not install; tools/bench-photos skips them and says why"
bench-deps: bench-photos-deps

BENCH_PHOTOS_N      ?= 384
BENCH_PHOTOS_ROUNDS ?= 3
bench-photos: train build/tools/bench_photos
	@test -d data/photos/train || $(MAKE) --no-print-directory photos
	build/tools/bench_photos --n 300 --keys 3 --fidelity-only data/photos/train /usr/share/backgrounds/mate
	tools/bench-photos --n $(BENCH_PHOTOS_N) --rounds $(BENCH_PHOTOS_ROUNDS) --out build/bench/photos.md
BENCH_TARGETS += bench-photos

.PHONY: bench-photos bench-photos-deps
