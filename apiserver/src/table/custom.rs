//! The columns of a custom resource: its CRD's `additionalPrinterColumns` for the served version.
//!
//! A CRD version lists columns as `{name, type, format, description, priority, jsonPath}`; the Table
//! has `Name` first and then one column per entry. A version without columns gets kube-apiserver's
//! default, one `Age` column of type `date` on `.metadata.creationTimestamp`.
//!
//! Each cell is the *first* match of the column's path, shaped by the column's type as
//! kube-apiserver's CRD table convertor does: text columns print any value (`fmt.Sprint`, or JSON
//! for maps and lists); `integer`, `number` and `boolean` columns keep a value of their kind (a float
//! in an integer column is truncated) and are empty otherwise; `date` columns turn an RFC 3339
//! string into an age (`<invalid>` when it is not one). No match: an empty cell (`null`, which
//! kubectl prints as `<none>`).

use std::borrow::Cow;

use serde_json::Value;

use super::descriptions as doc;
use super::format::{self, GoNumber, Instant};
use super::jsonpath::JsonPath;
use super::printers::{Column, Row};

/// The columns of one served version of a CRD. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct CustomColumns {
    /// Every column after `Name`, each with its parsed path.
    columns: Vec<(Column, JsonPath)>,
}

impl CustomColumns {
    /// The columns `crd` (the stored CustomResourceDefinition) declares for `version`.
    ///
    /// A column whose path cannot be parsed ends the list there, as on kube-apiserver (which logs
    /// "invalid printer specification" and keeps the columns before it).
    pub fn of(crd: &Value, version: &str) -> CustomColumns {
        let declared: &[Value] = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .and_then(|versions| {
                versions
                    .iter()
                    .find(|v| v.get("name").and_then(Value::as_str) == Some(version))
            })
            .and_then(|v| v.get("additionalPrinterColumns"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if declared.is_empty() {
            return CustomColumns::default_age();
        }
        let mut columns = Vec::new();
        for declared in declared {
            let text = |field: &str| {
                declared
                    .get(field)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let path_text = text("jsonPath");
            let path = match JsonPath::parse(&path_text) {
                Ok(path) => path,
                Err(error) => {
                    tracing::warn!(%error, column = %text("name"),
                        "a CRD has a printer column this server cannot evaluate; it and the columns after it are left out");
                    break;
                }
            };
            let description = match text("description") {
                d if d.is_empty() => {
                    format!("Custom resource definition column (in JSONPath format): {path_text}")
                }
                d => d,
            };
            let column = Column {
                name: Cow::Owned(text("name")),
                kind: Cow::Owned(text("type")),
                format: Cow::Owned(text("format")),
                description: Cow::Owned(description),
                priority: declared
                    .get("priority")
                    .and_then(Value::as_i64)
                    .unwrap_or(0),
            };
            columns.push((column, path));
        }
        CustomColumns { columns }
    }

    /// The default for a version without columns: `Age`, a date, from `.metadata.creationTimestamp`.
    fn default_age() -> CustomColumns {
        let column = Column {
            name: Cow::Borrowed("Age"),
            kind: Cow::Borrowed("date"),
            format: Cow::Borrowed(""),
            description: Cow::Borrowed(doc::CREATION_TIMESTAMP),
            priority: 0,
        };
        let path = JsonPath::parse(".metadata.creationTimestamp");
        CustomColumns {
            columns: path.map(|p| vec![(column, p)]).unwrap_or_default(),
        }
    }

    /// `Name`, then the declared columns.
    pub fn columns(&self) -> Vec<Column> {
        std::iter::once(Column::name())
            .chain(self.columns.iter().map(|(c, _)| c.clone()))
            .collect()
    }

    /// The cells of `object` at `now`.
    pub fn row(&self, object: &Value, now: Instant) -> Row {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut cells = vec![Value::from(name)];
        for (column, path) in &self.columns {
            let cell = match path.find(object).first() {
                None => Value::Null,
                Some(value) => cell(&column.kind, value, now),
            };
            cells.push(cell);
        }
        Row {
            cells,
            conditions: Vec::new(),
        }
    }
}

/// A value shaped by a column type (see the [module docs](self)).
fn cell(kind: &str, value: &Value, now: Instant) -> Value {
    match (kind, value) {
        ("string", value) => format::go_text(value).into(),
        ("integer", Value::Number(n)) => match GoNumber::of(n) {
            GoNumber::Int(i) => i.into(),
            // Go's int64(float64) truncates toward zero (and saturates here).
            GoNumber::Float(f) => (f.trunc() as i64).into(),
        },
        ("number", Value::Number(n)) => match GoNumber::of(n) {
            GoNumber::Int(i) => float_cell(i as f64),
            GoNumber::Float(f) => float_cell(f),
        },
        ("boolean", Value::Bool(b)) => (*b).into(),
        ("date", Value::String(text)) => {
            if text.is_empty() || text == "null" {
                return format::age(None, now).into();
            }
            match Instant::parse_rfc3339(text) {
                Some(_) => format::age(Some(value), now).into(),
                None => "<invalid>".into(),
            }
        }
        _ => Value::Null,
    }
}

/// A float64 cell: Go's encoder writes an integral float without a fraction (`3`, not `3.0`).
fn float_cell(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        Value::from(f as i64)
    } else {
        Value::from(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: i64 = 1_700_000_000;

    fn crd(columns: Value) -> Value {
        json!({"spec": {"versions": [
            {"name": "v1alpha1"},
            {"name": "v1", "additionalPrinterColumns": columns}]}})
    }

    #[test]
    fn declared_columns_follow_the_name() {
        let crd = crd(json!([
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status",
             "description": "Ready?", "priority": 1},
            {"name": "Size", "type": "number", "format": "double", "jsonPath": ".spec.size"},
            {"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused"},
            {"name": "Started", "type": "date", "jsonPath": ".status.started"},
            {"name": "Spec", "type": "string", "jsonPath": ".spec.tags"},
        ]));
        let columns = CustomColumns::of(&crd, "v1");
        let headers: Vec<(String, String, i64)> = columns
            .columns()
            .iter()
            .map(|c| (c.name.to_string(), c.kind.to_string(), c.priority))
            .collect();
        assert_eq!(headers[0], ("Name".into(), "string".into(), 0));
        assert_eq!(headers[2], ("Ready".into(), "string".into(), 1));
        assert_eq!(columns.columns()[2].description, "Ready?");
        assert_eq!(
            columns.columns()[1].description,
            "Custom resource definition column (in JSONPath format): .spec.replicas"
        );
        assert_eq!(columns.columns()[3].format, "double");

        let object = json!({"metadata": {"name": "w"},
            "spec": {"replicas": 2.7, "size": 3, "paused": "no", "tags": {"b": 1, "a": [true]}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "started": crate::meta::rfc3339((NOW - 90) as u64)}});
        let row = columns.row(&object, Instant::from_unix_seconds(NOW));
        assert_eq!(
            row.cells,
            [
                json!("w"),
                json!(2),
                json!("True"),
                json!(3),
                json!(null),
                json!("90s"),
                json!(r#"{"a":[true],"b":1}"#)
            ]
        );
        let empty = columns.row(
            &json!({"metadata": {"name": "x"}}),
            Instant::from_unix_seconds(NOW),
        );
        assert_eq!(
            empty.cells[1..],
            [
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null
            ]
        );
    }

    #[test]
    fn versions_without_columns_show_an_age() {
        let columns = CustomColumns::of(&crd(json!([])), "v1alpha1");
        let names: Vec<String> = columns
            .columns()
            .iter()
            .map(|c| c.name.to_string())
            .collect();
        assert_eq!(names, ["Name", "Age"]);
        assert_eq!(columns.columns()[1].kind, "date");
        let object = json!({"metadata": {"name": "w",
            "creationTimestamp": crate::meta::rfc3339((NOW - 3600) as u64)}});
        let row = columns.row(&object, Instant::from_unix_seconds(NOW));
        assert_eq!(row.cells, [json!("w"), json!("60m")]);
    }

    #[test]
    fn dates_that_are_not_dates() {
        let now = Instant::from_unix_seconds(NOW);
        assert_eq!(cell("date", &json!("yesterday"), now), json!("<invalid>"));
        assert_eq!(cell("date", &json!(""), now), json!("<unknown>"));
        assert_eq!(cell("date", &json!(5), now), json!(null));
        assert_eq!(cell("string", &json!(null), now), json!("<no value>"));
        assert_eq!(cell("number", &json!(1.5), now), json!(1.5));
    }

    #[test]
    fn an_unreadable_path_ends_the_columns() {
        let crd = crd(json!([
            {"name": "A", "type": "string", "jsonPath": ".a"},
            {"name": "B", "type": "string", "jsonPath": ".b["},
            {"name": "C", "type": "string", "jsonPath": ".c"},
        ]));
        let names: Vec<String> = CustomColumns::of(&crd, "v1")
            .columns()
            .iter()
            .map(|c| c.name.to_string())
            .collect();
        assert_eq!(names, ["Name", "A"]);
    }
}
