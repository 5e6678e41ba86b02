#!/usr/bin/env bash
# Builds the kube-rs peers (release) outside the main workspace's target folder and prints the
# binary's path as the last line of stdout.
#
#   ./build.sh              # the workqueue peer (kube_runtime::scheduler)
#   ./build.sh informer     # the informer peer (kube_runtime::watcher + reflector)
set -euo pipefail
cd "$(dirname "$0")"
export CARGO_TARGET_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube/peer-target
case ${1:-workqueue} in
  workqueue) name=kube-runtime-peer ;;
  informer) name=kube-rs-informer-peer ;;
  *) echo "unknown peer $1: workqueue or informer" >&2; exit 2 ;;
esac
cargo build --release -q --bin "$name" >&2
echo "$CARGO_TARGET_DIR/release/$name"
