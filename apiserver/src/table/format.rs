//! How cells are spelled: ages, label selectors, and values printed the way Go prints them.
//!
//! kube-apiserver computes every cell on the server, in Go; kubectl only lays the cells out. So a cell
//! must be the very string Go would produce: `5m3s` for an age (not `303s`), `app=web,tier in (a,b)`
//! for a selector, `1e+06` for a float in a text column. Everything here is a pure function of its
//! input (and of `now`, passed in), so each rule is unit-tested against examples worked out from the
//! Go source.

use std::collections::BTreeMap;

use serde_json::Value;

/// A point in time as nanoseconds since the Unix epoch (negative before 1970).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instant(i128);

impl Instant {
    /// The wall clock now.
    pub fn now() -> Instant {
        Instant(ferrokube_core::time::unix_nanos())
    }

    /// `seconds` after the epoch (for tests and for building timestamps).
    pub fn from_unix_seconds(seconds: i64) -> Instant {
        Instant(i128::from(seconds) * 1_000_000_000)
    }

    /// Whole seconds since the epoch (rounded down).
    pub fn unix_seconds(self) -> i64 {
        self.0.div_euclid(1_000_000_000) as i64
    }

    /// Parses an RFC 3339 timestamp as Go's `time.Parse(time.RFC3339, ...)` does: a `T`, seconds,
    /// optional fractional seconds, and `Z` or a `±hh:mm` offset. `None` if it is not one.
    pub fn parse_rfc3339(text: &str) -> Option<Instant> {
        let bytes = text.as_bytes();
        let number = |range: std::ops::Range<usize>| -> Option<i64> {
            let digits = bytes.get(range)?;
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            std::str::from_utf8(digits).ok()?.parse().ok()
        };
        let separator = |at: usize, expected: u8| bytes.get(at) == Some(&expected);
        if !(separator(4, b'-')
            && separator(7, b'-')
            && separator(10, b'T')
            && separator(13, b':')
            && separator(16, b':'))
        {
            return None;
        }
        let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
        let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 59
        {
            return None;
        }
        let mut at = 19;
        let mut nanos: i128 = 0;
        if separator(at, b'.') {
            let count = bytes[at + 1..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            if count == 0 {
                return None;
            }
            // Nanosecond precision: Go ignores digits past the ninth.
            let mut digits = bytes[at + 1..at + 1 + count.min(9)].to_vec();
            digits.resize(9, b'0');
            nanos = digits
                .iter()
                .fold(0, |n, digit| n * 10 + i128::from(digit - b'0'));
            at += 1 + count;
        }
        let offset_seconds = match bytes.get(at..) {
            Some(b"Z") => 0,
            Some([sign @ (b'+' | b'-'), h1, h2, b':', m1, m2]) => {
                let digit = |b: &u8| b.is_ascii_digit().then(|| i64::from(b - b'0'));
                let hours = digit(h1)? * 10 + digit(h2)?;
                let minutes = digit(m1)? * 10 + digit(m2)?;
                if hours > 23 || minutes > 59 {
                    return None;
                }
                let offset = hours * 3600 + minutes * 60;
                if *sign == b'-' { -offset } else { offset }
            }
            _ => return None,
        };
        let days = days_from_civil(year, month, day);
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_seconds;
        Some(Instant(i128::from(seconds) * 1_000_000_000 + nanos))
    }

    /// Nanoseconds from `earlier` to `self`, saturated to Go's `time.Duration` range.
    fn since(self, earlier: Instant) -> i64 {
        let nanos = self.0 - earlier.0;
        nanos.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm, proleptic Gregorian).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// How long ago `timestamp` (RFC 3339) was, as kube-apiserver prints an age: `<unknown>` when the
/// timestamp is missing, empty or unreadable (Go's zero time), else [`human_duration`].
pub fn age(timestamp: Option<&Value>, now: Instant) -> String {
    match timestamp
        .and_then(Value::as_str)
        .and_then(Instant::parse_rfc3339)
    {
        Some(then) => human_duration(now.since(then)),
        None => "<unknown>".to_string(),
    }
}

/// Go's `duration.HumanDuration`: about two significant figures, `0s` for up to two seconds in the
/// future (clock skew), `<invalid>` beyond that.
pub fn human_duration(nanos: i64) -> String {
    const SECOND: i64 = 1_000_000_000;
    const MINUTE: i64 = 60 * SECOND;
    const HOUR: i64 = 60 * MINUTE;
    let seconds = nanos / SECOND;
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = nanos / MINUTE;
    if minutes < 10 {
        let rest = seconds % 60;
        return if rest == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{rest}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = nanos / HOUR;
    if hours < 8 {
        let rest = minutes % 60;
        return if rest == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{rest}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let rest = hours % 24;
        return if rest == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{rest}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let rest = (hours / 24) % 365;
        return if rest == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{rest}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// Labels as `labels.FormatLabels` prints them: `k=v` sorted by key, comma-separated; `<none>` when
/// there are none.
pub fn labels(map: Option<&Value>) -> String {
    let pairs: BTreeMap<&str, &str> = map
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if pairs.is_empty() {
        return "<none>".to_string();
    }
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A label selector Go refuses to turn into a `labels.Selector`: an unknown operator, `In` or `NotIn`
/// without values, `Exists` or `DoesNotExist` with values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("label selector requirement on {key:?} with operator {operator:?} is not valid")]
pub struct InvalidSelector {
    pub key: String,
    pub operator: String,
}

/// A `LabelSelector` (`matchLabels`, `matchExpressions`) as `labels.Selector.String()` prints it:
/// requirements sorted by key, `k=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`. `Ok("")` selects
/// everything (or, for a missing selector, nothing: Go prints both as empty).
pub fn selector(selector: Option<&Value>) -> Result<String, InvalidSelector> {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return Ok(String::new());
    };
    // (key, rendered requirement); sorted stably by key, as Go's selector.Add keeps them.
    let mut requirements: Vec<(String, String)> = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (key, value) in labels {
            let value = value.as_str().unwrap_or("");
            requirements.push((key.clone(), format!("{key}={value}")));
        }
    }
    let expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for expression in expressions {
        let key = expression.get("key").and_then(Value::as_str).unwrap_or("");
        let mut values: Vec<&str> = expression
            .get("values")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        values.sort_unstable();
        let operator = expression
            .get("operator")
            .and_then(Value::as_str)
            .unwrap_or("");
        let invalid = || InvalidSelector {
            key: key.to_string(),
            operator: operator.to_string(),
        };
        let rendered = match operator {
            "In" | "NotIn" if values.is_empty() => return Err(invalid()),
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" if values.is_empty() => key.to_string(),
            "DoesNotExist" if values.is_empty() => format!("!{key}"),
            _ => return Err(invalid()),
        };
        requirements.push((key.to_string(), rendered));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(requirements
        .into_iter()
        .map(|(_, r)| r)
        .collect::<Vec<_>>()
        .join(","))
}

/// A selector as `metav1.FormatLabelSelector` prints it (ReplicaSets' SELECTOR): `<none>` for an
/// empty or missing one, `<error>` for one Go cannot convert.
pub fn label_selector(value: Option<&Value>) -> String {
    match selector(value) {
        Ok(text) if text.is_empty() => "<none>".to_string(),
        Ok(text) => text,
        Err(_) => "<error>".to_string(),
    }
}

/// A JSON number as Go holds it after decoding into `interface{}` the Kubernetes way: an integer
/// when the literal is integral, a float otherwise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GoNumber {
    Int(i64),
    Float(f64),
}

impl GoNumber {
    /// The Go value of a JSON number.
    pub fn of(number: &serde_json::Number) -> GoNumber {
        match number.as_i64() {
            Some(i) => GoNumber::Int(i),
            // u64 beyond i64, or a fraction: Go's decoder falls back to float64.
            None => GoNumber::Float(number.as_f64().unwrap_or(0.0)),
        }
    }
}

/// `fmt.Sprint` of a float64 (`%v`, which is `%g` with the shortest digits that round-trip): `%e`
/// form when the decimal exponent is below -4 or at least 6, as Go decides it: `1e+06`, `123456`,
/// `1.5`, `1e-05`.
pub fn go_float_text(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let (negative, digits, exponent) = shortest_digits(f);
    let sign = if negative { "-" } else { "" };
    // strconv's %g with the shortest precision decides by an exponent limit of 6.
    if !(-4..6).contains(&exponent) {
        return format!("{sign}{}", scientific(&digits, exponent));
    }
    format!("{sign}{}", positional(&digits, exponent))
}

/// A float64 in a JSON document as Go's `encoding/json` writes it: positional unless the magnitude
/// is below 1e-6 or at least 1e21, and then `1e-07` is written `1e-7`.
pub fn go_json_float(f: f64) -> String {
    if !f.is_finite() {
        return "null".to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let (negative, digits, exponent) = shortest_digits(f);
    let sign = if negative { "-" } else { "" };
    let magnitude = f.abs();
    if !(1e-6..1e21).contains(&magnitude) {
        let text = scientific(&digits, exponent);
        // Go trims the exponent's leading zero: e-07 → e-7.
        let text = text.replace("e-0", "e-").replace("e+0", "e+");
        return format!("{sign}{text}");
    }
    format!("{sign}{}", positional(&digits, exponent))
}

/// The shortest round-trip decimal digits of `f` and its decimal exponent (`d.ddd × 10^exponent`).
fn shortest_digits(f: f64) -> (bool, String, i32) {
    // Rust's `{:e}` prints the shortest round-trip representation: `-1.2345e-7`.
    let text = format!("{:e}", f.abs());
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    (f < 0.0, digits.to_string(), exponent.parse().unwrap_or(0))
}

/// `d.ddde±XX` with at least two exponent digits, as Go's `%e`.
fn scientific(digits: &str, exponent: i32) -> String {
    let (first, rest) = digits.split_at(1);
    let mantissa = if rest.is_empty() {
        first.to_string()
    } else {
        format!("{first}.{rest}")
    };
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

/// The digits placed around the decimal point, without an exponent.
fn positional(digits: &str, exponent: i32) -> String {
    let point = exponent + 1;
    if point <= 0 {
        return format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize));
    }
    let point = point as usize;
    if digits.len() <= point {
        return format!("{digits}{}", "0".repeat(point - digits.len()));
    }
    format!("{}.{}", &digits[..point], &digits[point..])
}

/// A value as `fmt.Fprint` prints a scalar held in an `interface{}` (used for JSONPath results in
/// text columns); maps and lists are printed as Go's `json.Marshal` writes them.
pub fn go_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match GoNumber::of(n) {
            GoNumber::Int(i) => i.to_string(),
            GoNumber::Float(f) => go_float_text(f),
        },
        // A nil interface: Go's template printer says so.
        Value::Null => "<no value>".to_string(),
        Value::Array(_) | Value::Object(_) => go_json(value),
    }
}

/// `json.Marshal` of a decoded value: keys sorted, `<`, `>` and `&` escaped as `\u003c`..., floats
/// as Go writes them.
pub fn go_json(value: &Value) -> String {
    let mut out = String::new();
    write_go_json(value, &mut out);
    out
}

fn write_go_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match GoNumber::of(n) {
            GoNumber::Int(i) => out.push_str(&i.to_string()),
            GoNumber::Float(f) => out.push_str(&go_json_float(f)),
        },
        Value::String(s) => write_go_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let sorted: BTreeMap<&String, &Value> = map.iter().collect();
            out.push('{');
            for (i, (key, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_string(key, out);
                out.push(':');
                write_go_json(item, out);
            }
            out.push('}');
        }
    }
}

