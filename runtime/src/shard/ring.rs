//! The hash ring: which member owns a key, so that a member joining or leaving moves about 1/N of
//! the keys and not all of them.
//!
//! Each member is placed on a circle of 2⁶⁴ points at [`TOKENS_PER_MEMBER`] pseudo-random
//! positions (its *tokens*: the hash of `"<member>#<i>"`). A key belongs to the member whose token
//! comes first clockwise from the key's own hash. A new member takes over only the arcs just
//! before its tokens (about 1/N of the circle, taken evenly from every other member); a member
//! that leaves hands each of its arcs to the member after it. With one token per member the arcs
//! would be very uneven; with 100 the largest share is within about ±20% of the mean.
//!
//! The hash must give the same answer in every replica, whatever Rust version built it, so it is
//! spelled out here (FNV-1a over the bytes, then a SplitMix64 finaliser to spread similar strings
//! such as `replica-1#7` and `replica-1#8` across the circle) instead of `std`'s `DefaultHasher`,
//! whose algorithm may change between releases.

use std::collections::BTreeSet;

use ferrokube_core::shard::{HASH_SPACE_END, ShardField, ShardRange, ShardSelector, shard_hash};

/// How many positions each member takes on the ring (kubernetes-controller-sharding uses 100 too).
pub const TOKENS_PER_MEMBER: u32 = 100;

/// A consistent-hash ring over member names. Cheap to rebuild: `N × 100` hashes and a sort.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HashRing {
    /// Every member's tokens, sorted by position. Invariant: no two entries share a position
    /// (a collision keeps the member whose name sorts first, so every replica builds the same ring).
    tokens: Vec<(u64, String)>,
    members: BTreeSet<String>,
}

impl HashRing {
    /// A ring over `members` (duplicates count once).
    pub fn new<I, S>(members: I) -> HashRing
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let members: BTreeSet<String> = members.into_iter().map(Into::into).collect();
        let mut tokens: Vec<(u64, String)> = members
            .iter()
            .flat_map(|member| {
                (0..TOKENS_PER_MEMBER)
                    .map(move |i| (hash(&format!("{member}#{i}")), member.clone()))
            })
            .collect();
        tokens.sort();
        tokens.dedup_by(|later, earlier| later.0 == earlier.0);
        HashRing { tokens, members }
    }

    /// The members, sorted.
    pub fn members(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn contains(&self, member: &str) -> bool {
        self.members.contains(member)
    }

    /// The member that owns `key` (e.g. `namespace/name`); `None` on an empty ring.
    pub fn owner(&self, key: &str) -> Option<&str> {
        let point = hash(key);
        let at = self
            .tokens
            .partition_point(|(position, _)| *position < point);
        self.tokens
            .get(at)
            .or_else(|| self.tokens.first())
            .map(|(_, member)| member.as_str())
    }
}

/// The ring read over a field the server hashes, for server-side sharding (KEP-5866,
/// `shardSelector`): a value's point is [`shard_hash`] of it, the plain FNV-1a the server computes
/// (no mixer: the server could not apply one), and its owner is the member of the first token at
/// or after that point, as [`HashRing::owner`] finds it for a key. Each member's points are then a
/// union of arcs, which [`HashRing::ranges`] writes as a [`ShardSelector`] the server can filter
/// by. The server-side mode ([`super::ranges`]) uses it over namespaces or uids.
impl HashRing {
    /// The member that owns the object with this uid in the uid reading of the ring.
    pub fn owner_of_uid(&self, uid: &str) -> Option<&str> {
        self.owner_of_value(uid)
    }

    /// The member that owns a field value (a uid, a namespace) in the server-side reading.
    pub fn owner_of_value(&self, value: &str) -> Option<&str> {
        self.owner_of_point(shard_hash(value))
    }

    fn owner_of_point(&self, point: u64) -> Option<&str> {
        let at = self
            .tokens
            .partition_point(|(position, _)| *position < point);
        self.tokens
            .get(at)
            .or_else(|| self.tokens.first())
            .map(|(_, member)| member.as_str())
    }

    /// `member`'s arcs over the uid hash space as a uid shard selector: [`HashRing::ranges`]
    /// over [`ShardField::Uid`].
    pub fn uid_ranges(&self, member: &str) -> Option<ShardSelector> {
        self.ranges(member, ShardField::Uid)
    }

