//! Kubernetes' format library for CEL (`library.Format` in k8s.io/apiserver), which kube-apiserver
//! adds to the environment of every CRD validation rule:
//!
//! ```text
//!   format.dns1123Label()            ──► a NamedFormat value (a constant: one function per name)
//!   <NamedFormat>.validate(s)        ──► optional.none()          when s is valid
//!                                        optional.of([why, ...])  when not, in apimachinery's words
//! ```
//!
//! The names are the validators of k8s.io/apimachinery a rule most often wants: DNS-1123 labels and
//! subdomains, DNS-1035 labels (each also as a *prefix*, the form a `generateName` takes: a trailing
//! `-` allowed), qualified names and label values. The checks and their messages are those of
//! apimachinery 0.37 (`IsDNS1123Label`, …), written here from its regular expressions.
//!
//! Note the Go helper behind the prefix forms (`maskTrailingDash`) replaces the last *two*
//! characters of a name ending in `-` by `a`; kube-apiserver behaves so, and so does this module.
//!
//! The CRD formats kube-openapi's `strfmt` checks are named too: `uri` (Go's
//! `url.ParseRequestURI`, [`super::kubernetes_url`]), `uuid`, `byte` (base64), `date` and
//! `datetime`, written here from strfmt's rules. `format.named(name)` gives the format of that
//! name as an optional (none for an unknown name).

use std::any::Any;
use std::sync::OnceLock;

use cel::common::types::{CelList, CelOptional, CelString, STRING_TYPE, Type};
use cel::common::value::{CowVal, StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};
use regex::Regex;

/// The CEL type of a named format (cel-go's `kubernetes.NamedFormat`).
static FORMAT_TYPE: Type = Type::new_unspecified_type("kubernetes.NamedFormat");

/// A validator a rule can name: `format.<name>()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamedFormat {
    Dns1123Label,
    Dns1123Subdomain,
    Dns1035Label,
    QualifiedName,
    Dns1123LabelPrefix,
    Dns1123SubdomainPrefix,
    Dns1035LabelPrefix,
    LabelValue,
    Uri,
    Uuid,
    Byte,
    Date,
    Datetime,
}

/// Every named format with its CEL function name, in one place (`format.<name>`).
const NAMES: [(&str, NamedFormat); 13] = [
    ("format.dns1123Label", NamedFormat::Dns1123Label),
    ("format.dns1123Subdomain", NamedFormat::Dns1123Subdomain),
    ("format.dns1035Label", NamedFormat::Dns1035Label),
    ("format.qualifiedName", NamedFormat::QualifiedName),
    ("format.dns1123LabelPrefix", NamedFormat::Dns1123LabelPrefix),
    (
        "format.dns1123SubdomainPrefix",
        NamedFormat::Dns1123SubdomainPrefix,
    ),
    ("format.dns1035LabelPrefix", NamedFormat::Dns1035LabelPrefix),
    ("format.labelValue", NamedFormat::LabelValue),
    ("format.uri", NamedFormat::Uri),
    ("format.uuid", NamedFormat::Uuid),
    ("format.byte", NamedFormat::Byte),
    ("format.date", NamedFormat::Date),
    ("format.datetime", NamedFormat::Datetime),
];

/// The names this library declares (for the type checker's list of known functions).
pub fn is_function(name: &str) -> bool {
    name == "validate" || name == "format.named" || NAMES.iter().any(|(n, _)| *n == name)
}

impl Val for NamedFormat {
    fn get_type(&self) -> &Type {
        <Self as Val>::cel_type()
    }
    fn cel_type() -> &'static Type {
        &FORMAT_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<NamedFormat>() == Some(self)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(*self)
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for NamedFormat {}

/// Registers the library's overloads on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    // A `fn` pointer per name: the crate's functions are plain `fn`s, not closures.
    let constants: [cel::common::functions::Function; 13] = [
        constant::<0>,
        constant::<1>,
        constant::<2>,
        constant::<3>,
        constant::<4>,
        constant::<5>,
        constant::<6>,
        constant::<7>,
        constant::<8>,
        constant::<9>,
        constant::<10>,
        constant::<11>,
        constant::<12>,
    ];
    for ((name, _), function) in NAMES.iter().zip(constants) {
        env.add_overload(name, name, vec![], function)?;
    }
    env.add_overload("format.named", "format-named", vec![STRING_TYPE], named)?;
    env.add_member_overload(
        "validate",
        "format-validate",
        FORMAT_TYPE.to_owned(),
        vec![STRING_TYPE],
        validate,
    )?;
    Ok(())
}

