#!/usr/bin/env bash
# End-to-end tests against real kube-apiservers, one release after another: for each release, start
# it (scripts/kube-apiserver.sh up: installs and builds what it needs on first use), run its end-to-end
# suites against it, stop it; exit non-zero if anything failed on any release.
#
#   scripts/e2e.sh                              # the matrix: 1.37.2 (everything), then 1.20.2 (a subset)
#   K8S_VERSIONS=1.37.2 scripts/e2e.sh          # one release only (everything, as it is the current one)
#   K8S_VERSION=1.20.2 scripts/e2e.sh           # one release, every suite on it (the old single-release
#                                               # form: K8S_VERSION alone means that release, in full)
#   E2E_FULL=1 scripts/e2e.sh                   # every suite on every release of the matrix
#   KEEP=1 scripts/e2e.sh                       # leave the last server running (stop: scripts/kube-apiserver.sh down)
#   E2E_SUITES='informer derive' scripts/e2e.sh # only the suites whose line (below) has one of these
#                                               # words; the sample, manifests and specs are skipped
#
# scripts/kube-apiserver.sh's STATE, APISERVER_PORT, ETCD_PORT apply too: each release gets the same
# state directory and ports, one after the other (its `down` clears them in between).
#
# # The matrix
#
# The embedded server imitates the current release, CURRENT below (1.37.2), and the controllers are
# written against its behaviour: every suite runs there, and Kubernetes' own [Conformance] specs of
# that release (scripts/conformance.sh) run against it and against the embedded server.
#
# An older release, 1.20.2, runs the suites whose code has a per-release path, so that the path for
# old servers stays tested (and each is cheap, a minute or less):
#   client::       the client's wire behaviour (TLS and X.509 v1 certificates, tokens, errors, watch
#                  framing) against a server five years older
#   informer::     ListMode::Streaming falls back to LIST + watch only where the server refuses a
#                  streaming list: 1.20 is where that fallback really runs
#   conformance::, tables::   every case with a documented 1.20 answer (documented/documented_with,
#                  ON_1_20, documented_1_20 in apiserver/tests/) checks it there; without a 1.20 run
#                  those expectations would rot unseen
#   parity_e2e::   the sample against kube-controller-manager 1.20 (its --port=0 path, 1.20's status
#                  fields without terminatingReplicas)
# Left out on 1.20: kubeconfigs, network faults, derive, the controller's author trap, stale churn,
# the drills, the dns sample, the manifests and Kubernetes' conformance specs: they test our own code against what any release does
# alike (or, for the manifests and the specs, the current release is the one that matters).
#
# Timings (2 cores shared with other builds, 2026-11-26, every server and e2e.test already built):
#   1.37.2  the suites ~10 min (6 of them tests, the rest compiling test binaries), conformance.sh real
#           13 min (5 of them the spec that waits for a pod to run), embedded 3.6 min plus the release
#           build of ferrokube-apiserver (8.6 min from an empty target/release): ~28-36 min
#   1.20.2  the subset ~6.7 min (2.5 of them tests)
# Building from empty caches adds, on two idle cores: 1.37.2's servers ~10 min
# (scripts/kube-apiserver.sh) and its e2e.test ~13 min (scripts/conformance.sh; with the servers'
# Go caches warm); 1.20.2's servers ~12 min (niced on busy cores). Real now skips the spec that
# needs a running pod, and embedded runs the dev-profile server (no release build).
#
# To run the same tests against your own cluster instead, skip this script:
#   KUBECONFIG=~/.kube/config cargo test -p ferrokube-client --features e2e --test client -- e2e::client::
#
# # How a test is marked as needing a real server
#
# One way for the whole workspace: the `e2e` feature of the crate that owns the test gates the
# module holding it (`#[cfg(feature = "e2e")] mod e2e;` in the crate's test binary; the samples'
# `*_e2e` modules and the API server's real-server targets are gated the same way). Without the
# feature the test is not compiled, so `cargo test` never passes it silently; with it, the test
# reads its cluster from the kubeconfig (`ferrokube_testkit::client`) and fails when there is none.
set -euo pipefail
cd "$(dirname "$0")/.."

CURRENT=1.37.2
if [ -n "${K8S_VERSIONS:-}" ]; then
  versions=$K8S_VERSIONS
elif [ -n "${K8S_VERSION:-}" ]; then
  versions=$K8S_VERSION
  E2E_FULL=1
