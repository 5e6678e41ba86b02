#!/usr/bin/env bash
# Server-side sharding benchmark (issue 45 item 4, sharded part): what one member of a ring of 1,
# 2 and 4 caches and costs, against one unsharded process, on the same kube-apiserver and the same
# objects (a ReplicaSet and its Pods in each of NAMESPACES namespaces).
#
#   K8S_VERSION=1.37.2 STATE=/tmp/x APISERVER_PORT=.. ETCD_PORT=.. \
#     APISERVER_FLAGS=--feature-gates=ShardedListAndWatch=true scripts/kube-apiserver.sh up
#   eval "$(K8S_VERSION=1.37.2 STATE=/tmp/x ... scripts/kube-apiserver.sh env)"
#   scripts/bench-shard.sh                 # ROUNDS=3 NAMESPACES=100 PODS=100 by default; SEED=0 skips seeding
#
# Each round runs, one after the other, the unsharded process, then rings of 1, 2 and 4 members
# (each member a process of its own, `bench_shard member`), and appends one JSON line per process
# to OUT, with the machine's load average (`uptime`) when the run ended: the machine is shared.
# Every member reports once it acts on the full ring and its caches held still for 3 s; the ring's
# Leases are deleted between runs so each starts from nothing. At the end, the medians per
# configuration. The binary is the debug build (cargo build, no release profile), as for every
# configuration alike.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${KUBECONFIG:?KUBECONFIG of a kube-apiserver started with ShardedListAndWatch (see above)}"
NAMESPACES=${NAMESPACES:-100}
PODS=${PODS:-100}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-benches/shard/members-$(date -u +%F).jsonl}
LEASES=shard-bench

nice -n 19 cargo build -q -p ferrokube-examples --bin bench_shard
bin=target/debug/bench_shard
mkdir -p "$(dirname "$OUT")"
kubectl create namespace "$LEASES" >/dev/null 2>&1 || true
# SEED=0: the objects are there already (a seed is idempotent, but 10k refused creates take a while).
[ "${SEED:-1}" = 0 ] || nice -n 19 "$bin" seed --namespaces "$NAMESPACES" --pods "$PODS" 2>/dev/null

load() { uptime | sed 's/.*load average: //'; }

# One configuration: $1 members (0: unsharded); lines to OUT with the run's name and load.
run() {
  local members=$1 round=$2 pids=() tmp
  tmp=$(mktemp -d)
  kubectl -n "$LEASES" delete leases --all >/dev/null 2>&1 || true
  if [ "$members" = 0 ]; then
    "$bin" member --unsharded --run "round-$round" >"$tmp/unsharded" &
    pids+=($!)
  else
    for i in $(seq 1 "$members"); do
      "$bin" member --ring "bench$members" --identity "m$i" --members "$members" \
        --lease-namespace "$LEASES" --run "round-$round" >"$tmp/m$i" &
      pids+=($!)
    done
  fi
  # Every process prints its line once settled; members then stay in the ring until told to go.
  local expected=${#pids[@]} deadline=$((SECONDS + 600))
  while [ "$(cat "$tmp"/* 2>/dev/null | grep -c '^{')" -lt "$expected" ]; do
    if [ $SECONDS -gt $deadline ]; then echo "[bench-shard] not settled in 600 s" >&2; kill -INT "${pids[@]}" 2>/dev/null; exit 1; fi
    sleep 1
  done
  local now
  now=$(load)
  kill -INT "${pids[@]}" 2>/dev/null || true
  for pid in "${pids[@]}"; do wait "$pid" || true; done
  for f in "$tmp"/*; do
    python3 -c 'import json,sys; l=json.loads(sys.stdin.read()); l["load_average"]=sys.argv[1]; print(json.dumps(l))' "$now" <"$f" >>"$OUT"
  done
  rm -rf "$tmp"
}

for round in $(seq 1 "$ROUNDS"); do
  for members in 0 1 2 4; do
    echo "[bench-shard] round $round: $([ "$members" = 0 ] && echo unsharded || echo "$members members")" >&2
    run "$members" "$round"
  done
done

python3 - "$OUT" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
base = [r for r in rows if r["who"] == "unsharded"]
b_objects = statistics.median(r["pods_cached"] + r["replicasets_cached"] for r in base)
b_rss = statistics.median(r["rss_kib"] for r in base)
print(f"unsharded: {b_objects:.0f} objects, RSS {b_rss/1024:.1f} MiB (median of {len(base)})")
for n in (1, 2, 4):
    sel = [r for r in rows if r["who"] != "unsharded" and r["members"] == n]
    if not sel:
        continue
    top_objects = statistics.median(max(r["pods_cached"] + r["replicasets_cached"] for r in sel if r["run"] == run) for run in {r["run"] for r in sel})
    top_rss = statistics.median(max(r["rss_kib"] for r in sel if r["run"] == run) for run in {r["run"] for r in sel})
    settle = statistics.median(max(r["seconds_to_settled"] for r in sel if r["run"] == run) for run in {r["run"] for r in sel})
    print(f"{n} members: largest member {top_objects:.0f} objects ({top_objects/b_objects:.2f}x), "
          f"RSS {top_rss/1024:.1f} MiB ({top_rss/b_rss:.2f}x), all settled after {settle:.1f} s (medians over rounds)")
EOF
