#!/usr/bin/env bash
# Build the client-go side of the leader-election benchmark (benches/peers/client-go-leader/main.go)
# against client-go v1.20's tools/leaderelection as vendored in the Kubernetes 1.20.2 tree that
# scripts/kube-apiserver.sh builds the API server from, with Debian's Go in GOPATH mode, offline.
#
#   scripts/build-client-go-leader.sh     # prints the binary's path as its last stdout line
#
# It first runs `scripts/kube-apiserver.sh build` (cached: well under a second when done), which
# unpacks the tree (scripts/kubernetes-source.sh), installs the Go toolchain, and swaps the tree's
# vendored modern-go/reflect2 for Debian's Go >= 1.18 fix (client-go's JSON goes through it too);
# the benchmark needs that kube-apiserver anyway. Then it copies main.go into the tree at
# cmd/ferrokube-client-go-leader/, so that its k8s.io imports resolve to the tree's vendor/
# (symlinks into staging/src/k8s.io), and builds with GO111MODULE=off GOPROXY=off into
# ${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube/bin/client-go-leader. Nothing built lands in the repo.
# Re-runs rebuild only when main.go, the Go version, the tree or its reflect2 changed.
set -euo pipefail

log() { echo "[client-go-leader] $*" >&2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
source_go=$repo/benches/peers/client-go-leader/main.go
cache=${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube
gopath=$cache/kubernetes/gopath
bin=$cache/bin/client-go-leader
command=ferrokube-client-go-leader

"$repo/scripts/kube-apiserver.sh" build >&2
tree=$("$repo/scripts/kubernetes-source.sh" 2>/dev/null | tail -n 1)
[ -d "$tree/vendor/k8s.io/client-go/tools/leaderelection" ] || {
  log "no vendor/k8s.io/client-go/tools/leaderelection in $tree"; exit 1; }

want=$( {
  sha256sum <"$source_go"
  go version
  echo "$tree"
  ls "$tree/vendor/github.com/modern-go/reflect2"
} | sha256sum | cut -d' ' -f1)
if [ -x "$bin" ] && [ "$(cat "$bin.sha256" 2>/dev/null)" = "$want" ]; then
  log "up to date: $bin"
  echo "$bin"
  exit 0
fi

pkg_dir=$gopath/src/k8s.io/kubernetes/cmd/$command
mkdir -p "$pkg_dir" "$(dirname "$bin")"
cp "$source_go" "$pkg_dir/main.go"

log "building with $(go version) in GOPATH mode (GOPATH=$gopath)"
start=$SECONDS
(
  cd "$gopath/src/k8s.io/kubernetes"
  env GO111MODULE=off CGO_ENABLED=0 GOPATH="$gopath" GOFLAGS= GOPROXY=off \
    nice -n 15 go build -o "$bin.tmp" "k8s.io/kubernetes/cmd/$command" >&2
)
mv "$bin.tmp" "$bin"
echo "$want" >"$bin.sha256"
log "built $bin in $((SECONDS - start)) s"
echo "$bin"
