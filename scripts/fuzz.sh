#!/usr/bin/env bash
# Longer fuzz runs of ferrokube's parsers. Everything fuzzing lives in fuzz/: the harnesses are the
# crate ferrokube-fuzzing (fuzz/, a workspace member), whose short run is part of `cargo test`
# (`cargo test -p ferrokube-fuzzing`, fuzz/tests/fuzz/); the cargo-fuzz targets that wrap them are
# the package in fuzz/cargo-fuzz/ (a workspace of its own); the seeds and dictionaries both read
# are fuzz/seeds/ and fuzz/dicts/.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]        coverage-guided, SECONDS per target (default 60)
#   scripts/fuzz.sh --runs N [TARGET...]         coverage-guided, N inputs per target
#   scripts/fuzz.sh --proptest CASES [TARGET...] property-based only, CASES per target, a new seed
#   scripts/fuzz.sh --merge-seeds [TARGET...]    add the inputs of fuzz/corpus that reach new code
#                                                to fuzz/seeds (committed, replayed by cargo test)
#
# Targets: kubeconfig watch_stream list_body gzip_body label_selector field_selector server_requests
# protobuf_body, protobuf_response, cel_rules (all by default). Coverage-guided means cargo-fuzz (libFuzzer) on the stable toolchain with
# `--sanitizer none` (ferrokube has no unsafe code outside one test; a sanitizer needs nightly);
# cargo-fuzz is installed from crates.io if it is missing, and if it cannot be, the script falls
# back to proptest. Each target's working corpus is fuzz/corpus/<target> (not committed), started
# from fuzz/seeds/<target>, with the tokens of fuzz/dicts/<target>.dict where there is one. A crash
# or a hang stops that target with its input in fuzz/artifacts/<target>/; the script goes on with
# the next and exits 1 at the end. Turn every such input into a named test in
# fuzz/tests/fuzz/regressions.rs.
set -euo pipefail
cd "$(dirname "$0")/.."

ALL=(kubeconfig watch_stream list_body gzip_body label_selector field_selector server_requests protobuf_body protobuf_response cel_rules)
mode=time
amount=60
case "${1:-}" in
  --runs) mode=runs; amount=${2:?--runs needs a number}; shift 2 ;;
  --proptest) mode=proptest; amount=${2:?--proptest needs a number}; shift 2 ;;
  --merge-seeds) mode=merge; shift ;;
  -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
  '' ) ;;
  *[!0-9]*) ;;
  *) amount=$1; shift ;;
esac
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${ALL[@]}")
for target in "${targets[@]}"; do
  [[ " ${ALL[*]} " == *" $target "* ]] || { echo "unknown target $target (known: ${ALL[*]})" >&2; exit 2; }
done

proptest() {
  local seed=${FERROKUBE_FUZZ_SEED:-$RANDOM$RANDOM}
  echo "== proptest: $amount cases per target, seed $seed (FERROKUBE_FUZZ_SEED=$seed reproduces)"
  local failed=0
  for target in "${targets[@]}"; do
    echo "-- $target"
    FERROKUBE_FUZZ_CASES=$amount FERROKUBE_FUZZ_SEED=$seed \
      cargo test -q -p ferrokube-fuzzing --test fuzz "short_run::fuzz_$target" -- --exact || failed=1
  done
  exit $failed
}

if [ "$mode" = proptest ]; then
  proptest
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== cargo-fuzz is missing: installing it from crates.io"
  if ! cargo install cargo-fuzz --locked; then
    echo "== cargo-fuzz could not be installed: falling back to proptest" >&2
    [ "$mode" = runs ] || amount=$((amount * 100))
    mode=proptest
    proptest
  fi
fi

# The toolchain cargo-fuzz builds with: stable, no sanitizer (see above).
fuzz=(cargo fuzz)
# Optimized, with debug assertions and overflow checks (cargo-fuzz's default).
build_flags=(--sanitizer none)

echo "== building the fuzz targets ($(cargo --version))"
# `--fuzz-dir`: cargo-fuzz would look for its package in `<the enclosing crate>/fuzz`, and the
# enclosing crate of fuzz/cargo-fuzz/ is the harness crate fuzz/.
"${fuzz[@]}" build --fuzz-dir fuzz/cargo-fuzz "${build_flags[@]}"
# Run the built binaries directly: `cargo fuzz run` would rebuild first, for every target, whenever
# a source file changed meanwhile.
bin="fuzz/cargo-fuzz/target/$(rustc -vV | sed -n 's/^host: //p')/release"

failed=()
for target in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$target" "fuzz/artifacts/$target"
  if [ "$mode" = merge ]; then
    echo "== $target: merging fuzz/corpus/$target into fuzz/seeds/$target"
    # Edges only (no hit counts): the seeds stay few, one input per piece of code reached.
    "$bin/$target" -merge=1 -use_counters=0 "fuzz/seeds/$target" "fuzz/corpus/$target"
    continue
  fi
  case $mode in
    time) limit=(-max_total_time="$amount") ;;
    runs) limit=(-runs="$amount") ;;
  esac
  # A dictionary of the tokens the target's parser looks for, where there is one.
  dict=()
  [ -f "fuzz/dicts/$target.dict" ] && dict=(-dict="fuzz/dicts/$target.dict")
  echo "== $target: ${limit[*]}"
  # -timeout: an input that takes longer is a hang (the server target's own bound is 5 s).
  if ! "$bin/$target" "fuzz/corpus/$target" "fuzz/seeds/$target" "${limit[@]}" "${dict[@]}" \
      -artifact_prefix="fuzz/artifacts/$target/" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
      -print_final_stats=1; then
    failed+=("$target")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "== findings in: ${failed[*]}; inputs in fuzz/artifacts/<target>/ (replay one with" >&2
  echo "   '$bin/<target> <file>'); add each to fuzz/tests/fuzz/regressions.rs" >&2
  exit 1
fi
echo "== no findings"
