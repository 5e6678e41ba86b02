#!/usr/bin/env bash
# Kubernetes' own conformance end-to-end specs (test/e2e of the release K8S_VERSION) as a yardstick:
# the same focused set of [Conformance] specs run against the real kube-apiserver and against
# ferrokube's embedded API server. The release's e2e.test comes from where its servers come from
# (scripts/kube-apiserver.sh):
#
#   1.37.2 (default), any release on the Go module proxy: `go test -c k8s.io/kubernetes/test/e2e` in a
#                     module generated with the same go.mod recipe as the servers' (see
#                     build_module_e2e); ~/.cache/ferrokube/k8s-v<version>/bin/e2e.test
#   1.20.2            Debian's `kubernetes` source package (GOPATH mode); ~/.cache/ferrokube/bin/e2e.test
#
# or, for either, from a folder of prebuilt binaries when one is offered (FERROKUBE_K8S_PREBUILT,
# default ../shared/k8s when it exists; scripts/k8s-prebuilt.sh): unpacked into the same place after
# its sha256 is checked, a mismatch being an error, never a silent build.
#
# K8S_VERSION defaults to the release of the server that is up (its STATE says), else 1.37.2, the
# release the embedded server imitates. (1.20's e2e.test waits for the service-account token Secrets
# that kube-controller-manager stopped making in 1.24, so it is no yardstick for a current server.)
#
#   scripts/conformance.sh build      # build e2e.test of K8S_VERSION (cached; long the first time)
#   scripts/conformance.sh real       # run the specs against the real kube-apiserver (+ kube-controller-manager)
#   scripts/conformance.sh embedded   # run the specs against the embedded server (ferrokube-apiserver)
#   scripts/conformance.sh compare    # print where the two servers' last results differ
#   scripts/conformance.sh report S   # S.jsonl and the table again from the last run's JUnit XML
#
# `real` starts the real server if it is not running (scripts/kube-apiserver.sh up; stopped again
# afterwards only if this script started it), runs kube-controller-manager with every controller but
# nodelifecycle, creates one Ready, untainted Node (nothing runs containers there: no scheduler, no
# kubelet), runs e2e.test, then stops what it started. `embedded` builds and starts ferrokube-apiserver
# (`--kubelet`, so pods run), runs kube-controller-manager against it restricted to the workload
# controllers (the garbage collector specs use ReplicationControllers, ReplicaSets and Deployments) and
# the root-ca-cert-publisher (each namespace's kube-root-ca.crt, which e2e.test waits for), and
# runs the same specs; e2e.test and kube-controller-manager send it JSON bodies when it refuses the
# protobuf body of a probe (kubectl create quota), as it did on 2026-11-24 for ResourceQuota,
# ReplicationController, Event and DeleteOptions.
#
# Timings on 2 cores: 1.20.2 (2026-11-24): e2e.test builds in ~2 min when kube-apiserver.sh has built
# its servers with the same Go cache, ~5.5 min from an empty Go cache; `real` took ~10 min when it
# still ran the spec that waits for a pod to run (5 of them; now skipped there, REAL_SKIP),
# `embedded` ~5 min plus its build. 1.37.2 (2026-11-26): e2e.test builds in 760 s on a quiet
# machine after the servers (same Go caches, both empty before them; 1,237 s user + 207 s system
# CPU, 2.9 GB peak RSS).
#
# Results: one JSON line per spec,
# {"server","spec","status":"passed|failed|skipped|not-run","seconds","error"},
# in $CONFORMANCE_OUT (default target/conformance/<server>.jsonl), a table on stderr, and the e2e
# output, JUnit XML and controller-manager log next to it. Exit status 1 when a spec listed for that
# server in the release's list did not pass (tests/conformance/k8s-expected.txt for 1.20.2,
# k8s-expected-<version>.txt for the others: the specs seen to pass there).
#
# Settings (environment): CONFORMANCE_OUT, CONFORMANCE_FOCUS (ginkgo focus regex, default the set
# below), EMBEDDED_PORT (default 16480), and scripts/kube-apiserver.sh's STATE / APISERVER_PORT.
set -euo pipefail

