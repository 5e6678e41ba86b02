#!/usr/bin/env bash
# Library functions longer than a screen: lists each function of the workspace's library code that
# runs over LIMIT lines (default 80), longest first, and says how many.
#
# Why: a function that does not fit a screen is read by scrolling back and forth, and it usually
# does several things that want names of their own (issue 43: "functions that fit a screen"). A
# function over 100 lines must say why in a comment: a line `// Long: <why>` (or `/// Long: <why>`
# in its doc) within it or above it; `--check` fails on one that does not.
#
# How it counts: the code is rustfmt-formatted (CI checks that), so a function starts at its `fn`
# line and ends at the first `}` line indented as its `fn` line; its length is that span, blank
# lines, comments and the signature included (what the reader scrolls through). What counts as
# library code: each workspace library crate's `src/`, without its binaries (`src/bin/`,
# `src/main.rs`), without test code (`#[cfg(test)]` modules and items, `tests/`, benches), and
# without the samples, the test kit and the fuzz harnesses (examples/, testkit/, fuzz/).
#
# Usage: scripts/long-functions.sh [--check] [LIMIT]

set -euo pipefail
cd "$(dirname "$0")/.."

check=false
if [[ "${1:-}" == "--check" ]]; then
    check=true
    shift
fi
limit="${1:-80}"

python3 - "$limit" "$check" <<'PY'
import os
import re
import sys

limit, check = int(sys.argv[1]), sys.argv[2] == "true"
LIBRARIES = ["src", "core/src", "pipeline/src", "derive/src", "workqueue/src", "informer/src",
             "client/src", "runtime/src", "view/src", "apiserver/src", "explore/src"]
FN = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:default\s+)?(?:const\s+)?(?:async\s+)?"
                r"(?:unsafe\s+)?(?:extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)")
TEST_ATTRIBUTE = re.compile(r"^(\s*)#\[cfg\(test\)\]")
WHY = re.compile(r"^\s*//+\s*Long:")


def functions(path):
    """(name, first line, length, explained) of each non-test function of a rustfmt-formatted file."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    found, at, skip_until_indent = [], 0, None
    while at < len(lines):
        line = lines[at]
        test = TEST_ATTRIBUTE.match(line)
        if test:  # skip the test item: to the `}` (or `;`) line indented as the attribute
            indent = test.group(1)
            at += 1
            while at < len(lines):
                current = lines[at]
                if current.startswith(indent + "}") and not current.startswith(indent + " "):
                    break
                if current.rstrip().endswith(";") and current.startswith(indent) and \
                        not current.startswith(indent + " ") and "{" not in current:
                    break
                at += 1
            at += 1
            continue
        match = FN.match(line)
        if match and not line.rstrip().endswith(";"):
            indent, name = match.group(1), match.group(2)
            end = at
            if not line.rstrip().endswith("}"):  # a one-line body ends on its own line
                end = at + 1
                while end < len(lines) and not (
                    lines[end].startswith(indent + "}") and not lines[end].startswith(indent + " ")
                ):
                    end += 1
            # The doc comment above the function may say why it is long.
            above = at - 1
            while above >= 0 and lines[above].strip().startswith(("///", "#[")):
                above -= 1
            explained = any(WHY.search(l) for l in lines[above + 1 : end + 1])
            found.append((name, at + 1, end - at + 1, explained))
        at += 1
    return found


long_ones = []
for library in LIBRARIES:
    for directory, subdirectories, files in os.walk(library):
        subdirectories[:] = sorted(d for d in subdirectories if not (directory == library and d == "bin"))
        for name in sorted(files):
            if not name.endswith(".rs") or (directory == library and name == "main.rs"):
                continue
            if name == "tests.rs" or directory.endswith(os.sep + "tests"):
                continue
            path = os.path.join(directory, name)
            for function, line, length, explained in functions(path):
                if length > limit:
                    long_ones.append((length, f"{path}:{line}", function, explained))

long_ones.sort(key=lambda f: (-f[0], f[1]))
unexplained = []
for length, where, function, explained in long_ones:
    note = ""
    if length > 100:
        note = "  (says why)" if explained else "  (over 100 lines, no comment saying why)"
        if not explained:
            unexplained.append(where)
    print(f"{length:5}  {function:32} {where}{note}")
print(f"{len(long_ones)} library function(s) over {limit} lines; "
      f"{sum(1 for f in long_ones if f[0] > 100)} over 100, {len(unexplained)} of them without a why")
if check and unexplained:
    sys.exit(1)
PY
