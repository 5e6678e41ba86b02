#!/usr/bin/env bash
# Side-by-side informer benchmark on a real kube-apiserver (scripts/kube-apiserver.sh): ferrokube's
# SharedIndexInformer (examples/src/bin/bench_informer.rs; caching `Pod` with list + watch, again
# without asking for gzip (ferrokube-nogzip: FERROKUBE_COMPRESSION=off), again with a streaming list,
# and caching `Compact<Pod>`), client-go v0.37.2's SharedIndexInformer
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
# TRANSFORMS=defaults runs each implementation once per repetition with its library's defaults
# instead of once without and once with the transform: ferrokube with `--strip` (its informers skip
# managedFields by default), client-go and kube-rs keeping managedFields (theirs keep them); the
# tables then say "defaults". For scale runs, where time to synced and memory are the figures:
#
#   COUNTS="10000 50000 100000" TRANSFORMS=defaults UPDATES=100 PAIRED_REPS=0 \
#     IMPLS="ferrokube ferrokube-compact client-go-v0.37.2 kube-rs-5.0" scripts/bench-informer-peers.sh
#
# Every solo line also carries "rx_bytes_at_sync": the bytes the process's open TCP connections had
# received when the script saw its "synced" line (the kernel's `bytes_received` of each established
# socket of the process, from `ss -tinp`: TLS records as they came off the wire, headers included),
# i.e. the cost on the wire of the initial list (a connection closed before sync is not counted;
# the informers here keep theirs open), and "uptime", the machine's load when the run started.
#
# Raw JSON lines go to $OUT (default target/bench-peers/informer.jsonl; "mode" is "solo" or "paired");
# markdown tables of medians (min–max over the repetitions) go to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNTS=${COUNTS:-"10000 50000"}
REPS=${REPS:-3}
PAIRED_REPS=${PAIRED_REPS:-3}
UPDATES=${UPDATES:-2000}
TRANSFORMS=${TRANSFORMS:-both}
case $TRANSFORMS in both | defaults) ;; *) echo "TRANSFORMS is both or defaults, not $TRANSFORMS" >&2; exit 2 ;; esac
QPS=${QPS:-50}
BURST=${BURST:-100}
OUT=${OUT:-target/bench-peers/informer.jsonl}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"

log() { echo "[bench-informer] $*" >&2; }

scripts/kube-apiserver.sh up >&2
eval "$(scripts/kube-apiserver.sh env)"
export KUBECONFIG

ALL_IMPLS="ferrokube ferrokube-nogzip ferrokube-streaming ferrokube-compact client-go-v0.37.2 client-go-v0.37.2-list client-go-v1.20.2 kube-rs-5.0"
IMPLS=${IMPLS:-$ALL_IMPLS}
IMPLS=${IMPLS//,/ }
for name in $IMPLS; do
  case " $ALL_IMPLS " in *" $name "*) ;; *) log "unknown implementation $name (known: $ALL_IMPLS)"; exit 2 ;; esac
