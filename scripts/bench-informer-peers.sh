#!/usr/bin/env bash
# Side-by-side informer benchmark on a real kube-apiserver (scripts/kube-apiserver.sh): ferrokube's
# SharedIndexInformer (examples/bench_informer.rs; caching `Pod`, and again caching `Compact<Pod>`),
# client-go 1.20.2's SharedIndexInformer
# (benches/peers/client-go/informer) and kube-rs 5.0's watcher + reflector
# (benches/peers/kube-runtime/src/bin/informer.rs), all following benches/peers/INFORMER.md.
#
# For each collection size (COUNTS, default "10000 50000"), the Pods are seeded once (realistic specs,
# concurrent creates); then, REPS times (default 3), each implementation runs once without and once
# with the managedFields-dropping transform, in a fresh process, implementations rotated within each
# repetition. Each run: start, wait for "synced", then UPDATES (default 2000) PATCHes stamped with
# their send time, timed to the handler. Same machine, same server, same Pods, same client settings.
#
#   scripts/bench-informer-peers.sh                         # full run
#   COUNTS=2000 REPS=1 UPDATES=200 scripts/bench-informer-peers.sh   # smoke run
#
# Raw JSON lines go to $OUT (default target/bench-peers/informer.jsonl); a markdown table of medians
# (min–max over the repetitions) goes to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNTS=${COUNTS:-"10000 50000"}
REPS=${REPS:-3}
UPDATES=${UPDATES:-2000}
QPS=${QPS:-50}
BURST=${BURST:-100}
OUT=${OUT:-target/bench-peers/informer.jsonl}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"

log() { echo "[bench-informer] $*" >&2; }

scripts/kube-apiserver.sh up >&2
eval "$(scripts/kube-apiserver.sh env)"
export KUBECONFIG

log "building ferrokube's tool"
cargo build --release -q --example bench_informer >&2
ours=target/release/examples/bench_informer
log "building the client-go peer"
client_go=$(benches/peers/client-go/build.sh informer | tail -n 1)
log "building the kube-rs peer"
kube_rs=$(benches/peers/kube-runtime/build.sh informer | tail -n 1)

impls=(
  "ferrokube|$ours run"
  "ferrokube-compact|$ours run --compact"
  "client-go-v1.20.2|$client_go"
  "kube-rs-5.0|$kube_rs"
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
round=$(( $(date +%s) % 100000 * 100 ))

# Runs one implementation: waits for its "synced" line, sends the stamped updates, collects the
# "result" line with the run's settings added.
run_one() {
  local name=$1 cmd=$2 namespace=$3 count=$4 strip=$5
  round=$((round + 1))
  local flags=(--namespace "$namespace" --round "$round" --updates "$UPDATES" --qps "$QPS" --burst "$BURST")
  [ "$strip" = 1 ] && flags+=(--strip)
  # shellcheck disable=SC2086
  $cmd "${flags[@]}" >"$tmp/out" 2>"$tmp/err" &
  local pid=$!
  local waited=0
  until grep -q '"synced"' "$tmp/out" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null || [ $waited -gt 6000 ]; then
      log "FAILED: $name did not sync"; cat "$tmp/err" >&2; kill "$pid" 2>/dev/null || true; exit 1
    fi
    sleep 0.05; waited=$((waited + 1))
  done
  "$ours" update --namespace "$namespace" --round "$round" --count "$UPDATES" --pods "$count" 2>>"$tmp/updater"
  if ! wait "$pid"; then
    log "FAILED: $name exited non-zero"; cat "$tmp/err" >&2; exit 1
  fi
  python3 - "$tmp/out" "$name" "$count" >>"$OUT" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
result = [l for l in lines if l.get("event") == "result"]
assert len(result) == 1, f"expected one result line, got {lines}"
rec = result[0]
rec["bench_impl"] = sys.argv[2]
rec["seeded"] = int(sys.argv[3])
print(json.dumps(rec))
PY
  log "$(tail -n 1 "$OUT" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["bench_impl"], r["seeded"], "strip" if r["strip"] else "full", "sync", round(r["sync_ms"]), "ms rss", r["rss_kib"]//1024, "MiB p99", round(r["lag_p99_ms"],1), "ms seen", r["updates_seen"])')"
}

for count in $COUNTS; do
  namespace=bench-$count
  log "seeding $count pods in $namespace"
  "$ours" seed --namespace "$namespace" --count "$count" --concurrency 32 >&2
  for rep in $(seq 1 "$REPS"); do
    for strip in 0 1; do
      n=${#impls[@]}
      for i in $(seq 0 $((n - 1))); do
        entry=${impls[$(((i + rep + strip) % n))]}
        run_one "${entry%%|*}" "${entry#*|}" "$namespace" "$count" "$strip"
      done
    done
  done
done

python3 - "$OUT" <<'PY'
import json, statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[(r["seeded"], r["strip"], r["bench_impl"])].append(r)
def cell(values, fmt):
    values = sorted(values)
    med = statistics.median(values)
    return fmt.format(med) if len(values) == 1 else f"{fmt.format(med)} ({fmt.format(values[0])}–{fmt.format(values[-1])})"
print("| pods | transform | implementation | time to synced (ms) | RSS after sync (MiB) | KiB per cached Pod | update lag p50 (ms) | p99 (ms) | updates/s | updates seen |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (seeded, strip, impl), rs in sorted(runs.items()):
    per_pod = [(r["hwm_kib"] - r["baseline_rss_kib"]) / r["pods"] for r in rs]
    print(f"| {seeded} | {'drop managedFields' if strip else 'none'} | {impl} | "
          f"{cell([r['sync_ms'] for r in rs], '{:.0f}')} | {cell([r['hwm_kib'] / 1024 for r in rs], '{:.0f}')} | "
          f"{cell(per_pod, '{:.1f}')} | {cell([r['lag_p50_ms'] for r in rs], '{:.1f}')} | "
          f"{cell([r['lag_p99_ms'] for r in rs], '{:.1f}')} | {cell([r['updates_per_sec'] for r in rs], '{:.0f}')} | "
          f"{min(r['updates_seen'] for r in rs)} |")
PY
