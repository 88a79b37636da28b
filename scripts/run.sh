#!/usr/bin/env bash
# The main job of emco-rs on one machine: emco-server on the embedded store (no external service),
# kubesim serving simulated Kubernetes clusters, and those clusters registered with the server, so
# a composite app can be onboarded and deployed to them. Stops both on Ctrl-C.
#
# Environment: EMCO_RUN_CLUSTERS (default 3), EMCO_LISTEN (default 127.0.0.1:9015),
# EMCO_RUN_DIR (default .tmp/run; recreated on every start, because kubesim makes new cluster
# credentials each time), EMCO_PROFILE (dev or release; default dev).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

CLUSTERS=${EMCO_RUN_CLUSTERS:-3}
LISTEN=${EMCO_LISTEN:-127.0.0.1:9015}
RUN_DIR=${EMCO_RUN_DIR:-$ROOT/.tmp/run}
PROFILE=${EMCO_PROFILE:-dev}
SERVER="http://$LISTEN"

# Building needs protoc; registration uses curl.
apt_install protobuf-compiler curl

step "build emco-server, kubesim and emcoctl ($PROFILE)" \
  cargo build --profile "$PROFILE" -p emco-server -p kubesim -p emcoctl
BIN="$ROOT/target/$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")"

rm -rf "$RUN_DIR"
mkdir -p "$RUN_DIR/kubeconfigs" "$RUN_DIR/data"

PIDS=()
cleanup() {
  local status=$?
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  exit "$status"
}
trap cleanup EXIT INT TERM

log "starting kubesim with $CLUSTERS clusters"
"$BIN/kubesim" serve --clusters "$CLUSTERS" --kubeconfig-dir "$RUN_DIR/kubeconfigs" \
  >"$RUN_DIR/kubesim.out" 2>"$RUN_DIR/kubesim.log" &
PIDS+=("$!")
for _ in $(seq 1 300); do
  grep -q "kubesim ready" "$RUN_DIR/kubesim.out" 2>/dev/null && break
  kill -0 "${PIDS[0]}" 2>/dev/null || { cat "$RUN_DIR/kubesim.log" >&2; exit 1; }
  sleep 0.1
done
cat "$RUN_DIR/kubesim.out"

log "starting emco-server on $LISTEN (embedded store in $RUN_DIR/data)"
"$BIN/emco-server" --listen "$LISTEN" --data-dir "$RUN_DIR/data" >"$RUN_DIR/emco-server.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 1 300); do
  curl -fsS "$SERVER/healthz" >/dev/null 2>&1 && break
  kill -0 "${PIDS[1]}" 2>/dev/null || { cat "$RUN_DIR/emco-server.log" >&2; exit 1; }
  sleep 0.1
done

# Registers the simulated clusters exactly as an operator registers real ones.
api() {
  local out
  out=$(curl -sS -w '\n%{http_code}' "$@")
  local code=${out##*$'\n'}
  if [ "${code:0:1}" != 2 ]; then
    echo "request failed ($code): ${out%$'\n'*}" >&2
    return 1
  fi
}
log "registering cluster provider 'kubesim' and clusters c1..c$CLUSTERS (label 'edge')"
api -X POST "$SERVER/v2/cluster-providers" -H 'Content-Type: application/json' \
  -d '{"metadata":{"name":"kubesim","description":"simulated clusters"}}'
for i in $(seq 1 "$CLUSTERS"); do
  api -X POST "$SERVER/v2/cluster-providers/kubesim/clusters" \
    -F "metadata={\"metadata\":{\"name\":\"c$i\"}}" \
    -F "file=@$RUN_DIR/kubeconfigs/c$i.kubeconfig"
  api -X POST "$SERVER/v2/cluster-providers/kubesim/clusters/c$i/labels" \
    -H 'Content-Type: application/json' -d '{"clusterLabel":"edge"}'
done

cat <<MSG

emco-server is listening on $SERVER with $CLUSTERS kubesim clusters registered.

  curl -s $SERVER/v2/cluster-providers/kubesim/clusters?withLabels=true
  curl -s $SERVER/v2/openapi.yaml | head
  $BIN/emcoctl --server $SERVER apply -f examples/emcoctl/project.yaml
  $BIN/emcoctl --server $SERVER get -f examples/emcoctl/project.yaml
  kubectl --kubeconfig $RUN_DIR/kubeconfigs/c1.kubeconfig get namespaces
  $BIN/kubesim fault c2 --down --kubeconfig-dir $RUN_DIR/kubeconfigs

Logs: $RUN_DIR/emco-server.log, $RUN_DIR/kubesim.log. Press Ctrl-C to stop both.
MSG
wait -n "${PIDS[@]}"
