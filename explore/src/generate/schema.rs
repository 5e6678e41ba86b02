//! A custom resource's schema as the generator reads it: one [`Node`] per field, holding only
//! what decides which values the server admits (bounds, lengths, enums, item counts).
//!
//! ```text
//!  openAPIV3Schema (JSON)  ──Node::parse──▶  Node tree of `.spec`
//!                                              │ typical(): the value a create starts from
//!                                              │ nth(k):    the k-th distinct admitted value
//!                                              └ boundaries(): the edge values a step sets
//! ```
//!
//! A node the generator cannot vary without risking values the schema refuses (a string with a
//! `pattern`, an `int-or-string`, a `oneOf`) is [`Node::Opaque`]: it keeps its default, if it has
//! one, and no step touches it. Everything here is a pure function of the schema: no randomness.

use serde_json::{Map, Value};

/// The longest string the generator writes for a `maxLength` (a schema allowing a megabyte
/// gets a 4 KiB string: its boundary is not worth a megabyte per step).
pub(crate) const LONGEST_STRING: usize = 4096;

/// The most items a list is filled to (a list allowing more is filled to this many).
pub(crate) const MOST_ITEMS: usize = 16;

/// One field of the schema, by the kind of values it admits.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// An integer within `min..=max` (the bounds with `exclusive*` and the format applied).
    Integer(Range<i64>),
    /// A number within `min..=max` (exclusive bounds are kept out of the boundary values).
    Number(Range<f64>),
    /// A string: an enum, or free text within a length.
    String(Text),
    /// `true` or `false`.
    Boolean {
        /// The schema's `default`.
        default: Option<bool>,
    },
    /// A list (boxed: a list of lists is a recursion).
    Array(Box<List>),
    /// An object with named properties.
    Object(Fields),
    /// An object with free keys (`additionalProperties`).
    Map(Box<Dict>),
    /// A node the generator leaves alone (see the module docs); `typical` is its `default`.
    Opaque {
        /// The value a create gives it, if any.
        typical: Option<Value>,
    },
}

/// Inclusive bounds, and the schema's default.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Range<T> {
    /// Smallest admitted value.
    pub(crate) min: T,
    /// Largest admitted value (invariant: `min <= max`, checked by [`Node::parse`]).
    pub(crate) max: T,
    /// The schema's `default`.
    pub(crate) default: Option<T>,
}

/// A string field.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Text {
    /// The admitted values, when the schema lists them (then lengths do not matter).
    pub(crate) one_of: Vec<String>,
    /// `minLength`.
    pub(crate) min_len: usize,
    /// `maxLength`, at most [`LONGEST_STRING`].
    pub(crate) max_len: usize,
    /// A sample for a known `format` (`date-time`, `date`): then only it is written.
    pub(crate) sample: Option<String>,
    /// The schema's `default`.
    pub(crate) default: Option<String>,
}

/// A list field.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct List {
    /// Its items.
    pub(crate) items: Node,
    /// `minItems`.
    pub(crate) min: usize,
    /// `maxItems`, at most [`MOST_ITEMS`] (invariant: `min <= max`).
    pub(crate) max: usize,
    /// The schema's `default`.
    pub(crate) default: Option<Value>,
}

/// An object field with properties.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fields {
    /// Each property, by name, in the schema's (sorted) order.
    pub(crate) properties: Vec<(String, Node)>,
    /// The names a value must have.
    pub(crate) required: Vec<String>,
    /// The schema's `default`.
    pub(crate) default: Option<Value>,
}

/// A map field.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Dict {
    /// Its values.
    pub(crate) values: Node,
    /// `minProperties`.
    pub(crate) min: usize,
    /// `maxProperties`, at most [`MOST_ITEMS`].
    pub(crate) max: usize,
}

impl Node {
    /// Reads one schema node. Unknown shapes become [`Node::Opaque`], never an error: the
    /// generator then leaves that field alone.
    pub(crate) fn parse(schema: &Value) -> Node {
        let default = schema.get("default").cloned();
        let opaque = Node::Opaque {
            typical: default.clone(),
        };
        let flag = |name: &str| schema.get(name).and_then(Value::as_bool) == Some(true);
        if flag("x-kubernetes-int-or-string")
            || ["anyOf", "oneOf", "allOf", "not"]
                .iter()
                .any(|key| schema.get(*key).is_some())
        {
            return opaque;
        }
        match schema.get("type").and_then(Value::as_str) {
            Some("integer") => integer(schema).unwrap_or(opaque),
            Some("number") => number(schema).unwrap_or(opaque),
            Some("string") => text(schema).map(Node::String).unwrap_or(opaque),
            Some("boolean") => Node::Boolean {
                default: default.as_ref().and_then(Value::as_bool),
            },
            Some("array") => list(schema).unwrap_or(opaque),
            Some("object") => object(schema).unwrap_or(Node::Opaque {
                typical: default.or_else(|| Some(Value::Object(Map::new()))),
            }),
            _ => opaque,
        }
    }

