# mk/cuda.mk — the GPU backend's test binaries (see docs/GPU.md).
#
# The top-level Makefile builds cuda/*.c and cuda/*.cu into build/cuda/train.
# Here, when the CUDA toolkit is found:
#
#   build/asan/tests/run-fakecuda  the REAL backend code (cuda/*.c, and
#       cuda/kernels.cu compiled by g++ against the serial launch emulation)
#       on the test-only fake runtime (tests/fakecuda), under ASan + UBSan,
#       with the shared GPU tests (tests/gpu: ops against reference loops
#       and against the CPU backend twin, 20 training steps against the CPU,
#       the staging of app/stage.c, the whole program end to end) and the
#       fake's own tests.
#   build/fakecuda/train  the whole program (every source of build/asan/train
#       plus cuda/*) on the fake runtime, ASan + UBSan: it picks the fake GPU
#       ("Fake GPU (tests/fakecuda)") and trains on it; the end-to-end tests
#       in tests/gpu/test_train_e2e.c run it as a real process.
#   build/cuda/tests/run-gpu  the shared GPU tests against the real CUDA
#       libraries and build/cuda/train; every test that needs a device skips
#       ("no CUDA device") where there is none.
#   build/fakecuda/libfakenvml.so  a stand-in for libnvidia-ml.so.1
#       (TRAIN_NVML_LIB points train at it): scripted, or (FAKE_NVML=timeline)
#       reading the fake runtime's time line through the fake binaries'
#       exported fake_timeline_* symbols.
#
# The fake binaries link the real libcudnn for its descriptor functions
# only; a check after linking fails the build if any other CUDA, cuBLAS or
# cuDNN symbol would reach a real library (the fake must have it).
#
# Both suites are appended to TEST_SUITES, so `make test` runs them.

ifeq ($(CUDA_FOUND),1)

FAKE_DIR  := build/fakecuda
FAKE_NVML := $(CURDIR)/$(FAKE_DIR)/libfakenvml.so
CFLAGS_fakecuda := $(CFLAGS_asan) -DTRAIN_CUDA=1 -DTRAIN_FAKECUDA=1 -isystem $(CUDA_HOME)/include $(CUDNN_CFLAGS) \
                   -DFAKE_NVML_LIB='"$(FAKE_NVML)"'
CXXFLAGS_fakecuda := -std=c++17 $(WARN) -MMD -MP -I. -O1 -g $(SAN) -DKERNEL_EMULATION \
                     -isystem $(CUDA_HOME)/include $(CUDNN_CFLAGS)
# the top-level flags stamp (build/fakecuda/.flags) records CFLAGS_ and
# LDFLAGS_ of the variant: the C++ flags ride along so changing them rebuilds
LDFLAGS_fakecuda := $(CXXFLAGS_fakecuda)

