//! The three patch formats of `PATCH`: JSON merge patch, JSON patch and strategic merge patch.
//!
//! - **JSON merge patch** (RFC 7386, `application/merge-patch+json`): objects merge key by key, `null`
//!   deletes, anything else (lists included) replaces. Applied by the `json-patch` crate.
//! - **JSON patch** (RFC 6902, `application/json-patch+json`): a list of `add`, `remove`, `replace`,
//!   `move`, `copy` and `test` operations on JSON pointers. Applied by the `json-patch` crate; the
//!   statuses of its errors are ours ([`apply`]).
//! - **Strategic merge patch** (`application/strategic-merge-patch+json`, kubectl's default): a merge
//!   patch that merges lists of objects by a key instead of replacing them, e.g. `containers` by `name`,
//!   so `kubectl label` or `apply` does not wipe a list. The real server reads the keys from the Go
//!   types; here they are a table of the common fields ([`merge_key`]). The `$patch: delete|replace`,
//!   `$setElementOrder/…`, `$retainKeys` and `$deleteFromPrimitiveList/…` directives are understood.
//!
//! Server-side apply (`application/apply-patch+yaml`) is not a patch format here: [`crate::apply`]
//! handles it before these are consulted (so this module answers 415 for it).
//!
//! # Limits
//!
//! A patch is applied while the store's one lock is held (see [`crate::api`]), so what one patch
//! may cost must be bounded, or one request stalls every other. Every body, of every format, is at
//! most 3 MiB ([`crate::http`] answers 413 past that, as kube-apiserver does), and a merge or
//! strategic patch does work in proportion to its body and the object: the strategic merge moves
//! the target's parts into the result rather than copying them level by level, and finds list
//! items by hash (keyed merges, set merges, `$deleteFromPrimitiveList`, `$retainKeys`), never by
//! comparing each patch item with each list item. A JSON patch is different:
//! `copy` duplicates a part of the object, so forty `{"op": "copy", "from": "/spec", "path":
//! "/spec/again"}` double the object forty times, a terabyte from a few kilobytes of body. Hence,
//! checked before each operation runs, so the document never grows past them:
//!
//! | limit | answer | kube-apiserver |
//! |---|---|---|
//! | [`MAX_JSON_PATCH_OPERATIONS`] operations | 413 | `maxJSONPatchOperations` (`k8s.io/apiserver/pkg/endpoints/handlers/patch.go`), the same |
//! | [`MAX_JSON_PATCH_COPY_BYTES`] copied in all | 422 | `JSONPatchMaxCopyBytes` (`k8s.io/apiserver/pkg/server/config.go`), set as evanphx/json-patch's `AccumulatedCopySizeLimit`: the same size, counted the same way (compact JSON of each copied value) |
//! | [`MAX_PATCHED_DEPTH`] levels of nesting | 422 | none of its own: Go's JSON decoder stops at 10,000 levels |
//! | [`MAX_ARRAY_SHIFTS`] array elements moved | 422 | none |
//!
//! The last two are ours. Depth: `copy` and `add` can also nest the object deeper with every
//! operation, and a value nested hundreds of thousands deep overflows the stack of whatever
//! serializes, compares or drops it recursively (serde_json does all three); the limit is the
//! depth serde_json reads back, so a patched object is never deeper than a create could have made
//! it (unless it already was). Shifts: inserting at or removing from the front of an array moves
//! every element after it, so ten thousand `remove`s of `/list/0` on a million-element list move
//! ten billion elements, for seconds to minutes of a blocking-pool thread (no longer under the
//! store's lock: see [`crate::api`]); Go's evanphx/json-patch does the same work.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher};

use serde_json::Value;

use crate::status::StatusError;

/// The most operations one JSON patch may have; more is 413 `RequestEntityTooLarge`, as
/// kube-apiserver's `maxJSONPatchOperations` (`k8s.io/apiserver/pkg/endpoints/handlers/patch.go`).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The most bytes all `copy` operations of one JSON patch may add together, each copy counted as
/// the length of the copied value's compact JSON; more is 422 `Invalid`. kube-apiserver's
/// `JSONPatchMaxCopyBytes` (3 MiB, `k8s.io/apiserver/pkg/server/config.go`: twice etcd's 1.5 MB
/// request limit), which it installs as evanphx/json-patch's `AccumulatedCopySizeLimit`. It equals
/// the request body limit, `MaxRequestBodyBytes`.
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;

/// The deepest a JSON patch may nest an object ([`depth`] levels): 127, the most serde_json reads
/// (its recursion limit is 128), so no patched object is deeper than a request body can be, and
/// nothing that serializes, compares or drops it recursively runs out of stack. An object that was
/// already deeper may stay as deep. Ours: kube-apiserver has no such limit below Go's decoder's
/// 10,000 levels.
pub const MAX_PATCHED_DEPTH: usize = 127;

/// The most array elements one JSON patch may shift by inserting into or removing from the middle
/// of arrays (2^26, about 67 million: a fraction of a second of moving memory); more is 422
/// `Invalid`. Ours: kube-apiserver does the same work without a limit, but not under a global lock.
pub const MAX_ARRAY_SHIFTS: usize = 1 << 26;

/// A supported patch format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
}

impl PatchType {
    /// The format of a `Content-Type`, or 415.
    pub fn from_content_type(content_type: &str) -> Result<PatchType, StatusError> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        match media {
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            other => Err(StatusError::unsupported_media_type(other)),
        }
    }
}

