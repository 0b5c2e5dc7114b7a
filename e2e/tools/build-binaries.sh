#!/usr/bin/env bash
# Builds the binaries the e2e suite needs from the Go module proxy into a cache outside git:
#   kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes, wrapper module),
#   etcd (go.etcd.io/etcd/server/v3, wrapper module), kwok, and an OCI registry
#   (go-containerregistry's cmd/registry); and, in a directory of its own
#   ($cache/bin/distribution-$DISTRIBUTION_VERSION, found by the e2e harness), the CNCF
#   distribution registry, for tests of authenticated TLS registries (~2 min cold); and, each in
#   its own directory too, opm (operator-registry) and the operator-lib test operator
#   (e2e/tools/oplib-operator), and promtool (Prometheus).
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
w_k8s="$cache/work/kubernetes-$KUBERNETES_VERSION"
ld_k8s="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld_k8s="$ld_k8s -X $p.gitVersion=v$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$k8s_minor"
  ld_k8s="$ld_k8s -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
# The wrapper module in $w_k8s (see the header), made afresh.
k8s_wrapper_module() {
  rm -rf "$w_k8s" && mkdir -p "$w_k8s" && cd "$w_k8s"
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
}

if ! have kube-apiserver kube-controller-manager kube-scheduler; then
  log "building Kubernetes v$KUBERNETES_VERSION control plane (first run: ~15-25 min on 2 cores)"
  k8s_wrapper_module
  go build -trimpath -tags selinux,notest -ldflags "$ld_k8s" -o "$out/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler >&2 || fail "go build of the Kubernetes control plane"
fi

# kubectl, for `make demo` (which installs POM with `kubectl apply`, as an admin does): only
# when asked (POM_WITH_KUBECTL=1) and none is on PATH, or always (POM_WITH_KUBECTL=always);
# the demo prefers this one, of the control plane's own version, when present.
case "${POM_WITH_KUBECTL:-}" in
  always) want_kubectl=1 ;;
  1) command -v kubectl >/dev/null && want_kubectl=0 || want_kubectl=1 ;;
  *) want_kubectl=0 ;;
esac
if [ "$want_kubectl" = 1 ] && ! have kubectl; then
  log "building kubectl v$KUBERNETES_VERSION (none on PATH; ~3-6 min on 2 cores after the control plane)"
  [ -f "$w_k8s/go.sum" ] && cd "$w_k8s" || k8s_wrapper_module
  go build -trimpath -ldflags "$ld_k8s" -o "$out/kubectl" k8s.io/kubernetes/cmd/kubectl >&2 \
    || fail "go build of kubectl v$KUBERNETES_VERSION"
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

# operator-framework tools, each in a cache directory of its own (adding or bumping one never
# rebuilds anything else); found by the e2e harness (binaries::locate_opm,
# binaries::locate_oplib_operator).
opm_out="$cache/bin/opm-$OPM_VERSION"
if ! [ -x "$opm_out/opm" ]; then
  # `go install .../cmd/opm@v…` refuses: it reads the module's version list for deprecations,
  # which the proxy refuses for operator-registry; a local main module requiring it builds it.
  log "building opm v$OPM_VERSION (operator-registry; cold: see docs/decisions.md)"
  w="$cache/work/opm-$OPM_VERSION"
  rm -rf "$w" && mkdir -p "$w" "$opm_out" && cd "$w"
  go mod init local.invalid/opm-build >/dev/null 2>&1
  go mod edit -require="github.com/operator-framework/operator-registry@v$OPM_VERSION"
  # grpc-health-probe, a tool dependency of operator-registry, has a checksum the checksum
  # database refuses; it is not linked into opm. The tags are operator-registry's release tags
  # (no gpgme, which needs cgo); without cgo only opm's sqlite commands are unavailable.
  GONOSUMDB=github.com/grpc-ecosystem/grpc-health-probe go build -trimpath \
    -tags json1,containers_image_openpgp -ldflags "-s -w" -o "$opm_out/opm" \
    github.com/operator-framework/operator-registry/cmd/opm >&2 || fail "go build of opm v$OPM_VERSION"
fi

# The operator of e2e/tests/lifecycle_operator_lib.rs: its sources are in git, so its directory
# is named after their hash (an edited main.go is rebuilt, never run stale).
oplib_src="$here/oplib-operator"
grep -q "github.com/operator-framework/operator-lib v$OPERATOR_LIB_VERSION\$" "$oplib_src/go.mod" \
  || fail "$oplib_src/go.mod does not require operator-lib v$OPERATOR_LIB_VERSION (versions.env)"
oplib_stamp=$(cat "$oplib_src/go.mod" "$oplib_src/go.sum" "$oplib_src/main.go" | sha256sum | cut -c1-12)
oplib_out="$cache/bin/oplib-operator-$OPERATOR_LIB_VERSION-$oplib_stamp"
if ! [ -x "$oplib_out/oplib-operator" ]; then
  log "building the operator-lib v$OPERATOR_LIB_VERSION test operator"
  rm -rf "$cache/bin/oplib-operator-$OPERATOR_LIB_VERSION-"*
  w="$cache/work/oplib-operator"
  rm -rf "$w" && mkdir -p "$w" "$oplib_out"
  cp "$oplib_src/go.mod" "$oplib_src/go.sum" "$oplib_src/main.go" "$w/"
  (cd "$w" && go build -mod=readonly -trimpath -ldflags "-s -w" -o "$oplib_out/oplib-operator" .) >&2 \
    || fail "go build of the operator-lib test operator"
fi

# promtool, for `promtool check metrics` on the manager's /metrics (e2e/tests/clients_promtool.rs);
# its own cache directory too (binaries::locate_promtool). Prometheus tags its Go module v0.X.Y
# for release v3.X.Y.
promtool_out="$cache/bin/promtool-$PROMTOOL_VERSION"
if ! [ -x "$promtool_out/promtool" ]; then
  log "building promtool (Prometheus module v$PROMTOOL_VERSION; cold: ~8 min on 2 cores)"
  mkdir -p "$promtool_out"
  GOBIN="$promtool_out" go install -trimpath -ldflags "-s -w" \
    "github.com/prometheus/prometheus/cmd/promtool@v$PROMTOOL_VERSION" >&2 \
    || fail "go install promtool v$PROMTOOL_VERSION"
fi

echo "$out"
