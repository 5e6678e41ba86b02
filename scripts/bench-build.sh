#!/usr/bin/env bash
# What a user's build costs: the clean `cargo build` of a project whose only dependency is
# `ferrokube` (default features, path dependency), at a BEFORE commit and at this checkout, in turns
# (before, after, before, after, ...) so that both meet the same machine; and `cargo tree -e normal`
# of each, the crates that build pulls in.
#
#   scripts/bench-build.sh                      # BEFORE=243ef56 (before the layers), RUNS=2
#   BEFORE=<commit> RUNS=3 scripts/bench-build.sh
#
# Writes benches/layers/build-<date>.jsonl (one line per build: side, commit, seconds) and
# benches/layers/tree-{before,after}.txt. Each build starts from an empty target directory with
# CARGO_INCREMENTAL=0, as CI's does; the registry's sources are already downloaded (the first,
# untimed `cargo fetch` sees to it), so the figure is compile time, not network time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

before=${BEFORE:-243ef56}
runs=${RUNS:-2}
work=$root/target/bench-build
mkdir -p "$work" benches/layers
out=benches/layers/build-$(date -u +%F).jsonl

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

for run in $(seq 1 "$runs"); do
  for side in before after; do
    rm -rf "$work/user-$side/target"
    start=$(date +%s.%N)
    (cd "$work/user-$side" && CARGO_INCREMENTAL=0 cargo build -q)
    end=$(date +%s.%N)
    seconds=$(echo "$end - $start" | bc)
    commit=$after_commit
    [ "$side" = before ] && commit=$before_commit
    printf '{"bench":"user-build","side":"%s","commit":"%s","run":%d,"seconds":%.1f,"cores":%d}\n' \
      "$side" "$commit" "$run" "$seconds" "$(nproc)" | tee -a "$out"
  done
done
echo "crates in a user's build: before $(grep -vc '^#' benches/layers/tree-before.txt), after $(grep -vc '^#' benches/layers/tree-after.txt)" >&2
