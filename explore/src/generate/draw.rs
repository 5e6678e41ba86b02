//! Drawing a sequence: every move the schema allows, shuffled with the seed, each made concrete
//! against the generator's record of the object when its turn comes.
//!
//! ```text
//!  Node tree ──moves()──▶ [set /spec/replicas 0, set /spec/replicas 5, add /spec/tags,
//!                          remove /spec/note, flip /spec/paused, delete, ...]
//!        seeded shuffle ──▶ one pass; a new shuffle when it is used up
//!  record: Option<spec> ──each move, concrete or skipped (already so, list full)──▶ Edit
//!        the first edit creates; after a delete, the next one re-creates
//! ```
//!
//! A move is an intent ("add an item to /spec/tags"); only when its turn comes does it become
//! an [`Edit`] with the whole new value, read off the record. So every field's boundary values
//! come up once per pass, in an order only the seed decides.

use serde_json::Value;

use super::schema::Node;
use super::sequence::{Edit, get};

/// What a step may do to one field (or to the whole object).
#[derive(Debug, Clone, PartialEq)]
enum Move {
    /// Set a scalar field to one of its boundary values.
    Set(Vec<String>, Value),
    /// Turn a boolean over.
    Flip(Vec<String>),
    /// Append a new distinct item to a list (below its `maxItems`).
    Append(Vec<String>),
    /// Drop a list's last item (above its `minItems`).
    DropLast(Vec<String>),
    /// Reverse a list of two or more items.
    Reverse(Vec<String>),
    /// Fill a list to its `maxItems`.
    Fill(Vec<String>),
    /// Empty a list (if `minItems` is 0).
    Empty(Vec<String>),
    /// Add a key to a map (below its `maxProperties`).
    AddKey(Vec<String>),
    /// Remove a map's last key (above its `minProperties`).
    RemoveKey(Vec<String>),
    /// Remove an optional property.
    Remove(Vec<String>),
    /// Delete the object (the next edit re-creates it).
    Delete,
}

/// Every move the schema of `spec` allows, in the schema's order.
fn moves(spec: &Node) -> Vec<Move> {
    let mut all = Vec::new();
    collect(spec, &mut Vec::new(), &mut all);
    all.push(Move::Delete);
    all
}

fn collect(node: &Node, path: &mut Vec<String>, all: &mut Vec<Move>) {
    match node {
        Node::Integer(_) | Node::Number(_) | Node::String(_) => all.extend(
            node.boundaries()
                .into_iter()
                .map(|value| Move::Set(path.clone(), value)),
        ),
        Node::Boolean { .. } => all.push(Move::Flip(path.clone())),
        Node::Array(list) => {
            all.push(Move::Append(path.clone()));
            all.push(Move::DropLast(path.clone()));
            all.push(Move::Reverse(path.clone()));
            all.push(Move::Fill(path.clone()));
            if list.min == 0 {
                all.push(Move::Empty(path.clone()));
            }
        }
        Node::Map(_) => {
            all.push(Move::AddKey(path.clone()));
            all.push(Move::RemoveKey(path.clone()));
        }
        Node::Object(fields) => {
            for (name, child) in &fields.properties {
                path.push(name.clone());
                collect(child, path, all);
                if !fields.required.contains(name) {
                    all.push(Move::Remove(path.clone()));
                }
                path.pop();
            }
        }
        Node::Opaque { .. } => {}
    }
}

/// The sequence's own random numbers (SplitMix64), from the seed alone.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Fisher–Yates.
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

/// `steps` edits (at least the create) to an object whose spec `spec` describes, starting from
/// `first` (its typical value), drawn with `seed`.
pub(crate) fn draw(spec: &Node, first: Value, steps: usize, seed: u64) -> Vec<Edit> {
    let all = moves(spec);
    let mut random = SplitMix(seed ^ 0x6e6e_7261_7465_6421);
    let mut edits = vec![Edit::Create {
        spec: first.clone(),
    }];
    let mut record = Some(first.clone());
    let mut last = first;
    let mut pass: Vec<Move> = Vec::new();
    // Moves skipped in a row: a whole pass of them means nothing can change any more.
    let mut skipped = 0;
    while edits.len() < steps && skipped <= all.len() {
        let Some(current) = record.clone() else {
            let create = Edit::Create { spec: last.clone() };
            create.apply(&mut record);
            edits.push(create);
            continue;
        };
        if pass.is_empty() {
            pass = all.clone();
            random.shuffle(&mut pass);
        }
        let Some(next) = pass.pop() else {
            break;
        };
        match concrete(spec, &next, &current) {
            Some(edit) => {
                skipped = 0;
                edit.apply(&mut record);
                if let Some(now) = &record {
                    last = now.clone();
                }
                edits.push(edit);
            }
            None => skipped += 1,
        }
    }
    edits
}

