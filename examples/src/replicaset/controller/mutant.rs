//! Deliberate bugs, for the fault explorer's mutant corpus (`crate::mutants`, issue 29).
//!
//! A fault explorer is only worth trusting if it finds bugs that real controllers have. So the
//! sample carries, behind [`ControllerOptions::mutant`](super::ControllerOptions::mutant), a few
//! one-line departures from its correct behaviour, each a bug class the research on controller
//! testing reports (Sieve, OSDI 2022; Acto, SOSP 2023), and `examples/tests/explore_mutants_rs_dns.rs`
//! shows the explorer finding each one, and nothing on the correct controller.
//!
//! Every site a mutant changes is marked in the code with a comment naming it
//! (`// Mutant::NoExpectations: ...`); with `mutant: None` (the default, and every real use) the
//! controller is exactly the sample.

/// One deliberate bug of the ReplicaSet sample. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// **No expectations.** The sync creates or deletes the difference between `spec.replicas`
    /// and the pods its cache shows, every time, without first waiting to see the pods it
    /// created or deleted last time.
    ///
    /// The pod cache is fed by a watch, so it shows a pod some time after the create that made
    /// it. A sync that runs in between (the ReplicaSet changed, another pod event, a retry)
    /// counts too few pods and creates them again. Upstream's ReplicaSet controller keeps
    /// `ControllerExpectations` for exactly this; the class is Sieve's *stale state* and the
    /// double creation the one in issue 29's opening (pods created twice on a stale cache).
    ///
    /// In this sample the consistency store (`stale_protection`, on by default) guards the same
    /// creates a second way, by resourceVersion, so this mutant only shows with
    /// `stale_protection: false`: the configuration of kube-controller-manager before 1.36, where
    /// expectations are the only guard.
    NoExpectations,
    /// **Acting on one informer while another lags.** The sync counts pods from a second pod
    /// informer of its own (one with a field selector, `status.phase!=Failed`, to leave failed
    /// pods out at the source), while the expectations are still kept by the first one's events
    /// and the consistency store follows the controller's own informers only (and would not wait
    /// on a field-selected one anyway: it cannot tell from an object's metadata whether such an
    /// informer will ever show it).
    ///
    /// So when the first informer has seen the new pods and the second has not, every guard says
    /// "up to date" and the sync acts on the second one's stale view: it creates the pods again.
    /// Controller-runtime has the same trap (a watch with `OnlyMetadata` and a `client.List` of
    /// the full type are two informers); Sieve reports the class as stale state across views.
    UnwatchedPodCache,
    /// **A 409 treated as success.** The status write is a PUT carrying the resourceVersion the
    /// sync read; the server refuses it with 409 Conflict when the ReplicaSet changed meanwhile.
    /// The mutant takes the refusal for a write that happened: it counts the sync as done, so the
    /// key is not retried, and the status stays as it was until something else changes the
    /// ReplicaSet or its pods, possibly never. Acto reports operators whose status went stale by
    /// mishandled write errors; swallowing a conflict is the commonest form.
    ConflictAsSuccess,
}
