#!/usr/bin/env bash
# Architecture check: no import circles between the modules of a crate, and no crate that depends
# on a crate above it.
#
# Why: a circle (`a` imports from `b`, `b` imports from `a`) means neither module can be read,
# tested or moved without the other, so the two are one module in disguise. The same holds one
# level up for crates: the layers below must not know the layers above, or the layering is a
# fiction. Both rot silently, one `use` at a time, so CI checks them on every change.
#
# Two checks, both must pass:
#
#  1. Module circles, per library crate, by `cargo-cycles` (crates.io, pinned below). It parses each
#     file with `syn`, draws an edge from module `a` to module `b` for each `use crate::b::...` in
#     `a` and for each `mod b;` declared in `a`, and reports the circles it finds in that graph.
#     Test code is left out first (see "What counts as an import" below).
#  2. Crate layers, from `cargo metadata`: each workspace crate may depend only on workspace crates
#     of a lower layer (LAYERS below). Dev-dependencies are exempt: a crate's tests may use anything.
#
# Usage: scripts/module-cycles.sh          (exit 0: clean; 1: a circle or a layer broken; 2: setup)
#        scripts/module-cycles.sh --self-test   (the check finds the circles of a fixture: exit 0)
#
# The first run installs cargo-cycles into ${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube/ (a few
# minutes of compiling); later runs reuse it and take about a second.

set -euo pipefail

# --- The tool ---------------------------------------------------------------------------------------

# Pinned: a newer release may draw its graph differently, and CI must not change verdict on its own.
# (cargo-modules was the other candidate: its `dependencies --acyclic` looks for circles in a graph
# of items and their signatures, not of module imports, and it takes far longer to build.)
readonly CYCLES_VERSION="0.2.0"
readonly CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/ferrokube"
readonly TOOL_ROOT="$CACHE_ROOT/cargo-cycles-$CYCLES_VERSION"
readonly TOOL="$TOOL_ROOT/bin/cargo-cycles"

# --- The layers -------------------------------------------------------------------------------------

# Lowest first. A crate may depend on crates of lower lines only, never on its own line or above.
# Names not (yet) in the workspace are skipped, so the list can name crates before they exist.
# A workspace crate missing from the list fails the check: a new crate needs a place first.
readonly LAYERS=(
    "ferrokube-pipeline ferrokube-derive ferrokube-listen"  # the live view's tracing seam: one macro; #[derive(CustomResource)] (code generation only); what every listening socket shares
    "ferrokube-core"                          # the object model: no I/O
    "ferrokube-workqueue"                     # keys waiting for a worker
    "ferrokube-informer"                      # list + watch into a cache
    "ferrokube-client"                        # the HTTP client of the API server
    "ferrokube-runtime"                       # controllers, leader election, the manager
    "ferrokube-view ferrokube-apiserver"      # the live view; the embedded API server
    "ferrokube-explore ferrokube-testkit"     # deterministic runs: embedded server + clients in memory, one thread;
                                              # the tests' helpers, on the layers (each crate's tests use them)
    "ferrokube"                               # the front crate that re-exports it all
    "ferrokube-examples ferrokube-fuzzing"    # samples, fuzz harnesses (through the front crate, as a user)
)
# Tighter than the layers for some crates: the only workspace crates each may depend on.
# The embedded API server stands beside the controller stack, not on it: it sees only the model.
readonly ONLY_ALLOWED=(
    "ferrokube-apiserver: ferrokube-core ferrokube-pipeline ferrokube-listen"
)

# --- Setup ------------------------------------------------------------------------------------------

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

# --- The check of the check ---------------------------------------------------------------------------
#
# `--self-test`: run this script on a fixture workspace (scripts/module-cycles-fixtures/tangled/)
# whose two circles are spelled the ways the check once missed (a sibling imported as
# `use super::sibling;`, paths in code rather than in `use`, an item named through the crate root's
# re-export) beside imports that are no circle (a child's `use super::Item`, test code), and require
# exactly those two groups. CI runs it before the real check, so a check that goes blind fails.
if [[ "${1:-}" == "--self-test" ]]; then
    fixture="$repo_root/scripts/module-cycles-fixtures/tangled"
    set +e
    report="$(MODULE_CYCLES_WORKSPACE="$fixture" "${BASH_SOURCE[0]}" 2>&1)"
    status=$?
    set -e
    groups="$(grep -E '^    \{' <<< "$report" | sed 's/^ *//' | sort | tr '\n' ' ')"
    expected="{tangled::client, tangled::config} {tangled::http::handlers, tangled::http::verbs} "
    if [[ $status -eq 1 && "$groups" == "$expected" ]]; then
        echo "module-cycles self-test: ok (the fixture's two circles found, nothing else)"
        exit 0
    fi
    echo "module-cycles self-test: FAILED (exit $status; groups found: ${groups:-none}; expected: $expected)" >&2
    echo "$report" >&2
    exit 1
