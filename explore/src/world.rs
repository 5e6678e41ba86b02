//! The world a run acts on: every object on the embedded server and every record of the outside
//! system, as one value an oracle can read.
//!
//! The run keeps one [`World`] up to date from the server's change feed
//! (`Store::subscribe_with_state`: the objects at the start, then every change, none missed) and
//! from the outside system's calls, and checks the author's invariants after **each** change.
//! At the end of a run the world is **normalised** ([`Normalizer`]) and compared with the
//! fault-free run's: two runs that did the same thing by different paths differ in uids,
//! resourceVersions, timestamps and generated names, and in nothing else a user cares about.
//!
//! ```text
//!  server change feed ──▶ World.objects[resource][key] ──▶ invariants (every change)
//!  outside calls ───────▶ World.outside[name]          ──▶ invariants (every call)
//!  end of run ──▶ Normalizer ──▶ NormalWorld ══ compared with the fault-free run's
//! ```
//!
//! Resources are named as the server's tables are: the plural, then `.group` for a named group
//! (`configmaps`, `pods`, `replicasets.apps`, `widgets.example.com`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Every object on the server and every outside record, at one moment. See the
/// [module docs](self).
#[derive(Debug, Clone, Default)]
pub struct World {
    /// resource → key (`namespace/name` or `name`) → object.
    pub(crate) objects: BTreeMap<String, BTreeMap<String, Arc<Value>>>,
    /// The outside system's records.
    pub(crate) outside: BTreeMap<String, String>,
}

impl World {
    /// The objects of `resource` (`configmaps`, `replicasets.apps`), in key order.
    pub fn objects(&self, resource: &str) -> impl Iterator<Item = (&str, &Value)> {
        self.objects
            .get(resource)
            .into_iter()
            .flat_map(|objects| objects.iter())
            .map(|(key, object)| (key.as_str(), object.as_ref()))
    }

    /// The object of `resource` at `key` (`namespace/name`, or `name` when cluster-scoped).
    pub fn get(&self, resource: &str, key: &str) -> Option<&Value> {
        self.objects.get(resource)?.get(key).map(Arc::as_ref)
    }

    /// The objects of `resource` decoded as `K` (those that do not decode are skipped).
    pub fn typed<K: DeserializeOwned>(&self, resource: &str) -> Vec<K> {
        self.objects(resource)
            .filter_map(|(_, object)| K::deserialize(object).ok())
            .collect()
    }

    /// How many objects of `resource` there are.
    pub fn count(&self, resource: &str) -> usize {
        self.objects.get(resource).map_or(0, BTreeMap::len)
    }

    /// The outside system's records (name → value).
    pub fn outside(&self) -> &BTreeMap<String, String> {
        &self.outside
    }

    pub(crate) fn put(&mut self, resource: &str, key: &str, object: Arc<Value>) {
        self.objects
            .entry(resource.to_string())
            .or_default()
            .insert(key.to_string(), object);
    }

    pub(crate) fn remove(&mut self, resource: &str, key: &str) {
        if let Some(objects) = self.objects.get_mut(resource) {
            objects.remove(key);
        }
    }
}

/// A rule that rewrites an object before end states are compared (see [`Normalizer::rule`]).
pub type NormalizeRule = Arc<dyn Fn(&str, &mut Value) + Send + Sync>;

/// A rule that rewrites an outside record's value before end states are compared (see
/// [`Normalizer::outside_rule`]).
pub type OutsideRule = Arc<dyn Fn(&str, &mut String) + Send + Sync>;

