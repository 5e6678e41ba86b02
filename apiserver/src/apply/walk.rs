//! The four walks over objects that apply is made of, each guided by a [`Shape`]:
//!
//! - [`fields_of`]: the set of paths an applied configuration sets (what its manager will own);
//! - [`merge`]: the configuration merged into the live object (maps by key, keyed lists by their
//!   keys, sets by value, anything atomic replaced);
//! - [`compare`]: what changed between two versions of an object — the paths added, modified and
//!   removed (a map or list item added or removed whole counts too, so an updater owns a `labels`
//!   map it created, not only the labels in it);
//! - [`remove`]: an object without some paths (the fields an applier gave up that no one owns).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::fieldset::{self, Element, FieldSet, Path};
use super::shape::{ListKind, MapKind, Shape, key_default};

/// A list item that cannot be identified: a keyed list's item without a key field, or a
/// duplicate. kube-apiserver refuses these objects too.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ItemError {
    /// A keyed list's item lacks a key field.
    #[error("{path}: associative list with keys has an element that omits key field {key:?}")]
    MissingKey { path: String, key: String },
    /// A keyed list's item is not an object.
    #[error("{path}: associative list with keys has an element that is not a map")]
    NotAnObject { path: String },
    /// Two items of a keyed list or set with the same identity.
    #[error("{path}: duplicate entries for key {element}")]
    Duplicate { path: String, element: String },
}

/// The element that identifies `item` (at `position`) in a list of `kind`; `None` for atomic lists.
fn item_element(
    kind: &ListKind,
    shape: &Shape<'_>,
    item: &Value,
    position: usize,
    path: &[Element],
) -> Result<Element, ItemError> {
    let keys: Vec<&str> = match kind {
        ListKind::Map(keys) => keys.clone(),
        ListKind::CustomMap(keys) => keys.iter().map(String::as_str).collect(),
        ListKind::Set => return Ok(fieldset::value(item)),
        ListKind::Atomic => return Ok(fieldset::index(position)),
    };
    let object = item.as_object().ok_or_else(|| ItemError::NotAnObject {
        path: fieldset::display(path),
    })?;
    let mut fields = Map::new();
    for key in keys {
        let built_in = matches!(shape, Shape::BuiltIn { .. });
        let value = match object.get(key) {
            Some(value) => value.clone(),
            None => key_default(key)
                .filter(|_| built_in)
                .ok_or_else(|| ItemError::MissingKey {
                    path: fieldset::display(path),
                    key: key.to_string(),
                })?,
        };
        fields.insert(key.to_string(), value);
    }
    Ok(fieldset::key(&fields))
}

/// A new item of a built-in keyed list with its missing key fields defaulted (a port's
/// `protocol`), as kube-apiserver's defaulting of the merged object fills them.
fn with_key_defaults(item: &Value, kind: &ListKind, shape: &Shape<'_>) -> Value {
    let mut item = item.clone();
    if let (ListKind::Map(keys), Shape::BuiltIn { .. }, Some(map)) =
        (kind, shape, item.as_object_mut())
    {
        for key in keys {
            if let (false, Some(default)) = (map.contains_key(*key), key_default(key)) {
                map.insert((*key).to_string(), default);
            }
        }
    }
    item
}

/// A granular list's items with their elements, refusing duplicates.
///
/// Linear in the list's length: duplicates are found with a hash set of the elements seen so far
/// (a list may be hundreds of thousands of items long, a `finalizers` set in a 3 MiB body, and
/// this runs on every write). The first item that repeats an earlier one
/// is the one reported, as a scan from the front would report it.
fn keyed_items<'v>(
    kind: &ListKind,
    shape: &Shape<'_>,
    items: &'v [Value],
    path: &[Element],
) -> Result<Vec<(Element, &'v Value)>, ItemError> {
    let mut out: Vec<(Element, &Value)> = Vec::with_capacity(items.len());
    let mut seen: HashSet<Element> = HashSet::with_capacity(items.len());
    for (position, item) in items.iter().enumerate() {
        let element = item_element(kind, shape, item, position, path)?;
        if !seen.insert(element.clone()) {
            return Err(ItemError::Duplicate {
                path: fieldset::display(path),
                element,
            });
        }
        out.push((element, item));
    }
    Ok(out)
}

