#!/usr/bin/env bash
# The ReplicaSet controller scale benchmark: ours (examples/src/replicaset) and the upstream
# kube-controller-manager (--controllers=replicaset, built from the same Debian source as the
# apiserver), one at a time, interleaved, on the real kube-apiserver (scripts/kube-apiserver.sh).
#
#   scripts/bench-replicaset.sh                       # 1 round: ours, then upstream; 500 RS x 10
#   REPS=2 scripts/bench-replicaset.sh                # round 2 runs upstream first
#   REPS=3 REPLICASETS=100 scripts/bench-replicaset.sh
#   BEFORE=2b89cfd WHO="before ours" REPS=2 scripts/bench-replicaset.sh
#                                                     # our controller at an older commit vs now
#   WHO="shards-1 shards-2 shards-3 shards-4" scripts/bench-replicaset.sh
#                                                     # ours sharded across N replicas (--shard-ring),
#                                                     # each with QPS 20 / burst 30 of its own
#
#   K8S_VERSION=1.37.2 FLAP=20 REPS=2 scripts/bench-replicaset.sh
#                                                     # on the current release (its kube-controller-
#                                                     # manager has the staleness mitigation on), with
#                                                     # a fourth phase: 20 ReplicaSets flapping
#                                                     # between 0 and 10 replicas (FLIPS, FLAP_MS)
#
# Both get the same client limits (QPS 20, burst 30: kube-controller-manager's defaults) and 5
# workers (its --concurrent-replicaset-syncs default). After each run the script reads each
# controller's own count of syncs it skipped on a stale cache from its /metrics: ours
# `stale_sync_skips_total` (--http-addr), upstream's `replicaset_controller_stale_sync_skips_total`
# (1.36 and later; its secure port with /metrics allowed without authorization); the line says
# `stale_skips=n/a` where a controller has no such count (1.20). The driver
# (examples/src/bin/bench_replicaset.rs) runs the phases and prints, per phase, the time to converge
# and the controller's API requests (from kube-apiserver's apiserver_request_total, minus the
# driver's own); this script adds each controller's peak RSS (VmHWM). Results: lines starting with
# RESULT, also in $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-1}
REPLICASETS=${REPLICASETS:-500}
REPLICAS=${REPLICAS:-10}
OUT=${OUT:-/tmp/ferrokube-bench-replicaset.txt}
# Which controllers run, in the order of odd rounds (even rounds reverse it).
WHO=${WHO:-ours upstream}
# With BEFORE=<git revision>, "before" is our controller as it was at that revision, built from a
# git worktree into a target directory of its own (target/before): sharing ours would let the two
# builds overwrite each other's binary, since cargo gives both the same file name. A revision from
# before the samples became a package of their own (no examples/Cargo.toml) is built as it was then,
# as the root package's example.
BEFORE=${BEFORE:-}
# The flap phase (bench_replicaset --flap): how many ReplicaSets flap (0: none), how often, how long.
K8S_VERSION=${K8S_VERSION:-1.20.2}
FLAP=${FLAP:-0}
FLIPS=${FLIPS:-20}
FLAP_MS=${FLAP_MS:-300}
OURS_METRICS=${OURS_METRICS:-127.0.0.1:18089}
KCM_SECURE_PORT=${KCM_SECURE_PORT:-10257}

scripts/kube-apiserver.sh up
eval "$(scripts/kube-apiserver.sh env)"
export KUBECONFIG FERROKUBE_KCM
# Both controllers cache every Pod in the cluster, so leftovers (e.g. the informer benchmark's seeded
# Pods) would inflate both sides' memory and time: start from a cluster with no Pods.
if [ "$(kubectl get --raw '/api/v1/pods?limit=1' | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" != 0 ]; then
  echo "bench-replicaset: the cluster already holds Pods; run scripts/kube-apiserver.sh down for a fresh one" >&2
  exit 1
fi
# BIN_DIR=<dir>: run the replicaset (replicaset-before) and bench_replicaset binaries found there, without building (a
# sweep builds once and copies them out of target/, so that a build while it runs cannot change the
# controller between two of its runs).
BIN_DIR=${BIN_DIR:-}
[ -n "$BIN_DIR" ] || cargo build --release -q -p ferrokube-examples --bin replicaset --bin bench_replicaset
if [ -n "$BEFORE" ]; then
  tree=$(mktemp -d)
  git worktree add -q --detach "$tree" "$BEFORE"
  if [ -f "$tree/examples/Cargo.toml" ]; then
    cargo build --release -q --manifest-path "$tree/Cargo.toml" --target-dir target/before -p ferrokube-examples --bin replicaset
    cp target/before/release/replicaset target/release/replicaset-before
  else
    cargo build --release -q --manifest-path "$tree/Cargo.toml" --target-dir target/before --example replicaset
    cp target/before/release/examples/replicaset target/release/replicaset-before
  fi
  git worktree remove --force "$tree"
  if cmp -s target/release/replicaset target/release/replicaset-before; then
    echo "bench-replicaset: the controller at $BEFORE is the same binary as now; nothing to compare" >&2
    exit 1
  fi
fi
: >"$OUT"

