# dlzbench: `make bench` and `make test` each do the whole set-up on a fresh Debian 12 (as root).

SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV    := .venv
PY      := $(VENV)/bin/python
PROFILE ?= quick
PYTEST_ARGS ?=
# Which BIND the suite builds for and tests against: 9.18 is Debian 12's own; 9.20 is Debian 13's,
# in a root of its own under .roots/ (below).
BIND ?= 9.18

# Debian packages the suite needs; `make deps` installs only the missing ones. openssh-server:
# the private sshd of tests/test_load_from.py's namespace load hosts (the system's never starts).
# chromium: tests/test_advise.py renders advise's HTML page headless and checks its figure shows.
# acl: setfacl, for service-user (below): CI and users clone anywhere, /root included.
DEB_PACKAGES := bind9 bind9-utils bind9-dnsutils bind9-dev dnsperf \
	postgresql libpq-dev \
	mariadb-server default-libmysqlclient-dev \
	slapd ldap-utils libldap-dev libsasl2-dev \
	libdb-dev db-util \
	pdns-server pdns-backend-pgsql pdns-backend-mysql pdns-backend-lmdb pdns-backend-bind \
	nsd knot knot-dnsutils \
	build-essential pkg-config valgrind python3-venv python3-dev procps util-linux \
	iproute2 openssh-client openssh-server \
	chromium acl

.PHONY: help setup deps apt-packages apparmor service-user venv toxiproxy build drivers test check \
	lint docs docs-args bench clean distclean bind-root bind-drivers

help:
	@echo "make bench    set up everything, run the '$(PROFILE)' benchmark profile, print the table"
	@echo "make test     set up everything, then run the test suite"
	@echo "make check    ruff and the tests that start no process (pytest -m check): seconds"
	@echo "make setup    make deps and make build at once (what bench and test start with)"
	@echo "make deps     install missing Debian packages and the Python venv (.venv)"
	@echo "make build    build the DLZ drivers (drivers/*/dlz_*.so)"
	@echo "make lint     ruff over the Python code"
	@echo "make docs     write docs/driver-arguments.md from the drivers' tables and the tables of"
	@echo "              README.md and docs/ from the committed results"
	@echo "make fuzz-harness  the drivers' libFuzzer harnesses, FUZZ_SECONDS (60) each"
	@echo "BIND=9.20     with deps/build/test/bench: BIND 9.20 from the Debian 13 root (.roots/trixie,"
	@echo "              made for every BIND: it holds dnsperf 2.14), the drivers built in it (build/bind-9.20/)"

# The venv, toxiproxy and the Debian 13 root download and build independently: made at once
# (the root's mmdebstrap, about 2 minutes on a fresh machine, hides the other two, about 1 minute
# together), each target's output kept together.
deps: apt-packages apparmor service-user
	@$(MAKE) --no-print-directory -j3 --output-sync=target venv toxiproxy bind-root