/// The items of [`keyed_items`] by element, to find an item's counterpart in the other version of
/// the list in constant time. Elements are unique there, so each maps to exactly one item.
fn by_element<'k, 'v>(keyed: &'k [(Element, &'v Value)]) -> HashMap<&'k str, &'v Value> {
    keyed
        .iter()
        .map(|(element, item)| (element.as_str(), *item))
        .collect()
}

fn child(path: &[Element], element: Element) -> Path {
    let mut out = path.to_vec();
    out.push(element);
    out
}

/// Whether a built-in kind's field is left out of the typed object (Go's `omitempty` on an empty
/// map), so that setting it to `{}` sets nothing.
fn is_omitted(value: &Value, shape: &Shape<'_>) -> bool {
    matches!(shape, Shape::BuiltIn { .. })
        && shape.map_kind() == MapKind::Map
        && value.as_object().is_some_and(Map::is_empty)
}

/// The paths `value` sets: leaves (scalars, atomic values), empty or null fields, map keys and
/// list items. Objects of struct type are only on the way to their fields.
pub fn fields_of(value: &Value, shape: &Shape<'_>) -> Result<FieldSet, ItemError> {
    let mut set = FieldSet::new();
    collect_fields(value, shape, &[], &mut set)?;
    Ok(set)
}

fn collect_fields(
    value: &Value,
    shape: &Shape<'_>,
    path: &[Element],
    set: &mut FieldSet,
) -> Result<(), ItemError> {
    if matches!(shape, Shape::Deduced) {
        // A value of deduced type is a scalar too: owned itself, besides its keys if an object.
        set.insert(path);
    }
    match value {
        Value::Object(map) => {
            let kind = shape.map_kind();
            if kind == MapKind::Atomic {
                set.insert(path);
                return Ok(());
            }
            for (name, inner) in map {
                let here = child(path, fieldset::field(name));
                let inner_shape = shape.field(name);
                // An empty map is owned as a field of its own even where the typed object leaves
                // it out (`labels: {}`), as 1.37 records it (1.20 recorded nothing for it).
                collect_fields(inner, &inner_shape, &here, set)?;
                let empty = inner.is_null() || inner.as_object().is_some_and(Map::is_empty);
                if empty || kind == MapKind::Map {
                    set.insert(&here);
                }
            }
        }
        Value::Array(items) => {
            let kind = shape.list_kind();
            if kind == ListKind::Atomic {
                set.insert(path);
                return Ok(());
            }
            let item_shape = shape.item();
            for (element, item) in keyed_items(&kind, shape, items, path)? {
                let here = child(path, element);
                collect_fields(item, &item_shape, &here, set)?;
                set.insert(&here);
            }
        }
        _ => set.insert(path),
    }
    Ok(())
}

/// `config` merged into `live`: the configuration's values win; objects merge field by field,
/// keyed lists and sets item by item (the live order first, new items after, in the
/// configuration's order); anything atomic is replaced. A null in the configuration removes.
pub fn merge(live: &Value, config: &Value, shape: &Shape<'_>) -> Result<Value, ItemError> {
    merge_at(live, config, shape, &[])
}

fn merge_at(
    live: &Value,
    config: &Value,
    shape: &Shape<'_>,
    path: &[Element],
) -> Result<Value, ItemError> {
    match (live, config) {
        (Value::Object(live_map), Value::Object(config_map))
            if shape.map_kind() != MapKind::Atomic =>
        {
            let mut out = live_map.clone();
            for (name, value) in config_map {
                if value.is_null() {
                    out.remove(name);
                    continue;
                }
                if !live_map.contains_key(name) && is_omitted(value, &shape.field(name)) {
                    continue;
                }
                let merged = match live_map.get(name) {
                    Some(current) => {
                        let here = child(path, fieldset::field(name));
                        merge_at(current, value, &shape.field(name), &here)?
                    }
                    None => value.clone(),
                };
                out.insert(name.clone(), merged);
            }
            Ok(Value::Object(out))
        }
        (Value::Array(live_items), Value::Array(config_items)) => {
            let kind = shape.list_kind();
            if kind == ListKind::Atomic {
                return Ok(config.clone());
            }
            let item_shape = shape.item();
            let live_keyed = keyed_items(&kind, shape, live_items, path)?;
            let config_keyed = keyed_items(&kind, shape, config_items, path)?;
            let live_index = by_element(&live_keyed);
            let config_index = by_element(&config_keyed);
            let mut out = Vec::with_capacity(live_keyed.len() + config_keyed.len());
            for (element, item) in &live_keyed {
                match config_index.get(element.as_str()) {
                    Some(wanted) => {
                        let here = child(path, element.clone());
                        out.push(merge_at(item, wanted, &item_shape, &here)?);
                    }
                    None => out.push((*item).clone()),
                }
            }
            for (element, item) in &config_keyed {
                if !live_index.contains_key(element.as_str()) {
                    out.push(with_key_defaults(item, &kind, shape));
                }
            }
            Ok(Value::Array(out))
        }
        _ => Ok(config.clone()),
    }
}