log() { echo "[conformance] $*" >&2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube
STATE=${STATE:-/tmp/ferrokube-apiserver}
# The release whose e2e.test runs: K8S_VERSION, else the one of the server that is up, else 1.20.2.
if [ -z "${K8S_VERSION:-}" ] && [ -f "$STATE/k8s-version" ]; then
  K8S_VERSION=$(cat "$STATE/k8s-version")
fi
K8S_VERSION=${K8S_VERSION:-1.37.2}
K8S_VERSION=${K8S_VERSION#v}
export K8S_VERSION
# The specs expected to pass on each server, per release: 1.20.2's list is k8s-expected.txt (the
# first one), every other release's k8s-expected-<version>.txt next to it.
case $K8S_VERSION in
  1.20.2)
    bin=$cache/bin
    expected_list=$repo/tests/conformance/k8s-expected.txt
    ;;
  *)
    bin=$cache/k8s-v$K8S_VERSION/bin
    expected_list=$repo/tests/conformance/k8s-expected-$K8S_VERSION.txt
    ;;
esac

source_version() {
  local tree=$1 version
  version=$(sed -n '1s/^kubernetes (\([^)]*\)).*/\1/p' "$tree/debian/changelog")
  version=${version#*really}
  echo "${version%%-*}"
}

# test/e2e/generated/bindata.go (the manifests and test data the e2e binary embeds), generated with
# the vendored go-bindata exactly as the tree's hack/generate-bindata.sh does.
generate_bindata() {
  local tree=$1 gopath=$2 out=$1/test/e2e/generated/bindata.go
  [ -s "$out" ] && return 0
  log "building go-bindata (vendored)"
  (cd "$gopath/src/k8s.io/kubernetes" &&
    env GO111MODULE=off CGO_ENABLED=0 GOPATH="$gopath" GOFLAGS= GOPROXY=off \
      go build -o "$bin/go-bindata" k8s.io/kubernetes/vendor/github.com/go-bindata/go-bindata/go-bindata >&2)
  log "generating test/e2e/generated/bindata.go"
  (cd "$tree" &&
    "$bin/go-bindata" -nometadata -o "$out.tmp" -pkg generated \
      -ignore .jpg -ignore .png -ignore .md -ignore 'BUILD(\.bazel)?' \
      "test/conformance/testdata/..." \
      "test/e2e/testing-manifests/..." \
      "test/e2e_node/testing-manifests/..." \
      "test/images/..." \
      "test/fixtures/..." &&
    gofmt -s -w "$out.tmp" && mv "$out.tmp" "$out")
}

# One e2e.test build of a release at a time (as scripts/kube-apiserver.sh's servers): a second
# caller waits for the first and then finds it built.
build() {
  mkdir -p "$cache"
  (
    flock 8
    build_unlocked
  ) 8>>"$cache/.build-e2e-$K8S_VERSION.lock"
}

build_unlocked() {
  # The servers (kube-apiserver.sh build: prebuilt or from source) and e2e.test from the prebuilt
  # offer when it holds one (scripts/k8s-prebuilt.sh; its sha256 checked, a mismatch ends the script).
  "$repo/scripts/kube-apiserver.sh" build
  local rc=0
  "$repo/scripts/k8s-prebuilt.sh" install "$K8S_VERSION" e2e.test "$bin" || rc=$?
  case $rc in
    0) return 0 ;;
    3) ;;
    *) log "the prebuilt e2e.test $K8S_VERSION was refused (above): not building over it"; exit 1 ;;
  esac
  if [ "$K8S_VERSION" != 1.20.2 ]; then
    build_module_e2e
    return
  fi
  # Packages, the source tree, Debian's reflect2 (see kube-apiserver.sh) and the two server binaries.
  "$repo/scripts/kube-apiserver.sh" build
  mkdir -p "$bin"
  local tree gopath
  tree=$("$repo/scripts/kubernetes-source.sh" 2>/dev/null | tail -n 1)
  gopath=$cache/kubernetes/gopath
  generate_bindata "$tree" "$gopath"
  local version major minor pkg ldflags="" stamp_want
  version=$(source_version "$tree")
  major=${version%%.*}
  minor=${version#*.}
  minor=${minor%%.*}
  for pkg in component-base/version client-go/pkg/version; do
    pkg=k8s.io/kubernetes/vendor/k8s.io/$pkg
    ldflags+=" -X $pkg.gitVersion=v$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean"
  done
  stamp_want=$( { go version; echo "$tree"; echo "$ldflags"; ls "$tree/vendor/github.com/modern-go/reflect2";
    sha256sum "$tree/test/e2e/generated/bindata.go"; } | sha256sum | cut -d' ' -f1)
  if [ -x "$bin/e2e.test" ] && [ "$(cat "$bin/e2e.test.sha256" 2>/dev/null)" = "$stamp_want" ]; then
    return 0
  fi
  log "building e2e.test (go test -c k8s.io/kubernetes/test/e2e; long the first time)"
  local start=$SECONDS
  (cd "$gopath/src/k8s.io/kubernetes" &&
    env GO111MODULE=off CGO_ENABLED=0 GOPATH="$gopath" GOFLAGS= GOPROXY=off \
      go test -c -ldflags "$ldflags" -o "$bin/e2e.test.tmp" k8s.io/kubernetes/test/e2e >&2)
  mv "$bin/e2e.test.tmp" "$bin/e2e.test"
  echo "$stamp_want" >"$bin/e2e.test.sha256"
  log "built $bin/e2e.test in $((SECONDS - start)) s"
}

