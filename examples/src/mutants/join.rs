//! The mutants of the colourer, a controller that joins two kinds (it labels each Pod with the
//! colour of its Group); the sample and its tests are in `examples/tests/explore_mutants_join.rs`.
//!
//! Its scenario is written the natural way (create a Group and two Pods, recolour the Group,
//! touch the Pods), with no gap tuned to the explorer; every mutant is found under the default
//! budget, and the correct colourer (with and without its counts) is clean under every candidate
//! and twice the default's random plans
//! (`explore_mutant_join_the_correct_controller_stays_clean`).
//!
//! What exposes each: the missing watch, a watch partitioned from the recolour until the touch
//! has settled; the change never propagated, no fault at all (the liveness oracle); the counter
//! after the write, a crash between the two; the unbounded retry, an update that took effect
//! but timed out (every retry is then a 409); last write wins, a failover whose new leader lists
//! from a replica one revision behind and writes its stale copy over the user's touch.

use super::Entry;

/// This section of the corpus.
pub const ENTRIES: [Entry; 5] = [
    Entry {
        name: "join-missing-watch",
        sample: "colourer (join)",
        knob: "Mutant::MissingWatch (no reconcile_all_on::<Group>)",
        class: "a missing watch in a join",
        reference: "Sieve (OSDI'22): unobserved state; issue 46",
        oracle: "liveness",
        test: "explore_mutants_join::explore_mutant_join_missing_watch_is_found_under_the_default_budget",
    },
    Entry {
        name: "join-never-propagates",
        sample: "colourer (join)",
        knob: "Mutant::NeverPropagates",
        class: "a field change the controller never propagates",
        reference: "Acto (SOSP'23): a desired state never reached",
        oracle: "liveness",
        test: "explore_mutants_join::explore_mutant_join_a_change_never_propagated_is_found",
    },
    Entry {
        name: "join-counter-after-write",
        sample: "colourer (join)",
        knob: "Mutant::CounterAfterWrite",
        class: "an intermediate state left by a crash (counter bumped after the write)",
        reference: "Sieve (OSDI'22): intermediate state; issue 46",
        oracle: "liveness",
        test: "explore_mutants_join::explore_mutant_counter_after_write_across_a_crash_is_found",
    },
    Entry {
        name: "join-unbounded-retry",
        sample: "colourer (join)",
        knob: "Mutant::UnboundedRetry",
        class: "an unbounded retry",
        reference: "Acto (SOSP'23): the controller never reaches a fixed point",
        oracle: "fixed point",
        test: "explore_mutants_join::explore_mutant_unbounded_retry_is_found",
    },
    Entry {
        name: "join-last-write-wins",
        sample: "colourer (join)",
        knob: "Mutant::LastWriteWins",
        class: "a stale read after failover (a full update from a lagging cache, resourceVersion cleared)",
        reference: "Sieve (OSDI'22): stale state (time travel)",
        oracle: "end state",
        test: "explore_mutants_join::explore_mutant_stale_read_after_failover_is_found",
    },
];
