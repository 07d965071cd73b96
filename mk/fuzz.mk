# mk/fuzz.mk — the parsers' fuzz targets (fuzz/README.md); the image
# pipeline's is in mk/image.mk.
#
#   make fuzz-csv         libFuzzer over the CSV parser (loader/dataset.c)
#   make fuzz-checkpoint  ... over the checkpoint reader (nn/checkpoint.c)
#   make fuzz-cache       ... over the preload cache's file checks (loader/cache.c)
#
# each for FUZZ_SECONDS (default 60); new inputs land in
# fuzz/corpus-work/<name>/corpus, crashers in fuzz/corpus-work/<name>/crashes
# (fix them, then copy them to fuzz/corpus/<name>/, which
# tests/test_fuzz_parsers.c replays under ASan in `make test`). Built with
# gcc, each is also a plain replay driver and seed writer in build/tools/.

# the layers each target needs, top to bottom
FUZZ_LAYERS_csv        := loader image common
FUZZ_LAYERS_cache      := loader image common
FUZZ_LAYERS_checkpoint := cpu nn loader image common
FUZZ_PARSERS := csv checkpoint cache
# the libFuzzer builds' libraries: the fuzz variant (clang, instrumented),
# except the CPU backend, which only builds the checkpoint harness's model:
# the cpu variant's (gcc -O2), since clang takes over 20 minutes and 2 GB
# on the AVX-512 kernels under ASan and the fuzzer has nothing to learn there
fuzz_libs = $(foreach l,$(1),$(if $(filter cpu,$(l)),build/cpu/libcpu.a,build/fuzz/lib$(l).a))

# the fuzz variant's libraries beyond mk/image.mk's image and common
$(foreach l,loader nn,$(eval $(call lib_rule,fuzz,$(l))))

define fuzz_parser_rules
build/tools/fuzz_$(1): fuzz/fuzz_$(1).c $$(call libs_of,cpu,$$(FUZZ_LAYERS_$(1)))
	@mkdir -p build/tools
	$$(CC) $$(TOOL_CFLAGS) -o $$@ $$(filter %.c %.a,$$^) $$(LIBS)
build/fuzz/fuzz_$(1): fuzz/fuzz_$(1).c $$(call fuzz_libs,$$(FUZZ_LAYERS_$(1)))
	$$(FUZZ_CC) -std=c11 -O1 -g -I. $$(FUZZ_SAN) -fsanitize=fuzzer -DFUZZ_LIBFUZZER -o $$@ \
	  $$^ $$(LIBS)
.PHONY: fuzz-$(1)
fuzz-$(1): build/fuzz/fuzz_$(1) build/tools/fuzz_$(1)
	@mkdir -p fuzz/corpus-work/$(1)/corpus fuzz/corpus-work/$(1)/crashes
	build/fuzz/fuzz_$(1) -max_total_time=$$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	  -max_len=16384 -print_final_stats=1 -artifact_prefix=fuzz/corpus-work/$(1)/crashes/ \
	  fuzz/corpus-work/$(1)/corpus fuzz/corpus/$(1)
FUZZ_TARGETS += fuzz-$(1)
TEST_EXTRA   += build/tools/fuzz_$(1)
endef
$(foreach p,$(FUZZ_PARSERS),$(eval $(call fuzz_parser_rules,$(p))))
