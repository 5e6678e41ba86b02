//! A generated scenario as data: a [`Sequence`] of [`Edit`]s to one object, printed one a line
//! and parsed back, so that a failing sequence found by a search replays word for word.
//!
//! ```text
//!  create {"replicas":1,"tags":["a"]}      POST the object with this spec
//!  set /spec/replicas 0                    merge patch {"spec":{"replicas":0}}
//!  remove /spec/note                       merge patch {"spec":{"note":null}}
//!  delete                                  DELETE the object
//! ```
//!
//! Each edit carries the whole new value of the field it sets (a list's edit names the whole new
//! list), so dropping an edit from a sequence, as shrinking does, leaves every other edit
//! meaning what it meant. Paths are JSON pointers below the object's root (`/spec/...`).

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

/// One change a generated scenario makes to its object.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// Create the object with this `spec` (also its re-creation after a [`Edit::Delete`]).
    Create {
        /// The whole spec.
        spec: Value,
    },
    /// Set the field at `path` (below `spec`) to `value`, creating missing parent objects.
    Set {
        /// Property names from `spec` down (never empty).
        path: Vec<String>,
        /// The field's new value.
        value: Value,
    },
    /// Remove the optional field (or map key) at `path` (below `spec`).
    Remove {
        /// Property names from `spec` down (never empty).
        path: Vec<String>,
    },
    /// Delete the object.
    Delete,
}

impl Edit {
    /// The merge patch of a `Set` or a `Remove` (`{"spec":{"a":{"b":value}}}`, `null` to
    /// remove); `None` for a create or a delete.
    pub fn merge_patch(&self) -> Option<Value> {
        let (path, leaf) = match self {
            Edit::Set { path, value } => (path, value.clone()),
            Edit::Remove { path } => (path, Value::Null),
            Edit::Create { .. } | Edit::Delete => return None,
        };
        let inner = path.iter().rev().fold(leaf, |value, name| {
            Value::Object(Map::from_iter([(name.clone(), value)]))
        });
        Some(Value::Object(Map::from_iter([("spec".to_string(), inner)])))
    }

    /// This edit's effect on `spec` (the generator's own record of the object), `None`
    /// meaning that the object does not exist.
    pub(crate) fn apply(&self, spec: &mut Option<Value>) {
        match self {
            Edit::Create { spec: new } => *spec = Some(new.clone()),
            Edit::Delete => *spec = None,
            Edit::Set { path, value } => {
                if let Some(root) = spec {
                    set(root, path, value.clone());
                }
            }
            Edit::Remove { path } => {
                if let Some(root) = spec {
                    remove(root, path);
                }
            }
        }
    }
}

/// Sets `path` below `root` to `value`, making (or replacing with) objects on the way.
pub(crate) fn set(root: &mut Value, path: &[String], value: Value) {
    let Some((first, rest)) = path.split_first() else {
        *root = value;
        return;
    };
    if !root.is_object() {
        *root = Value::Object(Map::new());
    }
    if let Value::Object(object) = root {
        let child = object.entry(first.clone()).or_insert(Value::Null);
        set(child, rest, value);
    }
}

/// Removes `path` below `root`, if there.
pub(crate) fn remove(root: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut here = root;
    for name in parents {
        match here.get_mut(name.as_str()) {
            Some(child) => here = child,
            None => return,
        }
    }
    if let Value::Object(object) = here {
        object.remove(last);
    }
}

/// The value at `path` below `root`.
pub(crate) fn get<'a>(root: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(root, |here, name| here.get(name.as_str()))
}

/// A JSON pointer for `path` below `spec` (`~` and `/` escaped as RFC 6901 says).
fn pointer(path: &[String]) -> String {
    let mut text = String::from("/spec");
    for name in path {
        text.push('/');
        text.push_str(&name.replace('~', "~0").replace('/', "~1"));
    }
    text
}

