#!/usr/bin/env bash
# Real projects' CustomResourceDefinitions as a yardstick for the embedded server's CRD handling
# (structural schemas, defaults, and above all the CEL `x-kubernetes-validations` rules: their
# compilation, cost estimate and evaluation). Each bundle is installed on a fresh server with kubectl,
# then its example objects are applied, and every file's outcome is one JSON line, so the two servers
# can be compared file by file:
#
#   cert-manager             github.com/cert-manager/cert-manager v1.21.2, deploy/crds/*.yaml
#   gateway-api-standard     sigs.k8s.io/gateway-api v1.6.3, config/crd/standard/*.yaml, then
#                            examples/standard/**.yaml
#   gateway-api-experimental the same module's config/crd/experimental/*.yaml, then examples/**.yaml
#                            (standard and experimental examples: the experimental CRDs serve both)
#
# The modules come through the Go module proxy (`go mod download -json`, into the Go module cache);
# nothing is built. Each bundle gets its own server, because the standard bundle's
# ValidatingAdmissionPolicy (vap_safeupgrades) refuses experimental CRDs over standard ones.
#
#   scripts/crd-bundles.sh real       # on kube-apiserver (scripts/kube-apiserver.sh up/down per bundle)
#   scripts/crd-bundles.sh embedded   # on ferrokube-apiserver (cargo build, then one server per bundle)
#   scripts/crd-bundles.sh compare [A B]  # the files whose outcome differs (default: the last runs)
#   scripts/crd-bundles.sh check      # CI: embedded, then fail on any file whose outcome differs from
#                                     # the recorded kube-apiserver run (benches/conformance/)
#
# Data flow: download -> for each bundle: fresh server -> `kubectl apply --server-side` each CRD file
# (one line each) -> wait until they are Established -> create the namespaces the examples name ->
# apply each example file (one line each) -> stop the server. A line is
# {"server","bundle","file","accepted":bool,"error"}; `file` is relative to the module's root and
# `error` is kubectl's stderr (null when accepted).
#
# Settings (environment): CRD_BUNDLES_OUT (default target/crd-bundles), EMBEDDED_PORT (17490),
# K8S_VERSION (1.37.2), and scripts/kube-apiserver.sh's STATE / APISERVER_PORT / ETCD_PORT.
set -euo pipefail

log() { echo "[crd-bundles] $*" >&2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
out_dir=${CRD_BUNDLES_OUT:-$repo/target/crd-bundles}
K8S_VERSION=${K8S_VERSION:-1.37.2}
export K8S_VERSION
GATEWAY_MODULE=sigs.k8s.io/gateway-api GATEWAY_VERSION=v1.6.3
CERT_MANAGER_MODULE=github.com/cert-manager/cert-manager CERT_MANAGER_VERSION=v1.21.2
BUNDLES="cert-manager gateway-api-standard gateway-api-experimental"
# The recorded kube-apiserver run `check` compares with (re-record it with `real` when a bundle's or
# the server's release changes).
recorded_real=$repo/benches/conformance/crd-bundles-real-$K8S_VERSION-2026-11-29.jsonl

# The module's directory in the Go module cache (downloaded when missing).
module_dir() {
  local json
  json=$(cd / && GOFLAGS= go mod download -json "$1@$2") ||
    { log "$1@$2 is not on the module proxy ($(go env GOPROXY))"; exit 1; }
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p' <<<"$json"
}

# Prints "<root>" then the CRD files, then "--" then the example files of a bundle, one a line,
# relative to <root>.
bundle_files() {
  local root
  case $1 in
    cert-manager)
      root=$(module_dir "$CERT_MANAGER_MODULE" "$CERT_MANAGER_VERSION")
      echo "$root"
      (cd "$root" && find deploy/crds -maxdepth 1 -name '*.yaml' | sort)
      echo --
      ;;
    gateway-api-standard | gateway-api-experimental)
      root=$(module_dir "$GATEWAY_MODULE" "$GATEWAY_VERSION")
      local channel=${1#gateway-api-} examples=examples/standard
      [ "$channel" = experimental ] && examples=examples
      echo "$root"
      (cd "$root" && find "config/crd/$channel" -maxdepth 1 -name '*.yaml' ! -name kustomization.yaml | sort)
      echo --
      # Sorted, so a folder's 0-namespaces.yaml comes first (the namespaces are also created beforehand).
      (cd "$root" && find "$examples" -name '*.yaml' | sort)
      ;;
    *) log "unknown bundle $1"; exit 2 ;;
  esac
}

# Applies one file and appends its line to $results.
apply_one() {
  local server=$1 bundle=$2 root=$3 file=$4 err accepted=true
  if ! err=$(kubectl apply --server-side --force-conflicts -f "$root/$file" 2>&1 >/dev/null); then
    accepted=false
  fi
  python3 - "$server" "$bundle" "$file" "$accepted" "$err" >>"$results" <<'PY'
import json, sys
server, bundle, file, accepted, err = sys.argv[1:]
ok = accepted == "true"
print(json.dumps({"server": server, "bundle": bundle, "file": file, "accepted": ok,
                  "error": None if ok else err.strip()[:2000]}))
PY
}

# Every namespace an example file names (metadata.namespace and references' namespace fields).
example_namespaces() {
  local root=$1
  shift
  (cd "$root" && grep -ho '^[[:space:]]*namespace:[[:space:]]*[a-z0-9-]*' "$@" 2>/dev/null || true) |
    sed 's/.*namespace:[[:space:]]*//' | sort -u | grep -v '^$' || true
}

