#!/usr/bin/env bash
# Build a peer program against client-go v0.37 (current release) from the Go module proxy, with
# the machine's Go (1.26): go.mod and go.sum beside this script pin every module.
#
#   benches/peers/client-go-v0.37/build.sh workqueue  # W1-W5 and W2m of benches/WORKLOADS.md (Typed queues)
#   benches/peers/client-go-v0.37/build.sh informer   # the informer benchmark's peer (INFORMER.md)
#   benches/peers/client-go-v0.37/build.sh leader     # a leader-election candidate (LEADER.md)
#   benches/peers/client-go-v0.37/build.sh deadconn   # the dead-connection drill's informer
#
# Each prints the binary's path as its last stdout line. GOFLAGS from the environment is kept
# (e.g. GOFLAGS=-p=1 on a shared machine); -mod=readonly is always added.
#
# The binary goes to ${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube/bin/client-go-v0.37-<name>; it is
# rebuilt only when the sources, go.mod/go.sum or the Go version changed. Modules are cached in
# Go's module cache (GOMODCACHE); nothing built lands in the repository.
set -euo pipefail

log() { echo "[client-go-v0.37] $*" >&2; }

here=$(cd "$(dirname "$0")" && pwd)
name=${1:-}
case $name in
  workqueue | informer | leader | deadconn) ;;
  *) log "usage: $0 workqueue|informer|leader|deadconn"; exit 2 ;;
esac
command -v go >/dev/null 2>&1 || { log "no go on PATH (Go 1.26 or newer is needed)"; exit 1; }

cache=${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube
bin=$cache/bin/client-go-v0.37-$name
# One build of a program at a time (CI builds deadconn in the background too): a second caller
# waits here, then finds it up to date.
mkdir -p "$cache/bin"
exec 9>>"$bin.lock"
flock 9
want=$( { cat "$here/go.mod" "$here/go.sum" "$here/$name"/*.go; go version; } | sha256sum | cut -d' ' -f1)
if [ -x "$bin" ] && [ "$(cat "$bin.sha256" 2>/dev/null)" = "$want" ]; then
  log "up to date: $bin"
  echo "$bin"
  exit 0
fi
mkdir -p "$cache/bin"
log "building $name (client-go v0.37 from the module proxy; a few minutes the first time)"
start=$SECONDS
(cd "$here" && CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -o "$bin.tmp" "./$name" >&2)
mv "$bin.tmp" "$bin"
echo "$want" >"$bin.sha256"
log "built $bin in $((SECONDS - start)) s"
echo "$bin"
