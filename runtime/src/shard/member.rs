//! A member of a ring: one replica, holding a Lease of its own.
//!
//! Membership is a leader election with a single candidate: the member campaigns for the Lease
//! `<ring>-shard-<member>` and, holding it, renews it like a leader. So it inherits everything
//! [`crate::leader`] guarantees, above all the **write gate**: [`ShardMember::membership`] is
//! open only while the member holds its Lease and its last renewal is younger than the renew
//! deadline, and it closes on time even in a process that was frozen. Every write the member's
//! controller makes goes through [`ShardMember::client`], gated by it. The assigner declares a
//! member dead only after seeing its Lease unchanged for the whole lease duration, which is longer
//! than the renew deadline: by then the member's gate has been shut for a while, so nothing the
//! dead (or frozen) member does can land after its objects moved.
//!
//! ```text
//!   join:   run() ─▶ create or take Lease <ring>-shard-<me> ─▶ gate open ─▶ assigner sees it, rebalances
//!   live:   renew every retry period; objects labelled <me> arrive in the member's informers
//!   leave:  shutdown ─▶ controller stops (reconciles in flight finish) ─▶ Lease released (no holder)
//!           ─▶ assigner moves the member's objects at once
//!   die:    no renewal ─▶ gate shut after renew deadline ─▶ assigner moves objects after lease duration
//! ```
//!
//! A member that loses its Lease (frozen past its deadline, or cut off from the server) does not
//! come back by itself: [`ShardMember::run`] returns [`RunOutcome::Lost`], and the process should
//! exit and be restarted (its caches may hold objects that have moved since). This is what
//! client-go's leader election advises for a lost lease too.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::ShardError;
use super::marks::{Marks, RING_LABEL, check_member_name};
use super::metrics::ShardMetrics;
use crate::leader::{LeaderElector, Leadership, RunOutcome, Timings};
use ferrokube_client::Client;
use ferrokube_core::Scope;

/// One replica's membership in a ring; cheap to clone. See the [module docs](self).
#[derive(Clone)]
pub struct ShardMember {
    inner: Arc<MemberInner>,
}

struct MemberInner {
    marks: Marks,
    namespace: String,
    identity: String,
    /// Without a write gate: the elector's own requests, and the base of the gated client.
    client: Client,
    elector: LeaderElector,
    timings: Timings,
    metrics: Option<ShardMetrics>,
    /// Whether [`ranges::run`](super::ranges::run) may use the server's `shardSelector`.
    server_side: bool,
}

impl std::fmt::Debug for ShardMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardMember")
            .field("ring", &self.inner.marks.ring())
            .field("namespace", &self.inner.namespace)
            .field("identity", &self.inner.identity)
            .finish()
    }
}

impl ShardMember {
    /// A member of ring `ring`, whose Leases live in `namespace`.
    pub fn builder(client: Client, namespace: &str, ring: &str) -> ShardMemberBuilder {
        ShardMemberBuilder {
            client,
            namespace: namespace.to_string(),
            ring: ring.to_string(),
            identity: None,
            timings: Timings::default(),
            metrics: None,
            server_side: true,
        }
    }

    /// This member's name: the value of the owner label on its objects.
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// The ring's marks (label names, Lease names).
    pub fn marks(&self) -> &Marks {
        &self.inner.marks
    }

    /// Where the ring's Leases live.
    pub fn namespace(&self) -> &str {
        &self.inner.namespace
    }

    pub fn timings(&self) -> Timings {
        self.inner.timings
    }

    pub fn metrics(&self) -> Option<&ShardMetrics> {
        self.inner.metrics.as_ref()
    }

    /// Whether [`ranges::run`](super::ranges::run) may shard by the server's `shardSelector`
    /// when the server has it (see [`ShardMemberBuilder::server_side`]).
    pub fn server_side_allowed(&self) -> bool {
        self.inner.server_side
    }

    /// The write gate: open while this replica is a member (see the [module docs](self)).
    pub fn membership(&self) -> Leadership {
        self.inner.elector.leadership()
    }

    /// The client, without a gate (for reads, and for the assigner, which has its own gate).
    pub(crate) fn base_client(&self) -> Client {
        self.inner.client.clone()
    }

