# mk/coverage.mk — `make coverage`: line coverage of the program's C by
# the main Criterion suite (docs/TESTING.md, "Coverage").
#
# A "cov" variant of every layer (gcc --coverage, -O0, no sanitizers,
# ASSERTs on), its ./train (the tests that run the binary run this one, so
# what they reach counts too) and its test binary; the suite runs with its
# usual runner (a failing test does not stop the report: coverage is what
# the tests reach, their verdict is make test's), then gcovr (Debian's,
# installed here on demand, not by make deps) writes
#   build/cov/coverage.txt     per file
#   build/cov/folders.txt      per folder (tools/coverage-summary)
#   build/cov/html/index.html  annotated sources
# Not counted: cuda/ (its suite, run-fakecuda, is not built in this
# variant), tools/, tests/, fuzz/. COV_FILTER narrows the run ('rrc/*').

COV_FILTER ?=
# (-O0 for exact line counts; gcc 12 sees a possible snprintf truncation at
# -O0 in one test that its range analysis rules out at -O1. Atomic
# counters for the threads; a few branch counts still come out negative
# -- processes the tests SIGKILL, forks -- which gcovr reads past with
# --gcov-ignore-parse-errors: the line counts are what is reported.)
CFLAGS_cov  = $(filter-out $(SAN) -O1,$(CFLAGS_asan)) -O0 --coverage -fprofile-update=atomic \
              -Wno-format-truncation
LDFLAGS_cov = $(filter-out $(SAN),$(LDFLAGS_asan)) --coverage
COV_CC     := $(filter-out $(CCACHE),$(CC))

build/cov/%.o: %.c build/cov/.flags
	@mkdir -p $(dir $@)
	$(COV_CC) $(CFLAGS_cov) -c $< -o $@
$(foreach l,$(filter-out cuda,$(LAYERS)),$(eval $(call lib_rule,cov,$(l))))

build/cov/train: build/cov/main.o $(call variant_libs,cov)
	$(COV_CC) -o $@ $^ $(LDFLAGS_cov) $(LIBS)
# the loader's supervisor beside build/cov/train, where the tests look for it
build/cov/trainloader-supervisor: build/cov/python/supervisor.o $(call libs_of,cov,app nn loader image common)
	$(COV_CC) -Wl,--as-needed -o $@ $^ $(LDFLAGS_cov) $(LIBS)
build/cov/tests/run: $(patsubst %.c,build/cov/%.o,$(TEST_SRC) $(TEST_SUPPORT_SRC)) $(call variant_libs,cov)
	$(COV_CC) -o $@ $^ $(LDFLAGS_cov) $(LIBS) -lcriterion -lz

COV_SRC_FILTER := '^(app|comm|common|cpu|image|loader|nn|python)/|^main\.c$$'
.PHONY: coverage coverage-deps
coverage-deps:
	$(call apt_install,gcovr)
coverage:
	@$(MAKE) --no-print-directory -j$(NPROC) coverage-deps build/cov/train \
	  build/cov/trainloader-supervisor build/cov/tests/run $(TOOLS)
	@find build/cov -name '*.gcda' -delete
	-TRAIN_BIN=$(CURDIR)/build/cov/train TRAIN_TOOLS=$(CURDIR)/build/tools TRAIN_ROOT=$(CURDIR) \
	  TRAIN_FUZZ_SECONDS=8 tests/run-suite build/cov/tests/run --jobs 2 \
	  $(if $(COV_FILTER),--filter '$(COV_FILTER)') $(TESTFLAGS)
	@mkdir -p build/cov/html
	gcovr -r . --object-directory build/cov --filter $(COV_SRC_FILTER) -j $(NPROC) --gcov-ignore-parse-errors \
	  --txt build/cov/coverage.txt --json-summary build/cov/summary.json \
	  --html-details build/cov/html/index.html --print-summary
	@tools/coverage-summary build/cov/summary.json | tee build/cov/folders.txt
