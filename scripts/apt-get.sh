#!/usr/bin/env bash
# apt-get, one caller at a time. Every project script that installs Debian packages goes through
# this: two of them running at once (CI builds the Kubernetes servers in the background while the
# tests run, and a test may install Chromium) then wait for each other instead of one failing on
# apt's lock. apt's own dpkg lock is waited for too (DPkg::Lock::Timeout), for other users of apt.
# Runs as root, or through sudo (non-interactive).
#
#   scripts/apt-get.sh update -qq
#   scripts/apt-get.sh install -y -qq etcd-client
set -euo pipefail

lock=/tmp/ferrokube-apt-get.lock
# A lock file another user created can still be opened for reading, and flock works on that too.
if ! { exec 9>>"$lock"; } 2>/dev/null; then
  exec 9<"$lock"
fi
flock 9

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo -n)
else
  echo "[apt-get] not root and no sudo: run apt-get $* as root" >&2
  exit 1
fi
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"
