#!/usr/bin/env bash
# Flapping at any rate: the ReplicaSet benchmark's flap phase (scripts/bench-replicaset.sh, FLAP)
# swept over the flip interval, ours and kube-controller-manager interleaved, on the real
# kube-apiserver of K8S_VERSION (1.37.2: the release whose kube-controller-manager we compare with).
#
#   scripts/bench-replicaset-flap-sweep.sh                        # 2 rounds of 100 ms … 5 s
#   ROUNDS=3 INTERVALS="1000 2000" scripts/bench-replicaset-flap-sweep.sh
#   BIN_DIR=/tmp/bins COMMIT=abc123 WHO="before ours upstream" FIRST_ROUND=2 \
#     VARIANT_BEFORE="fixed window" VARIANT_OURS="adaptive window" scripts/bench-replicaset-flap-sweep.sh
#                             # prebuilt binaries: /tmp/bins/replicaset, replicaset-before, bench_replicaset
#
# Each run is one bench-replicaset.sh run of REPLICASETS ReplicaSets × REPLICAS replicas, all of them
# flapping: FLIPS flips between 0 and REPLICAS, FLAP_MS apart, then settled at REPLICAS (see
# examples/src/bin/bench_replicaset.rs). The pods a controller created and deleted in the flap phase
# are its `POST pods` and `DELETE pods`. Within a round the order of the controllers alternates from
# one interval to the next, and even rounds start with the other one, so that neither always runs
# first. Every result line of every run goes to $JSONL with the round, the interval, the flips, the
# commit the binaries were built from, the variant (VARIANT_OURS, VARIANT_BEFORE), and the machine's load (`uptime`) when the run ended:
# the machine is shared, and the figures are only comparable within one run of this script.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-2}
INTERVALS=${INTERVALS:-100 250 500 1000 2000 5000}
WHO=${WHO:-ours upstream}
# A label for the rows of `ours` and of `before`, if given.
VARIANT_OURS=${VARIANT_OURS:-}
VARIANT_BEFORE=${VARIANT_BEFORE:-}
FIRST_ROUND=${FIRST_ROUND:-1}
JSONL=${JSONL:-/tmp/ferrokube-flap-sweep.jsonl}
export K8S_VERSION=${K8S_VERSION:-1.37.2}
export REPLICASETS=${REPLICASETS:-10} REPLICAS=${REPLICAS:-10} FLIPS=${FLIPS:-10}
export FLAP=$REPLICASETS

# COMMIT=<rev> BIN_DIR=<dir>: binaries built from <rev> and copied there before; otherwise build now.
if [ -n "${BIN_DIR:-}" ]; then
  commit=${COMMIT:?with BIN_DIR, COMMIT names the revision its binaries were built from}
  keep_bins=1
else
  nice -n 19 cargo build --release -q -p ferrokube-examples --bin replicaset --bin bench_replicaset
  BIN_DIR=$(mktemp -d /tmp/ferrokube-flap-sweep-bin.XXXXXX)
  cp target/release/replicaset target/release/bench_replicaset "$BIN_DIR/"
  commit=$(git rev-parse --short HEAD)
  git diff --quiet HEAD -- runtime examples || commit="$commit+dirty"
  keep_bins=
fi
export BIN_DIR

run=0
for round in $(seq "$FIRST_ROUND" "$((FIRST_ROUND + ROUNDS - 1))"); do
  for ms in $INTERVALS; do
    order=$WHO
    (((round + run) % 2)) && order=$(echo "$WHO" | tr ' ' '\n' | tac | tr '\n' ' ')
    run=$((run + 1))
    for who in $order; do
      out=/tmp/ferrokube-flap-sweep-$round-$ms-$who.txt
      WHO=$who FLAP_MS=$ms REPS=1 OUT=$out scripts/bench-replicaset.sh
      variant=
      [ "$who" = ours ] && variant=$VARIANT_OURS
      [ "$who" = before ] && variant=$VARIANT_BEFORE
      python3 - "$out.jsonl" "$round" "$ms" "$FLIPS" "$commit" "$variant" "$(uptime)" >>"$JSONL" <<'PY'
import json, sys
path, rnd, ms, flips, commit, variant, up = sys.argv[1:]
for line in open(path):
    row = json.loads(line)
    row.update(round=int(rnd), flap_ms=int(ms), flips=int(flips), commit=commit, uptime=up.strip(),
               load1=float(up.split("load average:")[1].split(",")[0]))
    if variant:
        row["variant"] = variant
    print(json.dumps(row))
PY
    done
  done
done
[ -n "$keep_bins" ] || rm -r "$BIN_DIR"
echo "bench-replicaset-flap-sweep: JSON lines in $JSONL" >&2
