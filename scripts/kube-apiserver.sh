#!/usr/bin/env bash
# A real kube-apiserver on etcd, on loopback, with TLS, a client certificate user, bearer-token users
# and RBAC: the ground truth that ferrokube's end-to-end tests run against. Two ways to get one,
# picked by K8S_VERSION:
#
#   1.20.2 (default)  built from Debian's `kubernetes` source package (GOPATH mode, its vendor/), run on
#                     Debian's etcd; binaries in ~/.cache/ferrokube/bin
#   1.37.2, 1.36.3, … any release on the Go module proxy: k8s.io/kubernetes v1.37.2 as a dependency of a
#                     generated go.mod (a `replace` pins every staging module k8s.io/<name> to v0.37.2),
#                     `go build` of cmd/kube-apiserver and cmd/kube-controller-manager, and etcd
#                     (go.etcd.io/etcd/server/v3 at the version the release's hack/lib/etcd.sh names,
#                     3.7.0 for 1.37) around etcdmain.Main; binaries in ~/.cache/ferrokube/k8s-v1.37.2/bin
#
#   scripts/kube-apiserver.sh build   # build kube-apiserver + kube-controller-manager (+ etcd) of
#                                     # K8S_VERSION (cached: a second run is a no-op)
#   scripts/kube-apiserver.sh up      # build if needed, start etcd + kube-apiserver, write a kubeconfig
#   scripts/kube-apiserver.sh down    # stop them and delete their state
#   scripts/kube-apiserver.sh env     # print `export KUBECONFIG=... FERROKUBE_E2E_ETCD=... FERROKUBE_KCM=... FERROKUBE_AUDIT_LOG=...`
#   K8S_VERSION=1.37.2 scripts/kube-apiserver.sh up     # the same on the current release
#
# kube-controller-manager is built, not started: the tests that need it start it themselves with the
# controllers they compare (`FERROKUBE_KCM` from `env` names the binary of K8S_VERSION). WITH_KCM=1 up
# also starts one (every controller but nodelifecycle; its log in $STATE/kube-controller-manager.log).
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
# Prebuilt binaries first: where a folder of them is offered (FERROKUBE_K8S_PREBUILT, default
# ../shared/k8s when it exists; scripts/k8s-prebuilt.sh), each binary of the release it holds is
# unpacked into the same bin/ after its sha256 is checked against the folder's SHA256SUMS (a few
# seconds), and only what it does not hold is built; a binary whose sum does not match is an error.
# Build times from empty caches: 1.20.2 ~12 min (README); 1.37.2 ~37 min niced on 2 busy cores, about
# 22 min of CPU (see build_modules below).
#
# Settings (environment): APISERVER_FLAGS (extra kube-apiserver flags, words; e.g. the leader
# benchmark's --feature-gates=APIServerIdentity=false, or --feature-gates=ShardedListAndWatch=true
# for the apiserver crate's shard_selector cases to compare sharding itself), K8S_VERSION (1.20.2), STATE (default /tmp/ferrokube-apiserver), APISERVER_PORT
# (16443), ETCD_PORT (12379), WATCH_CACHE_SIZE (default-watch-cache-size, 100), ETCD_VERSION (module
# builds: overrides the etcd the release names), WITH_KCM (0). Go's own GOCACHE, GOMODCACHE, GOPROXY
# and GOTOOLCHAIN apply to the module builds.
set -euo pipefail

log() { echo "[kube-apiserver] $*" >&2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube
STATE=${STATE:-/tmp/ferrokube-apiserver}
# `env` without K8S_VERSION describes the server that is up, whichever version it is.
if [ -z "${K8S_VERSION:-}" ] && [ "${1:-}" = env ] && [ -f "$STATE/k8s-version" ]; then
  K8S_VERSION=$(cat "$STATE/k8s-version")
fi
K8S_VERSION=${K8S_VERSION:-1.20.2}
K8S_VERSION=${K8S_VERSION#v}
case $K8S_VERSION in
  1.20.2) bin=$cache/bin ;;                              # Debian's source package
  1.[0-9]*.[0-9]*) bin=$cache/k8s-v$K8S_VERSION/bin ;;   # the Go module proxy
  *) log "K8S_VERSION=$K8S_VERSION: expected 1.20.2 or a release such as 1.37.2"; exit 2 ;;