/// How end states are made comparable. See the [module docs](self).
///
/// By default it:
/// - leaves out the resources whose objects are records of what happened rather than state:
///   `events`, `events.events.k8s.io`, `leases.coordination.k8s.io`;
/// - removes from every object `metadata.uid`, `resourceVersion`, `creationTimestamp`,
///   `generation`, `managedFields`, `selfLink`, and each owner reference's `uid`;
/// - writes every string that starts like an RFC 3339 time (`2026-01-01T00:00:…`) as `<time>`,
///   and every string that is a uid (a UUID, wherever it was copied to) as `<uid>`;
/// - blanks the server's own random bookkeeping: the name suffix and token of each
///   ServiceAccount's token Secret, and the Secret names a ServiceAccount lists;
/// - names an object made with `metadata.generateName` by that prefix and `<generated>`, so two
///   runs whose children got different random suffixes compare equal (their number still
///   counts: the objects of a resource are compared as a multiset).
///
/// Outside records are compared as they are, unless [`Normalizer::outside_rule`] says otherwise
/// (a record that holds a uid or a time of its own).
///
/// [`Normalizer::rule`] adds the author's own rules (run after these), [`Normalizer::ignore`]
/// leaves out more resources.
#[derive(Clone)]
pub struct Normalizer {
    ignored: BTreeSet<String>,
    rules: Vec<NormalizeRule>,
    outside_rules: Vec<OutsideRule>,
}

impl fmt::Debug for Normalizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Normalizer")
            .field("ignored", &self.ignored)
            .field("rules", &self.rules.len())
            .field("outside_rules", &self.outside_rules.len())
            .finish()
    }
}

impl Default for Normalizer {
    fn default() -> Normalizer {
        Normalizer {
            ignored: [
                "events",
                "events.events.k8s.io",
                "leases.coordination.k8s.io",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
            rules: Vec::new(),
            outside_rules: Vec::new(),
        }
    }
}

impl Normalizer {
    /// Leaves `resource` out of the comparison.
    pub fn ignore(mut self, resource: &str) -> Normalizer {
        self.ignored.insert(resource.to_string());
        self
    }

    /// Adds a rule run on every object (with its resource) after the default ones: remove or
    /// blank what legitimately differs between two good runs of your controller (e.g. a random
    /// token it generates).
    pub fn rule(mut self, rule: impl Fn(&str, &mut Value) + Send + Sync + 'static) -> Normalizer {
        self.rules.push(Arc::new(rule));
        self
    }

    /// Adds a rule run on every outside record's value (with the record's name): blank what
    /// legitimately differs between two good runs, e.g. the uid of the object that owns the
    /// record, which is drawn at random and so moves when a fault moves other random draws.
    pub fn outside_rule(
        mut self,
        rule: impl Fn(&str, &mut String) + Send + Sync + 'static,
    ) -> Normalizer {
        self.outside_rules.push(Arc::new(rule));
        self
    }

    /// Whether `resource` is left out.
    pub(crate) fn ignores(&self, resource: &str) -> bool {
        self.ignored.contains(resource)
    }

    /// The normal form of `world`.
    pub fn normalize(&self, world: &World) -> NormalWorld {
        let mut resources = BTreeMap::new();
        for (resource, objects) in &world.objects {
            if self.ignores(resource) {
                continue;
            }
            let mut normal: Vec<String> = objects
                .values()
                .map(|object| {
                    let mut object = object.as_ref().clone();
                    normalize_object(&mut object);
                    for rule in &self.rules {
                        rule(resource, &mut object);
                    }
                    object.to_string()
                })
                .collect();
            normal.sort();
            if !normal.is_empty() {
                resources.insert(resource.clone(), normal);
            }
        }
        let outside = world
            .outside
            .iter()
            .map(|(name, value)| {
                let mut value = value.clone();
                for rule in &self.outside_rules {
                    rule(name, &mut value);
                }
                (name.clone(), value)
            })
            .collect();
        NormalWorld { resources, outside }
    }
}

/// The default rules (see [`Normalizer`]).
fn normalize_object(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for volatile in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
            "selfLink",
        ] {
            metadata.remove(volatile);
        }
        if let Some(prefix) = metadata
            .get("generateName")
            .and_then(Value::as_str)
            .map(str::to_string)
        {
            metadata.insert("name".into(), Value::String(format!("{prefix}<generated>")));
        }
        if let Some(owners) = metadata
            .get_mut("ownerReferences")
            .and_then(Value::as_array_mut)
        {
            for owner in owners.iter_mut().filter_map(Value::as_object_mut) {
                owner.remove("uid");
            }
        }
    }
    blank_server_credentials(object);
    blank_times(object);
}

