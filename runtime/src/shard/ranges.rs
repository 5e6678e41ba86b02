//! The server-side mode: members select their objects by **hash ranges the API server filters**
//! (`shardSelector`, KEP-5866, kube-apiserver 1.37 behind the `ShardedListAndWatch` gate), so no
//! assigner and no owner labels are needed; with a server that lacks the selector, the label mode
//! of the [module docs](super) runs instead. [`run`] detects which (it asks the server; nothing
//! to configure) and runs the controller the caller builds, once per *epoch*.
//!
//! ```text
//!   member Leases (label shard.ferrokube.dev/ring) ──LIST every retry period──▶ peers, on this
//!        │                                  replica's clock: live, joining, unknown, dead
//!        ▼
//!   (first: settle one retry period, so that members starting together all appear)
//!        ▼
//!   view = live + joining members + me ──(changed)──▶ stop the epoch (reconciles in flight finish)
//!                                           ─▶ publish the view in my Lease (annotation
//!                                              shard.ferrokube.dev/<ring>-adopted = a,b,c)
//!                                           ─▶ fence: wait until no peer that is not dead has
//!                                              adopted a ring giving it any of my ranges
//!                                           ─▶ new epoch: the caller's controller, its informers
//!                                              narrowed to HashRing(view).ranges(me)
//! ```
//!
//! ## Which field is hashed: [`ShardKey`]
//!
//! The server hashes only `metadata.uid` or `metadata.namespace`. A controller with dependents
//! (a ReplicaSet and its Pods) must see an owner and its children on the same member, and the
//! only field they share is the namespace (owner references never cross one), so it shards by
//! [`ShardKey::Namespace`]: whole namespaces move between members, and the shares are as even
//! as the namespaces are (many small namespaces split well, a few big ones do not). A controller
//! without dependents shards by [`ShardKey::Uid`]: objects spread evenly whatever their
//! namespace.
//!
//! ## The handover fence
//!
//! Two members never act on the same object, even while the ring changes and members die. Each
//! member `M` keeps to three rules (the invariant is written again beside the private `Phase` enum):
//!
//! 1. **Shrink before publishing.** `M` stops its epoch (every reconcile in flight finishes, the
//!    informers stop) before it writes a new adoption into its Lease. So while `M` acts, its
//!    Lease names the ring it acts by.
//! 2. **Publish before clearing.** After the write, `M` reads every member Lease with a fresh
//!    LIST (a consistent read, so it sees every write that finished before it).
//! 3. **Clear before acting.** `M` starts an epoch only if, in that read, no peer that is not
//!    dead has adopted a ring in which that peer owns any point `M` owns in its own. A dead peer
//!    (Lease released, or not renewed for a lease duration on `M`'s clock) is ignored: its write
//!    gate shut at its renew deadline, earlier, so it can write nothing.
//!
//! Why this suffices: suppose `M` and `N` act on one point. Each published, then read. Of the two
//! reads, take the later, say `N`'s: it came after `M`'s write too (which came before `M`'s read),
//! and `M`'s Lease still named that ring then (rule 1), so `N` saw `M` claim the point and would not
//! have started. A member that dies mid-handover (after shrinking, before or after publishing)
//! leaves a Lease that claims its old ranges until it is dead; its peers wait for that, and no
//! longer. A new member starts by adopting a ring of everyone it sees, and acts only once the
//! others have adopted a ring that no longer gives them its ranges.
//!
//! Which peers a member puts into the ring it adopts (its *view*) is a matter of speed only: the
//! fence above never asks whether a peer is in my ring, only what the peer claims. So a peer seen
//! for the first time goes into the view at once when its Lease looks fresh (its `renewTime`
//! within a lease duration of my own Lease's, both read in one LIST: *joining*), rather than
//! after it was seen renewing; one that looks stale (a member that died long ago and left its
//! Lease) stays out of it, and its claims still hold until it is dead. Either guess, if wrong,
//! costs at most one more ring change, never an overlap.
//!
//! ## Cold start: settle before the first ring
//!
//! Members started together (a Deployment's pods, the benchmark's four processes) appear within
//! a fraction of a second of each other. A member that adopted a ring the moment its own Lease
//! was written would adopt one of only the members it happened to see, list a large share
//! alone, and then stop and restart its epoch for each member that appears after it (as would
//! they). So a member whose peers have adopted nothing yet *settles* first: it adopts its first
//! ring one retry period after its first read, when every member started with it has a Lease,
//! and all of them adopt the same full ring once. A member joining a ring already in use (some
//! peer has adopted one) does not wait: its peers take it in at their next poll.
//!
//! The price: during a ring change a member acts on nothing from the moment it stops its epoch
//! until its fence clears (at once, by the read right after its own publish, when every peer has
//! adopted the change already; one retry period when they adopt it at their next poll; up to a
//! lease duration when one died), and each epoch relists its share.
//!
//! ## What it does not do
//!
//! - A member's Lease deleted by hand while it acts comes back (its elector recreates it)
//!   without the adoption: for the moment until the member notices (its next poll: it stops
//!   acting and publishes again), peers read it as claiming nothing.
//! - Cluster-scoped objects under [`ShardKey::Namespace`] all hash the empty namespace: one
//!   member holds them all.
//! - Namespaces whose names differ only in their last characters (`team-1` … `team-9`) land
//!   close together on the ring, so mostly on one member: the server's hash is FNV-1a without a
//!   finaliser, and a change in the last bytes barely moves its high bits.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::assigner::{Liveness, Seen, liveness};
use super::marks::RING_LABEL;
use super::member::ShardMember;
use super::ring::HashRing;
use ferrokube_client::api::{ListParams, Patch, PatchParams};
use ferrokube_client::{Api, Client};
use ferrokube_core::shard::{ShardField, ShardSelector};
use ferrokube_core::{ApiResource, Scope};