else
  versions="$CURRENT 1.20.2"
fi

# Each end-to-end suite (a module of a test binary: `-p PACKAGE --features e2e --test BINARY --
# MODULE::`; later issues add theirs here):
#   client (client/tests/client/e2e/)    the client's wire behaviour, kubeconfigs, network faults
#   informer (informer/tests/informer/e2e.rs)  the informer converges after closed watches, compaction
#   derive (derive/tests/derive/e2e.rs)  the CustomResource derive (its CRD, objects, kubectl, validation)
#   controller (runtime/tests/controller/e2e.rs)  the controller's author traps that hang on the server
#   shard_selector (runtime/tests/shard_selector/e2e.rs)  the sharded runtime, by hand and through the
#                                    Manager: server-side ranges when the server has ShardedListAndWatch
#                                    (APISERVER_FLAGS=--feature-gates=ShardedListAndWatch=true), else
#                                    its label fallback
#   apiserver (apiserver/tests/)     the embedded server's conformance and Table suites compared with
#                                    the real one (its other suites need no cluster: `cargo test`);
#                                    cel: the CRD validation rules corpus against the real server
#                                    (from 1.25 its recorded 1.37.2 answers; before, no rules at all)
#   replicaset, drills (examples/tests/)  the sample's parity with kube-controller-manager, the
#                                    stale-cache churn, the leader and shard drills as processes
all_suites=(
  "ferrokube-client client e2e::client::"
  "ferrokube-client client e2e::kubeconfigs::"
  "ferrokube-informer informer e2e::"
  "ferrokube-client client e2e::network_faults::"
  "ferrokube-derive derive e2e::"
  "ferrokube-runtime controller e2e::"
  "ferrokube-runtime shard_selector e2e::"
  "ferrokube-apiserver apiserver conformance::"
  "ferrokube-apiserver apiserver cel::"
  "ferrokube-apiserver apiserver tables::"
  "ferrokube-examples replicaset parity_e2e::"
  "ferrokube-examples replicaset stale_e2e::"
  "ferrokube-examples drills leader_e2e::"
  "ferrokube-examples drills shard_e2e::"
)
# The subset an older release runs (see the matrix above).
older_suites=(
  "ferrokube-client client e2e::client::"
  "ferrokube-informer informer e2e::"
  "ferrokube-apiserver apiserver conformance::"
  "ferrokube-apiserver apiserver tables::"
  "ferrokube-examples replicaset parity_e2e::"
)