/// Applies `patch` (already parsed) to `target`.
pub fn apply(kind: PatchType, target: &Value, patch: &Value) -> Result<Value, StatusError> {
    match kind {
        PatchType::Merge => {
            if !patch.is_object() {
                return Err(StatusError::bad_request(
                    "json: cannot unmarshal a non-object merge patch into an object",
                ));
            }
            let mut merged = target.clone();
            json_patch::merge(&mut merged, patch);
            Ok(merged)
        }
        PatchType::Strategic => {
            if !patch.is_object() {
                return Err(StatusError::bad_request(
                    "the strategic merge patch must be a JSON object",
                ));
            }
            Ok(strategic(target.clone(), patch))
        }
        PatchType::Json => apply_json_patch(target, patch),
    }
}

/// The key that identifies elements of the list field `field` in a strategic merge, for the common
/// fields of the built-in kinds; `None` means the list is replaced whole (or, for `finalizers`, merged
/// as a set).
pub fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ownerReferences" => "uid",
        "conditions" => "type",
        "hostAliases" => "ip",
        "ports" => "containerPort",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

/// Primitive lists merged as sets rather than replaced.
fn is_merged_set(field: &str) -> bool {
    field == "finalizers"
}

/// `patch` merged strategically into `target` (which it consumes: each part of the target is moved
/// into the result, never copied, so the work is proportional to the object plus the patch).
///
/// Every list operation finds items by hash ([`ValueIndex`], [`KeyedSlots`]), so a patch of `m`
/// items on a list of `n` costs `n + m`, not `n · m`: a 3 MiB patch deleting from a list of a
/// hundred thousand items would otherwise cost ~10^11 comparisons for one request.
fn strategic(target: Value, patch: &Value) -> Value {
    let Some(patch_map) = patch.as_object() else {
        return patch.clone();
    };
    if patch_map.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replaced = patch_map.clone();
        replaced.remove("$patch");
        return Value::Object(replaced);
    }
    let mut result = match target {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    let retain: Option<HashSet<&str>> = patch_map
        .get("$retainKeys")
        .and_then(Value::as_array)
        .map(|keys| keys.iter().filter_map(Value::as_str).collect());
    for (key, value) in patch_map {
        if key.starts_with('$') {
            continue;
        }
        if value.is_null() {
            result.remove(key);
            continue;
        }
        // The map is ordered by key (serde_json without `preserve_order`), so taking the current
        // value out and putting the merged one back leaves the order as it was.
        let current = result.remove(key).unwrap_or(Value::Null);
        let merged = match (value, current) {
            (Value::Object(_), current) => strategic(current, value),
            (Value::Array(items), Value::Array(existing)) => merge_list(key, existing, items),
            _ => value.clone(),
        };
        result.insert(key.clone(), merged);
    }
    for (key, value) in patch_map {
        if let Some(list) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(existing)), Some(remove)) =
                (result.get_mut(list), value.as_array())
            {
                let unwanted = ValueIndex::of(remove);
                existing.retain(|item| unwanted.find(remove, item).is_none());
            }
        }
    }
    if let Some(retain) = retain {
        result.retain(|k, _| retain.contains(k.as_str()));
    }
    Value::Object(result)
}

fn merge_list(field: &str, existing: Vec<Value>, patch: &[Value]) -> Value {
    if is_merged_set(field) {
        // A set: the existing items, then each patch item not there yet (nor added already).
        let mut merged = existing;
        let mut index = ValueIndex::of(&merged);
        for item in patch {
            if index.find(&merged, item).is_none() {
                index.add(item, merged.len());
                merged.push(item.clone());
            }
        }
        return Value::Array(merged);
    }
    let Some(key) = merge_key(field) else {
        return Value::Array(patch.iter().filter(|v| !is_directive(v)).cloned().collect());
    };
    let mut slots = KeyedSlots::new(key, existing);
    for item in patch {
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        // An item without the key matches nothing (and is added, unless it is a deletion).
        let found = item.get(key).and_then(|id| slots.first_with(id));
        match (found, delete) {
            (Some(slot), true) => slots.delete(slot),
            (None, true) => {}
            (Some(slot), false) => slots.update(slot, item),
            (None, false) => slots.push(strategic(Value::Null, item)),
        }
    }
    Value::Array(slots.into_items())
}

/// Where the values of a list are, by hash: finding an item equal to a value (`==`) costs a hash
/// and, on the rare collision of 64-bit hashes, a comparison or two, not a scan of the list.
/// The hashes are keyed at random (the standard library's SipHash), so a client cannot choose
/// values that collide.
struct ValueIndex {
    hasher: RandomState,
    /// Hash of a value to the positions of the list's items with that hash, in list order.
    positions: HashMap<u64, Vec<usize>>,
}

impl ValueIndex {
    /// The index of `items`.
    fn of(items: &[Value]) -> ValueIndex {
        let mut index = ValueIndex {
            hasher: RandomState::new(),
            positions: HashMap::with_capacity(items.len()),
        };
        for (position, item) in items.iter().enumerate() {
            index.add(item, position);
        }
        index
    }

    /// Records that `item` is at `position` (after every position recorded so far).
    fn add(&mut self, item: &Value, position: usize) {
        let hash = self.hash(item);
        self.positions.entry(hash).or_default().push(position);
    }

