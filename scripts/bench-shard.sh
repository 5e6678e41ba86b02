#!/usr/bin/env bash
# Server-side sharding benchmark (issue 45 item 4, sharded part), two parts on one kube-apiserver
# started with the ShardedListAndWatch gate, release builds:
#
#  1. The sharded ReplicaSet run (RS_ROUNDS rounds, the two modes interleaved, the order swapped
#     each round): RS_NAMESPACES namespaces with a ReplicaSet of RS_REPLICAS pods each and no pods
#     yet; four processes of the sample (`replicaset --shard-ring`, every Manager member) started
#     at once; seconds until every ReplicaSet has its pods and status (cold start: ring formation,
#     fences or assignment, lists, creates), then every ReplicaSet scaled to twice as many (scale
#     up, the ring settled). Server-side (the default, detected) vs labels (`--shard-labels`), same
#     objects, same settings (qps 50, burst 100, lease 6 s / renew 4 s / retry 1 s).
#  2. Members (ROUNDS rounds): what one member of a ring of 1, 2 and 4 caches and costs, against
#     one unsharded process, on the same objects (a ReplicaSet and its Pods in each of NAMESPACES
#     namespaces): objects cached, RSS and peak RSS, bytes its informers read and wrote on the
#     wire (a counting TCP proxy in the member, see examples/src/bin/bench_shard.rs).
#
#   K8S_VERSION=1.37.2 STATE=/tmp/x APISERVER_PORT=.. ETCD_PORT=.. \
#     APISERVER_FLAGS=--feature-gates=ShardedListAndWatch=true scripts/kube-apiserver.sh up
#   eval "$(K8S_VERSION=1.37.2 STATE=/tmp/x ... scripts/kube-apiserver.sh env)"
#   scripts/bench-shard.sh          # PARTS="rs members" ROUNDS=3 RS_ROUNDS=3 NAMESPACES=100 PODS=100 ...
#
# RS_CONFIGS (default "server-side labels") lists the ReplicaSet run's configurations, each a mode,
# optionally `=DIR` for the sample's binary from another build (e.g. "server-side
# server-side=/tmp/old-bin labels"), recorded as the line's `variant`; their order rotates by one
# each round.
#
# One JSON line per process (members) or per run (ReplicaSet run) goes to MEMBERS_OUT / RS_OUT,
# with the machine's load average (`uptime`) when it ended: the machine is shared. The Leases are
# deleted between runs and each run has a ring of its own, so each starts from nothing. At the end,
# the medians per configuration.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${KUBECONFIG:?KUBECONFIG of a kube-apiserver started with ShardedListAndWatch (see above)}"
PARTS=${PARTS:-rs members}
NAMESPACES=${NAMESPACES:-100}
PODS=${PODS:-100}
ROUNDS=${ROUNDS:-3}
RS_ROUNDS=${RS_ROUNDS:-3}
RS_NAMESPACES=${RS_NAMESPACES:-40}
RS_REPLICAS=${RS_REPLICAS:-25}
DAY=$(date -u +%F)
MEMBERS_OUT=${MEMBERS_OUT:-benches/shard/members-release-$DAY.jsonl}
RS_OUT=${RS_OUT:-benches/shard/rs-convergence-$DAY.jsonl}
LEASES=shard-bench

[ "${BUILD:-1}" = 0 ] || nice -n 19 cargo build -q --release -p ferrokube-examples --bin bench_shard --bin replicaset
bench=target/release/bench_shard
RS_CONFIGS=${RS_CONFIGS:-server-side labels}
mkdir -p benches/shard
kubectl create namespace "$LEASES" >/dev/null 2>&1 || true

load() { uptime | sed 's/.*load average: //'; }

# --- 1. The sharded ReplicaSet run -----------------------------------------------------------------

