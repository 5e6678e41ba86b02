#!/usr/bin/env bash
# Publish dry run: every crate of the workspace that is published passes `cargo package`.
#
# Why: a workspace builds happily with things `cargo publish` refuses: a path dependency without a
# version, a file pulled in with `include_str!` from outside the package, missing metadata
# (description, license, repository, readme). Each is found only at release time, one crate at a
# time, unless CI packages every crate on every change.
#
# How: the published crates are read from `cargo metadata` (a crate with `publish = false` is
# left out), and packaged in one `cargo package` call, which orders them by their dependencies and
# resolves each against the ones packaged before it (a local registry overlay), so nothing has to
# be on crates.io yet. By default with `--no-verify`: the manifests, the file lists and the
# dependency resolution are checked in seconds. `--verify` also builds each packaged crate from its
# .crate file alone (what crates.io users get); that compiles every crate's dependencies again
# outside the workspace's target directory (k8s-openapi alone takes minutes on two cores), so CI
# runs the quick check and `--verify` is for a release.
#
# `--allow-dirty`: the check is about what the packages hold, not whether the worktree is committed.
#
# Usage: scripts/package-check.sh [--verify]      (exit 0: every published crate packages)

set -euo pipefail
cd "$(dirname "$0")/.."

verify="--no-verify"
if [[ "${1:-}" == "--verify" ]]; then
    verify=""
fi

mapfile -t published < <(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
metadata = json.load(sys.stdin)
members = set(metadata["workspace_members"])
for package in sorted(metadata["packages"], key=lambda p: p["name"]):
    # publish: null = anywhere; [] = nowhere (publish = false); a list = those registries.
    if package["id"] in members and package["publish"] != []:
        print(package["name"])
')
if [[ ${#published[@]} -eq 0 ]]; then
    echo "package-check: no published crate found (cargo metadata)" >&2
    exit 2
fi

echo "package-check: ${published[*]} (${verify:-with verification})"
args=()
for name in "${published[@]}"; do
    args+=(-p "$name")
done
# shellcheck disable=SC2086 # $verify is one flag or none
cargo package --allow-dirty $verify "${args[@]}"
echo "package-check: ok (${#published[@]} crates)"