    /// The first position of `items` (the list this indexes) whose item equals `wanted`.
    fn find(&self, items: &[Value], wanted: &Value) -> Option<usize> {
        let candidates = self.positions.get(&self.hash(wanted))?;
        candidates
            .iter()
            .copied()
            .find(|&position| items.get(position) == Some(wanted))
    }

    fn hash(&self, value: &Value) -> u64 {
        let mut hasher = self.hasher.build_hasher();
        hash_value(value, &mut hasher);
        hasher.finish()
    }
}

/// Feeds `value` to `hasher` so that equal values (`==`) hash alike: objects are maps ordered by
/// key, numbers hash as serde_json's `Number` does (`-0.0` like `0.0`). Recursive, as deep as the
/// value: values here come from request bodies, which serde_json reads at most 128 levels deep.
fn hash_value(value: &Value, hasher: &mut impl Hasher) {
    match value {
        Value::Null => 0u8.hash(hasher),
        Value::Bool(b) => (1u8, b).hash(hasher),
        Value::Number(n) => (2u8, n).hash(hasher),
        Value::String(s) => (3u8, s).hash(hasher),
        Value::Array(items) => {
            (4u8, items.len()).hash(hasher);
            for item in items {
                hash_value(item, hasher);
            }
        }
        Value::Object(map) => {
            (5u8, map.len()).hash(hasher);
            for (key, item) in map {
                key.hash(hasher);
                hash_value(item, hasher);
            }
        }
    }
}

/// A list merged by a key field (`containers` by `name`), item by item, with every operation in
/// constant expected time.
///
/// The list is a row of slots: the existing items, then each added one; a deleted item leaves its
/// slot empty, so positions never shift. A patch item acts on the *first* item still there whose
/// key equals its own, as a scan from the front would find it (a list with duplicate keys has its
/// duplicates deleted one at a time, front first).
struct KeyedSlots<'k> {
    key: &'k str,
    slots: Vec<Option<Value>>,
    hasher: RandomState,
    /// Hash of a key value to the slots holding an item with such a key, in increasing order.
    /// Invariant: exactly the filled slots whose item has the key field are listed, each under the
    /// hash of its key value.
    by_key: HashMap<u64, VecDeque<usize>>,
}

impl<'k> KeyedSlots<'k> {
    fn new(key: &'k str, items: Vec<Value>) -> KeyedSlots<'k> {
        let mut list = KeyedSlots {
            key,
            slots: Vec::with_capacity(items.len()),
            hasher: RandomState::new(),
            by_key: HashMap::with_capacity(items.len()),
        };
        for item in items {
            list.push(item);
        }
        list
    }

    fn hash(&self, id: &Value) -> u64 {
        let mut hasher = self.hasher.build_hasher();
        hash_value(id, &mut hasher);
        hasher.finish()
    }

    /// The first filled slot whose item's key equals `id`.
    fn first_with(&self, id: &Value) -> Option<usize> {
        let candidates = self.by_key.get(&self.hash(id))?;
        candidates.iter().copied().find(|&slot| {
            self.slots
                .get(slot)
                .and_then(Option::as_ref)
                .and_then(|item| item.get(self.key))
                == Some(id)
        })
    }

    /// Adds `item` after every slot.
    fn push(&mut self, item: Value) {
        let slot = self.slots.len();
        if let Some(id) = item.get(self.key) {
            let hash = self.hash(id);
            self.by_key.entry(hash).or_default().push_back(slot);
        }
        self.slots.push(Some(item));
    }

    /// Takes the item out of `slot` and out of the index.
    fn take(&mut self, slot: usize) -> Option<Value> {
        let item = self.slots.get_mut(slot)?.take()?;
        if let Some(id) = item.get(self.key) {
            let hash = self.hash(id);
            if let Some(listed) = self.by_key.get_mut(&hash) {
                if let Ok(at) = listed.binary_search(&slot) {
                    listed.remove(at);
                }
            }
        }
        Some(item)
    }

    fn delete(&mut self, slot: usize) {
        self.take(slot);
    }

    /// Merges `patch` into the item in `slot`, which stays in its place. (The key usually stays as
    /// it was, but a patch may null it out, so the item is indexed again under what it has now.)
    fn update(&mut self, slot: usize, patch: &Value) {
        let Some(item) = self.take(slot) else {
            return;
        };
        let merged = strategic(item, patch);
        if let Some(id) = merged.get(self.key) {
            let hash = self.hash(id);
            let listed = self.by_key.entry(hash).or_default();
            let at = listed.binary_search(&slot).unwrap_or_else(|at| at);
            listed.insert(at, slot);
        }
        if let Some(place) = self.slots.get_mut(slot) {
            *place = Some(merged);
        }
    }

    /// The items left, in slot order.
    fn into_items(self) -> Vec<Value> {
        self.slots.into_iter().flatten().collect()
    }
}

fn is_directive(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|m| m.keys().all(|k| k.starts_with('$')))
}