/// Which field of an object places it on the ring (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardKey {
    /// `metadata.namespace`: an owner and its children (always in its namespace) stay together.
    Namespace,
    /// `metadata.uid`: objects spread evenly; for a controller without dependents.
    Uid,
}

impl ShardKey {
    pub fn field(self) -> ShardField {
        match self {
            ShardKey::Namespace => ShardField::Namespace,
            ShardKey::Uid => ShardField::Uid,
        }
    }
}

/// The members of a ring as one member adopted it, published in its Lease as `a,b,c`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Adoption(BTreeSet<String>);

impl Adoption {
    pub fn new<I, S>(members: I) -> Adoption
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Adoption(members.into_iter().map(Into::into).collect())
    }

    /// Reads the annotation's value (empty names are skipped).
    pub fn parse(text: &str) -> Adoption {
        Adoption::new(
            text.split(',')
                .map(str::trim)
                .filter(|name| !name.is_empty()),
        )
    }

    /// The annotation's value.
    pub fn text(&self) -> String {
        self.0.iter().cloned().collect::<Vec<_>>().join(",")
    }

    pub fn contains(&self, member: &str) -> bool {
        self.0.contains(member)
    }

    /// How many members the ring has.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn ring(&self) -> HashRing {
        HashRing::new(self.0.iter().cloned())
    }

    /// What `member` owns in this ring, over `field`; `None` if it is not in it.
    pub fn ranges(&self, member: &str, field: ShardField) -> Option<ShardSelector> {
        self.ring().ranges(member, field)
    }
}

/// One peer as the last poll saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub liveness: PeerState,
    /// What its Lease says it adopted (`None`: nothing yet, so it acts on nothing).
    pub adopted: Option<Adoption>,
}

/// A peer's liveness, on this member's clock (the assigner's judgement; see `super::assigner`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    /// Renewed within the lease duration: part of the ring, and its claims hold.
    Live,
    /// Not seen renewing yet (first seen less than a lease duration ago), but its Lease's
    /// `renewTime` is within a lease duration of this member's own: part of the ring at once (a
    /// member that just started), and its claims hold.
    Joining,
    /// Not seen renewing yet, and its Lease looks stale (or this member's own Lease was not in
    /// the read): left out of the ring until it renews or is dead; its claims hold.
    Unknown,
    /// Released, or not renewed for a lease duration: its write gate is shut; its claims lapse.
    Dead,
}

