//! Kubernetes' semver library for CEL (`library.SemverLib`, version 1, in k8s.io/apiserver), which
//! kube-apiserver 1.33+ adds to the environment of every CRD validation rule:
//!
//! ```text
//!   isSemver(s), isSemver(s, normalize)   ──► whether the string parses
//!   semver(s), semver(s, normalize)       ──► a `kubernetes.Semver`
//!   v.major(), v.minor(), v.patch()        ints
//!   v.isGreaterThan(w), v.isLessThan(w), v.compareTo(w), v == w   precedence (build ignored)
//! ```
//!
//! Kubernetes parses with `github.com/blang/semver/v4`, which is both stricter and laxer than the
//! `semver` crate (it takes `1.2.3-` only as an error of its own words, reads numbers with Go's
//! `strconv.ParseUint`, and compares pre-releases its own way), and the errors reach the rule's
//! message: so [`Version::parse`] follows blang's `Parse` step by step, with its error texts.
//! `normalize` is Kubernetes' `normalizeAndParse`: a leading `v` dropped, leading zeros trimmed,
//! missing minor and patch added as 0.

use std::any::Any;
use std::cmp::Ordering;

use cel::common::types::{BOOL_TYPE, CelBool, CelInt, CelString, STRING_TYPE, Type};
use cel::common::value::{CowVal, StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// The CEL type of a version (kube-apiserver's `kubernetes.Semver`).
static SEMVER_TYPE: Type = Type::new_unspecified_type("kubernetes.Semver");

/// The names this library declares (for the type checker's list of known functions).
pub const FUNCTIONS: [&str; 8] = [
    "semver",
    "isSemver",
    "major",
    "minor",
    "patch",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
];

const NUMBERS: &str = "0123456789";
const ALPHANUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-0123456789";

/// One pre-release identifier: numeric ones sort before alphanumeric ones.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pre {
    Number(u64),
    Text(String),
}

/// A version as blang/semver holds it (build metadata is kept only to be checked: it plays no
/// part in comparisons).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<Pre>,
}

fn contains_only(s: &str, set: &str) -> bool {
    s.chars().all(|c| set.contains(c))
}

fn leading_zero(s: &str) -> bool {
    s.len() > 1 && s.starts_with('0')
}

/// Go's `strconv.ParseUint(s, 10, 64)`, with its error text (`s` holds only digits here).
fn parse_uint(s: &str) -> Result<u64, String> {
    if s.is_empty() {
        return Err(format!("strconv.ParseUint: parsing {s:?}: invalid syntax"));
    }
    s.parse()
        .map_err(|_| format!("strconv.ParseUint: parsing {s:?}: value out of range"))
}

impl Version {
    /// blang/semver's `Parse`.
    pub fn parse(s: &str) -> Result<Version, String> {
        if s.is_empty() {
            return Err("Version string empty".into());
        }
        let parts: Vec<&str> = s.splitn(3, '.').collect();
        let [major, minor, rest] = parts.as_slice() else {
            return Err("No Major.Minor.Patch elements found".into());
        };
        let number = |text: &str, what: &str| -> Result<u64, String> {
            if !contains_only(text, NUMBERS) {
                return Err(format!(
                    "Invalid character(s) found in {what} number {text:?}"
                ));
            }
            if leading_zero(text) {
                let what = format!("{}{}", what[..1].to_uppercase(), &what[1..]);
                return Err(format!(
                    "{what} number must not contain leading zeroes {text:?}"
                ));
            }
            parse_uint(text)
        };
        let major = number(major, "major")?;
        let minor = number(minor, "minor")?;
        let mut patch_text = *rest;
        let mut build: Vec<&str> = Vec::new();
        if let Some(i) = patch_text.find('+') {
            build = patch_text[i + 1..].split('.').collect();
            patch_text = &patch_text[..i];
        }
        let mut pre_text: Vec<&str> = Vec::new();
        if let Some(i) = patch_text.find('-') {
            pre_text = patch_text[i + 1..].split('.').collect();
            patch_text = &patch_text[..i];
        }
        let patch = number(patch_text, "patch")?;
        let mut pre = Vec::new();
        for p in pre_text {
            if p.is_empty() {
                return Err("Prerelease is empty".into());
            }
            if contains_only(p, NUMBERS) {
                if leading_zero(p) {
                    return Err(format!(
                        "Numeric PreRelease version must not contain leading zeroes {p:?}"
                    ));
                }
                pre.push(Pre::Number(parse_uint(p)?));
            } else if contains_only(p, ALPHANUM) {
                pre.push(Pre::Text(p.to_string()));
            } else {
                return Err(format!("Invalid character(s) found in prerelease {p:?}"));
            }
        }
        for b in build {
            if b.is_empty() {
                return Err("Build meta data is empty".into());
            }
            if !contains_only(b, ALPHANUM) {
                return Err(format!(
                    "Invalid character(s) found in build meta data {b:?}"
                ));
            }
        }
        Ok(Version {
            major,
            minor,
            patch,
            pre,
        })
    }

