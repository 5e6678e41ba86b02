#!/usr/bin/env bash
# What the pipeline seam (the `ferrokube_pipeline` tracing events that `ferrokube::view` reads)
# costs when nobody listens: the workqueue's five workloads (benches/WORKLOADS.md) and the informer's
# per-event and first-list benchmarks, built at BEFORE (a revision without the seam) and now,
# run interleaved (before, after, before, after, ...) on the same machine, and written as JSON lines.
#
#   scripts/bench-seam.sh                                    # BEFORE=ac82172, REPS=3, SCALE=0.2
#   BEFORE=<rev> REPS=5 SCALE=1 OUT=benches/view/seam-$(date +%F).jsonl scripts/bench-seam.sh
#
# "before" is built from a git worktree into a target directory of its own (target/before-seam), with
# today's informer/benches/store.rs copied in (it uses only APIs that existed before), so both sides
# run the same benchmark code. Each JSON line: side, commit, bench, value, unit.
#
# Timings on a busy 2-core machine are noisy, so the script also counts the instructions of the
# workqueue workloads W1 and W5 under valgrind's callgrind (if installed): (nearly) deterministic, and
# blind to what else the machine does. CALLGRIND_ONLY=1 skips the build and the timed runs.
set -euo pipefail
cd "$(dirname "$0")/.."

BEFORE=${BEFORE:-ac82172}
REPS=${REPS:-3}
SCALE=${SCALE:-0.2}
OUT=${OUT:-benches/view/seam-$(date +%F).jsonl}
mkdir -p "$(dirname "$OUT")"
after_commit=$(git rev-parse --short HEAD)
before_commit=$(git rev-parse --short "$BEFORE")

if [ "${CALLGRIND_ONLY:-0}" != 1 ]; then
tree=target/before-seam-tree
rm -rf "$tree"
git worktree prune
git worktree add -q --detach "$tree" "$BEFORE"
cp informer/benches/store.rs "$tree/informer/benches/store.rs"
echo "[bench-seam] building before ($before_commit) and after ($after_commit)" >&2
for side in before after; do
  if [ $side = before ]; then manifest="$tree/Cargo.toml"; target=target/before-seam; else manifest=Cargo.toml; target=target; fi
  cargo build --release -q --manifest-path "$manifest" --target-dir "$target" -p ferrokube-workqueue --example bench_workloads
  cargo bench --no-run -q --manifest-path "$manifest" --target-dir "$target" -p ferrokube-informer --bench store
done
git worktree remove --force "$tree"

# The criterion binary of each side (the newest store-* executable in its deps directory).
bench_bin() { ls -t "$1"/release/deps/store-* | grep -v '\.d$' | head -1; }
before_store=$(bench_bin target/before-seam)
after_store=$(bench_bin target)

run_side() {
  local side=$1 commit=$2 target=$3 store=$4
  # The workqueue's five workloads, one run each.
  "$target/release/examples/bench_workloads" --workload all --scale "$SCALE" 2>/dev/null |
    while read -r line; do
      python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(json.dumps({"side":sys.argv[2],"commit":sys.argv[3],"bench":"workqueue "+r["workload"],"value":r["per_sec"],"unit":"items/s","scale":float(sys.argv[4])}))' "$line" "$side" "$commit" "$SCALE"
    done
  # The informer: criterion's median of 20 samples per benchmark, read from its estimates file.
  for bench in informer_watch_events_10k informer_first_list_10k; do
    CRITERION_HOME="target/criterion-seam-$side" "$store" --bench "$bench" --warm-up-time 1 --measurement-time 5 >/dev/null 2>&1
    python3 -c 'import json,sys; e=json.load(open(sys.argv[1])); print(json.dumps({"side":sys.argv[2],"commit":sys.argv[3],"bench":sys.argv[4],"value":e["median"]["point_estimate"]/1e6,"unit":"ms"}))' \
      "target/criterion-seam-$side/$bench/new/estimates.json" "$side" "$commit" "$bench"
  done
}

for rep in $(seq 1 "$REPS"); do
  echo "[bench-seam] repetition $rep of $REPS" >&2
  run_side before "$before_commit" target/before-seam "$before_store" | tee -a "$OUT"
  run_side after "$after_commit" target "$after_store" | tee -a "$OUT"
done
fi

# Instructions executed (whole process, set-up included), W1 (one thread) and W5 (4 consumers, which valgrind runs one at a time), scale 0.05.
if command -v valgrind >/dev/null; then
  for workload in W1 W5; do
    for side in before after; do
      if [ $side = before ]; then bin=target/before-seam/release/examples/bench_workloads; commit=$before_commit
      else bin=target/release/examples/bench_workloads; commit=$after_commit; fi
      instructions=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" --workload "$workload" --scale 0.05 2>&1 >/dev/null |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
      echo "{\"side\":\"$side\",\"commit\":\"$commit\",\"bench\":\"workqueue $workload instructions\",\"value\":$instructions,\"unit\":\"instructions\",\"scale\":0.05}" | tee -a "$OUT"
    done
  done
fi
echo "[bench-seam] wrote $OUT" >&2