/// Every peer (every member but this one) of the ring, from one fresh LIST.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Peers(pub BTreeMap<String, Peer>);

impl Peers {
    /// The ring `me` should adopt: the live and joining peers, and itself.
    pub fn view(&self, me: &str) -> Adoption {
        let members = self
            .0
            .iter()
            .filter(|(_, p)| matches!(p.liveness, PeerState::Live | PeerState::Joining))
            .map(|(name, _)| name.as_str());
        Adoption::new(members.chain([me]))
    }

    /// Whether a peer that is not dead has adopted a ring: the ring is in use, so a member
    /// joining it need not [settle](self#cold-start-settle-before-the-first-ring).
    pub fn ring_in_use(&self) -> bool {
        self.0
            .values()
            .any(|p| p.liveness != PeerState::Dead && p.adopted.is_some())
    }

    /// The peers whose claims keep `me` from acting on `adopted` (rule 3 of the
    /// [fence](self#the-handover-fence)): not dead, and owning in the ring they adopted a point
    /// `me` owns in `adopted`.
    pub fn blockers(&self, me: &str, adopted: &Adoption) -> Vec<String> {
        let Some(mine) = adopted.ranges(me, ShardField::Uid) else {
            return Vec::new();
        };
        self.0
            .iter()
            .filter(|(name, peer)| {
                peer.liveness != PeerState::Dead
                    && peer
                        .adopted
                        .as_ref()
                        .and_then(|theirs| theirs.ranges(name, ShardField::Uid))
                        .is_some_and(|theirs| overlap(&mine, &theirs))
            })
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// Whether two selectors share a point. Both hold sorted, disjoint ranges (as
/// [`HashRing::ranges`] makes them), so one walk along both does.
fn overlap(a: &ShardSelector, b: &ShardSelector) -> bool {
    let (a, b) = (a.ranges(), b.ranges());
    let (mut i, mut j) = (0, 0);
    while let (Some(x), Some(y)) = (a.get(i), b.get(j)) {
        if u128::from(x.start()) < y.end() && u128::from(y.start()) < x.end() {
            return true;
        }
        if x.end() <= y.end() {
            i += 1;
        } else {
            j += 1;
        }
    }
    false
}

/// Judges peers from successive LISTs of the member Leases, on this replica's monotonic clock.
struct Observer {
    me: String,
    lease_duration: Duration,
    /// Per member: its Lease's resourceVersion and when it last changed, as seen from here.
    seen: HashMap<String, Seen>,
}

impl Observer {
    /// What one LIST of the ring's Leases, read at `now`, says of each peer; and the adoption
    /// this member's own Lease shows.
    fn observe(
        &mut self,
        marks: &super::Marks,
        leases: &[Lease],
        now: Instant,
    ) -> (Peers, Option<Adoption>) {
        fn member_of<'a>(marks: &super::Marks, lease: &'a Lease) -> Option<&'a str> {
            lease
                .metadata
                .name
                .as_deref()
                .and_then(|name| marks.member_of_lease(name))
        }
        // My own Lease's renewTime: what a joining peer's is compared with (see `fresh`).
        let my_renewal = leases
            .iter()
            .find(|lease| member_of(marks, lease) == Some(self.me.as_str()))
            .and_then(renew_time);
        let mut peers = BTreeMap::new();
        let mut mine = None;
        for lease in leases {
            let Some(member) = member_of(marks, lease) else {
                continue;
            };
            let adopted = lease
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(marks.adopted_annotation()))
                .map(|text| Adoption::parse(text));
            if member == self.me {
                mine = adopted;
                continue;
            }
            let version = lease.metadata.resource_version.clone();
            let seen = self.seen.entry(member.to_string()).or_insert_with(|| Seen {
                resource_version: version.clone(),
                first_seen: now,
                changed_at: None,
                fence_renewed: None,
            });
            if seen.resource_version != version {
                seen.resource_version = version;
                seen.changed_at = Some(now);
            }
            let holder = lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref());
            let liveness = match liveness(member, Some(holder), seen, now, self.lease_duration) {
                Liveness::Live => PeerState::Live,
                Liveness::Unknown if fresh(renew_time(lease), my_renewal, self.lease_duration) => {
                    PeerState::Joining
                }
                Liveness::Unknown => PeerState::Unknown,
                // The label mode's fence holds no member: nothing of it acts.
                Liveness::Dead | Liveness::Fenced => PeerState::Dead,
            };
            peers.insert(member.to_string(), Peer { liveness, adopted });
        }
        (Peers(peers), mine)
    }
}

