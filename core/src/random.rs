//! Every random choice of ferrokube, drawn from one place so that a test can make them repeatable.
//!
//! Uids, backoff and retry jitter, a watch's random timeout, a leader's renew jitter: each draws
//! from [`with_rng`] rather than from `rand::rng()` directly. By default that is the thread's
//! random generator, as before. A deterministic run (`ferrokube-explore`) calls
//! [`seed_thread`] first: from then until the returned guard is dropped, every draw **on this
//! thread** comes from one generator seeded with the given seed, so the same seed gives the same
//! uids and the same jitter in the same order.
//!
//! ```
//! use ferrokube_core::random;
//!
//! let first = {
//!     let _seeded = random::seed_thread(7);
//!     (random::unit_f64(), ferrokube_core::id::uuid_v4())
//! };
//! let again = {
//!     let _seeded = random::seed_thread(7);
//!     (random::unit_f64(), ferrokube_core::id::uuid_v4())
//! };
//! assert_eq!(first, again);
//! ```
//!
//! The override is per thread on purpose: a seeded run lives on one thread (a current-thread
//! tokio runtime), and other tests running in parallel on other threads keep their own
//! randomness. A draw made on another thread (a `spawn_blocking` task, a thread of a
//! multi-threaded runtime) is not seeded.

use std::cell::RefCell;
use std::marker::PhantomData;

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

thread_local! {
    /// The seeded generator of this thread, while a [`Seeded`] guard lives.
    static SEEDED: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// While it lives, this thread's random choices come from a seeded generator (see
/// [`seed_thread`]). Dropping it restores what was there before (the thread's random generator,
/// or the generator of an outer guard). Not `Send`: it belongs to the thread that made it.
#[must_use = "the seed holds only while the guard lives"]
pub struct Seeded {
    previous: Option<StdRng>,
    _not_send: PhantomData<*const ()>,
}

impl std::fmt::Debug for Seeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seeded")
    }
}

/// From now until the guard is dropped, every random choice made through this module on this
/// thread is drawn from a generator seeded with `seed`.
pub fn seed_thread(seed: u64) -> Seeded {
    let previous = SEEDED.with(|slot| slot.replace(Some(StdRng::seed_from_u64(seed))));
    Seeded {
        previous,
        _not_send: PhantomData,
    }
}

impl Drop for Seeded {
    fn drop(&mut self) {
        let previous = self.previous.take();
        SEEDED.with(|slot| *slot.borrow_mut() = previous);
    }
}

/// Whether this thread's random choices are seeded now.
pub fn is_seeded() -> bool {
    SEEDED.with(|slot| slot.borrow().is_some())
}

/// Calls `draw` with this thread's seeded generator if [`seed_thread`] is in force, else with the
/// thread's random generator. `draw` must only draw: it runs while the generator is borrowed, so
/// it must not call this module again.
pub fn with_rng<T>(draw: impl FnOnce(&mut dyn RngCore) -> T) -> T {
    SEEDED.with(|slot| match slot.borrow_mut().as_mut() {
        Some(seeded) => draw(seeded),
        None => draw(&mut rand::rng()),
    })
}

/// A number in `[0, 1)`.
pub fn unit_f64() -> f64 {
    with_rng(|rng| rng.random::<f64>())
}

/// A number in `[low, high)`; `low` when the range is empty.
pub fn range_u64(low: u64, high: u64) -> u64 {
    if high <= low {
        return low;
    }
    with_rng(|rng| rng.random_range(low..high))
}

/// Random bytes into `bytes`.
pub fn fill(bytes: &mut [u8]) {
    with_rng(|rng| rng.fill_bytes(bytes));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_repeats_and_the_guard_restores() {
        let draws = |seed| {
            let _seeded = seed_thread(seed);
            assert!(is_seeded());
            (0..4).map(|_| range_u64(0, 1 << 40)).collect::<Vec<_>>()
        };
        assert_eq!(draws(1), draws(1));
        assert_ne!(draws(1), draws(2));
        assert!(!is_seeded());
        let outer = seed_thread(3);
        {
            let _inner = seed_thread(4);
        }
        assert!(is_seeded(), "the outer seed is back");
        drop(outer);
        assert!(!is_seeded());
        assert_eq!(range_u64(5, 5), 5);
        let x = unit_f64();
        assert!((0.0..1.0).contains(&x));
    }
}