/// `format.<name>()`: the `I`th named format.
fn constant<'b, 'v, const I: usize>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (name, format) = NAMES[I];
    if !args.is_empty() {
        return Err(ExecutionError::no_such_overload(name, Vec::new()));
    }
    Ok(CowVal::owned(format))
}

/// `format.named(name)`: the format of that name (`dns1123Label`, `uri`, …), or none.
fn named<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let no_overload = || ExecutionError::no_such_overload("format.named", Vec::new());
    let [name]: [CowVal<'b, 'v>; 1] = args.try_into().map_err(|_| no_overload())?;
    let name = name.downcast_ref::<CelString>().ok_or_else(no_overload)?;
    let wanted = format!("format.{}", name.inner());
    Ok(CowVal::owned(
        match NAMES.iter().find(|(n, _)| *n == wanted) {
            Some((_, format)) => CelOptional::of(Box::new(*format)),
            None => CelOptional::none(),
        },
    ))
}

/// `<format>.validate(s)`: none when `s` is valid, else the reasons it is not.
fn validate<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let no_overload = || ExecutionError::no_such_overload("validate", Vec::new());
    let [format, text]: [CowVal<'b, 'v>; 2] = args.try_into().map_err(|_| no_overload())?;
    let format = *format
        .as_ref()
        .downcast_ref::<NamedFormat>()
        .ok_or_else(no_overload)?;
    let text = text
        .as_ref()
        .downcast_ref::<CelString>()
        .ok_or_else(no_overload)?;
    let problems = format.validate(text.inner());
    if problems.is_empty() {
        return Ok(CowVal::owned(CelOptional::none()));
    }
    let items: Vec<Box<dyn Val + 'v>> = problems
        .into_iter()
        .map(|p| Box::new(CelString::from(p)) as Box<dyn Val + 'v>)
        .collect();
    Ok(CowVal::owned(CelOptional::of(Box::new(CelList::from(
        items,
    )))))
}

// ---------------------------------------------------------------------------------------------
// apimachinery's validators
// ---------------------------------------------------------------------------------------------

const DNS1123_LABEL: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const QUALIFIED_NAME_PART: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn dns1123_subdomain() -> String {
    format!("{DNS1123_LABEL}(\\.{DNS1123_LABEL})*")
}

/// `^pattern$`, compiled once per pattern (the patterns are constants of this module).
fn anchored(slot: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    slot.get_or_init(|| Regex::new(&format!("^(?:{pattern})$")).ok())
        .as_ref()
}

fn matches(slot: &'static OnceLock<Option<Regex>>, pattern: &str, text: &str) -> bool {
    anchored(slot, pattern).is_some_and(|r| r.is_match(text))
}

/// apimachinery's `RegexError`: the message, examples and the pattern (each example is followed by
/// `, ` and the next one preceded by ` or `: two spaces between them, as kube-apiserver prints).
fn regex_error(message: &str, pattern: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{message} (regex used for validation is '{pattern}')");
    }
    let examples: String = examples
        .iter()
        .map(|e| format!("'{e}', "))
        .collect::<Vec<_>>()
        .join(" or ");
    format!("{message} (e.g. {examples}regex used for validation is '{pattern}')")
}

fn max_len(n: usize) -> String {
    format!("must be no more than {n} characters")
}

static LABEL_RE: OnceLock<Option<Regex>> = OnceLock::new();
static SUBDOMAIN_RE: OnceLock<Option<Regex>> = OnceLock::new();
static DNS1035_RE: OnceLock<Option<Regex>> = OnceLock::new();
static QNAME_RE: OnceLock<Option<Regex>> = OnceLock::new();
static LABEL_VALUE_RE: OnceLock<Option<Regex>> = OnceLock::new();

