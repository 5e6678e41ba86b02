//! The mutants of the ReplicaSet sample ([`crate::replicaset`]) and the DnsRecord sample
//! ([`crate::dns`]); the tests are in `examples/tests/explore_mutants_rs_dns.rs`.

use super::Entry;

/// This section of the corpus.
pub const ENTRIES: [Entry; 5] = [
    Entry {
        name: "rs-no-expectations",
        sample: "replicaset",
        knob: "ControllerOptions { mutant: Some(Mutant::NoExpectations), stale_protection: false, .. }",
        class: "no expectations, so pods are created twice on a stale cache",
        reference: "Sieve (OSDI'22): stale state; upstream ReplicaSet's ControllerExpectations",
        oracle: "invariant",
        test: "explore_mutants_rs_dns::explore_rs_no_expectations_creates_pods_twice_on_a_stale_cache",
    },
    Entry {
        name: "rs-unwatched-pod-cache",
        sample: "replicaset",
        knob: "ControllerOptions { mutant: Some(Mutant::UnwatchedPodCache), .. }",
        class: "acting on one informer while another lags",
        reference: "Sieve (OSDI'22): stale state",
        oracle: "invariant",
        test: "explore_mutants_rs_dns::explore_rs_unwatched_pod_cache_acts_on_the_lagging_informer",
    },
    Entry {
        name: "rs-conflict-as-success",
        sample: "replicaset",
        knob: "ControllerOptions { mutant: Some(Mutant::ConflictAsSuccess), .. }",
        class: "a 409 treated as success",
        reference: "Acto (SOSP'23): status not reflecting the system's state",
        oracle: "end state",
        test: "explore_mutants_rs_dns::explore_rs_conflict_as_success_leaves_the_status_stale",
    },
    Entry {
        name: "dns-status-timestamp-every-reconcile",
        sample: "dns",
        knob: "DnsController::with_mutant(Some(Mutant::StatusTimestampEveryReconcile))",
        class: "a status timestamp written on every reconcile, so it never settles",
        reference: "Acto (SOSP'23): no fixed point",
        oracle: "fixed point",
        test: "explore_mutants_rs_dns::explore_dns_status_timestamp_every_reconcile_never_settles",
    },
    Entry {
        name: "dns-waits-for-its-own-version",
        sample: "dns",
        knob: "DnsController::with_mutant(Some(Mutant::WaitsForItsOwnVersion))",
        class: "a reconcile that waits forever on a cache that will not catch up",
        reference: "KEP-5647 (kube-controller-manager 1.36 stale controller handling): its named risk",
        oracle: "end state",
        test: "explore_mutants_rs_dns::explore_dns_waiting_for_its_own_version_stops_reconciling",
    },
];