fi

# MODULE_CYCLES_WORKSPACE: check another workspace than ferrokube's (the self-test's fixture). The
# crate layers are ferrokube's own, so only the module circles are checked there.
workspace="${MODULE_CYCLES_WORKSPACE:-$repo_root}"
cd "$workspace"

if ! command -v python3 > /dev/null; then
    echo "module-cycles: python3 is needed (it reads cargo metadata and strips test code)" >&2
    exit 2
fi

if [[ ! -x "$TOOL" ]]; then
    echo "module-cycles: installing cargo-cycles $CYCLES_VERSION into $TOOL_ROOT (once)" >&2
    # --locked: the tool's own Cargo.lock, so its build does not change under us either.
    # No CARGO_TARGET_DIR: cargo then builds in a temporary directory and removes it, instead of
    # leaving a build of the tool in the workspace's target directory.
    # --debug: an unoptimised build compiles faster (CI installs it on every fresh machine), and the
    # check runs in about a second either way (it parses a few hundred files).
    env -u CARGO_TARGET_DIR cargo install --locked --debug \
        --root "$TOOL_ROOT" cargo-cycles --version "$CYCLES_VERSION"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cargo metadata --no-deps --format-version 1 > "$work/metadata.json"

# --- Check 2 first (it is instant): the crate layers ------------------------------------------------

layers_ok=true
if [[ "$workspace" == "$repo_root" ]]; then python3 - "$work/metadata.json" "${#LAYERS[@]}" "${LAYERS[@]}" "${ONLY_ALLOWED[@]}" <<'PY' || layers_ok=false
import json
import sys

metadata_path, layer_count = sys.argv[1], int(sys.argv[2])
layers = sys.argv[3 : 3 + layer_count]
only_allowed_lines = sys.argv[3 + layer_count :]

level = {}  # crate name -> its line in LAYERS
for at, line in enumerate(layers):
    for name in line.split():
        level[name] = at
only_allowed = {}
for line in only_allowed_lines:
    crate, allowed = line.split(":")
    only_allowed[crate.strip()] = set(allowed.split())

with open(metadata_path) as f:
    metadata = json.load(f)
members = set(metadata["workspace_members"])
packages = [p for p in metadata["packages"] if p["id"] in members]
names = {p["name"] for p in packages}

problems = []
for package in sorted(packages, key=lambda p: p["name"]):
    name = package["name"]
    if name not in level:
        problems.append(f"{name}: not in LAYERS (scripts/module-cycles.sh): give it a layer")
        continue
    for dependency in package["dependencies"]:
        # kind: null for [dependencies], "build" for [build-dependencies], "dev" for tests only.
        if dependency["kind"] == "dev" or dependency["name"] not in names:
            continue
        target = dependency["name"]
        if target in only_allowed.get(name, {target}) and level.get(target, 1 << 30) < level[name]:
            continue
        if name in only_allowed and target not in only_allowed[name]:
            why = f"it may depend only on {', '.join(sorted(only_allowed[name]))}"
        elif target not in level:
            why = f"{target} is not in LAYERS"
        else:
            why = f"{target} is in layer {level[target]}, not below {name}'s layer {level[name]}"
        problems.append(f"{name} depends on {target}: {why}")

if problems:
    print("crate layers: BROKEN")
    for problem in problems:
        print(f"  {problem}")
    sys.exit(1)
print(f"crate layers: ok ({len(packages)} workspace crates, dev-dependencies exempt)")
PY
fi

