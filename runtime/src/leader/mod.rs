//! # Leader election on a Lease
//!
//! A controller usually runs as several replicas so that one can take over when another dies, but
//! only one of them may act at a time: two ReplicaSet controllers reconciling the same object would
//! each create the missing pods. Leader election picks that one. The replicas (the *candidates*)
//! agree through one `coordination.k8s.io/v1` Lease object on the API server: whoever is named in
//! its `spec.holderIdentity` leads, and must keep proving it is alive by renewing it. This module
//! is client-go's `tools/leaderelection` with its semantics and defaults, plus a write gate that
//! makes "only the leader writes" hold even when the leader is frozen, and less waiting and fewer
//! requests.
//!
//! ```text
//!   candidate A (leader)                 API server                 candidate B (follower)
//!   ─────────────────────               ────────────               ──────────────────────
//!   PUT lease (rv=41) every 2 s ───▶  Lease "my-controller"  ◀─── GET every 2–4.4 s (jittered)
//!        ▲  holder: A, renewTime …     resourceVersion 42    ───▶ WATCH metadata.name=my-controller
//!        │                                                          "changed at 10:00:02 (my clock)"
//!   Leadership ◀── write gate: open while                          takes the lease if no change for
//!   (is_leader, check, lost)    now < last renewal sent + 10 s     15 s, or at once if released
//!        │
//!   client.with_write_gate(leadership) ──▶ every write of the controller checked right before sending
//! ```
//!
//! ## Time: only local clocks, only durations
//!
//! No candidate ever compares a time written by another machine with its own clock (clocks of two
//! machines can be minutes apart). The times in the Lease are for people to read. What a follower
//! uses is **when, on its own monotonic clock, it last saw the record change**: if it then sees no
//! change for `lease_duration`, the holder has stopped renewing and the lease is free. A leader
//! likewise measures its own deadline from when it *sent* its last successful renewal. Only the
//! rates of the clocks matter (a second must be about a second everywhere), which is what the gap
//! between the two durations below absorbs.
//!
//! ## The durations (client-go's defaults)
//!
//! | setting | default | meaning |
//! |---|---|---|
//! | `lease_duration` | 15 s | a follower takes a lease whose record has not changed for this long |
//! | `renew_deadline` | 10 s | a leader whose renewals have failed for this long (since the last good one was sent) steps down |
//! | `retry_period` | 2 s | between renewals; between polls, jittered by client-go's factor 1.2 (2 to 4.4 s) |
//! | `release_on_cancel` | true | on shutdown while leading, write the Lease with no holder so a follower takes over at once |
//! | identity | `<host name>_<uuid>` | the name written in `holderIdentity` |
//!
//! Checked as client-go checks them: `lease_duration > renew_deadline > retry_period × 1.2 > 0`.
//!
//! ## The state machine
//!
//! ```text
//!   run ──▶ Following ──a write made us holder──▶ Leading ──renewals failed for renew_deadline,──▶ Stopped
//!              │                                     │     or the Lease names someone else
//!              └──────────────── shutdown ───────────┴──── shutdown (release first) ──────────▶ Stopped
//! ```
//!
//! [`LeaderState`] is what [`Leadership`] handles see; the elector's own phases carry more (the
//! observed Lease, its resourceVersion, the send time of the last renewal), with their invariants
//! written next to the fields in `elector.rs`.
//!
//! ## Safety: the write gate
//!
//! client-go tells the leader's code to stop when leadership is lost (a cancelled context), and
//! trusts it to. Code that is already past its check, or a process that was frozen (SIGSTOP, a VM
//! paused, a long GC-like stall) and wakes up after its lease went to someone else, can still
//! write. Here every write a leader-only component makes goes through a gate:
//! [`Client::with_write_gate`](ferrokube_client::Client::with_write_gate)`(leadership.clone())` asks
//! [`Leadership`] right before each POST, PUT, PATCH or DELETE is handed to the connection (after
//! the rate limiter, so a request that queued for long is judged when it leaves), and a refused
//! write fails with [`Error::NotLeader`](ferrokube_client::Error::NotLeader) without sending anything. The
//! gate is
//!
//! ```text
//!   open  ⇔  the elector is Leading  ∧  now < (send time of the last successful renewal) + renew_deadline
//! ```
//!
//! computed at each check from the clock, so it closes on time **even if the elector is frozen
//! with the rest of the process**: the first thing a woken process checks already fails. The
//! elector obeys the same rule for its own writes: a leader that wakes up past its deadline steps
//! down without sending anything, not even a renewal (client-go gives up at the deadline too).
//!
//! *Why the send time.* The server stores the renewal somewhere between its sending and its
//! answer; followers see it, and start their count, no earlier than that. The send time is the
//! earliest the count can have started anywhere, so deadlines measured from it are never late.
//!
//! *Why `renew_deadline` and not `lease_duration`.* A follower takes over no earlier than
//! `lease_duration` after the send time of the leader's last renewal (by the previous paragraph).
//! If the gate stayed open that long, a write admitted at the last instant would still be on the
//! wire when the new leader starts, and a leader clock running slightly slow would keep the gate
//! open past the takeover. Closing at `renew_deadline` leaves `lease_duration − renew_deadline`
//! (5 s by default) for both: a write still in flight when the gate closes, and the difference in
//! clock rates (1/3 with the defaults, far more than real clocks drift).
//!
//! *The residual window, honestly.* The gate is checked, then the request is handed to hyper: if
//! a pooled connection is idle, the bytes leave within microseconds; if a new connection must be
//! opened, its TCP and TLS handshakes come first (bounded by the client's connect timeout). Then
//! the request travels and the server applies it. A write that passed the check just before the
//! gate closed can therefore land after it closed. That is safe as long as it lands within the
//! margin above (5 s by default); nothing in Kubernetes can fence a write that arrives later than
//! that (no server-side token check exists for arbitrary objects), so keep the margin larger than
//! your worst request latency. On a graceful shutdown the margin would be lost (the follower takes
//! over at once), so the elector waits until every write the gate admitted has been answered before
//! it releases the lease; if they are not answered by the deadline, it does not release, and the
//! lease expires normally.
//!
//! ## Faster and leaner than client-go
//!
//! - **A renewal is one PUT.** client-go reads the Lease before each write (GET, then PUT); the
//!   leader here sends its renewal with the resourceVersion of its own last successful write as
//!   precondition. If anyone else wrote the Lease since, the server answers 409, and only then is
//!   it read again (still ours, e.g. a label was edited: renew again; someone else's: step down).
//!   Holding a lease costs 30 requests a minute instead of 60 (defaults).
//! - **Followers watch the Lease** (one object, `fieldSelector=metadata.name=<name>`) besides
//!   polling as client-go does. A released Lease is seen within milliseconds and taken at once
//!   (client-go sees it at its next poll, 2 to 4.4 s later, 3.2 s on average, so a graceful
//!   handover takes a fraction of client-go's), and a renewal is seen when it is written, so the
//!   takeover of a dead leader is scheduled at exactly "last change seen + lease_duration" instead of
//!   at the first poll after that (up to 4.4 s later). The watch is only a shortcut: if it
//!   fails, polling carries on, and the resourceVersion precondition makes every takeover safe
//!   whatever a follower believes.
//!
//! ## Things to know
//!
//! - Give the elector a [`Client`](ferrokube_client::Client) of its own: clones of one client share its rate
//!   limiter (5 QPS by default), and a renewal queued behind a controller's burst can miss its
//!   deadline. Kubernetes' controller-manager does the same.
//! - Do not delete a Lease that is held. Followers that saw it held wait a lease duration before
//!   recreating it (stricter than client-go), but a candidate that starts at that moment creates
//!   it at once, while the old leader's gate is still open.
//! - `run` returns when leadership is lost, as client-go's does: most processes should exit then
//!   (controller-runtime does), or stop their leader-only work and call `run` again.
//! - A leader that loses its lease keeps running whatever it started, unless it listens:
//!   [`Leadership::lost`], the `on_started_leading` callback's future, or a gated client.
//!
//! ## In one screen
//!
//! ```no_run
//! use std::time::Duration;
//! use ferrokube_runtime::leader::{LeaderElector, LeaderMetrics, RunOutcome};
//! use ferrokube_client::{Client, Config};
//!
//! # async fn demo(config: Config, registry: &mut prometheus_client::registry::Registry)
//! #     -> Result<(), Box<dyn std::error::Error>> {
//! let elector = LeaderElector::builder(Client::new(config.clone())?, "kube-system", "my-controller")
//!     .metrics(&LeaderMetrics::register(registry))
//!     .on_new_leader(|leader| tracing::info!(leader, "new leader"))
//!     .build()?;                                         // client-go's durations: 15 s / 10 s / 2 s
//! let leadership = elector.leadership();
//! let writes = Client::new(config)?.with_write_gate(leadership.clone());
//! let controller = tokio::spawn(async move {
//!     leadership.acquired().await?;                      // wait until we lead
//!     tokio::select! {
//!         biased;                                         // the loss first, and repeatably
//!         () = leadership.lost() => {}                    // the gate closed: stop now
//!         () = reconcile_forever(writes) => {}            // every write is gated anyway
//!     }
//!     Ok::<_, ferrokube_runtime::leader::NotLeader>(())
//! });
//! match elector.run(async { let _ = tokio::signal::ctrl_c().await; }).await? {
//!     RunOutcome::Lost(reason) => eprintln!("lost the lease: {reason}"),
//!     outcome => eprintln!("{outcome:?}"),
//! }
//! # drop(controller); Ok(()) }
//! # async fn reconcile_forever(_: Client) {}
//! ```
//!
//! ## Where each concept lives
//!
//! | module | holds | client-go counterpart |
//! |---|---|---|
//! | `config` | [`LeaderElectorBuilder`], [`Timings`], defaults and checks, [`LeaderElectionError`] | `LeaderElectionConfig`, `NewLeaderElector` |
//! | `elector` | [`LeaderElector`]: the campaign, renewals, release; [`RunOutcome`] | `LeaderElector`, `tryAcquireOrRenew` |
//! | `leadership` | [`Leadership`]: state, write gate, `acquired`/`lost`, health | `IsLeader`, `GetLeader`, `HealthzAdaptor` |
//! | `observe` | a follower's knowledge of the Lease and its expiry | `observedRecord`, `observedTime` |
//! | `record` | the record in the Lease's spec: acquire, renew, release | `LeaderElectionRecord`, `LeaseLock` |
//! | `watch` | the follower's watch on the one Lease | (none) |
//! | `metrics` | [`LeaderMetrics`]: `leader_election_master_status` | `leaderMetricsAdapter` |
//! | `callbacks` | the optional notifications | `LeaderCallbacks` |

mod callbacks;
mod config;
mod elector;
mod leadership;
mod metrics;
mod observe;
pub(crate) mod record;
mod watch;

pub use config::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, JITTER_FACTOR,
    LeaderElectionError, LeaderElectorBuilder, Timings,
};
pub use elector::{LeaderElector, LostReason, RunOutcome};
pub use ferrokube_client::write_gate::{NotLeader, NotLeaderReason};
pub use leadership::{LeaderState, Leadership, Lost, Unhealthy};
pub use metrics::LeaderMetrics;
