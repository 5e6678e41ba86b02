#!/usr/bin/env bash
# The fault drill: the ReplicaSet sample as a process against the embedded API server as a process
# (ferrokube-apiserver --kubelet), with the server's faults on for the whole run (5% of writes
# answered 500, 5% of updates and patches answered 409, watch delivery $WATCH_DELAY_MS (200) ms
# late), through a churn of 25 ReplicaSets: create at 4 replicas, scale to 7, scale to 3, then twice
# kill one pod of each. The minimum work is 225 pod creates (100 + 75 + 50) and 100 pod deletes. At the end it
# reads the controller's own /metrics and prints one JSON line:
#
#   creates, deletes            pods_created_total / pods_deleted_total (the minimum: 225 / 100)
#   panics                      controller_runtime_reconcile_panics_total
#   retries                     workqueue_retries_total: every key added back with a delay, which
#                               is more than failures (see below)
#   retries_by_cause            that count taken apart: failed syncs (rate-limited retries: 500s,
#                               409s, ...), stale-cache skips (requeued after a pause), scale-downs
#                               held back by the stabilization window (requeued after it)
#   failed_by_error             the failed syncs by the error the controller logged
#
#   scripts/fault-drill.sh                        # the sample with its defaults
#   WINDOW=0 scripts/fault-drill.sh               # no scale-down stabilization (upstream's way)
#   WATCH_DELAY_MS=0 scripts/fault-drill.sh       # watches on time (fewer stale-cache skips)
#   PROFILE=release REPLICASETS=10 scripts/fault-drill.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=${PROFILE:-debug}
REPLICASETS=${REPLICASETS:-25}
WINDOW=${WINDOW:-1}
WATCH_DELAY_MS=${WATCH_DELAY_MS:-200}
PORT=${PORT:-17795}
METRICS=${METRICS:-127.0.0.1:17796}
STATE=${STATE:-/tmp/ferrokube-fault-drill}
bin=target/$PROFILE

if [ "$PROFILE" = release ]; then
  nice -n 19 cargo build --release -q -p ferrokube-examples --bin replicaset
  nice -n 19 cargo build --release -q -p ferrokube-apiserver --bin ferrokube-apiserver
else
  nice -n 19 cargo build -q -p ferrokube-examples --bin replicaset
  nice -n 19 cargo build -q -p ferrokube-apiserver --bin ferrokube-apiserver
fi

mkdir -p "$STATE"
rm -f "$STATE/kubeconfig"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

"$bin/ferrokube-apiserver" --kubelet --port "$PORT" --kubeconfig "$STATE/kubeconfig" >"$STATE/server.log" 2>&1 &
pids+=($!)
export KUBECONFIG=$STATE/kubeconfig
for _ in $(seq 1 100); do
  [ -s "$KUBECONFIG" ] && kubectl get --raw /readyz >/dev/null 2>&1 && break
  sleep 0.1
done
url=http://127.0.0.1:$PORT

# The driver's own writes meet the faults too: each is repeated until it goes through.
persist() {
  local i
  for i in $(seq 1 50); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "fault-drill: gave up on: $*" >&2
  return 1
}

# Waits until every ReplicaSet has `want` live pods and its status says so.
converge() {
  local want=$1 i
  for i in $(seq 1 1200); do
    if kubectl get rs,pods -n drill -o json | python3 -c '
import json, sys
want, n = int(sys.argv[1]), int(sys.argv[2])
items = json.load(sys.stdin)["items"]
rs = [o for o in items if o["kind"] == "ReplicaSet"]
pods = [o for o in items if o["kind"] == "Pod" and not o["metadata"].get("deletionTimestamp")]
ok = len(rs) == n and len(pods) == want * n and all(
    r.get("status", {}).get("replicas") == want
    and r.get("status", {}).get("observedGeneration") == r["metadata"].get("generation")
    for r in rs)
sys.exit(0 if ok else 1)
' "$want" "$REPLICASETS"; then
      return 0
    fi
    sleep 0.1
  done
  echo "fault-drill: no convergence at $want replicas" >&2
  return 1
}

kubectl create namespace drill >/dev/null
RUST_LOG=warn "$bin/replicaset" --kubeconfig "$KUBECONFIG" --qps 20 --burst 30 --workers 5 \
  --scale-down-window "$WINDOW" --http-addr "$METRICS" 2>"$STATE/controller.log" &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "http://$METRICS/readyz" >/dev/null && break; sleep 0.1; done

