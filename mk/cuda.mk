# mk/cuda.mk — the GPU backend's test binaries (see docs/GPU.md).
#
# The top-level Makefile builds cuda/*.c and cuda/*.cu into build/cuda/train.
# Here, when the CUDA toolkit is found:
#
#   build/asan/tests/run-fakecuda  the REAL backend code (cuda/*.c, and
#       cuda/kernels.cu compiled by g++ against the serial launch emulation)
#       on the test-only fake runtime (tests/fakecuda), under ASan + UBSan,
#       with the shared op tests (tests/gpu) and the fake's own tests.
#       Linked with the real libcudnn for its descriptor functions only; a
#       check after linking fails the build if any other CUDA, cuBLAS or
#       cuDNN symbol would reach a real library (the fake must have it).
#   build/cuda/tests/run-gpu  the shared op tests against the real CUDA
#       libraries; every test skips ("no CUDA device") where there is none.
#   build/fakecuda/libfakenvml.so  a scripted stand-in for libnvidia-ml.so.1
#       for the utilisation monitor's tests.
#
# Both suites are appended to TEST_SUITES, so `make test` runs them.

ifeq ($(CUDA_FOUND),1)

FAKE_DIR  := build/fakecuda
FAKE_NVML := $(CURDIR)/$(FAKE_DIR)/libfakenvml.so
CFLAGS_fakecuda := $(CFLAGS_asan) -DTRAIN_CUDA=1 -DTRAIN_FAKECUDA=1 -isystem $(CUDA_HOME)/include \
                   -DFAKE_NVML_LIB='"$(FAKE_NVML)"'
CXXFLAGS_fakecuda := -std=c++17 $(WARN) -MMD -MP -I. -O1 -g $(SAN) -DKERNEL_EMULATION \
                     -isystem $(CUDA_HOME)/include
# the top-level flags stamp (build/fakecuda/.flags) records CFLAGS_ and
# LDFLAGS_ of the variant: the C++ flags ride along so changing them rebuilds
LDFLAGS_fakecuda := $(CXXFLAGS_fakecuda)

FAKE_SUITE_SRC := $(CUDA_CSRC) nn/device.c nn/shapes.c common/util.c tests/helpers.c \
                  $(filter-out tests/fakecuda/fake_nvml.c,$(sort $(wildcard tests/fakecuda/*.c))) \
                  $(sort $(wildcard tests/gpu/*.c))
FAKE_SUITE_OBJS := $(patsubst %.c,$(FAKE_DIR)/%.o,$(FAKE_SUITE_SRC)) \
                   $(patsubst %.cu,$(FAKE_DIR)/%.emu.o,$(CUDA_CU))

$(FAKE_DIR)/%.o: %.c $(FAKE_DIR)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_fakecuda) -c $< -o $@

# the kernels as plain C++ over the serial emulation (cuda/emu.h)
$(FAKE_DIR)/%.emu.o: %.cu $(FAKE_DIR)/.flags
	@mkdir -p $(dir $@)
	g++ -x c++ $(CXXFLAGS_fakecuda) -c $< -o $@

$(FAKE_DIR)/libfakenvml.so: tests/fakecuda/fake_nvml.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) -O1 -g -fPIC -shared -o $@ $<

build/asan/tests/run-fakecuda: $(FAKE_SUITE_OBJS) tests/fakecuda/real-symbols.txt
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(FAKE_SUITE_OBJS) $(SAN) -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 \
	  -lcudnn -lcriterion -lstdc++ -lpthread -ldl -lm
	@bad=$$(nm -D --undefined-only $@ | awk '{print $$NF}' | sed 's/@.*//' | \
	  grep -E '^(cuda|cudnn|cublas)' | grep -vxF -f tests/fakecuda/real-symbols.txt); \
	if [ -n "$$bad" ]; then \
	  echo "run-fakecuda: these calls would reach the real CUDA libraries; the fake must" \
	       "implement them (or, for descriptor functions, list them in" \
	       "tests/fakecuda/real-symbols.txt):" $$bad >&2; rm -f $@; exit 1; fi

GPU_SUITE_OBJS := $(patsubst %.c,build/cuda/%.o,$(CUDA_CSRC) nn/device.c nn/shapes.c common/util.c \
                    tests/helpers.c $(sort $(wildcard tests/gpu/*.c))) \
                  $(patsubst %.cu,build/cuda/%.o,$(CUDA_CU))

build/cuda/tests/run-gpu: $(GPU_SUITE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(CUDA_LIBS) -lcriterion -lstdc++ -lpthread -ldl -lm

TEST_EXTRA  += build/asan/tests/run-fakecuda $(FAKE_DIR)/libfakenvml.so build/cuda/tests/run-gpu
TEST_SUITES += build/asan/tests/run-fakecuda build/cuda/tests/run-gpu

endif
