#!/usr/bin/env bash
# The long crash-safety run: emco-server killed with SIGKILL at random moments of instantiate,
# update and terminate on kubesim clusters, restarted each time on the same data dir, every step
# checked exactly (emco-server/tests/binary.rs `sigkill_at_random_moments_loses_nothing`; the
# test command runs a short version of it). Writes its figures to
# bench-results/crash-safety.txt. About 1 s per kill on this 2-core machine, plus the build.
#
# Environment: EMCO_CRASH_KILLS (default 120), EMCO_CRASH_SEED (replays a run's kill moments).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

apt_install protobuf-compiler
mkdir -p bench-results
export EMCO_CRASH_KILLS=${EMCO_CRASH_KILLS:-120}
export EMCO_CRASH_REPORT="$ROOT/bench-results/crash-safety.txt"
log "crash safety: $EMCO_CRASH_KILLS kills"
cargo test --locked -p emco-server --test binary sigkill_at_random_moments_loses_nothing \
  -- --exact --nocapture
log "figures in bench-results/crash-safety.txt"
cat "$EMCO_CRASH_REPORT"
