//! Field selectors, parsed once and matched against the values of an object's fields.
//!
//! The grammar of the API server's `fieldSelector` parameter: requirements separated by commas, all
//! of which must hold.
//!
//! | requirement | holds when |
//! |---|---|
//! | `metadata.name=web`, `metadata.name==web` | the field's value is `web` |
//! | `status.phase!=Running` | the field's value is not `Running` |
//!
//! There are no sets (`in`, `notin`) and no existence tests: every field has a value, a missing one
//! reading as the empty string. The empty selector matches everything.
//!
//! Which fields may be selected on, and how a field's value is read from an object, belong to the
//! server: each kind has its own field set. So [`FieldSelector::parse_with`] takes a test of the
//! field's name and [`FieldSelector::matches`] takes the reader of its value; this module knows
//! neither JSON nor any kind.

use std::fmt;

/// A field selector that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldSelectorError {
    /// A requirement that is none of `field=value`, `field==value`, `field!=value`.
    #[error("invalid field selector: can't understand {requirement:?}")]
    Syntax { requirement: String },
    /// A well-formed requirement on a field the caller's test refused (one the kind does not let
    /// you select on).
    #[error("field label not supported: {field}")]
    UnsupportedField { field: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
}

/// See the [module docs](self).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<Requirement>,
}

impl FieldSelector {
    /// The selector that matches everything.
    pub fn everything() -> FieldSelector {
        FieldSelector::default()
    }

    /// Parses `metadata.name=web,status.phase!=Running`, any field name allowed.
    pub fn parse(selector: &str) -> Result<FieldSelector, FieldSelectorError> {
        FieldSelector::parse_with(selector, |_| true)
    }

    /// Parses `selector`, asking `supported` about each requirement's field as it is read: the
    /// first requirement that is malformed or names a refused field is the error.
    pub fn parse_with(
        selector: &str,
        supported: impl Fn(&str) -> bool,
    ) -> Result<FieldSelector, FieldSelectorError> {
        let mut requirements = Vec::new();
        for part in selector.split(',').map(str::trim) {
            if part.is_empty() {
                continue;
            }
            let pair =
                |(field, value): (&str, &str)| (field.trim().to_string(), value.trim().to_string());
            let requirement = if let Some(split) = part.split_once("!=") {
                let (field, value) = pair(split);
                Requirement::NotEquals(field, value)
            } else if let Some(split) = part.split_once("==").or_else(|| part.split_once('=')) {
                let (field, value) = pair(split);
                Requirement::Equals(field, value)
            } else {
                return Err(FieldSelectorError::Syntax {
                    requirement: part.to_string(),
                });
            };
            let field = requirement.field();
            if !supported(field) {
                return Err(FieldSelectorError::UnsupportedField {
                    field: field.to_string(),
                });
            }
            requirements.push(requirement);
        }
        Ok(FieldSelector { requirements })
    }

    /// True if every requirement holds, `value_of(field)` being the value of the object's field
    /// as the server's field set for the kind spells it.
    pub fn matches(&self, value_of: impl Fn(&str) -> String) -> bool {
        self.requirements
            .iter()
            .all(|requirement| match requirement {
                Requirement::Equals(field, value) => value_of(field) == *value,
                Requirement::NotEquals(field, value) => value_of(field) != *value,
            })
    }

    /// True for the selector that matches everything.
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }
}

impl Requirement {
    fn field(&self) -> &str {
        match self {
            Requirement::Equals(field, _) | Requirement::NotEquals(field, _) => field,
        }
    }
}

impl std::str::FromStr for FieldSelector {
    type Err = FieldSelectorError;
    /// Same as [`FieldSelector::parse`], so `"metadata.name=web".parse()` works.
    fn from_str(selector: &str) -> Result<Self, FieldSelectorError> {
        FieldSelector::parse(selector)
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match requirement {
                Requirement::Equals(field, value) => write!(f, "{field}={value}")?,
                Requirement::NotEquals(field, value) => write!(f, "{field}!={value}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(field: &str) -> String {
        match field {
            "metadata.name" => "a".into(),
            "metadata.namespace" => "n".into(),
            "status.phase" => "Running".into(),
            _ => String::new(),
        }
    }

    #[test]
    fn every_operator_matches_like_the_api_server() {
        let cases = [
            ("", true),
            ("status.phase=Running", true),
            ("status.phase==Running", true),
            ("status.phase!=Running", false),
            ("metadata.name==a, metadata.namespace = n", true),
            ("metadata.name=a,metadata.namespace=other", false),
            ("spec.nodeName=", true),
            ("spec.nodeName!=", false),
        ];
        for (selector, selected) in cases {
            let parsed = FieldSelector::parse(selector).expect(selector);
            assert_eq!(parsed.matches(pod), selected, "{selector}");
            let reparsed = FieldSelector::parse(&parsed.to_string()).expect("prints as it parses");
            assert_eq!(reparsed, parsed, "{selector} round-trips");
        }
        assert!(FieldSelector::everything().is_everything());
        assert!(!FieldSelector::parse("a=b").unwrap().is_everything());
    }

    #[test]
    fn the_first_bad_requirement_is_the_error() {
        let known = |field: &str| field.starts_with("metadata.");
        let syntax = |requirement: &str| FieldSelectorError::Syntax {
            requirement: requirement.into(),
        };
        let unsupported = |field: &str| FieldSelectorError::UnsupportedField {
            field: field.into(),
        };
        assert_eq!(
            FieldSelector::parse_with("nonsense", known),
            Err(syntax("nonsense"))
        );
        assert_eq!(
            FieldSelector::parse_with("spec.foo=1,nonsense", known),
            Err(unsupported("spec.foo"))
        );
        assert_eq!(
            FieldSelector::parse_with("nonsense,spec.foo=1", known),
            Err(syntax("nonsense"))
        );
        assert!(FieldSelector::parse_with("metadata.name=a,,", known).is_ok());
    }
}
