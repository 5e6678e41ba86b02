//! The mutants of the Bucket sample ([`crate::bucket`], switched on by
//! [`crate::bucket::mutant::Mutant`]); the tests are in `examples/tests/explore_mutants_bucket.rs`.
//!
//! Their searches: `deletion` (create a Bucket, delete it: nothing may be left behind, at most one
//! child per Bucket) and `status` (create a Bucket, another operator adds a condition, its
//! namespace gets a region: the end state must be the fault-free run's). The correct controller
//! passes both (`explore_bucket_correct_controller_passes_the_deletion_search`,
//! `explore_bucket_correct_controller_passes_the_status_search`).
//!
//! What exposes each: the finalizer-first one, a crash between the finalizer's removal and the
//! store's delete; the generated child name, a crash after the ConfigMap's create, before its
//! name is recorded; the cleanup on the delete event, a crash while the Bucket goes, so no
//! incarnation sees its delete event; the missing owner reference, no fault at all; the status
//! from a stale read, another writer's status change hidden (or delayed) on the Bucket watch
//! while the namespace's label makes the controller reconcile.

use super::Entry;

/// This section of the corpus.
pub const ENTRIES: [Entry; 5] = [
    Entry {
        name: "bucket-finalizer-removed-before-cleanup",
        sample: "bucket",
        knob: "BucketController { mutant: Some(Mutant::FinalizerRemovedBeforeCleanup), .. }",
        class: "the finalizer removed before the outside cleanup",
        reference: "Sieve (OSDI'22): intermediate state",
        oracle: "left behind",
        test: "explore_mutants_bucket::explore_bucket_finds_the_finalizer_removed_before_the_cleanup",
    },
    Entry {
        name: "bucket-generated-child-name",
        sample: "bucket",
        knob: "BucketController { mutant: Some(Mutant::GeneratedChildName), .. }",
        class: "a child with a generated name created twice across a crash",
        reference: "Sieve (OSDI'22): intermediate state",
        oracle: "invariant",
        test: "explore_mutants_bucket::explore_bucket_finds_a_generated_child_created_twice",
    },
    Entry {
        name: "bucket-cleanup-on-delete-event",
        sample: "bucket",
        knob: "BucketController { mutant: Some(Mutant::CleanupOnDeleteEvent), .. }",
        class: "a deletion handled only on the delete event",
        reference: "Sieve (OSDI'22): unobserved state",
        oracle: "left behind",
        test: "explore_mutants_bucket::explore_bucket_finds_a_cleanup_only_on_the_delete_event",
    },
    Entry {
        name: "bucket-no-owner-reference",
        sample: "bucket",
        knob: "BucketController { mutant: Some(Mutant::NoOwnerReference), .. }",
        class: "a missing owner reference that leaks children",
        reference: "Acto (SOSP'23): end-state oracle, a resource not cleaned up",
        oracle: "left behind",
        test: "explore_mutants_bucket::explore_bucket_finds_a_missing_owner_reference",
    },
    Entry {
        name: "bucket-status-from-stale-read",
        sample: "bucket",
        knob: "BucketController { mutant: Some(Mutant::StatusFromStaleRead), .. }",
        class: "status written from a stale read",
        reference: "Sieve (OSDI'22): stale state",
        oracle: "end state",
        test: "explore_mutants_bucket::explore_bucket_finds_a_status_written_from_a_stale_read",
    },
];
