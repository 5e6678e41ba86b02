#!/usr/bin/env bash
# A real kube-apiserver (Kubernetes 1.20.2, built from Debian's `kubernetes` source package) on etcd,
# on loopback, with TLS, a client certificate user, bearer-token users and RBAC: the ground truth that
# ferrokube's end-to-end tests run against.
#
#   scripts/kube-apiserver.sh build   # install packages, build kube-apiserver + kube-controller-manager
#                                     # (cached under ~/.cache/ferrokube/bin; ~4 min each the first time)
#   scripts/kube-apiserver.sh up      # build if needed, start etcd + kube-apiserver, write a kubeconfig
#   scripts/kube-apiserver.sh down    # stop both and delete their state
#   scripts/kube-apiserver.sh env     # print `export KUBECONFIG=... FERROKUBE_E2E_ETCD=... FERROKUBE_KCM=... FERROKUBE_AUDIT_LOG=...`
#
# The kubeconfig ($STATE/kubeconfig) has these contexts:
#   cert    (current) user admin-cert: client certificate, group system:masters
#   token             user admin-token: bearer token, group system:masters
#   viewer            user viewer: token file, bound to a ClusterRole that may only get/list/watch
#   cert-v1-rsa, cert-v1-ec  X.509 v1 client certificates (RSA, EC), group system:masters
#
# PodTemplates are served without the watch cache (`--watch-cache-sizes podtemplates#0`), straight
# from etcd, so that a test can compact etcd (`etcdctl compact`, at $ETCD from `env`) and see the 410
# a watch from a compacted resourceVersion gets. (The watch cache of 1.20 keeps 75 s of history
# whatever its size, so writing past it is slow.)
#
# Settings (environment): STATE (default /tmp/ferrokube-apiserver), APISERVER_PORT (16443),
# ETCD_PORT (12379), WATCH_CACHE_SIZE (default-watch-cache-size, 100).
set -euo pipefail

