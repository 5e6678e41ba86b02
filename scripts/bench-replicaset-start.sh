#!/usr/bin/env bash
# The ReplicaSet controller's start at scale: how long ours (examples/src/replicaset) and
# kube-controller-manager (--controllers=replicaset, of the same release as the server) take, from
# their process start, until every one of N ReplicaSets that already exist is observed (its
# status.observedGeneration equals its metadata.generation). The ReplicaSets are made while no
# controller runs, so each controller starts with all of them unobserved: it has to list them (and
# the Pods), sync every one and write every status, under the same client limits (QPS 20, burst
# 30: kube-controller-manager's defaults; 5 workers, its --concurrent-replicaset-syncs default).
# With REPLICAS=0 (the default) no Pod is made, so the figure is the start itself: caches, the
# queue and N status writes (at QPS 20, N / 20 seconds is the floor for both).
#
#   K8S_VERSION=1.37.2 STATE=/tmp/x APISERVER_PORT=... ETCD_PORT=... scripts/bench-replicaset-start.sh
#   REPLICASETS=1000 REPS=3 WHO="ours upstream" OUT=target/bench-peers/rs-start.jsonl scripts/bench-replicaset-start.sh
#
# Runs are interleaved (odd rounds ours first, even rounds upstream first). One JSON line per run
# on stdout and in $OUT: seconds until the first and until the last ReplicaSet was observed (polled
# every 0.25 s, so ±0.25 s), the controller's peak RSS (VmHWM) and the machine's load (`uptime`).
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-3}
REPLICASETS=${REPLICASETS:-1000}
REPLICAS=${REPLICAS:-0}
WHO=${WHO:-ours upstream}
OUT=${OUT:-target/bench-peers/rs-start.jsonl}
NAMESPACE=${NAMESPACE:-rs-start}
OURS_METRICS=${OURS_METRICS:-127.0.0.1:18189}
KCM_SECURE_PORT=${KCM_SECURE_PORT:-10357}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"

log() { echo "[bench-rs-start] $*" >&2; }

scripts/kube-apiserver.sh up >&2
eval "$(scripts/kube-apiserver.sh env)"
export KUBECONFIG FERROKUBE_KCM
nice -n 19 cargo build --release -q -p ferrokube-examples --bin replicaset >&2

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# N ReplicaSets as one List, made once and created again before every run.
python3 - "$REPLICASETS" "$REPLICAS" "$NAMESPACE" >"$tmp/replicasets.json" <<'PY'
import json, sys
n, replicas, namespace = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
items = []
for i in range(n):
    labels = {"app": "rs-start", "rs": f"rs-{i:05}"}
    items.append({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": f"rs-{i:05}", "namespace": namespace},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}},
    })
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY

# Deletes and makes the ReplicaSets again while no controller runs: all of them unobserved.
# (No namespace is deleted: without kube-controller-manager's namespace controller it would stay
# Terminating. ReplicaSets have no finalizers, and with REPLICAS=0 no Pods: they go at once.)
fresh_replicasets() {
  kubectl get namespace "$NAMESPACE" >/dev/null 2>&1 || kubectl create namespace "$NAMESPACE" >/dev/null
  # (kubectl's own --wait can hang here: poll instead.)
  kubectl delete rs --all -n "$NAMESPACE" --wait=false >/dev/null
  kubectl delete pods --all -n "$NAMESPACE" --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
  local waited=0
  until [ "$(kubectl get rs,pods -n "$NAMESPACE" --no-headers 2>/dev/null | wc -l)" -eq 0 ]; do
    waited=$((waited + 1))
    [ "$waited" -lt 240 ] || { log "the old ReplicaSets or Pods did not go"; exit 1; }
    sleep 0.5
  done
  kubectl create -f "$tmp/replicasets.json" >/dev/null
  local made
  made=$(kubectl get rs -n "$NAMESPACE" --no-headers | wc -l)
  [ "$made" -eq "$REPLICASETS" ] || { log "made $made ReplicaSets, not $REPLICASETS"; exit 1; }
}

# How many ReplicaSets are observed (and, with REPLICAS > 0, report their replicas).
observed() {
  kubectl get rs -n "$NAMESPACE" -o json | python3 -c '
import json, sys
want = int(sys.argv[1])
items = json.load(sys.stdin)["items"]
print(sum(1 for rs in items
          if rs.get("status", {}).get("observedGeneration") == rs["metadata"]["generation"]
          and rs.get("status", {}).get("replicas", 0) == want))' "$REPLICAS"
}

run_one() {
  local who=$1 pid load start first="" now count
  fresh_replicasets
  load=$(uptime)
  start=$(date +%s.%N)
  case $who in
    ours)
      RUST_LOG=error target/release/replicaset --kubeconfig "$KUBECONFIG" \
        --qps 20 --burst 30 --workers 5 --http-addr "$OURS_METRICS" 2>"$tmp/$who.log" &
      ;;
    upstream)
      "$FERROKUBE_KCM" --kubeconfig "$KUBECONFIG" --controllers=replicaset --leader-elect=false \
        --secure-port="$KCM_SECURE_PORT" --bind-address=127.0.0.1 \
        --authentication-kubeconfig="$KUBECONFIG" --authorization-kubeconfig="$KUBECONFIG" \
        --kube-api-qps=20 --kube-api-burst=30 --concurrent-replicaset-syncs=5 2>"$tmp/$who.log" &
      ;;
    *) log "unknown controller $who (ours or upstream)"; exit 2 ;;
  esac
  pid=$!
  while :; do
    count=$(observed)
    now=$(date +%s.%N)
    if [ -z "$first" ] && [ "$count" -gt 0 ]; then first=$now; fi
    [ "$count" -ge "$REPLICASETS" ] && break
    if ! kill -0 "$pid" 2>/dev/null; then
      log "$who exited; its log:"; tail -n 20 "$tmp/$who.log" >&2; exit 1
    fi
    if python3 -c "import sys; sys.exit(0 if $now - $start > 900 else 1)"; then
      log "$who did not observe every ReplicaSet within 900 s ($count of $REPLICASETS)"
      kill "$pid"; exit 1
    fi
    sleep 0.25
  done
  local hwm
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  python3 - "$who" "$REPLICASETS" "$REPLICAS" "$start" "$first" "$now" "$hwm" "$load" <<'PY' | tee -a "$OUT"
import json, sys
who, n, replicas, start, first, end, hwm, load = sys.argv[1:]
print(json.dumps({"who": who, "replicasets": int(n), "replicas": int(replicas),
                  "first_observed_s": round(float(first) - float(start), 3),
                  "all_observed_s": round(float(end) - float(start), 3),
                  "peak_rss_kib": int(hwm), "qps": 20, "burst": 30, "workers": 5,
                  "uptime": load.strip()}))
PY
}

for round in $(seq 1 "$REPS"); do
  order=$WHO
  ((round % 2)) || order=$(echo "$WHO" | tr ' ' '\n' | tac | tr '\n' ' ')
  for who in $order; do
    run_one "$who"
  done
done
kubectl delete rs --all -n "$NAMESPACE" --wait=false >/dev/null
log "JSON lines in $OUT"
