#!/usr/bin/env bash
# Fetches OLM v0's CRDs (Subscription, ClusterServiceVersion, OperatorGroup, InstallPlan,
# CatalogSource) as operator-framework publishes them, from the Go module proxy
# (github.com/operator-framework/api@v$OLM_API_VERSION, its crds/ folder), into a cache outside
# git, so the adoption tests lay out what a real cluster serves. Prints the folder holding the
# five CRDs on stdout (last line); re-running reuses what is present. Found by the e2e harness
# (pom_e2e::binaries::locate_olm_v0_crds).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${POM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pom}
out="$cache/crds/olm-v0-api-$OLM_API_VERSION"
log() { echo "olm-v0-crds: $*" >&2; }
fail() { echo "olm-v0-crds: FAILED: $*" >&2; exit 1; }
kinds="subscriptions clusterserviceversions operatorgroups installplans catalogsources"

have() { for k in $kinds; do [ -s "$out/operators.coreos.com_$k.yaml" ] || return 1; done; }
if ! have; then
  command -v go >/dev/null || fail "no 'go' on PATH: install Go >= 1.26 (the CRDs are read from the Go module proxy)"
  export GOFLAGS=-mod=mod GOMODCACHE="$cache/gomodcache" GOPATH="$cache/gopath"
  log "fetching github.com/operator-framework/api@v$OLM_API_VERSION from the module proxy"
  dir=$(go mod download -json "github.com/operator-framework/api@v$OLM_API_VERSION" \
    | awk -F'"' '/"Dir":/ {print $4; exit}') || fail "go mod download github.com/operator-framework/api@v$OLM_API_VERSION"
  [ -n "$dir" ] && [ -d "$dir/crds" ] || fail "the module github.com/operator-framework/api@v$OLM_API_VERSION has no crds/ folder"
  mkdir -p "$out.tmp"
  for k in $kinds; do
    cp "$dir/crds/operators.coreos.com_$k.yaml" "$out.tmp/" || fail "crds/operators.coreos.com_$k.yaml missing from the module"
  done
  rm -rf "$out" && mv "$out.tmp" "$out"
fi
echo "$out"
