//! Deliberate bugs: five ways to get the Bucket controller wrong, each a class of bug the research
//! on controller testing found in real operators, each a switch on the correct controller
//! ([`BucketController::mutant`](super::controller::BucketController::mutant), default `None`).
//!
//! They exist to prove that the fault explorer (`ferrokube::explore`, issue 29) finds such bugs:
//! `tests/explore_mutants_bucket.rs` runs the explorer on each and asserts what it finds, and runs
//! the correct controller through the same search to show it finds nothing there. The corpus of
//! every sample's mutants is indexed in [`crate::mutants`].
//!
//! Each bug lives at one site in `controller.rs`, marked with a comment naming its variant; the
//! correct path around it is the sample as it is. Four of them do no harm in a run without
//! faults: they need a crash at the wrong moment, an event that never arrives or a cache that
//! lags. The fifth needs an oracle that looks at what is *left* once the Buckets are gone.
//!
//! The two papers the classes come from:
//!
//! - **Sieve** (Sun et al., "Automatic Reliability Testing for Cluster Management Controllers",
//!   OSDI 2022) perturbs what a controller sees: it restarts the controller at chosen points
//!   (*intermediate-state* bugs: the restart finds the half-done work of the dead incarnation),
//!   serves it a stale view (*stale-state* bugs), and hides events from it (*unobserved-state*
//!   bugs). It found 46 bugs in 10 controllers.
//! - **Acto** (Gu et al., "Acto: Automatic End-to-End Testing for Operation Correctness of Cloud
//!   System Management", SOSP 2023) drives operators through sequences of desired states and
//!   judges the outcome with automatic oracles (consistency of the state with what was asked,
//!   differential comparison between runs). It found 56 bugs in 11 operators.

/// One deliberate bug; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// **The finalizer removed before the outside cleanup.** On deletion the controller first
    /// takes its finalizer off the Bucket, then deletes the stored bucket. The server deletes the
    /// object the moment its last finalizer goes, so a crash between the two writes leaves a
    /// stored bucket whose Bucket no longer exists: no event will ever bring its key back, and
    /// the restarted controller has nothing to reconcile. The finalizer's whole point is the
    /// order *cleanup, then release*.
    ///
    /// Class: intermediate state (Sieve, OSDI'22 §2: a crash between two dependent operations;
    /// several of its bugs are cleanup steps ordered after the write that ends the object's
    /// life). Found by: a crash after the finalizer's removal, or before the store's delete,
    /// and the *nothing left behind* oracle.
    FinalizerRemovedBeforeCleanup,

    /// **A child with a generated name created twice across a crash.** The ConfigMap is created
    /// with `metadata.generateName` (the server picks the name) and the name it got is recorded
    /// afterwards, in an annotation on the Bucket; a reconcile that finds no annotation creates
    /// one. A crash after the create and before the annotation is written loses the only record
    /// of the child: the next incarnation creates a second. The fix is the correct path's: a
    /// name derived from the parent (`<name>-bucket`), so that "does it exist?" is a GET, and a
    /// repeated create is an AlreadyExists rather than a twin.
    ///
    /// Class: intermediate state (Sieve, OSDI'22; it is also the shape of the ReplicaSet "extra
    /// pods" reports, where the record of what was created is what got lost). Found by: a crash
    /// after the create, and the invariant *at most one child ConfigMap per Bucket*.
    GeneratedChildName,

    /// **A deletion handled only on the delete event.** No finalizer: the controller deletes the
    /// stored bucket in its [`deleted`](ferrokube::controller::Reconciler::deleted) hook, when
    /// its informer sees the Bucket go. A controller that is down at that moment (crashed,
    /// restarting, being upgraded) comes back to a cache that never held the Bucket, so the hook
    /// never runs and the stored bucket leaks. Edge-triggered cleanup of something outside the
    /// cluster is a bet that no event is ever missed; the finalizer makes the server wait instead.
    ///
    /// Class: unobserved state (Sieve, OSDI'22: a controller that relies on observing a
    /// transient state, here the object's last moment, misses it when the observation is lost).
    /// Found by: a crash before the store's delete, or before the delete event, and the *nothing
    /// left behind* oracle.
    CleanupOnDeleteEvent,

    /// **A missing owner reference that leaks children.** The ConfigMap is created without its
    /// controller owner reference, so the garbage collector does not know it belongs to the
    /// Bucket: it stays after the Bucket is deleted, for ever. (The owned source also stops
    /// mapping its events to the Bucket: an edit of it behind the controller's back goes
    /// unrepaired until something else brings the key back.) Needs no fault: a run that deletes
    /// every Bucket and then looks at what is left finds it.
    ///
    /// Class: resource leak, found by an end-state oracle without perturbation (Acto, SOSP'23:
    /// a state the operator should have cleaned up after the desired state shrank).
    NoOwnerReference,

    /// **Status written from a stale read.** The status is computed from the Bucket as the cache
    /// holds it and written back whole with a JSON merge patch: no resourceVersion, so no
    /// conflict if the object changed since the cache saw it. A merge patch replaces a list
    /// whole, so the conditions written are the *cached* ones plus Ready: a condition another
    /// writer added meanwhile (conditions are shared by every controller that acts on an
    /// object) is silently erased when the controller's cache had not seen it yet, and nothing
    /// ever puts it back. The correct path reads the object fresh, changes only its own fields
    /// and writes with the resourceVersion it read (`update_status`), so a stale cache costs a
    /// retry at most.
    ///
    /// Class: stale state (Sieve, OSDI'22: a write decided on a view older than the server's
    /// overwrites newer state; the "lost update" that optimistic concurrency exists to stop).
    /// Found by: an event of the Bucket's watch hidden or delayed while another source
    /// triggers a reconcile, and the end-state oracle (the condition is missing at the end).
    StatusFromStaleRead,
}

/// The annotation on a Bucket in which the [`Mutant::GeneratedChildName`] controller records the
/// generated name of its ConfigMap.
pub const CHILD_ANNOTATION: &str = "storage.ferrokube.dev/config-map";