done
wanted() { case " $IMPLS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

log "building ferrokube's tool"
nice -n 19 cargo build --release -q -p ferrokube-examples --bin bench_informer >&2
ours=${CARGO_TARGET_DIR:-target}/release/bench_informer
client_go_37= client_go= kube_rs=
if wanted client-go-v0.37.2 || wanted client-go-v0.37.2-list; then
  log "building the client-go v0.37 peer"
  client_go_37=$(nice -n 19 benches/peers/client-go-v0.37/build.sh informer | tail -n 1)
fi
if wanted client-go-v1.20.2; then
  log "building the client-go 1.20 peer"
  client_go=$(nice -n 19 benches/peers/client-go/build.sh informer | tail -n 1)
fi
if wanted kube-rs-5.0; then
  log "building the kube-rs peer"
  kube_rs=$(nice -n 19 benches/peers/kube-runtime/build.sh informer | tail -n 1)
fi

every_impl=(
  "ferrokube|$ours run"
  "ferrokube-nogzip|env FERROKUBE_COMPRESSION=off $ours run"
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

# Bytes received so far on the established TCP connections of process $1 (`ss` prints one line
# naming the process, then one with the socket's counters).
rx_bytes() {
  ss -tinpH state established | python3 -c '
import re, sys
pid, total, mine = sys.argv[1], 0, False
for line in sys.stdin:
    if "users:(" in line:
        mine = f"pid={pid}," in line
    elif mine:
        m = re.search(r"bytes_received:(\d+)", line)
        total += int(m.group(1)) if m else 0
        mine = False
print(total)' "$1"
}

# Runs one implementation: waits for its "synced" line, sends the stamped updates, collects the
# "result" line with the run's settings added.
run_one() {
  local name=$1 cmd=$2 namespace=$3 count=$4 strip=$5
  round=$((round + 1))
  local flags=(--namespace "$namespace" --round "$round" --updates "$UPDATES" --qps "$QPS" --burst "$BURST")
  [ "$strip" = 1 ] && flags+=(--strip)
  local load
  load=$(uptime)
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
  local rx
  rx=$(rx_bytes "$pid")
  "$ours" update --namespace "$namespace" --round "$round" --count "$UPDATES" --pods "$count" 2>>"$tmp/updater"
  if ! wait "$pid"; then
    log "FAILED: $name exited non-zero"; cat "$tmp/err" >&2; exit 1
  fi
  record "$tmp/out" "$name" "$count" solo "$round" "$rx" "$load"
}

# Appends one implementation's result line to $OUT with the run's settings, and logs it.
record() {
  python3 - "$@" >>"$OUT" <<'PY'
import json, sys
out, name, count, mode, round_ = sys.argv[1:6]
extra = sys.argv[6:]
lines = [json.loads(l) for l in open(out) if l.strip()]
result = [l for l in lines if l.get("event") == "result"]
assert len(result) == 1, f"expected one result line, got {lines}"
rec = result[0]
rec.update(bench_impl=name, seeded=int(count), mode=mode, round=int(round_))
if extra:
    rec.update(rx_bytes_at_sync=int(extra[0] or 0), uptime=extra[1].strip())
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
    if [ "$TRANSFORMS" = defaults ]; then
      n=${#impls[@]}
      for i in $(seq 0 $((n - 1))); do
        entry=${impls[$(((i + rep) % n))]}
        # ferrokube's informers skip managedFields by default; the peers keep them by default.
        case ${entry%%|*} in ferrokube*) strip=1 ;; *) strip=0 ;; esac
        run_one "${entry%%|*}" "${entry#*|}" "$namespace" "$count" "$strip"
      done
      continue
    fi
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
    # A run that saw no update has no lag figures (None): left out of the lag cells.
    values = sorted(v for v in values if v is not None)
    if not values:
        return "–"
    med = statistics.median(values)
    return fmt.format(med) if len(values) == 1 else f"{fmt.format(med)} ({fmt.format(values[0])}–{fmt.format(values[-1])})"
print("| pods | transform | implementation | time to synced (ms) | RSS after sync (MiB) | KiB per cached Pod | bytes read by sync per Pod | update lag p50 (ms) | p99 (ms) | updates/s | updates seen |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
def per_pod(r):
    return (r["hwm_kib"] - r["baseline_rss_kib"]) / r["pods"]
for (seeded, strip, impl), rs in sorted(runs.items()):
    rx = [r["rx_bytes_at_sync"] / r["pods"] for r in rs if r.get("rx_bytes_at_sync")]
    print(f"| {seeded} | {'drop managedFields' if strip else 'none'} | {impl} | "
          f"{cell([r['sync_ms'] for r in rs], '{:.0f}')} | {cell([r['hwm_kib'] / 1024 for r in rs], '{:.0f}')} | "
          f"{cell([per_pod(r) for r in rs], '{:.1f}')} | {cell(rx, '{:.0f}') if rx else '–'} | "
          f"{cell([r['lag_p50_ms'] for r in rs], '{:.1f}')} | "
          f"{cell([r['lag_p99_ms'] for r in rs], '{:.1f}')} | {cell([r['updates_per_sec'] for r in rs], '{:.0f}')} | "
          f"{min(r['updates_seen'] for r in rs)} |")
# Each implementation with its defaults (ferrokube skips managedFields, the peers keep them), against
# client-go v0.37.2 and kube-rs 5.0: ratios of the medians.
def med(seeded, strip, impl, f):
    rs = runs.get((seeded, strip, impl))
    return statistics.median(f(r) for r in rs) if rs else None
for seeded in sorted({k[0] for k in runs}):
    parts = []
    for ours in ["ferrokube", "ferrokube-compact"]:
        for base in ["client-go-v0.37.2", "kube-rs-5.0"]:
            for label, f in [("sync", lambda r: r["sync_ms"]), ("KiB/Pod", per_pod)]:
                a, b = med(seeded, True, ours, f), med(seeded, False, base, f)
                if a and b:
                    parts.append(f"{ours} / {base} {label} {a / b:.2f}x")
    if parts:
        print()
        print(f"{seeded} Pods, defaults (medians): " + "; ".join(parts))
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
