#!/usr/bin/env bash
# Runs every cargo-fuzz target (libFuzzer, nightly) over a seed corpus built from
# ../shared/testdata and our own fixtures.
#
#   FUZZ_RUNS     executions per target (default 10,000,000: `make fuzz`)
#   FUZZ_SECONDS  wall-clock cap per target (default 0: none; CI sets a short one)
#   FUZZ_TARGETS  space-separated subset (default: all)
#   FUZZ_JOBS     targets run at once (default: one per core)
#   FUZZ_BUILD_ONLY=1  build every target and stop (`make fuzz-build`: CI builds them at low
#                 priority while the tests run, so the pass after them starts at once)
#
# cargo-fuzz is installed from crates.io into ~/.cache/pom/tools on first use; corpora live in
# ~/.cache/pom/fuzz (outside git). A crash leaves its input in fuzz/artifacts/<target>/ and
# fails the run: turn it into a regression test, then fix it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
shared="${POM_SHARED_DIR:-$repo/../shared}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/pom"
tools="$cache/tools"
corpora="$cache/fuzz/corpus"
runs="${FUZZ_RUNS:-10000000}"
seconds="${FUZZ_SECONDS:-0}"
targets="${FUZZ_TARGETS:-fbc_parse masterminds_range blang_range render_bundle powers layer_extract layer_hostile_names}"

if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz: the nightly toolchain is missing (rustup toolchain install nightly)" >&2
  exit 2
fi
if [ ! -x "$tools/bin/cargo-fuzz" ]; then
  echo "fuzz: installing cargo-fuzz into $tools (first use only)" >&2
  cargo install cargo-fuzz --locked --root "$tools" >&2
fi
export PATH="$tools/bin:$PATH"

if [ "${FUZZ_BUILD_ONLY:-0}" = 1 ]; then
  cd "$here"
  # One build of every target, with the options `cargo fuzz run --release` builds with, so
  # the runs below find them fresh.
  exec cargo +nightly fuzz build --release
fi

# Seed corpora: small real inputs of each grammar, rebuilt every run (cheap).
seed() {
  local target=$1
  mkdir -p "$corpora/$target"
  case "$target" in
    fbc_parse)
      find "$shared/testdata/real" "$repo/crates/render/tests/fixtures" -type f \
        \( -name '*.json' -o -name '*.yaml' -o -name '*.yml' \) -size -256k -path '*catalog*' \
        -exec cp -f {} "$corpora/$target/" \; 2>/dev/null || true ;;
    masterminds_range | blang_range)
      python3 - "$shared/testdata/version-ranges" "$corpora/$target" <<'PY'
import hashlib, json, pathlib, sys
src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for name in ("cases.json", "skiprange-cases.json", "validity-cases.json"):
    path = src / name
    if not path.exists():
        continue
    for case in json.loads(path.read_text()):
        text = case.get("range") or case.get("input")
        if isinstance(text, str):
            (out / hashlib.sha1(text.encode()).hexdigest()).write_text(text)
PY
      ;;
    render_bundle)
      local n=0
      while IFS= read -r -d '' file; do
        n=$((n + 1))
        { printf '%b' "\\x$(printf '%02x' $((n % 2)))"; cat "$file"; } > "$corpora/$target/seed-$n"
      done < <(find "$shared/testdata/real" "$repo/crates/render/tests/fixtures/bundles" -type f \
        -path '*manifests*' -name '*.yaml' -size -128k -print0 2>/dev/null)
      ;;
    powers)
      # Each fixture bundle's manifests as one JSON list of objects.
      python3 - "$repo/crates/render/tests/fixtures/bundles" "$corpora/$target" <<'PY'
import json, pathlib, sys
src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
try:
    import yaml
except ImportError:
    yaml = None
for bundle in sorted(p for p in src.iterdir() if p.is_dir()):
    objects = []
    for path in sorted((bundle / "manifests").glob("*")):
        text = path.read_text(errors="replace")
        if path.suffix == ".json":
            objects.append(json.loads(text))
        elif yaml is not None:
            objects.extend(d for d in yaml.safe_load_all(text) if isinstance(d, dict))
    if objects:
        (out / f"{bundle.name}.json").write_text(json.dumps(objects))
PY
      ;;
    layer_extract)
      local dir
      for dir in "$repo"/crates/render/tests/fixtures/bundles/*/; do
        tar -C "$dir" -cf "$corpora/$target/$(basename "$dir").tar" --transform 's,^\./,configs/,' .
        gzip -c "$corpora/$target/$(basename "$dir").tar" > "$corpora/$target/$(basename "$dir").tar.gz"
      done
      ;;
  esac
}

# One target: its seeds, then libFuzzer over them; its log in $cache/fuzz/<target>.log.
run_target() {
  local target=$1
  seed "$target"
  echo "fuzz: $target ($(ls "$corpora/$target" | wc -l) seeds, $runs runs max, ${seconds}s max)" >&2
  local args=(-runs="$runs" -rss_limit_mb=2048 -max_len=1048576 -print_final_stats=1)
  if [ "$seconds" != 0 ]; then
    args+=(-max_total_time="$seconds")
  fi
  local rc=0
  if ! cargo +nightly fuzz run --release "$target" "$corpora/$target" -- "${args[@]}" 2> "$cache/fuzz/$target.log"; then
    rc=1
    echo "fuzz: $target FAILED; the input is in fuzz/artifacts/$target/; log: $cache/fuzz/$target.log" >&2
    tail -n 40 "$cache/fuzz/$target.log" >&2
  fi
  grep -E '^stat::number_of_executed_units|^Done [0-9]+ runs' "$cache/fuzz/$target.log" | sed "s/^/fuzz: $target: /" >&2 || true
  return $rc
}

# Targets run FUZZ_JOBS at a time (default: one per core): each libFuzzer process is single
# threaded, so on 2 cores the CI pass (7 targets x 20 s) takes half the time it would in turn.
# The targets are built first (each named one; fresh after `make fuzz-build`): concurrent
# `cargo fuzz run`s then only check that build and run their own binary.
cd "$here"
jobs_max="${FUZZ_JOBS:-$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}"
[ "$jobs_max" -ge 1 ] || jobs_max=1
for target in $targets; do
  cargo +nightly fuzz build --release "$target" >&2
done
# A run stopped (Ctrl-C, CI's timeout) stops the fuzzers it started: each target runs in a
# process group of its own (job control on), killed whole.
set -m
trap 'for p in $(jobs -p); do kill -- -"$p" 2>/dev/null || true; done' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
status=0
running=0
for target in $targets; do
  if [ "$running" -ge "$jobs_max" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  run_target "$target" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