    /// `member`'s arcs over the hash space, adjacent arcs merged, as a shard selector over
    /// `field` (`None` if `member` is not in the ring). A token at `t` owns the points after the
    /// token before it, up to and including `t`; the first token also owns the points after the
    /// last. With 100 tokens per member, about 100 ranges (a query of some 10 KB, which
    /// kube-apiserver and the embedded server take).
    pub fn ranges(&self, member: &str, field: ShardField) -> Option<ShardSelector> {
        if !self.contains(member) {
            return None;
        }
        // [start, end) pieces; the wrap-around arc is cut at 2^64 / 0.
        let mut pieces: Vec<(u128, u128)> = Vec::new();
        let last = self
            .tokens
            .last()
            .map(|(position, _)| u128::from(*position));
        for (i, (position, owner)) in self.tokens.iter().enumerate() {
            if owner != member {
                continue;
            }
            let end = u128::from(*position) + 1;
            match i.checked_sub(1).and_then(|before| self.tokens.get(before)) {
                Some((before, _)) => pieces.push((u128::from(*before) + 1, end)),
                None => {
                    pieces.push((0, end));
                    if let Some(last) = last {
                        pieces.push((last + 1, HASH_SPACE_END));
                    }
                }
            }
        }
        pieces.sort_unstable();
        let mut merged: Vec<(u128, u128)> = Vec::with_capacity(pieces.len());
        for (start, end) in pieces {
            match merged.last_mut() {
                Some(previous) if previous.1 >= start => previous.1 = previous.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        let mut ranges = merged.into_iter().filter_map(|(start, end)| {
            let start = u64::try_from(start).ok()?;
            ShardRange::new(start, end).ok()
        });
        let first = ranges.next()?;
        Some(ranges.fold(ShardSelector::new(field, first), ShardSelector::or))
    }
}

/// FNV-1a (64 bit) of `text`, finished with SplitMix64's mixer.
pub fn hash(text: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    for byte in text.bytes() {
        h ^= u64::from(byte);
        h = h.wrapping_mul(PRIME);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("default/rs-{i}")).collect()
    }

    fn shares(ring: &HashRing, keys: &[String]) -> HashMap<String, usize> {
        let mut shares = HashMap::new();
        for key in keys {
            *shares
                .entry(ring.owner(key).unwrap_or_default().to_string())
                .or_default() += 1;
        }
        shares
    }

    #[test]
    fn shard_ring_hash_is_fixed() {
        // The same values on every platform and Rust version: replicas must agree.
        // (Values computed independently, from the definition, in Python.)
        assert_eq!(hash(""), 0xf52a_15e9_a9b5_e89b);
        assert_eq!(hash("default/rs-0"), 0x369f_e642_0dda_9eb7);
        assert_eq!(hash("replica-1#7"), 0x6bee_0793_bc88_6d9e);
    }

    #[test]
    fn shard_ring_empty_owns_nothing() {
        assert_eq!(HashRing::default().owner("a/b"), None);
        assert_eq!(HashRing::new(["only"]).owner("a/b"), Some("only"));
    }

    #[test]
    fn shard_ring_shares_are_even() {
        let keys = keys(10_000);
        for n in 2..=5 {
            let ring = HashRing::new((0..n).map(|i| format!("replica-{i}")));
            let shares = shares(&ring, &keys);
            let mean = keys.len() as f64 / n as f64;
            for (member, share) in &shares {
                let off = (*share as f64 - mean).abs() / mean;
                assert!(
                    off < 0.25,
                    "{n} members: {member} has {share} of {}",
                    keys.len()
                );
            }
        }
    }

    #[test]
    fn shard_ring_join_and_leave_move_about_one_nth() {
        let keys = keys(10_000);
        let three = HashRing::new(["a", "b", "c"]);
        let four = HashRing::new(["a", "b", "c", "d"]);
        let mut moved = 0;
        for key in &keys {
            let (before, after) = (three.owner(key), four.owner(key));
            if before != after {
                // A join only takes keys for the newcomer.
                assert_eq!(after, Some("d"), "{key} moved between old members");
                moved += 1;
            }
        }
        let fraction = moved as f64 / keys.len() as f64;
        assert!(
            (0.18..0.32).contains(&fraction),
            "a 4th member took {fraction}"
        );
        // Leaving is the reverse: only the leaver's keys move.
        let two = HashRing::new(["a", "c"]);
        for key in &keys {
            if three.owner(key) != Some("b") {
                assert_eq!(
                    three.owner(key),
                    two.owner(key),
                    "{key} moved though b left"
                );
            }
        }
    }

    #[test]
    fn shard_selector_uid_ranges_of_the_ring_partition_the_space() {
        let ring = HashRing::new(["a", "b", "c", "d"]);
        let selectors: Vec<(&str, ShardSelector)> = ["a", "b", "c", "d"]
            .into_iter()
            .map(|m| (m, ring.uid_ranges(m).expect("a member")))
            .collect();
        for (member, selector) in &selectors {
            assert!(
                selector.ranges().len() <= TOKENS_PER_MEMBER as usize + 1,
                "{member}"
            );
            assert!(
                selector
                    .ranges()
                    .windows(2)
                    .all(|w| u128::from(w[1].start()) > w[0].end())
            );
        }
        // Every uid (and every token's own point, and the ends of the space) is in exactly the
        // ranges of the member that owns it.
        let mut points: Vec<u64> = ring
            .tokens
            .iter()
            .flat_map(|(p, _)| [*p, p.wrapping_add(1)])
            .collect();
        points.extend([0, 1, u64::MAX]);
        for point in points {
            let owner = ring.owner_of_point(point).expect("owner");
            let holders: Vec<&str> = selectors
                .iter()
                .filter(|(_, s)| s.ranges().iter().any(|r| r.contains(point)))
                .map(|(m, _)| *m)
                .collect();
            assert_eq!(holders, vec![owner], "point {point:#x}");
        }
        for i in 0..5_000 {
            let uid = format!("5d0c7e2a-{i:04}-4b8e-9f31-2c6a1e0b7d{:02}", i % 97);
            let owner = ring.owner_of_uid(&uid).expect("owner");
            let holders: Vec<&str> = selectors
                .iter()
                .filter(|(_, s)| s.matches_value(&uid))
                .map(|(m, _)| *m)
                .collect();
            assert_eq!(holders, vec![owner], "{uid}");
        }
        assert_eq!(ring.uid_ranges("e"), None);
        let alone = HashRing::new(["only"]).uid_ranges("only").expect("member");
        assert_eq!(alone.ranges(), [ShardRange::everything()]);
    }

    #[test]
    fn shard_ring_is_the_same_whatever_the_order() {
        let one = HashRing::new(["x", "y", "z"]);
        let other = HashRing::new(["z", "x", "y", "x"]);
        assert_eq!(one, other);
    }
}
