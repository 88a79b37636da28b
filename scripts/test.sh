#!/usr/bin/env bash
# Runs every check and test of emco-rs on a fresh Debian machine with Rust and Python 3.11.
#
# Installs what is missing (Debian's etcd and protoc, a Python venv with the nx-27017 MongoDB
# wire-protocol server, maturin, pytest, mypy and Temporal's SDK temporalio), starts etcd and nx-27017
# on free loopback ports with temporary data dirs, exports their addresses to the tests, runs fmt,
# clippy and every test (Rust, then the Python package emco-py, then a short fuzz run), and stops
# what it started, also when a step fails. The workflow tests start their own Temporal servers
# (../shared/temporal) and workflow workers, as the real-cluster tier starts ../shared/kube's.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

install_test_deps

WORK=$(mktemp -d "${TMPDIR:-/tmp}/emco-test.XXXXXX")
PIDS=()
cleanup() {
  local status=$?
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT INT TERM

start_etcd "$WORK/etcd"
PIDS+=("$ETCD_PID")
start_mongo "$WORK/mongo"
PIDS+=("$MONGO_PID")
export EMCO_TEST_ETCD EMCO_TEST_MONGO
log "etcd at $EMCO_TEST_ETCD, nx-27017 at $EMCO_TEST_MONGO"

if [ "${CI:-}" = "true" ]; then
  # A clean build gains nothing from incremental compilation and pays for it.
  export CARGO_INCREMENTAL=0
fi

step "cargo fmt --check" cargo fmt --all --check
step "cargo clippy" cargo clippy --workspace --all-targets --locked -- -D warnings
step "doc tests" cargo test --workspace --locked --doc
if cargo nextest --version >/dev/null 2>&1; then
  step "tests (nextest)" cargo nextest run --workspace --locked --no-fail-fast --profile ci
else
  step "tests (cargo test)" cargo test --workspace --locked --no-fail-fast --lib --bins --tests
fi
# The Python package: installed into the venv as a user installs it (pip builds the wheel with
# maturin; the dev profile reuses the build above instead of a release build), type-checked with
# its examples, and tested embedded and against the emco-server and kubesim binaries the tests
# above built.
step "emco-py: pip install ./emco-py" env MATURIN_PEP517_ARGS="--profile dev" \
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall ./emco-py
step "emco-py: mypy --strict" "$VENV/bin/mypy" --strict emco-py/python/emco emco-py/tests \
  examples/python examples/workflows tests/testkit/workflows
# The tests above built kubesim and emco-server with the workspace's features; a build of either
# alone would rebuild them with their own.
if [ -x target/debug/kubesim ] && [ -x target/debug/emco-server ]; then
  export EMCO_BIN_DIR="$ROOT/target/debug"
fi
step "emco-py: pytest" "$VENV/bin/pytest" -q emco-py/tests
# A short coverage-guided run of every fuzz target (unoptimized build: a third of the build time),
# from the repository's seeds on a clean clone; the long runs are scripts/fuzz.sh's.
step "fuzz (short run)" env EMCO_FUZZ_SECONDS="${EMCO_FUZZ_SECONDS:-20}" EMCO_FUZZ_PROFILE=dev \
  EMCO_FUZZ_REPORT="$ROOT/target/fuzz-short.txt" bash scripts/fuzz.sh
log "all checks passed"