# tests/fakecuda, one folder per part, each picked whole:
#   runtime/  the fake runtime itself (what both fake binaries link)
#   suite/    the fake's own tests and their helper (run-fakecuda only)
#   train/    what only the train binary links (the at-exit report)
#   nvml/     libfakenvml.so's source (a library of its own)
FAKE_LIB_SRC   := $(sort $(wildcard tests/fakecuda/runtime/*.c))
FAKE_TEST_SRC  := $(sort $(wildcard tests/fakecuda/suite/*.c))
FAKE_TRAIN_SRC := $(sort $(wildcard tests/fakecuda/train/*.c))
FAKE_NVML_SRC  := $(sort $(wildcard tests/fakecuda/nvml/*.c))

# the GPU tests: their own files, the shared test support, the fake's tests
GPU_TEST_SRC := $(sort $(wildcard tests/gpu/*.c)) $(TEST_SUPPORT_SRC) tests/support/gpu_test.c
GPU_LIBS     := $(LIBS) -lz -lcriterion -lstdc++
# the train binary must not link Criterion: its library constructor takes a
# process started from a Criterion test (BXFI_MAP set) for one of its workers
FAKE_TRAIN_LIBS := $(LIBS) -lstdc++

# the fakecuda variant's libraries: every layer compiled against the fake,
# cuda/'s kernels through the serial emulation
$(foreach l,$(filter-out cuda,$(LAYERS)),$(eval $(call lib_rule,fakecuda,$(l))))
$(eval $(call lib_rule,fakecuda,cuda,$(patsubst %.cu,$(FAKE_DIR)/%.emu.o,$(CUDA_CU))))

FAKE_SUITE_OBJS := $(patsubst %.c,$(FAKE_DIR)/%.o,$(FAKE_LIB_SRC) $(FAKE_TEST_SRC) $(GPU_TEST_SRC)) \
                   $(call variant_libs,fakecuda)
FAKE_TRAIN_OBJS := $(patsubst %.c,$(FAKE_DIR)/%.o,main.c $(FAKE_LIB_SRC) $(FAKE_TRAIN_SRC)) \
                   $(call variant_libs,fakecuda)

$(FAKE_DIR)/%.o: %.c $(FAKE_DIR)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_fakecuda) -c $< -o $@

# the fake's compute loops (naive convolution and GEMM in double) carry the
# training tests' arithmetic: optimised, still under the sanitizers
$(FAKE_DIR)/tests/fakecuda/runtime/cudnn_ops.o $(FAKE_DIR)/tests/fakecuda/runtime/cublas.o: CFLAGS_fakecuda += -O2

# the kernels as plain C++ over the serial emulation (tests/fakecuda/runtime/emu.h,
# included here: production code never names it)
$(FAKE_DIR)/%.emu.o: %.cu $(FAKE_DIR)/.flags
	@mkdir -p $(dir $@)
	g++ -x c++ $(CXXFLAGS_fakecuda) -include tests/fakecuda/runtime/emu.h -c $< -o $@

# (its functions are libnvidia-ml's entry points, found by dlsym, with no
# header of ours to declare them: hence no -Wmissing-prototypes)
$(FAKE_DIR)/libfakenvml.so: $(FAKE_NVML_SRC) $(FAKE_DIR)/.flags
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) $(WARN_C) -Wno-missing-prototypes -O1 -g -fPIC -shared -o $@ $< -ldl -lm

# link $@ from the objects $(1) and libraries $(2), then refuse CUDA symbols
# the fake lacks; the time line's fake_timeline_* are exported for
# libfakenvml.so to find with dlsym (FAKE_NVML=timeline)
define fake_link
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(1) $(SAN) -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 $(CUDNN_LDFLAGS) -lcudnn \
	  '-Wl,--export-dynamic-symbol=fake_timeline_*' $(2)
	@bad=$$(nm -D --undefined-only $@ | awk '{print $$NF}' | sed 's/@.*//' | \
	  grep -E '^(cuda|cudnn|cublas|nccl)' | grep -vxF -f tests/fakecuda/real-symbols.txt); \
	if [ -n "$$bad" ]; then \
	  echo "$@: these calls would reach the real CUDA libraries; the fake must" \
	       "implement them (or, for descriptor functions, list them in" \
	       "tests/fakecuda/real-symbols.txt):" $$bad >&2; rm -f $@; exit 1; fi
endef

build/asan/tests/run-fakecuda: $(FAKE_SUITE_OBJS) tests/fakecuda/real-symbols.txt
	$(call fake_link,$(FAKE_SUITE_OBJS),$(GPU_LIBS))

$(FAKE_DIR)/train: $(FAKE_TRAIN_OBJS) tests/fakecuda/real-symbols.txt
	$(call fake_link,$(FAKE_TRAIN_OBJS),$(FAKE_TRAIN_LIBS))
	$(call check_layers,fakecuda)

GPU_SUITE_OBJS := $(patsubst %.c,build/cuda/%.o,$(GPU_TEST_SRC)) $(call variant_libs,cuda)

build/cuda/tests/run-gpu: $(GPU_SUITE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(CUDA_LIBS) $(GPU_LIBS)

# tools/gpu-check's probe of what the fake cannot model (cudart static: it
# runs wherever a driver is, with nothing beside it)
build/tools/cuda_probe: tools/cuda_probe.cu build/cuda/.nvflags
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -o $@ $<

# CUPTI's activity records on a card (docs/GPU.md, issue 27); libcupti
# from the toolkit, or the nvidia-cuda-cupti wheel beside cudart
build/tools/cupti_probe: tools/cupti_probe.cu build/cuda/.nvflags
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -o $@ $< -lcupti

# page-locking facts: RLIMIT_MEMLOCK as root and not, byte ranges vs pages
# (docs/GPU.md, "Page-locked memory")
build/tools/pin_probe: tools/pin_probe.cu build/cuda/.nvflags
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -o $@ $<
TEST_EXTRA  += build/tools/pin_probe

TEST_EXTRA  += build/tools/cuda_probe build/tools/cupti_probe build/asan/tests/run-fakecuda $(FAKE_DIR)/train $(FAKE_DIR)/libfakenvml.so \
               build/cuda/tests/run-gpu
TEST_SUITES += build/asan/tests/run-fakecuda build/cuda/tests/run-gpu

endif