/// What changed from `old` to `new`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Paths only in `new` (an added map or item with everything in it).
    pub added: FieldSet,
    /// Leaves with another value.
    pub modified: FieldSet,
    /// Paths only in `old`.
    pub removed: FieldSet,
}

impl Comparison {
    /// Whether nothing changed.
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }

    /// Added or modified: what a writer takes from other managers.
    pub fn changed(&self) -> FieldSet {
        self.added.union(&self.modified)
    }
}

/// The paths added, modified and removed from `old` to `new`.
pub fn compare(old: &Value, new: &Value, shape: &Shape<'_>) -> Result<Comparison, ItemError> {
    let mut comparison = Comparison::default();
    compare_at(Some(old), Some(new), shape, &[], &mut comparison)?;
    Ok(comparison)
}

/// Whether a value is a leaf for `shape`: a scalar, or an atomic object or list.
fn is_leaf(value: &Value, shape: &Shape<'_>) -> bool {
    match value {
        Value::Object(_) => shape.map_kind() == MapKind::Atomic,
        Value::Array(_) => shape.list_kind() == ListKind::Atomic,
        _ => true,
    }
}

fn compare_at(
    old: Option<&Value>,
    new: Option<&Value>,
    shape: &Shape<'_>,
    path: &[Element],
    out: &mut Comparison,
) -> Result<(), ItemError> {
    // A null (a Go zero value's nil list or map) compares as an empty one of the new value's type.
    let empty_object = Value::Object(Map::new());
    let empty_list = Value::Array(Vec::new());
    let old = match (old, new) {
        (Some(Value::Null), Some(Value::Object(_))) => Some(&empty_object),
        (Some(Value::Null), Some(Value::Array(_))) => Some(&empty_list),
        _ => old,
    };
    let same_type = match (old, new) {
        (Some(a), Some(b)) => std::mem::discriminant(a) == std::mem::discriminant(b),
        _ => true,
    };
    let leaf = !same_type || old.or(new).is_none_or(|v| is_leaf(v, shape));
    if leaf {
        match (old, new) {
            (None, Some(_)) => out.added.insert(path),
            (Some(_), None) => out.removed.insert(path),
            (Some(a), Some(b)) if a != b => out.modified.insert(path),
            _ => {}
        }
        return Ok(());
    }
    match (old.or(new), new.or(old)) {
        (Some(Value::Object(_)), _) => {
            let empty = Map::new();
            let old_map = old.and_then(Value::as_object).unwrap_or(&empty);
            let new_map = new.and_then(Value::as_object).unwrap_or(&empty);
            let mut names: Vec<&String> = old_map.keys().chain(new_map.keys()).collect();
            names.sort();
            names.dedup();
            for name in names {
                let here = child(path, fieldset::field(name));
                compare_at(
                    old_map.get(name),
                    new_map.get(name),
                    &shape.field(name),
                    &here,
                    out,
                )?;
            }
        }
        (Some(Value::Array(_)), _) => {
            let kind = shape.list_kind();
            let item_shape = shape.item();
            let no_items = Vec::new();
            let old_items = old.and_then(Value::as_array).unwrap_or(&no_items);
            let new_items = new.and_then(Value::as_array).unwrap_or(&no_items);
            let old_keyed = keyed_items(&kind, shape, old_items, path)?;
            let new_keyed = keyed_items(&kind, shape, new_items, path)?;
            let old_index = by_element(&old_keyed);
            let new_index = by_element(&new_keyed);
            for (element, item) in &old_keyed {
                let counterpart = new_index.get(element.as_str()).copied();
                let here = child(path, element.clone());
                compare_at(Some(item), counterpart, &item_shape, &here, out)?;
            }
            for (element, item) in &new_keyed {
                if !old_index.contains_key(element.as_str()) {
                    let here = child(path, element.clone());
                    compare_at(None, Some(item), &item_shape, &here, out)?;
                }
            }
        }
        _ => {}
    }
    match (old, new) {
        (None, Some(_)) => out.added.insert(path),
        (Some(_), None) => out.removed.insert(path),
        _ => {}
    }
    Ok(())
}

