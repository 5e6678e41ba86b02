//! Shard selectors: which slice of a collection a sharded list or watch asks the server for.
//!
//! # Why
//!
//! Kubernetes 1.36 added server-side sharded list and watch (KEP-5866, alpha behind the
//! `ShardedListAndWatch` feature gate). A client adds `shardSelector` to a list or watch and the
//! server sends only the objects whose metadata field hashes into the given ranges, list and watch
//! alike. N replicas that each ask for one Nth of the hash space each cache about one Nth of the
//! objects, instead of all of them.
//!
//! # The model, exactly as the server has it
//!
//! ```text
//!   object ──► field value ──► FNV-1a 64 of its bytes ──► h: u64
//!              (metadata.uid             │
//!               or metadata.namespace)   ▼
//!   selected  ⇔  start ≤ h < end  for some range of the selector   (ranges OR-ed)
//! ```
//!
//! The wire form is a CEL expression, ranges as 0x-prefixed 16-digit lowercase hex (the exclusive
//! end may be `0x10000000000000000`, 2^64):
//!
//! ```text
//! shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(...)
//! ```
//!
//! This module holds the typed form ([`ShardSelector`] of [`ShardRange`]s over a [`ShardField`]),
//! its canonical text (what [`ShardSelector`]'s `Display` writes is exactly what kube-apiserver
//! echoes in a sharded list's `metadata.shardInfo.selector`), and the hash ([`shard_hash`]), so a
//! client can tell which shard an object belongs to without asking. Parsing the CEL text is the
//! server's business (`ferrokube-apiserver`'s `shard` module); clients build selectors from types.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The end of the hash space, 2^64: the largest exclusive end a range may have.
pub const HASH_SPACE_END: u128 = 1 << 64;

/// The 64-bit FNV-1a hash of `value`'s bytes: the number a shard range is tested against
/// (apimachinery's `sharding.HashField`, there printed as hex). The `fnv` crate computes it.
pub fn shard_hash(value: &str) -> u64 {
    use std::hash::Hasher;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(value.as_bytes());
    hasher.finish()
}

/// The metadata field whose hash places an object in a shard. kube-apiserver 1.37 supports these
/// two and no other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShardField {
    /// `object.metadata.uid`: objects spread evenly, whatever their namespace.
    Uid,
    /// `object.metadata.namespace`: a namespace's objects stay together (an empty string for
    /// cluster-scoped objects, so they all land in one shard).
    Namespace,
}

impl ShardField {
    /// The field path as the selector writes it, e.g. `object.metadata.uid`.
    pub fn path(self) -> &'static str {
        match self {
            ShardField::Uid => "object.metadata.uid",
            ShardField::Namespace => "object.metadata.namespace",
        }
    }

    /// The field named by `path`, if it is one the server supports.
    pub fn from_path(path: &str) -> Option<ShardField> {
        match path {
            "object.metadata.uid" => Some(ShardField::Uid),
            "object.metadata.namespace" => Some(ShardField::Namespace),
            _ => None,
        }
    }

    /// The field's value in `meta` (missing reads as the empty string, as the server reads it).
    pub fn value(self, meta: &ObjectMeta) -> &str {
        let value = match self {
            ShardField::Uid => meta.uid.as_deref(),
            ShardField::Namespace => meta.namespace.as_deref(),
        };
        value.unwrap_or("")
    }
}

/// A range that cannot be: empty, or past the end of the hash space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ShardRangeError {
    /// `start` is not below `end`.
    #[error("shard range start {start:#018x} must be less than end {end:#018x}")]
    Empty { start: u64, end: u128 },
    /// `end` is beyond 2^64.
    #[error("shard range end {end:#x} is beyond the hash space (at most 0x10000000000000000)")]
    PastEnd { end: u128 },
    /// A split into zero parts, or a part index not below the count.
    #[error("shard {index} of {count} does not exist")]
    NoSuchPart { index: u64, count: u64 },
}

/// The hashes `start ≤ h < end`: one interval of the 64-bit hash space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardRange {
    start: u64,
    /// Invariant: `start < end ≤ 2^64` (checked by every constructor).
    end: u128,
}

impl ShardRange {
    /// `[start, end)`; `end` may be [`HASH_SPACE_END`] (2^64).
    pub fn new(start: u64, end: u128) -> Result<ShardRange, ShardRangeError> {
        if end > HASH_SPACE_END {
            return Err(ShardRangeError::PastEnd { end });
        }
        if u128::from(start) >= end {
            return Err(ShardRangeError::Empty { start, end });
        }
        Ok(ShardRange { start, end })
    }

    /// The whole hash space, `[0, 2^64)`.
    pub fn everything() -> ShardRange {
        ShardRange {
            start: 0,
            end: HASH_SPACE_END,
        }
    }

    /// Part `index` of the hash space cut into `count` equal parts (the last absorbing the
    /// rounding): parts `0..count` partition the space exactly. `part(1, 4)` is
    /// `[0x4000000000000000, 0x8000000000000000)`, as in the API's own four-shard example.
    pub fn part(index: u64, count: u64) -> Result<ShardRange, ShardRangeError> {
        if count == 0 || index >= count {
            return Err(ShardRangeError::NoSuchPart { index, count });
        }
        let bound = |i: u64| HASH_SPACE_END * u128::from(i) / u128::from(count);
        let start = u64::try_from(bound(index))
            .map_err(|_| ShardRangeError::NoSuchPart { index, count })?;
        ShardRange::new(start, bound(index + 1))
    }

    pub fn start(&self) -> u64 {
        self.start
    }

    /// The exclusive end, at most 2^64.
    pub fn end(&self) -> u128 {
        self.end
    }

