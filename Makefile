# POM developer entry points. `make test` is what CI runs (through .ci/run).
SHELL := /bin/bash
CARGO ?= cargo
# Where the Go-built control-plane binaries live (outside git); printed by the build script.
BIN_DIR = $(shell bash e2e/tools/build-binaries.sh 2>/dev/null | tail -n1)

.PHONY: all test unit e2e e2e-binaries lint fmt crds manifests image demo bench bench-install bench-compare soak chaos fuzz fuzz-ci fuzz-build clean-cache help

help:
	@echo "make demo   - a local control plane + registry, POM installed from manifests/kubernetes/, two operators through a cluster update"
	@echo "make test   - unit + property + e2e tests (builds control-plane binaries on first use)"
	@echo "make e2e    - only the e2e suite;  make lint - fmt + clippy;  make crds - regenerate crds/"
	@echo "make manifests - regenerate manifests/;  make image - build the manager image (podman/docker)"
	@echo "make soak   - the decision state-machine test with SOAK_CASES sequences (default 500,000)"
	@echo "make chaos  - the chaos suite, long run: 50 leader kills, 3 apiserver + 1 etcd restarts, registry outages (POM_CHAOS_SEED=... replays)"
	@echo "make fuzz   - every cargo-fuzz target for FUZZ_RUNS executions (default 10^7; nightly);  make fuzz-ci - 30 s each"
	@echo "make bench  - benchmarks (resolver);  make bench-install - 200 POs against a real control plane (BENCH_ARGS=..., e.g. --floor, --restart --failover)"
	@echo "make bench-compare - catalog parsing: POM vs operator-registry's Go loader vs the parser floor (BENCH_COMPARE_ARGS=...)"

all: lint test

## Build kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok and an OCI registry
## from the Go module proxy into ~/.cache/pom (first run ~15-25 min on 2 cores; cached after).
e2e-binaries:
	@bash e2e/tools/build-binaries.sh
	@bash e2e/tools/olm-v0-crds.sh >/dev/null
	@bash e2e/tools/platform-crds.sh >/dev/null

## Every test of the workspace: cargo-nextest (e2e/tools/nextest.sh installs it into ~/.cache/pom
## on first use) runs each test in its own process and schedules all test binaries together
## (.config/nextest.toml); then the doc tests, which nextest does not run. Either failing fails.
## nextest shows no output of a passing test: the short chaos run's record (its seed and
## result, issue 34 item 11) is kept in target/chaos/report.txt and printed after nextest's lines.
## The short chaos run replays one seed (POM_CHAOS_SEED, default below; `POM_CHAOS_SEED=random`
## draws one): seeds whose API-server restart falls on the deletion phase leave the monitor
## too blind to judge (docs/decisions.md, session 24), so CI replays one it can judge;
## `make chaos` draws a new seed every run.
CHAOS_CI_SEED ?= 16162496586541950636
test: e2e-binaries
	@dir=$$(bash e2e/tools/build-binaries.sh | tail -n1) && \
	  nextest=$$(bash e2e/tools/nextest.sh | tail -n1) && rc=0 && \
	  report=$(CURDIR)/target/chaos/report.txt && mkdir -p $(CURDIR)/target/chaos && : > "$$report" && \
	  { POM_CHAOS_SEED=$${POM_CHAOS_SEED:-$(CHAOS_CI_SEED)} POM_CHAOS_REPORT=$$report POM_TEST_BIN_DIR=$$dir PROPTEST_CASES=$${PROPTEST_CASES:-2000} PATH="$$(dirname "$$nextest"):$$PATH" \
	      $(CARGO) nextest run --workspace --no-fail-fast || rc=1; } && \
	  { if [ -s "$$report" ]; then cat "$$report"; else echo "chaos result: NO RESULT (the chaos test did not run; see above)"; fi; } && \
	  { $(CARGO) test --workspace --doc || rc=1; } && exit $$rc
## (Benchmarks are compiled by `make lint` (clippy --all-targets) and run by `make bench`.)

unit:
	$(CARGO) test --workspace --exclude pom-e2e

e2e: e2e-binaries
	@dir=$$(bash e2e/tools/build-binaries.sh | tail -n1) && \
	  nextest=$$(bash e2e/tools/nextest.sh | tail -n1) && \
	  POM_TEST_BIN_DIR=$$dir PATH="$$(dirname "$$nextest"):$$PATH" $(CARGO) nextest run -p pom-e2e --no-fail-fast

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

crds:
	$(CARGO) run -q -p pom-api --bin crdgen > crds/crds.yaml

## Install manifests (CVO payload form and plain Kubernetes) from crates/controller/src/manifests.rs.
manifests:
	$(CARGO) run -q -p pom-controller --bin manifestgen -- manifests

## The manager image (Containerfile), with podman or docker; not part of `make test`.
IMAGE ?= localhost/platform-operators-manager:latest
image:
	@engine=$$(command -v podman || command -v docker) || { echo "make image: needs podman or docker" >&2; exit 1; }; \
	  $$engine build -f Containerfile -t $(IMAGE) .

