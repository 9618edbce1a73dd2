# kafkapy: `make run` starts a broker, `make test` runs every test.
# Target machine: Debian 12 with Python 3.11, as root or with sudo.  Debian
# packages and the .venv are installed on first use and skipped afterwards.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
CONFIG ?= config/server.properties
# Extra arguments for the broker, e.g. make run ARGS="--override broker.id=1"
ARGS ?=
# Extra arguments for pytest, e.g. make test PYTEST_ARGS="-x tests/unit"
PYTEST_ARGS ?=
# Extra arguments for pip install (e.g. --no-build-isolation offline)
PIP_FLAGS ?=

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# gcc and the Python headers build the Cython extensions; python3-venv gives
# `python3 -m venv` its ensurepip.
RUN_DEBS := build-essential python3-dev python3-venv
# Peers used by the integration and system tests.
# openjdk-17-jdk-headless: javac compiles tests/support/java/ against Apache's
# kafka-clients jar (from the test extra's shigawire-apache-flink-libraries).
# iproute2: `ip netns` for the network-partition tests (tests/support/cluster.py NetworkLab).
TEST_DEBS := kcat zookeeper prometheus systemd openjdk-17-jre-headless openjdk-17-jdk-headless iproute2

# The stamp names carry a hash of everything that affects the build, so an
# edit to the packaging or a .pyx re-runs pip (which rebuilds the extensions).
BUILD_INPUTS := pyproject.toml setup.py $(sort $(wildcard kafkapy/_core/*.pyx kafkapy/_core/*.pxd kafkapy/_core/*.h))
BUILD_HASH := $(shell cat $(BUILD_INPUTS) 2>/dev/null | sha256sum | cut -c1-16)
RUN_STAMP := $(VENV)/.kafkapy-run-$(BUILD_HASH)
TEST_STAMP := $(VENV)/.kafkapy-test-$(BUILD_HASH)
PERF_STAMP := $(VENV)/.kafkapy-perf-$(BUILD_HASH)
# Extra arguments for perf/suite.py, e.g. make bench BENCH_ARGS=--quick
BENCH_ARGS ?=
PIP := $(VENV)/bin/pip --disable-pip-version-check

# $(call ensure_debs,packages): install the missing ones with one apt-get
# update first; nothing at all when every package is already installed.
define ensure_debs
if ! command -v dpkg >/dev/null 2>&1; then \
  echo "make: no dpkg; skipping Debian packages ($(1)): install their equivalents yourself" >&2; \
else \
  missing=""; \
  for p in $(1); do dpkg -s "$$p" >/dev/null 2>&1 || missing="$$missing $$p"; done; \
  if [ -n "$$missing" ]; then \
    echo "make: installing Debian packages:$$missing"; \
    $(SUDO) apt-get update -qq; \
    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
  fi; \
fi
endef

# A venv is usable once it has pip; one left half-made (no ensurepip) is redone.
define ensure_venv
if [ ! -x $(VENV)/bin/pip ]; then \
  rm -rf $(VENV); \
  echo "make: creating $(VENV)"; \
  $(PYTHON) -m venv $(VENV); \
fi
endef

.PHONY: help run cluster deps-cluster test bench install install-test deps deps-test clean distclean install-service uninstall-service

help:
	@echo "make run    install what is missing, then start a broker with $(CONFIG)"
	@echo "            (make run ARGS='--override key=value')"
	@echo "make test   install what is missing (with test tools), then run all tests"
	@echo "make cluster  install what is missing (with ZooKeeper), then start ZooKeeper and three"
	@echo "            brokers on 127.0.0.1:9092-9094 (data in ./local-cluster; Ctrl-C stops them)"
	@echo "make bench  run the performance suite (perf/suite.py; BENCH_ARGS=--quick)"
	@echo "make clean  remove build output; make distclean also removes $(VENV)"
	@echo "make install-service    install kafkapy as a systemd service (user, /etc/kafkapy, /var/lib/kafkapy, unit)"
	@echo "make uninstall-service  remove the unit (PURGE=1 also removes data, config and user)"

deps:
	@$(call ensure_debs,$(RUN_DEBS))

# ZooKeeper for `make cluster`: Debian's package and a Java runtime.
CLUSTER_DEBS := zookeeper openjdk-17-jre-headless

deps-cluster:
	@$(call ensure_debs,$(RUN_DEBS) $(CLUSTER_DEBS))

deps-test:
	@$(call ensure_debs,$(RUN_DEBS) $(TEST_DEBS))

install: deps
	@$(call ensure_venv)
	@if [ -f $(RUN_STAMP) ] || [ -f $(TEST_STAMP) ]; then \
	  echo "make: kafkapy already installed in $(VENV) (build hash $(BUILD_HASH))"; \
	else \
	  $(PIP) install $(PIP_FLAGS) -e . ; \
	  rm -f $(VENV)/.kafkapy-run-*; touch $(RUN_STAMP); \
	fi

install-test: deps-test
	@$(call ensure_venv)
	@if [ -f $(TEST_STAMP) ]; then \
	  echo "make: kafkapy[test] already installed in $(VENV) (build hash $(BUILD_HASH))"; \
	else \
	  $(PIP) install $(PIP_FLAGS) -e '.[test,spark]' ; \
	  rm -f $(VENV)/.kafkapy-run-* $(VENV)/.kafkapy-test-*; touch $(RUN_STAMP) $(TEST_STAMP); \
	fi

run: install
	exec $(VENV)/bin/kafkapy-server-start $(CONFIG) $(ARGS)

# Extra arguments for kafkapy-local-cluster, e.g. make cluster CLUSTER_ARGS="--clean";
# ZK=3 starts a three-node ZooKeeper ensemble instead of one server.
CLUSTER_ARGS ?=
ZK ?= 1

cluster: deps-cluster install
	exec $(VENV)/bin/kafkapy-local-cluster --config $(CONFIG) --zookeeper-nodes $(ZK) $(CLUSTER_ARGS)

# KafkaJS for tests/integration/test_kafkajs.py. Debian's nodejs and npm only
# when node is missing: a NodeSource nodejs already carries npm, and Debian's
# npm would conflict with it. kafkajs goes into $(VENV)/node, stamped by version.
KAFKAJS_VERSION := 2.2.4
KAFKAJS_STAMP := $(VENV)/node/.kafkajs-$(KAFKAJS_VERSION)
.PHONY: deps-node install-kafkajs

deps-node:
	@if ! command -v node >/dev/null 2>&1; then $(call ensure_debs,nodejs npm); \
	elif ! command -v npm >/dev/null 2>&1; then $(call ensure_debs,npm); fi

install-kafkajs: install-test deps-node
	@if [ -f $(KAFKAJS_STAMP) ]; then \
	  echo "make: kafkajs $(KAFKAJS_VERSION) already installed in $(VENV)/node"; \
	else \
	  mkdir -p $(VENV)/node; \
	  npm install --prefix $(VENV)/node --no-audit --no-fund --no-save --no-package-lock kafkajs@$(KAFKAJS_VERSION); \
	  rm -f $(VENV)/node/.kafkajs-*; touch $(KAFKAJS_STAMP); \
	fi

# Test modules run side by side in TEST_WORKERS processes (pytest-xdist), a
# module whole in one of them (--dist loadfile: its module fixtures stay
# shared): most of a test's time is spent waiting on brokers, ZooKeeper and
# clients, so three workers keep two cores busy. TEST_WORKERS=0 runs them one
# after another. Bytecode is cached even where the environment says not to
# (PYTHONDONTWRITEBYTECODE): every broker a test starts would otherwise
# compile kafkapy's ~280 modules again, about 0.4 s each time.
TEST_WORKERS ?= 3
test: install-test install-kafkajs
	PYTHONDONTWRITEBYTECODE= KAFKAPY_REQUIRE_EXTENSIONS=1 $(VENV)/bin/python -m pytest tests -q -p no:cacheprovider --timeout=300 --durations=25 -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

bench: install-test
	@[ -f $(PERF_STAMP) ] || { $(PIP) install $(PIP_FLAGS) -e '.[test,perf]' && touch $(PERF_STAMP); }
	$(VENV)/bin/python perf/bench_core.py
	$(VENV)/bin/python perf/suite.py $(BENCH_ARGS)

clean:
	rm -rf build dist *.egg-info kafkapy/_core/*.so kafkapy/_core/*.c
	find . -name __pycache__ -type d -not -path './$(VENV)/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)

# The systemd service (systemd/README.md). Re-running is safe: an edited
# /etc/kafkapy/server.properties is never overwritten.
install-service: install
	$(SUDO) $(VENV)/bin/kafkapy-install-service --exec $(abspath $(VENV))/bin/kafkapy-server-start

uninstall-service:
	$(SUDO) $(VENV)/bin/kafkapy-install-service --uninstall $(if $(PURGE),--purge,)