# ---- e2e.test of a release on the Go module proxy (K8S_VERSION=1.37.2, ...) ----
#
# The same recipe as scripts/kube-apiserver.sh's build_modules (read it first): a module of our own
# that requires k8s.io/kubernetes v$K8S_VERSION and replaces every staging module k8s.io/<name> with
# its published v0.<minor>.<patch>. Its go.mod starts as the servers' generated go.mod.in (same
# requires, replaces, go and godebug lines) without their `tool` block; `go test -c` of a package of a
# dependency needs the modules its _test.go files import too, which `go mod tidy` does not record (it
# follows only the main module's own tests), so `go list -test -deps` with -mod=mod resolves them once
# and the build itself then runs -mod=readonly. The module zip carries test/e2e's embedded manifests
# and test data, so nothing is generated. Layout: $cache/k8s-v<version>/e2e/ (go.mod, go.sum),
# bin/e2e.test with a .sha256 stamp of what built it (a build whose stamp matches is skipped).
build_module_e2e() {
  command -v go >/dev/null 2>&1 || { log "no go on PATH (Go 1.26 or newer is needed)"; exit 1; }
  local top=$cache/k8s-v$K8S_VERSION
  # The servers' build writes the generated go.mod.in this module starts from (a no-op when built).
  "$repo/scripts/kube-apiserver.sh" build
  local dir=$top/e2e
  mkdir -p "$dir"
  # go.mod.in without its tool block.
  sed '/^tool (/,/^)/d' "$top/build/go.mod.in" >"$dir/go.mod.new"
  if ! cmp -s "$dir/go.mod.new" "$dir/go.mod.in" || [ ! -s "$dir/go.sum" ]; then
    cp "$dir/go.mod.new" "$dir/go.mod"
    cp "$top/build/go.sum" "$dir/go.sum"
    log "resolving the modules k8s.io/kubernetes/test/e2e imports (v$K8S_VERSION)"
    (cd "$dir" && GOFLAGS=-mod=mod go list -test -deps k8s.io/kubernetes/test/e2e >/dev/null)
    mv "$dir/go.mod.new" "$dir/go.mod.in"
  else
    rm -f "$dir/go.mod.new"
  fi
  local major=${K8S_VERSION%%.*} minor=${K8S_VERSION#*.}
  minor=${minor%%.*}
  local ldflags="-s -w" pkg want
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean"
  done
  want=$( { go version; cat "$dir/go.mod" "$dir/go.sum"; echo "$ldflags"; } | sha256sum | cut -d' ' -f1)
  if [ -x "$bin/e2e.test" ] && [ "$(cat "$bin/e2e.test.sha256" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  log "building e2e.test (go test -c k8s.io/kubernetes/test/e2e v$K8S_VERSION; long the first time)"
  local start=$SECONDS
  (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=readonly \
    go test -c -trimpath -ldflags "$ldflags" -o "$bin/e2e.test.tmp" k8s.io/kubernetes/test/e2e >&2)
  mv "$bin/e2e.test.tmp" "$bin/e2e.test"
  echo "$want" >"$bin/e2e.test.sha256"
  log "built $bin/e2e.test in $((SECONDS - start)) s"
}

# The [sig-api-machinery] [Conformance] specs of 1.20.2 that need no container runtime beyond what the
# servers offer: 37 specs.
FOCUS_1_20='\[sig-api-machinery\] (Watchers|CustomResourceDefinition resources|Namespaces \[Serial\]|ResourceQuota|Garbage collector|Servers with support for Table|Discovery|Events|ConfigMap|server version|ResourceVersion|Secrets should (patch|fail)).*\[Conformance\]'
# The same families in later releases, where the names changed: labels follow the text
# (`… [Conformance] [Serial]`), and Events, ConfigMap and Secrets left [sig-api-machinery] for
# [sig-instrumentation] and [sig-node] (out of this focus). 1.37.2: 39 specs.
FOCUS_CURRENT='\[sig-api-machinery\] (Watchers|CustomResourceDefinition resources|Namespaces|ResourceQuota|Garbage collector|Servers with support for Table|Discovery|server version|ResourceVersion).*\[Conformance\]'
if [ "$K8S_VERSION" = 1.20.2 ]; then FOCUS_DEFAULT=$FOCUS_1_20; else FOCUS_DEFAULT=$FOCUS_CURRENT; fi
FOCUS=${CONFORMANCE_FOCUS:-$FOCUS_DEFAULT}
# Not run against the real server: specs that need a pod to run (see `real`).
REAL_SKIP='Namespaces should ensure that all pods are removed when a namespace is deleted'
out_dir=$repo/target/conformance
NODE=ferrokube-conformance-node

# Processes this script started, stopped on exit (by pid).
started_pids=()
stop_started() {
  local pid
  for pid in "${started_pids[@]}"; do
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  done
  started_pids=()
}

need_python() {
  command -v python3 >/dev/null 2>&1 && return 0
  log "installing python3"
  "$repo/scripts/apt-get.sh" update -qq >&2
  "$repo/scripts/apt-get.sh" install -y -qq python3 >&2
}

# kube-controller-manager against $KUBECONFIG, with the given extra flags; log in $1.
start_kcm() {
  local logfile=$1; shift
  local kcm=${FERROKUBE_KCM:-$bin/kube-controller-manager}
  # The insecure port (--port) exists before 1.24 only (1.37 refuses the flag): off where it exists.
  local insecure=()
  local minor=${K8S_VERSION#*.}
  minor=${minor%%.*}
  [ "$minor" -lt 24 ] && insecure=(--port=0)
  log "starting kube-controller-manager ${insecure[*]} $*"
  "$kcm" --kubeconfig "$KUBECONFIG" --leader-elect=false "${insecure[@]}" --secure-port=0 \
    --kube-api-qps=50 --kube-api-burst=100 "$@" >"$logfile" 2>&1 &
  started_pids+=($!)
  local pid=$!
  # No readiness endpoint with --secure-port=0: give its informers a few seconds to sync.
  sleep 5
  kill -0 "$pid" 2>/dev/null || { log "kube-controller-manager exited:"; tail -n 20 "$logfile" >&2; return 1; }
}

# One Node the e2e framework counts as ready and schedulable: created, its status patched Ready (with
# capacity), the not-ready taint the TaintNodesByCondition admission plugin puts on a new Node removed.
make_node() {
  local now
  now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  kubectl get node "$NODE" >/dev/null 2>&1 || kubectl apply -f - >&2 <<NODE_EOF
apiVersion: v1
kind: Node
metadata:
  name: $NODE
  labels: {kubernetes.io/hostname: $NODE, kubernetes.io/os: linux, kubernetes.io/arch: amd64}
NODE_EOF
  local patch
  patch=$(cat <<PATCH_EOF
{"status":{"capacity":{"cpu":"4","memory":"8Gi","pods":"110"},"allocatable":{"cpu":"4","memory":"8Gi","pods":"110"},
 "conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"ferrokube conformance node",
   "lastHeartbeatTime":"$now","lastTransitionTime":"$now"}],
 "addresses":[{"type":"InternalIP","address":"127.0.0.1"},{"type":"Hostname","address":"$NODE"}]}}
PATCH_EOF
)
  kubectl patch node "$NODE" --subresource=status --type=merge -p "$patch" >&2 ||
    kubectl patch node "$NODE" --type=merge -p "$patch" >&2
  if kubectl get node "$NODE" -o jsonpath='{.spec.taints[*].key}' | grep -q node.kubernetes.io/not-ready; then
    kubectl taint node "$NODE" node.kubernetes.io/not-ready- >&2
  fi
  kubectl get node "$NODE" -o wide >&2
}

# Run e2e.test with the focus against $KUBECONFIG; extra e2e flags in "$@". Writes $out_dir/$server.*
run_e2e() {
  local server=$1; shift
  local report=$out_dir/$server-junit logfile=$out_dir/$server.log
  rm -rf "$report"
  mkdir -p "$report"
  # The specs the focus selects, from a dry run (a spec a failed BeforeSuite kept from running is then
  # still reported, as not-run).
  local skip=()
  [ -z "${SKIP:-}" ] || skip=(--ginkgo.skip="$SKIP")
  "$bin/e2e.test" --kubeconfig "$KUBECONFIG" --provider=skeleton --ginkgo.dryRun \
    --ginkgo.focus="$FOCUS" "${skip[@]}" --ginkgo.noColor --report-dir "$report/dry" >/dev/null 2>&1 || true
  log "running e2e.test against $server (log: $logfile)"
  local start=$SECONDS rc=0
  # From the kubeconfig's directory: e2e.test does not resolve a kubeconfig's relative paths.
  (cd "$(dirname "$KUBECONFIG")" && "$bin/e2e.test" \
    --kubeconfig "$KUBECONFIG" \
    --provider=skeleton \
    --ginkgo.focus="$FOCUS" \
    "${skip[@]}" \
    --ginkgo.noColor \
    --ginkgo.succinct=false \
    --report-dir "$report" \
    --e2e-output-dir "$out_dir" \
    --allowed-not-ready-nodes=0 \
    --node-schedulable-timeout=2m \
    --system-pods-startup-timeout=1m \
    --system-daemonsets-startup-timeout=1m \
    --disable-log-dump \
    --kubectl-path "$(command -v kubectl)" \
    "$@" >"$logfile" 2>&1) || rc=$?
  log "e2e.test against $server exited $rc after $((SECONDS - start)) s"
  summarize "$server" "$report" "$((SECONDS - start))"
}

# JUnit XML -> JSON lines + a table; exit 1 when an expected spec did not pass.
summarize() {
  local server=$1 report=$2 seconds=$3
  local jsonl=${CONFORMANCE_OUT:-$out_dir/$server.jsonl}
  mkdir -p "$(dirname "$jsonl")"
  need_python
  python3 - "$server" "$report" "$jsonl" "$expected_list" "$FOCUS" "$seconds" <<'PY'
import glob, json, re, sys, xml.etree.ElementTree as ET
server, report, jsonl, expected_path, focus, seconds = sys.argv[1:]
focus_re = re.compile(focus)

def cases(pattern):
    for path in sorted(glob.glob(pattern)):
        for tc in ET.parse(path).getroot().iter("testcase"):
            yield tc

selected = [re.sub(r"^\[It\] ", "", tc.get("name")) for tc in cases(report + "/dry/junit_*.xml")
            if tc.find("skipped") is None and focus_re.search(tc.get("name"))]
rows, seen = [], set()
def spec_name(tc):
    # Ginkgo 2 (1.2x+) prefixes a spec's name with its node type: `[It] [sig-api-machinery] …`.
    return re.sub(r"^\[It\] ", "", tc.get("name"))

for tc in cases(report + "/junit_*.xml"):
    name = spec_name(tc)
    failure = tc.find("failure")
    if failure is None and not focus_re.search(name):
        continue  # suite-level nodes ([SynchronizedBeforeSuite], [ReportAfterSuite], …) that passed
    if failure is not None:
        status = "failed"
        lines = (failure.get("message") or failure.text or "").strip().split("\n")
        # ginkgo: "<component location>\n<message>\n<failure location>"
        error = "\n".join(lines[1:-1]) if len(lines) > 2 else "\n".join(lines)
        error = re.sub(r"^\w{3} +\d+ [\d:.]+: ", "", " ".join(error.split()))
        # A Go StatusError is dumped as a struct: keep what precedes it and its code and message.
        status_error = re.search(r"<\*errors\.StatusError[^>]*>:|\(&errors\.StatusError\{", error)
        if status_error:
            code = re.search(r"\bCode: ?(\d+)", error)
            message = re.search(r'\bMessage: ?"((?:[^"\\]|\\.)*)"', error)
            error = (error[:status_error.start()].strip() + " StatusError "
                     + (code.group(1) if code else "?") + ": " + (message.group(1) if message else ""))
        error = error[:400]
        if len(lines) > 2:
            error += " (at " + "/".join(lines[-1].strip().split("/")[-2:]) + ")"
    elif tc.find("skipped") is not None:
        if not focus_re.search(name):
            continue  # outside the focus: ginkgo reports every other spec as skipped
        status, error = "skipped", ""
    else:
        status, error = "passed", ""
    seen.add(name)
    rows.append({"spec": name, "status": status, "seconds": round(float(tc.get("time") or 0), 1),
                 "error": error})
for name in selected:
    if name not in seen:
        rows.append({"spec": name, "status": "not-run", "seconds": 0.0, "error": "not run"})

expected, section = set(), None
for line in open(expected_path):
    line = line.rstrip("\n")
    if not line.strip() or line.startswith("#"):
        continue
    m = re.fullmatch(r"\[(\w+)\]", line.strip())
    if m:
        section = m.group(1)
    elif section == server:
        expected.add(line.strip())

with open(jsonl, "w") as f:
    for r in rows:
        f.write(json.dumps({"server": server, **r}) + "\n")

counts = {}
for r in rows:
    counts[r["status"]] = counts.get(r["status"], 0) + 1
short = lambda s: s if len(s) <= 110 else s[:107] + "..."
print(f"{'status':8} {'s':>6}  spec", file=sys.stderr)
for r in sorted(rows, key=lambda r: (r["status"] != "failed", r["spec"])):
    mark = "*" if r["spec"] in expected and r["status"] != "passed" else " "
    print(f"{r['status']:8}{mark}{r['seconds']:6.1f}  {short(r['spec'])}", file=sys.stderr)
by = {r["spec"]: r["status"] for r in rows}
# An expected spec outside a narrower CONFORMANCE_FOCUS is not counted.
regressions = sorted(s for s in expected if focus_re.search(s) and by.get(s) != "passed")
print(f"[conformance] {server}: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
      + f" of {len(rows)} specs in {seconds} s; results in {jsonl}", file=sys.stderr)
if regressions:
    print(f"[conformance] {server}: {len(regressions)} expected-to-pass spec(s) did not pass (* above):",
          file=sys.stderr)
    for s in regressions:
        print(f"  {s}: {by.get(s, 'missing')}", file=sys.stderr)
    sys.exit(1)
PY
}

real() {
  build
  mkdir -p "$out_dir"
  state=${STATE:-/tmp/ferrokube-apiserver} was_up=no
  [ -f "$state/kube-apiserver.pid" ] && kill -0 "$(cat "$state/kube-apiserver.pid")" 2>/dev/null && was_up=yes
  "$repo/scripts/kube-apiserver.sh" up
  eval "$("$repo/scripts/kube-apiserver.sh" env)"
  export KUBECONFIG
  cleanup_real() {
    stop_started
    kubectl delete node "$NODE" --ignore-not-found >/dev/null 2>&1 || true
    [ "$was_up" = yes ] || "$repo/scripts/kube-apiserver.sh" down
  }
  trap cleanup_real EXIT
  # The service-account keys and CA kube-apiserver.sh generated (it passes sa.pub / sa.key to the
  # apiserver), so that the tokens controller signs tokens the apiserver accepts.
  start_kcm "$out_dir/real-kcm.log" --controllers='*,-nodelifecycle' \
    --service-account-private-key-file "$state/pki/sa.key" --root-ca-file "$state/pki/ca.crt"
  make_node
  local rc=0
  # Nothing runs containers here (no kubelet), so the spec that waits for a pod to run could only
  # time out (5 minutes); it is left to the embedded server, whose stand-in kubelet runs pods.
  SKIP=$REAL_SKIP run_e2e real || rc=$?
  return $rc
}

embedded() {
  build
  mkdir -p "$out_dir"
  # The dev profile, as `cargo test` builds it: a release build would take CI ~9 minutes for specs
  # that mostly wait.
  log "building ferrokube-apiserver (cargo build)"
  local start=$SECONDS
  (cd "$repo" && cargo build -q -p ferrokube-apiserver --bin ferrokube-apiserver >&2)
  log "built in $((SECONDS - start)) s"
  local port=${EMBEDDED_PORT:-16480}
  export KUBECONFIG=$out_dir/embedded.kubeconfig
  rm -f "$KUBECONFIG"
  trap stop_started EXIT
  # 1.20's e2e framework waits until each namespace's default ServiceAccount lists a token
  # Secret, which Kubernetes stopped making in 1.24 (and the embedded server, imitating 1.37,
  # makes only when asked).
  local legacy=()
  case $K8S_VERSION in 1.2[0-3].*) legacy=(--legacy-service-account-tokens) ;; esac
  "${CARGO_TARGET_DIR:-$repo/target}/debug/ferrokube-apiserver" --port "$port" --kubelet --kubeconfig "$KUBECONFIG" \
    "${legacy[@]}" >"$out_dir/embedded-apiserver.log" 2>&1 &
  started_pids+=($!)
  for _ in $(seq 1 100); do [ -s "$KUBECONFIG" ] && break; sleep 0.1; done
  [ -s "$KUBECONFIG" ] || { log "ferrokube-apiserver wrote no kubeconfig:"; cat "$out_dir/embedded-apiserver.log" >&2; return 1; }
  # e2e.test talks protobuf by default; keep that unless the server refuses protobuf request bodies
  # (kubectl create sends built-in kinds as protobuf).
  local content_type=()
  local probe
  probe=$(kubectl create quota ferrokube-protobuf-probe --hard=pods=1 -n default -v=6 2>&1 || true)
  if grep -qi ' 415 \|unsupported media type\|protobuf bodies' <<<"$probe"; then
    log "the embedded server refuses protobuf bodies: e2e.test gets --kube-api-content-type=application/json"
    content_type=(--kube-api-content-type=application/json)
  fi
  kubectl delete quota ferrokube-protobuf-probe -n default --ignore-not-found >/dev/null 2>&1 || true
  # e2e.test waits in each spec's namespace for the ConfigMap kube-root-ca.crt (1.2x+; a 2 min
  # timeout per spec without it), which kube-controller-manager's root-ca-cert-publisher writes from
  # --root-ca-file. The embedded server serves plain HTTP, so a self-signed certificate made here
  # stands in for its CA.
  local ca=$out_dir/embedded-ca.crt
  [ -s "$ca" ] || openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=ferrokube-embedded-ca" \
    -keyout "$out_dir/embedded-ca.key" -out "$ca" 2>/dev/null
  start_kcm "$out_dir/embedded-kcm.log" \
    --controllers=replicationcontroller,replicaset,deployment,root-ca-cert-publisher \
    --root-ca-file "$ca" ||
    log "continuing without kube-controller-manager"
  # The stand-in kubelet registers Ready nodes of its own; make one only if there is none.
  if [ -z "$(kubectl get nodes -o name 2>/dev/null)" ]; then
    make_node || log "could not make a Ready node on the embedded server"
  fi
  local rc=0
  run_e2e embedded "${content_type[@]}" || rc=$?
  return $rc
}

