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
//! **Adaptive window** ([`Stabilization::adaptive`]): a fixed window only absorbs flaps faster
//! than itself. A value that flips every 2 s outlives a 1 s window, and each flip down deletes again
//! (measured in the guide's performance chapter, "Flapping at any rate"). With [`Adaptive`], each
//! key's window becomes `factor ×` the observed interval between its last two changes, at least
//! the base window and at most [`Adaptive::max`]; an interval longer than `max` is not a flap, so
//! a single change after a quiet spell gets the base window (a genuine scale-down is not delayed
//! by the flapping that preceded it long ago).
//!
//! ```text
//!  changes at  t-2P (up)   t-P (down)   t (up)   t+P (down) ──▶ interval P ──▶ window 2P (≤ max)
//!  the last high value ended at t+P; the next one comes at t+2P < t+P+2P: held, no deletes
//! ```
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

/// A window that follows how often a key changes; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adaptive {
    /// The window is this many observed intervals (2: a value that comes back within twice the
    /// interval it has been flipping at is still held).
    pub factor: u32,
    /// The longest window, and the longest interval taken for a flap: a change that comes more
    /// than `max` after the one before it gets the base window.
    pub max: Duration,
}

/// Per-key history of a wanted value, for the scale-down stabilization rule.
#[derive(Debug)]
pub struct Stabilization {
    /// The base window (the whole rule when `adaptive` is `None`).
    window: Duration,
    adaptive: Option<Adaptive>,
    keys: Mutex<HashMap<String, History>>,
}

/// One key's observations.
#[derive(Debug)]
struct History {
    /// Invariant: non-empty, ordered by `since`, with no two neighbours equal in value; the last
    /// entry is the value the key wants now.
    changes: VecDeque<Change>,
    /// When the key last changed (`None` until its first change: the first observation is not one).
    last_change: Option<Instant>,
    /// The time between the key's last two changes (`None` until its second change).
    interval: Option<Duration>,
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
            adaptive: None,
            keys: Mutex::new(HashMap::new()),
        }
    }

    /// The same rule with each key's window following the interval of its changes (`None`: a
    /// fixed window). A zero base window stays off.
    pub fn adaptive(mut self, adaptive: Option<Adaptive>) -> Self {
        self.adaptive = adaptive;
        self
    }

    /// The base window given at construction.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The window for a key whose last two changes were `interval` apart.
    fn window_for(&self, interval: Option<Duration>) -> Duration {
        match (self.adaptive, interval) {
            (Some(adaptive), Some(interval)) if interval <= adaptive.max => self
                .window
                .max(interval.saturating_mul(adaptive.factor).min(adaptive.max)),
            _ => self.window,
        }
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
            keys.insert(
                key.to_string(),
                History {
                    changes: VecDeque::new(),
                    last_change: None,
                    interval: None,
                },
            );
        }
        let Some(history) = keys.get_mut(key) else {
            return nothing_held;
        };
        match history.changes.back() {
            Some(last) if last.value == wanted => {}
            previous => {
                if previous.is_some() {
                    if let Some(before) = history.last_change {
                        history.interval = Some(now.saturating_duration_since(before));
                    }
                    history.last_change = Some(now);
                }
                history.changes.push_back(Change {
                    since: now,
                    value: wanted,
                });
            }
        }
        let window = self.window_for(history.interval);
        let history = &mut history.changes;
        // An entry ended when the next began; it is out of the window once that end is a window
        // or more ago. The last entry has not ended.
        // A window too long for the clock (`Duration::MAX`) ends in the far future, not in a panic.
        let end_of = |since: Instant| crate::deadline::saturating_deadline(since, window);
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

    /// A value flipping every 2 s outlives a 1 s window: each flip down is let through.
    fn flip_every_2s(rule: &Stabilization) -> Vec<Floor> {
        let t0 = Instant::now();
        rule.observe_at("a", 5, t0);
        let mut floors = Vec::new();
        for flip in 0..6u32 {
            let at = t0 + Duration::from_secs(2) * (flip + 1);
            let value = if flip % 2 == 0 { 0 } else { 10 };
            floors.push(rule.observe_at("a", value, at));
            // The recheck the rule asks for, if any, comes before the next flip.
            if let Some(wait) = floors.last().and_then(|floor| floor.recheck_in)
                && wait < Duration::from_secs(2)
            {
                floors.push(rule.observe_at("a", value, at + wait));
            }
        }
        floors
    }

    #[test]
    fn a_fixed_window_lets_slow_flaps_through_and_an_adaptive_one_holds_them() {
        let fixed = flip_every_2s(&Stabilization::new(SECOND));
        let let_through = |floors: &[Floor]| floors.iter().filter(|f| f.floor == 0).count();
        // Fixed: every one of the three flips down reaches 0 one second later.
        assert_eq!(let_through(&fixed), 3);

        let adaptive = Stabilization::new(SECOND).adaptive(Some(Adaptive {
            factor: 2,
            max: Duration::from_secs(10),
        }));
        let floors = flip_every_2s(&adaptive);
        // The first flip down follows a quiet spell (no interval yet): the base window lets it
        // through. From then on the key flips every 2 s, the window is 4 s, and nothing drops.
        assert_eq!(let_through(&floors), 1);
        assert_eq!(floors.last().map(|f| f.floor), Some(10));
    }

    #[test]
    fn an_adaptive_window_is_the_base_after_a_quiet_spell_and_never_above_max() {
        let rule = Stabilization::new(SECOND).adaptive(Some(Adaptive {
            factor: 2,
            max: Duration::from_secs(10),
        }));
        let t0 = Instant::now();
        let at = |seconds: u64| t0 + Duration::from_secs(seconds);
        rule.observe_at("a", 10, at(0));
        rule.observe_at("a", 0, at(6));
        rule.observe_at("a", 10, at(12));
        // Changes 6 s apart: the window would be 12 s, capped at 10 s (the base window would let
        // the 0 through at 19 s, an uncapped one at 30 s).
        assert_eq!(rule.observe_at("a", 0, at(18)).floor, 10);
        assert_eq!(rule.observe_at("a", 0, at(27)).floor, 10);
        assert_eq!(rule.observe_at("a", 0, at(28)).floor, 0);
        // An hour later: a change 1 h after the one before is no flap; the base window.
        rule.observe_at("a", 10, at(3600));
        let single = rule.observe_at("a", 3, at(7200));
        assert_eq!(single.recheck_in, Some(SECOND));
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