## The demo installs POM from manifests/kubernetes/ with kubectl (built into the cache when none
## is on PATH) and runs the pom-manager binary, which pom-demo finds next to itself.
demo: e2e-binaries
	@dir=$$(POM_WITH_KUBECTL=1 bash e2e/tools/build-binaries.sh | tail -n1) && \
	  $(CARGO) build -q -p pom-controller --bin pom-manager && \
	  POM_TEST_BIN_DIR=$$dir $(CARGO) run -q -p pom-e2e --bin pom-demo -- $(if $(DEMO_ONCE),--once,)

bench:
	$(CARGO) bench -p pom-resolver

## The decision core's state-machine property test, longer than in `make test` (10,000 sequences):
## SOAK_CASES sequences (default 500,000), optimised build.
SOAK_CASES ?= 500000
## Fuzzing (issue 14): libFuzzer targets in fuzz/ (their own workspace, nightly toolchain).
fuzz:
	FUZZ_RUNS=$${FUZZ_RUNS:-10000000} bash fuzz/run.sh

## Builds every fuzz target and stops (CI: beside the tests, at low priority).
fuzz-build:
	FUZZ_BUILD_ONLY=1 bash fuzz/run.sh

## The short bounded pass CI runs after the tests.
fuzz-ci:
	FUZZ_RUNS=$${FUZZ_RUNS:-10000000} FUZZ_SECONDS=$${FUZZ_SECONDS:-30} bash fuzz/run.sh

## Issue 13 item 9: the chaos suite's long run (`make test` runs a short one: 12 kills, 1
## apiserver restart, 1 registry outage, 6 POs). POM_CHAOS_SEED replays a run; any
## POM_CHAOS_* variable overrides the sizes below.
## The long chaos run; `POM_CHAOS_SEED=<n>` replays a seed. The run's result (seed, each
## violation, summary) is printed again after cargo's own last lines, so `make chaos | tail`
## shows it; it is kept in target/chaos/report.txt.
chaos: e2e-binaries
	@dir=$$(bash e2e/tools/build-binaries.sh | tail -n1) || exit 1; \
	  report=$(CURDIR)/target/chaos/report.txt; mkdir -p $(CURDIR)/target/chaos; : > "$$report"; \
	  POM_CHAOS_REPORT=$$report \
	  POM_TEST_BIN_DIR=$$dir POM_CHAOS_KILLS=$${POM_CHAOS_KILLS:-50} \
	  POM_CHAOS_APISERVER_RESTARTS=$${POM_CHAOS_APISERVER_RESTARTS:-3} \
	  POM_CHAOS_ETCD_RESTARTS=$${POM_CHAOS_ETCD_RESTARTS:-1} \
	  POM_CHAOS_REGISTRY_OUTAGES=$${POM_CHAOS_REGISTRY_OUTAGES:-2} \
	  POM_CHAOS_POS=$${POM_CHAOS_POS:-12} POM_CHAOS_CHAIN=$${POM_CHAOS_CHAIN:-4} \
	  $(CARGO) test -p pom-e2e --test chaos -- --nocapture; status=$$?; \
	  if [ -s "$$report" ]; then cat "$$report"; \
	  else echo "chaos result: FAILED: no result recorded (the test did not run; see above)"; fi; \
	  exit $$status

soak:
	POM_STATE_MACHINE_SEED=random POM_STATE_MACHINE_CASES=$(SOAK_CASES) $(CARGO) test --release -p pom-policy --test state_machine

## Issue 4: 200 PlatformOperators against a real control plane, the manager as a release-built
## process; prints install time, writes per PO, steady-state writes (must be 0) and peak RSS.
bench-install: e2e-binaries
	$(CARGO) build --release -p pom-e2e --bin pom-bench --bin pom-manager-e2e
	@dir=$$(bash e2e/tools/build-binaries.sh | tail -n1) && \
	  POM_TEST_BIN_DIR=$$dir $${CARGO_TARGET_DIR:-target}/release/pom-bench $(BENCH_ARGS)

## Issue 10 item 6: POM's catalog loader against operator-registry v1.64.0's (declcfg.LoadFS +
## ConvertToModel, a Go program built into the cache on first use, ~2 min cold) and the parser
## floor, on generated JSON and YAML catalogs; prints MiB/s, ratios, peak memory and the counts
## both loaders agree on. Not part of `make test`. BENCH_COMPARE_ARGS: --packages N --bundles N
## --runs N --only json-file,yaml-split (see crates/resolver/benches/bench_compare.rs).
bench-compare:
	@go=$$(bash e2e/tools/build-bench-compare.sh | tail -n1) && \
	  $(CARGO) bench -p pom-resolver --bench bench_compare -- --go "$$go" $(BENCH_COMPARE_ARGS)

clean-cache:
	rm -rf $${POM_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/pom}
