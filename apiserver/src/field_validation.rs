//! Unknown fields in a write's body, and the `fieldValidation` query parameter that says what to do
//! about them.
//!
//! # Why this module exists
//!
//! kube-apiserver decodes a body into its Go type (or, for a custom resource, checks it against the
//! CRD's structural schema); a field the type does not have is *unknown*. 1.37 then follows the
//! request's `fieldValidation`:
//!
//! | value | unknown fields |
//! |---|---|
//! | `Strict` | 400 `BadRequest`: `<Kind> in version "<v>" cannot be handled as a <Kind>: strict decoding error: unknown field "spec.foo", ...` |
//! | `Warn` (the default) | dropped, each named in a `Warning: 299 - "unknown field \"spec.foo\""` header |
//! | `Ignore` | dropped silently |
//!
//! controller-runtime's clients (and `kubectl --validate`) rely on this to report typos.
//!
//! # How data flows
//!
//! ```text
//!  body (create, update; a merge patch's body) ─▶ strip_unknown(resource, body) ─▶ unknown paths
//!  the body's JSON text ─▶ problems(unknown, text): + duplicate fields, in body order
//!      none ─▶ the write goes on
//!      Strict ─▶ 400 now, nothing written      Warn ─▶ Warning headers on the answer      Ignore ─▶ —
//! ```
//!
//! What is known: for a custom resource, its schema ([`crate::schema::Schema::strip_unknown`]:
//! what pruning would drop, `metadata` included); for a built-in kind, every field of its Go type,
//! read from the generated protobuf table of `ferrokube_core::protobuf` (each message's fields
//! under their JSON names; [`builtin_message`]) rather than from a hand-written list. A type the
//! table does not know (one registered by hand) is taken as it is. Problems are named in the
//! order the body writes them, as kube-apiserver's strict decoder meets them; a duplicate field
//! (`duplicate field "data"`) counts as one, and is read as Go reads it: an object merged into
//! the first ([`read_merging_duplicates`]), anything else replacing it.
//!
//! Not done: a JSON patch's unknown fields (kube-apiserver finds them in the patched object and
//! answers a strict one with a 422 quoting it), nor a merge patch's strict refusal in that form
//! (here: the patch body is judged as a whole object would be, 400).

use ferrokube_core::protobuf::{self, Field, Label, Schema, Ty};
use serde_json::{Map, Value};

use crate::resource::ResourceType;
use crate::status::StatusError;

/// The `fieldValidation` directive of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop them and warn (the default of kube-apiserver 1.37).
    #[default]
    Warn,
    /// Refuse the write.
    Strict,
}

impl FieldValidation {
    /// The query parameter's value; kube-apiserver refuses a value it does not know with a 400.
    pub fn parse(value: Option<&str>) -> Result<FieldValidation, StatusError> {
        match value {
            None | Some("" | "Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(StatusError::bad_request(format!(
                "fieldValidation must be one of Ignore, Warn, Strict: got {other:?}"
            ))),
        }
    }

    /// Applies the directive to the problems of a body ([`problems`]): the warnings to send, or
    /// the 400 of a strict write.
    pub fn judge(
        self,
        resource: &ResourceType,
        problems: Vec<Problem>,
    ) -> Result<Vec<String>, StatusError> {
        if problems.is_empty() {
            return Ok(Vec::new());
        }
        let named: Vec<String> = problems.iter().map(Problem::describe).collect();
        match self {
            FieldValidation::Ignore => Ok(Vec::new()),
            FieldValidation::Warn => Ok(named),
            FieldValidation::Strict => Err(StatusError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
                named.join(", "),
                kind = resource.kind,
                version = resource.version,
            ))),
        }
    }
}

