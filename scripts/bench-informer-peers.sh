#!/usr/bin/env bash
# Side-by-side informer benchmark on a real kube-apiserver (scripts/kube-apiserver.sh): ferrokube's
# SharedIndexInformer (examples/src/bin/bench_informer.rs; caching `Pod` with list + watch, again with
# a streaming list, and caching `Compact<Pod>`), client-go v0.37.2's SharedIndexInformer
# (benches/peers/client-go-v0.37/informer; with its default WatchListClient on, i.e. a streaming
# list, and again with KUBE_FEATURE_WatchListClient=false), client-go 1.20.2's (benches/peers/client-go/
# informer, kept as history) and kube-rs 5.0's watcher + reflector
# (benches/peers/kube-runtime/src/bin/informer.rs), all following benches/peers/INFORMER.md.
#
# Streaming lists need a server that serves them: run it on the current release,
#
#   K8S_VERSION=1.37.2 scripts/bench-informer-peers.sh
#
# (on 1.20.2 both streaming variants fall back to list + watch by themselves; their lines say so:
# ferrokube "streaming_refused": true, client-go "lists" > 0). IMPLS (names from the list below,
# space- or comma-separated; default all) picks the implementations, and only those are built:
#
#   IMPLS="ferrokube ferrokube-streaming client-go-v0.37.2 client-go-v0.37.2-list" scripts/bench-informer-peers.sh
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
# Then, PAIRED_REPS times (default 3) per size and transform, all implementations run *at once* on the
# same round: each syncs, and only when all have synced does one updater send the stamped PATCHes,
# which every implementation times to its own handler. The server's share of the lag (queueing, the
# etcd write, the watch cache) is then the same for all of them, update for update, so the paired p99s
# differ only by what happens in the clients. (Sync time and memory come from the solo runs only: in
# a paired run the four lists compete with each other.)
#
#   REPS=0 PAIRED_REPS=5 scripts/bench-informer-peers.sh    # paired lag runs only
#
# Raw JSON lines go to $OUT (default target/bench-peers/informer.jsonl; "mode" is "solo" or "paired");
# markdown tables of medians (min–max over the repetitions) go to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNTS=${COUNTS:-"10000 50000"}
REPS=${REPS:-3}
PAIRED_REPS=${PAIRED_REPS:-3}
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

ALL_IMPLS="ferrokube ferrokube-streaming ferrokube-compact client-go-v0.37.2 client-go-v0.37.2-list client-go-v1.20.2 kube-rs-5.0"
IMPLS=${IMPLS:-$ALL_IMPLS}
IMPLS=${IMPLS//,/ }
for name in $IMPLS; do
  case " $ALL_IMPLS " in *" $name "*) ;; *) log "unknown implementation $name (known: $ALL_IMPLS)"; exit 2 ;; esac
done
wanted() { case " $IMPLS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

log "building ferrokube's tool"
cargo build --release -q -p ferrokube-examples --bin bench_informer >&2
ours=${CARGO_TARGET_DIR:-target}/release/bench_informer
client_go_37= client_go= kube_rs=
if wanted client-go-v0.37.2 || wanted client-go-v0.37.2-list; then
  log "building the client-go v0.37 peer"
  client_go_37=$(benches/peers/client-go-v0.37/build.sh informer | tail -n 1)
fi
if wanted client-go-v1.20.2; then
  log "building the client-go 1.20 peer"
  client_go=$(benches/peers/client-go/build.sh informer | tail -n 1)
fi
if wanted kube-rs-5.0; then
  log "building the kube-rs peer"
  kube_rs=$(benches/peers/kube-runtime/build.sh informer | tail -n 1)
fi

every_impl=(
  "ferrokube|$ours run"
  "ferrokube-streaming|$ours run --streaming"
  "ferrokube-compact|$ours run --compact"
  "client-go-v0.37.2|$client_go_37 --watch-list true"
  "client-go-v0.37.2-list|$client_go_37 --watch-list false"
  "client-go-v1.20.2|$client_go"
  "kube-rs-5.0|$kube_rs"
)
impls=()
for entry in "${every_impl[@]}"; do
  if wanted "${entry%%|*}"; then impls+=("$entry"); fi
done

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
  record "$tmp/out" "$name" "$count" solo "$round"
}