    /// Kubernetes' `normalizeAndParse`.
    pub fn parse_normalized(s: &str) -> Result<Version, String> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let mut parts: Vec<String> = s.splitn(3, '.').map(str::to_string).collect();
        for part in &mut parts {
            if part.len() > 1 {
                let trimmed = part.trim_start_matches('0');
                *part = if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
                    trimmed.to_string()
                } else {
                    format!("0{trimmed}")
                };
            }
        }
        if parts.len() < 3 {
            if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
                return Err("short version cannot contain PreRelease/Build meta data".into());
            }
            while parts.len() < 3 {
                parts.push("0".into());
            }
        }
        Version::parse(&parts.join("."))
    }

    /// blang/semver's `Compare`: numbers, then pre-releases (none sorts last).
    pub fn compare(&self, other: &Version) -> Ordering {
        let core =
            (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch));
        if core != Ordering::Equal {
            return core;
        }
        match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            _ => {}
        }
        for (a, b) in self.pre.iter().zip(&other.pre) {
            let order = match (a, b) {
                (Pre::Number(x), Pre::Number(y)) => x.cmp(y),
                (Pre::Number(_), Pre::Text(_)) => Ordering::Less,
                (Pre::Text(_), Pre::Number(_)) => Ordering::Greater,
                (Pre::Text(x), Pre::Text(y)) => x.cmp(y),
            };
            if order != Ordering::Equal {
                return order;
            }
        }
        self.pre.len().cmp(&other.pre.len())
    }
}

impl Val for Version {
    fn get_type(&self) -> &Type {
        <Self as Val>::cel_type()
    }
    fn cel_type() -> &'static Type {
        &SEMVER_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<Version>()
            .is_some_and(|o| self.compare(o) == Ordering::Equal)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for Version {}

type Function = cel::common::functions::Function;

/// Registers the library's overloads on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    let v = || SEMVER_TYPE.to_owned();
    env.add_overload("semver", "string_to_semver", vec![STRING_TYPE], to_semver)?;
    env.add_overload(
        "semver",
        "string_bool_to_semver",
        vec![STRING_TYPE, BOOL_TYPE],
        to_semver,
    )?;
    env.add_overload("isSemver", "is_semver_string", vec![STRING_TYPE], is_semver)?;
    env.add_overload(
        "isSemver",
        "is_semver_string_bool",
        vec![STRING_TYPE, BOOL_TYPE],
        is_semver,
    )?;
    let members: [(&str, &str, Vec<Type>, Function); 6] = [
        ("major", "semver_major", vec![], major),
        ("minor", "semver_minor", vec![], minor),
        ("patch", "semver_patch", vec![], patch),
        (
            "isGreaterThan",
            "semver_is_greater_than",
            vec![v()],
            greater,
        ),
        ("isLessThan", "semver_is_less_than", vec![v()], less),
        ("compareTo", "semver_compare_to", vec![v()], compare_to),
    ];
    for (name, id, args, function) in members {
        env.add_member_overload(name, id, v(), args, function)?;
    }
    Ok(())
}

fn no_overload(function: &str) -> ExecutionError {
    ExecutionError::no_such_overload(function, Vec::new())
}