/// RFC 6902, by the `json-patch` crate, one operation at a time under [the limits](self#limits).
///
/// A body that is not a list is a 400; so is an operation of an unknown kind or without a `path`.
/// More than [`MAX_JSON_PATCH_OPERATIONS`] operations is a 413. Any other malformed operation (no
/// `value`, no `from`, a path that is not a JSON pointer), any operation that fails and any
/// operation over a limit is a 422 `Invalid`.
fn apply_json_patch(target: &Value, patch: &Value) -> Result<Value, StatusError> {
    use serde::Deserialize;

    let Some(operations) = patch.as_array() else {
        return Err(StatusError::bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ));
    };
    // kube-apiserver counts once the body decodes as a list of objects, before any operation is
    // looked at; a list with something else in it is the 400 of the loop below.
    if operations.len() > MAX_JSON_PATCH_OPERATIONS && operations.iter().all(Value::is_object) {
        return Err(StatusError {
            code: 413,
            reason: "RequestEntityTooLarge",
            message: format!(
                "Request entity too large: The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                operations.len()
            ),
            details: None,
        });
    }
    let mut decoded = Vec::with_capacity(operations.len());
    for operation in operations {
        match json_patch::PatchOperation::deserialize(operation) {
            Ok(decoded_operation) => decoded.push(decoded_operation),
            Err(error) => {
                let op = operation.get("op").and_then(Value::as_str).unwrap_or("");
                let known = ["add", "remove", "replace", "move", "copy", "test"].contains(&op);
                if !known || !operation.get("path").is_some_and(Value::is_string) {
                    return Err(StatusError::bad_request(format!("Unexpected kind: {op}")));
                }
                return Err(rejected(format_args!("{op} operation failed: {error}")));
            }
        }
    }
    // The target is our own copy, thrown away on an error: no need for the crate's undo log.
    let mut document = target.clone();
    let mut limits = Limits::new(&document);
    for operation in &decoded {
        limits.admit(&document, operation)?;
        json_patch::patch_unsafe(&mut document, std::slice::from_ref(operation)).map_err(
            |error| {
                let op = operation_name(operation);
                let path = error.path.as_str();
                rejected(format_args!(
                    "{op} operation failed at {path:?}: {}",
                    error.kind
                ))
            },
        )?;
    }
    Ok(document)
}

/// The 422 of a JSON patch that cannot be applied. kube-apiserver's message is the first sentence
/// alone (its generic 422 drops the detail); ours keeps the detail after it.
fn rejected(detail: std::fmt::Arguments<'_>) -> StatusError {
    StatusError::invalid_patch(format!(
        "the server rejected our request due to an error in our request: {detail}"
    ))
}

/// What one JSON patch has spent of [the limits](self#limits) so far, checked before each
/// operation runs (so an operation over a limit never runs).
struct Limits {
    /// Bytes added by `copy` operations so far (the compact JSON of each copied value).
    copied: usize,
    /// Array elements shifted by inserts and removals so far.
    shifted: usize,
    /// An upper bound of the document's nesting depth (exact at the start).
    depth: usize,
    /// The deepest the document may become: [`MAX_PATCHED_DEPTH`], or the target's own depth
    /// if it is deeper (a patch need not flatten an object it did not deepen).
    max_depth: usize,
    /// Exact recounts of the depth left (see [`Limits::deepen_by_move`]).
    recounts: usize,
}

/// How many times one patch may have the document's depth counted exactly again, when `move`
/// operations have pushed the estimate past the limit. Each recount walks the whole document.
const DEPTH_RECOUNTS: usize = 4;

impl Limits {
    fn new(document: &Value) -> Limits {
        let depth = depth(document);
        Limits {
            copied: 0,
            shifted: 0,
            depth,
            max_depth: depth.max(MAX_PATCHED_DEPTH),
            recounts: DEPTH_RECOUNTS,
        }
    }

    /// Whether `operation` may run on `document`; charges what it costs. An operation that will
    /// fail anyway (a `from` or `path` that names nothing) is let through to fail as usual.
    fn admit(
        &mut self,
        document: &Value,
        operation: &json_patch::PatchOperation,
    ) -> Result<(), StatusError> {
        use json_patch::PatchOperation as Op;
        match operation {
            Op::Add(op) => {
                self.shift(document, op.path.as_str(), Shift::Insert)?;
                self.deepen(
                    levels(op.path.as_str()) + depth(&op.value),
                    "add",
                    op.path.as_str(),
                )
            }
            Op::Replace(op) => self.deepen(
                levels(op.path.as_str()) + depth(&op.value),
                "replace",
                op.path.as_str(),
            ),
            Op::Remove(op) => self.shift(document, op.path.as_str(), Shift::Remove),
            Op::Move(op) => {
                self.shift(document, op.from.as_str(), Shift::Remove)?;
                self.shift(document, op.path.as_str(), Shift::Insert)?;
                self.deepen_by_move(document, op.from.as_str(), op.path.as_str())
            }
            Op::Copy(op) => {
                let Some(source) = document.pointer(op.from.as_str()) else {
                    return Ok(());
                };
                self.copied = self.copied.saturating_add(compact_size(source));
                if self.copied > MAX_JSON_PATCH_COPY_BYTES {
                    return Err(rejected(format_args!(
                        "Unable to complete the copy, the accumulated size increase of copy is {}, exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}",
                        self.copied
                    )));
                }
                self.shift(document, op.path.as_str(), Shift::Insert)?;
                self.deepen(
                    levels(op.path.as_str()) + depth(source),
                    "copy",
                    op.path.as_str(),
                )
            }
            Op::Test(_) => Ok(()),
        }
    }

