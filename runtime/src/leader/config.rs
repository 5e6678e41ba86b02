//! The elector's settings, their defaults (client-go's), the rules they must obey, and the builder
//! that checks them.
//!
//! Three durations drive everything, and they must nest:
//!
//! ```text
//!   0 ─── retry_period·1.2 ─── renew_deadline ─────── lease_duration ──▶ time since the last renewal
//!         a renewal that       the leader gives up     a follower that saw no change of the
//!         failed is retried    (and its write gate     record for this long (on its own clock)
//!         after retry_period   closes) here            may take the lease
//! ```
//!
//! `lease_duration > renew_deadline > retry_period × 1.2 > 0`, exactly client-go's checks, in its
//! order. The gap between `renew_deadline` and `lease_duration` is the safety margin: it absorbs a
//! write that passed the gate just before it closed and is still on its way, and clocks that run at
//! slightly different rates on different machines (see the [module docs](super)).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::callbacks::Callbacks;
use super::leadership::Lost;
use super::metrics::LeaderMetrics;
use ferrokube_client::Client;

/// Default [`LeaderElectorBuilder::lease_duration`]: 15 s (client-go's core components).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// Default [`LeaderElectorBuilder::renew_deadline`]: 10 s (client-go's core components).
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// Default [`LeaderElectorBuilder::retry_period`]: 2 s (client-go's core components).
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);
/// client-go's `JitterFactor`: a follower waits between `retry_period` and `retry_period × 2.2`
/// between two polls, so that candidates started together do not poll together.
pub const JITTER_FACTOR: f64 = 1.2;
/// The longest duration accepted for any setting (one year): longer ones are surely a mistake,
/// and the bound keeps every deadline computable.
const LONGEST: Duration = Duration::from_secs(365 * 24 * 3600);

/// Why an elector could not be built or run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaderElectionError {
    /// client-go's first check: followers must wait longer than the leader keeps trying.
    #[error(
        "the lease duration ({lease_duration:?}) must be greater than the renew deadline ({renew_deadline:?})"
    )]
    LeaseDurationNotAboveRenewDeadline {
        lease_duration: Duration,
        renew_deadline: Duration,
    },
    /// client-go's second check: the leader must have time for more than one jittered retry.
    #[error(
        "the renew deadline ({renew_deadline:?}) must be greater than the retry period ({retry_period:?}) × {JITTER_FACTOR}"
    )]
    RenewDeadlineNotAboveRetryPeriod {
        renew_deadline: Duration,
        retry_period: Duration,
    },
    /// A duration that is zero (or absurdly long: more than a year).
    #[error("the {what} must be greater than zero and at most a year, not {value:?}")]
    BadDuration { what: &'static str, value: Duration },
    /// The namespace or name of the Lease cannot be one (empty, or not a URL path segment).
    #[error("{value:?} is not a valid lease {what}")]
    BadLeaseName { what: &'static str, value: String },
    /// The identity is empty: it would look like "no holder" in the Lease.
    #[error("the identity of a candidate must not be empty")]
    EmptyIdentity,
    /// [`LeaderElector::run`](super::LeaderElector::run) was called while another call on the same elector was running.
    #[error("this elector is already running")]
    AlreadyRunning,
}

/// The three durations. They must nest as client-go requires ([`Timings::validate`]):
/// `lease_duration > renew_deadline > retry_period × 1.2 > 0`; the gap between the first two is
/// the safety margin of the write gate (see the [module docs](super)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// How long a follower waits, after it last saw the lease record change, before it may take
    /// the lease.
    pub lease_duration: Duration,
    /// How long after the send time of its last successful renewal a leader keeps leading: its
    /// write gate closes then, and it stops.
    pub renew_deadline: Duration,
    /// Between two renewals of a leader, two attempts of a failing renewal, and (jittered) two
    /// polls of a follower.
    pub retry_period: Duration,
}