run_bundle() {
  local server=$1 bundle=$2 listing root file crds=() examples=() in_examples=0
  listing=$(bundle_files "$bundle")
  root=$(head -n1 <<<"$listing")
  while IFS= read -r file; do
    if [ "$file" = -- ]; then in_examples=1; continue; fi
    [ -n "$file" ] || continue
    if [ $in_examples = 1 ]; then examples+=("$file"); else crds+=("$file"); fi
  done < <(tail -n +2 <<<"$listing")
  log "$server $bundle: ${#crds[@]} CRD files, ${#examples[@]} example files"
  for file in "${crds[@]}"; do apply_one "$server" "$bundle" "$root" "$file"; done
  [ ${#examples[@]} -gt 0 ] || return 0
  kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null 2>&1 ||
    log "not every CRD became Established within 60 s"
  local ns
  for ns in $(example_namespaces "$root" "${examples[@]}"); do
    kubectl create namespace "$ns" >/dev/null 2>&1 || true
  done
  for file in "${examples[@]}"; do apply_one "$server" "$bundle" "$root" "$file"; done
}

started_pid=
stop_embedded() {
  [ -n "$started_pid" ] || return 0
  kill "$started_pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$started_pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$started_pid" 2>/dev/null || true
  started_pid=
}
trap stop_embedded EXIT

start_embedded() {
  local bundle=$1 port=${EMBEDDED_PORT:-17490}
  export KUBECONFIG=$out_dir/embedded-$bundle.kubeconfig
  rm -f "$KUBECONFIG"
  "${CARGO_TARGET_DIR:-$repo/target}/debug/ferrokube-apiserver" --port "$port" --kubeconfig "$KUBECONFIG" \
    --no-builtin-controllers >"$out_dir/embedded-$bundle-apiserver.log" 2>&1 &
  started_pid=$!
  for _ in $(seq 1 200); do
    if [ -s "$KUBECONFIG" ] && curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then return 0; fi
    sleep 0.05
  done
  log "the embedded server did not become ready:"
  tail -n 20 "$out_dir/embedded-$bundle-apiserver.log" >&2
  return 1
}

summary() {
  python3 - "$1" <<'PY'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
c = collections.defaultdict(lambda: [0, 0])
for r in rows:
    kind = "example" if r["file"].startswith("examples/") else "crd"
    c[(r["bundle"], kind)][0] += r["accepted"]
    c[(r["bundle"], kind)][1] += 1
for (bundle, kind), (ok, n) in c.items():
    print(f"[crd-bundles] {rows[0]['server']} {bundle}: {ok} of {n} {kind} files accepted", file=sys.stderr)
PY
}

embedded() {
  mkdir -p "$out_dir"
  log "building ferrokube-apiserver (cargo build, dev profile)"
  (cd "$repo" && nice -n 19 cargo build -q -p ferrokube-apiserver --bin ferrokube-apiserver >&2)
  results=$out_dir/embedded.jsonl
  : >"$results"
  local bundle
  for bundle in $BUNDLES; do
    start_embedded "$bundle"
    run_bundle embedded "$bundle"
    stop_embedded
  done
  summary "$results"
}

real() {
  mkdir -p "$out_dir"
  results=$out_dir/real-$K8S_VERSION.jsonl
  : >"$results"
  local bundle
  for bundle in $BUNDLES; do
    "$repo/scripts/kube-apiserver.sh" down >/dev/null 2>&1 || true
    "$repo/scripts/kube-apiserver.sh" up >&2
    eval "$("$repo/scripts/kube-apiserver.sh" env)"
    export KUBECONFIG
    run_bundle "kube-apiserver-v$K8S_VERSION" "$bundle"
  done
  "$repo/scripts/kube-apiserver.sh" down >&2
  summary "$results"
}

compare() {
  local a=${1:-$out_dir/real-$K8S_VERSION.jsonl} b=${2:-$out_dir/embedded.jsonl}
  python3 - "$a" "$b" <<'PY'
import json, sys
def load(path):
    try:
        return {(r["bundle"], r["file"]): r for r in map(json.loads, open(path))}
    except FileNotFoundError:
        sys.exit(f"[crd-bundles] no results in {path}")
a, b = load(sys.argv[1]), load(sys.argv[2])
differ = 0
for k in sorted(set(a) | set(b)):
    ra, rb = a.get(k), b.get(k)
    sa = "-" if ra is None else ("accepted" if ra["accepted"] else "refused")
    sb = "-" if rb is None else ("accepted" if rb["accepted"] else "refused")
    if sa == sb:
        continue
    differ += 1
    print(f"{sa:8} {sb:8}  {k[0]}: {k[1]}")
    for r in (ra, rb):
        if r and r["error"]:
            print(f"{'':19}{r['server']}: {r['error'][:300]}")
ok = lambda d: sum(r["accepted"] for r in d.values())
print(f"[crd-bundles] {sys.argv[1]}: {ok(a)} of {len(a)} accepted; {sys.argv[2]}: {ok(b)} of {len(b)}; "
      f"{differ} differ", file=sys.stderr)
PY
}

# CI: the embedded run, then exit 1 if any file's outcome differs from the recorded kube-apiserver run.
check() {
  embedded
  local report
  report=$(compare "$recorded_real" "$out_dir/embedded.jsonl" 2>&1)
  echo "$report" >&2
  grep -q ' 0 differ$' <<<"$report" || { log "the embedded server differs from kube-apiserver $K8S_VERSION (above)"; exit 1; }
}

case ${1:-} in
  real) real ;;
  embedded) embedded ;;
  compare) shift; compare "$@" ;;
  check) check ;;
  *) sed -n '2,30p' "$0" >&2; exit 2 ;;
esac