fn dns1123_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push(max_len(63));
    }
    if !matches(&LABEL_RE, DNS1123_LABEL, value) {
        if matches(&SUBDOMAIN_RE, &dns1123_subdomain(), value) {
            errors.push("must not contain dots".to_string());
        } else {
            errors.push(regex_error(
                DNS1123_LABEL_MSG,
                DNS1123_LABEL,
                &["my-name", "123-abc"],
            ));
        }
    }
    errors
}

fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 253 {
        errors.push(max_len(253));
    }
    let pattern = dns1123_subdomain();
    if !matches(&SUBDOMAIN_RE, &pattern, value) {
        errors.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            &pattern,
            &["example.com"],
        ));
    }
    errors
}

fn dns1035_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push(max_len(63));
    }
    if !matches(&DNS1035_RE, DNS1035_LABEL, value) {
        errors.push(regex_error(
            DNS1035_LABEL_MSG,
            DNS1035_LABEL,
            &["my-name", "abc-123"],
        ));
    }
    errors
}

/// apimachinery's `IsQualifiedName` (its `IsLabelKey`): `[prefix/]name`, the prefix a DNS-1123
/// subdomain.
fn qualified_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                for message in dns1123_subdomain_errors(prefix) {
                    errors.push(format!("prefix part {message}"));
                }
            }
            name
        }
        _ => {
            let why = regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_PART,
                &["MyName", "my.name", "123-abc"],
            );
            errors.push(format!(
                "a valid label key {why} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errors.push(format!("name part {}", max_len(63)));
    }
    if !matches(&QNAME_RE, QUALIFIED_NAME_PART, name) {
        let why = regex_error(
            QUALIFIED_NAME_MSG,
            QUALIFIED_NAME_PART,
            &["MyName", "my.name", "123-abc"],
        );
        errors.push(format!("name part {why}"));
    }
    errors
}

fn label_value(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push(max_len(63));
    }
    if !matches(&LABEL_VALUE_RE, LABEL_VALUE, value) {
        errors.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}

/// apimachinery's `maskTrailingDash`, as it is (it drops the last two characters).
fn mask_trailing_dash(name: &str) -> String {
    if name.len() > 1 && name.ends_with('-') {
        let cut = name.len() - 2;
        // A multi-byte character before the dash cannot be cut in Rust; the name is invalid then
        // whatever replaces it, so any invalid stand-in keeps the verdict.
        return match name.get(..cut) {
            Some(kept) => format!("{kept}a"),
            None => format!("{}-", &name[..name.len() - 1]),
        };
    }
    name.to_string()
}

impl NamedFormat {
    /// Kubernetes' `MaxRegexSize` of the format: what its runtime cost of `validate` reads.
    pub fn max_regex_size(self) -> u64 {
        match self {
            NamedFormat::Dns1123Label
            | NamedFormat::Dns1035Label
            | NamedFormat::Dns1123LabelPrefix
            | NamedFormat::Dns1035LabelPrefix => 30,
            NamedFormat::Dns1123Subdomain
            | NamedFormat::QualifiedName
            | NamedFormat::Dns1123SubdomainPrefix => 60,
            NamedFormat::LabelValue => 40,
            // govalidator's URL pattern, base64 pattern; strfmt's UUID and date-time patterns.
            NamedFormat::Uri => 1103,
            NamedFormat::Byte => 84,
            NamedFormat::Uuid => 70,
            NamedFormat::Date | NamedFormat::Datetime => 71,
        }
    }

