#!/usr/bin/env bash
# The layers' split measured, before (a BEFORE commit) and after (this checkout), in turns
# (before, after, before, after, ...) so that both meet the same machine:
#
# - build: the clean `cargo build` of a user's project whose only dependency is `ferrokube` (default
#   features, path dependency), and `cargo tree -e normal` of each, the crates that build pulls in;
# - decode: the client's watch decoding (`benches/watch_decode.rs`, criterion), events per second;
# - apiserver: creates per second through the client into the embedded server (`bench_apiserver`,
#   5,000 Pods), the request path the server's handlers now take.
#
#   scripts/bench-layers.sh                              # BEFORE=243ef56, RUNS=2, every phase
#   BEFORE=<commit> RUNS=3 PHASES="decode apiserver" scripts/bench-layers.sh
#
# Writes benches/layers/layers-<date>.jsonl (one line per run: bench, side, commit, value, unit) and
# benches/layers/tree-{before,after}.txt. Each build starts from an empty target directory with
# CARGO_INCREMENTAL=0, as CI's does; the registry's sources are already downloaded (the first,
# untimed `cargo fetch` sees to it), so the figure is compile time, not network time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

before=${BEFORE:-243ef56}
runs=${RUNS:-2}
phases=${PHASES:-build decode apiserver}
work=$root/target/bench-build
mkdir -p "$work" benches/layers
out=benches/layers/layers-$(date -u +%F).jsonl

# The BEFORE tree, checked out once beside this one.
if [ ! -d "$work/before-tree/.git" ] && [ ! -f "$work/before-tree/.git" ]; then
  git worktree add --detach "$work/before-tree" "$before" >&2
fi
before_commit=$(git -C "$work/before-tree" rev-parse --short HEAD)
after_commit=$(git rev-parse --short HEAD)

# A user's project for each side: one dependency, nothing else.
for side in before after; do
  tree=$root
  [ "$side" = before ] && tree=$work/before-tree
  mkdir -p "$work/user-$side/src"
  cat >"$work/user-$side/Cargo.toml" <<EOF
[package]
name = "user-$side"
version = "0.1.0"
edition = "2024"

[dependencies]
ferrokube = { path = "$tree" }

[workspace]
EOF
  echo 'fn main() { let _ = ferrokube::Config::infer; }' >"$work/user-$side/src/main.rs"
  (cd "$work/user-$side" && cargo fetch -q)
  # The crates a user's build pulls in: `cargo tree -e normal`, one line per crate and version.
  {
    echo "# cargo tree -e normal --prefix none of a project depending on ferrokube (default features) at $([ "$side" = before ] && echo "$before_commit" || echo "$after_commit"), sorted, repeats removed"
    (cd "$work/user-$side" && cargo tree -e normal --prefix none | sed 's/ (\*)$//; s/ (.*)$//' | sort -u)
  } >"benches/layers/tree-$side.txt"
done

# One JSON line.
record() {
  printf '{"bench":"%s","side":"%s","commit":"%s","run":%d,"value":%s,"unit":"%s","cores":%d}\n' \
    "$1" "$2" "$3" "$4" "$5" "$6" "$(nproc)" | tee -a "$out"
}

if [[ " $phases " == *" build "* ]]; then
for run in $(seq 1 "$runs"); do
  for side in before after; do
    rm -rf "$work/user-$side/target"
    start=$(date +%s.%N)
    (cd "$work/user-$side" && CARGO_INCREMENTAL=0 cargo build -q)
    end=$(date +%s.%N)
    seconds=$(echo "$end - $start" | bc)
    commit=$after_commit
    [ "$side" = before ] && commit=$before_commit
    record user-build "$side" "$commit" "$run" "$seconds" s
  done
done
fi

# The runtime benchmarks need each side's release build: before and after each in its own target.
if [[ " $phases " == *" decode "* || " $phases " == *" apiserver "* ]]; then
  (cd "$work/before-tree" && cargo build --release -q --bench watch_decode --example bench_apiserver --features apiserver 2>/dev/null \
    || cargo build --release -q --bench watch_decode --example bench_apiserver)
  cargo build --release -q --bench watch_decode -p ferrokube
  cargo build --release -q -p ferrokube-examples --bin bench_apiserver
  decode_before=$(ls -t "$work"/before-tree/target/release/deps/watch_decode-* | grep -v '\.d$' | head -n 1)
  decode_after=$(ls -t target/release/deps/watch_decode-* | grep -v '\.d$' | head -n 1)
  apiserver_before=$work/before-tree/target/release/examples/bench_apiserver
  apiserver_after=target/release/bench_apiserver
  for run in $(seq 1 "$runs"); do
    for side in before after; do
      commit=$after_commit decode=$decode_after apiserver=$apiserver_after
      [ "$side" = before ] && commit=$before_commit decode=$decode_before apiserver=$apiserver_before
      if [[ " $phases " == *" decode "* ]]; then
        # criterion's "thrpt: [low mid high]" line of our decoder (not the floor): the middle figure.
        eps=$("$decode" --bench 'ferrokube LineDecoder' 2>/dev/null | grep -A3 'ferrokube LineDecoder' \
          | sed -n 's/.*thrpt: *\[[^ ]* [^ ]* \([0-9.]*\) \([KM]\)elem\/s.*/\1 \2/p' | head -n 1 \
          | awk '{ print ($2 == "M") ? $1 * 1e6 : $1 * 1e3 }')
        record watch-decode "$side" "$commit" "$run" "${eps:-0}" events/s
      fi
      if [[ " $phases " == *" apiserver "* ]]; then
        creates=$(RUST_LOG=error "$apiserver" --pods 5000 --watchers 4 --rate 200 --seconds 5 2>/dev/null \
          | sed -n 's/^created [0-9]* pods in [0-9.]* s: \([0-9]*\) creates\/s.*/\1/p')
        record apiserver-creates "$side" "$commit" "$run" "${creates:-0}" creates/s
      fi
    done
  done
fi

echo "crates in a user's build: before $(grep -vc '^#' benches/layers/tree-before.txt), after $(grep -vc '^#' benches/layers/tree-after.txt)" >&2
