#!/usr/bin/env bash
# Builds the binaries the e2e suite needs from the Go module proxy into a cache outside git:
#   kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes, wrapper module),
#   etcd (go.etcd.io/etcd/server/v3, wrapper module), kwok, and an OCI registry
#   (go-containerregistry's cmd/registry); and, in a directory of its own
#   ($cache/bin/distribution-$DISTRIBUTION_VERSION, found by the e2e harness), the CNCF
#   distribution registry, for tests of authenticated TLS registries (~2 min cold).
# Prints the directory holding the first set on stdout (last line). Re-running reuses what is
# present.
# Why wrapper modules: k8s.io/kubernetes and etcd's server module use replace directives, so
# `go install pkg@version` refuses them; a local main module that replaces each staging module
# with its published version builds them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${POM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pom}
out="$cache/bin/k8s-$KUBERNETES_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-ggcr-$GGCR_VERSION"
mkdir -p "$out" "$cache/work"
log() { echo "build-binaries: $*" >&2; }
fail() { echo "build-binaries: FAILED: $*" >&2; exit 1; }

command -v go >/dev/null || fail "no 'go' on PATH: install Go >= 1.26 (the binaries are built from the Go module proxy)"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

have() { for b in "$@"; do [ -x "$out/$b" ] || return 1; done; }

k8s_minor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)
if ! have kube-apiserver kube-controller-manager kube-scheduler; then
  log "building Kubernetes v$KUBERNETES_VERSION control plane (first run: ~15-25 min on 2 cores)"
  w="$cache/work/kubernetes-$KUBERNETES_VERSION"
  rm -rf "$w" && mkdir -p "$w" && cd "$w"
  go mod init local.invalid/kas-build >/dev/null 2>&1
  gomod=$(go list -m -f '{{.GoMod}}' "k8s.io/kubernetes@v$KUBERNETES_VERSION") \
    || fail "cannot read k8s.io/kubernetes@v$KUBERNETES_VERSION go.mod from the module proxy"
  gov=$(awk '/^go /{print $2; exit}' "$gomod")
  go mod edit -go="$gov"
  if dbg=$(awk '/^godebug default=/{print $2; exit}' "$gomod") && [ -n "$dbg" ]; then
    go mod edit -godebug="$dbg"
  fi
  # Every staging module k8s.io/kubernetes requires at v0.0.0 is replaced by its published release.
  for m in $(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$gomod"); do
    go mod edit -replace="$m=$m@v0.$k8s_minor.${KUBERNETES_VERSION##*.}"
  done
  go get "k8s.io/kubernetes@v$KUBERNETES_VERSION" >&2 || fail "go get k8s.io/kubernetes@v$KUBERNETES_VERSION"
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=v$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$k8s_minor"
    ld="$ld -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  go build -trimpath -tags selinux,notest -ldflags "$ld" -o "$out/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler >&2 || fail "go build of the Kubernetes control plane"
fi

if ! have etcd; then
  log "building etcd v$ETCD_VERSION"
  w="$cache/work/etcd-$ETCD_VERSION"
  rm -rf "$w" && mkdir -p "$w" && cd "$w"
  go mod init local.invalid/etcd-build >/dev/null 2>&1
  go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >&2 || fail "go get etcd server v$ETCD_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3 >&2 \
    || fail "go build of etcd"
fi

if ! have kwok; then
  log "building kwok v$KWOK_VERSION"
  GOBIN="$out" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION" >&2 \
    || fail "go install kwok"
fi

if ! have registry; then
  log "building OCI registry (go-containerregistry v$GGCR_VERSION cmd/registry)"
  GOBIN="$out" go install -trimpath -ldflags "-s -w" \
    "github.com/google/go-containerregistry/cmd/registry@v$GGCR_VERSION" >&2 || fail "go install registry"
fi

dist_out="$cache/bin/distribution-$DISTRIBUTION_VERSION"
if ! [ -x "$dist_out/registry" ]; then
  log "building the distribution registry v$DISTRIBUTION_VERSION (htpasswd auth + TLS tests)"
  mkdir -p "$dist_out"
  GOBIN="$dist_out" go install -trimpath -ldflags "-s -w" \
    "github.com/distribution/distribution/v3/cmd/registry@v$DISTRIBUTION_VERSION" >&2 \
    || fail "go install distribution registry v$DISTRIBUTION_VERSION"
fi

echo "$out"