    /// True when `hash` lies in the range.
    pub fn contains(&self, hash: u64) -> bool {
        self.start <= hash && u128::from(hash) < self.end
    }
}

/// The `shardRange(...)` call of one range over `field`, in the server's canonical spelling.
struct RangeText<'a>(ShardField, &'a ShardRange);

impl fmt::Display for RangeText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let RangeText(field, range) = self;
        write!(
            f,
            "shardRange({}, '0x{:016x}', '0x{:016x}')",
            field.path(),
            range.start,
            range.end
        )
    }
}

/// One or more ranges over one field; an object is selected when its field's hash lies in any
/// of them. `Display` writes the wire text, in the form the server echoes back.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardSelector {
    field: ShardField,
    /// Invariant: never empty (an empty selector is no selector: the server refuses it).
    ranges: Vec<ShardRange>,
}

impl ShardSelector {
    /// The objects whose `field` hashes into `range`.
    pub fn new(field: ShardField, range: ShardRange) -> ShardSelector {
        ShardSelector {
            field,
            ranges: vec![range],
        }
    }

    /// The objects whose uid hashes into `range` (the usual choice: objects spread evenly).
    pub fn uid(range: ShardRange) -> ShardSelector {
        ShardSelector::new(ShardField::Uid, range)
    }

    /// The objects whose namespace hashes into `range`.
    pub fn namespace(range: ShardRange) -> ShardSelector {
        ShardSelector::new(ShardField::Namespace, range)
    }

    /// Member `index` of `count` equal uid shards ([`ShardRange::part`]).
    pub fn member(index: u64, count: u64) -> Result<ShardSelector, ShardRangeError> {
        Ok(ShardSelector::uid(ShardRange::part(index, count)?))
    }

    /// These objects and those in `range` too (`... || shardRange(...)`).
    pub fn or(mut self, range: ShardRange) -> ShardSelector {
        self.ranges.push(range);
        self
    }

    pub fn field(&self) -> ShardField {
        self.field
    }

    /// The ranges, in the order written; at least one.
    pub fn ranges(&self) -> &[ShardRange] {
        &self.ranges
    }

    /// True when a field value of `value` is selected.
    pub fn matches_value(&self, value: &str) -> bool {
        let hash = shard_hash(value);
        self.ranges.iter().any(|range| range.contains(hash))
    }

    /// True when an object with this metadata is selected.
    pub fn matches(&self, meta: &ObjectMeta) -> bool {
        self.matches_value(self.field.value(meta))
    }
}

impl fmt::Display for ShardSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, range) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(f, "{}", RangeText(self.field, range))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_selector_hash_is_fnv1a_64() {
        // FNV-1a 64's offset basis for the empty input, and two published test vectors.
        assert_eq!(shard_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(shard_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(shard_hash("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn shard_selector_text_is_the_servers_canonical_form() {
        let selector = ShardSelector::uid(ShardRange::part(0, 2).expect("part"))
            .or(ShardRange::part(1, 2).expect("part"));
        assert_eq!(
            selector.to_string(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || \
             shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
        );
        let ns = ShardSelector::namespace(ShardRange::new(0xaa, 0xff).expect("range"));
        assert_eq!(
            ns.to_string(),
            "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')"
        );
    }

    #[test]
    fn shard_selector_parts_partition_the_space() {
        for count in [1u64, 2, 3, 4, 7] {
            let parts: Vec<ShardRange> = (0..count)
                .map(|i| ShardRange::part(i, count).expect("part"))
                .collect();
            assert_eq!(parts[0].start(), 0);
            assert_eq!(parts[parts.len() - 1].end(), HASH_SPACE_END);
            for pair in parts.windows(2) {
                assert_eq!(u128::from(pair[1].start()), pair[0].end());
            }
        }
        assert_eq!(
            ShardRange::part(1, 4).expect("part"),
            ShardRange::new(0x4000_0000_0000_0000, 0x8000_0000_0000_0000).expect("range")
        );
        for hash in [
            0u64,
            1,
            0x3fff_ffff_ffff_ffff,
            0x4000_0000_0000_0000,
            u64::MAX,
        ] {
            let owners = (0..4)
                .filter(|i| ShardRange::part(*i, 4).expect("part").contains(hash))
                .count();
            assert_eq!(owners, 1, "hash {hash:#x}");
        }
    }

    #[test]
    fn shard_selector_ranges_refuse_what_the_server_refuses() {
        assert!(matches!(
            ShardRange::new(5, 5),
            Err(ShardRangeError::Empty { .. })
        ));
        assert!(matches!(
            ShardRange::new(0, HASH_SPACE_END + 1),
            Err(ShardRangeError::PastEnd { .. })
        ));
        assert!(matches!(
            ShardRange::part(4, 4),
            Err(ShardRangeError::NoSuchPart { .. })
        ));
        assert!(ShardRange::part(0, 0).is_err());
        assert_eq!(ShardRange::everything().end(), HASH_SPACE_END);
    }

    #[test]
    fn shard_selector_matches_by_field_hash() {
        let meta = ObjectMeta {
            uid: Some("a6c401be-2ed0-469b-b21b-27f443b9116f".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        };
        let hash = shard_hash("a6c401be-2ed0-469b-b21b-27f443b9116f");
        let own = ShardRange::new(hash, u128::from(hash) + 1).expect("range");
        assert!(ShardSelector::uid(own).matches(&meta));
        assert!(!ShardSelector::namespace(own).matches(&meta));
        let matching = (0..4)
            .filter(|i| ShardSelector::member(*i, 4).expect("member").matches(&meta))
            .count();
        assert_eq!(matching, 1);
    }
}