# One run: $1 configuration (mode[=DIR], mode server-side | labels), $2 round. One line to RS_OUT.
rs_run() {
  local variant=$1 round=$2 pids=() extra=() cold scale now
  local mode=${variant%%=*} sample=target/release/replicaset ring
  [ "$mode" != "$variant" ] && sample=${variant#*=}/replicaset
  ring="rsrun-$mode-$round-$RANDOM"
  [ "$mode" = labels ] && extra=(--shard-labels)
  "$bench" rs-prepare --namespaces "$RS_NAMESPACES" --replicas "$RS_REPLICAS" 2>/dev/null
  kubectl -n "$LEASES" delete leases --all >/dev/null 2>&1 || true
  for i in 1 2 3 4; do
    "$sample" --kubeconfig "$KUBECONFIG" --shard-ring "$ring" --identity "m$i" \
      --lease-namespace "$LEASES" --lease-duration 6 --renew-deadline 4 --retry-period 1 \
      --qps 50 --burst 100 --no-view "${extra[@]}" 2>/dev/null &
    pids+=($!)
  done
  cold=$("$bench" rs-wait --namespaces "$RS_NAMESPACES" --replicas "$RS_REPLICAS" 2>/dev/null) || cold=null
  scale=$("$bench" rs-scale --namespaces "$RS_NAMESPACES" --replicas $((RS_REPLICAS * 2)) 2>/dev/null) || scale=null
  now=$(load)
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for pid in "${pids[@]}"; do wait "$pid" || true; done
  printf '{"bench": "sharded-replicaset-run", "run": "round-%s", "mode": "%s", "variant": "%s", "members": 4, "namespaces": %s, "replicasets": %s, "pods_cold": %s, "pods_scaled": %s, "seconds_cold_start": %s, "seconds_scale_up": %s, "build": "release", "load_average": "%s"}\n' \
    "$round" "$mode" "$variant" "$RS_NAMESPACES" "$RS_NAMESPACES" $((RS_NAMESPACES * RS_REPLICAS)) $((RS_NAMESPACES * RS_REPLICAS * 2)) "$cold" "$scale" "$now" >>"$RS_OUT"
  echo "[bench-shard] replicaset run round $round $variant: cold $cold s, scale up $scale s (load $now)" >&2
}

if [[ " $PARTS " == *" rs "* ]]; then
  read -r -a configs <<<"$RS_CONFIGS"
  for round in $(seq 1 "$RS_ROUNDS"); do
    n=${#configs[@]}
    for k in $(seq 0 $((n - 1))); do rs_run "${configs[$(((k + round - 1) % n))]}" "$round"; done
  done
  # Leave the run's ReplicaSets at 0 and no pods (no namespace controller to delete namespaces).
  "$bench" rs-prepare --namespaces "$RS_NAMESPACES" --replicas 0 2>/dev/null
fi

# --- 2. Members ------------------------------------------------------------------------------------

# One configuration: $1 members (0: unsharded); lines to MEMBERS_OUT with the run's name and load.
members_run() {
  local members=$1 round=$2 pids=() tmp
  tmp=$(mktemp -d)
  kubectl -n "$LEASES" delete leases --all >/dev/null 2>&1 || true
  if [ "$members" = 0 ]; then
    "$bench" member --unsharded --run "round-$round" >"$tmp/unsharded" 2>/dev/null &
    pids+=($!)
  else
    for i in $(seq 1 "$members"); do
      "$bench" member --ring "bench$members-$round" --identity "m$i" --members "$members" \
        --lease-namespace "$LEASES" --run "round-$round" >"$tmp/m$i" 2>/dev/null &
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
    python3 -c 'import json,sys; l=json.loads(sys.stdin.read()); l["load_average"]=sys.argv[1]; print(json.dumps(l))' "$now" <"$f" >>"$MEMBERS_OUT"
  done
  rm -rf "$tmp"
}

if [[ " $PARTS " == *" members "* ]]; then
  # SEED=0: the objects are there already (a seed is idempotent, but 10k refused creates take a while).
  [ "${SEED:-1}" = 0 ] || nice -n 19 "$bench" seed --namespaces "$NAMESPACES" --pods "$PODS" 2>/dev/null
  for round in $(seq 1 "$ROUNDS"); do
    for members in 0 1 2 4; do
      echo "[bench-shard] members round $round: $([ "$members" = 0 ] && echo unsharded || echo "$members members")" >&2
      members_run "$members" "$round"
    done
  done
fi

python3 - "$MEMBERS_OUT" "$RS_OUT" <<'PY'
import json, os, statistics, sys
members_out, rs_out = sys.argv[1], sys.argv[2]
med = statistics.median
if os.path.exists(members_out):
    rows = [json.loads(l) for l in open(members_out) if l.strip()]
    rows = [r for r in rows if r.get("build") == "release"]
    base = [r for r in rows if r["who"] == "unsharded"]
    if base:
        b_objects = med(r["pods_cached"] + r["replicasets_cached"] for r in base)
        b_rss = med(r["rss_kib"] for r in base)
        b_hwm = med(r["hwm_kib"] for r in base)
        b_wire = med(r["informer_wire_bytes_read"] for r in base)
        print(f"unsharded: {b_objects:.0f} objects, RSS {b_rss/1024:.1f} MiB, peak {b_hwm/1024:.1f} MiB, "
              f"informers read {b_wire/1e6:.1f} MB (medians of {len(base)})")
        for n in (1, 2, 4):
            sel = [r for r in rows if r["who"] != "unsharded" and r["members"] == n]
            if not sel:
                continue
            runs = sorted({r["run"] for r in sel})
            def top(f):
                return med(max(f(r) for r in sel if r["run"] == run) for run in runs)
            o = top(lambda r: r["pods_cached"] + r["replicasets_cached"])
            rss = top(lambda r: r["rss_kib"])
            hwm = top(lambda r: r["hwm_kib"])
            wire = top(lambda r: r["informer_wire_bytes_read"])
            print(f"{n} members, largest member: {o:.0f} objects ({o/b_objects:.2f}x), RSS {rss/1024:.1f} MiB "
                  f"({rss/b_rss:.2f}x), peak {hwm/1024:.1f} MiB ({hwm/b_hwm:.2f}x), informers read "
                  f"{wire/1e6:.1f} MB ({wire/b_wire:.2f}x) (medians over {len(runs)} rounds)")
if os.path.exists(rs_out):
    rows = [json.loads(l) for l in open(rs_out) if l.strip()]
    for variant in sorted({r.get("variant", r["mode"]) for r in rows}):
        sel = [r for r in rows if r.get("variant", r["mode"]) == variant and r["seconds_cold_start"] is not None]
        if sel:
            print(f"replicaset run, 4 members, {variant}: cold start {med(r['seconds_cold_start'] for r in sel):.1f} s, "
                  f"scale up {med(r['seconds_scale_up'] for r in sel if r['seconds_scale_up'] is not None):.1f} s "
                  f"(medians of {len(sel)})")
PY