log() { echo "[kube-apiserver] $*" >&2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube
bin=$cache/bin
STATE=${STATE:-/tmp/ferrokube-apiserver}
APISERVER_PORT=${APISERVER_PORT:-16443}
ETCD_PORT=${ETCD_PORT:-12379}
WATCH_CACHE_SIZE=${WATCH_CACHE_SIZE:-100}


install_packages() {
  local missing=()
  command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
  command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  [ -f /usr/share/gocode/src/github.com/modern-go/reflect2/go_above_118.go ] ||
    missing+=(golang-github-modern-go-reflect2-dev)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq "${missing[@]}" >&2
  fi
}

# openapi-gen over every package that asks for it, into pkg/generated/openapi (as the upstream
# Makefile's gen_openapi does for the KUBE target).
generate_openapi() {
  local tree=$1 gopath=$2
  local out=$tree/pkg/generated/openapi/zz_generated.openapi.go
  [ -s "$out" ] && return 0
  log "building openapi-gen"
  (cd "$gopath/src/k8s.io/kubernetes" &&
    env GO111MODULE=off CGO_ENABLED=0 GOPATH="$gopath" GOFLAGS= GOPROXY=off \
      go build -o "$bin/openapi-gen" k8s.io/kubernetes/vendor/k8s.io/kube-openapi/cmd/openapi-gen >&2)
  log "finding packages tagged +k8s:openapi-gen"
  local dirs
  dirs=$(cd "$tree" && {
    grep -rl --include='*.go' -E '^// *\+k8s:openapi-gen=' pkg cmd plugin 2>/dev/null || true
    grep -rl --include='*.go' -E '^// *\+k8s:openapi-gen=' staging/src/k8s.io | sed 's#^staging/src/#vendor/#'
  } | xargs -n1 dirname | grep -v -e 'k8s.io/code-generator' -e 'k8s.io/sample-apiserver' \
    | LC_ALL=C sort -u | sed 's#^#k8s.io/kubernetes/#' | paste -sd, -)
  log "running openapi-gen over $(echo "$dirs" | tr ',' '\n' | wc -l) packages"
  (cd "$gopath/src/k8s.io/kubernetes" &&
    env GO111MODULE=off GOPATH="$gopath" "$bin/openapi-gen" \
      --logtostderr -i "$dirs" \
      -p k8s.io/kubernetes/pkg/generated/openapi \
      -O zz_generated.openapi \
      -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
      -r "$cache/openapi-violations.report" \
      -o "$gopath/src" >&2)
  [ -s "$out" ] || { log "openapi-gen produced no $out"; exit 1; }
}

# Kubernetes 1.20 vendors modern-go/reflect2 v1.0.1, which reads Go's map iterator with the pre-1.18
# layout: built with Debian's Go 1.19 the apiserver then crashes ("fatal error: fault" in
# mapiternext) on its first JSON encoding of a map. reflect2 v1.0.2 fixed that; Debian packages it
# (golang-github-modern-go-reflect2-dev), and Debian's own kubernetes build uses it, so we do too.
use_debian_reflect2() {
  local tree=$1 vendored=$1/vendor/github.com/modern-go/reflect2
  [ -f "$vendored/go_above_118.go" ] && return 0
  log "replacing vendored modern-go/reflect2 v1.0.1 with Debian's v1.0.2 (Go >= 1.18 fix)"
  rm -rf "$vendored"
  cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 "$vendored"
  rm -f "$vendored/go.mod"
}

# The version the binaries report on /version (and kubectl version shows), from the Debian
# changelog: "1.20.5+really1.20.2-1.1+deb12u1" is upstream 1.20.2.
source_version() {
  local tree=$1 version
  version=$(sed -n '1s/^kubernetes (\([^)]*\)).*/\1/p' "$tree/debian/changelog")
  version=${version#*really}
  echo "${version%%-*}"
}

build_one() {
  local name=$1 tree=$2 gopath=$3
  local version major minor stamp_want
  version=$(source_version "$tree")
  major=${version%%.*}
  minor=${version#*.}
  minor=${minor%%.*}
  # Both copies of the version variables: component-base's (flags, logs) and client-go's (which
  # this Debian build serves on /version).
  local pkg ldflags=""
  for pkg in component-base/version client-go/pkg/version; do
    pkg=k8s.io/kubernetes/vendor/k8s.io/$pkg
    ldflags+=" -X $pkg.gitVersion=v$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean"
  done
  stamp_want=$( { go version; echo "$tree"; echo "$ldflags"; ls "$tree/vendor/github.com/modern-go/reflect2"; } | sha256sum | cut -d' ' -f1)
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/$name.sha256" 2>/dev/null)" = "$stamp_want" ]; then
    return 0
  fi
  log "building $name (a few minutes the first time)"
  local start=$SECONDS
  (cd "$gopath/src/k8s.io/kubernetes" &&
    env GO111MODULE=off CGO_ENABLED=0 GOPATH="$gopath" GOFLAGS= GOPROXY=off \
      go build -ldflags "$ldflags" -o "$bin/$name.tmp" \
      "k8s.io/kubernetes/cmd/$name" >&2)
  mv "$bin/$name.tmp" "$bin/$name"
  echo "$stamp_want" >"$bin/$name.sha256"
  log "built $bin/$name in $((SECONDS - start)) s"
}

build() {
  install_packages
  mkdir -p "$bin"
  local tree gopath
  tree=$("$repo/scripts/kubernetes-source.sh" | tail -n 1)
  gopath=$cache/kubernetes/gopath
  use_debian_reflect2 "$tree"
  generate_openapi "$tree" "$gopath"
  build_one kube-apiserver "$tree" "$gopath"
  build_one kube-controller-manager "$tree" "$gopath"
}

make_certs() {
  local d=$STATE/pki
  mkdir -p "$d"
  [ -f "$d/viewer.done" ] && return 0
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=ferrokube-test-ca" \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  # Serving certificate for 127.0.0.1 / localhost.
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout "$d/server.key" \
    -out "$d/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >"$d/server.ext"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 3650 -extfile "$d/server.ext" -out "$d/server.crt" 2>/dev/null
  # Client certificate: an EC key (the token users cover the rest), group system:masters.
  openssl ecparam -name prime256v1 -genkey -noout -out "$d/admin.key"
  openssl req -new -key "$d/admin.key" -subj "/O=system:masters/CN=ferrokube-admin" \
    -out "$d/admin.csr" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' >"$d/client.ext"
  openssl x509 -req -in "$d/admin.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 3650 -extfile "$d/client.ext" -out "$d/admin.crt" 2>/dev/null
  # Service-account signing key pair.
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
  openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
  # Bearer tokens: token,user,uid,"groups".
  local admin_token viewer_token
  admin_token=$(openssl rand -hex 16)
  viewer_token=$(openssl rand -hex 16)
  printf '%s,ferrokube-token-admin,1001,"system:masters"\n%s,viewer,1002\n' \
    "$admin_token" "$viewer_token" >"$d/tokens.csv"
  echo "$admin_token" >"$d/admin.token"
  echo "$viewer_token" >"$d/viewer.token"
  touch "$d/viewer.done"
}

# X.509 v1 client certificates (`openssl x509 -req` without `-extfile`, which kubectl accepts), RSA
# and EC, group system:masters: the contexts cert-v1-rsa and cert-v1-ec (tests/e2e/client.rs).
make_v1_certs() {
  local d=$STATE/pki
  [ -f "$d/v1.done" ] && return 0
  openssl genrsa -out "$d/v1-rsa.key" 2048 2>/dev/null
  openssl ecparam -name prime256v1 -genkey -noout -out "$d/v1-ec.key"
  for kind in rsa ec; do
    openssl req -new -key "$d/v1-$kind.key" -subj "/O=system:masters/CN=ferrokube-v1-$kind" \
      -out "$d/v1-$kind.csr" 2>/dev/null
    openssl x509 -req -in "$d/v1-$kind.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
      -days 3650 -out "$d/v1-$kind.crt" 2>/dev/null
  done
  touch "$d/v1.done"
}

write_kubeconfig() {
  local d=$STATE/pki server=https://127.0.0.1:$APISERVER_PORT
  cat >"$STATE/kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: cert
clusters:
- name: ferrokube-e2e
  cluster:
    server: $server
    certificate-authority: pki/ca.crt
contexts:
- name: cert
  context: {cluster: ferrokube-e2e, user: admin-cert, namespace: default}
- name: token
  context: {cluster: ferrokube-e2e, user: admin-token, namespace: default}
- name: viewer
  context: {cluster: ferrokube-e2e, user: viewer, namespace: default}
- name: cert-v1-rsa
  context: {cluster: ferrokube-e2e, user: admin-cert-v1-rsa, namespace: default}
- name: cert-v1-ec
  context: {cluster: ferrokube-e2e, user: admin-cert-v1-ec, namespace: default}
users:
- name: admin-cert
  user:
    client-certificate: pki/admin.crt
    client-key: pki/admin.key
- name: admin-token
  user:
    token: $(cat "$d/admin.token")
- name: viewer
  user:
    tokenFile: pki/viewer.token
- name: admin-cert-v1-rsa
  user:
    client-certificate: pki/v1-rsa.crt
    client-key: pki/v1-rsa.key
- name: admin-cert-v1-ec
  user:
    client-certificate: pki/v1-ec.crt
    client-key: pki/v1-ec.key
EOF
}

running() {
  [ -f "$STATE/$1.pid" ] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null
}

up() {
  build
  mkdir -p "$STATE"
  make_certs
  make_v1_certs
  write_kubeconfig
  local d=$STATE/pki
  if ! running etcd; then
    log "starting etcd on 127.0.0.1:$ETCD_PORT"
    etcd --name ferrokube-e2e --data-dir "$STATE/etcd" \
      --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
      --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
      --initial-cluster "ferrokube-e2e=http://127.0.0.1:$((ETCD_PORT + 1))" \
      >"$STATE/etcd.log" 2>&1 &
    echo $! >"$STATE/etcd.pid"
  fi
  if ! running kube-apiserver; then
    # An audit log of every write (who, what, when), as JSON lines: the leader-election drills
    # (examples/tests/drills/leader_e2e.rs) read it to check that a replica which lost its lease
    # wrote nothing.
    cat >"$STATE/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
POLICY
    log "starting kube-apiserver on https://127.0.0.1:$APISERVER_PORT"
    "$bin/kube-apiserver" \
      --audit-policy-file "$STATE/audit-policy.yaml" --audit-log-path "$STATE/audit.log" \
      --audit-log-format json --audit-log-maxsize 200 \
      --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
      --insecure-port=0 --secure-port "$APISERVER_PORT" \
      --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
      --tls-cert-file "$d/server.crt" --tls-private-key-file "$d/server.key" \
      --client-ca-file "$d/ca.crt" --token-auth-file "$d/tokens.csv" \
      --service-account-key-file "$d/sa.pub" --service-account-signing-key-file "$d/sa.key" \
      --service-account-issuer https://kubernetes.default.svc \
      --authorization-mode RBAC \
      --disable-admission-plugins ServiceAccount \
      --service-cluster-ip-range 10.96.0.0/24 \
      --default-watch-cache-size "$WATCH_CACHE_SIZE" \
      --watch-cache-sizes podtemplates#0 \
      >"$STATE/kube-apiserver.log" 2>&1 &
    echo $! >"$STATE/kube-apiserver.pid"
  fi
  log "waiting for /readyz"
  for _ in $(seq 1 120); do
    if curl -fsS --cacert "$d/ca.crt" --cert "$d/admin.crt" --key "$d/admin.key" \
      "https://127.0.0.1:$APISERVER_PORT/readyz" >/dev/null 2>&1; then
      export KUBECONFIG=$STATE/kubeconfig
      # Not the built-in `view` role: its rules are filled in by kube-controller-manager's aggregation
      # controller, which does not run here.
      kubectl get clusterrole ferrokube-read >/dev/null 2>&1 ||
        kubectl create clusterrole ferrokube-read --verb=get,list,watch --resource='*.*' >&2
      kubectl get clusterrolebinding ferrokube-viewer >/dev/null 2>&1 ||
        kubectl create clusterrolebinding ferrokube-viewer --clusterrole=ferrokube-read --user=viewer >&2
      log "ready: export KUBECONFIG=$STATE/kubeconfig"
      return 0
    fi
    if ! running kube-apiserver; then
      log "kube-apiserver exited; last log lines:"; tail -n 20 "$STATE/kube-apiserver.log" >&2; exit 1
    fi
    sleep 1
  done
  log "kube-apiserver not ready after 120 s; last log lines:"
  tail -n 20 "$STATE/kube-apiserver.log" >&2
  exit 1
}

down() {
  for name in kube-apiserver etcd; do
    if running "$name"; then
      kill "$(cat "$STATE/$name.pid")" 2>/dev/null || true
      for _ in $(seq 1 50); do running "$name" || break; sleep 0.2; done
      running "$name" && kill -9 "$(cat "$STATE/$name.pid")" 2>/dev/null || true
    fi
  done
  rm -rf "$STATE"
  log "stopped"
}

case "${1:-}" in
  build) build ;;
  up) up ;;
  down) down ;;
  env) echo "export KUBECONFIG=$STATE/kubeconfig FERROKUBE_E2E_ETCD=http://127.0.0.1:$ETCD_PORT FERROKUBE_KCM=$bin/kube-controller-manager FERROKUBE_AUDIT_LOG=$STATE/audit.log" ;;
  *) echo "usage: $0 build|up|down|env" >&2; exit 2 ;;
esac
