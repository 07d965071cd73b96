# mk/python.mk — the Python module (docs/PYTHON.md): `make python` builds
# build/python/trainloader/, an importable package (PYTHONPATH=build/python)
# holding the extension (stable ABI, CPython >= 3.11), the loader's
# supervisor program and the Python layer; `pip install .` (setup.py) runs
# the same rule. Its objects are the folders' sources compiled once more
# with -fPIC (variant pic), linked from the same libraries as ./train
# (only the loader's side: app/options, app/feed, loader, image, common).

PY_BUILD   := /usr/bin/python3
PY_INC     := $(shell $(PY_BUILD) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
PY_PKG     := build/python/trainloader
PY_LAYERS  := app nn loader image common
# (also in the Makefile's DEB_PKGS: make deps installs them)
PY_DEB_PKGS := python3-dev python3-pytest python3-numpy python3-torch libdlpack-dev

CFLAGS_pic := $(BASE_CFLAGS) -O2 -g -fPIC -fvisibility=hidden
build/pic/%.o: %.c build/pic/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_pic) -c $< -o $@
build/pic/image/resize.o: CFLAGS_pic += -O3
$(foreach l,$(PY_LAYERS),$(eval $(call lib_rule,pic,$(l))))

build/pic/python/trainloader.o: python/trainloader.c build/pic/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_pic) -isystem $(PY_INC) -c $< -o $@

# python/ is the top layer of the module's libraries: tools/check-layers
# fails a call from below into it, and tools/check-includes an include of a
# private header (app/run_ctx.h) from it (the data side is app/feed.h)
build/pic/libpython.a: build/pic/python/trainloader.o build/pic/python/supervisor.o
	@rm -f $@
	$(AR) rcs $@ $^
$(PY_PKG)/_trainloader.abi3.so: build/pic/python/trainloader.o $(call libs_of,pic,$(PY_LAYERS)) \
                                build/pic/libpython.a
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,--as-needed -o $@ $(filter-out build/pic/libpython.a,$^) $(LIBS)
	$(call check_layers_of,pic,python $(PY_LAYERS))
# --as-needed: the loader side calls no BLAS, and a linked OpenBLAS would
# start its spinning thread pool in the process that forks the workers
$(PY_PKG)/trainloader-supervisor: build/pic/python/supervisor.o $(call libs_of,pic,$(PY_LAYERS))
	@mkdir -p $(dir $@)
	$(CC) -Wl,--as-needed -o $@ $^ $(LIBS)
$(PY_PKG)/%.py: python/trainloader/%.py
	@mkdir -p $(dir $@)
	cp $< $@

PY_FILES := $(PY_PKG)/_trainloader.abi3.so $(PY_PKG)/trainloader-supervisor \
            $(patsubst python/trainloader/%,$(PY_PKG)/%,$(wildcard python/trainloader/*.py))
.PHONY: python python-deps test-python
python: $(PY_FILES)
python-deps:
	$(call apt_install,$(PY_DEB_PKGS))

# the pytest suite (tests/python/), run by `make test` after the C suites
test-python: python build/cpu/train tools
	cd tests/python && PYTHONPATH=$(CURDIR)/build/python TRAIN_BIN=$(CURDIR)/build/cpu/train \
	  TRAIN_ROOT=$(CURDIR) $(PY_BUILD) -m pytest -q -p no:cacheprovider .
TEST_EXTRA += python

# the supervisor under the sanitizers, beside build/asan/train: the main
# suite's tests/test_feed_spawn.c spawns it as the Python module does
build/asan/trainloader-supervisor: build/asan/python/supervisor.o $(call libs_of,asan,$(PY_LAYERS))
	$(CC) -Wl,--as-needed -o $@ $^ $(LDFLAGS_asan) $(LIBS)
TEST_EXTRA += build/asan/trainloader-supervisor
