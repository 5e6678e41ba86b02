#!/usr/bin/env bash
# Builds the guide (docs/, an mdBook) into target/book, installing mdBook on first use.
#
# Why a book: the Rust ecosystem's guides are mdBooks (the Rust book, tokio's, kube-rs's, the
# kubebuilder book), readable as plain Markdown under docs/src/ too. Its Rust blocks are not
# tested here: `cargo test` compiles every one of them (src/lib.rs includes each chapter as doc
# tests), so this step checks only that the book builds: SUMMARY.md names files that exist, and
# no chapter breaks the renderer.
#
# Usage: scripts/guide.sh     build into target/book (exit 1 when the build fails, 2 on set-up)
# To read it live while writing, a full mdBook of your own: `mdbook serve docs`.
#
# The first run installs mdBook into ${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube/ from crates.io,
# pinned, without its default features (no live-reload server: a plain build needs none; a
# couple of minutes of compiling); later runs reuse it and take about a second.

set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned: a newer release may render differently or refuse what this one takes.
readonly MDBOOK_VERSION="0.5.4"
readonly CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube"
readonly TOOL_ROOT="$CACHE_ROOT/mdbook-$MDBOOK_VERSION"
readonly TOOL="$TOOL_ROOT/bin/mdbook"

if [ ! -x "$TOOL" ]; then
  echo "installing mdBook $MDBOOK_VERSION into $TOOL_ROOT (first use)"
  # Its own target dir, removed afterwards: the tool stays, its build does not fill the disk.
  build_dir=$(mktemp -d)
  if ! cargo install mdbook --version "$MDBOOK_VERSION" --locked --no-default-features \
      --root "$TOOL_ROOT" --target-dir "$build_dir" -q; then
    rm -rf "$build_dir"
    echo "error: could not install mdBook $MDBOOK_VERSION from crates.io" >&2
    exit 2
  fi
  rm -rf "$build_dir"
fi

"$TOOL" build docs --dest-dir "$PWD/target/book"
echo "the guide: target/book/index.html"