/// The string and the `normalize` flag (false when not given) of `semver` and `isSemver`.
fn text_and_flag(
    function: &str,
    args: &[CowVal<'_, '_>],
) -> Result<(String, bool), ExecutionError> {
    let text = args
        .first()
        .and_then(|a| a.downcast_ref::<CelString>())
        .map(|s| s.inner().to_string())
        .ok_or_else(|| no_overload(function))?;
    let normalize = match args.get(1) {
        None => false,
        Some(flag) => *flag
            .downcast_ref::<CelBool>()
            .ok_or_else(|| no_overload(function))?
            .inner(),
    };
    Ok((text, normalize))
}

fn parse(text: &str, normalize: bool) -> Result<Version, String> {
    if normalize {
        Version::parse_normalized(text)
    } else {
        Version::parse(text)
    }
}

fn to_semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (text, normalize) = text_and_flag("semver", &args)?;
    let version =
        parse(&text, normalize).map_err(|e| ExecutionError::function_error("semver", e))?;
    Ok(CowVal::owned(version))
}

fn is_semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (text, normalize) = text_and_flag("isSemver", &args)?;
    Ok(CowVal::owned(CelBool::from(
        parse(&text, normalize).is_ok(),
    )))
}

fn version_of<'a>(function: &str, value: &'a dyn Val) -> Result<&'a Version, ExecutionError> {
    value
        .downcast_ref::<Version>()
        .ok_or_else(|| no_overload(function))
}

fn field<'b, 'v>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
    read: fn(&Version) -> u64,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [v]: [CowVal<'b, 'v>; 1] = args.try_into().map_err(|_| no_overload(function))?;
    // Go converts the uint64 to a CEL int as it is (wrapping past 2^63).
    let value = read(version_of(function, v.as_ref())?) as i64;
    Ok(CowVal::owned(CelInt::from(value)))
}

fn major<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    field("major", args, |v| v.major)
}

fn minor<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    field("minor", args, |v| v.minor)
}

fn patch<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    field("patch", args, |v| v.patch)
}

fn order(function: &str, args: Vec<CowVal<'_, '_>>) -> Result<Ordering, ExecutionError> {
    let [a, b]: [CowVal<'_, '_>; 2] = args.try_into().map_err(|_| no_overload(function))?;
    Ok(version_of(function, a.as_ref())?.compare(version_of(function, b.as_ref())?))
}

fn greater<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let o = order("isGreaterThan", args)?;
    Ok(CowVal::owned(CelBool::from(o == Ordering::Greater)))
}

fn less<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let o = order("isLessThan", args)?;
    Ok(CowVal::owned(CelBool::from(o == Ordering::Less)))
}

fn compare_to<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let o = order("compareTo", args)?;
    Ok(CowVal::owned(CelInt::from(o as i64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_compare_as_blang_semver_does() {
        let v = |s: &str| Version::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(v("1.2.3-alpha.1+build.5").pre.len(), 2);
        assert_eq!(v("1.0.0-alpha").compare(&v("1.0.0")), Ordering::Less);
        assert_eq!(v("1.0.0-2").compare(&v("1.0.0-10")), Ordering::Less);
        assert_eq!(v("1.0.0-a").compare(&v("1.0.0-1")), Ordering::Greater);
        assert_eq!(v("1.0.0-a.b").compare(&v("1.0.0-a")), Ordering::Greater);
        assert_eq!(v("1.0.0+x").compare(&v("1.0.0+y")), Ordering::Equal);
        for (bad, error) in [
            ("", "Version string empty"),
            ("1.2", "No Major.Minor.Patch elements found"),
            (
                "01.2.3",
                "Major number must not contain leading zeroes \"01\"",
            ),
            ("1.x.3", "Invalid character(s) found in minor number \"x\""),
            ("1..3", "strconv.ParseUint: parsing \"\": invalid syntax"),
            ("1.2.3-", "Prerelease is empty"),
            (
                "1.2.3-01",
                "Numeric PreRelease version must not contain leading zeroes \"01\"",
            ),
            ("1.2.3+", "Build meta data is empty"),
            (
                "1.2.3-a_b",
                "Invalid character(s) found in prerelease \"a_b\"",
            ),
        ] {
            assert_eq!(Version::parse(bad).err().as_deref(), Some(error), "{bad}");
        }
        assert_eq!(Version::parse_normalized("v01.02"), Ok(v("1.2.0")));
        assert_eq!(
            Version::parse_normalized("1-rc").err().as_deref(),
            Some("short version cannot contain PreRelease/Build meta data")
        );
    }
}
