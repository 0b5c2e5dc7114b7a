#!/usr/bin/env bash
# Builds the Go side of `make bench-compare` (e2e/tools/bench-compare: operator-registry's
# declcfg.LoadFS + ConvertToModel, timed) into the cache outside git, next to the e2e binaries
# (same cache root as build-binaries.sh: $POM_CACHE, else ~/.cache/pom). Prints the binary's
# path on stdout (last line). Re-running reuses it unless main.go or go.mod changed.
# Cold build (operator-registry v1.64.0 and its dependencies from the Go module proxy): see
# docs/benchmarks.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src="$here/bench-compare"
log() { echo "build-bench-compare: $*" >&2; }
fail() { echo "build-bench-compare: FAILED: $*" >&2; exit 1; }
command -v go >/dev/null || fail "no 'go' on PATH: install Go >= 1.26"

cache=${POM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pom}
version=$(awk '$1 == "require" && $2 ~ /operator-registry$/ {print $3}' "$src/go.mod")
[ -n "$version" ] || fail "no operator-registry requirement in $src/go.mod"
stamp=$(cat "$src/go.mod" "$src/main.go" | sha256sum | cut -c1-12)
out="$cache/bin/bench-compare-operator-registry-$version-$stamp"
if [ -x "$out/bench-compare" ]; then
  echo "$out/bench-compare"
  exit 0
fi

log "building operator-registry $version declcfg loader (cold: about 2 min on 2 cores)"
w="$cache/work/bench-compare-$version"
# Builds of an earlier main.go/go.mod are never used again.
rm -rf "$cache"/bin/bench-compare-operator-registry-*
rm -rf "$w" && mkdir -p "$w" "$out"
cp "$src/go.mod" "$src/main.go" "$w/"
cd "$w"
# grpc-health-probe, a tool dependency of operator-registry, has a checksum the checksum
# database refuses; it is not linked into this program.
export GONOSUMDB=github.com/grpc-ecosystem/grpc-health-probe CGO_ENABLED=0
go mod tidy >&2 || fail "go mod tidy (operator-registry $version from the module proxy)"
go build -trimpath -ldflags "-s -w" -o "$out/bench-compare" . >&2 || fail "go build"
echo "$out/bench-compare"
