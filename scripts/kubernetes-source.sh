#!/usr/bin/env bash
# Fetch and unpack the Kubernetes source tree (with vendor/) from Debian's `kubernetes` source package,
# and install Debian's Go, so that Go programs can be built against the vendored client-go in GOPATH mode.
#
#   scripts/kubernetes-source.sh        # prints the unpacked tree's path as its last stdout line
#
# Idempotent: every step whose result is already present is skipped, so a re-run takes well under a
# second. Needs root (apt-get). Progress goes to stderr; stdout carries only the tree path.
#
# Layout (CACHE = ${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube/kubernetes):
#   $CACHE/*.dsc, *.orig.tar.*, *.debian.tar.*     the downloaded source package
#   $CACHE/src/kubernetes-<version>/               the unpacked tree (Debian's patches applied)
#   $CACHE/tree                                    symlink -> the unpacked tree (printed path)
#   $CACHE/gopath/src/k8s.io/kubernetes            symlink -> the unpacked tree, so that
#                                                  GOPATH=$CACHE/gopath GO111MODULE=off go build
#                                                  k8s.io/kubernetes/... uses the tree's vendor/
#
# This script only fetches and unpacks; building things from the tree is up to its callers.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)

log() { echo "[kubernetes-source] $*" >&2; }

CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube/kubernetes
mkdir -p "$CACHE"

export DEBIAN_FRONTEND=noninteractive
apt_updated=no
apt_update() {
  log "apt-get update"
  "$repo/scripts/apt-get.sh" update -qq >&2
  apt_updated=yes
}

# 1. Tools: Debian's Go (golang-go), and dpkg-dev for `apt-get source` / dpkg-source.
if ! command -v go >/dev/null 2>&1 || ! command -v dpkg-source >/dev/null 2>&1; then
  apt_update
  log "installing golang-go dpkg-dev xz-utils"
  "$repo/scripts/apt-get.sh" install -y -qq golang-go dpkg-dev xz-utils >&2
fi

# Already unpacked? Then nothing else to do (no network needed).
if [ -L "$CACHE/tree" ] && [ -d "$CACHE/tree/vendor/k8s.io/client-go/util/workqueue" ]; then
  tree=$(readlink -f "$CACHE/tree")
else
  # 2. Enable Debian source packages: a deb-src copy of the machine's own debian.sources (same
  #    mirrors, suites and keys), so no host name is written here.
  src_list=/etc/apt/sources.list.d/debian-src.sources
  if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    [ -f /etc/apt/sources.list.d/debian.sources ] || {
      log "no /etc/apt/sources.list.d/debian.sources to derive deb-src entries from"; exit 1; }
    log "enabling deb-src entries in $src_list"
    sed -E 's/^Types:[[:space:]]*deb[[:space:]]*$/Types: deb-src/' \
      /etc/apt/sources.list.d/debian.sources >"$src_list"
    apt_update
  elif [ "$apt_updated" = no ] && ! ls /var/lib/apt/lists/ 2>/dev/null | grep -q '_source_Sources'; then
    apt_update
  fi

  # 3. Download the source package (.dsc + orig tarball(s) + debian tarball) into the cache.
  cd "$CACHE"
  if ! ls "$CACHE"/kubernetes_*.dsc >/dev/null 2>&1; then
    log "apt-get source --download-only kubernetes (into $CACHE)"
    "$repo/scripts/apt-get.sh" source --download-only kubernetes >&2
  else
    log "source package already downloaded: $(ls "$CACHE"/kubernetes_*.dsc)"
  fi
  dsc=$(ls "$CACHE"/kubernetes_*.dsc | sort -V | tail -n 1)

  # 4. Unpack with dpkg-source -x: the upstream orig tarball (which already carries vendor/, whose
  #    k8s.io/* entries are symlinks into staging/src/k8s.io) plus Debian's patch series (kubectl /
  #    cli-runtime printing fixes only; client-go is untouched). Unpacked next to the orig tarball so
  #    dpkg-source does not copy it, then moved into place, so an interrupted run leaves no half tree.
  rm -rf "$CACHE/kubernetes.partial"
  log "unpacking $(basename "$dsc") (dpkg-source -x)"
  dpkg-source -x "$dsc" "$CACHE/kubernetes.partial" >&2
  if [ ! -d "$CACHE/kubernetes.partial/vendor/k8s.io/client-go/util/workqueue" ]; then
    log "unpacked tree has no vendor/k8s.io/client-go/util/workqueue"; exit 1
  fi
  version=$(sed -n 's/^Version: //p' "$dsc" | head -n 1)
  rm -rf "$CACHE/src"
  mkdir -p "$CACHE/src"
  mv "$CACHE/kubernetes.partial" "$CACHE/src/kubernetes-$version"
  ln -sfn "src/kubernetes-$version" "$CACHE/tree"
  tree=$(readlink -f "$CACHE/tree")
  log "unpacked into $tree"
fi

# 5. GOPATH layout: $CACHE/gopath/src/k8s.io/kubernetes -> tree.
mkdir -p "$CACHE/gopath/src/k8s.io"
if [ "$(readlink "$CACHE/gopath/src/k8s.io/kubernetes" 2>/dev/null)" != "$tree" ]; then
  ln -sfn "$tree" "$CACHE/gopath/src/k8s.io/kubernetes"
fi
log "GOPATH=$CACHE/gopath (k8s.io/kubernetes -> $tree); $(go version)"

echo "$tree"
