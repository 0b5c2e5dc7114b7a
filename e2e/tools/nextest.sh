#!/usr/bin/env bash
# Prints the path of the cargo-nextest binary `make test` runs the suite with, installing it
# from crates.io into ~/.cache/pom/tools on first use (a pinned version, built --locked: ~5 min
# cold on 2 cores, then cached outside git like the Go control-plane binaries).
# Why nextest: it runs each test in a process of its own and schedules tests across all test
# binaries at once, so the e2e suite (mostly waiting on control planes) keeps both cores busy;
# `.config/nextest.toml` says which tests run first and which take two slots.
set -euo pipefail
version=0.9.151
cache="${POM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pom}"
root="$cache/tools/cargo-nextest-$version"
bin="$root/bin/cargo-nextest"
if ! [ -x "$bin" ]; then
  echo "nextest: installing cargo-nextest $version into $root (first use only)" >&2
  cargo install cargo-nextest --version "=$version" --locked --root "$root" >&2 \
    || { echo "nextest: FAILED to install cargo-nextest $version from crates.io" >&2; exit 1; }
fi
echo "$bin"