impl Default for Timings {
    fn default() -> Timings {
        Timings {
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }
}

impl Timings {
    /// client-go's checks, in its order, then a sanity bound of one year on each duration.
    pub fn validate(&self) -> Result<(), LeaderElectionError> {
        if self.lease_duration <= self.renew_deadline {
            return Err(LeaderElectionError::LeaseDurationNotAboveRenewDeadline {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        // In f64 seconds, as client-go multiplies: no overflow for any Duration.
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return Err(LeaderElectionError::RenewDeadlineNotAboveRetryPeriod {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        for (what, value) in [
            ("lease duration", self.lease_duration),
            ("renew deadline", self.renew_deadline),
            ("retry period", self.retry_period),
        ] {
            if value.is_zero() || value > LONGEST {
                return Err(LeaderElectionError::BadDuration { what, value });
            }
        }
        Ok(())
    }

    /// The time limit of one request of the elector (client-go's lease client uses half the renew
    /// deadline), so a hung request is given up while there is time for another.
    pub(crate) fn request_timeout(&self) -> Duration {
        self.renew_deadline / 2
    }
}

/// Everything the running elector needs to know, fixed at build time.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) identity: String,
    pub(crate) timings: Timings,
    pub(crate) release_on_cancel: bool,
    /// Labels of the Lease when this elector creates it.
    pub(crate) labels: BTreeMap<String, String>,
}

impl Settings {
    /// `namespace/name`, for logs and errors.
    pub(crate) fn lease_key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Builds a [`LeaderElector`](super::LeaderElector); every option has client-go's default. See
/// [`LeaderElector::builder`](super::LeaderElector::builder).
#[must_use = "a leader elector builder does nothing until build()"]
pub struct LeaderElectorBuilder {
    client: Client,
    namespace: String,
    name: String,
    identity: Option<String>,
    timings: Timings,
    release_on_cancel: bool,
    metrics: Option<LeaderMetrics>,
    callbacks: Callbacks,
    labels: BTreeMap<String, String>,
}

impl LeaderElectorBuilder {
    pub(crate) fn new(client: Client, namespace: &str, name: &str) -> LeaderElectorBuilder {
        LeaderElectorBuilder {
            client,
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: None,
            timings: Timings::default(),
            release_on_cancel: true,
            metrics: None,
            callbacks: Callbacks::default(),
            labels: BTreeMap::new(),
        }
    }

    /// This candidate's name in the Lease's `holderIdentity`. Must be unique among the candidates.
    /// Default: the host name, `_`, and a random UUID (as Kubernetes' components do), so two
    /// processes on one host, or one process restarted, are different candidates.
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    /// Default 15 s ([`DEFAULT_LEASE_DURATION`]).
    pub fn lease_duration(mut self, duration: Duration) -> Self {
        self.timings.lease_duration = duration;
        self
    }

    /// Default 10 s ([`DEFAULT_RENEW_DEADLINE`]).
    pub fn renew_deadline(mut self, duration: Duration) -> Self {
        self.timings.renew_deadline = duration;
        self
    }

    /// Default 2 s ([`DEFAULT_RETRY_PERIOD`]).
    pub fn retry_period(mut self, duration: Duration) -> Self {
        self.timings.retry_period = duration;
        self
    }

    /// Labels the Lease gets when this elector creates it (so that others can select it, as the
    /// shard assigner selects its ring's member Leases). Default: none.
    pub fn lease_labels(mut self, labels: BTreeMap<String, String>) -> Self {
        self.labels = labels;
        self
    }

    /// All three durations at once.
    pub fn timings(mut self, timings: Timings) -> Self {
        self.timings = timings;
        self
    }

    /// When `run`'s shutdown fires while leading, hand the lease back (write it with no holder,
    /// as client-go's `ReleaseOnCancel` does) so that a follower takes over at once instead of
    /// after the lease duration. Default **true** (client-go's default is false; its users almost
    /// always turn it on). The write gate closes first, and writes still in flight through gated
    /// clients are waited for, so the next leader cannot start while they are on their way.
    pub fn release_on_cancel(mut self, release: bool) -> Self {
        self.release_on_cancel = release;
        self
    }

    /// Reports `leader_election_master_status{name="<lease name>"}` in `metrics` (create them once
    /// per registry with [`LeaderMetrics::register`]). Default: no metrics.
    pub fn metrics(mut self, metrics: &LeaderMetrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// Called each time this candidate starts leading, with a [`Lost`] future that completes when
    /// that leadership ends (the write gate closed); the future `started` returns is spawned on
    /// the runtime (client-go runs `OnStartedLeading` in a goroutine). The closure itself runs on
    /// the elector's task: keep it short.
    pub fn on_started_leading<F, Fut>(mut self, started: F) -> Self
    where
        F: Fn(Lost) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.callbacks.started = Some(Arc::new(move |lost| Box::pin(started(lost))));
        self
    }

    /// Called when this candidate stops leading (lost, or shut down; after the release). Unlike
    /// client-go's, not called when `run` ends without having led. Runs on the elector's task:
    /// keep it short.
    pub fn on_stopped_leading(mut self, stopped: impl Fn() + Send + Sync + 'static) -> Self {
        self.callbacks.stopped = Some(Arc::new(stopped));
        self
    }

    /// Called with the holder's identity each time the observed holder changes to a candidate
    /// other than the one last reported, this one included (as client-go's `OnNewLeader`). A lease
    /// with no holder is not reported (client-go reports `""`). Runs on the elector's task: keep
    /// it short.
    pub fn on_new_leader(mut self, new_leader: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.callbacks.new_leader = Some(Arc::new(new_leader));
        self
    }

    /// Checks the settings (client-go's rules): what [`build`](Self::build) (in `elector.rs`, next
    /// to what it builds) makes the elector from.
    pub(super) fn checked(self) -> Result<Checked, LeaderElectionError> {
        self.timings.validate()?;
        check_lease_name("namespace", &self.namespace)?;
        check_lease_name("name", &self.name)?;
        let identity = match self.identity {
            Some(identity) if identity.is_empty() => {
                return Err(LeaderElectionError::EmptyIdentity);
            }
            Some(identity) => identity,
            None => default_identity(),
        };
        let settings = Settings {
            namespace: self.namespace,
            name: self.name,
            identity,
            timings: self.timings,
            release_on_cancel: self.release_on_cancel,
            labels: self.labels,
        };
        Ok(Checked {
            client: self.client,
            settings,
            metrics: self.metrics,
            callbacks: self.callbacks,
        })
    }
}

/// A builder's settings, checked: everything an elector is made of.
pub(super) struct Checked {
    pub(super) client: Client,
    pub(super) settings: Settings,
    pub(super) metrics: Option<LeaderMetrics>,
    pub(super) callbacks: Callbacks,
}

/// A namespace or name must be one non-empty URL path segment (the server checks the rest).
fn check_lease_name(what: &'static str, value: &str) -> Result<(), LeaderElectionError> {
    let bad = value.is_empty()
        || value == "."
        || value == ".."
        || value.bytes().any(|b| {
            matches!(b, b'/' | b'%' | b'?' | b'#' | b',' | b'=' | b'!')
                || b.is_ascii_control()
                || b.is_ascii_whitespace()
        });
    if bad {
        return Err(LeaderElectionError::BadLeaseName {
            what,
            value: value.to_string(),
        });
    }
    Ok(())
}

/// `<host name>_<random UUID>`.
pub(crate) fn default_identity() -> String {
    format!("{}_{}", host_name(), ferrokube_core::id::uuid_v4())
}

/// The kernel's host name, else `$HOSTNAME`, else `/etc/hostname`, else `localhost`.
fn host_name() -> String {
    let from_file = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|s| s.trim().to_string())
    };
    from_file("/proc/sys/kernel/hostname")
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .or_else(|| from_file("/etc/hostname").filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "localhost".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timings(lease: u64, renew: u64, retry: u64) -> Timings {
        Timings {
            lease_duration: Duration::from_millis(lease),
            renew_deadline: Duration::from_millis(renew),
            retry_period: Duration::from_millis(retry),
        }
    }

    #[test]
    fn leader_timings_follow_client_go_rules() {
        assert_eq!(Timings::default().validate(), Ok(()));
        assert_eq!(timings(1000, 600, 200).validate(), Ok(()));
        assert!(matches!(
            timings(10_000, 10_000, 2000).validate(),
            Err(LeaderElectionError::LeaseDurationNotAboveRenewDeadline { .. })
        ));
        // 2 s × 1.2 = 2.4 s: a renew deadline of exactly that is refused, as in client-go.
        assert!(matches!(
            timings(15_000, 2400, 2000).validate(),
            Err(LeaderElectionError::RenewDeadlineNotAboveRetryPeriod { .. })
        ));
        assert_eq!(timings(15_000, 2401, 2000).validate(), Ok(()));
        assert!(matches!(
            timings(15_000, 10_000, 0).validate(),
            Err(LeaderElectionError::BadDuration {
                what: "retry period",
                ..
            })
        ));
        let absurd = Timings {
            lease_duration: Duration::MAX,
            ..Timings::default()
        };
        assert!(matches!(
            absurd.validate(),
            Err(LeaderElectionError::BadDuration { .. })
        ));
        assert_eq!(Timings::default().request_timeout(), Duration::from_secs(5));
    }

    #[test]
    fn leader_default_identity_is_host_and_uuid() {
        let a = default_identity();
        let b = default_identity();
        assert_ne!(a, b, "each candidate is a different one");
        let (host, uuid) = a.rsplit_once('_').expect("host_uuid");
        assert!(!host.is_empty());
        assert_eq!(uuid.len(), 36);
        assert_eq!(uuid.as_bytes()[14], b'4', "version 4: {uuid}");
        assert_eq!(uuid.matches('-').count(), 4);
    }

    #[test]
    fn leader_lease_names_must_be_path_segments() {
        assert!(check_lease_name("name", "kube-controller-manager").is_ok());
        for bad in ["", ".", "..", "a/b", "a b", "a,b", "a=b"] {
            assert!(check_lease_name("name", bad).is_err(), "{bad:?}");
        }
    }
}
