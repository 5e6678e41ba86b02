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
#   round 1: join, bucket, rs_dns, mirror    round 2: the same    round 3: …
#      └─ each target: `cargo test … explore -- --nocapture --test-threads=1` (one search at a
#         time; a search runs its runs two at a time on this 2-core machine)
#
# The machine is shared (other people build on it): every line records the 1-minute load average
# read just before its test target started. Medians over the rounds are printed at the end as the
# table of docs/src/explorer.md.
#
# Usage: scripts/bench-explore-corpus.sh [ROUNDS] [OUT]
#   ROUNDS  how many rounds (default 3)
#   OUT     the JSON-lines file (default benches/explore/corpus-<today>.jsonl); it is replaced

set -euo pipefail
cd "$(dirname "$0")/.."

rounds="${1:-3}"
today="$(date -u +%F)"
out="${2:-benches/explore/corpus-${today}.jsonl}"
targets=(explore_mutants_join explore_mutants_bucket explore_mutants_rs_dns explore_mirror)
export CARGO_INCREMENTAL=0

command -v jq >/dev/null || { echo "jq is needed (apt-get install jq)" >&2; exit 1; }

# Build once, so the rounds time only the searches.
args=()
for target in "${targets[@]}"; do args+=(--test "$target"); done
nice -n 19 cargo test -q -p ferrokube-examples "${args[@]}" --no-run

# Lines go to OUT.partial as they come, so a round that fails keeps the rounds before it.
tmp="${out}.partial"
: >"$tmp"
for round in $(seq 1 "$rounds"); do
    for target in "${targets[@]}"; do
        load="$(cut -d' ' -f1 /proc/loadavg)"
        log="$(mktemp)"
        # A failing test fails the benchmark: a figure of a search that did not do its job is
        # no figure.
        if ! nice -n 19 cargo test -q -p ferrokube-examples --test "$target" explore \
            -- --nocapture --test-threads=1 >"$log" 2>&1; then
            cat "$log" >&2
            rm -f "$log"
            echo "round $round: $target failed; the lines so far are in $tmp" >&2
            exit 1
        fi
        # `-q` prints a dot per finished test, so a line may start mid-line: match, not anchor.
        grep -o 'explore-bench {.*' "$log" | sed 's/^explore-bench //' | jq -c \
            --arg date "$today" --argjson round "$round" --argjson load "$load" \
            --arg target "$target" \
            '{date: $date, round: $round, build: "debug", threads: 2,
              machine: "2 cores, shared with other helpers", load1: $load} + .
             + {source: ("cargo test -p ferrokube-examples --test " + $target
                         + " explore -- --nocapture --test-threads=1")}' >>"$tmp"
        rm -f "$log"
        echo "round $round: $target done (load $load)" >&2
    done
done
mv "$tmp" "$out"
echo "wrote $(wc -l <"$out") lines to $out" >&2

# Medians per search: the guide's table.
echo "| sample | case | violation | runs | seconds (median of $rounds) | plan / budget |"
echo "|---|---|---|---|---|---|"
jq -s -r 'group_by([.sample, .case])[]
    | (sort_by(.seconds) | .[(length / 2 | floor)]) as $median
    | "| \($median.sample) | \($median.case) | \($median.violation) | \($median.runs) | \($median.seconds) | \($median.plan // $median.budget) |"' "$out"
