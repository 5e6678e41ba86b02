//! `metadata.managedFields`: which manager owns which fields, read from and written to objects.
//!
//! Each entry is one manager's claim: its name, the operation that made it (`Apply` for server-side
//! apply, `Update` for everything else), the apiVersion it wrote, when it last changed something,
//! and its fields as FieldsV1. An applier has one entry whatever apiVersion it uses; an updater has
//! one per apiVersion. Entries are written sorted as kube-apiserver sorts them: `Apply` before
//! `Update`, then by time, manager, apiVersion and subresource.

use serde_json::{Map, Value, json};

use super::fieldset::{FieldSet, FieldsError};

/// The operation behind an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Create, update, or any patch other than apply.
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One manager's claim. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    /// The subresource written through (`status`, `scale`), `""` for the object itself: a
    /// manager's claims through different subresources are different claims.
    pub subresource: String,
    /// RFC 3339, seconds (`None` when the entry never changed anything).
    pub time: Option<String>,
    pub fields: FieldSet,
}

impl Entry {
    /// Whether this entry and `other` are the same claim (an applier's by name and subresource;
    /// an updater's by name, apiVersion and subresource).
    pub fn same_claim(
        &self,
        manager: &str,
        operation: Operation,
        api_version: &str,
        subresource: &str,
    ) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource == subresource
            && (operation == Operation::Apply || self.api_version == api_version)
    }

    /// How a conflict names this manager: `"alice"`, or `"curl" using v1` for an updater.
    pub fn describe(&self) -> String {
        match self.operation {
            Operation::Apply => format!("{:?}", self.manager),
            Operation::Update => format!("{:?} using {}", self.manager, self.api_version),
        }
    }

    /// kube-apiserver's key of this manager, which orders the managers of a conflict: an
    /// applier's name, or an updater's entry as JSON (so appliers come first).
    pub fn sort_key(&self) -> String {
        match self.operation {
            Operation::Apply => self.manager.clone(),
            Operation::Update => format!(
                "{{\"manager\":{:?},\"operation\":\"Update\",\"apiVersion\":{:?}}}",
                self.manager, self.api_version
            ),
        }
    }
}

/// Entries that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManagedError {
    /// `managedFields` is not a list of objects.
    #[error("managedFields must be a list of entries")]
    NotAList,
    /// An entry has an operation other than Apply or Update.
    #[error("managedFields entry of {manager:?}: unknown operation {operation:?}")]
    Operation { manager: String, operation: String },
    /// An entry's fieldsType is not FieldsV1.
    #[error("managedFields entry of {manager:?}: fieldsType must be FieldsV1")]
    FieldsType { manager: String },
    /// An entry's fields are not FieldsV1.
    #[error("managedFields entry of {manager:?}: {source}")]
    Fields {
        manager: String,
        #[source]
        source: FieldsError,
    },
}

/// All entries of an object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagedFields {
    pub entries: Vec<Entry>,
}

impl ManagedFields {
    /// The entries of `object` (none when it has none).
    pub fn of(object: &Value) -> Result<ManagedFields, ManagedError> {
        let Some(list) = object.pointer("/metadata/managedFields") else {
            return Ok(ManagedFields::default());
        };
        if list.is_null() {
            return Ok(ManagedFields::default());
        }
        let list = list.as_array().ok_or(ManagedError::NotAList)?;
        let mut entries = Vec::with_capacity(list.len());
        for item in list {
            let item = item.as_object().ok_or(ManagedError::NotAList)?;
            let text = |field: &str| item.get(field).and_then(Value::as_str).unwrap_or("");
            let manager = text("manager").to_string();
            let operation = match text("operation") {
                "Apply" => Operation::Apply,
                "Update" => Operation::Update,
                other => {
                    return Err(ManagedError::Operation {
                        manager,
                        operation: other.to_string(),
                    });
                }
            };
            if !matches!(text("fieldsType"), "FieldsV1" | "") {
                return Err(ManagedError::FieldsType { manager });
            }
            let empty = Value::Object(Map::new());
            let fields = FieldSet::from_fields_v1(item.get("fieldsV1").unwrap_or(&empty)).map_err(
                |source| ManagedError::Fields {
                    manager: manager.clone(),
                    source,
                },
            )?;
            entries.push(Entry {
                manager,
                operation,
                api_version: text("apiVersion").to_string(),
                subresource: text("subresource").to_string(),
                time: item.get("time").and_then(Value::as_str).map(str::to_string),
                fields,
            });
        }
        Ok(ManagedFields { entries })
    }

    /// The entry of a claim, if any.
    pub fn find(
        &self,
        manager: &str,
        operation: Operation,
        api_version: &str,
        subresource: &str,
    ) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| e.same_claim(manager, operation, api_version, subresource))
    }

    /// Drops entries that own nothing.
    pub fn drop_empty(&mut self) {
        self.entries.retain(|e| !e.fields.is_empty());
    }

    /// Writes the entries, sorted, into `object`'s metadata (removing the field when there are none).
    pub fn write_to(&self, object: &mut Value) {
        let mut entries: Vec<&Entry> = self.entries.iter().collect();
        entries.sort_by(|a, b| {
            (
                a.operation,
                &a.time,
                &a.manager,
                &a.api_version,
                &a.subresource,
            )
                .cmp(&(
                    b.operation,
                    &b.time,
                    &b.manager,
                    &b.api_version,
                    &b.subresource,
                ))
        });
        let rendered: Vec<Value> = entries
            .iter()
            .map(|e| {
                let mut entry = json!({"manager": e.manager, "operation": e.operation.as_str(),
                    "apiVersion": e.api_version});
                if let (Some(time), Some(map)) = (&e.time, entry.as_object_mut()) {
                    map.insert("time".into(), time.clone().into());
                }
                if let Some(map) = entry.as_object_mut() {
                    map.insert("fieldsType".into(), "FieldsV1".into());
                    map.insert("fieldsV1".into(), e.fields.to_fields_v1());
                    if !e.subresource.is_empty() {
                        map.insert("subresource".into(), e.subresource.clone().into());
                    }
                }
                entry
            })
            .collect();
        let metadata = crate::meta::metadata_mut(object);
        if rendered.is_empty() {
            metadata.remove("managedFields");
        } else {
            metadata.insert("managedFields".into(), Value::Array(rendered));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_sorted() {
        let object = json!({"metadata": {"managedFields": [
            {"manager": "z", "operation": "Update", "apiVersion": "v1", "time": "2020-01-01T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:k": {}}}},
            {"manager": "a", "operation": "Apply", "apiVersion": "v1", "time": "2021-01-01T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:j": {}}}}]}});
        let managed = ManagedFields::of(&object).expect("valid");
        assert_eq!(managed.entries.len(), 2);
        let mut written = json!({});
        managed.write_to(&mut written);
        assert_eq!(written["metadata"]["managedFields"][0]["manager"], "a");
        assert_eq!(
            managed.entries[0].describe(),
            "\"z\" using v1",
            "an updater is named with its apiVersion"
        );
        let bad = json!({"metadata": {"managedFields": [{"manager": "x", "operation": "Merge"}]}});
        assert!(ManagedFields::of(&bad).is_err());
    }
}
