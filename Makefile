# train — build, test, demo, bench.
#
#   make            build ./train (CUDA when the toolkit and cuDNN are found)
#   make CUDA=0     force a CPU-only build;  make CUDA=1 insist on CUDA
#   make MPI=0      build without MPI (one process only);  make MPI=1 insist on it
#   make deps       install the Debian packages the project needs (and test-only venvs: DEPS_EXTRA)
#   make test       deps + every build variant + the Criterion suite under
#                   AddressSanitizer and UndefinedBehaviorSanitizer
#   make demo       deps + build + real Fashion-MNIST + a short training run
#   make bench      the benchmarks (docs/BENCH-*.md; README.md, "Speed")
#   make mutate     mutation testing of the suites (mk/mutate.mk, docs/TESTING.md)
#   make format     lay the sources out as .clang-format says (make test checks)
#   make lint       cppcheck, clang-tidy, gcc -fanalyzer (make test runs it)
#   make coverage   line coverage by the main suite, gcovr's report (mk/coverage.mk)
#
# Objects live in build/<variant>/ (cpu, cuda, asan); each variant keeps a
# stamp of its flags so changing them rebuilds, and ./train is relinked when
# the chosen variant changes.

CC        := gcc
# ccache, where installed (make deps installs it): the variants (cpu,
# cuda, the bundle's MPI-less copy) share most objects' preprocessed text,
# so a clean `make test` compiles each about once. Paths are made relative
# to the checkout so the bundle's copy of the sources (build/bundle/src)
# hits the same entries; `make CCACHE=` builds without it.
CCACHE ?= $(shell command -v ccache 2>/dev/null)
ifneq ($(CCACHE),)
CC := $(CCACHE) gcc
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
export CCACHE_SLOPPINESS := time_macros
endif
CUDA_HOME ?= /usr/local/cuda
NVCC      := $(CUDA_HOME)/bin/nvcc

comma := ,

