//! Stabilization: do not tear down what was wanted a moment ago.
//!
//! A controller that follows every change of a wanted count at once pays twice when the count
//! flaps: `replicas` goes 5 → 0 → 10 → 0 → 10 within a second (a script in a loop, two tools
//! fighting, an autoscaler oscillating), and it deletes five pods, creates ten, deletes ten,
//! creates ten. Creating is cheap to take back; deleting is not (the pod's work, its warm caches,
//! its connections are gone). The Horizontal Pod Autoscaler's answer is the *scale-down
//! stabilization window* (`behavior.scaleDown.stabilizationWindowSeconds`): scale down only to the
//! **highest count wanted during the last window**; scale up at once. This module is that rule for
//! any controller and any key.
//!
//! ```text
//!  reconcile ── observe(key, wanted) ──▶ history of key: (since, value), one entry per change
//!                                          drop entries that ended before now − window
//!            ◀── Floor { floor = max value still in the window, recheck_in } ──┘
//!
//!  create up to `wanted` (at once);  delete only down to `floor`;  if floor > wanted,
//!  reconcile again after `recheck_in` (the oldest higher value leaves the window then)
//! ```
//!
//! A flap inside the window costs no deletes at all: the highest value is still in it. A single
//! scale-down waits one window before its deletes. The history is what the controller *observed*
//! (one entry per reconcile that saw a new value), so a value that came and went between two
//! reconciles is not in it: the rule is conservative only about what was seen.
//!
//! The window is counted on the tokio runtime's clock (`tokio::time::Instant`), like
//! [`expectations`](crate::freshness::expectations): real time in production, virtual time in a
//! deterministic run. A key's history is kept until [`Stabilization::forget`] (call it when the
//! object is deleted) and is at most as long as the number of changes within one window.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// What a key may be lowered to now; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Floor {
    /// The highest value wanted within the window (at least the value just observed).
    pub floor: i64,
    /// When `floor` is above the value just observed: how long until the oldest higher value
    /// leaves the window (observe again then). `None` when nothing is held back.
    pub recheck_in: Option<Duration>,
}

impl Floor {
    /// Whether a decrease to the value just observed is being held back.
    pub fn holds(&self) -> bool {
        self.recheck_in.is_some()
    }
}

/// Per-key history of a wanted value, for the scale-down stabilization rule.
#[derive(Debug)]
pub struct Stabilization {
    window: Duration,
    /// Invariant: every history is non-empty, ordered by `since`, with no two neighbours equal in
    /// value; its last entry is the value the key wants now.
    keys: Mutex<HashMap<String, VecDeque<Change>>>,
}

/// `value` wanted from `since` until the next entry's `since` (or now, for the last entry).
#[derive(Debug, Clone, Copy)]
struct Change {
    since: Instant,
    value: i64,
}

impl Stabilization {
    /// A rule with the given window. `Duration::ZERO` turns it off: every observation returns
    /// its own value as the floor, and nothing is remembered.
    pub fn new(window: Duration) -> Self {
        Stabilization {
            window,
            keys: Mutex::new(HashMap::new()),
        }
    }

    /// The window given at construction.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Records that `key` wants `wanted` now, and returns how far it may be lowered.
    pub fn observe(&self, key: &str, wanted: i64) -> Floor {
        self.observe_at(key, wanted, Instant::now())
    }

    fn observe_at(&self, key: &str, wanted: i64, now: Instant) -> Floor {
        let nothing_held = Floor {
            floor: wanted,
            recheck_in: None,
        };
        if self.window.is_zero() {
            return nothing_held;
        }
        let mut keys = self.keys.lock();
        // The key is copied only the first time it is seen (this runs for every event).
        if !keys.contains_key(key) {
            keys.insert(key.to_string(), VecDeque::new());
        }
        let Some(history) = keys.get_mut(key) else {
            return nothing_held;
        };
        if history.back().is_none_or(|last| last.value != wanted) {
            history.push_back(Change {
                since: now,
                value: wanted,
            });
        }
        // An entry ended when the next began; it is out of the window once that end is a window
        // or more ago. The last entry has not ended.
        // A window too long for the clock (`Duration::MAX`) ends in the far future, not in a panic.
        let end_of = |since: Instant| crate::deadline::saturating_deadline(since, self.window);
        while history.len() > 1 && end_of(history[1].since) <= now {
            history.pop_front();
        }
        let floor = history.iter().map(|change| change.value).max();
        match floor {
            Some(floor) if floor > wanted => {
                // The oldest entry (the one that ended first) leaves the window first; whether the
                // floor drops then depends on the others, so observe again at that moment.
                let recheck_at = history.get(1).map(|next| end_of(next.since));
                Floor {
                    floor,
                    recheck_in: recheck_at.map(|at| at.saturating_duration_since(now)),
                }
            }
            _ => nothing_held,
        }
    }

