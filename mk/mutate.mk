# mk/mutate.mk — mutation testing (tools/mutate, docs/TESTING.md). Not part
# of `make test`.
#
#   make mutate                  every mutant of tests/mutations.txt
#   make mutate ONLY=loader,app  the mutants of those folders (or names)
#   make mutate JOBS=2           two mutants at once (default 1)
#   make mutate TIMEOUT=300      seconds per mutant for its suites (default 600)

.PHONY: mutate
MUTATE_FLAGS = $(if $(ONLY),--only $(ONLY)) $(if $(JOBS),--jobs $(JOBS)) \
               $(if $(TIMEOUT),--timeout $(TIMEOUT))

mutate: deps
	@$(MAKE) --no-print-directory build/asan/train build/asan/tests/run tools \
	  $(if $(CUDA_FOUND),build/asan/tests/run-fakecuda $(FAKE_DIR)/train $(FAKE_DIR)/libfakenvml.so)
	/usr/bin/python3 tools/mutate $(MUTATE_FLAGS)