/// `value` without the paths of `set` (removing a map key or a list item takes what is in it); a
/// map or list that this empties is dropped too, as Go's `omitempty` drops it from a stored object.
pub fn remove(value: &mut Value, set: &FieldSet, shape: &Shape<'_>) -> Result<(), ItemError> {
    remove_at(value, set, shape, &[], true)
}

/// [`remove`], but a map or list it empties stays, empty: the merged object as structured-merge-diff
/// compares it with the live one. A map emptied by a removal is still there for it, so its owners
/// keep owning it (`f:labels: {}`) though the stored object will not show it. Calling [`remove`]
/// with the same set afterwards drops the emptied ones.
pub fn remove_keeping_emptied(
    value: &mut Value,
    set: &FieldSet,
    shape: &Shape<'_>,
) -> Result<(), ItemError> {
    remove_at(value, set, shape, &[], false)
}

fn remove_at(
    value: &mut Value,
    set: &FieldSet,
    shape: &Shape<'_>,
    path: &[Element],
    drop_emptied: bool,
) -> Result<(), ItemError> {
    match value {
        Value::Object(map) => {
            let names: Vec<String> = map.keys().cloned().collect();
            for name in names {
                let here = child(path, fieldset::field(&name));
                if set.has(&here) {
                    map.remove(&name);
                } else if set.has_at_or_below(&here) {
                    let inner_shape = shape.field(&name);
                    if let Some(inner) = map.get_mut(&name) {
                        remove_at(inner, set, &inner_shape, &here, drop_emptied)?;
                        // An emptied map or list is dropped, as Go's `omitempty` drops it.
                        let emptied = drop_emptied
                            && match inner {
                                Value::Object(m) => {
                                    m.is_empty() && inner_shape.map_kind() == MapKind::Map
                                }
                                Value::Array(items) => items.is_empty(),
                                _ => false,
                            };
                        if emptied {
                            map.remove(&name);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            let kind = shape.list_kind();
            if kind == ListKind::Atomic {
                return Ok(());
            }
            let item_shape = shape.item();
            let elements: Vec<Element> = keyed_items(&kind, shape, items, path)?
                .into_iter()
                .map(|(e, _)| e)
                .collect();
            let mut kept = Vec::with_capacity(items.len());
            for (element, mut item) in elements.into_iter().zip(items.drain(..)) {
                let here = child(path, element);
                if set.has(&here) {
                    continue;
                }
                if set.has_at_or_below(&here) {
                    remove_at(&mut item, set, &item_shape, &here, drop_emptied)?;
                }
                kept.push(item);
            }
            *items = kept;
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(containers: Value) -> Value {
        json!({"spec": {"selector": {"matchLabels": {"a": "b"}},
                        "template": {"spec": {"containers": containers}}}})
    }

    #[test]
    fn fields_of_a_deployment_as_kube_apiserver_lists_them() {
        let shape = Shape::built_in("Deployment");
        let object = deployment(json!([{"name": "c", "image": "i", "args": ["x"],
            "ports": [{"containerPort": 80}]}]));
        let set = fields_of(&object, &shape).expect("valid");
        assert_eq!(
            set.to_fields_v1(),
            json!({"f:spec": {"f:selector": {}, "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"c\"}": {".": {}, "f:args": {}, "f:image": {}, "f:name": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}}}}}})
        );
        let nameless = deployment(json!([{"image": "i"}]));
        assert!(matches!(
            fields_of(&nameless, &shape),
            Err(ItemError::MissingKey { .. })
        ));
    }

    #[test]
    fn merge_keeps_live_order_and_replaces_atomic_lists() {
        let shape = Shape::built_in("Deployment");
        let live = deployment(
            json!([{"name": "a", "image": "1", "args": ["x", "y"]}, {"name": "b", "image": "2"}]),
        );
        let config = deployment(json!([{"name": "c", "image": "3"}, {"name": "a", "args": ["z"]}]));
        let merged = merge(&live, &config, &shape).expect("valid");
        assert_eq!(
            merged["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "1", "args": ["z"]}, {"name": "b", "image": "2"},
                   {"name": "c", "image": "3"}])
        );
    }

    #[test]
    fn compare_counts_added_maps_and_removed_items() {
        let shape = Shape::built_in("ConfigMap");
        let old = json!({"metadata": {}, "data": {"k": "1", "j": "2"}});
        let new = json!({"metadata": {"labels": {"x": "1"}}, "data": {"k": "3"}});
        let comparison = compare(&old, &new, &shape).expect("valid");
        assert_eq!(
            comparison.added.to_fields_v1(),
            json!({"f:metadata": {"f:labels": {".": {}, "f:x": {}}}})
        );
        assert_eq!(
            comparison.modified.to_fields_v1(),
            json!({"f:data": {"f:k": {}}})
        );
        assert_eq!(
            comparison.removed.to_fields_v1(),
            json!({"f:data": {"f:j": {}}})
        );
    }

    /// Runs `work` on a thread of its own; fails the test if it takes more than 150 s. The sizes
    /// below took 4.4 s (debug build) when lists are handled by hash, and over 300 s when each
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
                panic!("the walk took more than 150 s: quadratic in the list's length")
            })
    }

    /// A ConfigMap with `count` distinct finalizers (a set) and as many env-like keyed items.
    fn many_items(count: usize, tag: &str) -> Value {
        let finalizers: Vec<Value> = (0..count)
            .map(|i| json!(format!("e.io/{tag}{i}")))
            .collect();
        let containers: Vec<Value> = (0..count)
            .map(|i| json!({"name": format!("{tag}{i}"), "image": "i"}))
            .collect();
        json!({"metadata": {"finalizers": finalizers},
               "spec": {"template": {"spec": {"containers": containers}}}})
    }

    #[test]
    fn abuse_long_sets_and_keyed_lists_are_walked_in_linear_time() {
        const COUNT: usize = 60_000;
        let (fields, merged, comparison, removed) = within_150s(|| {
            let shape = Shape::built_in("Deployment");
            let old = many_items(COUNT, "a");
            let new = many_items(COUNT, "b");
            let fields = fields_of(&old, &shape).map(|set| set.paths().len());
            let merged = merge(&old, &new, &shape);
            let comparison = compare(&old, &new, &shape);
            let mut object = old.clone();
            let removed = fields_of(&new, &shape)
                .and_then(|set| remove(&mut object, &set, &shape))
                .map(|()| object);
            (fields, merged, comparison, removed)
        });
        // Each finalizer and each container's item, name and image.
        assert_eq!(fields, Ok(COUNT * 4));
        let merged = merged.expect("valid");
        assert_eq!(
            merged["metadata"]["finalizers"].as_array().map(Vec::len),
            Some(2 * COUNT)
        );
        assert_eq!(merged["metadata"]["finalizers"][COUNT], json!("e.io/b0"));
        let comparison = comparison.expect("valid");
        assert_eq!(comparison.added.paths().len(), COUNT * 4);
        assert_eq!(comparison.removed.paths().len(), COUNT * 4);
        // Nothing of `new` is in `old`: removing it takes nothing away.
        assert_eq!(removed, Ok(many_items(COUNT, "a")));
        // A duplicate is still found, wherever it is.
        let mut twice = many_items(1000, "a");
        twice["metadata"]["finalizers"][999] = json!("e.io/a3");
        assert!(matches!(
            fields_of(&twice, &Shape::built_in("Deployment")),
            Err(ItemError::Duplicate { .. })
        ));
    }

    #[test]
    fn remove_takes_items_with_their_contents() {
        let shape = Shape::built_in("Deployment");
        let mut object =
            deployment(json!([{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]));
        let mut set = FieldSet::new();
        let containers = vec![
            fieldset::field("spec"),
            fieldset::field("template"),
            fieldset::field("spec"),
            fieldset::field("containers"),
        ];
        set.insert(&child(&containers, "k:{\"name\":\"a\"}".to_string()));
        remove(&mut object, &set, &shape).expect("valid");
        assert_eq!(
            object["spec"]["template"]["spec"]["containers"],
            json!([{"name": "b", "image": "2"}])
        );
    }
}