esac
debian_build() { [ "$K8S_VERSION" = 1.20.2 ]; }
# `env` without ETCD_PORT names the etcd of the server that is up (its port is kept in $STATE).
if [ -z "${ETCD_PORT:-}" ] && [ "${1:-}" = env ] && [ -f "$STATE/etcd-port" ]; then
  ETCD_PORT=$(cat "$STATE/etcd-port")
fi
APISERVER_PORT=${APISERVER_PORT:-16443}
ETCD_PORT=${ETCD_PORT:-12379}
WATCH_CACHE_SIZE=${WATCH_CACHE_SIZE:-100}


install_packages() {
  local missing=()
  # etcdctl (the tests compact etcd with it) talks etcd's v3 API to any etcd version.
  command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  if debian_build; then  # module builds build their own etcd and need no Debian Go packages
    command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
    # Debian's reflect2 only for a build from source (not for prebuilt binaries).
    if [ "${1:-}" = source ] && [ ! -f /usr/share/gocode/src/github.com/modern-go/reflect2/go_above_118.go ]; then
      missing+=(golang-github-modern-go-reflect2-dev)
    fi
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    "$repo/scripts/apt-get.sh" update -qq >&2
    "$repo/scripts/apt-get.sh" install -y -qq "${missing[@]}" >&2
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

# One build of a release at a time: a second caller (another shell, or the tests while CI's
# background build of the same release runs: .ci/run) waits for the first, then finds the binaries
# built (their stamps match) and builds nothing.
build() {
  mkdir -p "$cache"
  (
    flock 9
    build_unlocked
  ) 9>>"$cache/.build-$K8S_VERSION.lock"
}

build_unlocked() {
  install_packages
  if ! debian_build; then
    build_modules
    return
  fi
  local need=() name
  for name in kube-apiserver kube-controller-manager; do
    prebuilt "$name" || need+=("$name")
  done
  [ ${#need[@]} -gt 0 ] || return 0
  install_packages source
  mkdir -p "$bin"
  local tree gopath
  tree=$("$repo/scripts/kubernetes-source.sh" | tail -n 1)
  gopath=$cache/kubernetes/gopath
  use_debian_reflect2 "$tree"
  generate_openapi "$tree" "$gopath"
  for name in "${need[@]}"; do build_one "$name" "$tree" "$gopath"; done
}

# A binary of K8S_VERSION from the prebuilt offer (scripts/k8s-prebuilt.sh: FERROKUBE_K8S_PREBUILT,
# default ../shared/k8s), its sha256 checked. Returns 0 when taken, non-zero when none is offered
# (then it is built from source); an offer that fails its check ends the script.
prebuilt() {
  local rc=0
  "$repo/scripts/k8s-prebuilt.sh" install "$K8S_VERSION" "$1" "$bin" || rc=$?
  case $rc in
    0) return 0 ;;
    3) return 3 ;;
    *) log "the prebuilt $1 $K8S_VERSION was refused (above): not building over it"; exit 1 ;;
  esac
}

# ---- Any release from the Go module proxy (K8S_VERSION=1.37.2, ...) ----
#
# k8s.io/kubernetes is not meant to be used as a module: its go.mod requires every staging module
# (k8s.io/api, k8s.io/apiserver, ...) at v0.0.0 and replaces them with ./staging/src/k8s.io/<name>,
# and a dependency's replaces do not apply. Those staging modules are published on their own as
# v0.<minor>.<patch> of the same release, so a go.mod of our own requires k8s.io/kubernetes v1.37.2 and
# replaces each name from that replace block with k8s.io/<name> v0.37.2. The kubernetes module's zip
# carries its generated code (zz_generated.openapi.go and the rest), so nothing is generated here.
#
# Layout ($cache/k8s-v<version>): build/ (the generated module: go.mod, go.sum), etcd/ (etcd's tiny
# main module), bin/ (kube-apiserver, kube-controller-manager, etcd, each with a .sha256 stamp of
# what built it: a build whose stamp matches is skipped).

# A field of `go mod download -json k8s.io/kubernetes@v$K8S_VERSION` (GoMod: its go.mod, Dir: its
# unpacked tree, Info: its .info with the release's Time), from the module proxy (GOMODCACHE keeps it).
kubernetes_module() {
  if [ -z "${kubernetes_json:-}" ]; then
    kubernetes_json=$(cd / && GOFLAGS= go mod download -json "k8s.io/kubernetes@v$K8S_VERSION") ||
      { log "k8s.io/kubernetes@v$K8S_VERSION is not on the module proxy ($(go env GOPROXY))"; exit 1; }
  fi
  sed -n "s/^[[:space:]]*\"$1\": \"\\(.*\\)\",*\$/\\1/p" <<<"$kubernetes_json"
}