/// Removes the unknown fields of `body`, a whole object of `resource` (or a merge patch of one),
/// and returns their paths (`spec.containers[0].bar`), sorted.
pub fn strip_unknown(resource: &ResourceType, body: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    if let Some(schema) = &resource.schema {
        schema.strip_unknown(body, &mut unknown);
        return unknown;
    }
    if let (Some(message), Some(map)) = (builtin_message(resource), body.as_object_mut()) {
        strip_message(map, message, "", true, &mut unknown);
    }
    unknown
}

/// The generated protobuf message of a built-in kind (`ferrokube_core::protobuf`, which has every
/// field of every built-in kind under its JSON name); `None` for a custom kind or a type the table
/// does not know (a type registered by hand: nothing of it is unknown).
pub fn builtin_message(resource: &ResourceType) -> Option<&'static Schema> {
    if resource.is_custom() {
        return None;
    }
    protobuf::top_level(&resource.api_version(), &resource.kind)
}

/// The field of `message` written `key` in JSON, looking into the Go structs JSON inlines
/// (`Volume`'s `VolumeSource`).
fn field_named(message: &'static Schema, key: &str) -> Option<&'static Field> {
    message
        .fields
        .iter()
        .find_map(|field| match (field.label, field.ty) {
            (Label::Inline, Ty::Message(inner)) => field_named(inner, key),
            (Label::Inline, _) => None,
            _ => (field.json == key).then_some(field),
        })
}

/// Removes from `map`, an object of `message` at `path`, what the message has no field for
/// (`kind` and `apiVersion` are known at the top), and looks into the fields that hold messages.
fn strip_message(
    map: &mut Map<String, Value>,
    message: &'static Schema,
    path: &str,
    top: bool,
    unknown: &mut Vec<String>,
) {
    map.retain(|key, value| {
        // A strategic merge patch's directives (`$patch`, `$setElementOrder/...`) are not fields.
        if key.starts_with('$') || (top && (key == "kind" || key == "apiVersion")) {
            return true;
        }
        let child = join(path, key);
        match field_named(message, key) {
            Some(field) => {
                strip_value(field, value, &child, unknown);
                true
            }
            None => {
                unknown.push(child);
                false
            }
        }
    });
}

/// Looks into the value of `field` at `path`: a message's object, each element of a list of
/// messages (`path[i]`), each value of a map of messages (`path.key`). Scalars, and the messages
/// whose JSON is not their fields' (quantities, times, raw JSON, the CRD schema's "or" forms), are
/// taken as they are.
fn strip_value(field: &Field, value: &mut Value, path: &str, unknown: &mut Vec<String>) {
    let Ty::Message(message) = field.ty else {
        return;
    };
    match (field.label, value) {
        (Label::One, Value::Object(map)) => strip_message(map, message, path, false, unknown),
        (Label::Repeated, Value::Array(items)) => {
            for (i, item) in items.iter_mut().enumerate() {
                if let Value::Object(map) = item {
                    strip_message(map, message, &format!("{path}[{i}]"), false, unknown);
                }
            }
        }
        (Label::Map, Value::Object(entries)) => {
            for (key, entry) in entries.iter_mut() {
                if let Value::Object(map) = entry {
                    strip_message(map, message, &join(path, key), false, unknown);
                }
            }
        }
        _ => {}
    }
}

/// Joins a field path as kube-apiserver's unknown-field messages write it.
pub fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// What strict decoding finds wrong with a field of a JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A field the type does not have (dropped).
    Unknown(String),
    /// A field written twice in one object (the last value is kept).
    Duplicate(String),
}

impl Problem {
    /// `unknown field "spec.foo"` / `duplicate field "data"`, as kube-apiserver words them.
    pub fn describe(&self) -> String {
        match self {
            Problem::Unknown(path) => format!("unknown field {path:?}"),
            Problem::Duplicate(path) => format!("duplicate field {path:?}"),
        }
    }
}

