#!/usr/bin/env bash
# The fleet benchmark (tests/e2e/benches/fleet.rs): emco-server and kubesim as separate release
# processes, driven over REST. Builds both, then runs the driver; the table goes to
# bench-results/fleet-<clusters>x<objects per cluster>.txt.
#
# Environment: EMCO_FLEET_CLUSTERS (1000), EMCO_FLEET_APPS (10), EMCO_FLEET_OBJECTS per app (10),
# EMCO_FLEET_READY_DELAY_MS (500). The two runs of the figures:
#   EMCO_FLEET_CLUSTERS=1000 EMCO_FLEET_APPS=10 EMCO_FLEET_OBJECTS=10 bash scripts/bench-fleet.sh
#   EMCO_FLEET_CLUSTERS=10000 EMCO_FLEET_APPS=10 EMCO_FLEET_OBJECTS=1 bash scripts/bench-fleet.sh
# and the restart of many contexts (EMCO_FLEET_CONTEXTS groups of one object, EMCO_FLEET_ACTIVE of
# them still deploying at a kill):
#   EMCO_FLEET_CONTEXTS=10000 EMCO_FLEET_ACTIVE=1000 EMCO_FLEET_CLUSTERS=100 bash scripts/bench-fleet.sh
# Each process raises its open-files limit to the hard one; 10,000 clusters need about 25,000
# (README, "Many clusters").
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

apt_install protobuf-compiler
step "build emco-server and kubesim (release)" cargo build --release --locked -p emco-server -p kubesim
step "fleet benchmark" cargo bench --locked -p emco-e2e --bench fleet