fn parse_pointer(text: &str) -> Option<Vec<String>> {
    let rest = text.strip_prefix("/spec/")?;
    let path: Vec<String> = rest
        .split('/')
        .map(|name| name.replace("~1", "/").replace("~0", "~"))
        .collect();
    (!path.iter().any(String::is_empty)).then_some(path)
}

impl fmt::Display for Edit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Edit::Create { spec } => write!(f, "create {spec}"),
            Edit::Set { path, value } => write!(f, "set {} {value}", pointer(path)),
            Edit::Remove { path } => write!(f, "remove {}", pointer(path)),
            Edit::Delete => write!(f, "delete"),
        }
    }
}

/// Why a line is not an [`Edit`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} of the sequence, {text:?}: {why}")]
pub struct SequenceParseError {
    /// From 1.
    pub line: usize,
    /// The line.
    pub text: String,
    /// What is wrong with it.
    pub why: String,
}

impl FromStr for Edit {
    type Err = String;

    fn from_str(line: &str) -> Result<Edit, String> {
        let line = line.trim();
        let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
        let json = |text: &str| {
            serde_json::from_str::<Value>(text).map_err(|error| format!("not JSON: {error}"))
        };
        let path = |text: &str| {
            parse_pointer(text).ok_or_else(|| format!("{text:?} is not a pointer below /spec"))
        };
        match verb {
            "create" => Ok(Edit::Create { spec: json(rest)? }),
            "set" => {
                let (at, value) = rest
                    .split_once(' ')
                    .ok_or("`set` needs a pointer and a value")?;
                Ok(Edit::Set {
                    path: path(at)?,
                    value: json(value)?,
                })
            }
            "remove" => Ok(Edit::Remove { path: path(rest)? }),
            "delete" if rest.is_empty() => Ok(Edit::Delete),
            _ => Err(format!(
                "{verb:?} is not one of create, set, remove, delete"
            )),
        }
    }
}

/// The edits of a generated scenario, in order. Its text (one edit a line) parses back to it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sequence {
    /// The edits.
    pub edits: Vec<Edit>,
}

impl Sequence {
    /// How many edits.
    pub fn len(&self) -> usize {
        self.edits.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }
}

impl fmt::Display for Sequence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, edit) in self.edits.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{edit}")?;
        }
        Ok(())
    }
}

impl FromStr for Sequence {
    type Err = SequenceParseError;

    fn from_str(text: &str) -> Result<Sequence, SequenceParseError> {
        let edits = text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(at, line)| {
                line.parse().map_err(|why| SequenceParseError {
                    line: at + 1,
                    text: line.to_string(),
                    why,
                })
            })
            .collect::<Result<Vec<Edit>, _>>()?;
        Ok(Sequence { edits })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn explore_generate_a_sequence_reads_back_as_it_prints() {
        let sequence = Sequence {
            edits: vec![
                Edit::Create {
                    spec: json!({"replicas": 1, "tags": ["a b", "c/d"]}),
                },
                Edit::Set {
                    path: vec!["limits".into(), "cpu/x".into()],
                    value: json!({"n": 0}),
                },
                Edit::Remove {
                    path: vec!["note".into()],
                },
                Edit::Delete,
            ],
        };
        let text = sequence.to_string();
        assert_eq!(
            text.lines().nth(1),
            Some(r#"set /spec/limits/cpu~1x {"n":0}"#)
        );
        assert_eq!(text.parse::<Sequence>(), Ok(sequence));
        let error = "create {}\nmove /spec/a 1".parse::<Sequence>();
        assert_eq!(error.map_err(|e| e.line), Err(2));
    }

    #[test]
    fn explore_generate_edits_are_merge_patches() {
        let set = Edit::Set {
            path: vec!["a".into(), "b".into()],
            value: json!(3),
        };
        assert_eq!(set.merge_patch(), Some(json!({"spec": {"a": {"b": 3}}})));
        let mut spec = Some(json!({"c": 1}));
        set.apply(&mut spec);
        Edit::Remove {
            path: vec!["c".into()],
        }
        .apply(&mut spec);
        assert_eq!(spec, Some(json!({"a": {"b": 3}})));
    }
}