/// The embedded server makes a token Secret for each ServiceAccount (as the token controller
/// of Kubernetes before 1.24 did), with a random name suffix and token drawn when its task gets
/// to it: bookkeeping of the server's, not the controller's work, whose random draws move when
/// a fault moves other draws. Blanked: the Secret's name suffix and token, and the names a
/// ServiceAccount lists.
fn blank_server_credentials(object: &mut Value) {
    let is_token = object["type"].as_str() == Some("kubernetes.io/service-account-token");
    if is_token {
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            if let Some(name) = metadata.get("name").and_then(Value::as_str) {
                let prefix = name.rsplit_once('-').map_or(name, |(prefix, _)| prefix);
                let blanked = format!("{prefix}-<generated>");
                metadata.insert("name".into(), Value::String(blanked));
            }
        }
        if let Some(data) = object.get_mut("data").and_then(Value::as_object_mut) {
            data.insert("token".into(), Value::String("<token>".into()));
        }
    }
    if object["kind"].as_str() == Some("ServiceAccount") {
        if let Some(secrets) = object.get_mut("secrets").and_then(Value::as_array_mut) {
            for secret in secrets.iter_mut().filter_map(Value::as_object_mut) {
                secret.insert("name".into(), Value::String("<generated>".into()));
            }
        }
    }
}

/// Writes every RFC 3339 time in `value` as `<time>` and every uid (a UUID: an object's own, or
/// one copied into a label, an annotation, a reference or data) as `<uid>`.
fn blank_times(value: &mut Value) {
    match value {
        Value::String(text) if looks_like_a_time(text) => *text = "<time>".into(),
        Value::String(text) if looks_like_a_uid(text) => *text = "<uid>".into(),
        Value::Array(items) => items.iter_mut().for_each(blank_times),
        Value::Object(fields) => fields.values_mut().for_each(blank_times),
        _ => {}
    }
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, hexadecimal.
fn looks_like_a_uid(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(at, byte)| match at {
            8 | 13 | 18 | 23 => *byte == b'-',
            _ => byte.is_ascii_hexdigit(),
        })
}

/// `YYYY-MM-DDTHH:MM` at the start.
fn looks_like_a_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 16
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes[10] == b'T'
        && bytes[13] == b':'
}

/// A world in normal form: per resource, the sorted normalised objects; the outside records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NormalWorld {
    /// resource → the normalised objects, as JSON text, sorted.
    pub resources: BTreeMap<String, Vec<String>>,
    /// The outside system's records.
    pub outside: BTreeMap<String, String>,
}

impl NormalWorld {
    /// What `self` (a faulty run's end) has that `reference` does not, and the other way round,
    /// as readable lines; empty when they are equal.
    pub fn differences(&self, reference: &NormalWorld) -> Vec<String> {
        let mut lines = Vec::new();
        let names: BTreeSet<&String> = self
            .resources
            .keys()
            .chain(reference.resources.keys())
            .collect();
        for resource in names {
            let empty = Vec::new();
            let ours = self.resources.get(resource).unwrap_or(&empty);
            let theirs = reference.resources.get(resource).unwrap_or(&empty);
            for extra in multiset_minus(ours, theirs) {
                lines.push(format!("{resource}: only in this run: {}", shorten(extra)));
            }
            for missing in multiset_minus(theirs, ours) {
                lines.push(format!(
                    "{resource}: only in the fault-free run: {}",
                    shorten(missing)
                ));
            }
        }
        let keys: BTreeSet<&String> = self
            .outside
            .keys()
            .chain(reference.outside.keys())
            .collect();
        for key in keys {
            let (ours, theirs) = (self.outside.get(key), reference.outside.get(key));
            if ours != theirs {
                lines.push(format!(
                    "outside record {key}: this run {ours:?}, the fault-free run {theirs:?}"
                ));
            }
        }
        lines
    }
}