# --- Check 1: module circles, crate by crate ---------------------------------------------------------
#
# What counts as an import. cargo-cycles reads source text, not the compiler's view, so we feed it
# the code as a plain (non-test) build sees it:
#
#  - Test code is removed first: every item under `#[cfg(test)]` (the `mod tests { use super::*; }`
#    blocks, a `#[cfg(test)] mod tests;` file, test-only helpers). A test module may import from
#    anywhere in its crate, siblings included; that is no circle in the code that ships.
#  - Each library crate is checked alone, from a copy of its `src/` under the crate's own name, so a
#    path `crate::x` means that crate (the tool names a module after its directory, and would mix up
#    two crates' `src/`). Binaries and integration tests are other crates and are not copied.
#  - The tool ignores glob imports (`use super::*`) and a one-level `use super::Item` (an item of
#    the parent module): both are how a child module builds on its parent, not a circle. A child
#    that names its parent as `crate::parent::Item` does count, and so does a parent's `mod child;`
#    or `pub use child::Item`: import the item from the module that defines it.
#  - What the tool alone misses is added to each copied file as plain `use` lines (see "The imports
#    the tool does not see" below): `use super::sibling;`, `crate::`/`super::` paths in code rather
#    than in a `use`, and items named through a `pub use` re-export, the root's included.
#    `--self-test` proves on a fixture that such circles are found (CI runs it first).
#
# The tool reports one circle per back edge it meets, so fixing one can reveal another: run again.

tangled=()  # the crates with module circles
while IFS=$'\t' read -r crate_name crate_ident src_dir skip_list; do
    copy="$work/$crate_ident"
    mkdir -p "$copy/$crate_ident"
    # The tool reads the workspace members from ./Cargo.toml: here, just this crate.
    printf '[workspace]\nmembers = ["%s"]\n' "$crate_ident" > "$copy/Cargo.toml"
    python3 - "$src_dir" "$copy/$crate_ident/src" "$skip_list" <<'PY'
import os
import re
import sys

source_root, copy_root, skip_list = sys.argv[1], sys.argv[2], sys.argv[3]
skip = set(filter(None, skip_list.split(",")))  # other targets' roots inside src/ (src/bin/...)


RAW_STRING = re.compile(r'b?r(#*)"')  # r"..", r#".."#, br".."
CHAR = re.compile(r"'(\\.[^'\n]*|[^\\'\n])'")  # 'x', '\n', '\u{..}'; a lifetime ('a) has no closing quote


def code_spans(text):
    """Yield (start, end) of the code between comments and string or char literals."""
    at, start, n = 0, 0, len(text)
    while at < n:
        c = text[at]
        if text.startswith("//", at):
            yield start, at
            at = text.find("\n", at)
            at = n if at < 0 else at
            start = at
        elif text.startswith("/*", at):
            yield start, at
            depth, at = 1, at + 2
            while at < n and depth:  # block comments nest in Rust
                if text.startswith("/*", at):
                    depth, at = depth + 1, at + 2
                elif text.startswith("*/", at):
                    depth, at = depth - 1, at + 2
                else:
                    at += 1
            start = at
        elif (raw := RAW_STRING.match(text, at)) and not (
            at and (text[at - 1].isalnum() or text[at - 1] == "_")
        ):
            yield start, at
            close = '"' + raw.group(1)
            end = text.find(close, at + raw.end())
            at = n if end < 0 else end + len(close)
            start = at
        elif c == '"':
            yield start, at
            at += 1
            while at < n and text[at] != '"':
                at += 2 if text[at] == "\\" else 1
            at += 1
            start = at
        elif c == "'" and (char := CHAR.match(text, at)):
            yield start, at
            at = char.end()
            start = at
        else:
            at += 1
    yield start, n


