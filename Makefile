# dlzbench: `make bench` and `make test` each do the whole set-up on a fresh Debian 12 (as root).

SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV    := .venv
PY      := $(VENV)/bin/python
PROFILE ?= quick
PYTEST_ARGS ?=

# Debian packages the suite needs; `make deps` installs only the missing ones.
DEB_PACKAGES := bind9 bind9-utils bind9-dnsutils bind9-dev dnsperf \
	postgresql libpq-dev \
	mariadb-server default-libmysqlclient-dev \
	slapd ldap-utils libldap-dev libsasl2-dev \
	libdb-dev db-util \
	build-essential pkg-config valgrind python3-venv python3-dev procps util-linux \
	iproute2

.PHONY: help deps apt-packages apparmor venv toxiproxy build drivers test lint bench clean distclean

help:
	@echo "make bench    set up everything, run the '$(PROFILE)' benchmark profile, print the table"
	@echo "make test     set up everything, then run the test suite"
	@echo "make deps     install missing Debian packages and the Python venv (.venv)"
	@echo "make build    build the DLZ drivers (drivers/*/dlz_*.so)"
	@echo "make lint     ruff over the Python code"

deps: apt-packages apparmor venv toxiproxy

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

venv: $(VENV)/.installed

# Debian's own python3 (not whatever is first on PATH), so a fresh machine behaves like this one.
$(VENV)/.installed: requirements.txt
	@test -x $(PY) || /usr/bin/python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	@touch $@

# --- toxiproxy: the latency-injecting TCP proxy behind --db-rtt (bench/latency.py) --------
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

$(TOXIPROXY):
	@test -n "$(GO)" || { echo "error: go (1.23 or newer) is needed to build toxiproxy" >&2; exit 1; }
	@echo "building toxiproxy $(TOXIPROXY_VERSION) into $(TOOLS_BIN)"
	@mkdir -p $(TOOLS_BIN)
	@scratch=$$(mktemp -d); \
	GOBIN=$(TOOLS_BIN).partial GOMODCACHE=$$scratch/mod GOCACHE=$$scratch/cache GOFLAGS=-modcacherw \
		CGO_ENABLED=0 $(GO) install -ldflags "-X $(TOXIPROXY_MODULE).Version=$(TOXIPROXY_VERSION:v%=%)" \
		$(TOXIPROXY_MODULE)/cmd/server@$(TOXIPROXY_VERSION); rc=$$?; \
	rm -rf $$scratch; \
	if [ $$rc = 0 ]; then mv $(TOOLS_BIN).partial/server $@; fi; \
	rm -rf $(TOOLS_BIN).partial; exit $$rc

build drivers: apt-packages
	$(MAKE) -C drivers
	$(MAKE) -C bench/prober

test: deps build
	$(PY) -m ruff check bench loaders tests
	$(PY) -m pytest $(PYTEST_ARGS)

lint: venv
	$(PY) -m ruff check bench loaders tests

bench: deps build
	$(PY) -m bench run --profile $(PROFILE)

clean:
	$(MAKE) -C drivers clean
	rm -rf run

distclean: clean
	rm -rf $(VENV) results .tools