/// A Lease's `renewTime`, in nanoseconds since the Unix epoch.
fn renew_time(lease: &Lease) -> Option<i128> {
    lease
        .spec
        .as_ref()
        .and_then(|spec| spec.renew_time.as_ref())
        .map(|time| time.0.as_nanosecond())
}

/// Whether a peer's Lease looks fresh: renewed within `lease` of `mine`. Both times were written
/// by members' own clocks, so this is a guess (clocks may drift apart); it only decides whether
/// the peer is in this member's view, which the fence does not rely on.
fn fresh(theirs: Option<i128>, mine: Option<i128>, lease: Duration) -> bool {
    match (theirs, mine) {
        (Some(theirs), Some(mine)) => {
            (mine - theirs).abs() < i128::try_from(lease.as_nanos()).unwrap_or(i128::MAX)
        }
        _ => false,
    }
}

/// How one epoch's controller selects its objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Narrowing {
    /// The server filters by this selector: give it to every informer (primary and dependents).
    Ranges(ShardSelector),
    /// The server lacks `shardSelector`: shard by labels, with
    /// [`Controller::shard`](crate::controller::Controller::shard).
    Labels,
}

/// One epoch: what the caller's controller selects, and when it must stop. See [`run`].
#[derive(Debug, Clone)]
pub struct Epoch {
    member: ShardMember,
    narrowing: Narrowing,
    /// The ring this epoch acts by (`None` in the label mode).
    adopted: Option<Adoption>,
    stop: watch::Receiver<bool>,
}

impl Epoch {
    /// `base` narrowed to this epoch's share: with [`Narrowing::Ranges`], the selector added (it
    /// replaces one `base` had); with [`Narrowing::Labels`], `base` as it is (the controller's
    /// `shard` narrows it).
    pub fn scope(&self, base: Scope) -> Scope {
        match &self.narrowing {
            Narrowing::Ranges(selector) => base.shard(selector.clone()),
            Narrowing::Labels => base,
        }
    }

    pub fn narrowing(&self) -> &Narrowing {
        &self.narrowing
    }

    /// The members of the ring this epoch acts by; `None` in the label mode (the assigner's ring).
    pub fn adopted(&self) -> Option<&Adoption> {
        self.adopted.as_ref()
    }

    /// `Some(member)` in the label mode: the controller must be built with `.shard(member)`.
    pub fn label_member(&self) -> Option<&ShardMember> {
        match self.narrowing {
            Narrowing::Labels => Some(&self.member),
            Narrowing::Ranges(_) => None,
        }
    }

    /// The member this epoch runs for.
    pub fn member(&self) -> &ShardMember {
        &self.member
    }

    /// The member's client, gated by its membership: give it to the controller.
    pub fn client(&self) -> Client {
        self.member.client()
    }

    /// Completes when this epoch must end: give it to the controller's `run` as its shutdown.
    pub fn stopped(&self) -> impl Future<Output = ()> + Send + use<> {
        let mut stop = self.stop.clone();
        async move {
            let _ = stop.wait_for(|stop| *stop).await;
        }
    }
}

/// An epoch running on its own task.
struct RunningEpoch {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl RunningEpoch {
    fn start<F, Fut>(
        member: &ShardMember,
        narrowing: Narrowing,
        adopted: Option<Adoption>,
        make: &mut F,
    ) -> RunningEpoch
    where
        F: FnMut(Epoch) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (stop, stopped) = watch::channel(false);
        let epoch = Epoch {
            member: member.clone(),
            narrowing,
            adopted,
            stop: stopped,
        };
        RunningEpoch {
            stop,
            task: tokio::spawn(make(epoch)),
        }
    }