    /// The node at `path` below this one (object properties and map values).
    pub(crate) fn at(&self, path: &[String]) -> Option<&Node> {
        let Some((first, rest)) = path.split_first() else {
            return Some(self);
        };
        match self {
            Node::Object(fields) => fields
                .properties
                .iter()
                .find(|(name, _)| name == first)
                .and_then(|(_, node)| node.at(rest)),
            Node::Map(dict) => dict.values.at(rest),
            _ => None,
        }
    }

    /// The value a create gives this field: its default, else the simplest admitted value
    /// (every optional property filled too, so that removing one is a change). `None`: no value
    /// the generator can vouch for.
    pub(crate) fn typical(&self) -> Option<Value> {
        self.nth(0)
    }

    /// The `k`-th of a series of distinct admitted values (0: the typical one), or `None` past
    /// the end of the series. Distinct values fill lists whose items must differ.
    pub(crate) fn nth(&self, k: usize) -> Option<Value> {
        match self {
            Node::Integer(range) => {
                let base = range.default.unwrap_or(1).clamp(range.min, range.max);
                walk(
                    i128::from(base),
                    i128::from(range.min),
                    i128::from(range.max),
                    k,
                )
                .and_then(|v| i64::try_from(v).ok())
                .map(Value::from)
            }
            Node::Number(range) => {
                let base = range.default.unwrap_or(1.0).clamp(range.min, range.max);
                let up = (range.max - base).floor();
                let k = k as f64;
                let value = if k <= up { base + k } else { base - (k - up) };
                (value >= range.min && value <= range.max)
                    .then(|| serde_json::Number::from_f64(value).map(Value::Number))
                    .flatten()
            }
            Node::String(text) => text.nth(k).map(Value::String),
            Node::Boolean { default } => {
                let first = default.unwrap_or(false);
                [first, !first].get(k).copied().map(Value::Bool)
            }
            Node::Array(list) => match (&list.default, k) {
                (Some(default), 0) => Some(default.clone()),
                _ => (k..k + list.min)
                    .map(|i| list.items.nth(i))
                    .collect::<Option<Vec<Value>>>()
                    .map(Value::Array),
            },
            Node::Object(fields) => fields.nth(k),
            Node::Map(dict) => (0..dict.min)
                .map(|i| Some((format!("k{i}"), dict.values.nth(k + i)?)))
                .collect::<Option<Map<String, Value>>>()
                .map(Value::Object),
            Node::Opaque { typical } => typical.clone().filter(|_| k == 0),
        }
    }

    /// The edge values of a scalar field: bounds, one step inside them, zero, the enum's
    /// values, the empty and the longest string. Empty for the other nodes (their edges are
    /// moves on their current value: see `draw`).
    pub(crate) fn boundaries(&self) -> Vec<Value> {
        let mut values: Vec<Value> = match self {
            Node::Integer(range) => {
                let (min, max) = (i128::from(range.min), i128::from(range.max));
                [min, min + 1, max - 1, max, 0, 1, -1]
                    .into_iter()
                    .filter(|v| (min..=max).contains(v))
                    .filter_map(|v| i64::try_from(v).ok())
                    .map(Value::from)
                    .collect()
            }
            Node::Number(range) => [range.min, range.max, 0.0, 1.0, -1.0]
                .into_iter()
                .filter(|v| (range.min..=range.max).contains(v))
                .filter_map(serde_json::Number::from_f64)
                .map(Value::Number)
                .collect(),
            Node::String(text) => text.boundaries().into_iter().map(Value::String).collect(),
            _ => Vec::new(),
        };
        let mut seen = Vec::new();
        values.retain(|value| {
            let new = !seen.contains(value);
            seen.push(value.clone());
            new
        });
        values
    }
}

