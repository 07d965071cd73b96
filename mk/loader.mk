# mk/loader.mk — the loader benchmark: parallel efficiency,
# memory per worker, lazy vs preload. Results: build/bench/loader.md.
BENCH_TARGETS += bench-loader
BENCH_LOADER_N ?= 2000
BENCH_LOADER_RUNS ?= 3

bench-loader: train tools
	@mkdir -p build/bench
	tools/bench-loader --n $(BENCH_LOADER_N) --runs $(BENCH_LOADER_RUNS) --out build/bench/loader.md

# tools/shard writes WebDataset tar shards from anything train reads
# (dataset_load), so it links the loader's and image libraries.
build/tools/shard: tools/shard.c $(call libs_of,cpu,loader image common)
	@mkdir -p build/tools
	$(CC) $(TOOL_CFLAGS) -o $@ $(filter %.c %.a,$^) $(LIBS)

# The peer of the shard interop tests (tests/test_shards.c through
# tests/shards_peer.py): the `webdataset` library, pinned, into python3
# (pyenv's, where make bench-deps puts DALI), tried once per build folder;
# test-only, as build/lj3's Pillow. Where it cannot install (no network)
# it says so and those tests skip, naming this file.
SHARD_PEER_PIP := webdataset==1.0.2 braceexpand==0.1.7
build/shard-peers.stamp:
	@mkdir -p build
	@if python3 -c 'import sys, webdataset; sys.exit(webdataset.__version__ != "1.0.2")' 2>/dev/null || \
	    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
	      $(SHARD_PEER_PIP); then echo installed > $@; \
	  else echo "build/shard-peers.stamp: $(SHARD_PEER_PIP) did not install: the webdataset tests of tests/test_shards.c skip" >&2; \
	    echo absent > $@; fi
TEST_EXTRA += build/shard-peers.stamp
