//! # The mutant corpus: deliberate bugs in the samples, and the explorer tests that find them
//!
//! Issue 29 asks for proof that the fault explorer (`ferrokube::explore`) finds the bugs the
//! research on controller testing reports in real operators. The proof is a corpus of *mutants*:
//! each sample can be built with one deliberate bug switched on, each bug an instance of a class
//! from the literature, and for each a test (its name contains `explore`) in which the explorer
//! finds it within a fixed run budget and a fixed seed, next to a test in which the correct
//! sample passes the same search with nothing found.
//!
//! This module is the index: one [`MutantEntry`] per mutant, saying where the bug lives, what
//! class it is, where the literature reports the class, which fault and oracle find it, and
//! which test shows it. `cargo test -p ferrokube-examples explore` runs every such test.
//!
//! The references:
//!
//! - **Sieve**: X. Sun et al., "Automatic Reliability Testing for Cluster Management
//!   Controllers", OSDI 2022. Bug classes by what the controller sees: *intermediate state* (a
//!   restart finds a dead incarnation's half-done work), *stale state* (a view older than the
//!   server's), *unobserved state* (a state the controller never sees because events coalesce or
//!   are lost).
//! - **Acto**: J. T. Gu et al., "Acto: Automatic End-to-End Testing for Operation Correctness of
//!   Cloud System Management", SOSP 2023. Sequences of desired states judged by automatic
//!   oracles: the state must match what was asked, and must not depend on the path taken.

/// One mutant of the corpus. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MutantEntry {
    /// The sample (a module of this crate).
    pub sample: &'static str,
    /// How the bug is switched on.
    pub mutant: &'static str,
    /// The bug class, as issue 29 lists it.
    pub class: &'static str,
    /// Where the literature reports the class.
    pub reference: &'static str,
    /// The fault that exposes it, and the oracle that judges the run.
    pub found_by: &'static str,
    /// The test that finds it (`file::test`).
    pub test: &'static str,
}

// ---- bucket sample (src/bucket/mutant.rs; tests/explore_mutants_bucket.rs) ----------------

/// The Bucket sample's mutants ([`crate::bucket::mutant::Mutant`]). Their searches:
/// `deletion` (create a Bucket, delete it: nothing may be left behind, at most one child per
/// Bucket) and `status` (create a Bucket, another operator adds a condition, its namespace gets
/// a region: the end state must be the fault-free run's). The correct controller passes both:
/// `explore_bucket_correct_controller_passes_the_deletion_search` and
/// `explore_bucket_correct_controller_passes_the_status_search`.
pub const BUCKET: &[MutantEntry] = &[
    MutantEntry {
        sample: "bucket",
        mutant: "Mutant::FinalizerRemovedBeforeCleanup",
        class: "the finalizer removed before the outside cleanup",
        reference: "Sieve (OSDI'22): intermediate state",
        found_by: "a crash between the finalizer's removal and the store's delete; nothing left behind",
        test: "explore_mutants_bucket::explore_bucket_finds_the_finalizer_removed_before_the_cleanup",
    },
    MutantEntry {
        sample: "bucket",
        mutant: "Mutant::GeneratedChildName",
        class: "a child with a generated name created twice across a crash",
        reference: "Sieve (OSDI'22): intermediate state",
        found_by: "a crash after the ConfigMap's create, before its name is recorded; invariant: at most one child per Bucket",
        test: "explore_mutants_bucket::explore_bucket_finds_a_generated_child_created_twice",
    },
    MutantEntry {
        sample: "bucket",
        mutant: "Mutant::CleanupOnDeleteEvent",
        class: "a deletion handled only on the delete event",
        reference: "Sieve (OSDI'22): unobserved state",
        found_by: "a crash while the Bucket goes, so no incarnation sees its delete event; nothing left behind",
        test: "explore_mutants_bucket::explore_bucket_finds_a_cleanup_only_on_the_delete_event",
    },
    MutantEntry {
        sample: "bucket",
        mutant: "Mutant::NoOwnerReference",
        class: "a missing owner reference that leaks children",
        reference: "Acto (SOSP'23): end-state oracle, a resource not cleaned up",
        found_by: "no fault (the fault-free run); nothing left behind",
        test: "explore_mutants_bucket::explore_bucket_finds_a_missing_owner_reference",
    },
    MutantEntry {
        sample: "bucket",
        mutant: "Mutant::StatusFromStaleRead",
        class: "status written from a stale read",
        reference: "Sieve (OSDI'22): stale state",
        found_by: "the Bucket watch's event of another writer's status change hidden (or delayed) while the namespace's label makes the controller reconcile; end state",
        test: "explore_mutants_bucket::explore_bucket_finds_a_status_written_from_a_stale_read",
    },
];

// ---- end of the bucket sample's section ---------------------------------------------------
