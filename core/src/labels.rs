//! Label selectors, parsed once and matched against objects' labels.
//!
//! The same grammar as the API server's `labelSelector` parameter and kubectl's `-l`:
//! requirements separated by commas, all of which must hold.
//!
//! | requirement | holds when |
//! |---|---|
//! | `app=web`, `app==web` | label `app` is `web` |
//! | `app!=web` | label `app` is missing or not `web` |
//! | `tier in (a, b)` | label `tier` is `a` or `b` |
//! | `tier notin (a, b)` | label `tier` is missing or neither |
//! | `app` | label `app` exists |
//! | `!app` | label `app` does not exist |
//!
//! The empty selector matches everything. [`LabelSelector::from_spec`] converts the structured form
//! found in workload specs (`matchLabels` + `matchExpressions`).

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

/// A selector that could not be parsed or converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector {selector:?}: {reason}")]
pub struct SelectorError {
    pub selector: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let get = |key: &str| labels.and_then(|l| l.get(key));
        match self {
            Requirement::Equals(k, v) => get(k) == Some(v),
            Requirement::NotEquals(k, v) => get(k) != Some(v),
            Requirement::In(k, vs) => get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        }
    }
}

/// See the [module docs](self).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// The selector that matches everything.
    pub fn everything() -> LabelSelector {
        LabelSelector::default()
    }

    /// Parses `app=web,tier in (a,b),!canary`.
    pub fn parse(selector: &str) -> Result<LabelSelector, SelectorError> {
        let error = |reason: &str| SelectorError {
            selector: selector.to_string(),
            reason: reason.to_string(),
        };
        let mut requirements = Vec::new();
        for part in split_top_level(selector).map_err(|r| error(&r))? {
            let part = part.trim();
            if part.is_empty() {
                if selector.trim().is_empty() {
                    continue;
                }
                return Err(error("empty requirement"));
            }
            requirements.push(parse_requirement(part).map_err(|r| error(&r))?);
        }
        Ok(LabelSelector { requirements })
    }

    /// Converts a workload's `spec.selector` (`matchLabels` and `matchExpressions`).
    pub fn from_spec(spec: &meta::LabelSelector) -> Result<LabelSelector, SelectorError> {
        let mut requirements = Vec::new();
        for (key, value) in spec.match_labels.iter().flatten() {
            requirements.push(Requirement::Equals(key.clone(), value.clone()));
        }
        for expression in spec.match_expressions.iter().flatten() {
            let key = expression.key.clone();
            let values = expression.values.clone().unwrap_or_default();
            requirements.push(match expression.operator.as_str() {
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                other => {
                    return Err(SelectorError {
                        selector: format!("{spec:?}"),
                        reason: format!("unknown operator {other:?}"),
                    });
                }
            });
        }
        Ok(LabelSelector { requirements })
    }

    /// True if every requirement holds for `labels` (`None`: an object without labels).
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// True for the selector that matches everything.
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }
}

impl std::str::FromStr for LabelSelector {
    type Err = SelectorError;
    /// Same as [`LabelSelector::parse`], so `"app=web".parse()` works.
    fn from_str(selector: &str) -> Result<Self, SelectorError> {
        LabelSelector::parse(selector)
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match requirement {
                Requirement::Equals(k, v) => write!(f, "{k}={v}")?,
                Requirement::NotEquals(k, v) => write!(f, "{k}!={v}")?,
                Requirement::In(k, vs) => write!(f, "{k} in ({})", vs.join(","))?,
                Requirement::NotIn(k, vs) => write!(f, "{k} notin ({})", vs.join(","))?,
                Requirement::Exists(k) => write!(f, "{k}")?,
                Requirement::DoesNotExist(k) => write!(f, "!{k}")?,
            }
        }
        Ok(())
    }
}

/// Splits on commas outside parentheses.
fn split_top_level(selector: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1).ok_or("unbalanced ')'")?,
            ',' if depth == 0 => {
                parts.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced '('".into());
    }
    parts.push(&selector[start..]);
    Ok(parts)
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(check_key(key.trim())?));
    }
    for (operator, build) in [
        (
            "!=",
            Requirement::NotEquals as fn(String, String) -> Requirement,
        ),
        ("==", Requirement::Equals),
        ("=", Requirement::Equals),
    ] {
        if let Some((key, value)) = part.split_once(operator) {
            return Ok(build(check_key(key.trim())?, check_value(value.trim())?));
        }
    }
    let mut words = part.splitn(2, char::is_whitespace);
    let key = check_key(words.next().unwrap_or("").trim())?;
    let rest = words.next().unwrap_or("").trim();
    if rest.is_empty() {
        return Ok(Requirement::Exists(key));
    }
    let (operator, list) = rest
        .split_once('(')
        .ok_or_else(|| format!("expected `in (…)` or `notin (…)` after {key:?}"))?;
    let list = list
        .strip_suffix(')')
        .ok_or_else(|| "expected ')' at the end of a value list".to_string())?;
    let values = list
        .split(',')
        .map(|v| check_value(v.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    match operator.trim() {
        "in" => Ok(Requirement::In(key, values)),
        "notin" => Ok(Requirement::NotIn(key, values)),
        other => Err(format!("unknown operator {other:?}")),
    }
}

fn check_key(key: &str) -> Result<String, String> {
    let name = key.rsplit('/').next().unwrap_or(key);
    if name.is_empty() || name.len() > 63 || !key.chars().all(label_char_or_prefix) {
        return Err(format!("invalid label key {key:?}"));
    }
    Ok(key.to_string())
}

fn check_value(value: &str) -> Result<String, String> {
    if value.len() > 63
        || !value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(format!("invalid label value {value:?}"));
    }
    Ok(value.to_string())
}

fn label_char_or_prefix(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-_./".contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_operator_matches_like_the_api_server() {
        let web = labels(&[("app", "web"), ("tier", "front")]);
        let db = labels(&[("app", "db")]);
        let cases = [
            ("", true, true),
            ("app=web", true, false),
            ("app==web", true, false),
            ("app!=web", false, true),
            ("tier in (front, back)", true, false),
            ("tier notin (front)", false, true),
            ("tier", true, false),
            ("!tier", false, true),
            ("app=web,tier=front", true, false),
            ("app in (web,db),!tier", false, true),
        ];
        for (selector, on_web, on_db) in cases {
            let parsed = LabelSelector::parse(selector).unwrap();
            assert_eq!(parsed.matches(Some(&web)), on_web, "{selector} on web");
            assert_eq!(parsed.matches(Some(&db)), on_db, "{selector} on db");
            let reparsed = LabelSelector::parse(&parsed.to_string()).unwrap();
            assert_eq!(reparsed, parsed, "{selector} round-trips");
        }
        assert!(LabelSelector::parse("app!=web").unwrap().matches(None));
    }

    #[test]
    fn bad_selectors_are_typed_errors() {
        for bad in [
            "app=(",
            "a b c",
            "tier in (a",
            "=web",
            "app=web,",
            "x in a",
            "k=v v",
        ] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad:?} should fail");
        }
    }

    #[test]
    fn spec_selectors_convert() {
        let spec = meta::LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![meta::LabelSelectorRequirement {
                key: "tier".into(),
                operator: "NotIn".into(),
                values: Some(vec!["cache".into()]),
            }]),
        };
        let selector = LabelSelector::from_spec(&spec).unwrap();
        assert!(selector.matches(Some(&labels(&[("app", "web")]))));
        assert!(!selector.matches(Some(&labels(&[("app", "web"), ("tier", "cache")]))));
    }
}