    /// Asks the epoch to stop and waits until it has: after this, nothing of it runs.
    async fn stop(mut self) {
        self.stop.send_replace(true);
        if let Err(error) = (&mut self.task).await {
            tracing::warn!(%error, "a shard epoch panicked");
        }
    }
}

/// An epoch dropped without [`RunningEpoch::stop`] (its driver was cancelled) is aborted: nothing
/// of an epoch outlives the member's driver.
impl Drop for RunningEpoch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where a member of the server-side mode stands. Invariant (the fence, in the [module
/// docs](self#the-handover-fence)): in `Acting(a, _)`, this member's Lease names `a`, and a read
/// made after that was written found no peer that was not dead claiming any of its ranges in `a`;
/// in every other phase no epoch runs.
enum Phase {
    /// Just joined: acting on nothing, adopting nothing before this instant (one retry period
    /// after the first read) unless a peer already has, so that members starting together adopt
    /// one full ring (see [cold start](self#cold-start-settle-before-the-first-ring)).
    Settling(Instant),
    /// The adoption could not be written: acting on nothing.
    Idle,
    /// The adoption is published; acting on nothing until no peer blocks it.
    Fencing(Adoption),
    /// Acting on the ranges the adoption gives this member, through the running epoch.
    Acting(Adoption, RunningEpoch),
}

/// Runs `make`'s controller for `member`, sharded, until `shutdown` (or until the membership is
/// lost): in the server-side mode when the server filters `primary` by `shardSelector` (and the
/// member may use it, [`ShardMemberBuilder::server_side`](super::ShardMemberBuilder::server_side)), one
/// epoch per adopted ring (see the [module docs](self)); else one epoch in the label mode, for as
/// long as it runs. Run the membership itself ([`ShardMember::run`]) beside it, as for the label
/// mode, and stop this first.
///
/// `make` builds and runs the controller of one epoch: narrow every informer's scope with
/// [`Epoch::scope`], write with [`Epoch::client`], add `.shard(member)` when
/// [`Epoch::label_member`] says so, and run until [`Epoch::stopped`]:
///
/// ```no_run
/// # use std::sync::Arc;
/// # use ferrokube_runtime::controller::{Action, Controller, from_fn};
/// # use ferrokube_runtime::shard::{ShardMember, ranges::{self, ShardKey}};
/// # use ferrokube_core::{ApiResource, Scope};
/// # use k8s_openapi::api::apps::v1::ReplicaSet;
/// # use k8s_openapi::api::core::v1::Pod;
/// # async fn demo(member: ShardMember) -> Result<(), Box<dyn std::error::Error>> {
/// let reconcile = |_: Arc<ReplicaSet>, _| async { Ok::<_, std::convert::Infallible>(Action::await_change()) };
/// ranges::run(&member, &ApiResource::of::<ReplicaSet>(), ShardKey::Namespace, |epoch| {
///     let scope = epoch.scope(Scope::all());
///     let mut controller = Controller::<ReplicaSet>::new(epoch.client(), scope.clone())
///         .owns::<Pod>(scope);
///     if let Some(member) = epoch.label_member() {
///         controller = controller.shard(member);
///     }
///     async move {
///         let _ = controller.run(from_fn(reconcile), epoch.stopped()).await;
///     }
/// }, async { let _ = tokio::signal::ctrl_c().await; }).await;
/// # Ok(()) }
/// ```
pub async fn run<F, Fut>(
    member: &ShardMember,
    primary: &ApiResource,
    key: ShardKey,
    mut make: F,
    shutdown: impl Future<Output = ()> + Send,
) where
    F: FnMut(Epoch) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut shutdown = std::pin::pin!(shutdown);
    let ring = member.marks().ring().to_string();
    let probe = Api::dynamic(member.base_client(), primary.clone(), None);
    // Asked until answered: a server that cannot be reached now says nothing about the mode.
    let server_side = member.server_side_allowed()
        && loop {
            tokio::select! {
                biased;
                () = &mut shutdown => return,
                supported = probe.supports_shard_selector() => match supported {
                    Ok(supported) => break supported,
                    Err(error) => {
                        tracing::warn!(%ring, %error, "could not ask whether the server filters by shardSelector; asking again");
                        tokio::time::sleep(member.timings().retry_period).await;
                    }
                },
            }
        };
    if !server_side {
        tracing::info!(%ring, member = %member.identity(), allowed = member.server_side_allowed(), "no shardSelector (the server lacks it, or the member may not use it): sharding by labels");
        let epoch = RunningEpoch::start(member, Narrowing::Labels, None, &mut make);
        shutdown.await;
        epoch.stop().await;
        return;
    }
    tracing::info!(%ring, member = %member.identity(), ?key, "the server filters by shardSelector: sharding by hash ranges");
    let membership = member.membership();
    tokio::select! {
        biased;
        () = &mut shutdown => return,
        joined = membership.acquired() => if joined.is_err() { return },
    }
    let mut driver = Driver {
        member,
        key,
        observer: Observer {
            me: member.identity().to_string(),
            lease_duration: member.timings().lease_duration,
            seen: HashMap::new(),
        },
    };
    let mut phase = Phase::Settling(Instant::now() + member.timings().retry_period);
    let mut tick = tokio::time::interval(member.timings().retry_period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            () = membership.lost() => {
                tracing::warn!(%ring, member = %member.identity(), "membership lost: acting on nothing");
                break;
            }
            _ = tick.tick() => {}
        }
        let was_fencing = matches!(phase, Phase::Fencing(_));
        phase = driver.step(phase, &mut make).await;
        if !was_fencing && matches!(phase, Phase::Fencing(_)) {
            // Just published: the fence may be clear already (every peer adopted the same
            // change). The next step's LIST comes after the write, as rule 2 asks, so it need
            // not wait a retry period.
            phase = driver.step(phase, &mut make).await;
        }
    }
    if let Phase::Acting(_, epoch) = phase {
        epoch.stop().await;
    }
}

