# mk/nn.mk — the nets' benchmark (docs/BENCH-NN.md).
#
#   make bench-nn     one lenet epoch on Fashion-MNIST, compute step only,
#                     train vs PyTorch alternating run by run, 1 and 2
#                     threads (tools/peer_train.py duel); then PyTorch end
#                     to end over the PNG CSV when tools/fashion-mnist has
#                     made it
#
# build/tools/bench_nn links the cpu/ and nn/ libraries, so it gets its own
# rule (the generic build/tools/% rule links common/ only).

BENCH_TARGETS += bench-nn
.PHONY: bench-nn

BENCH_NN_RUNS ?= 5
BENCH_NN_CSV ?= data/fashion-mnist/train.csv

build/tools/bench_nn: tools/bench_nn.c $(call libs_of,cpu,cpu nn common)
	@mkdir -p build/tools
	$(CC) $(TOOL_CFLAGS) -o $@ $(filter %.c %.a,$^) $(LIBS) -lz

bench-nn: build/tools/bench_nn
	/usr/bin/python3 tools/peer_train.py duel --threads 1,2 --runs $(BENCH_NN_RUNS)
	@if [ -f $(BENCH_NN_CSV) ]; then \
	  /usr/bin/python3 tools/peer_train.py e2e --csv $(BENCH_NN_CSV) --workers 0,1,2 --threads 1,2 --runs 3; \
	else echo "bench-nn: no $(BENCH_NN_CSV) (tools/fashion-mnist makes it): PyTorch end-to-end skipped"; fi