curl -sf -X PUT "$url/ferrokube/faults" -H 'Content-Type: application/json' \
  -d '{"seed":7,"failWrites":0.05,"conflictUpdates":0.05,"watchDelayMs":'"$WATCH_DELAY_MS"'}' >/dev/null
started=$(date +%s.%N)
load=$(cut -d' ' -f1-3 /proc/loadavg)

for i in $(seq 0 $((REPLICASETS - 1))); do
  cat >"$STATE/rs-$i.yaml" <<EOF
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs-$i, namespace: drill}
spec:
  replicas: 4
  selector: {matchLabels: {app: rs-$i}}
  template:
    metadata: {labels: {app: rs-$i}}
    spec: {containers: [{name: main, image: registry.invalid/pause:1}]}
EOF
  # A create answered 500 was not made; one that exists already counts as made.
  persist sh -c "kubectl create -f '$STATE/rs-$i.yaml' || kubectl get -f '$STATE/rs-$i.yaml'"
done
converge 4
for i in $(seq 0 $((REPLICASETS - 1))); do persist kubectl scale rs -n drill "rs-$i" --replicas=7; done
converge 7
for i in $(seq 0 $((REPLICASETS - 1))); do persist kubectl scale rs -n drill "rs-$i" --replicas=3; done
converge 3
for round in 1 2; do
  for i in $(seq 0 $((REPLICASETS - 1))); do
    victim=$(kubectl get pods -n drill -l "app=rs-$i" -o jsonpath='{.items[0].metadata.name}')
    persist kubectl delete pod -n drill "$victim" --grace-period=0 --wait=false
  done
  converge 3
done
seconds=$(python3 -c "import time; print(round(time.time() - $started, 1))")
curl -sf -X PUT "$url/ferrokube/faults" -H 'Content-Type: application/json' -d '{}' >/dev/null

curl -sf "http://$METRICS/metrics" >"$STATE/metrics.txt"
python3 - "$STATE/metrics.txt" "$STATE/controller.log" "$REPLICASETS" "$WINDOW" "$seconds" "$load" "$WATCH_DELAY_MS" \
  "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!benches' || echo +changes)" <<'PY'
import json, re, sys
metrics, log, n, window, seconds, load, delay, code = sys.argv[1:9]
def total(name, **labels):
    s = 0.0
    for line in open(metrics):
        if line.startswith("#"):
            continue
        m = re.match(r'([a-zA-Z_:]+)(\{[^}]*\})?\s+(\S+)', line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            s += float(m.group(3))
    return int(s)
failed = {}
for line in open(log):
    if "reconcile failed" not in line:
        continue
    if "409" in line or "onflict" in line:
        why = "409 conflict"
    elif "500" in line or "nternal" in line or "injected" in line:
        why = "500 injected"
    elif "timed out" in line or "imeout" in line:
        why = "timeout"
    else:
        why = "other"
    failed[why] = failed.get(why, 0) + 1
n = int(n)
row = {
    "drill": "fault_drill", "code": code, "replicasets": n, "scale_down_window_s": float(window),
    "faults": "failWrites 0.05 (500), conflictUpdates 0.05 (409)", "watch_delay_ms": int(delay),
    "creates": total("replicaset_controller_pods_created_total"), "creates_minimum": 9 * n,
    "deletes": total("replicaset_controller_pods_deleted_total"), "deletes_minimum": 4 * n,
    "panics": total("controller_runtime_reconcile_panics_total"),
    "retries": total("workqueue_retries_total"),
    "retries_by_cause": {
        "failed_syncs": total("controller_runtime_reconcile_total", result="error"),
        "stale_skips": total("stale_sync_skips_total"),
        "held_back_scale_downs": total("controller_runtime_reconcile_total", result="requeue_after"),
        "rate_limited_requeues": total("controller_runtime_reconcile_total", result="requeue"),
    },
    "failed_by_error": failed,
    "syncs": total("controller_runtime_reconcile_total"),
    "status_conflicts": total("replicaset_controller_status_conflicts_total"),
    "seconds": float(seconds), "load": load,
}
print(json.dumps(row, sort_keys=True))
PY
