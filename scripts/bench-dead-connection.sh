#!/usr/bin/env bash
# The frozen-pool drill (issue 42 item 0): a ReplicaSet controller reaches the API server through a
# proxy that freezes every open connection at once (watches and idle pooled connections: no byte,
# no FIN, no RST; new connections pass), then a ReplicaSet is scaled; measured: seconds from the
# freeze until the controller has created the pod. The driver is examples/src/bin/bench_dead_connection.rs
# (its docs give the steps); this script runs it once per controller, interleaved, on both servers:
#
#   - ours (examples/src/replicaset) over HTTP/1.1 (the client's default) and over HTTP/2
#     (`--http2`, i.e. `Config::http2`), QPS 20 / burst 30, 5 workers;
#   - kube-controller-manager (--controllers=replicaset, --kube-api-qps=20 --kube-api-burst=30
#     --concurrent-replicaset-syncs=5), prebuilt by scripts/k8s-prebuilt.sh;
#   - on kube-apiserver $K8S_VERSION (scripts/kube-apiserver.sh, left running) and on the embedded
#     server as a process (ferrokube-apiserver --tls --no-builtin-controllers: kube-controller-manager
#     runs against it too).
#
#   scripts/bench-dead-connection.sh                     # 2 rounds; odd rounds ours first
#   REPS=3 SERVERS=kube-apiserver scripts/bench-dead-connection.sh
#   PROFILE=debug scripts/bench-dead-connection.sh       # use target/debug (no release build)
#   SETTLE_MS=8000 scripts/bench-dead-connection.sh      # freeze when the pooled connections have
#                                                        # been idle for 8 s (the pool's bound: 10 s)
#
# Output: one JSON line per run on stdout and appended to $OUT (the driver's figures plus the
# commit, the build profile and the server's version); `uptime`'s load is in each line ("load").
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-2}
SERVERS=${SERVERS:-kube-apiserver ferrokube-apiserver}
WHO=${WHO:-ours-http1 ours-http2 kcm}
PROFILE=${PROFILE:-release}
OUT=${OUT:-/tmp/ferrokube-bench-dead-connection.jsonl}
K8S_VERSION=${K8S_VERSION:-1.37.2}
export K8S_VERSION
# Quiet time between the warm-up and the freeze (the driver's --settle-ms).
SETTLE_MS=${SETTLE_MS:-2000}
EMBEDDED_PORT=${EMBEDDED_PORT:-17791}
EMBEDDED_STATE=${EMBEDDED_STATE:-/tmp/ferrokube-bench-dead-connection-embedded}

if [ "$PROFILE" = release ]; then
  nice -n 19 cargo build --release -q -p ferrokube-examples --bin replicaset --bin bench_dead_connection
  nice -n 19 cargo build --release -q -p ferrokube-apiserver --bin ferrokube-apiserver
else
  nice -n 19 cargo build -q -p ferrokube-examples --bin replicaset --bin bench_dead_connection
  nice -n 19 cargo build -q -p ferrokube-apiserver --bin ferrokube-apiserver
fi
bin=target/$PROFILE
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!benches' || echo "+changes")

scripts/kube-apiserver.sh up >&2
eval "$(scripts/kube-apiserver.sh env)"
kas_kubeconfig=$KUBECONFIG
kas_version=$(kubectl --kubeconfig "$kas_kubeconfig" version -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')

embedded_pid=
stop_embedded() {
  [ -n "$embedded_pid" ] && kill "$embedded_pid" 2>/dev/null && wait "$embedded_pid" 2>/dev/null
  embedded_pid=
}
trap stop_embedded EXIT

start_embedded() {
  mkdir -p "$EMBEDDED_STATE"
  rm -f "$EMBEDDED_STATE/kubeconfig"
  "$bin/ferrokube-apiserver" --tls --no-builtin-controllers --port "$EMBEDDED_PORT" \
    --kubeconfig "$EMBEDDED_STATE/kubeconfig" >"$EMBEDDED_STATE/server.log" 2>&1 &
  embedded_pid=$!
  for _ in $(seq 1 100); do
    [ -s "$EMBEDDED_STATE/kubeconfig" ] && kubectl --kubeconfig "$EMBEDDED_STATE/kubeconfig" get --raw /readyz >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "bench-dead-connection: the embedded server did not come up ($EMBEDDED_STATE/server.log)" >&2
  exit 1
}

run_one() {
  local server=$1 who=$2 kubeconfig name version log controller
  case $server in
    kube-apiserver) kubeconfig=$kas_kubeconfig name=kube-apiserver-$K8S_VERSION version=$kas_version ;;
    *) kubeconfig=$EMBEDDED_STATE/kubeconfig name=ferrokube-apiserver version=$commit ;;
  esac
  log=/tmp/ferrokube-bench-dead-connection-$server-$who.log
  case $who in
    ours-http1) controller=("$bin/replicaset" --kubeconfig {kubeconfig} --qps 20 --burst 30 --workers 5) ;;
    ours-http2) controller=("$bin/replicaset" --kubeconfig {kubeconfig} --qps 20 --burst 30 --workers 5 --http2) ;;
    kcm)
      controller=("$FERROKUBE_KCM" --kubeconfig {kubeconfig} --controllers=replicaset --leader-elect=false
        --secure-port=0 --kube-api-qps=20 --kube-api-burst=30 --concurrent-replicaset-syncs=5)
      ;;
  esac
  # The pool's tracing (condemned generations) goes to the log: the evidence when a run is slow.
  RUST_LOG=${RUST_LOG:-warn,ferrokube_client=debug} "$bin/bench_dead_connection" --kubeconfig "$kubeconfig" \
    --label "$who" --server "$name" --settle-ms "$SETTLE_MS" -- "${controller[@]}" 2>"$log" |
    python3 -c '
import json, sys
extra = {"code": sys.argv[1], "profile": sys.argv[2], "server_version": sys.argv[3]}
for line in sys.stdin:
    row = json.loads(line)
    row.update(extra)
    print(json.dumps(row, sort_keys=True))
' "$commit" "$PROFILE" "$version" | tee -a "$OUT"
}

for server in $SERVERS; do
  [ "$server" = ferrokube-apiserver ] && start_embedded
  for round in $(seq 1 "$REPS"); do
    order=$WHO
    ((round % 2)) || order=$(echo "$WHO" | tr ' ' '\n' | tac | tr '\n' ' ')
    for who in $order; do
      run_one "$server" "$who"
    done
  done
  [ "$server" = ferrokube-apiserver ] && stop_embedded
done
echo "bench-dead-connection: JSON lines in $OUT; kube-apiserver left running (scripts/kube-apiserver.sh down)" >&2