# Installs what is missing, never starting the distribution's services: the suite runs
# private instances only, so a policy-rc.d keeps post-install scripts from starting daemons.
apt-packages:
	@missing=$$(for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed$$' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		own_policy=0; \
		if [ ! -e /usr/sbin/policy-rc.d ]; then \
			printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; own_policy=1; \
		fi; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -q && apt-get install -y -q --no-install-recommends $$missing; rc=$$?; \
		[ $$own_policy = 1 ] && rm -f /usr/sbin/policy-rc.d; \
		exit $$rc; \
	fi

# Debian confines named and slapd with AppArmor profiles that forbid our run directories
# and driver paths; where AppArmor is active, those two profiles are unloaded.
apparmor:
	@if [ -d /sys/kernel/security/apparmor ] && command -v apparmor_parser >/dev/null; then \
		for prof in usr.sbin.named usr.sbin.slapd; do \
			if [ -f /etc/apparmor.d/$$prof ] && [ ! -e /etc/apparmor.d/disable/$$prof ]; then \
				ln -sf /etc/apparmor.d/$$prof /etc/apparmor.d/disable/$$prof; \
				apparmor_parser -R /etc/apparmor.d/$$prof 2>/dev/null || true; \
				echo "apparmor: disabled $$prof for private instances"; \
			fi; \
		done; \
	fi

# The unprivileged system user every process the suite starts runs as when the suite runs as
# root (base/process.py: SERVICE_USER): no home, no login shell, no password, a group of its own.
SERVICE_USER := dlzbench

# The servers read the drivers and write run/ inside the clone, so the user must be able to
# traverse every directory down to it. CI and users clone anywhere (/root, 0700, included), so
# each directory on the way that shuts the user out gets an ACL entry letting it traverse
# (setfacl u:USER:x): that reveals no file name (no r) and changes nothing for anyone else.
# Where that fails (no ACLs on the filesystem), the suite refuses the clone with one line
# (base/process.py: require_service_user_reaches).
service-user:
	@getent passwd $(SERVICE_USER) >/dev/null || { \
		useradd --system --user-group --no-create-home --home-dir /nonexistent \
			--shell /usr/sbin/nologin $(SERVICE_USER) && \
		echo "created the system user $(SERVICE_USER) (the servers run as it)"; }
	@dir=; for part in $$(echo "$(CURDIR)" | tr / ' '); do \
		dir="$$dir/$$part"; \
		runuser -u $(SERVICE_USER) -- test -x "$$dir" && continue; \
		if why=$$(setfacl -m u:$(SERVICE_USER):x "$$dir" 2>&1) && \
			runuser -u $(SERVICE_USER) -- test -x "$$dir"; then \
			echo "let $(SERVICE_USER) traverse $$dir, above the clone (setfacl -m u:$(SERVICE_USER):x; no listing)"; \
		else \
			echo "$(SERVICE_USER) cannot traverse $$dir, above the clone, and setfacl could not let it ($${why:-still shut out}): clone under a directory every user may search" >&2; \
			exit 1; \
		fi; \
	done

venv: $(VENV)/.installed

# Debian's own python3 (not whatever is first on PATH), so a fresh machine behaves like this one.
$(VENV)/.installed: requirements.txt
	@test -x $(PY) || /usr/bin/python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	@touch $@

# --- toxiproxy: the latency-injecting TCP proxy behind --db-rtt (bench/measure/latency.py) --------
# This kernel has no netem qdisc, so added round-trip time comes from Shopify's toxiproxy,
# built from its Go module at a pinned tag into the git-ignored .tools/bin. The module and
# build caches are a throw-away directory, so the build leaves nothing else behind; the
# target does nothing once the binary is there.
TOOLS_BIN         := $(CURDIR)/.tools/bin
TOXIPROXY         := $(TOOLS_BIN)/toxiproxy-server
TOXIPROXY_MODULE  := github.com/Shopify/toxiproxy/v2
TOXIPROXY_VERSION := v2.12.0
GO ?= $(firstword $(shell command -v go 2>/dev/null) $(wildcard /usr/local/go/bin/go))

toxiproxy: $(TOXIPROXY)

# Without Go 1.23+ (Debian 12's own Go is 1.19) there is no toxiproxy: set-up goes on, and
# --db-rtt and the tests that need the proxy say so instead of running.
$(TOXIPROXY):
	@version=$$([ -n "$(GO)" ] && $(GO) env GOVERSION 2>/dev/null | sed 's/^go//'); \
	if [ -z "$$version" ] || [ "$$(printf '1.23\n%s\n' "$$version" | sort -V | head -n1)" != 1.23 ]; then \
		echo "toxiproxy: no Go 1.23 or newer on this machine; added database round trips (--db-rtt) are unavailable"; \
		exit 0; \
	fi; \
	echo "building toxiproxy $(TOXIPROXY_VERSION) into $(TOOLS_BIN)"; \
	mkdir -p $(TOOLS_BIN); \
	scratch=$$(mktemp -d); \
	GOBIN=$(TOOLS_BIN).partial GOMODCACHE=$$scratch/mod GOCACHE=$$scratch/cache GOFLAGS=-modcacherw \
		CGO_ENABLED=0 $(GO) install -ldflags "-X $(TOXIPROXY_MODULE).Version=$(TOXIPROXY_VERSION:v%=%)" \
		$(TOXIPROXY_MODULE)/cmd/server@$(TOXIPROXY_VERSION); rc=$$?; \
	rm -rf $$scratch; \
	if [ $$rc = 0 ]; then mv $(TOOLS_BIN).partial/server $@; fi; \
	rm -rf $(TOOLS_BIN).partial; exit $$rc

# One compiler per core: each driver is one gcc run over its sources and the shared core.
build drivers: apt-packages bind-drivers
	$(MAKE) -j$(shell nproc) -C drivers
	$(MAKE) -C bench/load/prober

# deps and build at once: for BIND 9.18 the drivers' compile needs only the Debian packages, so
# it goes on beside the Debian 13 root's download (for 9.20 it waits for the root, as declared).
setup: apt-packages apparmor service-user
	@$(MAKE) --no-print-directory -j4 --output-sync=target venv toxiproxy bind-root build

# One pytest worker per core, each taking whole files (--dist loadfile: a file's module
# fixtures, its servers, start once). Most of a test is waiting on servers that start, load
# and answer: on this 2-vCPU VM the 1,829 tests took 18 min 57 s one file at a time and
# 10 min 15 s two at a time (docs/tests.md).
TEST_WORKERS ?= $(shell nproc)

test: setup
	$(PY) -m ruff check base zonedata databases loaders servers bench tests
	DLZBENCH_BIND=$(BIND) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# What needs no set-up beyond the venv: the tests marked `check` (tests/conftest.py refuses any
# process they would start), for a quick answer while editing; `make test` stays the whole suite.
check: venv
	$(PY) -m ruff check base zonedata databases loaders servers bench tests
	$(PY) -m pytest -m check $(PYTEST_ARGS)

lint: venv
	$(PY) -m ruff check base zonedata databases loaders servers bench tests

# The drivers' argument reference, generated from the tables they declare.
docs-args: venv
	$(MAKE) -C drivers
	$(PY) -m servers.driver_arguments docs/driver-arguments.md

# Every table of measured figures in README.md and docs/ is a cog block written from the results
# catalogue (bench/report/doctables.py); tests/test_docs.py fails on a block this would change.
docs: venv docs-args
	$(PY) -m bench.report.doctables

bench: setup
	DLZBENCH_BIND=$(BIND) $(PY) -m bench run --profile $(PROFILE)

# The drivers' libFuzzer harnesses, each for FUZZ_SECONDS: long fuzzing, kept out of `make test`
# (which runs each for a second).
FUZZ_SECONDS ?= 60
.PHONY: fuzz-harness
fuzz-harness: setup
	$(PY) -m bench fuzz-harness --seconds $(FUZZ_SECONDS)

# --- Debian 13 in a root of its own: BIND 9.20, and dnsperf 2.1x for every BIND --------------
# Made for every BIND, not only BIND=9.20: the load generator is its dnsperf (2.12 or newer),
# because Debian 12's dnsperf 2.10 bursts to catch up after a stall under -Q (a fixed offered
# rate is what `capacity` measures at). bench/load/dnsperf.py runs it in the root the way
# servers/bindversion.py runs named 9.20. The root costs about 2 minutes once on a fresh
# machine (and about 700 MB); the 9.20 drivers are built in it only for BIND=9.20.
# mmdebstrap writes the root into a .partial directory that is renamed only once complete (with
# the package list it was made from inside it), so an interrupted run leaves no root that looks
# whole, and the next run starts that one again; a root made from another package list is
# made again, and the drivers built in the old one with it. servers/bindversion.py runs named
# and the drivers' build in it: the root's /usr and /etc over the host's in a private mount
# namespace, so every other path stays the host's.
BIND_ROOT := .roots/trixie
BIND_ROOT_SUITE := trixie
BIND_ROOT_PACKAGES := bind9 bind9-utils bind9-dnsutils bind9-dev \
	libpq-dev default-libmysqlclient-dev libldap-dev libdb-dev build-essential pkg-config valgrind \
	dnsperf
BIND_ROOT_STAMP := $(BIND_ROOT_SUITE): $(sort $(BIND_ROOT_PACKAGES))
DEB_PACKAGES += mmdebstrap
# clang with its sanitizer runtimes and libFuzzer: the drivers' fuzzing harnesses and their
# UndefinedBehaviorSanitizer and ThreadSanitizer tests (drivers/fuzz, docs/method/fuzz.md).
DEB_PACKAGES += clang libclang-rt-14-dev

bind-root: apt-packages
ifneq ($(filter 9.18 9.20,$(BIND)),)
	@if [ "$$(cat $(BIND_ROOT)/.dlzbench-root 2>/dev/null)" = "$(BIND_ROOT_STAMP)" ]; then exit 0; fi; \
	set -e; \
	for dir in $(BIND_ROOT) $(BIND_ROOT).partial; do \
		if findmnt -rn -o TARGET | grep -q "^$(CURDIR)/$$dir"; then \
			echo "error: something is mounted under $$dir; unmount it first" >&2; exit 1; \
		fi; \
	done; \
	rm -rf --one-file-system $(BIND_ROOT).partial; mkdir -p $(dir $(BIND_ROOT)); \
	echo "making $(BIND_ROOT): Debian $(BIND_ROOT_SUITE) with $(BIND_ROOT_PACKAGES)"; \
	mmdebstrap --quiet --variant=minbase --aptopt='APT::Install-Recommends "false"' \
		--include="$$(echo $(BIND_ROOT_PACKAGES) | tr ' ' ,)" \
		$(BIND_ROOT_SUITE) $(BIND_ROOT).partial http://deb.debian.org/debian; \
	echo "$(BIND_ROOT_STAMP)" > $(BIND_ROOT).partial/.dlzbench-root; \
	rm -rf --one-file-system $(BIND_ROOT) build/bind-9.20; \
	mv $(BIND_ROOT).partial $(BIND_ROOT); \
	echo "$(BIND_ROOT): $$(du -sh --one-file-system $(BIND_ROOT) | cut -f1)"
else
	@echo "error: BIND=$(BIND): this suite knows BIND 9.18 (the system's) and 9.20 (BIND=9.20)" >&2; exit 1
endif

# The drivers' sources are the same for every BIND; built in the root, against its client
# libraries, into build/bind-9.20/<d>/dlz_<d>.so (and build/bind-9.20/asan/ for the ASan builds).
# Except Berkeley DB's: it is a library, not a server, and its stores stay the host's like the
# other databases: the loader (Python's berkeleydb over Debian 12's libdb) shares the
# transactional and concurrent environments with named, and an environment refuses another
# libdb build ("Build signature doesn't match environment"). So the 9.20 bdb and bdbhpt drivers
# link Debian 12's libdb, copied beside them (same 5.3.28 API as the root's headers).
BIND_HOST_LIBDB := $(CURDIR)/build/bind-9.20/host-libdb
BIND_LIBS_DB := -L$(BIND_HOST_LIBDB) -ldb-5.3 -Wl,-rpath,$(BIND_HOST_LIBDB)
# The venv's python: servers/ imports dnspython, which Debian 12's python3 lacks.
ifeq ($(BIND),9.20)
bind-drivers: bind-root venv
	@mkdir -p $(BIND_HOST_LIBDB)
	cp -p $(firstword $(wildcard /usr/lib/*/libdb-5.3.so)) $(BIND_HOST_LIBDB)/
	$(PY) -m servers.bindversion 9.20 make -C drivers OUT=$(CURDIR)/build/bind-9.20 \
		ASAN_DIR=$(CURDIR)/build/bind-9.20/asan LIBS_bdb="$(BIND_LIBS_DB)" \
		LIBS_bdbhpt="$(BIND_LIBS_DB)" all asan
else
bind-drivers:
endif

clean:
	$(MAKE) -C drivers clean
	rm -rf run

distclean: clean
	rm -rf $(VENV) results .tools
	rm -rf --one-file-system .roots