/// Every field of a JSON body in the order it is written, by path (`a.b[0].c`), with whether it
/// repeats a key of its object: what [`Value`] (sorted, last value kept) loses. Read with a serde
/// visitor over the text, only when there is something to order or a duplicate to find.
struct Written {
    /// `(path, duplicate)` per key, in body order.
    keys: Vec<(String, bool)>,
}

impl Written {
    fn read(text: &[u8]) -> Option<Written> {
        let mut keys = Vec::new();
        let mut de = serde_json::Deserializer::from_slice(text);
        serde::de::DeserializeSeed::deserialize(
            Walk {
                path: String::new(),
                keys: &mut keys,
            },
            &mut de,
        )
        .ok()?;
        Some(Written { keys })
    }
}

/// The visitor of [`Written::read`] at one path.
struct Walk<'k> {
    path: String,
    keys: &'k mut Vec<(String, bool)>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut access: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = access.next_key::<String>()? {
            let path = join(&self.path, &key);
            let duplicate = !seen.insert(key);
            self.keys.push((path.clone(), duplicate));
            access.next_value_seed(Walk {
                path,
                keys: self.keys,
            })?;
        }
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut access: A) -> Result<(), A::Error> {
        let mut i = 0;
        while access
            .next_element_seed(Walk {
                path: format!("{}[{i}]", self.path),
                keys: self.keys,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// A JSON text read as kube-apiserver's Go decoder reads a field written twice: an object into
/// the object already read (field by field, recursively), anything else over it. serde_json keeps
/// only the last value; read again with this when [`problems`] found a duplicate.
pub fn read_merging_duplicates(text: &[u8]) -> Option<Value> {
    let mut de = serde_json::Deserializer::from_slice(text);
    serde::Deserialize::deserialize(&mut de)
        .ok()
        .map(|Merged(value)| value)
}

/// A value read by [`read_merging_duplicates`].
struct Merged(Value);

impl<'de> serde::Deserialize<'de> for Merged {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Merged, D::Error> {
        d.deserialize_any(MergedVisitor)
    }
}

struct MergedVisitor;

impl<'de> serde::de::Visitor<'de> for MergedVisitor {
    type Value = Merged;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut access: A) -> Result<Merged, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            let Merged(value) = access.next_value()?;
            match map.get_mut(&key) {
                Some(existing) => merge_into(existing, value),
                None => {
                    map.insert(key, value);
                }
            }
        }
        Ok(Merged(Value::Object(map)))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut access: A) -> Result<Merged, A::Error> {
        let mut items = Vec::new();
        while let Some(Merged(item)) = access.next_element()? {
            items.push(item);
        }
        Ok(Merged(Value::Array(items)))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Merged, E> {
        Ok(Merged(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Merged, E> {
        Ok(Merged(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Merged, E> {
        Ok(Merged(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Merged, E> {
        Ok(Merged(
            serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_str<E>(self, v: &str) -> Result<Merged, E> {
        Ok(Merged(Value::String(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Merged, E> {
        Ok(Merged(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<Merged, E> {
        Ok(Merged(Value::Null))
    }
}

/// A second value of one key over the first: objects merge key by key, the rest is replaced.
fn merge_into(existing: &mut Value, value: Value) {
    match (existing, value) {
        (Value::Object(old), Value::Object(new)) => {
            for (key, value) in new {
                match old.get_mut(&key) {
                    Some(slot) => merge_into(slot, value),
                    None => {
                        old.insert(key, value);
                    }
                }
            }
        }
        (slot, value) => *slot = value,
    }
}

/// The problems of a body: its `unknown` fields (as [`strip_unknown`] found them) and, from its
/// JSON `text` when there is one, its duplicate fields, all in the order the body writes them, as
/// kube-apiserver's strict decoder meets them. Without the text (a protobuf body), the unknown
/// fields as found.
pub fn problems(unknown: Vec<String>, text: Option<&[u8]>) -> Vec<Problem> {
    // The text is read once more (keys only, values skipped): a duplicate shows nowhere else.
    let Some(written) = text.and_then(Written::read) else {
        return unknown.into_iter().map(Problem::Unknown).collect();
    };
    let mut problems = Vec::new();
    let mut left: Vec<String> = unknown;
    for (path, duplicate) in written.keys {
        if duplicate {
            problems.push(Problem::Duplicate(path.clone()));
        }
        if let Some(at) = left.iter().position(|u| *u == path) {
            problems.push(Problem::Unknown(left.swap_remove(at)));
        }
    }
    // What the text did not show (none, but for a path this reading spells differently).
    left.sort();
    problems.extend(left.into_iter().map(Problem::Unknown));
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn directives() {
        assert_eq!(FieldValidation::parse(None), Ok(FieldValidation::Warn));
        assert_eq!(
            FieldValidation::parse(Some("Strict")),
            Ok(FieldValidation::Strict)
        );
        assert_eq!(
            FieldValidation::parse(Some("strict")).map_err(|e| e.code),
            Err(400)
        );
    }

    fn nodes() -> ResourceType {
        ResourceType::new("", "v1", "Node")
    }

    #[test]
    fn every_field_of_a_built_in_kind_is_known_from_the_protobuf_table() {
        let mut node = json!({"kind": "Node", "apiVersion": "v1",
            "metadata": {"name": "n", "foo": 1, "labels": {"any": "x"}},
            "spec": {"invalidField": "v", "podCIDR": "x", "taints": [{"key": "k", "bad": 1}]},
            "status": {"invalidStatusField": 1, "capacity": {"cpu": "1"},
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}});
        let unknown = strip_unknown(&nodes(), &mut node);
        assert_eq!(
            unknown,
            vec![
                "metadata.foo",
                "spec.invalidField",
                "spec.taints[0].bad",
                "status.invalidStatusField"
            ]
        );
        assert_eq!(
            node["spec"],
            json!({"podCIDR": "x", "taints": [{"key": "k"}]})
        );
        assert_eq!(node["status"]["capacity"], json!({"cpu": "1"}));
    }

    #[test]
    fn inlined_structs_lend_their_fields() {
        let pods = ResourceType::new("", "v1", "Pod");
        let mut pod = json!({"spec": {"containers": [], "volumes": [
            {"name": "v", "configMap": {"name": "c", "nope": 1}}]}});
        let unknown = strip_unknown(&pods, &mut pod);
        assert_eq!(unknown, vec!["spec.volumes[0].configMap.nope"]);
    }

    #[test]
    fn a_field_written_twice_is_read_as_go_reads_it() {
        let text = br#"{"data":{"a":"1","n":{"x":1}},"list":[1],"data":{"b":"2","n":{"y":2}},"list":[2],"s":"a","s":"b"}"#;
        assert_eq!(
            read_merging_duplicates(text),
            Some(
                json!({"data": {"a": "1", "b": "2", "n": {"x": 1, "y": 2}}, "list": [2], "s": "b"})
            )
        );
    }

    #[test]
    fn problems_follow_the_body_and_name_duplicates() {
        let text =
            br#"{"metadata":{"name":"a","name":"b","zzz":1},"yyy":1,"data":{},"data":{},"aaa":2}"#;
        let unknown = vec!["aaa".to_string(), "metadata.zzz".into(), "yyy".into()];
        let named: Vec<String> = problems(unknown.clone(), Some(text))
            .iter()
            .map(Problem::describe)
            .collect();
        assert_eq!(
            named,
            vec![
                r#"duplicate field "metadata.name""#,
                r#"unknown field "metadata.zzz""#,
                r#"unknown field "yyy""#,
                r#"duplicate field "data""#,
                r#"unknown field "aaa""#,
            ]
        );
        assert_eq!(
            problems(unknown, None),
            vec![
                Problem::Unknown("aaa".into()),
                Problem::Unknown("metadata.zzz".into()),
                Problem::Unknown("yyy".into())
            ]
        );
    }
}