    /// The client whose writes go through only while this replica is a member: give it to the
    /// controller's reconciler.
    pub fn client(&self) -> Client {
        self.inner.client.with_write_gate(self.membership())
    }

    /// `base` narrowed to this member's objects (its owner label): the scope of every informer of
    /// the member's primary and dependent objects.
    pub fn scope(&self, base: Scope) -> Scope {
        self.inner.marks.scope_of(&self.inner.identity, base)
    }

    /// Labels a new dependent (a pod the controller is about to create) as this member's, so that
    /// it lands in this member's caches and moves with its owner.
    pub fn mark(&self, meta: &mut ObjectMeta) {
        meta.labels.get_or_insert_with(Default::default).insert(
            self.inner.marks.owner_label().to_string(),
            self.inner.identity.clone(),
        );
    }

    /// Holds this member's Lease until `shutdown` completes (then releases it, so the assigner
    /// moves the objects at once) or until it is lost. Stop the controller before completing
    /// `shutdown`, so that nothing is in flight when the objects move.
    pub async fn run(
        &self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<RunOutcome, ShardError> {
        tracing::info!(ring = %self.inner.marks.ring(), member = %self.inner.identity, "joining the ring");
        let outcome = self.inner.elector.run(shutdown).await?;
        tracing::info!(ring = %self.inner.marks.ring(), member = %self.inner.identity, ?outcome, "left the ring");
        Ok(outcome)
    }
}

/// Builds a [`ShardMember`]; see [`ShardMember::builder`].
#[must_use = "a member builder does nothing until build()"]
pub struct ShardMemberBuilder {
    client: Client,
    namespace: String,
    ring: String,
    identity: Option<String>,
    timings: Timings,
    metrics: Option<ShardMetrics>,
    server_side: bool,
}

impl ShardMemberBuilder {
    /// This member's name: lower-case letters, digits, `-` and `.`, at most 63 characters, unique
    /// in the ring. Default: the host name (cleaned up) and a random suffix.
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    /// The membership Lease's timings (and the assigner's). Default: client-go's leader election
    /// defaults, 15 s / 10 s / 2 s.
    pub fn timings(mut self, timings: Timings) -> Self {
        self.timings = timings;
        self
    }

    /// Reports the ring's metrics (see [`ShardMetrics`]). Default: none.
    pub fn metrics(mut self, metrics: &ShardMetrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// Whether to shard by hash ranges the server filters (`shardSelector`) when the server has
    /// them (see [`ranges`](super::ranges)). Default: true. False keeps the label mode whatever
    /// the server has: to compare the two modes on one server, or to keep a ring's members in one
    /// mode while they are upgraded (members of one ring must all shard the same way).
    pub fn server_side(mut self, server_side: bool) -> Self {
        self.server_side = server_side;
        self
    }

    pub fn build(self) -> Result<ShardMember, ShardError> {
        let marks = Marks::new(&self.ring)?;
        let identity = self.identity.unwrap_or_else(default_identity);
        check_member_name(&identity)?;
        let client = self.client.without_write_gate();
        let elector = LeaderElector::builder(
            client.clone(),
            &self.namespace,
            &marks.member_lease(&identity),
        )
        .identity(identity.clone())
        .timings(self.timings)
        .release_on_cancel(true)
        .lease_labels([(RING_LABEL.to_string(), marks.ring().to_string())].into())
        .build()?;
        Ok(ShardMember {
            inner: Arc::new(MemberInner {
                marks,
                namespace: self.namespace,
                identity,
                client,
                elector,
                timings: self.timings,
                metrics: self.metrics,
                server_side: self.server_side,
            }),
        })
    }
}

/// The host name in lower case with anything but letters, digits, `-` and `.` replaced by `-`,
/// cut to 50 characters, then `-` and 6 random hex digits.
fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .unwrap_or_else(|| "replica".to_string());
    let mut cleaned: String = host
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .take(50)
        .collect();
    cleaned = cleaned
        .trim_matches(|c: char| c == '-' || c == '.')
        .to_string();
    if cleaned.is_empty() {
        cleaned = "replica".to_string();
    }
    let suffix = ferrokube_core::random::range_u64(0, 1 << 24);
    format!("{cleaned}-{suffix:06x}")
}
