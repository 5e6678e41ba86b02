#!/usr/bin/env bash
# The mutant corpus benchmark (issue 46, done-when of item 6): how many runs and how many seconds
# the fault explorer takes to find each mutant of the samples under the default budget, and how
# long the correct samples take to stay clean under twice the default's random plans.
#
# Why a script over the tests: the corpus's searches are its tests (examples/tests/
# explore_mutants_*.rs), each asserting what it finds and that the plan replays word for word;
# the benchmark runs those very searches, so its figures are the tests' figures. Each search
# prints one raw line prefixed `explore-bench ` (ferrokube_examples::mutants::bench); this script
# keeps them and adds what only it knows: the round, the date, the build and the load.
#
#   round 1: join, bucket, rs_dns, mirror (every search)
#   round 2, 3, …: join, bucket, rs_dns (the mutants' searches only; see CLEAN_ROUNDS)
#      └─ each target: `cargo test … explore -- --nocapture --test-threads=1` (one search at a
#         time; a search runs its runs two at a time on this 2-core machine)
#
# The correct samples' searches (every candidate then twice the default's random plans) take
# most of a round's time (the ReplicaSet's about 5 minutes each on a loaded machine), and what
# they must show, no false alarm, is the same in every round: they run in the first CLEAN_ROUNDS
# rounds only (default 1), the mutants' searches in every round. A target whose every search is
# a correct sample's (explore_mirror) runs in those rounds only.
#
# The machine is shared (other people build on it): every line records the 1-minute load average
# read just before its test target started (and the 1, 5 and 15-minute ones, as `uptime` shows). Medians over the rounds are printed at the end as the
# table of docs/src/explorer.md (by src/bin/explore_corpus_table.rs: the script itself needs only
# grep and sed, no JSON tool the project does not build).
#
# Usage: scripts/bench-explore-corpus.sh [ROUNDS] [OUT]
#   ROUNDS        how many rounds (default 3)
#   OUT           the JSON-lines file (default benches/explore/corpus-<today>.jsonl); it is replaced
#   CLEAN_ROUNDS  (environment) rounds that also search the correct samples (default 1)

set -euo pipefail
cd "$(dirname "$0")/.."

rounds="${1:-3}"
today="$(date -u +%F)"
out="${2:-benches/explore/corpus-${today}.jsonl}"
clean_rounds="${CLEAN_ROUNDS:-1}"
targets=(explore_mutants_join explore_mutants_bucket explore_mutants_rs_dns explore_mirror)
# Targets with no mutant: only in the rounds that search the correct samples.
clean_only=(explore_mirror)
# The correct samples' searches, by a part of their test names (libtest's `--skip` matches
# substrings): `…_correct_…`, `…_no_false_alarm`, `…_is_masked_…`, `…_stays_clean`.
clean_tests=(correct no_false_alarm is_masked stays_clean)
export CARGO_INCREMENTAL=0

# Build once, so the rounds time only the searches (and the table's program).
args=()
for target in "${targets[@]}"; do args+=(--test "$target"); done
nice -n 19 cargo test -q -p ferrokube-examples "${args[@]}" --no-run
nice -n 19 cargo build -q -p ferrokube-examples --bin explore_corpus_table

# Lines go to OUT.partial as they come, so a round that fails keeps the rounds before it.
tmp="${out}.partial"
: >"$tmp"
for round in $(seq 1 "$rounds"); do
    for target in "${targets[@]}"; do
        skip=()
        if ((round > clean_rounds)); then
            [[ " ${clean_only[*]} " == *" $target "* ]] && continue
            for name in "${clean_tests[@]}"; do skip+=(--skip "$name"); done
        fi
        load="$(cut -d' ' -f1 /proc/loadavg)"
        loadavg="$(cut -d' ' -f1-3 /proc/loadavg)"
        log="$(mktemp)"
        # A failing test fails the benchmark: a figure of a search that did not do its job is
        # no figure.
        if ! nice -n 19 cargo test -q -p ferrokube-examples --test "$target" explore \
            -- --nocapture --test-threads=1 "${skip[@]}" >"$log" 2>&1; then
            cat "$log" >&2
            rm -f "$log"
            echo "round $round: $target failed; the lines so far are in $tmp" >&2
            exit 1
        fi
        # `-q` prints a dot per finished test, so a line may start mid-line: match, not anchor.
        # Each line is a JSON object (`{"budget":…}`): the fields only the script knows go in
        # front of its first key and after its last.
        source="cargo test -p ferrokube-examples --test $target explore -- --nocapture --test-threads=1 ${skip[*]}"
        grep -o 'explore-bench {.*}' "$log" | sed \
            -e 's/^explore-bench {/{/' \
            -e "s|^{|{\"date\":\"$today\",\"round\":$round,\"build\":\"debug\",\"threads\":2,\"machine\":\"2 cores, shared with other helpers\",\"load1\":$load,\"loadavg\":\"$loadavg\",\"target\":\"$target\",|" \
            -e "s|}\$|,\"source\":\"${source% }\"}|" >>"$tmp"
        rm -f "$log"
        echo "round $round: $target done (load $load)" >&2
    done
done
mv "$tmp" "$out"
echo "wrote $(wc -l <"$out") lines to $out" >&2

# Medians per search: the guide's table.
echo "medians of $rounds rounds (the correct samples: of $clean_rounds):"
nice -n 19 cargo run -q -p ferrokube-examples --bin explore_corpus_table -- "$out"
