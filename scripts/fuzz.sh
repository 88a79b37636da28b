#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo fuzz, libFuzzer) of what takes hostile input: Go templates,
# values YAML, chart archives and REST bodies (JSON and multipart) through emco-server's router
# (fuzz/fuzz_targets). Installs cargo-fuzz when missing; runs on the stable toolchain
# (RUSTC_BOOTSTRAP lets cargo fuzz's flags through) without a sanitizer: the targets' assertions
# (no panic, no 5xx, output within its limits) are what it looks for. A finding is kept under
# fuzz/artifacts/ and fails the run.
#
# Environment: EMCO_FUZZ_SECONDS per target (default 30). Figures: bench-results/fuzz.txt.
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
export RUSTC_BOOTSTRAP=1
mkdir -p bench-results
REPORT="$ROOT/bench-results/fuzz.txt"
echo "# cargo fuzz, ${SECONDS_EACH} s per target, $(date -u +%Y-%m-%dT%H:%MZ)" >"$REPORT"
cd fuzz
step "build the fuzz targets" cargo fuzz build --sanitizer none
for target in template values_yaml chart_archive rest_body; do
  mkdir -p "corpus/$target"
  log "fuzz $target for ${SECONDS_EACH} s"
  cargo fuzz run --sanitizer none "$target" "corpus/$target" -- \
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
