# mk/mpi.mk — MPI (data-parallel ranks) and NCCL (GPU gradients); see docs/DISTRIBUTED.md.
#
# MPI is found through its compiler wrapper (mpicc --showme): the wrapper
# knows the include and library folders of the installed MPI (Open MPI from
# Debian's libopenmpi-dev, or any other that ships mpicc). `make MPI=0`
# forces a build without it, `make MPI=1` insists. Without MPI, comm/
# compiles its one-process stand-in and a binary started by a launcher with
# more than one rank says it was built without MPI.
#
# With MPI and CUDA, the cuda variant links NCCL from the toolkit (nccl.h,
# libnccl.so) for the GPU gradients; the fakecuda variant links the fake
# NCCL of tests/fakecuda/runtime/nccl.c (implemented on MPI) instead.

MPICC ?= mpicc
MPI_SHOW_C := $(shell $(MPICC) --showme:compile 2>/dev/null)
MPI_SHOW_L := $(shell $(MPICC) --showme:link 2>/dev/null)
MPI_INC    := $(patsubst -I%,%,$(filter -I%,$(MPI_SHOW_C)))
MPI_H      := $(firstword $(foreach d,$(MPI_INC),$(wildcard $(d)/mpi.h)))
MPI_WHY :=
ifeq ($(MPI_SHOW_L),)
MPI_WHY := no $(MPICC) (make deps installs Open MPI: libopenmpi-dev openmpi-bin)
else ifeq ($(MPI_H),)
MPI_WHY := no mpi.h in $(MPI_INC)
endif
MPI_FOUND := $(if $(MPI_WHY),,1)
ifeq ($(MPI_FOUND),1)
MPI_VER := $(shell awk '/define OMPI_MAJOR_VERSION/{M=$$3} /define OMPI_MINOR_VERSION/{m=$$3} \
                        /define OMPI_RELEASE_VERSION/{r=$$3} END{if (M != "") print "Open MPI " M "." m "." r}' $(MPI_H))
MPI_VER := $(if $(MPI_VER),$(MPI_VER),$(shell $(MPICC) --showme:version 2>/dev/null | sed 's/^[^:]*: //'))
endif
ifeq ($(origin MPI),undefined)
MPI := $(if $(MPI_FOUND),1,0)
endif
ifeq ($(MPI),1)
ifneq ($(MPI_FOUND),1)
$(error MPI=1 but $(MPI_WHY); build with MPI=0)
endif
endif
ifeq ($(MAKELEVEL)$(QUIET),0)
ifeq ($(MPI_FOUND),1)
$(info MPI: found $(MPI_VER)$(if $(filter 0,$(MPI)), (not used: MPI=0)))
else
$(info MPI: not found, one process only ($(MPI_WHY)))
endif
endif

ifeq ($(MPI),1)
# -isystem: MPI's headers are not ours to warn about
MPI_CFLAGS := -DTRAIN_MPI=1 $(patsubst -I%,-isystem %,$(filter -I%,$(MPI_SHOW_C)))
MPI_LIBS   := $(MPI_SHOW_L) $(foreach d,$(patsubst -L%,%,$(filter -L%,$(MPI_SHOW_L))),-Wl$(comma)-rpath$(comma)$(d))
CFLAGS_cpu  += $(MPI_CFLAGS)
CFLAGS_cuda += $(MPI_CFLAGS)
CFLAGS_asan += $(MPI_CFLAGS)
LDFLAGS_cpu  += $(MPI_LIBS)
LDFLAGS_cuda += $(MPI_LIBS) -lnccl
CUDA_LIBS    += -lnccl
LDFLAGS_asan += $(MPI_LIBS)
ifeq ($(CUDA_FOUND),1)
CFLAGS_fakecuda += $(MPI_CFLAGS)
GPU_LIBS        += $(MPI_LIBS)
FAKE_TRAIN_LIBS += $(MPI_LIBS)
endif
endif

# the gradient sum alone (docs/BENCH-DISTRIBUTED.md); without MPI the
# generic tool rule builds its stub
ifeq ($(MPI),1)
build/tools/bench_allreduce: tools/bench_allreduce.c build/cpu/libcommon.a
	@mkdir -p build/tools
	$(CC) $(TOOL_CFLAGS) $(MPI_CFLAGS) -o $@ $^ $(MPI_LIBS) -lm
endif

# make bench: data-parallel training here (docs/BENCH-DISTRIBUTED.md)
.PHONY: bench-dist
bench-dist:
	tools/bench-dist
ifeq ($(MPI),1)
BENCH_TARGETS += bench-dist
endif
