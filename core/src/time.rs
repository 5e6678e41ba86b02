//! The wall clock, read in one place, and the API's way of writing a point in time.
//!
//! Reading the clock is the one impure thing in this crate; everything else here is a function of
//! its arguments ([`rfc3339`]), so it is tested with fixed instants.
//!
//! A deterministic run (`ferrokube-explore`) replaces the clock for its thread with
//! [`set_thread_clock`]: every timestamp the layers write on that thread (`creationTimestamp`, a
//! condition's `lastTransitionTime`, a lease's renew time) then comes from the run's virtual time.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::jiff::Timestamp;

/// A clock that replaces the system's: the time since the Unix epoch.
type Clock = Rc<dyn Fn() -> Duration>;

thread_local! {
    /// This thread's clock, while a [`ThreadClock`] guard lives.
    static CLOCK: RefCell<Option<Clock>> = const { RefCell::new(None) };
}

/// While it lives, [`now`] and its siblings read the clock given to [`set_thread_clock`] on this
/// thread. Dropping it restores the previous clock. Not `Send`: it belongs to its thread.
#[must_use = "the clock holds only while the guard lives"]
pub struct ThreadClock {
    previous: Option<Clock>,
    _not_send: PhantomData<*const ()>,
}

impl std::fmt::Debug for ThreadClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ThreadClock")
    }
}

/// Until the guard is dropped, this thread reads the time from `since_epoch` (the time since
/// the Unix epoch) instead of the system clock.
///
/// ```
/// use std::time::Duration;
/// use ferrokube_core::time;
///
/// let _clock = time::set_thread_clock(|| Duration::from_secs(951_782_400));
/// assert_eq!(time::now_rfc3339(), "2000-02-29T00:00:00Z");
/// ```
pub fn set_thread_clock(since_epoch: impl Fn() -> Duration + 'static) -> ThreadClock {
    let previous = CLOCK.with(|slot| slot.replace(Some(Rc::new(since_epoch))));
    ThreadClock {
        previous,
        _not_send: PhantomData,
    }
}

impl Drop for ThreadClock {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CLOCK.with(|slot| *slot.borrow_mut() = previous);
    }
}

/// Whether this thread reads a clock of [`set_thread_clock`]'s: then its time is a run's
/// virtual time, and the layers that wait (the workqueue's delays) wait on the tokio runtime's
/// clock instead of real time.
pub fn thread_clock_is_set() -> bool {
    CLOCK.with(|slot| slot.borrow().is_some())
}

/// The clock (this thread's, else the system's) as a distance from the Unix epoch: `Ok` after
/// it, `Err` before it.
fn since_epoch() -> Result<Duration, Duration> {
    // Cloned out first: the clock may read other thread-locals, never this one borrowed.
    if let Some(clock) = CLOCK.with(|slot| slot.borrow().clone()) {
        return Ok(clock());
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|before| before.duration())
}

/// The current time as the API's timestamps count it (events, conditions, a Lease's renewals, a
/// pod's readiness), from the system clock (or this thread's, see [`set_thread_clock`]). A clock
/// before 1970 reads as the epoch.
pub fn now() -> Timestamp {
    let since_epoch = since_epoch().unwrap_or_default();
    Timestamp::new(
        i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX),
        i32::try_from(since_epoch.subsec_nanos()).unwrap_or(0),
    )
    .unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The current time as the API server writes it: RFC 3339, seconds, UTC
/// (`2026-11-23T05:04:01Z`). A clock before 1970 reads as the epoch.
pub fn now_rfc3339() -> String {
    rfc3339(since_epoch().map_or(0, |d| d.as_secs()))
}

/// The current time as nanoseconds since the Unix epoch, negative before 1970: for arithmetic
/// on instants (how old an object is).
pub fn unix_nanos() -> i128 {
    match since_epoch() {
        Ok(after) => after.as_nanos() as i128,
        Err(before) => -(before.as_nanos() as i128),
    }
}

/// Formats seconds since the Unix epoch as RFC 3339 in UTC (`1970-01-01T00:00:00Z`).
pub fn rfc3339(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let rem = seconds % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_395_841), "2026-11-23T01:04:01Z");
    }

    #[test]
    fn the_readings_agree() {
        let (before, stamp, nanos) = (now(), now_rfc3339(), unix_nanos());
        assert!(before > Timestamp::UNIX_EPOCH);
        assert!(nanos >= i128::from(before.as_second()) * 1_000_000_000);
        assert_eq!(stamp.len(), "2026-11-23T01:04:01Z".len());
        assert!(stamp.as_str() >= rfc3339(before.as_second() as u64).as_str());
    }
}
