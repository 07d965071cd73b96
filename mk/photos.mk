# mk/photos.mk — real photographs (issue 16).
#
#   make photos   installs Debian's mate-backgrounds (46 MB: 14 JPEG
#                 photographs, 1280x1024 to 5640x3172) and cuts from them
#                 an ImageNet-shaped set into data/photos (tools/photo-set:
#                 14 classes, 200 train + 25 val images each; PHOTOS_ARGS
#                 passes more). Not part of `make deps`: the tests use
#                 generated JPEGs, so `make test` does not need 46 MB.
PHOTO_PKGS  := mate-backgrounds
PHOTOS_ARGS ?=

build/tools/photo_set: tools/photo_set.c loader/resize.c loader/resize.h common/util.c common/util.h common/rng.h
	@mkdir -p build/tools
	$(CC) $(BASE_CFLAGS) -O2 -o $@ tools/photo_set.c loader/resize.c common/util.c $(LIBS)

photos: deps build/tools/photo_set
	$(call apt_install,$(PHOTO_PKGS))
	tools/photo-set --out data/photos $(PHOTOS_ARGS)

.PHONY: photos

# bench_photos: fidelity and speed per core on the photo set, against the
# bare libjpeg-turbo decode (docs/BENCH-PHOTOS.md)
build/tools/bench_photos: tools/bench_photos.c $(IMG_SRC) $(IMG_HDR) loader/csv_index.c loader/folder_index.c \
                          loader/csv_index.h
	@mkdir -p build/tools
	$(CC) $(IMG_TOOL_CFLAGS) -o $@ tools/bench_photos.c $(IMG_SRC) loader/csv_index.c loader/folder_index.c $(LIBS)
