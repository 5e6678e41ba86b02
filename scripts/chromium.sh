#!/usr/bin/env bash
# Chromium and chromedriver (Debian's `chromium` and `chromium-driver` packages) for the real-browser
# test of the live view (view/tests/view/chromium.rs). Installs them only when missing, runs
# `apt-get update` only when apt has no candidate for them (or an install from the current lists
# fails), as root or through sudo (scripts/apt-get.sh).
#
#   scripts/chromium.sh           # install if missing, then print CHROMIUM=<path> and CHROMEDRIVER=<path>
#   scripts/chromium.sh install   # the same
#   scripts/chromium.sh env       # print `export CHROMIUM=<path> CHROMEDRIVER=<path>` (installs nothing;
#                                 # fails if either is missing)
#
# view/tests/view/chromium.rs takes the binaries from $CHROMIUM and $CHROMEDRIVER when set, from PATH
# otherwise; it fails (it does not skip) when they are missing.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)

log() { echo "[chromium] $*" >&2; }

# Debian installs /usr/bin/chromium (a wrapper script) and /usr/bin/chromedriver.
find_chromium() { command -v chromium || command -v chromium-browser || true; }
find_chromedriver() { command -v chromedriver || true; }

# True when apt knows an installable version of every package named.
has_candidates() {
  local pkg candidate
  for pkg in "$@"; do
    candidate=$(apt-cache policy "$pkg" 2>/dev/null | sed -n 's/^ *Candidate: *//p')
    [ -n "$candidate" ] && [ "$candidate" != "(none)" ] || return 1
  done
}

install_packages() {
  local missing=()
  [ -n "$(find_chromium)" ] || missing+=(chromium)
  [ -n "$(find_chromedriver)" ] || missing+=(chromium-driver)
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null 2>&1 || {
    log "no apt-get: install chromium and chromedriver yourself and set CHROMIUM / CHROMEDRIVER"
    exit 1
  }
  export DEBIAN_FRONTEND=noninteractive
  local updated=false
  if ! has_candidates "${missing[@]}"; then
    log "apt-get update (no candidate for ${missing[*]})"
    "$repo/scripts/apt-get.sh" update -qq >&2
    updated=true
  fi
  log "installing ${missing[*]}"
  if ! "$repo/scripts/apt-get.sh" install -y -qq --no-install-recommends "${missing[@]}" >&2; then
    # Lists older than the mirror: the install fetches files that are gone. Once more, updated.
    $updated && exit 1
    log "install failed: apt-get update, then once more"
    "$repo/scripts/apt-get.sh" update -qq >&2
    "$repo/scripts/apt-get.sh" install -y -qq --no-install-recommends "${missing[@]}" >&2
  fi
}

paths() {
  local chromium chromedriver
  chromium=$(find_chromium)
  chromedriver=$(find_chromedriver)
  if [ -z "$chromium" ] || [ -z "$chromedriver" ]; then
    log "missing: ${chromium:-chromium} ${chromedriver:-chromedriver} (run scripts/chromium.sh to install)"
    exit 1
  fi
  echo "$1CHROMIUM=$chromium$2CHROMEDRIVER=$chromedriver"
}

case "${1:-install}" in
  install)
    install_packages
    paths "" $'\n'
    ;;
  env) paths "export " " " ;;
  *) echo "usage: $0 [install|env]" >&2; exit 2 ;;
esac
