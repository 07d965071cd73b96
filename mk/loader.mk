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