impl Text {
    fn nth(&self, k: usize) -> Option<String> {
        if !self.one_of.is_empty() {
            return self.one_of.get(k).cloned();
        }
        if let Some(sample) = &self.sample {
            return (k == 0).then(|| sample.clone());
        }
        if k == 0 {
            if let Some(default) = &self.default {
                return Some(default.clone());
            }
        }
        // `k` in base 26 with `a` for 0, left-padded with `a` to at least the minimum length:
        // a fixed-width numeral per width, so distinct `k`s give distinct strings.
        let mut digits = Vec::new();
        let mut rest = k;
        loop {
            digits.push(char::from(b'a' + (rest % 26) as u8));
            rest /= 26;
            if rest == 0 {
                break;
            }
        }
        let width = digits.len().max(self.min_len).max(1);
        if width > self.max_len {
            return None;
        }
        let padding = std::iter::repeat_n('a', width - digits.len());
        Some(padding.chain(digits.into_iter().rev()).collect())
    }

    fn boundaries(&self) -> Vec<String> {
        if !self.one_of.is_empty() {
            return self.one_of.clone();
        }
        if let Some(sample) = &self.sample {
            return vec![sample.clone()];
        }
        let mut values = vec!["a".repeat(self.min_len), "z".repeat(self.max_len)];
        if self.min_len == 0 {
            values.push("a".into());
        }
        values
    }
}

impl Fields {
    fn nth(&self, k: usize) -> Option<Value> {
        if let (Some(default), 0) = (&self.default, k) {
            return Some(default.clone());
        }
        let mut object = Map::new();
        for (name, node) in &self.properties {
            match node.nth(k).or_else(|| node.typical()) {
                Some(value) => {
                    object.insert(name.clone(), value);
                }
                None if self.required.contains(name) => return None,
                None => {}
            }
        }
        Some(Value::Object(object))
    }
}

/// The `k`-th value of the walk `base, base+1, …, max, base-1, …, min`.
fn walk(base: i128, min: i128, max: i128, k: usize) -> Option<i128> {
    let k = i128::try_from(k).ok()?;
    let up = max - base;
    let value = if k <= up { base + k } else { base - (k - up) };
    (value >= min).then_some(value)
}

fn int(schema: &Value, key: &str) -> Option<i64> {
    let value = schema.get(key)?;
    value.as_i64().or_else(|| value.as_f64().map(|f| f as i64))
}

fn integer(schema: &Value) -> Option<Node> {
    let (format_min, format_max) = match schema.get("format").and_then(Value::as_str) {
        Some("int32") => (i64::from(i32::MIN), i64::from(i32::MAX)),
        Some("uint32") => (0, i64::from(u32::MAX)),
        Some("uint64") | Some("uint") => (0, i64::MAX),
        _ => (i64::MIN, i64::MAX),
    };
    let exclusive = |key: &str| schema.get(key).and_then(Value::as_bool) == Some(true);
    let mut min = int(schema, "minimum").unwrap_or(format_min).max(format_min);
    let mut max = int(schema, "maximum").unwrap_or(format_max).min(format_max);
    if exclusive("exclusiveMinimum") {
        min = min.checked_add(1)?;
    }
    if exclusive("exclusiveMaximum") {
        max = max.checked_sub(1)?;
    }
    let default = schema.get("default").and_then(Value::as_i64);
    (min <= max).then_some(Node::Integer(Range { min, max, default }))
}

fn number(schema: &Value) -> Option<Node> {
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    let exclusive = |key: &str| schema.get(key).and_then(Value::as_bool) == Some(true);
    // An exclusive bound is moved in by one: the edge itself is not admitted, and "just inside"
    // of a real-valued bound has no single right answer.
    let min = bound("minimum").map_or(-1e15, |min| {
        min + f64::from(u8::from(exclusive("exclusiveMinimum")))
    });
    let max = bound("maximum").map_or(1e15, |max| {
        max - f64::from(u8::from(exclusive("exclusiveMaximum")))
    });
    let default = bound("default");
    (min <= max).then_some(Node::Number(Range { min, max, default }))
}

