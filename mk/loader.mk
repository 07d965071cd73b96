# mk/loader.mk — the loader benchmark: parallel efficiency,
# memory per worker, lazy vs preload. Results: build/bench/loader.md.
BENCH_TARGETS += bench-loader
BENCH_LOADER_N ?= 2000
BENCH_LOADER_RUNS ?= 3

bench-loader: train tools
	@mkdir -p build/bench
	tools/bench-loader --n $(BENCH_LOADER_N) --runs $(BENCH_LOADER_RUNS) --out build/bench/loader.md
