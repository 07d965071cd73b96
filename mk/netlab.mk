# mk/netlab.mk — the test rig of slow storage and two "nodes" on one machine
# (tools/netlab, docs/NETLAB.md): network namespaces, tc tbf, nginx (Debian,
# in the Makefile's DEB_PKGS: NETLAB_DEB_PKGS) and moto's S3 server (PyPI,
# test-only, in a venv of its own).
#
#   make netlab-deps      the Debian packages and the moto venv (make deps does both)
#   make netlab-measure   the rate and latency table of docs/NETLAB.md (root)
#
# tests/test_netlab.c (suite netlab, in the main test binary) drives the rig;
# it skips, saying why, without root or `ip netns`, or without nginx or the
# venv, except under CI (CI=true), where `make deps` must have installed them.
NETLAB_DEB_PKGS := nginx curl iproute2 util-linux python3-venv

.PHONY: netlab-deps netlab-measure
netlab-deps:
	$(call apt_install,$(NETLAB_DEB_PKGS))
	@$(MAKE) --no-print-directory build/netlab/venv.stamp
netlab-measure:
	tools/netlab-measure

# moto's S3 server (tools/netlab s3), test-only: tools/netlab-requirements.txt
# pins moto and everything it pulls in, into a venv over Debian's python3
# (about 140 MB, a minute). Tried once per build folder and requirements
# file: where pip cannot reach PyPI the stamp says `absent` and the S3 tests
# skip, naming this file (under CI they fail); rm the stamp to try again.
NETLAB_VENV := build/netlab/venv
build/netlab/venv.stamp: tools/netlab-requirements.txt
	@mkdir -p $(dir $@)
	@if { test -x $(NETLAB_VENV)/bin/python || /usr/bin/python3 -m venv $(NETLAB_VENV); } && \
	    $(NETLAB_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r $<; then \
	  echo installed > $@; echo "netlab: moto's S3 server in $(NETLAB_VENV)"; \
	else echo "$@: tools/netlab-requirements.txt did not install: the S3 tests of tests/test_netlab.c skip" >&2; \
	  echo absent > $@; fi
DEPS_EXTRA += build/netlab/venv.stamp

# E4 over a link (tools/bench-e4, docs/EXPERIMENTS.md "E4 over a link"):
# small files over HTTP vs shards streamed vs the local shard cache vs
# preload, train against webdataset + PyTorch's DataLoader and DALI (pyenv's
# python3: make bench-deps; webdataset 1.0.2, pinned in mk/loader.mk's
# build/shard-peers.stamp), through netlab labs.
# Root; about 10 minutes; writes build/e4/e4.json and e4.png, the table on
# stdout. A benchmark: in neither make test nor make bench (it needs root).
# bench-e4-smoke: a tiny set, one link, one repeat, under a minute.
.PHONY: bench-e4 bench-e4-smoke
bench-e4: build/cpu/train build/tools/shard build/shard-peers.stamp
	tools/bench-e4 $(BENCH_E4_ARGS)
bench-e4-smoke: build/cpu/train build/tools/shard build/shard-peers.stamp
	tools/bench-e4 --smoke
