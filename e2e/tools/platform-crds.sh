#!/usr/bin/env bash
# Fetches the CRDs of the platform kinds real bundles ship beside their operator (monitoring:
# ServiceMonitor, PodMonitor, PrometheusRule; console: ConsoleQuickStart, ConsoleYAMLSample,
# ConsoleCLIDownload, ConsoleLink, ConsolePlugin) as their owners publish them, from the Go
# module proxy (prometheus-operator@v$PROMETHEUS_OPERATOR_VERSION, openshift/api@v$OPENSHIFT_API_VERSION),
# into a cache outside git, so tests install real bundles on a plane that serves what an
# OpenShift cluster serves. Prints the folder holding the CRDs on stdout (last line);
# re-running reuses what is present. Found by the e2e harness (pom_e2e::platform_crds).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${POM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pom}
out="$cache/crds/platform-prometheus-operator-$PROMETHEUS_OPERATOR_VERSION-openshift-api-$OPENSHIFT_API_VERSION"
log() { echo "platform-crds: $*" >&2; }
fail() { echo "platform-crds: FAILED: $*" >&2; exit 1; }
monitoring="servicemonitors podmonitors prometheusrules"
console="consolequickstarts consoleyamlsamples consoleclidownloads consolelinks consoleplugins"

have() {
  for k in $monitoring; do [ -s "$out/monitoring.coreos.com_$k.yaml" ] || return 1; done
  for k in $console; do [ -s "$out/console.openshift.io_$k.yaml" ] || return 1; done
}
# The module's folder in the module cache, downloading it when absent.
module_dir() {
  local dir
  dir=$(go mod download -json "$1" | awk -F'"' '/"Dir":/ {print $4; exit}') || fail "go mod download $1"
  [ -n "$dir" ] && [ -d "$dir" ] || fail "go mod download $1 gave no folder"
  echo "$dir"
}
if ! have; then
  command -v go >/dev/null || fail "no 'go' on PATH: install Go >= 1.26 (the CRDs are read from the Go module proxy)"
  export GOFLAGS=-mod=mod GOMODCACHE="$cache/gomodcache" GOPATH="$cache/gopath"
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  log "fetching github.com/prometheus-operator/prometheus-operator@v$PROMETHEUS_OPERATOR_VERSION"
  dir=$(module_dir "github.com/prometheus-operator/prometheus-operator@v$PROMETHEUS_OPERATOR_VERSION")
  for k in $monitoring; do
    cp "$dir/example/prometheus-operator-crd/monitoring.coreos.com_$k.yaml" "$out.tmp/" \
      || fail "example/prometheus-operator-crd/monitoring.coreos.com_$k.yaml missing from the module"
  done
  log "fetching github.com/openshift/api@v$OPENSHIFT_API_VERSION"
  dir=$(module_dir "github.com/openshift/api@v$OPENSHIFT_API_VERSION")
  for k in $console; do
    src=$(find "$dir/console/v1/zz_generated.crd-manifests" -maxdepth 1 -name "*_$k.crd.yaml" 2>/dev/null | sort | head -n1 || true)
    [ -n "$src" ] || fail "console/v1/zz_generated.crd-manifests/*_$k.crd.yaml missing from the module"
    cp "$src" "$out.tmp/console.openshift.io_$k.yaml"
  done
  rm -rf "$out" && mv "$out.tmp" "$out"
fi
# k8s.io/api at the plane's Kubernetes version: pom-render's table of served APIs is checked
# against the groups it registers (crates/render/tests/served_apis.rs), offline.
k8s_api="k8s.io/api@v0.${KUBERNETES_VERSION#1.}"
if [ ! -d "$cache/gomodcache/$k8s_api" ]; then
  command -v go >/dev/null || fail "no 'go' on PATH: install Go >= 1.26 ($k8s_api is read from the Go module proxy)"
  log "fetching $k8s_api"
  (export GOFLAGS=-mod=mod GOMODCACHE="$cache/gomodcache" GOPATH="$cache/gopath"; module_dir "$k8s_api" >/dev/null)
fi
echo "$out"