    /// Drops `key`'s history (its object was deleted).
    pub fn forget(&self, key: &str) {
        self.keys.lock().remove(key);
    }

    /// Number of keys with a history (for tests and diagnostics).
    pub fn len(&self) -> usize {
        self.keys.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_window_of_duration_max_holds_forever_without_panicking() {
        // `since + window` overflows the clock: the window ends in the far future instead.
        let rule = Stabilization::new(Duration::MAX);
        let t0 = Instant::now();
        rule.observe_at("a", 10, t0);
        rule.observe_at("a", 3, t0 + ms(10));
        let later = rule.observe_at("a", 2, t0 + ms(20));
        assert_eq!(later.floor, 10);
        assert!(later.holds());
        assert!(
            later
                .recheck_in
                .is_some_and(|wait| wait >= Duration::from_secs(365 * 24 * 3600))
        );
    }

    #[test]
    fn a_rise_is_never_held_and_a_first_observation_holds_nothing() {
        let rule = Stabilization::new(SECOND);
        let t0 = Instant::now();
        assert_eq!(
            rule.observe_at("a", 5, t0),
            Floor {
                floor: 5,
                recheck_in: None
            }
        );
        let up = rule.observe_at("a", 10, t0 + ms(10));
        assert_eq!(
            up,
            Floor {
                floor: 10,
                recheck_in: None
            }
        );
    }

    #[test]
    fn a_decrease_waits_one_window_after_the_change() {
        let rule = Stabilization::new(SECOND);
        let t0 = Instant::now();
        rule.observe_at("a", 10, t0);
        let down = rule.observe_at("a", 5, t0 + ms(200));
        assert_eq!(down.floor, 10);
        assert_eq!(down.recheck_in, Some(SECOND));
        assert!(down.holds());
        let still = rule.observe_at("a", 5, t0 + ms(700));
        assert_eq!(
            still,
            Floor {
                floor: 10,
                recheck_in: Some(ms(500))
            }
        );
        let after = rule.observe_at("a", 5, t0 + ms(1200));
        assert_eq!(
            after,
            Floor {
                floor: 5,
                recheck_in: None
            }
        );
    }

    #[test]
    fn a_flap_inside_the_window_keeps_the_highest_value() {
        let rule = Stabilization::new(SECOND);
        let t0 = Instant::now();
        rule.observe_at("a", 5, t0);
        let mut at = t0;
        for (value, floor) in [(0, 5), (10, 10), (0, 10), (10, 10), (0, 10)] {
            at += ms(300);
            assert_eq!(rule.observe_at("a", value, at).floor, floor, "at {value}");
        }
        // Settled at 0: held until the last 10 (ended at t0+1500) is a window old.
        let end = t0 + ms(1500);
        let held = rule.observe_at("a", 0, end + ms(100));
        assert_eq!(held.floor, 10);
        let free = rule.observe_at("a", 0, end + SECOND);
        assert_eq!(
            free,
            Floor {
                floor: 0,
                recheck_in: None
            }
        );
    }

    #[test]
    fn keys_are_independent_and_forget_drops_the_history() {
        let rule = Stabilization::new(SECOND);
        let t0 = Instant::now();
        rule.observe_at("a", 10, t0);
        rule.observe_at("b", 1, t0);
        assert_eq!(rule.observe_at("b", 0, t0 + ms(1)).floor, 1);
        assert_eq!(rule.observe_at("a", 10, t0 + ms(1)).floor, 10);
        rule.forget("b");
        assert_eq!(rule.len(), 1);
        assert_eq!(rule.observe_at("b", 0, t0 + ms(2)).floor, 0);
    }

    #[test]
    fn a_zero_window_is_off() {
        let rule = Stabilization::new(Duration::ZERO);
        let t0 = Instant::now();
        rule.observe_at("a", 10, t0);
        assert_eq!(
            rule.observe_at("a", 0, t0),
            Floor {
                floor: 0,
                recheck_in: None
            }
        );
        assert!(rule.is_empty());
    }
}