status=0
summary=()
last=${versions##* }
for version in $versions; do
  export K8S_VERSION=$version
  full=no
  if [ "$version" = "$CURRENT" ] || [ "${E2E_FULL:-0}" = 1 ]; then full=yes; fi
  echo "[e2e] ==== Kubernetes $version ($([ $full = yes ] && echo 'every suite' || echo 'the subset for older releases'))" >&2
  started=$SECONDS
  # A server of another release in the same STATE is stopped first (kube-apiserver.sh refuses to
  # start over it).
  state=${STATE:-/tmp/ferrokube-apiserver}
  if [ -f "$state/k8s-version" ] && [ "$(cat "$state/k8s-version")" != "$version" ]; then
    scripts/kube-apiserver.sh down
  fi
  scripts/kube-apiserver.sh up
  eval "$(scripts/kube-apiserver.sh env)"
  export KUBECONFIG FERROKUBE_E2E_ETCD FERROKUBE_KCM FERROKUBE_AUDIT_LOG

  if [ $full = yes ]; then
    suites=("${all_suites[@]}")
  else
    suites=("${older_suites[@]}")
  fi
  if [ -n "${E2E_SUITES:-}" ]; then
    chosen=()
    for suite in "${suites[@]}"; do
      for word in $E2E_SUITES; do
        if [[ " $suite " == *"$word"* ]]; then chosen+=("$suite"); break; fi
      done
    done
    suites=("${chosen[@]}")
    full=no
    echo "[e2e] E2E_SUITES='$E2E_SUITES': ${#suites[@]} suite(s); the sample, the manifests and the specs skipped" >&2
  fi
  if [[ " ${suites[*]} " == *network_faults* ]]; then
    # The client-go v0.37 informer that the dead-connection drill runs beside ours (Go module proxy).
    FERROKUBE_CLIENT_GO_DEADCONN=$(benches/peers/client-go-v0.37/build.sh deadconn | tail -n 1)
    export FERROKUBE_CLIENT_GO_DEADCONN
  fi
  version_status=0
  for suite in "${suites[@]}"; do
    read -r package binary filters <<<"$suite"
    echo "[e2e] $version: cargo test -p $package --features e2e --test $binary -- $filters" >&2
    suite_started=$SECONDS
    # shellcheck disable=SC2086 # the filters are words
    if ! cargo test -p "$package" --features e2e --test "$binary" -- --test-threads=4 $filters; then
      version_status=1
      summary+=("$version FAILED $filters")
    fi
    echo "[e2e] $version: $filters took $((SECONDS - suite_started)) s" >&2
  done

  if [ $full = yes ] && [ "$version" = "$CURRENT" ]; then
    # Server-side sharded list and watch (KEP-5866) is alpha, off by default: the suites above ran
    # the label fallback. The same server once more with the gate on, for the suites that compare
    # the server-side mode (the embedded server's shardSelector, the sharded runtime's ranges).
    echo "[e2e] $version: the shard suites again, with --feature-gates=ShardedListAndWatch=true" >&2
    scripts/kube-apiserver.sh down
    APISERVER_FLAGS="${APISERVER_FLAGS:-} --feature-gates=ShardedListAndWatch=true" scripts/kube-apiserver.sh up
    eval "$(scripts/kube-apiserver.sh env)"
    for suite in "ferrokube-apiserver apiserver shard_selector_partitions_lists_and_watches_conformance" \
                 "ferrokube-runtime shard_selector e2e::"; do
      read -r package binary filters <<<"$suite"
      echo "[e2e] $version (gated): cargo test -p $package --features e2e --test $binary -- $filters" >&2
      # shellcheck disable=SC2086 # the filters are words
      if ! FERROKUBE_E2E_SHARD_SELECTOR=1 cargo test -p "$package" --features e2e --test "$binary" -- --test-threads=4 $filters; then
        version_status=1
        summary+=("$version FAILED $filters (ShardedListAndWatch on)")
      fi
    done
    # Back to the server every later step expects.
    scripts/kube-apiserver.sh down
    scripts/kube-apiserver.sh up
    eval "$(scripts/kube-apiserver.sh env)"
  fi

  if [ $full = yes ]; then
    # The second sample controller (a CustomResource managing records outside Kubernetes): its whole
    # story (drift, edits, a restart, deletions) must converge on the real server too.
    echo "[e2e] $version: cargo run -p ferrokube-examples --bin dns -- --cluster" >&2
    cargo run -q -p ferrokube-examples --bin dns -- --cluster || { version_status=1; summary+=("$version FAILED dns"); }

    # How the sample starts in a cluster (deploy/replicaset/): the real server must accept every
    # manifest (schema, RBAC rules, probes) as it would apply them.
    echo "[e2e] $version: kubectl apply --dry-run=server -f deploy/replicaset/" >&2
    kubectl apply -f deploy/replicaset/namespace.yaml >&2 || version_status=1
    kubectl apply --dry-run=server -f deploy/replicaset/ >&2 || { version_status=1; summary+=("$version FAILED deploy/replicaset"); }
    # The sharded variant (deploy/replicaset-sharded/): its own RBAC and Deployment, same namespace.
    echo "[e2e] $version: kubectl apply --dry-run=server -f deploy/replicaset-sharded/" >&2
    kubectl apply --dry-run=server -f deploy/replicaset-sharded/ >&2 || { version_status=1; summary+=("$version FAILED deploy/replicaset-sharded"); }

    # Kubernetes' own [Conformance] specs of this release (a focused [sig-api-machinery] set, its
    # e2e.test) as a yardstick, against the real server and then the embedded one; each fails only
    # when a spec listed in tests/conformance/k8s-expected*.txt for that server does not pass.
    scripts/conformance.sh real || { version_status=1; summary+=("$version FAILED conformance.sh real"); }
    scripts/conformance.sh embedded || { version_status=1; summary+=("$version FAILED conformance.sh embedded"); }
  fi

  summary+=("$version $([ $version_status = 0 ] && echo ok || echo FAILED) in $((SECONDS - started)) s")
  [ $version_status = 0 ] || status=1
  if [ "$version" != "$last" ] || [ "${KEEP:-0}" != 1 ]; then
    scripts/kube-apiserver.sh down
  fi
done

echo "[e2e] summary:" >&2
for line in "${summary[@]}"; do echo "[e2e]   $line" >&2; done
exit $status