# The module that builds the two servers: requires k8s.io/kubernetes v$K8S_VERSION, replaces every
# staging module with its published v0.x.y, lists the two commands as tools (so that `go mod tidy`
# records the checksums of everything they import).
write_build_module() {
  local dir=$1 gomod=$2 staging=v0.${K8S_VERSION#1.}
  local go_line godebug_line names
  go_line=$(grep -m1 '^go ' "$gomod")
  godebug_line=$(grep -m1 '^godebug ' "$gomod" || true)
  names=$(sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => \./staging/src/k8s.io/.*#\1#p' "$gomod")
  [ -n "$names" ] || { log "no staging replace block in $gomod"; exit 1; }
  mkdir -p "$dir"
  {
    echo "// Generated by scripts/kube-apiserver.sh: Kubernetes v$K8S_VERSION from the Go module proxy."
    echo "module ferrokube.invalid/k8s-v$K8S_VERSION"
    echo
    echo "$go_line"
    # The GODEBUG defaults the release is built with (a dependency's godebug line does not apply).
    [ -n "$godebug_line" ] && echo "$godebug_line"
    echo
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    echo
    echo "tool ("
    echo "	k8s.io/kubernetes/cmd/kube-apiserver"
    echo "	k8s.io/kubernetes/cmd/kube-controller-manager"
    echo ")"
    echo
    echo "replace ("
    local name
    for name in $names; do echo "	$name => $name $staging"; done
    echo ")"
  } >"$dir/go.mod.new"
  # go.mod.in keeps what was generated (tidy then adds the indirect requires to go.mod).
  if ! cmp -s "$dir/go.mod.new" "$dir/go.mod.in" || [ ! -s "$dir/go.sum" ]; then
    cp "$dir/go.mod.new" "$dir/go.mod"
    log "resolving modules for k8s.io/kubernetes v$K8S_VERSION (staging modules at $staging)"
    (cd "$dir" && rm -f go.sum && GOFLAGS=-mod=mod go mod tidy >&2)
    mv "$dir/go.mod.new" "$dir/go.mod.in"
  else
    rm -f "$dir/go.mod.new"
  fi
}

# The etcd release this Kubernetes release is tested with: ETCD_VERSION in its hack/lib/etcd.sh
# (3.7.0 for 1.37; kubeadm's SupportedEtcdVersion says the same).
release_etcd_version() {
  local dir v
  dir=$(kubernetes_module Dir)
  v=$(sed -n 's/^ETCD_VERSION=\${ETCD_VERSION:-\([0-9.]*\)}.*/\1/p' "$dir/hack/lib/etcd.sh")
  [ -n "$v" ] || { log "no ETCD_VERSION in $dir/hack/lib/etcd.sh"; exit 1; }
  echo "$v"
}

write_etcd_module() {
  local dir=$1 version=$2
  mkdir -p "$dir"
  cat >"$dir/main.go.new" <<'GO'
// Generated by scripts/kube-apiserver.sh: the etcd server, as the etcd command runs it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  printf '// Generated by scripts/kube-apiserver.sh.\nmodule ferrokube.invalid/etcd-v%s\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' \
    "$version" "$version" >"$dir/go.mod.new"
  if ! cmp -s "$dir/go.mod.new" "$dir/go.mod.in" || ! cmp -s "$dir/main.go.new" "$dir/main.go" ||
    [ ! -s "$dir/go.sum" ]; then
    cp "$dir/go.mod.new" "$dir/go.mod"
    mv "$dir/main.go.new" "$dir/main.go"
    log "resolving modules for go.etcd.io/etcd/server/v3 v$version"
    (cd "$dir" && rm -f go.sum && GOFLAGS=-mod=mod go mod tidy >&2)
    mv "$dir/go.mod.new" "$dir/go.mod.in"
  else
    rm -f "$dir/go.mod.new" "$dir/main.go.new"
  fi
}

# go build of one package of the module in $1 into $bin/$2, skipped when the stamp (Go version,
# go.mod, go.sum, flags) matches the one the binary was built with.
go_build_one() {
  local dir=$1 name=$2 pkg=$3 tags=$4 ldflags=$5
  local want
  want=$( { go version; cat "$dir/go.mod" "$dir/go.sum"; [ -f "$dir/main.go" ] && cat "$dir/main.go";
    echo "$pkg $tags $ldflags"; } | sha256sum | cut -d' ' -f1)
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/$name.sha256" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  log "building $name ($pkg; $(go version | cut -d' ' -f3); minutes the first time)"
  local start=$SECONDS
  (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=readonly \
    go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$bin/$name.tmp" "$pkg" >&2)
  mv "$bin/$name.tmp" "$bin/$name"
  echo "$want" >"$bin/$name.sha256"
  log "built $bin/$name in $((SECONDS - start)) s"
}

# Build of 1.37.2 from an empty GOCACHE and GOMODCACHE (Go 1.26.8, 2 cores): on a quiet machine
# (2026-11-26, session 3) 603 s in all, 982 s user + 140 s system CPU, 2.5 GB peak RSS: the modules
# downloaded and resolved, kube-apiserver 412 s (the standard library and the shared dependencies
# included), kube-controller-manager 136 s, etcd 39 s. Niced behind busy cargo builds it took 36 min
# 41 s (kube-apiserver 1362 s, kube-controller-manager 656 s, etcd 147 s). Disk: the three binaries
# 191 MB, GOMODCACHE +930 MB, GOCACHE +3.7 GB. A second run: 0.2 s.
build_modules() {
  local top=$cache/k8s-v$K8S_VERSION need=() name
  mkdir -p "$bin"
  for name in kube-apiserver kube-controller-manager etcd; do
    prebuilt "$name" || need+=("$name")
  done
  [ ${#need[@]} -gt 0 ] || return 0
  command -v go >/dev/null 2>&1 || { log "no go on PATH (Go 1.26 or newer is needed)"; exit 1; }
  local gomod
  kubernetes_module GoMod >/dev/null  # downloads it once, in this shell
  gomod=$(kubernetes_module GoMod)
  write_build_module "$top/build" "$gomod"
  # As upstream's hack/lib/golang.sh builds release binaries: static, trimmed, without symbols, tags
  # selinux,notest,grpcnotrace, and the version stamped into both copies of the version variables
  # (component-base's, which /version serves, and client-go's).
  local major=${K8S_VERSION%%.*} minor=${K8S_VERSION#*.}
  minor=${minor%%.*}
  local ldflags="-s -w" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(kubernetes_release_date)"
  done
  for name in "${need[@]}"; do
    [ "$name" = etcd ] && continue
    go_build_one "$top/build" "$name" "k8s.io/kubernetes/cmd/$name" selinux,notest,grpcnotrace "$ldflags"
  done
  case " ${need[*]} " in
    *" etcd "*)
      local etcd_version=${ETCD_VERSION:-$(release_etcd_version)}
      write_etcd_module "$top/etcd" "$etcd_version"
      go_build_one "$top/etcd" etcd . "" "-s -w"
      ;;
  esac
}

# The release's date on the module proxy (its .info Time), as buildDate: the same on every rebuild.
kubernetes_release_date() {
  sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$(kubernetes_module Info)"
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
# and EC, group system:masters: the contexts cert-v1-rsa and cert-v1-ec (client/tests/client/e2e/client.rs).
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

# Refuse a port something else already listens on (another checkout's server, say): otherwise
# our server dies at once and the clients reach the other one, whose certificates are not ours.
port_free() {
  if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
    log "127.0.0.1:$1 is taken by another process: pick other ports (APISERVER_PORT, ETCD_PORT; etcd also uses ETCD_PORT+1)"
    exit 1
  fi
}

# The flags that differ between the releases. 1.20.2 is the reference; what later releases changed:
# --insecure-port is gone (removed in 1.24: there is no insecure port any more), and
# --default-watch-cache-size is a deprecated no-op (watch caches size themselves), so not passed;
# `--watch-cache-sizes podtemplates#0` still turns the PodTemplates' watch cache off. An advertise
# address in 127.0.0.0/8 is now refused while an endpoint reconciler writes it into the `kubernetes`
# Service's endpoints ("may not be in the loopback range"), so there is none: the Service exists, with
# no endpoints (nothing here routes its cluster IP anyway; 1.20 listed 127.0.0.1 there).
# The service-account issuer and key flags, required since 1.20, are passed to every release.
apiserver_version_flags() {
  if debian_build; then
    echo "--insecure-port=0 --default-watch-cache-size $WATCH_CACHE_SIZE"
  else
    echo "--endpoint-reconciler-type none"
  fi
}

up() {
  if [ -f "$STATE/k8s-version" ] && [ "$(cat "$STATE/k8s-version")" != "$K8S_VERSION" ] &&
    { running kube-apiserver || running etcd; }; then
    log "$STATE holds a running Kubernetes $(cat "$STATE/k8s-version"), not $K8S_VERSION: run '$0 down' first"
    exit 1
  fi
  build
  mkdir -p "$STATE"
  echo "$K8S_VERSION" >"$STATE/k8s-version"
  echo "$ETCD_PORT" >"$STATE/etcd-port"
  make_certs
  make_v1_certs
  write_kubeconfig
  local d=$STATE/pki etcd_bin=etcd
  debian_build || etcd_bin=$bin/etcd
  if ! running etcd; then
    port_free "$ETCD_PORT"
    port_free "$((ETCD_PORT + 1))"
    log "starting etcd ($("$etcd_bin" --version | sed -n 's/^etcd Version: //p')) on 127.0.0.1:$ETCD_PORT"
    "$etcd_bin" --name ferrokube-e2e --data-dir "$STATE/etcd" \
      --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
      --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
      --initial-cluster "ferrokube-e2e=http://127.0.0.1:$((ETCD_PORT + 1))" \
      >"$STATE/etcd.log" 2>&1 &
    echo $! >"$STATE/etcd.pid"
  fi
  if ! running kube-apiserver; then
    port_free "$APISERVER_PORT"
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
    log "starting kube-apiserver $K8S_VERSION on https://127.0.0.1:$APISERVER_PORT"
    # shellcheck disable=SC2046 # the version's flags are words
    "$bin/kube-apiserver" \
      --audit-policy-file "$STATE/audit-policy.yaml" --audit-log-path "$STATE/audit.log" \
      --audit-log-format json --audit-log-maxsize 200 \
      --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
      --secure-port "$APISERVER_PORT" \
      --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
      --tls-cert-file "$d/server.crt" --tls-private-key-file "$d/server.key" \
      --client-ca-file "$d/ca.crt" --token-auth-file "$d/tokens.csv" \
      --service-account-key-file "$d/sa.pub" --service-account-signing-key-file "$d/sa.key" \
      --service-account-issuer https://kubernetes.default.svc \
      --authorization-mode RBAC \
      --disable-admission-plugins ServiceAccount \
      --service-cluster-ip-range 10.96.0.0/24 \
      --watch-cache-sizes podtemplates#0 \
      $(apiserver_version_flags) ${APISERVER_FLAGS:-} \
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
      [ "${WITH_KCM:-0}" = 1 ] && start_kcm
      log "ready: kube-apiserver $K8S_VERSION; export KUBECONFIG=$STATE/kubeconfig"
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

# WITH_KCM=1: kube-controller-manager with every controller but the node lifecycle one (no kubelet
# runs here to keep Nodes alive; 1.37 names it node-lifecycle-controller and still takes the old
# name), signing service-account tokens with the apiserver's key.
start_kcm() {
  running kube-controller-manager && return 0
  local d=$STATE/pki
  log "starting kube-controller-manager $K8S_VERSION ($STATE/kube-controller-manager.log)"
  "$bin/kube-controller-manager" --kubeconfig "$STATE/kubeconfig" --leader-elect=false \
    --secure-port=0 --controllers '*,-nodelifecycle' \
    --service-account-private-key-file "$d/sa.key" --root-ca-file "$d/ca.crt" \
    --cluster-signing-cert-file "$d/ca.crt" --cluster-signing-key-file "$d/ca.key" \
    >"$STATE/kube-controller-manager.log" 2>&1 &
  echo $! >"$STATE/kube-controller-manager.pid"
  sleep 3
  running kube-controller-manager ||
    { log "kube-controller-manager exited:"; tail -n 20 "$STATE/kube-controller-manager.log" >&2; exit 1; }
}

down() {
  for name in kube-controller-manager kube-apiserver etcd; do
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
  env) echo "export KUBECONFIG=$STATE/kubeconfig FERROKUBE_E2E_ETCD=http://127.0.0.1:$ETCD_PORT FERROKUBE_KCM=$bin/kube-controller-manager FERROKUBE_AUDIT_LOG=$STATE/audit.log FERROKUBE_K8S_VERSION=$K8S_VERSION" ;;
  *) echo "usage: $0 build|up|down|env" >&2; exit 2 ;;
esac