/// One member's server-side mode: its observer and how each step moves its [`Phase`].
struct Driver<'a> {
    member: &'a ShardMember,
    key: ShardKey,
    observer: Observer,
}

impl Driver<'_> {
    /// One poll: read the Leases, then move the phase on by at most one step.
    async fn step<F, Fut>(&mut self, phase: Phase, make: &mut F) -> Phase
    where
        F: FnMut(Epoch) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let me = self.member.identity().to_string();
        let ring = self.member.marks().ring().to_string();
        let (peers, published) = match self.read().await {
            Ok(read) => read,
            Err(error) => {
                // Acting goes on: the Lease still names the ring, so no peer takes the ranges.
                tracing::debug!(%ring, member = %me, %error, "could not read the member Leases");
                return phase;
            }
        };
        let view = peers.view(&me);
        match phase {
            Phase::Acting(adopted, epoch) => {
                let finished = epoch.task.is_finished();
                if view == adopted && !finished && published.as_ref() == Some(&adopted) {
                    return Phase::Acting(adopted, epoch);
                }
                // Rule 1: stop acting before anything else is published.
                epoch.stop().await;
                tracing::info!(%ring, member = %me, adopted = %adopted.text(), view = %view.text(), "epoch over");
                if view != adopted || published.as_ref() != Some(&adopted) {
                    self.publish(view).await
                } else {
                    Phase::Fencing(adopted)
                }
            }
            Phase::Settling(until) if Instant::now() < until && !peers.ring_in_use() => {
                tracing::debug!(%ring, member = %me, view = %view.text(), "settling: waiting for the members starting with me");
                Phase::Settling(until)
            }
            Phase::Settling(_) | Phase::Idle => self.publish(view).await,
            Phase::Fencing(adopted) if view != adopted => self.publish(view).await,
            Phase::Fencing(adopted) if published.as_ref() != Some(&adopted) => {
                self.publish(adopted).await
            }
            Phase::Fencing(adopted) => {
                // Rule 3: this read came after the adoption was written (rule 2).
                let blockers = peers.blockers(&me, &adopted);
                if !blockers.is_empty() {
                    tracing::debug!(%ring, member = %me, ?blockers, "fence: peers still claim some of my ranges");
                    return Phase::Fencing(adopted);
                }
                match adopted.ranges(&me, self.key.field()) {
                    Some(selector) => {
                        tracing::info!(%ring, member = %me, adopted = %adopted.text(), ranges = selector.ranges().len(), "fence clear: acting on my ranges");
                        let epoch = RunningEpoch::start(
                            self.member,
                            Narrowing::Ranges(selector),
                            Some(adopted.clone()),
                            make,
                        );
                        Phase::Acting(adopted, epoch)
                    }
                    None => Phase::Fencing(adopted),
                }
            }
        }
    }

    /// A fresh LIST of the ring's member Leases (a consistent read), judged.
    async fn read(&mut self) -> Result<(Peers, Option<Adoption>), ferrokube_client::Error> {
        let marks = self.member.marks();
        let api = Api::<Lease>::namespaced(self.member.base_client(), self.member.namespace());
        let params = ListParams::default().labels(&format!("{RING_LABEL}={}", marks.ring()));
        let leases = api.list(&params).await?;
        Ok(self.observer.observe(marks, &leases.items, Instant::now()))
    }

    /// Writes `adopted` into this member's Lease (through the gated client: only a member
    /// publishes); `Fencing` once written, `Idle` if not.
    async fn publish(&self, adopted: Adoption) -> Phase {
        let marks = self.member.marks();
        let api = Api::<Lease>::namespaced(self.member.client(), self.member.namespace());
        let patch =
            json!({"metadata": {"annotations": {marks.adopted_annotation(): adopted.text()}}});
        let name = marks.member_lease(self.member.identity());
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => {
                tracing::info!(ring = %marks.ring(), member = %self.member.identity(), adopted = %adopted.text(), "adopted a ring");
                Phase::Fencing(adopted)
            }
            Err(error) => {
                tracing::warn!(ring = %marks.ring(), member = %self.member.identity(), %error, "could not publish the adopted ring");
                Phase::Idle
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(liveness: PeerState, adopted: Option<&[&str]>) -> Peer {
        Peer {
            liveness,
            adopted: adopted.map(|m| Adoption::new(m.iter().copied())),
        }
    }

    #[test]
    fn shard_selector_adoption_round_trips() {
        let adoption = Adoption::new(["b", "a", "c", "a"]);
        assert_eq!(adoption.text(), "a,b,c");
        assert_eq!(Adoption::parse("c, a,,b"), adoption);
        assert_eq!(Adoption::parse(""), Adoption::default());
    }

    #[test]
    fn shard_selector_view_takes_joining_peers_and_leaves_out_unknown_and_dead_ones() {
        let mut peers = Peers::default();
        peers.0.insert("b".into(), peer(PeerState::Live, None));
        peers
            .0
            .insert("c".into(), peer(PeerState::Dead, Some(&["a", "c"])));
        assert_eq!(peers.view("a"), Adoption::new(["a", "b"]));
        peers.0.insert("d".into(), peer(PeerState::Unknown, None));
        assert_eq!(peers.view("a"), Adoption::new(["a", "b"]));
        peers.0.insert("e".into(), peer(PeerState::Joining, None));
        assert_eq!(peers.view("a"), Adoption::new(["a", "b", "e"]));
        // Nobody alive adopted anything (c's adoption is dead): a newcomer settles.
        assert!(!peers.ring_in_use());
        peers
            .0
            .insert("d".into(), peer(PeerState::Unknown, Some(&["d"])));
        assert!(peers.ring_in_use());
    }

    #[test]
    fn shard_selector_a_peer_is_fresh_within_a_lease_duration_of_me() {
        let lease = Duration::from_secs(6);
        let second = 1_000_000_000_i128;
        let mine = 1_000 * second;
        assert!(fresh(Some(mine - 5 * second), Some(mine), lease));
        assert!(fresh(Some(mine + 5 * second), Some(mine), lease));
        assert!(!fresh(Some(mine - 7 * second), Some(mine), lease));
        assert!(!fresh(None, Some(mine), lease));
        assert!(!fresh(Some(mine), None, lease));
    }

    #[test]
    fn shard_selector_fence_blocks_on_live_claims_only() {
        let two = Adoption::new(["a", "b"]);
        let three = Adoption::new(["a", "b", "c"]);
        // c joins: a and b still claim the ring of two, which gives them all of c's ranges.
        let mut peers = Peers::default();
        peers
            .0
            .insert("a".into(), peer(PeerState::Live, Some(&["a", "b"])));
        peers
            .0
            .insert("b".into(), peer(PeerState::Live, Some(&["a", "b"])));
        assert_eq!(peers.blockers("c", &three), ["a", "b"]);
        // a has adopted the ring of three; b has not yet: b still blocks.
        peers
            .0
            .insert("a".into(), peer(PeerState::Live, Some(&["a", "b", "c"])));
        assert_eq!(peers.blockers("c", &three), ["b"]);
        // b dies mid-handover, before adopting: while it is unknown or live it blocks; dead, not.
        peers
            .0
            .insert("b".into(), peer(PeerState::Unknown, Some(&["a", "b"])));
        assert_eq!(peers.blockers("c", &three), ["b"]);
        peers
            .0
            .insert("b".into(), peer(PeerState::Dead, Some(&["a", "b"])));
        assert!(peers.blockers("c", &three).is_empty());
        // A peer that published nothing claims nothing.
        peers.0.insert("d".into(), peer(PeerState::Live, None));
        assert!(peers.blockers("c", &three).is_empty());
        // Every member on the same ring: nobody blocks anybody.
        let mut same = Peers::default();
        same.0
            .insert("a".into(), peer(PeerState::Live, Some(&["a", "b"])));
        assert!(same.blockers("b", &two).is_empty());
    }

    #[test]
    fn shard_selector_overlap_of_ring_ranges() {
        let ring = HashRing::new(["a", "b", "c"]);
        let a = ring.ranges("a", ShardField::Uid).expect("a");
        let b = ring.ranges("b", ShardField::Uid).expect("b");
        assert!(!overlap(&a, &b));
        assert!(overlap(&a, &a));
        let bigger = HashRing::new(["a", "b"])
            .ranges("a", ShardField::Uid)
            .expect("a");
        assert!(overlap(&a, &bigger));
        let everything = HashRing::new(["c"])
            .ranges("c", ShardField::Uid)
            .expect("c");
        assert!(overlap(&a, &everything) && overlap(&b, &everything));
    }

    /// The fence's promise, over every ring two members may hold while a third joins and one
    /// dies: whatever each has adopted, two members that both pass the fence own disjoint
    /// ranges.
    #[test]
    fn shard_selector_fence_never_lets_two_members_share_a_point() {
        let rings: Vec<Option<Adoption>> = vec![
            None,
            Some(Adoption::new(["a"])),
            Some(Adoption::new(["a", "b"])),
            Some(Adoption::new(["a", "b", "c"])),
            Some(Adoption::new(["a", "c"])),
            Some(Adoption::new(["b", "c"])),
        ];
        let members = ["a", "b", "c"];
        for x in &members {
            for y in &members {
                if x == y {
                    continue;
                }
                for rx in rings.iter().flatten() {
                    for ry in rings.iter().flatten() {
                        let (Some(sx), Some(sy)) =
                            (rx.ranges(x, ShardField::Uid), ry.ranges(y, ShardField::Uid))
                        else {
                            continue;
                        };
                        // Each reads the other's published adoption (the later read must see it).
                        let mut seen_by_x = Peers::default();
                        seen_by_x
                            .0
                            .insert(y.to_string(), peer(PeerState::Live, None));
                        seen_by_x.0.get_mut(*y).expect("y").adopted = Some(ry.clone());
                        let x_clear = seen_by_x.blockers(x, rx).is_empty();
                        if x_clear {
                            assert!(!overlap(&sx, &sy), "{x} by {rx:?} and {y} by {ry:?}");
                        }
                    }
                }
            }
        }
    }
}