def test_items(text):
    """The (start, end) of each item under #[cfg(test)], and the `mod x;` names among them."""
    code = [" "] * len(text)  # the text with comments and literals blanked
    for start, end in code_spans(text):
        code[start:end] = text[start:end]
    code = "".join(code)
    items, file_modules = [], []
    for attribute in re.finditer(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]", code):
        at = attribute.end()
        while True:  # past the item's other attributes
            more = re.compile(r"\s*#\s*\[").match(code, at)
            if not more:
                break
            depth, at = 1, more.end()
            while depth:
                depth += {"[": 1, "]": -1}.get(code[at], 0)
                at += 1
        declared = re.compile(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;").match(code, at)
        if declared:
            file_modules.append(declared.group(1))
        depth = 0
        while at < len(code):  # to the item's end: `;` outside braces, or its closing brace
            c = code[at]
            at += 1
            if c == ";" and depth == 0:
                break
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    tail = re.compile(r"\s*;").match(code, at)  # `const X: T = T { .. };`
                    at = tail.end() if tail else at
                    break
        # The item's doc comment and the attributes above `#[cfg(test)]` go with it (a doc
        # comment left without its item does not parse): back, line by line, over such lines.
        start = attribute.start()
        line_start = text.rfind("\n", 0, start) + 1
        if not text[line_start:start].strip():
            start = line_start
            while start:
                above = text.rfind("\n", 0, start - 1) + 1
                if not text[above:start].strip().startswith(("///", "#[")):
                    break
                start = above
        items.append((start, at))
    return items, file_modules


dropped = set()  # files that are test modules (`#[cfg(test)] mod tests;`), and what they own
texts = {}  # relative path -> the text with its test items blanked
for directory, subdirectories, files in sorted(os.walk(source_root)):
    subdirectories.sort()
    for name in sorted(files):
        path = os.path.join(directory, name)
        relative = os.path.relpath(path, source_root)
        if not name.endswith(".rs") or relative in skip or relative.split(os.sep)[0] in skip:
            continue
        if any(relative == d or relative.startswith(d + os.sep) for d in dropped):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        items, file_modules = test_items(text)
        # Blank each test item but keep its newlines: the tool's line numbers stay the real ones.
        for start, end in items:
            text = text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]
        # A `mod x;` in lib.rs or mod.rs lives beside it; in a.rs, it lives in a/.
        stem = os.path.splitext(relative)[0]
        home = os.path.dirname(relative) if name in ("lib.rs", "mod.rs") else stem
        for module in file_modules:
            dropped.add(os.path.join(home, module + ".rs"))
            dropped.add(os.path.join(home, module))
        texts[relative] = text


# --- The imports the tool does not see, spelled so that it sees them --------------------------------
#
# cargo-cycles reads `use` items only, and resolves their paths by text. Three kinds of import got
# past it, which is how `http::handlers` <-> `http::verbs` (apiserver) and `client` <-> `config`
# (client) went unseen:
#  - `use super::sibling;` (a sibling module itself, no item after it): the tool takes it for an
#    item of the parent and drops it;
#  - a path in the code rather than in a `use`: `crate::client::RetryPolicy` as a field's type,
#    `super::handlers::same_secret(..)` in an expression, `crate::x::f` in a macro's arguments;
#  - an item named through a re-export: `use crate::Client` where lib.rs has `pub use
#    client::Client` (the tool gives up on paths to the crate root).
# So each file's copy gets, after its last line, one plain `use crate::<module>::<Item>;` per
# module it really reaches, the module found by following the path through the module tree and
# through `pub use` re-exports. The copied line numbers stay the real ones; the appended lines are
# mapped back to the line of the path they stand for (LINE_MAP below), for the report.
# Still not an edge, as before: a path written with `super::` that ends at an item of an ancestor
# module (`use super::Item`, how a child builds on its parent), and the crate root itself.

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
INLINE_PATH = re.compile(r"(?<![\w$:])(?:crate|super|self)(?:\s*::\s*(?:" + IDENT + r"))+")
USE_ITEM = re.compile(r"(?<![\w$])use\s+([^;]*);")


def module_of(relative):
    """The module path (a tuple) of a file: lib.rs -> (), a/mod.rs and a.rs -> ("a",)."""
    parts = relative[: -len(".rs")].split(os.sep)
    if parts[-1] in ("lib", "mod"):
        parts = parts[:-1]
    return tuple(parts)


def blank_non_code(text):
    """The text with comments and string or char literals blanked (newlines kept)."""
    kept = list(re.sub(r"[^\n]", " ", text))
    for start, end in code_spans(text):
        kept[start:end] = text[start:end]
    return "".join(kept)


