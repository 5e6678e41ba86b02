#!/usr/bin/env bash
# The leader-election benchmark: client-go v1.20's tools/leaderelection against ferrokube::leader,
# interleaved, on the real kube-apiserver (scripts/kube-apiserver.sh). Protocol: benches/peers/LEADER.md.
#
#   scripts/bench-leader.sh                                   # 10 reps, 3 idle windows of 60 s
#   scripts/bench-leader.sh --reps 1 --idle-reps 1 --idle-secs 10 --out /tmp/smoke.jsonl   # smoke
#
# Arguments go to the driver (examples/src/bin/bench_leader.rs). Raw lines:
# benches/leader/results-<date>.jsonl unless --out says otherwise; candidates' stderr:
# target/bench-leader/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/kube-apiserver.sh up
eval "$(scripts/kube-apiserver.sh env)"
export KUBECONFIG
scripts/build-client-go-leader.sh >/dev/null
nice -n 15 cargo build --release -q -p ferrokube-examples --bin leader_candidate --bin bench_leader
exec target/release/bench_leader "$@"
