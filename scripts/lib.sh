# Shared helpers of scripts/test.sh and scripts/run.sh: installing what is missing, finding free
# ports, starting the external services.

log() { printf '\n==> %s\n' "$*" >&2; }

# Runs a named step and prints how long it took, so CI logs show where the time goes.
step() {
  local name=$1
  shift
  log "$name"
  local start=$SECONDS
  "$@"
  log "$name: done in $((SECONDS - start))s"
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
  local missing=()
  local pkg
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  fi
}

# The repo-local venv holds the Python tools; it is ignored by git and reused across runs.
VENV="$ROOT/.venv"
venv_install() {
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV"
    python3 -m venv "$VENV"
  fi
  local missing=()
  local spec name
  for spec in "$@"; do
    name=${spec%%[=<>]*}
    "$VENV/bin/python" -m pip show -q "$name" >/dev/null 2>&1 || missing+=("$spec")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "pip install ${missing[*]}"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${missing[@]}"
  fi
}

install_test_deps() {
  # chromium runs the dashboard's browser tests, driven by Playwright (the library only: its own
  # browser download is not used).
  apt_install etcd-server etcd-client protobuf-compiler xz-utils openssl chromium
  # temporalio: the workflow client and worker of the workflow tests (emco-workflows).
  venv_install nx-27017==0.8.1 "maturin>=1.5,<2" pytest mypy "playwright>=1.40,<2" \
    "temporalio>=1.7,<2"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Waits until a TCP port on 127.0.0.1 accepts connections, or fails after $2 seconds.
wait_port() {
  local port=$1 timeout=${2:-30} waited=0
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    sleep 0.2
    waited=$((waited + 1))
    if [ $waited -ge $((timeout * 5)) ]; then
      log "nothing listens on 127.0.0.1:$port after ${timeout}s"
      return 1
    fi
  done
}

# Starts etcd on free loopback ports with its data under $1; sets ETCD_PID and EMCO_TEST_ETCD.
start_etcd() {
  local dir=$1 client peer
  mkdir -p "$dir"
  client=$(free_port)
  peer=$(free_port)
  etcd --name emco-test --data-dir "$dir/data" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "emco-test=http://127.0.0.1:$peer" >"$dir/etcd.log" 2>&1 &
  ETCD_PID=$!
  EMCO_TEST_ETCD="http://127.0.0.1:$client"
  local i
  for i in $(seq 1 100); do
    if ETCDCTL_API=3 etcdctl --endpoints "$EMCO_TEST_ETCD" endpoint health >/dev/null 2>&1; then
      return 0
    fi
    if ! kill -0 "$ETCD_PID" 2>/dev/null; then break; fi
    sleep 0.2
  done
  log "etcd did not become healthy; its log:"
  cat "$dir/etcd.log" >&2
  return 1
}

# Starts nx-27017 (MongoDB wire protocol over SQLite) on a free loopback port with its data under
# $1; sets MONGO_PID and EMCO_TEST_MONGO.
start_mongo() {
  local dir=$1 port
  mkdir -p "$dir"
  port=$(free_port)
  "$VENV/bin/nx-27017" --host 127.0.0.1 --port "$port" --data-dir "$dir/data" \
    --log-file "$dir/nx.log" --pid-file "$dir/nx.pid" >"$dir/stdout.log" 2>&1 &
  MONGO_PID=$!
  EMCO_TEST_MONGO="mongodb://127.0.0.1:$port"
  if ! wait_port "$port" 30; then
    cat "$dir/stdout.log" "$dir/nx.log" >&2 2>/dev/null || true
    return 1
  fi
}