/// The items of sorted `a` that are not matched by one in sorted `b` (multiset difference).
fn multiset_minus<'a>(a: &'a [String], b: &[String]) -> Vec<&'a String> {
    let mut left = Vec::new();
    let mut j = 0;
    for item in a {
        while j < b.len() && b[j] < *item {
            j += 1;
        }
        if j < b.len() && b[j] == *item {
            j += 1;
        } else {
            left.push(item);
        }
    }
    left
}

/// At most 400 characters of `text`.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(400) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn world(objects: &[(&str, &str, Value)]) -> World {
        let mut world = World::default();
        for (resource, key, object) in objects {
            world.put(resource, key, Arc::new(object.clone()));
        }
        world
    }

    #[test]
    fn runs_that_differ_only_in_volatile_fields_compare_equal() {
        let a = world(&[(
            "configmaps",
            "default/x-abcde",
            json!({"metadata": {"name": "x-abcde", "generateName": "x-", "uid": "1",
                "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:01Z",
                "ownerReferences": [{"name": "p", "uid": "9"}]},
                "data": {"at": "2026-01-01T00:00:05Z",
                    "parent": "0f8fad5b-d9cb-469f-a165-70867728950e"}}),
        )]);
        let b = world(&[(
            "configmaps",
            "default/x-fghij",
            json!({"metadata": {"name": "x-fghij", "generateName": "x-", "uid": "2",
                "resourceVersion": "9", "creationTimestamp": "2026-01-01T00:00:02Z",
                "ownerReferences": [{"name": "p", "uid": "3"}]},
                "data": {"at": "2026-01-01T00:01:05Z",
                    "parent": "7c9e6679-7425-40de-944b-e07fc1f90ae7"}}),
        )]);
        let normalizer = Normalizer::default();
        assert_eq!(normalizer.normalize(&a), normalizer.normalize(&b));
    }

    #[test]
    fn an_outside_rule_blanks_what_differs_in_a_record() {
        let mut a = World::default();
        a.outside
            .insert("b".into(), r#"{"owner":"1","size":3}"#.into());
        let mut b = World::default();
        b.outside
            .insert("b".into(), r#"{"owner":"2","size":3}"#.into());
        let plain = Normalizer::default();
        assert_eq!(
            plain.normalize(&a).differences(&plain.normalize(&b)).len(),
            1
        );
        let blanked = plain.outside_rule(|name, value| {
            assert_eq!(name, "b");
            *value = value
                .replace(r#""owner":"1""#, "")
                .replace(r#""owner":"2""#, "");
        });
        assert_eq!(blanked.normalize(&a), blanked.normalize(&b));
    }

    #[test]
    fn an_extra_child_and_an_outside_record_are_differences() {
        let child = json!({"metadata": {"name": "c-1", "generateName": "c-"}});
        let one = world(&[("pods", "default/c-1", child.clone())]);
        let mut two = world(&[
            ("pods", "default/c-1", child.clone()),
            ("pods", "default/c-2", child),
        ]);
        two.outside.insert("a".into(), "1".into());
        let normalizer = Normalizer::default();
        let differences = normalizer
            .normalize(&two)
            .differences(&normalizer.normalize(&one));
        assert_eq!(differences.len(), 2, "{differences:?}");
        assert!(differences[0].starts_with("pods: only in this run"));
        assert!(differences[1].starts_with("outside record a"));
        let ignored = normalizer.clone().ignore("pods").rule(|_, _| {});
        assert_eq!(
            ignored
                .normalize(&two)
                .differences(&ignored.normalize(&one))
                .len(),
            1
        );
    }
}