/// The edit `step` makes of `spec` (the record), or `None` if it would change nothing or
/// leave the schema's bounds.
fn concrete(root: &Node, step: &Move, spec: &Value) -> Option<Edit> {
    let list = |path: &[String]| -> Vec<Value> {
        get(spec, path)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let bounds = |path: &[String]| match root.at(path) {
        Some(Node::Array(list)) => Some((list.min, list.max, &list.items)),
        _ => None,
    };
    let set = |path: &[String], value: Value| {
        (get(spec, path) != Some(&value)).then(|| Edit::Set {
            path: path.to_vec(),
            value,
        })
    };
    match step {
        Move::Set(path, value) => set(path, value.clone()),
        Move::Flip(path) => {
            let now = get(spec, path).and_then(Value::as_bool).unwrap_or(false);
            set(path, Value::Bool(!now))
        }
        Move::Append(path) => {
            let (_, max, items) = bounds(path)?;
            let mut now = list(path);
            (now.len() < max).then_some(())?;
            now.push(fresh(items, &now)?);
            set(path, Value::Array(now))
        }
        Move::Fill(path) => {
            let (_, max, items) = bounds(path)?;
            let mut now = list(path);
            while now.len() < max {
                let item = fresh(items, &now)?;
                now.push(item);
            }
            set(path, Value::Array(now))
        }
        Move::DropLast(path) => {
            let (min, _, _) = bounds(path)?;
            let mut now = list(path);
            (now.len() > min).then_some(())?;
            now.pop();
            set(path, Value::Array(now))
        }
        Move::Reverse(path) => {
            let mut now = list(path);
            now.reverse();
            set(path, Value::Array(now))
        }
        Move::Empty(path) => set(path, Value::Array(Vec::new())),
        Move::AddKey(path) => {
            let Some(Node::Map(dict)) = root.at(path) else {
                return None;
            };
            let keys = get(spec, path).and_then(Value::as_object);
            let count = keys.map_or(0, |keys| keys.len());
            (count < dict.max).then_some(())?;
            let key = (0..)
                .map(|i| format!("k{i}"))
                .find(|key| !keys.is_some_and(|keys| keys.contains_key(key)))?;
            let value = dict.values.nth(count)?;
            let mut at = path.clone();
            at.push(key);
            Some(Edit::Set { path: at, value })
        }
        Move::RemoveKey(path) => {
            let Some(Node::Map(dict)) = root.at(path) else {
                return None;
            };
            let keys = get(spec, path).and_then(Value::as_object)?;
            (keys.len() > dict.min).then_some(())?;
            let mut at = path.clone();
            at.push(keys.keys().next_back()?.clone());
            Some(Edit::Remove { path: at })
        }
        Move::Remove(path) => get(spec, path).map(|_| Edit::Remove { path: path.clone() }),
        Move::Delete => Some(Edit::Delete),
    }
}

/// An item of `items` not in `now` (lists whose items must differ, and a clearer trace for the
/// others).
fn fresh(items: &Node, now: &[Value]) -> Option<Value> {
    (0..now.len() + MAX_TRIES)
        .filter_map(|k| items.nth(k))
        .find(|item| !now.contains(item))
}

/// How far past a list's length [`fresh`] looks for a new item.
const MAX_TRIES: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pool() -> Node {
        Node::parse(&json!({
            "type": "object",
            "required": ["replicas"],
            "properties": {
                "replicas": {"type": "integer", "minimum": 0, "maximum": 5},
                "tags": {"type": "array", "maxItems": 3, "items": {"type": "string"}},
                "note": {"type": "string", "maxLength": 8},
                "paused": {"type": "boolean"}
            }
        }))
    }

    #[test]
    fn explore_generate_a_seed_draws_one_sequence() {
        let spec = pool();
        let first = spec.typical().unwrap_or_default();
        let one = draw(&spec, first.clone(), 20, 7);
        assert_eq!(one, draw(&spec, first.clone(), 20, 7));
        assert_ne!(one, draw(&spec, first, 20, 8));
        assert_eq!(one.len(), 20);
    }

    #[test]
    fn explore_generate_every_boundary_comes_up_within_a_pass() {
        let spec = pool();
        let first = spec.typical().unwrap_or_default();
        let edits = draw(&spec, first, 60, 3);
        for replicas in [0, 1, 4, 5] {
            assert!(
                edits
                    .iter()
                    .any(|edit| matches!(edit, Edit::Set { path, value }
                    if path == &["replicas"] && *value == json!(replicas))),
                "replicas={replicas} never set"
            );
        }
        assert!(
            edits
                .iter()
                .any(|e| matches!(e, Edit::Remove { path } if path == &["note"]))
        );
        // Lists stay within maxItems; a delete is always followed by a create.
        for (at, edit) in edits.iter().enumerate() {
            if let Edit::Set { path, value } = edit {
                if path == &["tags"] {
                    assert!(value.as_array().is_some_and(|tags| tags.len() <= 3));
                }
            }
            if *edit == Edit::Delete {
                assert!(matches!(
                    edits.get(at + 1),
                    None | Some(Edit::Create { .. })
                ));
            }
        }
    }
}