def use_paths(tree):
    """The full paths of a use tree's text: `a::{b, c::{d as e, *}}` -> [a,b], [a,c,d], [a,c,*]."""
    tokens = re.findall(IDENT + r"|::|[{},*]", tree)
    at = 0

    def parse(prefix):
        nonlocal at
        paths = []
        while at < len(tokens):
            token = tokens[at]
            at += 1
            if token == "{":
                while at < len(tokens) and tokens[at] != "}":
                    paths += parse(prefix)
                    if at < len(tokens) and tokens[at] == ",":
                        at += 1
                at += 1
                return paths
            if token == "as":  # the rename: skip its name
                at += 1
                continue
            if token in (",", "}"):
                at -= 1
                break
            if token != "::":
                prefix = prefix + [token]
        return paths + [prefix]

    return [p for p in parse([]) if p]


modules = {module_of(r) for r in texts}
texts_code = {r: blank_non_code(t) for r, t in texts.items()}
for relative, code in texts_code.items():  # inline modules: `mod x {`
    for inline in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", code):
        modules.add(module_of(relative) + (inline.group(1),))


def absolute(current, path):
    """(module, rest) of a path written in module `current`: where its first segment points."""
    if path[0] == "crate":
        return (), list(path[1:])
    if path[0] == "self":
        return current, list(path[1:])
    base, rest = current, list(path)
    while rest and rest[0] == "super":
        if not base:
            return None
        base, rest = base[:-1], rest[1:]
    return base, rest


reexports = {}  # module -> {name: (module, rest)} for each `pub use` of an item or module
for relative, code in texts_code.items():
    current = module_of(relative)
    for item in re.finditer(r"\bpub(?:\s*\([^)]*\))?\s+use\s+([^;]*);", code):
        for path in use_paths(item.group(1)):
            if path[-1] == "*":
                continue
            names = path
            if path[0] not in ("crate", "self", "super"):
                names = ["self"] + path  # `pub use child::Item` (2018 paths)
            reexports.setdefault(current, {})[path[-1]] = names


def resolve(current, path, depth=0):
    """The module a path reaches: down the module tree, then through one re-export after another."""
    start = absolute(current, path)
    if start is None or depth > 8:
        return None
    module, rest = start
    while rest and module + (rest[0],) in modules:
        module, rest = module + (rest[0],), rest[1:]
    if rest and rest[0] in reexports.get(module, {}):
        followed = resolve(module, reexports[module][rest[0]], depth + 1)
        if followed is not None:
            return followed
    return module


LINE_MAP = {}  # relative path -> {appended line: the real line it stands for}
for relative, text in texts.items():
    current = module_of(relative)
    code = texts_code[relative]
    found = []  # (line, path)
    for item in USE_ITEM.finditer(code):
        line = code.count("\n", 0, item.start()) + 1
        found += [(line, p) for p in use_paths(item.group(1))]
    spans = [(m.start(), m.end()) for m in USE_ITEM.finditer(code)]
    for inline in INLINE_PATH.finditer(code):
        if any(start <= inline.start() < end for start, end in spans):
            continue
        line = code.count("\n", 0, inline.start()) + 1
        found.append((line, re.split(r"\s*::\s*", inline.group(0))))
    appended, seen = [], set()
    for line, path in found:
        if path[0] not in ("crate", "self", "super"):
            continue
        target = resolve(current, [p for p in path if p != "*"])
        if target is None or target == current or not target:
            continue
        if path[0] == "super" and current[: len(target)] == target:
            continue  # an item of an ancestor, written `super::Item`: how a child builds on its parent
        if target in seen:
            continue
        seen.add(target)
        appended.append((line, target))
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    if appended and not text.endswith("\n"):
        text += "\n"
    for offset, (line, target) in enumerate(appended, start=1):
        text += "use crate::" + "::".join(target) + "::Reached;\n"
        LINE_MAP.setdefault(relative, {})[lines + offset] = line
    target_file = os.path.join(copy_root, relative)
    os.makedirs(os.path.dirname(target_file), exist_ok=True)
    with open(target_file, "w", encoding="utf-8") as f:
        f.write(text)

import json

with open(os.path.join(copy_root, os.pardir, os.pardir, "line-map.json"), "w") as f:
    json.dump(LINE_MAP, f)
