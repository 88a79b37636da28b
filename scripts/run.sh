#!/usr/bin/env bash
# The main job of emco-rs on one machine: emco-server on the embedded store (no external service),
# kubesim serving simulated Kubernetes clusters, and those clusters registered with the server, so
# a composite app can be onboarded and deployed to them: the example of examples/emcoctl, whose
# charts (examples/charts) and profile (examples/profiles) are tarred here, deployed to every
# cluster with emcoctl. Prints the dashboard's URL and the emcoctl commands to try next. Stops both
# on Ctrl-C. Refuses to start when its port is taken.
#
# Environment: EMCO_RUN_CLUSTERS (default 3), EMCO_LISTEN (default 127.0.0.1:9015),
# EMCO_GRPC_LISTEN (default 127.0.0.1:9016), EMCO_RUN_DIR (default .tmp/run; recreated on every
# start, because kubesim makes new cluster credentials each time), EMCO_PROFILE (dev or release;
# default dev).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

CLUSTERS=${EMCO_RUN_CLUSTERS:-3}
LISTEN=${EMCO_LISTEN:-127.0.0.1:9015}
GRPC_LISTEN=${EMCO_GRPC_LISTEN:-127.0.0.1:9016}
RUN_DIR=${EMCO_RUN_DIR:-$ROOT/.tmp/run}
PROFILE=${EMCO_PROFILE:-dev}
SERVER="http://$LISTEN"

# Building needs protoc; registration uses curl; the example's packages need tar.
apt_install protobuf-compiler curl tar gzip

# Never talk to someone else's server: the ports must be free.
for addr in "$LISTEN" "$GRPC_LISTEN"; do
  if (exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}") 2>/dev/null; then
    echo "run.sh: $addr is already in use (another emco-server?); stop it or set EMCO_LISTEN / EMCO_GRPC_LISTEN" >&2
    exit 1
  fi
done

step "build emco-server, kubesim and emcoctl ($PROFILE)" \
  cargo build --profile "$PROFILE" -p emco-server -p kubesim -p emcoctl
BIN="$ROOT/target/$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")"

rm -rf "$RUN_DIR"
mkdir -p "$RUN_DIR/kubeconfigs" "$RUN_DIR/data" "$RUN_DIR/packages"

# The example's packages: the project's own charts and profile, tarred, and the values that
# examples/emcoctl/*.yaml are rendered with.
for app in http-server http-client; do
  tar -czf "$RUN_DIR/packages/$app.tgz" -C "$ROOT/examples/charts" "$app"
done
tar -czf "$RUN_DIR/packages/profile.tgz" -C "$ROOT/examples/profiles/default" .
{
  echo "PackagesPath: $RUN_DIR/packages"
  echo "ClusterProvider: kubesim"
  echo "ClusterLabel: edge"
  echo "Clusters:"
  for i in $(seq 1 "$CLUSTERS"); do echo "- c$i"; done
} >"$RUN_DIR/values.yaml"

PIDS=()
cleanup() {
  local status=$?
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  exit "$status"
}
trap cleanup EXIT INT TERM

log "starting kubesim with $CLUSTERS clusters"
"$BIN/kubesim" serve --clusters "$CLUSTERS" --kubeconfig-dir "$RUN_DIR/kubeconfigs" --controllers \
  >"$RUN_DIR/kubesim.out" 2>"$RUN_DIR/kubesim.log" &
PIDS+=("$!")
for _ in $(seq 1 300); do
  grep -q "kubesim ready" "$RUN_DIR/kubesim.out" 2>/dev/null && break
  kill -0 "${PIDS[0]}" 2>/dev/null || { cat "$RUN_DIR/kubesim.log" >&2; exit 1; }
  sleep 0.1
done
cat "$RUN_DIR/kubesim.out"

log "starting emco-server on $LISTEN, gRPC on $GRPC_LISTEN (embedded store in $RUN_DIR/data)"
"$BIN/emco-server" --listen "$LISTEN" --grpc-listen "$GRPC_LISTEN" --data-dir "$RUN_DIR/data" \
  >"$RUN_DIR/emco-server.log" 2>&1 &
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

CTL="$BIN/emcoctl --server $SERVER"
VALUES="-v $RUN_DIR/values.yaml"
DIG="$SERVER/v2/projects/demo/composite-apps/http/v1/deployment-intent-groups/http-dig"
log "deploying the example composite app (http-server + http-client) to every 'edge' cluster"
$CTL apply -f examples/emcoctl/project.yaml $VALUES >"$RUN_DIR/emcoctl.log"
$CTL apply -f examples/emcoctl/instantiate.yaml $VALUES -w 120 >>"$RUN_DIR/emcoctl.log"
cat <<MSG

emco-server is listening on $SERVER (gRPC on $GRPC_LISTEN) with $CLUSTERS kubesim clusters
registered, and the example composite app (http-server + http-client, through logical cloud 'lc',
to every cluster labelled 'edge') is deployed.

Dashboard: $SERVER/ui/#/dig/demo/http/v1/http-dig

Try next:

  $CTL status -f examples/emcoctl/instantiate.yaml $VALUES
  curl -s '$DIG/status?status=ready'
  kubectl --kubeconfig $RUN_DIR/kubeconfigs/c1.kubeconfig get deployments,pods,services -A
  $BIN/kubesim fault c2 --down --kubeconfig-dir $RUN_DIR/kubeconfigs    # c2 stops answering: its
      # resources turn Unknown in status after the grace period (--cluster-grace-seconds, 40 s)
  $BIN/kubesim fault c2 --clear --kubeconfig-dir $RUN_DIR/kubeconfigs   # c2 answers again

Remove it again (and deploy it again with 'apply'):

  $CTL delete -f examples/emcoctl/instantiate.yaml $VALUES -w 120
  $CTL delete -f examples/emcoctl/project.yaml $VALUES

More: curl -s $SERVER/v2/cluster-providers/kubesim/clusters?withLabels=true
      curl -s $SERVER/v2/openapi.yaml | head

Logs: $RUN_DIR/emco-server.log, $RUN_DIR/kubesim.log. Press Ctrl-C to stop both.
MSG
wait -n "${PIDS[@]}"
