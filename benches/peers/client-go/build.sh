#!/usr/bin/env bash
# Build a client-go peer against client-go as vendored in Debian's Kubernetes 1.20.2 source tree,
# with Debian's Go in GOPATH mode: the workqueue peer (main.go beside this script) or the informer
# peer (informer/main.go).
#
#   benches/peers/client-go/build.sh             # the workqueue peer; prints the binary's path last
#   benches/peers/client-go/build.sh informer    # the informer peer
#
# The tree comes from scripts/kubernetes-source.sh (cached). A copy of main.go is placed at
# $GOPATH/src/k8s.io/kubernetes/cmd/ferrokube-wq-peer/main.go inside that tree, so the import of
# k8s.io/client-go/util/workqueue resolves to the tree's vendor/. The binary goes to
# ${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube/bin/client-go-wq-peer; nothing built lands in the repo.
# It is rebuilt only when main.go (or the Go version or the tree) changed.
set -euo pipefail

log() { echo "[client-go-peer] $*" >&2; }

here=$(cd "$(dirname "$0")" && pwd)
case ${1:-workqueue} in
  workqueue) source_go=$here/main.go; command=ferrokube-wq-peer; name=client-go-wq-peer ;;
  informer) source_go=$here/informer/main.go; command=ferrokube-informer-peer; name=client-go-informer-peer ;;
  *) log "unknown peer ${1}: workqueue or informer"; exit 2 ;;
esac
repo=$(cd "$here/../../.." && pwd)

tree=$("$repo/scripts/kubernetes-source.sh" | tail -n 1)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube
gopath=$cache/kubernetes/gopath
bin=$cache/bin/$name
stamp=$bin.sha256

# What the binary depends on: our source, the Go toolchain, and which tree it was built in.
want=$( { sha256sum <"$source_go"; go version; echo "$tree"; } | sha256sum | cut -d' ' -f1)
if [ -x "$bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  log "up to date: $bin"
  echo "$bin"
  exit 0
fi

pkg_dir=$gopath/src/k8s.io/kubernetes/cmd/$command
mkdir -p "$pkg_dir" "$(dirname "$bin")"
cp "$source_go" "$pkg_dir/main.go"

log "building with $(go version) in GOPATH mode (GOPATH=$gopath)"
start=$(date +%s)
(
  cd "$gopath/src/k8s.io/kubernetes"
  env GO111MODULE=off CGO_ENABLED=0 GOPATH="$gopath" GOFLAGS= GOPROXY=off \
    go build -o "$bin.tmp" "k8s.io/kubernetes/cmd/$command" >&2
)
mv "$bin.tmp" "$bin"
echo "$want" >"$stamp"
log "built $bin in $(($(date +%s) - start)) s"
echo "$bin"
