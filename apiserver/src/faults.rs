//! Fault injection: the failures a controller must survive, on demand and reproducible.
//!
//! | fault | what clients see |
//! |---|---|
//! | [`Faults::fail_writes`] | a fraction of creates/updates/patches/deletes answered 500, or 429 with `Retry-After` |
//! | [`Faults::conflict_updates`] | a fraction of updates and patches answered 409 Conflict |
//! | [`Faults::delay_watches`] | every watch event delivered this long after its write |
//! | [`Faults::pause`] | requests wait until [`Faults::resume`] |
//! | `close_watches`, `compact` | on the store ([`crate::Store`]): streams end; old resourceVersions get 410 |
//!
//! Which requests fail is drawn from one random generator seeded by [`Faults::seed`], so a test that
//! sends the same requests in the same order sees the same failures. The same switches are reachable
//! over HTTP at `/ferrokube/faults` (see [`FaultSettings`]).

use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::status::StatusError;

/// How injected write failures answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum WriteFailure {
    /// 500 InternalError.
    InternalError,
    /// 429 TooManyRequests with `Retry-After: seconds`.
    TooManyRequests { retry_after_seconds: u64 },
}

/// The fault switches, as set and reported by `/ferrokube/faults` (all off by default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FaultSettings {
    /// Seed of the generator that picks failing requests (default 0).
    pub seed: u64,
    /// Fraction of writes that fail (default 0).
    pub fail_writes: f64,
    /// How they fail (default 500).
    pub write_failure: WriteFailure,
    /// Fraction of updates and patches answered 409 (default 0).
    pub conflict_updates: f64,
    /// Watch delivery delay in milliseconds (default 0).
    pub watch_delay_ms: u64,
    /// Requests wait while true (default false).
    pub paused: bool,
}

impl Default for FaultSettings {
    fn default() -> FaultSettings {
        FaultSettings {
            seed: 0,
            fail_writes: 0.0,
            write_failure: WriteFailure::InternalError,
            conflict_updates: 0.0,
            watch_delay_ms: 0,
            paused: false,
        }
    }
}

/// See the [module docs](self).
pub struct Faults {
    settings: Mutex<(FaultSettings, StdRng)>,
    paused: watch::Sender<bool>,
}

impl Default for Faults {
    fn default() -> Faults {
        Faults {
            settings: Mutex::new((FaultSettings::default(), StdRng::seed_from_u64(0))),
            paused: watch::Sender::new(false),
        }
    }
}

impl Faults {
    /// Replaces every setting at once (the HTTP endpoint's `PUT`); reseeds the generator.
    pub fn set(&self, settings: FaultSettings) {
        self.paused.send_replace(settings.paused);
        *self.settings.lock() = (settings.clone(), StdRng::seed_from_u64(settings.seed));
    }

    /// The current settings.
    pub fn settings(&self) -> FaultSettings {
        self.settings.lock().0.clone()
    }

    /// Reseeds the generator that picks failing requests.
    pub fn seed(&self, seed: u64) {
        let mut guard = self.settings.lock();
        guard.0.seed = seed;
        guard.1 = StdRng::seed_from_u64(seed);
    }

    /// Fails `fraction` (0–1) of writes with `failure`.
    pub fn fail_writes(&self, fraction: f64, failure: WriteFailure) {
        let mut guard = self.settings.lock();
        guard.0.fail_writes = fraction.clamp(0.0, 1.0);
        guard.0.write_failure = failure;
    }

    /// Answers `fraction` (0–1) of updates and patches with 409 Conflict.
    pub fn conflict_updates(&self, fraction: f64) {
        self.settings.lock().0.conflict_updates = fraction.clamp(0.0, 1.0);
    }

    /// Delays every watch event by `delay` after its write.
    pub fn delay_watches(&self, delay: Duration) {
        self.settings.lock().0.watch_delay_ms = delay.as_millis() as u64;
    }

    /// The current watch delivery delay.
    pub fn watch_delay(&self) -> Duration {
        Duration::from_millis(self.settings.lock().0.watch_delay_ms)
    }

    /// Makes requests wait until [`Faults::resume`].
    pub fn pause(&self) {
        self.settings.lock().0.paused = true;
        self.paused.send_replace(true);
    }

    /// Lets waiting requests through.
    pub fn resume(&self) {
        self.settings.lock().0.paused = false;
        self.paused.send_replace(false);
    }

    /// Waits while the server is paused.
    pub async fn wait_unpaused(&self) {
        let mut rx = self.paused.subscribe();
        // An error means the sender is gone, which cannot happen while `self` lives.
        let _ = rx.wait_for(|paused| !paused).await;
    }

    /// Draws whether this write fails, and how.
    pub fn write_failure(&self) -> Option<StatusError> {
        let mut guard = self.settings.lock();
        let (settings, rng) = &mut *guard;
        if settings.fail_writes <= 0.0 || !rng.random_bool(settings.fail_writes) {
            return None;
        }
        Some(match settings.write_failure {
            WriteFailure::InternalError => StatusError::internal("injected fault"),
            WriteFailure::TooManyRequests {
                retry_after_seconds,
            } => StatusError::too_many_requests(retry_after_seconds),
        })
    }

    /// Draws whether this update is answered with a conflict.
    pub fn update_conflicts(&self) -> bool {
        let mut guard = self.settings.lock();
        let (settings, rng) = &mut *guard;
        settings.conflict_updates > 0.0 && rng.random_bool(settings.conflict_updates)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(faults: &Faults) -> Vec<bool> {
        (0..200).map(|_| faults.write_failure().is_some()).collect()
    }

    #[test]
    fn the_same_seed_fails_the_same_requests() {
        let faults = Faults::default();
        faults.fail_writes(0.1, WriteFailure::InternalError);
        faults.seed(7);
        let first = draws(&faults);
        faults.seed(7);
        assert_eq!(first, draws(&faults));
        let failed = first.iter().filter(|f| **f).count();
        assert!((5..=40).contains(&failed), "{failed} of 200 at 10%");
    }

    #[test]
    fn too_many_requests_carries_retry_after() {
        let faults = Faults::default();
        faults.fail_writes(
            1.0,
            WriteFailure::TooManyRequests {
                retry_after_seconds: 2,
            },
        );
        let error = faults.write_failure().expect("always fails");
        assert_eq!((error.code, error.retry_after()), (429, Some(2)));
    }
}
