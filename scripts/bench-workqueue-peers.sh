#!/usr/bin/env bash
# Side-by-side workqueue benchmark: the workloads of benches/WORKLOADS.md (W1–W5 and W2m, the old
# mixed W2 kept as a secondary figure) on ferrokube, client-go
# v0.37.2 (benches/peers/client-go-v0.37/workqueue: its Typed queues keyed by string, the comparison;
# and the same queues holding `any`, the untyped API), client-go v1.20.2 (benches/peers/client-go,
# kept as history) and kube-runtime's scheduler (benches/peers/kube-runtime), plus the
# single-threaded floors. Each (implementation, workload) runs REPS times (default 5), every run in a
# fresh process, implementations interleaved within each repetition; peak RSS from /usr/bin/time -v.
# Prints a markdown table of medians (min–max) on stdout; raw JSON lines go to $OUT (default
# target/bench-peers/results.jsonl), each with the `uptime` its run started under (the machine is shared).
# Builds run under `nice -n 19`.
#
#   scripts/bench-workqueue-peers.sh              # full run (about 10 minutes, plus first-time builds)
#   REPS=1 SCALE=0.1 scripts/bench-workqueue-peers.sh   # smoke run
#   IMPLS="ferrokube client-go-v0.37.2" REPS=1 SCALE=0.01 scripts/bench-workqueue-peers.sh
#
# IMPLS (space- or comma-separated names from the list below; default all) picks the
# implementations; only the peers picked are built. The ratio line compares ferrokube with
# client-go v0.37.2 (and with v1.20.2 when it ran).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-5}
SCALE=${SCALE:-}
OUT=${OUT:-target/bench-peers/results.jsonl}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"

log() { echo "[bench-peers] $*" >&2; }

if [ ! -x /usr/bin/time ]; then
  log "installing GNU time (for peak RSS)"
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >&2
fi

ALL_IMPLS="ferrokube client-go-v0.37.2 client-go-v0.37.2-any client-go-v1.20.2 kube-runtime-5.0-scheduler floor-siphash floor-foldhash"
IMPLS=${IMPLS:-$ALL_IMPLS}
IMPLS=${IMPLS//,/ }
for name in $IMPLS; do
  case " $ALL_IMPLS " in *" $name "*) ;; *) log "unknown implementation $name (known: $ALL_IMPLS)"; exit 2 ;; esac
