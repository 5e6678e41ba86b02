//! Sets of field paths, as structured-merge-diff keeps them and `managedFields` writes them
//! (`fieldsType: FieldsV1`).
//!
//! A path is a list of elements, each one step into an object:
//!
//! | element | encoded (a FieldsV1 key) | printed (in a conflict) | steps into |
//! |---|---|---|---|
//! | field | `f:image` | `.image` | an object's field, or a map's key |
//! | key | `k:{"name":"c"}` | `[name="c"]` | the item of a list-type map with those key values |
//! | value | `v:"t1"` | `[="t1"]` | the item of a list-type set equal to that value |
//! | index | `i:0` | `[0]` | the item of a list at that position (rare: most lists are keyed or atomic) |
//!
//! A [`FieldSet`] is a trie of encoded elements. A node is a *member* when the path ending there is
//! in the set; FieldsV1 writes a member that also has children as `".": {}` among them, and a member
//! without children as `{}`. So `{"f:data":{".":{},"f:k":{}}}` holds `.data` and `.data.k`, and
//! `{"f:data":{"f:k":{}}}` holds `.data.k` only (`.data` is just on the way).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// One encoded path element (`f:name`, `k:{...}`, `v:...`, `i:N`).
pub type Element = String;

/// A path from the object's root: encoded elements.
pub type Path = Vec<Element>;

/// The encoded element of an object field or map key.
pub fn field(name: &str) -> Element {
    format!("f:{name}")
}

/// The encoded element of a list-type map's item: its key fields, sorted by name (JSON objects
/// print their keys in order here).
pub fn key(fields: &Map<String, Value>) -> Element {
    let sorted: BTreeMap<&String, &Value> = fields.iter().collect();
    let text = serde_json::to_string(&sorted).unwrap_or_default();
    format!("k:{text}")
}

/// The encoded element of a list-type set's item.
pub fn value(item: &Value) -> Element {
    format!("v:{item}")
}

/// The encoded element of a list item by position.
pub fn index(position: usize) -> Element {
    format!("i:{position}")
}

/// How a path prints in a conflict: `.spec.containers[name="c"].image`.
pub fn display(path: &[Element]) -> String {
    let mut out = String::new();
    for element in path {
        if let Some(name) = element.strip_prefix("f:") {
            out.push('.');
            out.push_str(name);
        } else if let Some(json) = element.strip_prefix("k:") {
            let fields: Map<String, Value> = serde_json::from_str(json).unwrap_or_default();
            let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(json) = element.strip_prefix("v:") {
            out.push_str(&format!("[={json}]"));
        } else if let Some(position) = element.strip_prefix("i:") {
            out.push_str(&format!("[{position}]"));
        }
    }
    out
}

/// A FieldsV1 document that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldsError {
    /// A node that is not a JSON object.
    #[error("FieldsV1 node at {0:?} is not an object")]
    NotAnObject(String),
    /// A key that is none of `.`, `f:`, `k:`, `v:`, `i:`.
    #[error("FieldsV1 key {0:?} is not a path element")]
    BadElement(String),
}

/// A set of paths. See the [module docs](self).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    nodes: BTreeMap<Element, Node>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Node {
    member: bool,
    children: FieldSet,
}

impl Node {
    fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// Whether no path is in the set.
    pub fn is_empty(&self) -> bool {
        self.nodes.values().all(Node::is_empty)
    }

    /// Adds `path` (the empty path is not a member of anything, and is ignored).
    pub fn insert(&mut self, path: &[Element]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        let node = self.nodes.entry(first.clone()).or_default();
        if rest.is_empty() {
            node.member = true;
        } else {
            node.children.insert(rest);
        }
    }

    /// Removes `path` (only it: paths below it stay).
    pub fn remove(&mut self, path: &[Element]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        if let Some(node) = self.nodes.get_mut(first) {
            if rest.is_empty() {
                node.member = false;
            } else {
                node.children.remove(rest);
            }
            if node.is_empty() {
                self.nodes.remove(first);
            }
        }
    }

    /// Whether `path` is in the set.
    pub fn has(&self, path: &[Element]) -> bool {
        match path.split_first() {
            None => false,
            Some((first, rest)) => self.nodes.get(first).is_some_and(|node| {
                if rest.is_empty() {
                    node.member
                } else {
                    node.children.has(rest)
                }
            }),
        }
    }

    /// Whether `path` or any path below it is in the set.
    pub fn has_at_or_below(&self, path: &[Element]) -> bool {
        match path.split_first() {
            None => !self.is_empty(),
            Some((first, rest)) => self.nodes.get(first).is_some_and(|node| {
                if rest.is_empty() {
                    !node.is_empty()
                } else {
                    node.children.has_at_or_below(rest)
                }
            }),
        }
    }

