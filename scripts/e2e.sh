#!/usr/bin/env bash
# End-to-end tests against a real kube-apiserver: start it (scripts/kube-apiserver.sh up: installs and
# builds what it needs on first use), run every end-to-end test target against it, stop it, and exit
# non-zero if anything failed.
#
#   scripts/e2e.sh                 # everything
#   KEEP=1 scripts/e2e.sh          # leave the server running afterwards (stop: scripts/kube-apiserver.sh down)
#
# To run the same tests against your own cluster instead, skip this script:
#   KUBECONFIG=~/.kube/config cargo test --features e2e --test e2e_client
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/kube-apiserver.sh up
eval "$(scripts/kube-apiserver.sh env)"
export KUBECONFIG FERROKUBE_E2E_ETCD FERROKUBE_KCM FERROKUBE_AUDIT_LOG

# The client-go v0.37 informer that the dead-connection drill runs beside ours (Go module proxy).
FERROKUBE_CLIENT_GO_DEADCONN=$(benches/peers/client-go-v0.37/build.sh deadconn | tail -n 1)
export FERROKUBE_CLIENT_GO_DEADCONN

status=0
# Each end-to-end target, in turn (later issues add theirs here). `apiserver` is the embedded API
# server's own test binary (apiserver/tests/apiserver/): its conformance and Table suites compare the
# embedded server with the real one; its other suites need no cluster and are left to `cargo test`.
for target in e2e_client e2e_kubeconfigs e2e_informer e2e_network_faults apiserver e2e_replicaset e2e_stale e2e_leader e2e_shard; do
  if [ "$target" = apiserver ]; then
    echo "[e2e] cargo test -p ferrokube-apiserver --features e2e --test apiserver -- conformance:: tables::" >&2
    cargo test -p ferrokube-apiserver --features e2e --test apiserver -- --test-threads=4 conformance:: tables:: || status=1
    continue
  fi
  echo "[e2e] cargo test --features e2e --test $target" >&2
  cargo test --features e2e --test "$target" -- --test-threads=4 || status=1
done

# The second sample controller (a CustomResource managing records outside Kubernetes): its whole
# story (drift, edits, a restart, deletions) must converge on the real server too.
echo "[e2e] cargo run --example dns -- --cluster" >&2
cargo run -q --example dns -- --cluster || status=1

# How the sample starts in a cluster (deploy/replicaset/): the real server must accept every manifest
# (schema, RBAC rules, probes) as it would apply them.
echo "[e2e] kubectl apply --dry-run=server -f deploy/replicaset/" >&2
kubectl apply -f deploy/replicaset/namespace.yaml >&2 || status=1
kubectl apply --dry-run=server -f deploy/replicaset/ >&2 || status=1
# The sharded variant (deploy/replicaset-sharded/): its own RBAC and Deployment, same namespace.
echo "[e2e] kubectl apply --dry-run=server -f deploy/replicaset-sharded/" >&2
kubectl apply --dry-run=server -f deploy/replicaset-sharded/ >&2 || status=1

# Kubernetes' own [Conformance] specs (a focused [sig-api-machinery] set, e2e.test of 1.20.2) as a
# yardstick, against the real server and then the embedded one; each fails only when a spec listed in
# tests/conformance/k8s-expected.txt for that server does not pass.
scripts/conformance.sh real || status=1
scripts/conformance.sh embedded || status=1

if [ "${KEEP:-0}" != 1 ]; then
  scripts/kube-apiserver.sh down
fi
exit $status
