# mk/nn.mk — the nets' benchmark (docs/BENCH-NN.md).
#
#   make bench-nn     compute-only lenet epoch, 1 and 2 threads, then the
#                     PyTorch peer on the same data (tools/peer_train.py)
#
# build/tools/bench_nn links the nn/ sources, so it gets its own rule (the
# generic build/tools/% rule compiles one tool file with common/util.c).

BENCH_TARGETS += bench-nn
.PHONY: bench-nn

NN_BENCH_SRC := tools/bench_nn.c $(sort $(wildcard nn/*.c)) common/util.c
BENCH_NN_RUNS ?= 3

build/tools/bench_nn: $(NN_BENCH_SRC) $(wildcard nn/*.h) tools/idx.h common/util.h common/rng.h
	@mkdir -p build/tools
	$(CC) $(BASE_CFLAGS) -O2 -o $@ $(NN_BENCH_SRC) $(LIBS) -lz

bench-nn: build/tools/bench_nn
	build/tools/bench_nn --threads 1,2 --runs $(BENCH_NN_RUNS)
	/usr/bin/python3 tools/peer_train.py compute --threads 1,2 --runs $(BENCH_NN_RUNS)
