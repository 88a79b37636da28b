#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo fuzz, libFuzzer) of what takes hostile input: Go templates,
# values YAML, chart archives and REST bodies (JSON and multipart) through emco-server's router
# (fuzz/fuzz_targets). Installs cargo-fuzz when missing; runs on the stable toolchain
# (RUSTC_BOOTSTRAP lets cargo fuzz's flags through) without a sanitizer: the targets' assertions
# (no panic, no 5xx, output within its limits) are what it looks for. A finding is kept under
# fuzz/artifacts/ and fails the run.
#
# An empty corpus is seeded from the repository (the example charts' templates, values and
# archives, a create body per route), so a short run starts from inputs that get somewhere.
#
# Environment: EMCO_FUZZ_SECONDS per target (default 30); EMCO_FUZZ_PROFILE=dev builds without
# optimization (a third of the build time, slower runs: the short run of scripts/test.sh);
# EMCO_FUZZ_REPORT, where the figures go (default bench-results/fuzz.txt).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

apt_install protobuf-compiler
if ! cargo fuzz --version >/dev/null 2>&1; then
  step "install cargo-fuzz" cargo install --locked cargo-fuzz@0.13.2
fi
SECONDS_EACH=${EMCO_FUZZ_SECONDS:-30}
PROFILE=${EMCO_FUZZ_PROFILE:-release}
REPORT=${EMCO_FUZZ_REPORT:-$ROOT/bench-results/fuzz.txt}
case "$PROFILE" in
  release) FLAGS=(--sanitizer none) ;;
  dev)
    FLAGS=(--sanitizer none --dev)
    # Without debug info the unoptimized build is smaller and quicker; a finding still names
    # its input, which is what reproduces it.
    export CARGO_PROFILE_DEV_DEBUG=0
    ;;
  *) log "EMCO_FUZZ_PROFILE must be release or dev, not $PROFILE"; exit 2 ;;
esac
export RUSTC_BOOTSTRAP=1
mkdir -p "$(dirname "$REPORT")"
echo "# cargo fuzz ($PROFILE build), ${SECONDS_EACH} s per target, $(date -u +%Y-%m-%dT%H:%MZ)" >"$REPORT"

# Seeds an empty corpus directory $1 of target $2 from the repository.
seed() {
  local dir=$1 target=$2 chart i
  [ -n "$(ls -A "$dir" 2>/dev/null)" ] && return 0
  case "$target" in
    template)
      for chart in examples/charts/*/; do
        for file in "$chart"templates/*; do
          cp "$file" "$dir/$(basename "$chart")-$(basename "$file")"
        done
      done
      ;;
    values_yaml)
      for chart in examples/charts/*/; do
        cp "$chart/values.yaml" "$dir/$(basename "$chart").yaml"
      done
      ;;
    chart_archive)
      for chart in examples/charts/*/; do
        tar -czf "$dir/$(basename "$chart").tgz" -C examples/charts "$(basename "$chart")"
      done
      ;;
    rest_body)
      # The first byte picks the route (fuzz_targets/rest_body.rs); with 0x80 set, multipart.
      for i in 0 1 2 3 4 5 6 7 8 9 128 130; do
        { printf "\\x$(printf %02x "$i")"
          printf '{"metadata":{"name":"n%s","description":"d","userData1":"u"},"spec":{"compositeAppVersion":"v1"}}' "$i"
        } >"$dir/route-$i"
      done
      ;;
  esac
}

cd fuzz
step "build the fuzz targets" cargo fuzz build "${FLAGS[@]}"
for target in template values_yaml chart_archive rest_body; do
  mkdir -p "corpus/$target"
  (cd "$ROOT" && seed "fuzz/corpus/$target" "$target")
  log "fuzz $target for ${SECONDS_EACH} s"
  cargo fuzz run "${FLAGS[@]}" "$target" "corpus/$target" -- \
    -max_total_time="$SECONDS_EACH" -rss_limit_mb=4096 -print_final_stats=1 \
    2>"$ROOT/target/fuzz-$target.log" || {
      tail -40 "$ROOT/target/fuzz-$target.log" >&2
      log "fuzz target $target found a failure: see fuzz/artifacts/$target"
      exit 1
    }
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$ROOT/target/fuzz-$target.log" | grep -o '[0-9]*$' || echo '?')
  cov=$(grep -o 'cov: [0-9]*' "$ROOT/target/fuzz-$target.log" | tail -1 | grep -o '[0-9]*' || echo '?')
  corpus=$(find "corpus/$target" -type f | wc -l)
  echo "$target: $runs runs, coverage $cov edges, corpus $corpus inputs, no failure" >>"$REPORT"
done
cat "$REPORT"
