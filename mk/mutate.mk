# mk/mutate.mk — mutation testing (tools/mutate, docs/TESTING.md). Not part
# of `make test`.
#
#   make mutate                  every mutant of tests/mutations.txt
#   make mutate ONLY=loader,app  the mutants of those folders (or names)
#   make mutate JOBS=2           two mutants at once (default 1)
#   make mutate TIMEOUT=300      seconds per suite run of a mutant (default 600)
#   make mutate-generated SEED=1 [COUNT=150] [JOBS=2]
#                                a seeded sample of generated mutants
#                                (tools/mutate-gen) over every production
#                                folder, into build/mutants-SEED.txt, then run

.PHONY: mutate mutate-generated
MUTATE_FLAGS = $(if $(ONLY),--only $(ONLY)) $(if $(JOBS),--jobs $(JOBS)) \
               $(if $(TIMEOUT),--timeout $(TIMEOUT))

mutate: deps
	@$(MAKE) --no-print-directory build/asan/train build/asan/tests/run tools \
	  $(if $(CUDA_FOUND),build/asan/tests/run-fakecuda $(FAKE_DIR)/train $(FAKE_DIR)/libfakenvml.so)
	/usr/bin/python3 tools/mutate $(MUTATE_FLAGS)

MUTATE_BUILD = build/asan/train build/asan/tests/run tools build/asan/trainloader-supervisor \
  python build/cpu/train \
  $(if $(CUDA_FOUND),build/asan/tests/run-fakecuda $(FAKE_DIR)/train $(FAKE_DIR)/libfakenvml.so)

mutate-generated: deps
	@test -n "$(SEED)" || { echo "make mutate-generated: say SEED=N (the same N, the same sample)" >&2; exit 2; }
	@$(MAKE) --no-print-directory $(MUTATE_BUILD)
	/usr/bin/python3 tools/mutate-gen --seed $(SEED) --count $(or $(COUNT),150) \
	  > build/mutants-$(SEED).txt.tmp && mv build/mutants-$(SEED).txt.tmp build/mutants-$(SEED).txt
	/usr/bin/python3 tools/mutate --list build/mutants-$(SEED).txt $(MUTATE_FLAGS)