    /// Charges the array elements that inserting at or removing from `pointer` moves along.
    fn shift(&mut self, document: &Value, pointer: &str, how: Shift) -> Result<(), StatusError> {
        let Some((parent, last)) = pointer.rsplit_once('/') else {
            return Ok(());
        };
        let Some(Value::Array(items)) = document.pointer(parent) else {
            return Ok(());
        };
        // `-` (the end) and anything that is not an index move nothing.
        let Ok(index) = last.parse::<usize>() else {
            return Ok(());
        };
        let after = items.len().saturating_sub(index);
        let moved = match how {
            Shift::Insert => after,
            Shift::Remove => after.saturating_sub(1),
        };
        self.shifted = self.shifted.saturating_add(moved);
        if self.shifted > MAX_ARRAY_SHIFTS {
            return Err(rejected(format_args!(
                "the patch moves more than {MAX_ARRAY_SHIFTS} array elements (inserting into or removing from the front of long arrays), the limit of this server"
            )));
        }
        Ok(())
    }

    /// Notes that a value `reaching` levels deep from the root is about to be written at `path`.
    fn deepen(&mut self, reaching: usize, op: &str, path: &str) -> Result<(), StatusError> {
        if reaching > self.max_depth {
            return Err(too_deep(op, path, reaching, self.max_depth));
        }
        self.depth = self.depth.max(reaching);
        Ok(())
    }

    /// A `move` from `from` to `path`: the moved value is at most `depth - levels(from)` deep,
    /// so it reaches at most `levels(path)` more than that. When that estimate passes the limit
    /// the document is counted exactly (at most [`DEPTH_RECOUNTS`] times per patch, after which
    /// the estimate is trusted and the move refused).
    fn deepen_by_move(
        &mut self,
        document: &Value,
        from: &str,
        path: &str,
    ) -> Result<(), StatusError> {
        let (from_levels, path_levels) = (levels(from), levels(path));
        if path_levels <= from_levels {
            // The moved value only rises: every level stays within the bound.
            return Ok(());
        }
        let estimate = path_levels + self.depth.saturating_sub(from_levels);
        if estimate <= self.max_depth {
            self.depth = self.depth.max(estimate);
            return Ok(());
        }
        let Some(moved) = document.pointer(from) else {
            return Ok(());
        };
        if self.recounts == 0 {
            return Err(too_deep("move", path, estimate, self.max_depth));
        }
        self.recounts -= 1;
        let reaching = path_levels + depth(moved);
        self.depth = depth(document);
        self.deepen(reaching, "move", path)
    }
}

/// How many levels below the root a JSON pointer names: one per `/` (an escaped `/` is `~1`).
fn levels(pointer: &str) -> usize {
    pointer.matches('/').count()
}

/// Which way an array operation shifts the elements after it.
#[derive(Clone, Copy)]
enum Shift {
    Insert,
    Remove,
}

fn too_deep(op: &str, path: &str, reaching: usize, max_depth: usize) -> StatusError {
    rejected(format_args!(
        "{op} operation at {path:?} would nest the object {reaching} levels deep, deeper than the limit of {max_depth}"
    ))
}

/// Levels of nesting of `value`: 0 for a scalar, 1 for `[]`, `{}` or a list or map of scalars, and
/// so on. Counted with a stack of its own, not by recursion: this runs on values whose depth is
/// not known yet.
pub fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut pending: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((value, level)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        let level = level + 1;
        deepest = deepest.max(level);
        pending.extend(
            children
                .filter(|child| child.is_array() || child.is_object())
                .map(|child| (child, level)),
        );
    }
    deepest
}

/// The length of `value` as compact JSON, which is how evanphx/json-patch sizes a copy. Called on
/// values inside the document, which are never deeper than [`Limits`] allows.
fn compact_size(value: &Value) -> usize {
    struct Meter(usize);
    impl std::io::Write for Meter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(bytes.len());
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut meter = Meter(0);
    // Writing to the meter cannot fail, nor can serializing a `Value` (its keys are strings).
    match serde_json::to_writer(&mut meter, value) {
        Ok(()) => meter.0,
        Err(_) => usize::MAX,
    }
}

fn operation_name(operation: &json_patch::PatchOperation) -> &'static str {
    use json_patch::PatchOperation as Op;
    match operation {
        Op::Add(_) => "add",
        Op::Remove(_) => "remove",
        Op::Replace(_) => "replace",
        Op::Move(_) => "move",
        Op::Copy(_) => "copy",
        Op::Test(_) => "test",
    }
}