# Appends one implementation's result line to $OUT with the run's settings, and logs it.
record() {
  python3 - "$@" >>"$OUT" <<'PY'
import json, sys
out, name, count, mode, round_ = sys.argv[1:]
lines = [json.loads(l) for l in open(out) if l.strip()]
result = [l for l in lines if l.get("event") == "result"]
assert len(result) == 1, f"expected one result line, got {lines}"
rec = result[0]
rec.update(bench_impl=name, seeded=int(count), mode=mode, round=int(round_))
print(json.dumps(rec))
PY
  log "$(tail -n 1 "$OUT" | python3 -c '
import json, sys
r = json.load(sys.stdin)
# How the cache was filled, where the implementation says: client-go v0.37 counts its requests,
# ferrokube names its list mode.
if "streamed" in r:
    fill = "lists %s streamed %s" % (r["lists"], r["streamed"])
elif "list_mode" in r:
    fill = r["list_mode"] + (" (refused)" if r.get("streaming_refused") else "")
else:
    fill = ""
p99 = r["lag_p99_ms"]
print(r["mode"], r["bench_impl"], r["seeded"], "strip" if r["strip"] else "full", fill, "sync", round(r["sync_ms"]),
      "ms rss", r["rss_kib"]//1024, "MiB p99", round(p99, 1) if p99 is not None else None, "ms seen", r["updates_seen"])')"
}

# Runs every implementation at once on one round: waits until all have synced, sends the stamped
# updates once, collects each one's result.
run_paired() {
  local namespace=$1 count=$2 strip=$3
  round=$((round + 1))
  local flags=(--namespace "$namespace" --round "$round" --updates "$UPDATES" --qps "$QPS" --burst "$BURST")
  [ "$strip" = 1 ] && flags+=(--strip)
  local pids=() i
  for i in "${!impls[@]}"; do
    local entry=${impls[$i]}
    # shellcheck disable=SC2086
    ${entry#*|} "${flags[@]}" >"$tmp/paired-$i.out" 2>"$tmp/paired-$i.err" &
    pids+=($!)
  done
  local waited=0
  for i in "${!impls[@]}"; do
    until grep -q '"synced"' "$tmp/paired-$i.out" 2>/dev/null; do
      if ! kill -0 "${pids[$i]}" 2>/dev/null || [ $waited -gt 12000 ]; then
        log "FAILED: ${impls[$i]%%|*} did not sync (paired)"; cat "$tmp/paired-$i.err" >&2
        kill "${pids[@]}" 2>/dev/null || true; exit 1
      fi
      sleep 0.05; waited=$((waited + 1))
    done
  done
  "$ours" update --namespace "$namespace" --round "$round" --count "$UPDATES" --pods "$count" 2>>"$tmp/updater"
  for i in "${!impls[@]}"; do
    if ! wait "${pids[$i]}"; then
      log "FAILED: ${impls[$i]%%|*} exited non-zero (paired)"; cat "$tmp/paired-$i.err" >&2; exit 1
    fi
    record "$tmp/paired-$i.out" "${impls[$i]%%|*}" "$count" paired "$round"
  done
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
  for rep in $(seq 1 "$PAIRED_REPS"); do
    for strip in 0 1; do
      run_paired "$namespace" "$count" "$strip"
    done
  done
done

python3 - "$OUT" <<'PY'
import json, statistics, sys
from collections import defaultdict
runs = defaultdict(list)
paired = defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    (paired if r.get("mode") == "paired" else runs)[(r["seeded"], r["strip"], r["bench_impl"])].append(r)
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
if paired:
    # The same round's p99 of the newest client-go that ran, to pair each implementation's p99 with.
    names = {impl for (_, _, impl) in paired}
    base = next((n for n in ["client-go-v0.37.2", "client-go-v0.37.2-list", "client-go-v1.20.2"] if n in names), None)
    reference = {r["round"]: r["lag_p99_ms"] for (_, _, impl), rs in paired.items()
                 if impl == base for r in rs}
    print()
    print("Paired runs (all implementations at once, the same updates):")
    print()
    print(f"| pods | transform | implementation | runs | update lag p50 (ms) | p99 (ms) | p99 ÷ {base}'s p99, same run |")
    print("|---|---|---|---|---|---|---|")
    for (seeded, strip, impl), rs in sorted(paired.items()):
        ratios = [r["lag_p99_ms"] / reference[r["round"]] for r in rs if r["round"] in reference]
        print(f"| {seeded} | {'drop managedFields' if strip else 'none'} | {impl} | {len(rs)} | "
              f"{cell([r['lag_p50_ms'] for r in rs], '{:.1f}')} | {cell([r['lag_p99_ms'] for r in rs], '{:.1f}')} | "
              f"{cell(ratios, '{:.2f}') if ratios else '–'} |")
PY
