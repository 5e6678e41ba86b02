#!/usr/bin/env bash
# Builds the kube-runtime scheduler peer (release) outside the main workspace's target folder and prints
# the binary's path as the last line of stdout.
set -euo pipefail
cd "$(dirname "$0")"
export CARGO_TARGET_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube/peer-target
cargo build --release -q >&2
echo "$CARGO_TARGET_DIR/release/kube-runtime-peer"
