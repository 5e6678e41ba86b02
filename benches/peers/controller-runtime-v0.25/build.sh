#!/usr/bin/env bash
# Build a peer program against controller-runtime v0.25 (current release, on client-go v0.37.2)
# from the Go module proxy, with the machine's Go (1.26): go.mod and go.sum beside this script pin
# every module.
#
#   benches/peers/controller-runtime-v0.25/build.sh controller   # bench_controller's peer (CONTROLLER.md)
#   benches/peers/controller-runtime-v0.25/build.sh ryw          # the read-your-writes probe
#                                                                # (READ_YOUR_WRITES.md)
#
# Each prints the binary's path as its last stdout line. The binary goes to
# ${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube/bin/controller-runtime-v0.25-<name>; it is rebuilt only
# when the sources, go.mod/go.sum or the Go version changed. Modules are cached in Go's module cache
# (GOMODCACHE), build objects in GOCACHE; nothing built lands in the repository. GOFLAGS from the
# environment is kept (e.g. GOFLAGS=-p=1 on a shared machine); -mod=readonly is always added.
set -euo pipefail

log() { echo "[controller-runtime-v0.25] $*" >&2; }

here=$(cd "$(dirname "$0")" && pwd)
name=${1:-}
case $name in
  controller | ryw) ;;
  *) log "usage: $0 controller|ryw"; exit 2 ;;
esac
command -v go >/dev/null 2>&1 || { log "no go on PATH (Go 1.26 or newer is needed)"; exit 1; }

cache=${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube
bin=$cache/bin/controller-runtime-v0.25-$name
want=$( { cat "$here/go.mod" "$here/go.sum" "$here/$name"/*.go; go version; } | sha256sum | cut -d' ' -f1)
if [ -x "$bin" ] && [ "$(cat "$bin.sha256" 2>/dev/null)" = "$want" ]; then
  log "up to date: $bin"
  echo "$bin"
  exit 0
fi
mkdir -p "$cache/bin"
log "building $name (controller-runtime v0.25 from the module proxy; a few minutes the first time)"
start=$SECONDS
(cd "$here" && CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -o "$bin.tmp" "./$name" >&2)
mv "$bin.tmp" "$bin"
echo "$want" >"$bin.sha256"
log "built $bin in $((SECONDS - start)) s"
echo "$bin"