    /// Why `value` is not of this format (empty when it is).
    pub fn validate(self, value: &str) -> Vec<String> {
        match self {
            NamedFormat::Dns1123Label => dns1123_label(value),
            NamedFormat::Dns1123Subdomain => dns1123_subdomain_errors(value),
            NamedFormat::Dns1035Label => dns1035_label(value),
            NamedFormat::QualifiedName => qualified_name(value),
            NamedFormat::Dns1123LabelPrefix => dns1123_label(&mask_trailing_dash(value)),
            NamedFormat::Dns1123SubdomainPrefix => {
                dns1123_subdomain_errors(&mask_trailing_dash(value))
            }
            NamedFormat::Dns1035LabelPrefix => dns1035_label(&mask_trailing_dash(value)),
            NamedFormat::LabelValue => label_value(value),
            NamedFormat::Uri => match super::kubernetes_url::Url::parse_request_uri(value) {
                Ok(_) => Vec::new(),
                Err(e) => vec![e.to_string()],
            },
            NamedFormat::Uuid => problem(is_uuid(value), "does not match the UUID format"),
            NamedFormat::Byte => problem(is_base64(value), "invalid base64"),
            NamedFormat::Date => problem(is_date(value), "invalid date"),
            NamedFormat::Datetime => problem(is_datetime(value), "invalid datetime"),
        }
    }
}

fn problem(valid: bool, why: &str) -> Vec<String> {
    if valid {
        Vec::new()
    } else {
        vec![why.to_string()]
    }
}

static UUID_RE: OnceLock<Option<Regex>> = OnceLock::new();
static BASE64_RE: OnceLock<Option<Regex>> = OnceLock::new();
static TIME_RE: OnceLock<Option<Regex>> = OnceLock::new();

/// strfmt's `IsUUID`: 32 hex digits, case-insensitive, each of the four dashes optional.
fn is_uuid(value: &str) -> bool {
    let pattern = "(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}";
    matches(&UUID_RE, pattern, value)
}

/// govalidator's `IsBase64` (which strfmt's `byte` uses): padded standard base64, empty allowed.
fn is_base64(value: &str) -> bool {
    let pattern = "(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})";
    matches(&BASE64_RE, pattern, value)
}

/// strfmt's `IsDate`: Go's `time.Parse("2006-01-02", s)`: four-digit year, two-digit month and
/// day, the day within its month.
fn is_date(value: &str) -> bool {
    let b = value.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = value.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// strfmt's `IsDateTime`: lower-cased and split at every `t`, the first piece a date and the
/// second a time of its pattern, hours at most 23 and minutes and seconds at most 59.
fn is_datetime(value: &str) -> bool {
    if value.len() < 4 {
        return false;
    }
    let lower = value.to_lowercase();
    let pieces: Vec<&str> = lower.split('t').collect();
    if pieces.len() < 2 || !is_date(pieces[0]) {
        return false;
    }
    let pattern = "([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))";
    let Some(re) = anchored(&TIME_RE, pattern) else {
        return false;
    };
    let Some(c) = re.captures(pieces[1]) else {
        return false;
    };
    let part = |i: usize| c.get(i).map(|m| m.as_str()).unwrap_or("");
    part(1) <= "23" && part(2) <= "59" && part(3) <= "59"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels_as_apimachinery_has_them() {
        assert!(NamedFormat::Dns1123Label.validate("my-name").is_empty());
        assert_eq!(
            NamedFormat::Dns1123Label.validate("a.b"),
            vec!["must not contain dots".to_string()]
        );
        let bad = NamedFormat::Dns1123Label.validate("Bad");
        assert_eq!(bad.len(), 1);
        assert!(
            bad[0].starts_with("a lowercase RFC 1123 label must consist"),
            "{bad:?}"
        );
        assert!(bad[0].ends_with("(e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"), "{bad:?}");
        assert_eq!(NamedFormat::Dns1123Label.validate(&"a".repeat(64)).len(), 1);
        assert!(NamedFormat::Dns1123LabelPrefix.validate("abc-").is_empty());
        assert!(!NamedFormat::Dns1035Label.validate("1abc").is_empty());
        assert!(
            NamedFormat::Dns1123Subdomain
                .validate("example.com")
                .is_empty()
        );
        assert!(
            NamedFormat::QualifiedName
                .validate("example.com/My_Name")
                .is_empty()
        );
        assert!(!NamedFormat::QualifiedName.validate("a/b/c").is_empty());
        assert!(NamedFormat::LabelValue.validate("").is_empty());
        assert!(!NamedFormat::LabelValue.validate("-a").is_empty());
    }
}
