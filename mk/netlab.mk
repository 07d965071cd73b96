# mk/netlab.mk — the test rig of slow storage and two "nodes" on one machine
# (tools/netlab, docs/NETLAB.md): network namespaces, tc tbf, nginx (Debian,
# in the Makefile's DEB_PKGS: NETLAB_DEB_PKGS) and moto's S3 server (PyPI,
# test-only, in a venv of its own).
#
#   make netlab-deps      the Debian packages and the moto venv
#   make netlab-measure   the rate and latency table of docs/NETLAB.md (root)
#
# tests/test_netlab.c (suite netlab, in the main test binary) drives the rig;
# it skips, saying why, without root or `ip netns`, or without nginx or the
# venv, except under CI (CI=true), where `make deps` must have installed them.
NETLAB_DEB_PKGS := nginx curl iproute2 util-linux python3-venv

.PHONY: netlab-deps netlab-measure
netlab-deps:
	$(call apt_install,$(NETLAB_DEB_PKGS))
netlab-measure:
	tools/netlab-measure
