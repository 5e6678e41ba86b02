#!/usr/bin/env bash
# End-to-end tests against a real kube-apiserver: start it (scripts/kube-apiserver.sh up: installs and
# builds what it needs on first use), run every end-to-end test target against it, stop it, and exit
# non-zero if anything failed.
#
#   scripts/e2e.sh                 # everything
#   KEEP=1 scripts/e2e.sh          # leave the server running afterwards (stop: scripts/kube-apiserver.sh down)
#   K8S_VERSION=1.37.2 scripts/e2e.sh   # on another release (default 1.20.2; see scripts/kube-apiserver.sh;
#                                       # its STATE, APISERVER_PORT, ETCD_PORT apply too)
#
# To run the same tests against your own cluster instead, skip this script:
#   KUBECONFIG=~/.kube/config cargo test --features e2e --test e2e -- client::
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/kube-apiserver.sh up
eval "$(scripts/kube-apiserver.sh env)"
export KUBECONFIG FERROKUBE_E2E_ETCD FERROKUBE_KCM FERROKUBE_AUDIT_LOG

# The client-go v0.37 informer that the dead-connection drill runs beside ours (Go module proxy).
FERROKUBE_CLIENT_GO_DEADCONN=$(benches/peers/client-go-v0.37/build.sh deadconn | tail -n 1)
export FERROKUBE_CLIENT_GO_DEADCONN

status=0
# Each end-to-end suite, in turn, one at a time (each is a module of a test binary: `--test BINARY
# -- MODULE::`; later issues add theirs here):
#   e2e (tests/e2e/)                 the client, kubeconfigs, the informer, network faults, the
#                                    CustomResource derive (its CRD, objects, kubectl, validation)
#   apiserver (apiserver/tests/)     the embedded server's conformance and Table suites compared with
#                                    the real one (its other suites need no cluster: `cargo test`);
#                                    cel: the CRD validation rules corpus against the real server
#                                    (from 1.25 its recorded 1.37.2 answers; before, no rules at all)
#   replicaset, drills (examples/tests/)  the sample's parity with kube-controller-manager, the
#                                    stale-cache churn, the leader and shard drills as processes
suites=(
  "ferrokube e2e client::"
  "ferrokube e2e kubeconfigs::"
  "ferrokube e2e informer::"
  "ferrokube e2e network_faults::"
  "ferrokube e2e derive::"
  "ferrokube-apiserver apiserver conformance::"
  "ferrokube-apiserver apiserver cel::"
  "ferrokube-apiserver apiserver tables::"
  "ferrokube-examples replicaset parity_e2e::"
  "ferrokube-examples replicaset stale_e2e::"
  "ferrokube-examples drills leader_e2e::"
  "ferrokube-examples drills shard_e2e::"
)
for suite in "${suites[@]}"; do
  read -r package binary filters <<<"$suite"
  echo "[e2e] cargo test -p $package --features e2e --test $binary -- $filters" >&2
  # shellcheck disable=SC2086 # the filters are words
  cargo test -p "$package" --features e2e --test "$binary" -- --test-threads=4 $filters || status=1
done

# The second sample controller (a CustomResource managing records outside Kubernetes): its whole
# story (drift, edits, a restart, deletions) must converge on the real server too.
echo "[e2e] cargo run -p ferrokube-examples --bin dns -- --cluster" >&2
cargo run -q -p ferrokube-examples --bin dns -- --cluster || status=1

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