    /// Paths in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        for (element, theirs) in &other.nodes {
            let node = out.nodes.entry(element.clone()).or_default();
            node.member |= theirs.member;
            node.children = node.children.union(&theirs.children);
        }
        out
    }

    /// Paths of `self` that are not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        for (element, mine) in &self.nodes {
            let node = match other.nodes.get(element) {
                Some(theirs) => Node {
                    member: mine.member && !theirs.member,
                    children: mine.children.difference(&theirs.children),
                },
                None => mine.clone(),
            };
            if !node.is_empty() {
                out.nodes.insert(element.clone(), node);
            }
        }
        out
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        for (element, mine) in &self.nodes {
            if let Some(theirs) = other.nodes.get(element) {
                let node = Node {
                    member: mine.member && theirs.member,
                    children: mine.children.intersection(&theirs.children),
                };
                if !node.is_empty() {
                    out.nodes.insert(element.clone(), node);
                }
            }
        }
        out
    }

    /// Every path, in structured-merge-diff's order: at each level the members first (sorted),
    /// then what lies below each child (sorted).
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for (element, node) in &self.nodes {
            if node.member {
                let mut path = prefix.clone();
                path.push(element.clone());
                out.push(path);
            }
        }
        for (element, node) in &self.nodes {
            prefix.push(element.clone());
            node.children.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The set as a FieldsV1 document.
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        for (element, node) in &self.nodes {
            if node.is_empty() {
                continue;
            }
            let mut inner = match node.children.to_fields_v1() {
                Value::Object(inner) => inner,
                _ => Map::new(),
            };
            if node.member && !inner.is_empty() {
                inner.insert(".".into(), Value::Object(Map::new()));
            }
            map.insert(element.clone(), Value::Object(inner));
        }
        Value::Object(map)
    }

    /// Reads a FieldsV1 document.
    pub fn from_fields_v1(document: &Value) -> Result<FieldSet, FieldsError> {
        let map = document
            .as_object()
            .ok_or_else(|| FieldsError::NotAnObject(document.to_string()))?;
        let mut set = FieldSet::new();
        for (element, inner) in map {
            if element == "." {
                continue;
            }
            let known = ["f:", "k:", "v:", "i:"]
                .iter()
                .any(|prefix| element.starts_with(prefix));
            if !known {
                return Err(FieldsError::BadElement(element.clone()));
            }
            let inner_map = inner
                .as_object()
                .ok_or_else(|| FieldsError::NotAnObject(element.clone()))?;
            let node = Node {
                member: inner_map.is_empty() || inner_map.contains_key("."),
                children: FieldSet::from_fields_v1(inner)?,
            };
            set.nodes.insert(element.clone(), node);
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(elements: &[&str]) -> Path {
        elements.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn fields_v1_round_trips_members_with_children() {
        let document = json!({"f:data": {".": {}, "f:k": {}},
                              "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}}});
        let set = FieldSet::from_fields_v1(&document).expect("valid");
        assert!(set.has(&path(&["f:data"])));
        assert!(!set.has(&path(&["f:spec"])));
        assert!(set.has(&path(&[
            "f:spec",
            "f:containers",
            "k:{\"name\":\"c\"}",
            "f:image"
        ])));
        assert_eq!(set.to_fields_v1(), document);
        assert!(FieldSet::from_fields_v1(&json!({"x": {}})).is_err());
    }

    #[test]
    fn set_operations_and_order() {
        let mut a = FieldSet::new();
        a.insert(&path(&["f:data", "f:k"]));
        a.insert(&path(&["f:data", "f:j"]));
        a.insert(&path(&["f:kind"]));
        let mut b = FieldSet::new();
        b.insert(&path(&["f:data", "f:k"]));
        assert_eq!(a.intersection(&b), b);
        let rest = a.difference(&b);
        assert_eq!(
            rest.paths(),
            vec![path(&["f:kind"]), path(&["f:data", "f:j"])]
        );
        assert_eq!(rest.union(&b), a);
        assert!(a.has_at_or_below(&path(&["f:data"])));
    }

    #[test]
    fn paths_print_as_in_conflicts() {
        let mut keys = Map::new();
        keys.insert("row".into(), json!(1));
        keys.insert("col".into(), json!("a"));
        let p = vec![field("spec"), field("slots"), key(&keys), field("item")];
        assert_eq!(display(&p), ".spec.slots[col=\"a\",row=1].item");
        assert_eq!(
            display(&[field("tags"), value(&json!("t"))]),
            ".tags[=\"t\"]"
        );
    }
}
