#!/usr/bin/env bash
# Build the client-go workqueue peer (main.go beside this script) against client-go as vendored in
# Debian's Kubernetes 1.20.2 source tree, with Debian's Go in GOPATH mode.
#
#   benches/peers/client-go/build.sh     # prints the binary's path as its last stdout line
#
# The tree comes from scripts/kubernetes-source.sh (cached). A copy of main.go is placed at
# $GOPATH/src/k8s.io/kubernetes/cmd/ferrokube-wq-peer/main.go inside that tree, so the import of
# k8s.io/client-go/util/workqueue resolves to the tree's vendor/. The binary goes to
# ${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube/bin/client-go-wq-peer; nothing built lands in the repo.
# It is rebuilt only when main.go (or the Go version or the tree) changed.
set -euo pipefail

log() { echo "[client-go-peer] $*" >&2; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)

tree=$("$repo/scripts/kubernetes-source.sh" | tail -n 1)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube
gopath=$cache/kubernetes/gopath
bin=$cache/bin/client-go-wq-peer
stamp=$bin.sha256

# What the binary depends on: our source, the Go toolchain, and which tree it was built in.
want=$( { sha256sum <"$here/main.go"; go version; echo "$tree"; } | sha256sum | cut -d' ' -f1)
if [ -x "$bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  log "up to date: $bin"
  echo "$bin"
  exit 0
fi

pkg_dir=$gopath/src/k8s.io/kubernetes/cmd/ferrokube-wq-peer
mkdir -p "$pkg_dir" "$(dirname "$bin")"
cp "$here/main.go" "$pkg_dir/main.go"

log "building with $(go version) in GOPATH mode (GOPATH=$gopath)"
start=$(date +%s)
(
  cd "$gopath/src/k8s.io/kubernetes"
  env GO111MODULE=off CGO_ENABLED=0 GOPATH="$gopath" GOFLAGS= GOPROXY=off \
    go build -o "$bin.tmp" k8s.io/kubernetes/cmd/ferrokube-wq-peer >&2
)
mv "$bin.tmp" "$bin"
echo "$want" >"$stamp"
log "built $bin in $(($(date +%s) - start)) s"
echo "$bin"
