#!/usr/bin/env bash
# Prebuilt Kubernetes binaries, taken instead of a build from source when someone offers them.
#
# Why: building kube-apiserver, kube-controller-manager, etcd and e2e.test of a release from the Go
# module proxy takes ~23 minutes of two idle cores (and 1.20.2's from Debian's source ~25), which a
# fresh CI machine cannot spend beside everything else in its hour. A folder of binaries built by
# this project's own scripts (scripts/kube-apiserver.sh build, scripts/conformance.sh build) on the
# same machine kind is a cache of those builds, not a source: where none is offered, the scripts
# build from source exactly as before.
#
# The folder (FERROKUBE_K8S_PREBUILT; default ../shared/k8s beside the repository when that exists;
# set it empty to turn prebuilt binaries off) holds one subfolder per release, v<version>/, with
# NAME.xz (xz-compressed) for each binary and a SHA256SUMS listing the sha256 of each *uncompressed*
# binary. A binary is taken only when its sum matches; a file offered without a sum, or whose sum
# does not match, is an error (exit 1), never a silent build from source: a cache that lies must be
# seen.
#
#   scripts/k8s-prebuilt.sh install VERSION NAME DIR   # DIR/NAME from the offer; exit 0 done,
#                                                      # 3 not offered (build it), 1 refused
#   scripts/k8s-prebuilt.sh offered VERSION NAME       # exit 0 if offered, 3 if not
#
# An installed binary gets a stamp, DIR/NAME.sha256, of the form `prebuilt <sum>`; a later install
# whose file and stamp match the offer does nothing (one sha256 of the file, under a second).
set -euo pipefail

log() { echo "[k8s-prebuilt] $*" >&2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
NOT_OFFERED=3

# The offer's folder for a release, or nothing.
offer_dir() {
  local version=${1#v} root
  if [ "${FERROKUBE_K8S_PREBUILT+set}" = set ]; then
    root=$FERROKUBE_K8S_PREBUILT
    [ -n "$root" ] || return 0
    # Asked for by name: a folder that is not there is a mistake, not a reason to build for 20 minutes.
    [ -d "$root" ] || { log "FERROKUBE_K8S_PREBUILT=$root is not a folder"; exit 1; }
  else
    root=$repo/../shared/k8s
    [ -d "$root" ] || return 0
  fi
  [ -d "$root/v$version" ] && (cd "$root/v$version" && pwd)
  return 0
}

# The sum SHA256SUMS gives for NAME (empty when none).
listed_sum() {
  local dir=$1 name=$2
  [ -f "$dir/SHA256SUMS" ] || return 0
  awk -v n="$name" '$2 == n || $2 == "*" n { print $1; exit }' "$dir/SHA256SUMS"
}

offered() {
  local version=$1 name=$2 dir
  dir=$(offer_dir "$version")
  [ -n "$dir" ] && [ -f "$dir/$name.xz" ] || return $NOT_OFFERED
}

install() {
  local version=$1 name=$2 dest=$3 dir want have
  dir=$(offer_dir "$version")
  if [ -z "$dir" ] || [ ! -f "$dir/$name.xz" ]; then
    return $NOT_OFFERED
  fi
  want=$(listed_sum "$dir" "$name")
  if [ -z "$want" ]; then
    log "$dir/$name.xz is offered but $dir/SHA256SUMS lists no sum for $name: refusing it"
    return 1
  fi
  mkdir -p "$dest"
  if [ -x "$dest/$name" ] && [ "$(cat "$dest/$name.sha256" 2>/dev/null)" = "prebuilt $want" ]; then
    have=$(sha256sum "$dest/$name" | cut -d' ' -f1)
    [ "$have" = "$want" ] && return 0
    log "$dest/$name no longer matches its stamp: unpacking it again"
  fi
  local start=$SECONDS
  rm -f "$dest/$name.tmp"
  xz -dc "$dir/$name.xz" >"$dest/$name.tmp"
  have=$(sha256sum "$dest/$name.tmp" | cut -d' ' -f1)
  if [ "$have" != "$want" ]; then
    rm -f "$dest/$name.tmp"
    log "$dir/$name.xz unpacks to sha256 $have, but $dir/SHA256SUMS says $want: refusing it"
    log "(remove the offer, or set FERROKUBE_K8S_PREBUILT= to build from source)"
    return 1
  fi
  chmod 755 "$dest/$name.tmp"
  mv "$dest/$name.tmp" "$dest/$name"
  echo "prebuilt $want" >"$dest/$name.sha256"
  log "$name $version from $dir (sha256 checked) in $((SECONDS - start)) s"
}

case "${1:-}" in
  install) install "${2:?version}" "${3:?name}" "${4:?dir}" ;;
  offered) offered "${2:?version}" "${3:?name}" ;;
  *) echo "usage: $0 install VERSION NAME DIR | offered VERSION NAME" >&2; exit 2 ;;
esac