PY
    # The command itself: cargo-cycles on the copy, from the copy's root (it reads ./Cargo.toml and
    # names modules by their path from there: `ferrokube_informer::delta_fifo`). It prints each
    # circle with the file and line of every edge; the log lines go to stderr. --dot also writes
    # the whole module graph, for the summary below.
    set +e
    (cd "$copy" && "$TOOL" --dot graph.dot) > "$work/out" 2> "$work/err"
    status=$?
    set -e
    # Back from the copy's paths to the real ones: ./ferrokube_informer/src/x.rs -> informer/src/x.rs.
    # An appended `use` (the imports the tool does not see, above) reports the line it stands for.
    python3 - "$copy/line-map.json" "./$crate_ident/src/" "$work/out" > "$work/out.mapped" <<'PY'
import json
import re
import sys

with open(sys.argv[1]) as f:
    line_map = json.load(f)
prefix = sys.argv[2]


def real_line(match):
    relative, line = match.group(1), match.group(2)
    return f"{prefix}{relative}:{line_map.get(relative, {}).get(line, line)}"


with open(sys.argv[3]) as f:
    report = f.readlines()
for text in report:
    sys.stdout.write(re.sub(re.escape(prefix) + r"(\S+\.rs):(\d+)", real_line, text))
PY
    sed -e "s#\./$crate_ident/src/#${src_dir#"$workspace"/}/#g" -e "s/ ->   / -> /g" "$work/out.mapped" > "$work/report"
    if [[ $status -eq 0 ]]; then
        echo "$crate_name: no module circles"
    elif grep -q '^Cycle ' "$work/report"; then
        tangled+=("$crate_name")
        echo "$crate_name: module circles"
        sed -e '/^$/d' -e 's/^/  /' "$work/report"
        # The circles above are the ones the tool met first, in an order that changes from run to
        # run, and fixing one may show another. The complete picture: the groups of modules that
        # reach each other (strongly connected components of the graph); each must be untangled.
        python3 - "$copy/graph.dot" <<'PY'
import re
import sys

graph = {}
with open(sys.argv[1]) as f:
    for line in f:
        edge = re.fullmatch(r'\s*"([^"]+)" -> "([^"]+)";\s*', line)
        if edge:
            graph.setdefault(edge[1], set()).add(edge[2])
            graph.setdefault(edge[2], set())

# Tarjan's algorithm, iterative (a deep module tree must not hit Python's recursion limit).
index, low, on_stack, stack, groups = {}, {}, set(), [], []
for root in sorted(graph):
    if root in index:
        continue
    work = [(root, iter(sorted(graph[root])))]
    index[root] = low[root] = len(index)
    stack.append(root)
    on_stack.add(root)
    while work:
        node, successors = work[-1]
        advanced = False
        for successor in successors:
            if successor not in index:
                index[successor] = low[successor] = len(index)
                stack.append(successor)
                on_stack.add(successor)
                work.append((successor, iter(sorted(graph[successor]))))
                advanced = True
                break
            if successor in on_stack:
                low[node] = min(low[node], index[successor])
        if advanced:
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[node])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

print(f"  {len(groups)} group(s) of modules that import each other, all told:")
for group in sorted(groups):
    print(f"    {{{', '.join(group)}}}")
PY
    else
        echo "$crate_name: cargo-cycles failed (exit $status):" >&2
        cat "$work/err" >&2
        exit 2
    fi
done < <(python3 - "$work/metadata.json" <<'PY'
import json
import os
import sys

with open(sys.argv[1]) as f:
    metadata = json.load(f)
members = set(metadata["workspace_members"])
for package in sorted(metadata["packages"], key=lambda p: p["name"]):
    if package["id"] not in members:
        continue
    libraries = [t for t in package["targets"] if {"lib", "proc-macro"} & set(t["kind"])]
    if not libraries:
        continue
    source_root = os.path.dirname(libraries[0]["src_path"])
    # Other targets whose root lies in the library's directory (src/main.rs, src/bin/...): skip.
    skip = set()
    for target in package["targets"]:
        relative = os.path.relpath(target["src_path"], source_root)
        if target is not libraries[0] and not relative.startswith(".."):
            skip.add(relative.split(os.sep)[0] if os.sep in relative else relative)
    ident = package["name"].replace("-", "_")
    print(package["name"], ident, source_root, ",".join(sorted(skip)), sep="\t")
PY
)

if [[ ${#tangled[@]} -gt 0 || $layers_ok == false ]]; then
    echo "module-cycles: FAILED (module circles in: ${tangled[*]:-none}; crate layers ok: $layers_ok)"
    exit 1
fi
echo "module-cycles: ok"
