# mk/image.mk — the image pipeline's benchmark and fuzz target.
#
#   make bench-image   ours vs bare TurboJPEG vs PIL + torchvision on the E1
#                      JPEG set and Fashion-MNIST PNGs (docs/BENCH-IMAGE.md);
#                      BENCH_IMAGE_N images, BENCH_IMAGE_RUNS rounds
#   make fuzz-image    libFuzzer over decode + transform for FUZZ_SECONDS
#                      (default 60); new inputs in fuzz/corpus-work/image,
#                      crashers in fuzz/corpus-work/image/crashes — fix them
#                      and copy them to fuzz/corpus/image/

# Tools link the cpu variant's libraries (-O2, no sanitizers); the
# fuzz_image built with gcc is the plain replay driver.
build/tools/bench_image: tools/bench_image.c $(call libs_of,cpu,loader image common)
	@mkdir -p build/tools
	$(CC) $(TOOL_CFLAGS) -o $@ $(filter %.c %.a,$^) $(LIBS)
build/tools/fuzz_image: fuzz/fuzz_image.c $(call libs_of,cpu,image common)
	@mkdir -p build/tools
	$(CC) $(TOOL_CFLAGS) -o $@ $(filter %.c %.a,$^) $(LIBS)

# ---------------------------------------------------------------- bench
BENCH_IMAGE_N    ?= 1000
BENCH_IMAGE_RUNS ?= 5
BENCH_PYTHON     ?= /usr/bin/python3
bench-image: build/tools/bench_image
	@test -f data/e1/train.csv || tools/jpeg-set --n 2000
	@test -f data/fashion-mnist/train.csv || tools/fashion-mnist --limit 12000
	build/tools/bench_image --n $(BENCH_IMAGE_N) --runs $(BENCH_IMAGE_RUNS) \
	  --peer "$(BENCH_PYTHON) tools/bench-peer.py image" data/e1/train.csv data/fashion-mnist/train.csv
BENCH_TARGETS += bench-image

# ---------------------------------------------------------------- fuzz
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_IMAGE_WORK := fuzz/corpus-work/image

# stb_image compiled from the Debian header, instrumented, instead of libstb
build/fuzz/stb_image.o: /usr/include/stb/stb_image.h
	@mkdir -p build/fuzz
	$(FUZZ_CC) -x c -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link -DSTB_IMAGE_IMPLEMENTATION \
	  -c $< -o $@
# the image and common layers again, instrumented for libFuzzer (a "fuzz"
# variant of their libraries)
FUZZ_CFLAGS := -std=c11 -O1 -g -MMD -MP -I. -DTRAIN_JPEGINT=$(JPEGINT) -DTRAIN_ASSERTS=1 $(FUZZ_SAN) \
               -fsanitize=fuzzer-no-link
build/fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@
$(foreach l,image common,$(eval $(call lib_rule,fuzz,$(l))))
build/fuzz/fuzz_image: fuzz/fuzz_image.c $(call libs_of,fuzz,image common) build/fuzz/stb_image.o
	$(FUZZ_CC) -std=c11 -O1 -g -I. $(FUZZ_SAN) -fsanitize=fuzzer -DFUZZ_LIBFUZZER -o $@ \
	  $^ -lturbojpeg -ljpeg -lwebp -lpng16 -lm

fuzz-image: build/fuzz/fuzz_image build/tools/fuzz_image
	@mkdir -p $(FUZZ_IMAGE_WORK)/corpus $(FUZZ_IMAGE_WORK)/crashes
	@test -d $(FUZZ_IMAGE_WORK)/seeds || build/tools/fuzz_image --seeds $(FUZZ_IMAGE_WORK)/seeds
	build/fuzz/fuzz_image -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	  -max_len=65536 -print_final_stats=1 -artifact_prefix=$(FUZZ_IMAGE_WORK)/crashes/ \
	  $(FUZZ_IMAGE_WORK)/corpus fuzz/corpus/image $(FUZZ_IMAGE_WORK)/seeds
FUZZ_TARGETS += fuzz-image

.PHONY: bench-image fuzz-image

# ---- the JPEG suites against other libjpegs (make test runs both)
# 1. Without libjpeg's jpegint.h (the planar decode's hook compiled out,
#    image/jpeg_planar.c's stubs): the image and common layers and the
#    corpus suites again, ASan + UBSan, every JPEG on the pixel path.
CFLAGS_nojpegint := $(filter-out -DTRAIN_JPEGINT=%,$(CFLAGS_asan)) -DTRAIN_JPEGINT=0
NOJPEGINT_TESTS := tests/test_jpeg_corpus.c tests/test_image_fuzz.c tests/support/helpers.c \
                   tests/support/images.c tests/support/jpeg_corpus.c
build/nojpegint/%.o: %.c build/nojpegint/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_nojpegint) -c $< -o $@
$(foreach l,image common,$(eval $(call lib_rule,nojpegint,$(l))))
build/nojpegint/tests/run-jpeg: $(patsubst %.c,build/nojpegint/%.o,$(NOJPEGINT_TESTS)) \
                                $(call libs_of,nojpegint,image common)
	$(CC) -o $@ $^ $(SAN) $(LIBS) -lcriterion -lz
TEST_EXTRA += build/nojpegint/tests/run-jpeg

# 2. libjpeg-turbo 3.x: the libjpeg.so.62 inside Pillow's manylinux wheel
#    (pinned; fetched from PyPI once into build/lj3), put before Debian's
#    2.1.5 with LD_LIBRARY_PATH (TurboJPEG stays 2.1.5: the region and
#    planar decodes, libjpeg's own API, are what meet 3.x).
LJ3_PILLOW := pillow==11.3.0
build/lj3/libjpeg.so.62:
	@mkdir -p build/lj3/whl
	@python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
	  --python-version 3.11 --platform manylinux_2_28_x86_64 $(LJ3_PILLOW) -d build/lj3/whl && \
	  cd build/lj3 && unzip -o -q whl/pillow-*.whl 'pillow.libs/libjpeg-*' && \
	  cp pillow.libs/libjpeg-*.so* libjpeg.so.62.tmp && mv libjpeg.so.62.tmp libjpeg.so.62 || \
	  echo "build/lj3: could not fetch $(LJ3_PILLOW) from PyPI: the libjpeg-turbo 3.x run is skipped" >&2

.PHONY: test-jpeg-variants
test-jpeg-variants: build/nojpegint/tests/run-jpeg
	@-$(MAKE) --no-print-directory build/lj3/libjpeg.so.62
	@echo "== build/nojpegint/tests/run-jpeg (the planar hook compiled out)"
	@tests/run-suite build/nojpegint/tests/run-jpeg --jobs 2 \
	  --filter 'jpeg_corpus/@(libjpeg*|the_*|fast*|a_*)'
	@if [ -f build/lj3/libjpeg.so.62 ]; then \
	  echo "== build/asan/tests/run against libjpeg-turbo $$(strings build/lj3/libjpeg.so.62 | \
	    sed -n 's/^libjpeg-turbo version \([^ ]*\).*/\1/p' | head -1) (build/lj3, $(LJ3_PILLOW)'s)"; \
	  LD_LIBRARY_PATH=$(CURDIR)/build/lj3 tests/run-suite build/asan/tests/run --jobs 2 \
	    --filter '@(jpeg_corpus/@(libjpeg*|the_*|fast*|a_*)|planar/*)'; fi
