#!/usr/bin/env bash
# The leader-election benchmark: client-go v0.37's tools/leaderelection against ferrokube::leader,
# interleaved, on the real kube-apiserver (scripts/kube-apiserver.sh). Protocol: benches/peers/LEADER.md.
#
#   K8S_VERSION=1.37.2 scripts/bench-leader.sh                # 10 reps, 3 idle windows of 60 s
#   scripts/bench-leader.sh --reps 1 --idle-reps 1 --idle-secs 10 --out /tmp/smoke.jsonl   # smoke
#   scripts/bench-leader.sh --impls client-go,client-go-v0.37,ferrokube   # with v1.20's candidate too
#
# The client-go v0.37 candidate is built every time (benches/peers/client-go-v0.37/build.sh leader,
# cached); v1.20's (scripts/build-client-go-leader.sh, which needs the 1.20.2 tree) only when an
# argument names the implementation `client-go`.
# Arguments go to the driver (examples/src/bin/bench_leader.rs). Raw lines:
# benches/leader/results-<date>.jsonl unless --out says otherwise; candidates' stderr:
# target/bench-leader/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."

# A server of its own (state, ports), so that no other benchmark's server is reused: on releases
# after 1.20 it runs with APIServerIdentity off, because that feature has kube-apiserver renew a
# Lease of its own every 10 s (kube-system/apiserver-<id>), and apiserver_request_total{resource=
# "leases"} cannot tell those writes from the candidates'. (UnknownVersionInteroperabilityProxy
# depends on it, and 1.37 refuses to start with one off and the other on.) Stopped again at the end.
export STATE=${STATE:-/tmp/ferrokube-apiserver-leader} APISERVER_PORT=${APISERVER_PORT:-16453} \
  ETCD_PORT=${ETCD_PORT:-12389}
if [ "${K8S_VERSION:-1.20.2}" != 1.20.2 ]; then
  export APISERVER_FLAGS="${APISERVER_FLAGS:-} --feature-gates=APIServerIdentity=false,UnknownVersionInteroperabilityProxy=false"
fi
scripts/kube-apiserver.sh up
trap 'scripts/kube-apiserver.sh down >/dev/null 2>&1 || true' EXIT
eval "$(scripts/kube-apiserver.sh env)"
export KUBECONFIG
benches/peers/client-go-v0.37/build.sh leader >/dev/null
case " $* " in
  *client-go,* | *,client-go\ * | *" client-go "*) scripts/build-client-go-leader.sh >/dev/null ;;
esac
nice -n 15 cargo build --release -q -p ferrokube-examples --bin leader_candidate --bin bench_leader
"${CARGO_TARGET_DIR:-target}"/release/bench_leader "$@"