# Sharded: N replicas of ours in one ring (Leases in the default namespace), each with the same
# client limits as a single controller; peak RSS is reported per replica (max and mean).
run_shards() {
  local who=$1 n=${1#shards-} pids=() i ring
  ring="bench-$(date +%s)"
  for i in $(seq 1 "$n"); do
    RUST_LOG=error "${BIN_DIR:-target/release}/replicaset" --kubeconfig "$KUBECONFIG" \
      --qps 20 --burst 30 --workers 5 --shard-ring "$ring" --identity "r$i" \
      --lease-namespace default 2>"/tmp/ferrokube-bench-replicaset-$who-$i.log" &
    pids+=($!)
  done
  # Every member holds its Lease and one of them assigns, well within this.
  sleep 8
  "${BIN_DIR:-target/release}/bench_replicaset" --label "$who" \
    --replicasets "$REPLICASETS" --replicas "$REPLICAS" | tee -a "$OUT"
  local rss=() max=0 sum=0 v
  for pid in "${pids[@]}"; do
    v=$(awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status")
    rss+=("$v")
    max=$(python3 -c "print(max($max, $v))")
    sum=$(python3 -c "print($sum + $v)")
  done
  echo "RESULT $who shards=$n peak_rss_mib=$max mean_rss_mib=$(python3 -c "print(round($sum / $n, 1))") rss_per_replica_mib=$(IFS=,; echo "${rss[*]}")" |
    tee -a "$OUT"
  kill "${pids[@]}"
  wait "${pids[@]}" 2>/dev/null || true
  # The ring's Leases (released on SIGTERM, but left behind).
  for i in $(seq 1 "$n"); do kubectl delete lease -n default "$ring-shard-r$i" >/dev/null 2>&1 || true; done
  kubectl delete lease -n default "$ring-assigner" >/dev/null 2>&1 || true
}

run_one() {
  local who=$1 log=/tmp/ferrokube-bench-replicaset-$1.log pid
  case $who in
    shards-*)
      run_shards "$who"
      return
      ;;
    ours | before)
      local binary=${BIN_DIR:-target/release}/replicaset
      [ "$who" = before ] && binary=${BIN_DIR:-target/release}/replicaset-before
      RUST_LOG=error "$binary" --kubeconfig "$KUBECONFIG" \
        --qps 20 --burst 30 --workers 5 --http-addr "$OURS_METRICS" 2>"$log" &
      ;;
    upstream)
      local ports
      if [ "$K8S_VERSION" = 1.20.2 ]; then
        ports=(--port=0 --secure-port=0) # 1.20 has no stale-skip count to read
      else
        # --port is gone since 1.24; /metrics on the secure port, open to this script.
        ports=(--secure-port="$KCM_SECURE_PORT" --bind-address=127.0.0.1
          --authentication-kubeconfig="$KUBECONFIG" --authorization-kubeconfig="$KUBECONFIG"
          --authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics)
      fi
      "$FERROKUBE_KCM" --kubeconfig "$KUBECONFIG" --controllers=replicaset --leader-elect=false \
        "${ports[@]}" --kube-api-qps=20 --kube-api-burst=30 \
        --concurrent-replicaset-syncs=5 2>"$log" &
      ;;
  esac
  pid=$!
  sleep 5 # both have synced their caches well within this
  "${BIN_DIR:-target/release}/bench_replicaset" --label "$who" \
    --replicasets "$REPLICASETS" --replicas "$REPLICAS" \
    --flap "$FLAP" --flips "$FLIPS" --flap-ms "$FLAP_MS" | tee -a "$OUT"
  echo "RESULT $who peak_rss_mib=$(awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status") stale_skips=$(stale_skips "$who")" |
    tee -a "$OUT"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

# The syncs a controller skipped on a stale cache, summed over its labels, from its /metrics.
stale_skips() {
  local text metric
  case $1 in
    ours | before)
      text=$(curl -sf "http://$OURS_METRICS/metrics") || { echo n/a; return; }
      metric=stale_sync_skips_total
      ;;
    upstream)
      [ "$K8S_VERSION" = 1.20.2 ] && { echo n/a; return; }
      text=$(curl -skf "https://127.0.0.1:$KCM_SECURE_PORT/metrics") || { echo n/a; return; }
      metric=replicaset_controller_stale_sync_skips_total
      ;;
    *) echo n/a; return ;;
  esac
  # No line yet means the counter was never touched: 0.
  echo "$text" | awk -v m="$metric" '$1 == m || index($1, m "{") == 1 { s += $2 } END { print s + 0 }'
}

# Odd rounds run ours first, even rounds upstream first, so neither always gets the fresher server.
for round in $(seq 1 "$REPS"); do
  order=$WHO
  ((round % 2)) || order=$(echo "$WHO" | tr ' ' '\n' | tac | tr '\n' ' ')
  for who in $order; do
    run_one "$who"
  done
done

# The same results as JSON lines (what benches/replicaset/ keeps): one object per RESULT line.
python3 - "$OUT" "$REPLICASETS" "$REPLICAS" >"$OUT.jsonl" <<'PY'
import json, re, sys
out, replicasets, replicas = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for line in open(out):
    if not line.startswith("RESULT "):
        continue
    who, rest = line.split()[1], line.strip().split(" ", 2)[2]
    row = {"who": who, "replicasets": replicasets, "replicas": replicas}
    # key=value pairs whose keys may hold spaces ("PUT replicasets/status=1000", "409 PUT ...=3")
    for key, value in re.findall(r"((?:[^=\s]+ )*[^=\s]+)=(\S+)", rest):
        try:
            row[key] = float(value) if "." in value else int(value)
        except ValueError:
            row[key] = value
    print(json.dumps(row))
PY
echo "bench-replicaset: JSON lines in $OUT.jsonl" >&2