/// Keeps map keys in a stable place; used by tests to compare.
#[cfg(test)]
fn object(pairs: &[(&str, Value)]) -> Value {
    let map: serde_json::Map<String, Value> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_replaces_lists_and_deletes_nulls() {
        let target = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        let patched = apply(
            PatchType::Merge,
            &target,
            &json!({"a": {"c": null, "d": 3}, "l": [3]}),
        );
        assert_eq!(
            patched.expect("valid"),
            json!({"a": {"b": 1, "d": 3}, "l": [3]})
        );
    }

    #[test]
    fn strategic_merge_merges_containers_by_name() {
        let target = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
                            "metadata": {"finalizers": ["f1"]}});
        let patch = json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}],
                                    "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]},
                           "metadata": {"finalizers": ["f2"]}});
        let patched = apply(PatchType::Strategic, &target, &patch).expect("valid");
        let images: Vec<&str> = patched["spec"]["containers"]
            .as_array()
            .map(|l| l.iter().filter_map(|c| c["image"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(images, ["x", "z", "w"]);
        assert_eq!(patched["metadata"]["finalizers"], json!(["f1", "f2"]));
        let deleted = apply(
            PatchType::Strategic,
            &patched,
            &json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
        );
        assert_eq!(
            deleted.expect("valid")["spec"]["containers"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
    }

    #[test]
    fn strategic_lists_keep_their_order_and_semantics() {
        // Sets: existing items first, then new ones once each, in the patch's order.
        let target = json!({"metadata": {"finalizers": ["a", "b", "a"]}});
        let patch = json!({"metadata": {"finalizers": ["c", "a", "c", "d"],
                                        "$deleteFromPrimitiveList/finalizers": ["b", "d", "x"]}});
        let patched = apply(PatchType::Strategic, &target, &patch).expect("valid");
        assert_eq!(patched["metadata"]["finalizers"], json!(["a", "a", "c"]));
        // Equal values are found whatever their numbers' or keys' spelling.
        let target = json!({"metadata": {"finalizers": [{"b": 1, "a": [0.0]}, 1]}});
        let patch = json!({"metadata": {"finalizers": [{"a": [-0.0], "b": 1}, 1, 1.0]}});
        let patched = apply(PatchType::Strategic, &target, &patch).expect("valid");
        assert_eq!(
            patched["metadata"]["finalizers"],
            json!([{"a": [0.0], "b": 1}, 1, 1.0])
        );
        // Keyed lists: the first item with the key is the one merged or deleted; duplicates go
        // one at a time, front first; an added item can be patched by a later one.
        let target = json!({"spec": {"containers": [
            {"name": "a", "image": "1"}, {"name": "b", "image": "2"}, {"name": "a", "image": "3"},
            {"image": "keyless"}]}});
        let patch = json!({"spec": {"containers": [
            {"name": "a", "$patch": "delete"}, {"name": "a", "image": "4"},
            {"name": "c", "image": "5"}, {"name": "c", "args": ["x"]},
            {"name": "z", "$patch": "delete"}, {"image": "no key"}]}});
        let patched = apply(PatchType::Strategic, &target, &patch).expect("valid");
        assert_eq!(
            patched["spec"]["containers"],
            json!([{"name": "b", "image": "2"}, {"name": "a", "image": "4"},
                   {"image": "keyless"}, {"name": "c", "image": "5", "args": ["x"]},
                   {"image": "no key"}])
        );
        // An item merged and then deleted by key: the merge keeps its place, the deletion takes it.
        let target = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "a"}]}});
        let patch = json!({"spec": {"containers": [
            {"name": "a", "image": "2"}, {"name": "a", "$patch": "delete"}]}});
        let patched = apply(PatchType::Strategic, &target, &patch).expect("valid");
        assert_eq!(patched["spec"]["containers"], json!([{"name": "a"}]));
        // A patch that nulls an item's key leaves it unreachable by that key afterwards.
        let target =
            json!({"spec": {"containers": [{"name": null, "image": "1"}, {"name": null}]}});
        let patch = json!({"spec": {"containers": [
            {"name": null, "image": "2"}, {"name": null, "$patch": "delete"}]}});
        let patched = apply(PatchType::Strategic, &target, &patch).expect("valid");
        assert_eq!(patched["spec"]["containers"], json!([{"image": "2"}]));
        // $retainKeys keeps only the named fields.
        let target = json!({"spec": {"strategy": {"type": "A", "rollingUpdate": {"x": 1}}}});
        let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "B"}}});
        let patched = apply(PatchType::Strategic, &target, &patch).expect("valid");
        assert_eq!(patched["spec"]["strategy"], json!({"type": "B"}));
    }

    /// Runs `work` on a thread of its own; fails the test if it takes more than 150 s. The sizes
    /// below took about 3 s (debug build) when lists are handled by hash, and over 300 s when each
    /// item is compared with every other (quadratic: the test timed out on the old code). The limit
    /// is far from both, so a loaded machine (CI runs builds beside tests) cannot fail the linear
    /// code, and the quadratic code cannot pass.
    fn within_150s<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = sender.send(work());
        });
        receiver
            .recv_timeout(std::time::Duration::from_secs(150))
            .unwrap_or_else(|_| {
                panic!("the patch took more than 150 s: quadratic in the lists' lengths")
            })
    }

    #[test]
    fn abuse_strategic_patches_of_long_lists_cost_linear_time() {
        const COUNT: usize = 60_000;
        let names =
            |tag: &str| -> Vec<Value> { (0..COUNT).map(|i| json!(format!("{tag}{i}"))).collect() };
        let containers = |tag: &str, image: &str| -> Vec<Value> {
            (0..COUNT)
                .map(|i| json!({"name": format!("{tag}{i}"), "image": image}))
                .collect()
        };
        let data: serde_json::Map<String, Value> =
            (0..COUNT).map(|i| (format!("k{i}"), json!("v"))).collect();
        let target = json!({"metadata": {"finalizers": names("a")}, "data": data,
                            "spec": {"containers": containers("a", "old")}});
        let mut patched_containers = containers("a", "new");
        patched_containers.extend(containers("b", "added"));
        patched_containers.extend(
            (0..COUNT / 2).map(|i| json!({"name": format!("a{}", 2 * i), "$patch": "delete"})),
        );
        let mut retained = names("k");
        retained.truncate(COUNT / 2);
        let patch = json!({"metadata": {"finalizers": names("b"),
                                        "$deleteFromPrimitiveList/finalizers": names("a")},
                           "data": {"$retainKeys": retained},
                           "spec": {"containers": patched_containers}});
        let patched = within_150s(move || apply(PatchType::Strategic, &target, &patch));
        let patched = patched.expect("valid");
        assert_eq!(patched["metadata"]["finalizers"], Value::Array(names("b")));
        assert_eq!(
            patched["data"].as_object().map(|m| m.len()),
            Some(COUNT / 2)
        );
        let list = patched["spec"]["containers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(list.len(), COUNT / 2 + COUNT);
        assert_eq!(list[0], json!({"name": "a1", "image": "new"}));
        assert_eq!(list[COUNT / 2], json!({"name": "b0", "image": "added"}));
    }

    #[test]
    fn json_patch_operations_and_a_failed_test() {
        let target = object(&[("a", json!([1, 2])), ("b", json!({"c/d": 1}))]);
        let ops = json!([
            {"op": "add", "path": "/a/-", "value": 3},
            {"op": "replace", "path": "/b/c~1d", "value": 2},
            {"op": "copy", "from": "/a/0", "path": "/e"},
            {"op": "remove", "path": "/a/1"},
            {"op": "test", "path": "/e", "value": 1}
        ]);
        let patched = apply(PatchType::Json, &target, &ops).expect("valid");
        assert_eq!(patched, json!({"a": [1, 3], "b": {"c/d": 2}, "e": 1}));
        let failing = json!([{"op": "test", "path": "/e", "value": 9}]);
        let error = apply(PatchType::Json, &patched, &failing).expect_err("test fails");
        assert_eq!(error.code, 422);
        let missing = json!([{"op": "remove", "path": "/nope"}]);
        assert_eq!(
            apply(PatchType::Json, &patched, &missing).map_err(|e| e.code),
            Err(422)
        );
        let statuses = [
            (json!({"op": "add"}), 400),
            (json!([{"op": "frobnicate", "path": "/a"}]), 400),
            (json!([{"op": "add", "value": 1}]), 400),
            (json!(["add"]), 400),
            (json!([{"op": "add", "path": "/x"}]), 422),
            (json!([{"op": "copy", "path": "/x"}]), 422),
            (json!([{"op": "add", "path": "no-slash", "value": 1}]), 422),
            (json!([{"op": "move", "from": "/b", "path": "/b/c"}]), 422),
            (json!([{"op": "add", "path": "/a/7", "value": 1}]), 422),
        ];
        for (operations, code) in statuses {
            let answer = apply(PatchType::Json, &patched, &operations).map_err(|e| e.code);
            assert_eq!(answer, Err(code), "{operations}");
        }
        let whole = json!([{"op": "replace", "path": "", "value": {"z": 1}}]);
        assert_eq!(
            apply(PatchType::Json, &patched, &whole).ok(),
            Some(json!({"z": 1}))
        );
    }

    /// `count` copies of the object's `spec` into itself, each doubling it.
    fn doubling(count: usize) -> Value {
        let operations: Vec<Value> = (0..count)
            .map(|i| json!({"op": "copy", "from": "/spec", "path": format!("/spec/c{i}")}))
            .collect();
        Value::Array(operations)
    }

    /// The error of a patch that must be refused (without printing a huge document if it was not).
    fn refused(result: Result<Value, StatusError>) -> StatusError {
        match result {
            Ok(_) => panic!("the patch was applied"),
            Err(error) => error,
        }
    }

    #[test]
    fn abuse_json_patch_copies_are_bounded_like_kube_apiserver() {
        let target = json!({"metadata": {"name": "x"}, "spec": {"blob": "a".repeat(1000)}});
        // 40 doublings would be 2^40 KB. 13 (8 MB) are enough to pass the limit, refused at the
        // 12th copy, and few enough that without the limit this test fails instead of exhausting
        // the machine's memory.
        let error = refused(apply(PatchType::Json, &target, &doubling(13)));
        assert_eq!((error.code, error.reason), (422, "Invalid"));
        assert!(
            error
                .message
                .contains("Unable to complete the copy, the accumulated size increase of copy is")
                && error.message.ends_with("exceeding the limit 3145728"),
            "{}",
            error.message
        );
        // A few doublings are fine.
        let patched = apply(PatchType::Json, &target, &doubling(3)).expect("small copies");
        assert!(patched.pointer("/spec/c2/c1/c0/blob").is_some());
        // The limit is on the sum, and exactly the limit passes, as evanphx/json-patch counts it:
        // a copied string costs its length plus two quotes.
        let third = MAX_JSON_PATCH_COPY_BYTES / 3 - 2;
        let target = json!({"s": "b".repeat(third)});
        let copies = |count: usize| {
            let operations: Vec<Value> = (0..count)
                .map(|i| json!({"op": "copy", "from": "/s", "path": format!("/c{i}")}))
                .collect();
            Value::Array(operations)
        };
        assert!(apply(PatchType::Json, &target, &copies(3)).is_ok());
        let error = refused(apply(PatchType::Json, &target, &copies(4)));
        assert!(error.message.contains(&format!(
            "accumulated size increase of copy is {}, exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}",
            4 * (third + 2)
        )));
    }

    #[test]
    fn abuse_json_patch_operations_are_at_most_10000() {
        let target = json!({"a": 1});
        let tests = |count: usize| {
            Value::Array(vec![json!({"op": "test", "path": "/a", "value": 1}); count])
        };
        assert!(apply(PatchType::Json, &target, &tests(MAX_JSON_PATCH_OPERATIONS)).is_ok());
        let error = refused(apply(
            PatchType::Json,
            &target,
            &tests(MAX_JSON_PATCH_OPERATIONS + 1),
        ));
        assert_eq!(
            (error.code, error.reason, error.message.as_str()),
            (
                413,
                "RequestEntityTooLarge",
                "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
            )
        );
        // A list that is not all operations is the 400 it always was.
        let mut mixed = vec![json!({"op": "test", "path": "/a", "value": 1}); 10_001];
        mixed.push(json!("add"));
        let error = refused(apply(PatchType::Json, &target, &Value::Array(mixed)));
        assert_eq!(error.code, 400);
    }

    /// `{"a": {"a": ... {}}}`, `levels` deep, built without recursion.
    fn nested(levels: usize) -> Value {
        let mut value = json!({});
        for _ in 1..levels {
            value = json!({"a": value});
        }
        value
    }

    /// `/a/a/.../a`, `levels` segments.
    fn pointer(levels: usize) -> String {
        "/a".repeat(levels)
    }

    #[test]
    fn abuse_json_patch_nesting_is_bounded() {
        assert_eq!(
            (depth(&json!(1)), depth(&json!([])), depth(&nested(5))),
            (0, 1, 5)
        );
        // add: 1 + 100 levels is fine; 100 more below that is not.
        let target = json!({"x": {"y": 1}});
        let shallow = json!([{"op": "add", "path": "/a", "value": nested(100)}]);
        let patched = apply(PatchType::Json, &target, &shallow).expect("101 levels");
        assert_eq!(depth(&patched), 101);
        let deeper =
            json!([{"op": "add", "path": format!("{}/b", pointer(100)), "value": nested(100)}]);
        let error = refused(apply(PatchType::Json, &patched, &deeper));
        assert_eq!(error.code, 422);
        assert!(
            error
                .message
                .contains("201 levels deep, deeper than the limit of 127"),
            "{}",
            error.message
        );
        // copy: `/a` copied to its own innermost object doubles its depth each time; 18 copies
        // (within the copy limit) would nest it 2^18 levels deep, past any thread's stack. 11
        // (2^11 levels, refused at the 7th) keep this test a failure, not a crash, without the
        // depth limit.
        let mut levels = 1;
        let mut doubling = Vec::new();
        for _ in 0..11 {
            doubling.push(json!({"op": "copy", "from": "/a", "path": pointer(levels + 1)}));
            levels *= 2;
        }
        let error = refused(apply(
            PatchType::Json,
            &json!({"a": {}}),
            &Value::Array(doubling),
        ));
        assert_eq!(error.code, 422);
        assert!(
            error.message.contains("copy operation at"),
            "{}",
            error.message
        );
        // move: sinking a shallow value to the bottom of a deep object is fine (counted exactly
        // once the estimate passes the limit)...
        let sink = json!([{"op": "move", "from": "/x", "path": format!("{}/x", pointer(100))}]);
        let sunk = apply(PatchType::Json, &patched, &sink).expect("the moved value is shallow");
        assert_eq!(depth(&sunk), 102);
        // ...sinking a deep one is refused...
        let two_deep = json!({"deep": nested(100), "x": nested(40)});
        let sink = json!([{"op": "move", "from": "/deep", "path": format!("/x{}", pointer(30))}]);
        let error = refused(apply(PatchType::Json, &two_deep, &sink));
        assert!(
            error.message.contains("131 levels deep"),
            "{}",
            error.message
        );
        // ...and raising one is fine.
        let raise = json!([{"op": "move", "from": format!("/x{}", pointer(30)), "path": "/up"}]);
        assert!(apply(PatchType::Json, &two_deep, &raise).is_ok());
        // An object already deeper than the limit may stay as deep.
        let deep = json!({"d": nested(150)});
        let edit = json!([{"op": "replace", "path": format!("/d{}", pointer(10)), "value": 1}]);
        assert!(apply(PatchType::Json, &deep, &edit).is_ok());
    }

    #[test]
    fn abuse_json_patch_array_shifts_are_bounded() {
        let target = json!({"list": vec![0; 20_000]});
        // Appending moves nothing, whatever the length.
        let appends = Value::Array(vec![
            json!({"op": "add", "path": "/list/-", "value": 1});
            MAX_JSON_PATCH_OPERATIONS
        ]);
        assert!(apply(PatchType::Json, &target, &appends).is_ok());
        // Removing the first element 10,000 times moves about 150 million: refused.
        let removals = Value::Array(vec![
            json!({"op": "remove", "path": "/list/0"});
            MAX_JSON_PATCH_OPERATIONS
        ]);
        let error = refused(apply(PatchType::Json, &target, &removals));
        assert_eq!(error.code, 422);
        assert!(
            error.message.contains("array elements"),
            "{}",
            error.message
        );
        // A thousand of them (20 million) are fine.
        let some = Value::Array(vec![json!({"op": "remove", "path": "/list/0"}); 1000]);
        let patched = apply(PatchType::Json, &target, &some).expect("within the limit");
        assert_eq!(patched["list"].as_array().map(Vec::len), Some(19_000));
    }

    #[test]
    fn apply_patches_are_unsupported() {
        let error = PatchType::from_content_type("application/apply-patch+yaml").expect_err("415");
        assert_eq!(error.code, 415);
    }
}