fn write_go_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECOND: i64 = 1_000_000_000;

    #[test]
    fn durations_read_like_kubectl_ages() {
        let cases = [
            (-3 * SECOND, "<invalid>"),
            (-SECOND - 1, "0s"),
            (0, "0s"),
            (59 * SECOND, "59s"),
            (119 * SECOND, "119s"),
            (120 * SECOND, "2m"),
            (303 * SECOND, "5m3s"),
            (600 * SECOND, "10m"),
            (179 * 60 * SECOND, "179m"),
            (3 * 3600 * SECOND, "3h"),
            ((3 * 3600 + 7 * 60 + 5) * SECOND, "3h7m"),
            (8 * 3600 * SECOND, "8h"),
            (47 * 3600 * SECOND, "47h"),
            (48 * 3600 * SECOND, "2d"),
            (50 * 3600 * SECOND, "2d2h"),
            (8 * 24 * 3600 * SECOND, "8d"),
            (729 * 24 * 3600 * SECOND, "729d"),
            (730 * 24 * 3600 * SECOND, "2y"),
            (735 * 24 * 3600 * SECOND, "2y5d"),
            (9 * 365 * 24 * 3600 * SECOND, "9y"),
        ];
        for (nanos, expected) in cases {
            assert_eq!(human_duration(nanos), expected, "{nanos} ns");
        }
    }

    #[test]
    fn timestamps_parse_as_rfc3339() {
        let epoch = Instant::from_unix_seconds(0);
        assert_eq!(Instant::parse_rfc3339("1970-01-01T00:00:00Z"), Some(epoch));
        assert_eq!(
            Instant::parse_rfc3339("2021-01-02T03:04:05Z"),
            Some(Instant::from_unix_seconds(1_609_556_645))
        );
        assert_eq!(
            Instant::parse_rfc3339("2021-01-02T05:04:05+02:00"),
            Some(Instant::from_unix_seconds(1_609_556_645))
        );
        let micro = Instant::parse_rfc3339("2021-01-02T03:04:05.250000Z");
        assert_eq!(
            micro.map(|i| i.0 - Instant::from_unix_seconds(1_609_556_645).0),
            Some(250_000_000)
        );
        for bad in [
            "",
            "2021-01-02",
            "2021-13-02T03:04:05Z",
            "2021-02-29T03:04:05Z",
            "2021-01-02 03:04:05Z",
            "2021-01-02T03:04:05",
            "2021-01-02T03:04:05.Z",
        ] {
            assert_eq!(Instant::parse_rfc3339(bad), None, "{bad}");
        }
        assert!(Instant::parse_rfc3339("2024-02-29T00:00:00Z").is_some());
    }

    #[test]
    fn ages_of_missing_or_bad_timestamps_are_unknown() {
        let now = Instant::from_unix_seconds(1_000);
        assert_eq!(age(None, now), "<unknown>");
        assert_eq!(age(Some(&json!(null)), now), "<unknown>");
        assert_eq!(age(Some(&json!("yesterday")), now), "<unknown>");
        assert_eq!(age(Some(&json!("1970-01-01T00:00:10Z")), now), "16m");
    }

    #[test]
    fn labels_and_selectors_print_as_go_does() {
        assert_eq!(labels(Some(&json!({"b": "2", "a": "1"}))), "a=1,b=2");
        assert_eq!(labels(Some(&json!({}))), "<none>");
        assert_eq!(labels(None), "<none>");
        let s = json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["b", "a"]},
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "zone", "operator": "Exists"},
            {"key": "canary", "operator": "DoesNotExist"}]});
        assert_eq!(
            label_selector(Some(&s)),
            "app=web,!canary,env notin (prod),tier in (a,b),zone"
        );
        assert_eq!(label_selector(Some(&json!({}))), "<none>");
        assert_eq!(label_selector(None), "<none>");
        let bad = json!({"matchExpressions": [{"key": "a", "operator": "Near"}]});
        assert_eq!(label_selector(Some(&bad)), "<error>");
        assert_eq!(selector(Some(&json!({}))), Ok(String::new()));
    }

    #[test]
    fn floats_print_as_go_prints_them() {
        let cases = [
            (1.5, "1.5", "1.5"),
            (2.0, "2", "2"),
            (100000.0, "100000", "100000"),
            (1e6, "1e+06", "1000000"),
            (1234567.0, "1.234567e+06", "1234567"),
            (1e21, "1e+21", "1e+21"),
            (0.0001, "0.0001", "0.0001"),
            (0.00001, "1e-05", "0.00001"),
            (1e-7, "1e-07", "1e-7"),
            (-2.5, "-2.5", "-2.5"),
        ];
        for (f, text, json) in cases {
            assert_eq!(go_float_text(f), text, "%v of {f}");
            assert_eq!(go_json_float(f), json, "json of {f}");
        }
    }

    #[test]
    fn values_print_as_go_prints_them() {
        assert_eq!(go_text(&json!("x")), "x");
        assert_eq!(go_text(&json!(3)), "3");
        assert_eq!(go_text(&json!(true)), "true");
        assert_eq!(go_text(&json!(null)), "<no value>");
        assert_eq!(
            go_text(&json!({"b": [1, 2.5], "a": "<&>"})),
            r#"{"a":"\u003c\u0026\u003e","b":[1,2.5]}"#
        );
    }
}