# ---------------------------------------------------------------- CUDA detection
# The toolkit under CUDA_HOME; cuDNN wherever NVIDIA puts it: CUDNN_HOME if
# set, the toolkit's own folders (tarball installs), the system folders
# (NVIDIA's Debian/Ubuntu and RHEL packages) or a pip wheel (nvidia-cudnn-cu*,
# found through python3). cuDNN 9 or newer; the reason is printed when the
# build goes CPU-only.
CUDNN_HOME ?=
CUDNN_PY_DIR := $(shell python3 -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))'                         2>/dev/null)
CUDNN_CANDIDATES := $(if $(CUDNN_HOME),$(CUDNN_HOME)/include) $(CUDA_HOME)/include /usr/include                     /usr/include/x86_64-linux-gnu /usr/include/aarch64-linux-gnu                     $(if $(CUDNN_PY_DIR),$(CUDNN_PY_DIR)/include)
CUDNN_INC := $(firstword $(foreach d,$(CUDNN_CANDIDATES),$(if $(wildcard $(d)/cudnn.h),$(d))))
CUDNN_MAJOR := $(if $(CUDNN_INC),$(shell awk '/define CUDNN_MAJOR/{print $$3; exit}'                     $(CUDNN_INC)/cudnn_version.h 2>/dev/null))
CUDNN_LIBDIR := $(firstword $(foreach d,$(patsubst %/include,%/lib64,$(CUDNN_INC))                     $(patsubst %/include,%/lib,$(CUDNN_INC)) /usr/lib/x86_64-linux-gnu                     /usr/lib/aarch64-linux-gnu,$(if $(wildcard $(d)/libcudnn.so*),$(d))))
CUDA_WHY :=
ifeq ($(wildcard $(NVCC)),)
CUDA_WHY := no nvcc at $(NVCC) (set CUDA_HOME)
else ifeq ($(wildcard $(CUDA_HOME)/include/cublas_v2.h),)
CUDA_WHY := no cuBLAS header under $(CUDA_HOME)/include
else ifeq ($(CUDNN_INC),)
CUDA_WHY := no cudnn.h in $(CUDNN_CANDIDATES) (set CUDNN_HOME)
else ifeq ($(shell test "0$(CUDNN_MAJOR)" -ge 9 && echo ok),)
CUDA_WHY := cuDNN $(if $(CUDNN_MAJOR),$(CUDNN_MAJOR),of unknown version) in $(CUDNN_INC) is too old (need 9 or newer)
else ifeq ($(CUDNN_LIBDIR),)
CUDA_WHY := no libcudnn.so next to $(CUDNN_INC) or in the system library folders (set CUDNN_HOME)
endif
CUDA_FOUND := $(if $(CUDA_WHY),,1)
ifeq ($(CUDA_FOUND),1)
CUDA_VER  := $(shell $(NVCC) --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
CUDNN_VER := $(shell awk '/define CUDNN_MAJOR/{M=$$3} /define CUDNN_MINOR/{m=$$3} END{print M"."m}' \
                     $(CUDNN_INC)/cudnn_version.h 2>/dev/null)
endif
ifeq ($(origin CUDA),undefined)
CUDA := $(if $(CUDA_FOUND),1,0)
endif
ifeq ($(CUDA),1)
ifneq ($(CUDA_FOUND),1)
$(error CUDA=1 but $(CUDA_WHY); build with CUDA=0)
endif
endif
ifeq ($(MAKELEVEL)$(QUIET),0)
ifeq ($(CUDA_FOUND),1)
$(info CUDA: found $(CUDA_VER), cuDNN $(CUDNN_VER)$(if $(filter 0,$(CUDA)), (not used: CUDA=0)))
else
$(info CUDA: not found, CPU-only build ($(CUDA_WHY)))
endif
endif
# where the compiler and the linker look for cuDNN, when not in the toolkit
CUDNN_CFLAGS := $(if $(filter-out $(CUDA_HOME)/include,$(CUDNN_INC)),-isystem $(CUDNN_INC))
CUDNN_LDFLAGS := $(if $(filter-out $(CUDA_HOME)/lib64,$(CUDNN_LIBDIR)),-L$(CUDNN_LIBDIR) -Wl$(comma)-rpath$(comma)$(CUDNN_LIBDIR))

# ---------------------------------------------------------------- libjpeg's internals
# The planar JPEG decode hooks a method of libjpeg's private jpegint.h
# (image/jpeg_planar.c), which Debian's libjpeg62-turbo-dev installs and
# libjpeg-turbo's own builds do not; without it (or with `make JPEGINT=0`)
# every JPEG takes the pixel path.
JPEGINT_FOUND := $(shell printf '\043include <stdio.h>\n\043include <jpeglib.h>\n\043include <jpegint.h>\n' | \
                   $(CC) -E -x c - >/dev/null 2>&1 && echo 1)
JPEGINT ?= $(if $(JPEGINT_FOUND),1,0)

# ---------------------------------------------------------------- flags
WARN     := -Wall -Wextra -Werror
# C only (g++ compiles the fake's emulated kernels with WARN): git's
# developer warnings; -Wshadow caught a loop's `first` hiding a parameter
WARN_C   := -Wshadow -Wmissing-prototypes -Wstrict-prototypes -Wvla -Wold-style-definition
BASE_CFLAGS := -std=c11 $(WARN) $(WARN_C) -MMD -MP -I. -DTRAIN_JPEGINT=$(JPEGINT)
# loader/remote.c and loader/sigv4.c (shards behind URLs, S3 signatures)
NET_LIBS := -lcurl -lcrypto
LIBS     := -lturbojpeg -ljpeg -lwebp -lpng16 -lstb -lcsv -lopenblas $(NET_LIBS) -lpthread -ldl -lm
# nvcc 13 supports compute_75 and newer; list targets explicitly, never native
GENCODE  := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
            -gencode arch=compute_90,code=compute_90
# nvcc's warnings are errors under `make test` and CI (NV_WERROR=1), not in
# a user's plain `make`: a newer nvcc's new warning must not break a build.
NV_WERROR ?= 0
NVFLAGS  := -std=c++17 -O2 $(GENCODE) $(if $(filter 1,$(NV_WERROR)),--Werror all-warnings) \
            -Xcompiler -Wall,-Wextra$(if $(filter 1,$(NV_WERROR)),$(comma)-Werror) -I. $(CUDNN_CFLAGS)
# no -lcublas: cuda/cublas_dl.c opens it when the GPU backend starts (linking
# it costs every process 0.06 s and ~200 MB of libcublasLt's initialisers)
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 $(CUDNN_LDFLAGS) -lcudnn -lcudart

SAN      := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

# ---------------------------------------------------------------- sources
# One folder per part, one static library per folder and variant, linked
# top to bottom: a call from a lower folder into a higher one (image/ into
# loader/, nn/ into cpu/ ...) finds no definition and fails the link. What
# each folder holds: the layout table of docs/DESIGN.md, the only one;
# tools/check-layout (make lint) fails when its layer order is not this.
LAYERS     := app comm cuda cpu nn loader image common
layer_src   = $(sort $(wildcard $(1)/*.c))
# the empty backend registry of a CPU-only build (nn/provider.h): the CUDA
# variants link cuda/provider.c instead
GPU_STUB_SRC := nn/provider_none.c
# the sources of layer $(2) in variant $(1)
variant_src = $(if $(filter cuda fakecuda,$(1)),$(filter-out $(GPU_STUB_SRC),$(call layer_src,$(2))),\
                $(call layer_src,$(2)))
CUDA_CSRC  := $(call layer_src,cuda)
CUDA_CU    := $(sort $(wildcard cuda/*.cu))
LIB_SRC    := $(foreach l,$(filter-out cuda,$(LAYERS)),$(call layer_src,$(l)))
TEST_SRC   := $(sort $(wildcard tests/*.c))
# test support shared by the suites (tests/support/gpu_test.c needs CUDA and
# is linked by the GPU suites only, in mk/cuda.mk)
TEST_SUPPORT_SRC := $(filter-out tests/support/gpu_test.c,$(sort $(wildcard tests/support/*.c)))
TOOL_SRC   := $(sort $(wildcard tools/*.c))

VARIANT := $(if $(filter 1,$(CUDA)),cuda,cpu)
# make test builds with one job per core
NPROC := $(shell nproc 2>/dev/null || echo 2)

# the layers of variant $(1) (cuda/ in the CUDA variants only) and their
# libraries, in link order
variant_layers = $(if $(filter cuda fakecuda,$(1)),$(LAYERS),$(filter-out cuda,$(LAYERS)))
variant_libs = $(foreach l,$(call variant_layers,$(1)),build/$(1)/lib$(l).a)
# The link order fails a wrong-way call only when nothing else pulled the
# symbol in first; tools/check-layers checks every library's undefined
# symbols against the layers above it, after each link of ./train;
# tools/check-includes keeps each folder's private headers in it.
check_layers = $(call check_layers_of,$(1),$(call variant_layers,$(1)))
check_layers_of = @tools/check-includes && tools/check-layers build/$(1) $(2)
# the libraries $(2) (names, top to bottom) of variant $(1)
libs_of = $(foreach l,$(2),build/$(1)/lib$(l).a)

CFLAGS_cpu  := $(BASE_CFLAGS) -O2 -g
CFLAGS_cuda := $(BASE_CFLAGS) -O2 -g -DTRAIN_CUDA=1 -isystem $(CUDA_HOME)/include $(CUDNN_CFLAGS)
# (the sanitized builds check the code's ASSERTs too: common/assert.h)
CFLAGS_asan := $(BASE_CFLAGS) -O1 -g $(SAN) -DTRAIN_ASSERTS=1
LDFLAGS_cpu  :=
LDFLAGS_cuda := $(CUDA_LIBS)
LDFLAGS_asan := $(SAN)

.PHONY: all deps test test-build demo bench bench-deps fuzz clean FORCE tools format format-check

all: train

# ./train is the selected variant's binary; relink when the variant changes
train: build/$(VARIANT)/train build/.variant
	@cp build/$(VARIANT)/train $@.tmp && mv -f $@.tmp $@

build/.variant: FORCE
	@mkdir -p build; echo $(VARIANT) | cmp -s - $@ || echo $(VARIANT) > $@

# flags stamps: objects depend on them, the file changes only with the flags
build/%/.flags: FORCE
	@mkdir -p $(dir $@); echo '$(CFLAGS_$*) $(LDFLAGS_$*)' | cmp -s - $@ || \
	  echo '$(CFLAGS_$*) $(LDFLAGS_$*)' > $@
build/%/.nvflags: FORCE
	@mkdir -p $(dir $@); echo '$(NVFLAGS)' | cmp -s - $@ || echo '$(NVFLAGS)' > $@

build/cpu/%.o: %.c build/cpu/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_cpu) -c $< -o $@
build/cuda/%.o: %.c build/cuda/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_cuda) -c $< -o $@
build/cuda/%.o: %.cu build/cuda/.nvflags
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -MMD -MP -c $< -o $@
build/asan/%.o: %.c build/asan/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_asan) -c $< -o $@

# The resampler's row loops vectorise at -O3 only (gcc 12's -O2 cost model
# refuses loops of unknown length): 13% less time per 350x400 -> 224x224
# resize, measured. Same code, so the asan build's -O1 stays.
build/cpu/image/resize.o: CFLAGS_cpu += -O3
build/cuda/image/resize.o: CFLAGS_cuda += -O3

# build/<variant>/lib<layer>.a from the layer's objects (the CUDA layer's
# kernels come from nvcc in the cuda variant, from mk/cuda.mk's emulation in
# the fakecuda variant)
define lib_rule
build/$(1)/lib$(2).a: $(patsubst %.c,build/$(1)/%.o,$(call variant_src,$(1),$(2))) $(3)
	@rm -f $$@; ar rcs $$@ $$^
endef
$(foreach v,cpu cuda asan,$(foreach l,$(filter-out cuda,$(LAYERS)),$(eval $(call lib_rule,$(v),$(l)))))
$(eval $(call lib_rule,cuda,cuda,$(patsubst %.cu,build/cuda/%.o,$(CUDA_CU))))

build/cpu/train: build/cpu/main.o $(call variant_libs,cpu)
	$(CC) -o $@ $^ $(LDFLAGS_cpu) $(LIBS)
	$(call check_layers,cpu)
build/cuda/train: build/cuda/main.o $(call variant_libs,cuda)
	$(CC) -o $@ $^ $(LDFLAGS_cuda) $(LIBS) -lstdc++
	$(call check_layers,cuda)
build/asan/train: build/asan/main.o $(call variant_libs,asan)
	$(CC) -o $@ $^ $(LDFLAGS_asan) $(LIBS)
	$(call check_layers,asan)

# ---------------------------------------------------------------- version
# The git revision --json's run record names; build/version.h is rewritten
# only when it changes, so only app/run_header.o rebuilds.
GIT_REV := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
build/version.h: FORCE
	@mkdir -p build; echo '#define TRAIN_REVISION "$(GIT_REV)"' | cmp -s - $@ || \
	  echo '#define TRAIN_REVISION "$(GIT_REV)"' > $@
$(foreach v,cpu cuda asan fakecuda pic,build/$(v)/app/run_header.o): build/version.h

# ---------------------------------------------------------------- fragments
# Each area adds its own benchmark, fuzz and helper rules in mk/<area>.mk and
# appends to BENCH_TARGETS / FUZZ_TARGETS / TEST_EXTRA (prerequisites of
# test-build) / TEST_SUITES (further Criterion binaries `make test` runs after
# the main suite) / DEPS_EXTRA (what `make deps` makes once the Debian
# packages are in: test-only venvs), so areas do not edit each other's rules.
BENCH_TARGETS :=
FUZZ_TARGETS  :=
TEST_EXTRA    :=
TEST_SUITES   :=
DEPS_EXTRA    :=
include $(sort $(wildcard mk/*.mk))

bench: bench-deps
	@$(MAKE) --no-print-directory $(BENCH_TARGETS)
fuzz:
	$(call apt_install,$(FUZZ_PKGS))
	@$(MAKE) --no-print-directory $(FUZZ_TARGETS)

# ---------------------------------------------------------------- tests
TEST_OBJS := $(patsubst %.c,build/asan/%.o,$(TEST_SRC) $(TEST_SUPPORT_SRC))
build/asan/tests/run: $(TEST_OBJS) $(call variant_libs,asan)
	$(CC) -o $@ $^ $(LDFLAGS_asan) $(LIBS) -lcriterion -lz

# tools: dataset generators and benchmark helpers (optimised, no sanitizers)
# (+ the image fuzz driver, whose source is in fuzz/ with its harness)
TOOLS := $(patsubst tools/%.c,build/tools/%,$(TOOL_SRC)) build/tools/fuzz_image
tools: $(TOOLS)
# (those that need more than common/ have their own rule in mk/<area>.mk)
TOOL_CFLAGS := $(BASE_CFLAGS) -O2
build/tools/%: tools/%.c build/cpu/libcommon.a
	@mkdir -p build/tools
	$(CC) $(TOOL_CFLAGS) -o $@ $(filter %.c %.a,$^) $(LIBS) -lz

test-build: build/cpu/train $(if $(CUDA_FOUND),build/cuda/train) build/asan/train \
            build/asan/tests/run $(TOOLS) $(TEST_EXTRA)

# The suite runs in the asan build; the tests run the asan ./train too.
# The main suite runs two tests more than there are cores: much of its
# time is spent waiting (ranks starting, rate-limited links and servers,
# timeouts, sleeping workers), so with 2 cores --jobs 3 took 283 s where
# --jobs 2 took 356 (414 tests, all passing both ways), and with 460 tests
# --jobs 4 takes 286 s where --jobs 3 took 299 (all passing, twice); the
# fake-GPU suite keeps --jobs 2 (its overlap checks count device stalls,
# which more jobs' load adds).
TEST_JOBS_MAIN := $(shell echo $$(( $(NPROC) + 2 )))
test: deps
	@$(MAKE) --no-print-directory format-check
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory -j$(NPROC) test-build NV_WERROR=1
	@cp build/$(VARIANT)/train train.tmp && mv -f train.tmp train
	@$(MAKE) --no-print-directory bundle-test-dir
	@tools/wheel > build/wheel.path
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	TRAIN_BUNDLE_DIR=$(CURDIR)/$(BUNDLE_TEST_DIR)/current \
	TRAIN_BUNDLE_TARBALL=$$(cat $(BUNDLE_TEST_DIR)/tarball) TRAIN_WHEEL=$$(tail -1 build/wheel.path) \
	TRAIN_BIN=$(CURDIR)/build/asan/train TRAIN_TOOLS=$(CURDIR)/build/tools TRAIN_FUZZ_SECONDS=8 \
	TRAIN_TEST_QUICK=1 \
	TRAIN_ROOT=$(CURDIR) sh -c 'set -e; for s in build/asan/tests/run $(TEST_SUITES); do \
	  echo "== $$s"; j=2; [ $$s = build/asan/tests/run ] && j=$(TEST_JOBS_MAIN); \
	  tests/run-suite $$s --jobs $$j $(TESTFLAGS); done'
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	TRAIN_BIN=$(CURDIR)/build/asan/train TRAIN_TOOLS=$(CURDIR)/build/tools TRAIN_ROOT=$(CURDIR) \
	$(MAKE) --no-print-directory test-jpeg-variants
	@echo "== tests/python (pytest)"
	@$(MAKE) --no-print-directory test-python

# The tests `make test` leaves out to stay within its 10 minutes on 2
# cores (TRAIN_TEST_QUICK=1 skips them, saying so): run them here.
SLOW_TESTS := nn_fashion/resnet8_learns_from_3k_images
.PHONY: test-slow
test-slow: test-build
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 TRAIN_BIN=$(CURDIR)/build/asan/train \
	TRAIN_TOOLS=$(CURDIR)/build/tools TRAIN_ROOT=$(CURDIR) \
	  sh -c 'set -e; for t in $(SLOW_TESTS); do tests/run-suite build/asan/tests/run --filter "$$t"; done'

# ---------------------------------------------------------------- lint
# Three passes, each failing `make lint` (and so `make test`) on a finding:
# 1. cppcheck (Debian) over the program's C, the tools' and the tests'
#    support code, warnings and portability; a finding judged wrong is
#    suppressed on its line with `// cppcheck-suppress ID` and the reason.
# 2. clang-tidy (Debian's 14) over the program's C with the checks of
#    .clang-tidy (bug finders, not style; why each left-out check is left
#    out is written there), each file compiled with its variant's flags
#    (cuda/ with the CUDA headers, python/ with Python's). A finding judged
#    wrong: `// NOLINT(check): reason` on its line, or TIDY_OFF_<file>
#    below in the folders being refactored elsewhere.
# 3. gcc -fanalyzer (path-sensitive: NULL, leaks, use after free, double
#    fclose) over the parsers of untrusted bytes: the CSV index, the tar
#    shards and their index, the checkpoint reader, the preload cache's
#    header, the image header and EXIF parsers. Too slow (and too noisy) for every file.
# About 30 s on 2 cores in all. Not linted by 2 and 3: the tests, tools/.
# First, tools/check-layout: docs/DESIGN.md's folder table against the
# checkout's folders and LAYERS.
LINT_DIRS := common loader image nn cpu comm cuda app python main.c tools fuzz tests/support
TIDY_SRC  := $(foreach l,$(if $(CUDA_FOUND),$(LAYERS),$(filter-out cuda,$(LAYERS))),$(call layer_src,$(l))) \
             $(sort $(wildcard python/*.c)) main.c
ANALYZE_SRC := loader/dataset.c loader/dataset_shards.c loader/tar.c loader/cache.c \
               nn/checkpoint.c image/check.c image/exif.c image/image.c image/png.c \
               image/jpeg.c image/webp.c
lint_flags = $(filter-out -MMD -MP -g -O% -Werror,$(1))
TIDY_FLAGS_cuda   := $(call lint_flags,$(CFLAGS_cuda))
TIDY_FLAGS_python := $(call lint_flags,$(CFLAGS_cpu)) -isystem $(PY_INC)
TIDY_FLAGS        := $(call lint_flags,$(CFLAGS_cpu))
tidy_flags = $(or $(TIDY_FLAGS_$(firstword $(subst /, ,$(1)))),$(TIDY_FLAGS))
# Checks off for one file, until its line can carry a NOLINT (loader/ and
# python/ are being refactored on another branch):
#   dataset_folder.c join(): the memcpy of the folder name is terminated
#     by the next line's '/' and the name's own NUL; the readlink buffer's
#     PATH_MAX > 4096 ? 4096 : PATH_MAX has equal arms where PATH_MAX is 4096
#   trainloader.c raise_status(): LOADER_BAD_SAMPLE and RUN_BAD_INPUT are
#     one value under two names, both named on purpose
TIDY_OFF_loader/dataset_folder.c := bugprone-not-null-terminated-result,bugprone-branch-clone
TIDY_OFF_python/trainloader.c    := misc-redundant-expression
# -fanalyzer's judged-wrong findings, per file:
#   cache.c guarded(): a job has either sum (cache_hash) or dst
#     (cache_copy) set, never neither, which the analyzer cannot see
ANALYZE_OFF_loader/cache.c := -Wno-analyzer-null-argument

.PHONY: lint lint-cppcheck lint-tidy lint-analyzer
lint:
	@tools/check-layout
	@$(MAKE) --no-print-directory lint-cppcheck
	@$(MAKE) --no-print-directory -j$(NPROC) lint-tidy lint-analyzer
lint-cppcheck:
	@cppcheck --quiet --enable=warning,portability --std=c11 --inline-suppr -I. \
	  -DTRAIN_JPEGINT=$(JPEGINT) --error-exitcode=1 -j$(NPROC) $(LINT_DIRS) && \
	  echo "lint: cppcheck finds nothing in $(LINT_DIRS)"
# one stamp per file, remade on every run (FORCE): make -j runs them in
# parallel, and a failing file names itself
lint-tidy: $(patsubst %.c,build/lint/tidy/%.ok,$(TIDY_SRC))
	@echo "lint: clang-tidy (.clang-tidy) finds nothing in $(words $^) files"
build/lint/tidy/%.ok: %.c .clang-tidy FORCE
	@mkdir -p $(dir $@); rm -f $@
	@clang-tidy --quiet $(if $(TIDY_OFF_$<),--checks=-$(subst $(comma),$(comma)-,$(TIDY_OFF_$<))) \
	  $< -- $(call tidy_flags,$<) >$@.log 2>&1 || { cat $@.log >&2; exit 1; }
	@touch $@
# the generated header run_header.c includes (a fresh clone has none yet)
build/lint/tidy/app/run_header.ok: build/version.h
lint-analyzer: $(patsubst %.c,build/lint/analyzer/%.ok,$(ANALYZE_SRC))
	@echo "lint: gcc -fanalyzer finds nothing in $(ANALYZE_SRC)"
build/lint/analyzer/%.ok: %.c FORCE
	@mkdir -p $(dir $@); rm -f $@
	@$(filter-out $(CCACHE),$(CC)) $(filter-out -MMD -MP -g -O%,$(CFLAGS_cpu)) -O0 -fanalyzer \
	  $(ANALYZE_OFF_$<) -c $< -o /dev/null
	@touch $@

# compile_commands.json for editors and clang-tidy: every C file of the
# cpu variant and the sanitized tests, compiled again under bear (Debian)
.PHONY: compile-commands
compile-commands:
	$(call apt_install,bear)
	bear --output compile_commands.json -- $(MAKE) --no-print-directory -B -j$(NPROC) CCACHE= \
	  build/cpu/train build/asan/tests/run

# ---------------------------------------------------------------- format
# .clang-format pins the layout the code has (4 spaces, 100 columns, braces
# of functions on their own line); `make format` applies it, `make
# format-check` (part of `make test`) fails on any difference.
FORMAT_SRC = $(shell git ls-files '*.c' '*.h' '*.cu' 2>/dev/null || \
               find . -path ./build -prune -o \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) -print)
format:
	clang-format -i $(FORMAT_SRC)
format-check:
	@clang-format --dry-run --Werror $(FORMAT_SRC) || \
	  { echo "format-check: run 'make format' (clang-format, .clang-format)" >&2; exit 1; }
	@echo "format-check: $(words $(FORMAT_SRC)) files as .clang-format lays them out"

# ---------------------------------------------------------------- dependencies
DEB_PKGS := build-essential pkg-config zlib1g-dev libcurl4-openssl-dev libssl-dev libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev libstb-dev libcsv-dev \
            libopenblas-dev libcriterion-dev gnuplot-nox dataset-fashion-mnist webp libwebp-dev \
            clang-format clang-tidy cppcheck libopenmpi-dev openmpi-bin \
            python3-dev python3-pytest python3-numpy python3-torch libdlpack-dev \
            patchelf xz-utils busybox-static python3-venv python3-pil valgrind ccache unzip procps \
            nginx curl openssl iproute2 util-linux
BENCH_PKGS := python3-torch python3-torchvision python3-pil hyperfine
FUZZ_PKGS := clang libclang-rt-dev

define apt_install
@missing=""; for p in $(1); do \
  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
done; \
if [ -z "$$missing" ]; then echo "deps: all installed"; else \
  SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
  echo "deps: installing$$missing"; \
  $$SUDO apt-get update -qq && \
  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
fi
endef

deps:
	$(call apt_install,$(DEB_PKGS))
	@$(if $(DEPS_EXTRA),$(MAKE) --no-print-directory $(DEPS_EXTRA))
bench-deps: deps
	$(call apt_install,$(BENCH_PKGS))

# ---------------------------------------------------------------- demo
DEMO_N ?= 12000
demo: deps
	@$(MAKE) --no-print-directory train tools
	tools/fashion-mnist --limit $(DEMO_N)
	./train --epochs 2 --channels auto --val data/fashion-mnist/test.csv data/fashion-mnist/train.csv

# ---------------------------------------------------------------- bundle
# one relocatable archive for machines without our packages (docs/BUNDLE.md)
.PHONY: bundle bundle-test-dir wheel
bundle: deps
	@tools/bundle
# trainloader as a manylinux wheel (docs/PYTHON.md); the packaging tools
# come from PyPI into build/wheel/venv
wheel: deps
	@tools/wheel
# the bundle unpacked for tests/test_bundle.c (make test)
BUNDLE_TEST_DIR := build/bundle-test
bundle-test-dir:
	@t=$$(tools/bundle | tail -1) && rm -rf $(BUNDLE_TEST_DIR) && mkdir -p $(BUNDLE_TEST_DIR) && \
	  tar -xJf "$$t" -C $(BUNDLE_TEST_DIR) && \
	  ln -sfn "$$(basename "$${t%.tar.xz}")" $(BUNDLE_TEST_DIR)/current && \
	  echo "$$t" > $(BUNDLE_TEST_DIR)/tarball

clean:
	rm -rf build train

FORCE:

.SECONDARY:

# (not the bundle's copy of the tree, build/bundle/src: its .d files name
# paths relative to that copy, which read here as this tree's targets)
-include $(shell find build -path build/bundle -prune -o -name '*.d' -print 2>/dev/null)