compare() {
  need_python
  python3 - "${1:-$out_dir/real.jsonl}" "${2:-$out_dir/embedded.jsonl}" <<'PY'
import json, sys
def load(path):
    try:
        return {r["spec"]: r for r in map(json.loads, open(path))}
    except FileNotFoundError:
        sys.exit(f"[conformance] no results in {path}: run scripts/conformance.sh real / embedded first")
a, b = load(sys.argv[1]), load(sys.argv[2])
diff = [s for s in sorted(set(a) | set(b)) if a.get(s, {}).get("status") != b.get(s, {}).get("status")]
print(f"{'real':8} {'embedded':8}  spec")
for s in diff:
    ra, rb = a.get(s, {}), b.get(s, {})
    print(f"{ra.get('status', '-'):8} {rb.get('status', '-'):8}  {s}")
    for r in (ra, rb):
        if r.get("error"):
            print(f"{'':18}{r['server']}: {r['error'][:200]}")
same = len(set(a) & set(b)) - len([s for s in diff if s in a and s in b])
print(f"{len(diff)} spec(s) differ, {same} agree")
PY
}

case "${1:-}" in
  build) build ;;
  real) real ;;
  embedded) embedded ;;
  compare) shift; compare "$@" ;;
  # Rewrite <server>.jsonl and the table from the JUnit XML of the last run.
  report) summarize "${2:?server}" "$out_dir/$2-junit" "?" ;;
  *) echo "usage: $0 build|real|embedded|compare [real.jsonl embedded.jsonl]" >&2; exit 2 ;;
esac