fn text(schema: &Value) -> Option<Text> {
    let size = |key: &str| {
        schema
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    let one_of: Vec<String> = schema
        .get("enum")
        .and_then(Value::as_array)
        .map(|values| {
            values
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let sample = match schema.get("format").and_then(Value::as_str) {
        None | Some("") => None,
        Some("date-time") => Some("2026-01-01T00:00:00Z".to_string()),
        Some("date") => Some("2026-01-01".to_string()),
        // A format the generator has no sample for, unless an enum says what to write.
        Some(_) if one_of.is_empty() => return None,
        Some(_) => None,
    };
    // A pattern the generator cannot satisfy in general: only an enum's values are safe.
    if schema.get("pattern").is_some() && one_of.is_empty() {
        return None;
    }
    let min_len = size("minLength").unwrap_or(0);
    let max_len = size("maxLength")
        .unwrap_or(LONGEST_STRING)
        .min(LONGEST_STRING);
    let default = schema
        .get("default")
        .and_then(Value::as_str)
        .map(str::to_string);
    (min_len <= max_len).then_some(Text {
        one_of,
        min_len,
        max_len,
        sample,
        default,
    })
}

fn list(schema: &Value) -> Option<Node> {
    let items = Node::parse(schema.get("items")?);
    let size = |key: &str| {
        schema
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    let min = size("minItems").unwrap_or(0);
    let max = size("maxItems").unwrap_or(MOST_ITEMS).min(MOST_ITEMS);
    let default = schema.get("default").cloned();
    (min <= max).then(|| {
        Node::Array(Box::new(List {
            items,
            min,
            max,
            default,
        }))
    })
}

fn object(schema: &Value) -> Option<Node> {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        let required = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        return Some(Node::Object(Fields {
            properties: properties
                .iter()
                // A name with a space would not survive a step's one-line text.
                .filter(|(name, _)| !name.contains(char::is_whitespace))
                .map(|(name, property)| (name.clone(), Node::parse(property)))
                .collect(),
            required,
            default: schema.get("default").cloned(),
        }));
    }
    let values = schema
        .get("additionalProperties")
        .filter(|values| values.is_object())?;
    let size = |key: &str| {
        schema
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    let min = size("minProperties").unwrap_or(0);
    let max = size("maxProperties").unwrap_or(MOST_ITEMS).min(MOST_ITEMS);
    (min <= max).then(|| {
        Node::Map(Box::new(Dict {
            values: Node::parse(values),
            min,
            max,
        }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn explore_generate_integer_boundaries_stay_within_the_schema() {
        let node = Node::parse(&json!({"type": "integer", "minimum": 0, "maximum": 5}));
        assert_eq!(
            node.boundaries(),
            vec![json!(0), json!(1), json!(4), json!(5)]
        );
        assert_eq!(node.typical(), Some(json!(1)));
        let exclusive = Node::parse(
            &json!({"type": "integer", "minimum": 0, "exclusiveMinimum": true, "format": "int32"}),
        );
        assert_eq!(
            exclusive.boundaries(),
            vec![json!(1), json!(2), json!(i32::MAX - 1), json!(i32::MAX)]
        );
    }

    #[test]
    fn explore_generate_strings_lists_and_opaque_fields() {
        let text = Node::parse(&json!({"type": "string", "maxLength": 3}));
        assert_eq!(text.boundaries(), vec![json!(""), json!("zzz"), json!("a")]);
        let colours = Node::parse(&json!({"type": "string", "enum": ["red", "blue"]}));
        assert_eq!(colours.boundaries(), vec![json!("red"), json!("blue")]);
        let patterned = Node::parse(&json!({"type": "string", "pattern": "^[0-9]+$"}));
        assert_eq!(patterned, Node::Opaque { typical: None });
        let names = Node::parse(
            &json!({"type": "array", "minItems": 2, "items": {"type": "string", "minLength": 2}}),
        );
        assert_eq!(names.typical(), Some(json!(["aa", "ab"])));
        let labels =
            Node::parse(&json!({"type": "object", "additionalProperties": {"type": "string"}}));
        assert_eq!(labels.typical(), Some(json!({})));
    }

    #[test]
    fn explore_generate_objects_fill_optional_fields_and_need_required_ones() {
        let node = Node::parse(&json!({
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 3},
                "note": {"type": "string"},
                "code": {"type": "string", "pattern": "^x"}
            }
        }));
        assert_eq!(node.typical(), Some(json!({"size": 3, "note": "a"})));
        let impossible = Node::parse(&json!({
            "type": "object",
            "required": ["code"],
            "properties": {"code": {"type": "string", "pattern": "^x"}}
        }));
        assert_eq!(impossible.typical(), None);
    }
}
