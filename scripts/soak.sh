#!/usr/bin/env bash
# The soak (not part of the test command, which runs its short version): three emco-server
# replicas (release builds) on their own etcd and nx-27017 deploy the http-server example to
# EMCO_SOAK_CLUSTERS kubesim clusters, then for EMCO_SOAK_SECONDS update it every
# EMCO_SOAK_UPDATE_SECONDS (a new image), with a tenth of the clusters flapping and a replica
# killed with SIGKILL (and started again) every EMCO_SOAK_KILL_SECONDS. The replicas' memory,
# descriptors and async tasks and the store's keys are sampled; the test fails when one grows
# after warm-up or an update does not converge. The table goes to bench-results/soak.txt.
#
# Defaults: one hour at 1,000 clusters, an update a minute, a kill every 10 minutes:
#   bash scripts/soak.sh
# About 15 minutes of build, then the hour.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

install_test_deps

WORK=$(mktemp -d "${TMPDIR:-/tmp}/emco-soak.XXXXXX")
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

export EMCO_SOAK_SECONDS=${EMCO_SOAK_SECONDS:-3600}
export EMCO_SOAK_CLUSTERS=${EMCO_SOAK_CLUSTERS:-1000}
export EMCO_SOAK_UPDATE_SECONDS=${EMCO_SOAK_UPDATE_SECONDS:-60}
export EMCO_SOAK_KILL_SECONDS=${EMCO_SOAK_KILL_SECONDS:-600}
export EMCO_SOAK_SAMPLE_SECONDS=${EMCO_SOAK_SAMPLE_SECONDS:-15}
mkdir -p bench-results
export EMCO_SOAK_RESULTS=${EMCO_SOAK_RESULTS:-$ROOT/bench-results/soak.txt}
# Each replica and the in-process fleet hold a few descriptors per cluster.
ulimit -n "$(ulimit -Hn)"

step "soak: ${EMCO_SOAK_SECONDS}s at ${EMCO_SOAK_CLUSTERS} clusters" \
  cargo test --release --locked -p emco-server --test binary -- --exact \
  a_soak_of_updates_flaps_and_killed_replicas_leaves_nothing_growing --nocapture
