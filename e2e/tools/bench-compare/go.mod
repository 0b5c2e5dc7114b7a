// The Go side of `make bench-compare`: operator-registry's declcfg loader, pinned. The module's
// go.sum is written by e2e/tools/build-bench-compare.sh in its cache copy (outside git).
module local.invalid/pom-bench-compare

go 1.25.7

require github.com/operator-framework/operator-registry v1.64.0