done
wanted() { case " $IMPLS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

log "building ferrokube's runner"
nice -n 19 cargo build --release -q -p ferrokube-workqueue --example bench_workloads >&2
ours=${CARGO_TARGET_DIR:-target}/release/examples/bench_workloads
client_go_37= client_go= kube_runtime=
if wanted client-go-v0.37.2 || wanted client-go-v0.37.2-any; then
  log "building the client-go v0.37 peer"
  client_go_37=$(nice -n 19 benches/peers/client-go-v0.37/build.sh workqueue | tail -n 1)
fi
if wanted client-go-v1.20.2; then
  log "building the client-go 1.20 peer"
  client_go=$(nice -n 19 benches/peers/client-go/build.sh | tail -n 1)
fi
if wanted kube-runtime-5.0-scheduler; then
  log "building the kube-runtime peer"
  kube_runtime=$(nice -n 19 benches/peers/kube-runtime/build.sh | tail -n 1)
fi

every_impl=(
  "ferrokube|$ours --impl ferrokube"
  "client-go-v0.37.2|$client_go_37 --items string"
  "client-go-v0.37.2-any|$client_go_37 --items any"
  "client-go-v1.20.2|$client_go"
  "kube-runtime-5.0-scheduler|$kube_runtime"
  "floor-siphash|$ours --impl floor-siphash"
  "floor-foldhash|$ours --impl floor-foldhash"
)
impls=()
for entry in "${every_impl[@]}"; do
  if wanted "${entry%%|*}"; then impls+=("$entry"); fi
done
scale_args=()
[ -n "$SCALE" ] && scale_args=(--scale "$SCALE")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for rep in $(seq 1 "$REPS"); do
  for w in W1 W2 W2m W3 W4 W5; do
    # Rotate the order each repetition so no implementation always runs first.
    n=${#impls[@]}
    for i in $(seq 0 $((n - 1))); do
      entry=${impls[$(((i + rep) % n))]}
      name=${entry%%|*}
      cmd=${entry#*|}
      # The machine is shared: every line records the load its run started under.
      load=$(uptime)
      set +e
      # shellcheck disable=SC2086
      /usr/bin/time -v -o "$tmp/time" $cmd --workload "$w" "${scale_args[@]}" >"$tmp/out" 2>"$tmp/err"
      status=$?
      set -e
      if [ "$status" -eq 3 ]; then continue; fi
      if [ "$status" -ne 0 ]; then
        log "FAILED: $name $w (exit $status)"; cat "$tmp/err" >&2; exit 1
      fi
      rss_kb=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$tmp/time")
      python3 - "$tmp/out" "$rss_kb" "$name" "$load" >>"$OUT" <<'PY'
import json, sys
line = open(sys.argv[1]).read().strip().splitlines()
assert len(line) == 1, f"expected one JSON line, got {len(line)}"
rec = json.loads(line[0])
rec["peak_rss_kib"] = int(sys.argv[2])
rec["bench_impl"] = sys.argv[3]
rec["uptime"] = sys.argv[4].strip()
print(json.dumps(rec))
PY
      log "rep $rep $w $name: $(tail -n 1 "$OUT" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(round(r["per_sec"]), "/s")')"
    done
  done
done

python3 - "$OUT" <<'PY'
import json, statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[(r["bench_impl"], r["workload"])].append(r)

def cell(values, fmt):
    if not values:
        return "—"
    med = statistics.median(values)
    return f"{fmt(med)} ({fmt(min(values))}–{fmt(max(values))})"

def rate(v):
    return f"{v/1e6:.2f} M" if v >= 1e6 else f"{v/1e3:.0f} k"

def col(impl, w, key):
    rs = runs.get((impl, w), [])
    if key == "per_sec":
        return [r["per_sec"] for r in rs]
    if key == "rss":
        return [r["peak_rss_kib"] / 1024 for r in rs]
    return [r["extra"][key] for r in rs]

impls = []
for (impl, _w) in runs:
    if impl not in impls:
        impls.append(impl)
print("| impl | W1 items/s | W2 adds/s | W2m adds/s | W3 items/s | W4 p50 ms | W4 p99 ms | W5 gets/s | W1 peak RSS MiB |")
print("|---|---|---|---|---|---|---|---|---|")
for impl in impls:
    print("| " + " | ".join([
        impl,
        cell(col(impl, "W1", "per_sec"), rate),
        cell(col(impl, "W2", "adds_per_sec"), rate),
        cell(col(impl, "W2m", "adds_per_sec"), rate),
        cell(col(impl, "W3", "per_sec"), rate),
        cell(col(impl, "W4", "p50_ms"), lambda v: f"{v:.2f}"),
        cell(col(impl, "W4", "p99_ms"), lambda v: f"{v:.2f}"),
        cell(col(impl, "W5", "per_sec"), rate),
        cell(col(impl, "W1", "rss"), lambda v: f"{v:.0f}"),
    ]) + " |")

def med(impl, w, key):
    v = col(impl, w, key)
    return statistics.median(v) if v else None
ours = "ferrokube"
print()
for base in ["client-go-v0.37.2", "client-go-v1.20.2"]:
    ratios = []
    for w, key in [("W1", "per_sec"), ("W2", "adds_per_sec"), ("W3", "per_sec"), ("W5", "per_sec")]:
        a, b = med(ours, w, key), med(base, w, key)
        if a and b:
            ratios.append(f"{w} {a/b:.2f}×")
    if ratios:
        print(f"ferrokube / {base} (medians): " + ", ".join(ratios))
floor = med("floor-foldhash", "W1", "per_sec")
w1 = med(ours, "W1", "per_sec")
if floor and w1:
    print(f"floor-foldhash / ferrokube on W1: {floor/w1:.2f}× (target: within 3×)")
PY
