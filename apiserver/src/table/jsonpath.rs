//! The JSONPath of a CRD printer column (`.status.conditions[?(@.type=="Ready")].status`), parsed
//! once and evaluated against each object.
//!
//! kube-apiserver evaluates `additionalPrinterColumns[].jsonPath` with client-go's `jsonpath`
//! package, missing keys allowed, and keeps only the first match. This is the part of that language
//! printer columns use:
//!
//! | syntax | meaning |
//! |---|---|
//! | `.name`, `.na\.me` | a field (a backslash escapes the next character) |
//! | `['name']` | a field, re-read as `.name` (as client-go does, dots in it split it) |
//! | `.*`, `[*]` | every value of a map (by key) or element of a list |
//! | `..name` | every map or list below, then `name` in each (recursive descent) |
//! | `[2]`, `[-1]` | one element (negative counts from the end) |
//! | `[1:3]`, `[::2]` | a slice, Python style |
//! | `[?(@.type=="Ready")]` | elements for which a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`) holds |
//! | `[?(@.ready)]` | elements that have the field |
//!
//! Not supported (a column using them prints `<none>` here but a value on kube-apiserver): unions
//! (`[a,b]`), regular-expression filters (`=~`), and `$`-rooted paths inside filters.
//!
//! Evaluation never fails: a step that does not apply (a field of a list, an index out of range, a
//! comparison between a string and a number) contributes no matches, as an error does for the CRD
//! table convertor (both print `<none>`).

use std::cmp::Ordering;

use serde_json::Value;

/// A parsed printer-column path. See the [module docs](self).
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

/// One step of a path, applied to every current match.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Wildcard,
    /// Every non-empty map or list at or below the current matches, in document order.
    Descendants,
    Index(i64),
    Slice {
        start: Option<i64>,
        end: Option<i64>,
        step: Option<i64>,
    },
    Filter(Box<Filter>),
}

/// `?(@.left op right)`, or `?(@.left)` for existence.
#[derive(Debug, Clone, PartialEq)]
struct Filter {
    left: Operand,
    comparison: Option<(Comparison, Operand)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    /// A path relative to the element (`@.type`).
    Path(Vec<Step>),
    Literal(Value),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comparison {
    Equal,
    NotEqual,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

/// A path this module cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unrecognized column definition {path:?}: {reason}")]
pub struct JsonPathError {
    path: String,
    reason: &'static str,
}

impl JsonPath {
    /// Parses a column path such as `.spec.replicas` (the text kube-apiserver wraps in `{...}`).
    pub fn parse(path: &str) -> Result<JsonPath, JsonPathError> {
        let error = |reason| JsonPathError {
            path: path.to_string(),
            reason,
        };
        let text = path.trim();
        let text = text
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or(text);
        let (steps, rest) = parse_steps(text).map_err(error)?;
        if !rest.is_empty() {
            return Err(error("unexpected text after the path"));
        }
        Ok(JsonPath { steps })
    }

    /// Every match in `root`, in order; empty when nothing matches.
    pub fn find<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        evaluate(&self.steps, vec![root])
    }
}

/// Parses steps from the start of `text` up to the end or a character that cannot continue a path
/// (returned as the rest, for filters).
fn parse_steps(mut text: &str) -> Result<(Vec<Step>, &str), &'static str> {
    let mut steps = Vec::new();
    // `$` and `@` name the root / current element; both are where evaluation already starts.
    text = text
        .strip_prefix('$')
        .or_else(|| text.strip_prefix('@'))
        .unwrap_or(text);
    loop {
        if let Some(rest) = text.strip_prefix("..") {
            steps.push(Step::Descendants);
            // `..name` and `..[0]`: what follows applies to every descendant.
            if rest.starts_with('[') {
                text = rest;
            } else {
                let (field, rest) = take_field(rest);
                steps.push(field_step(field));
                text = rest;
            }
        } else if let Some(rest) = text.strip_prefix('.') {
            let (field, rest) = take_field(rest);
            if !field.is_empty() {
                steps.push(field_step(field));
            }
            text = rest;
        } else if let Some(rest) = text.strip_prefix('[') {
            let (step, rest) = parse_bracket(rest)?;
            steps.extend(step);
            text = rest;
        } else {
            return Ok((steps, text));
        }
    }
}

fn field_step(name: String) -> Step {
    if name == "*" {
        Step::Wildcard
    } else {
        Step::Field(name)
    }
}

/// A field name: up to a terminator (`.`, `[`, `]`, `(`, `)`, `,`, whitespace, an operator), with `\x`
/// standing for `x`.
fn take_field(text: &str) -> (String, &str) {
    let mut name = String::new();
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    name.push(escaped);
                }
            }
            '.' | '[' | ']' | '(' | ')' | ',' | '=' | '!' | '<' | '>' | '{' | '}' | '$' | '@' => {
                return (name, &text[at..]);
            }
            c if c.is_whitespace() => return (name, &text[at..]),
            c => name.push(c),
        }
    }
    (name, "")
}

/// The inside of `[...]` (after the `[`): the steps it stands for, and the text after the `]`.
fn parse_bracket(text: &str) -> Result<(Vec<Step>, &str), &'static str> {
    if let Some(rest) = text.strip_prefix("?(") {
        let (filter, rest) = parse_filter(rest)?;
        let rest = rest.strip_prefix(']').ok_or("a filter must end with )]")?;
        return Ok((vec![Step::Filter(Box::new(filter))], rest));
    }
    let close = text.find(']').ok_or("unclosed [")?;
    let (inside, rest) = (text[..close].trim(), &text[close + 1..]);
    if inside == "*" {
        return Ok((vec![Step::Wildcard], rest));
    }
    if let Some(key) = inside.strip_prefix('\'').and_then(|k| k.strip_suffix('\'')) {
        // client-go re-parses a quoted key as `.key`: dots in it become steps.
        let (steps, left) = parse_steps(&format!(".{key}"))
            .map(|(steps, left)| (steps, left.is_empty()))
            .map_err(|_| "bad quoted key")?;
        if !left {
            return Err("bad quoted key");
        }
        return Ok((steps, rest));
    }
    if inside.contains(',') {
        return Err("unions are not supported");
    }
    let parts: Vec<&str> = inside.split(':').collect();
    let number = |s: &str| -> Result<Option<i64>, &'static str> {
        let s = s.trim();
        if s.is_empty() {
            Ok(None)
        } else {
            s.parse().map(Some).map_err(|_| "bad array index")
        }
    };
    match parts.as_slice() {
        [index] => match number(index)? {
            Some(i) => Ok((vec![Step::Index(i)], rest)),
            None => Err("empty []"),
        },
        [start, end] => Ok((
            vec![Step::Slice {
                start: number(start)?,
                end: number(end)?,
                step: None,
            }],
            rest,
        )),
        [start, end, step] => Ok((
            vec![Step::Slice {
                start: number(start)?,
                end: number(end)?,
                step: number(step)?,
            }],
            rest,
        )),
        _ => Err("bad slice"),
    }
}

/// `@.a.b op literal)` (after the `?(`): the filter and the text after the `)`.
fn parse_filter(text: &str) -> Result<(Filter, &str), &'static str> {
    let text = text.trim_start();
    let (left, rest) = parse_operand(text)?;
    let rest = rest.trim_start();
    if let Some(rest) = rest.strip_prefix(')') {
        return Ok((
            Filter {
                left,
                comparison: None,
            },
            rest,
        ));
    }
    let operators = [
        ("==", Comparison::Equal),
        ("!=", Comparison::NotEqual),
        ("<=", Comparison::LessOrEqual),
        (">=", Comparison::GreaterOrEqual),
        ("<", Comparison::Less),
        (">", Comparison::Greater),
        // A lone `=` is `==` for client-go.
        ("=", Comparison::Equal),
    ];
    let (comparison, rest) = operators
        .iter()
        .find_map(|(token, comparison)| rest.strip_prefix(token).map(|r| (*comparison, r)))
        .ok_or("a filter needs a comparison")?;
    let (right, rest) = parse_operand(rest.trim_start())?;
    let rest = rest
        .trim_start()
        .strip_prefix(')')
        .ok_or("a filter must end with )")?;
    Ok((
        Filter {
            left,
            comparison: Some((comparison, right)),
        },
        rest,
    ))
}

/// A path (`@.x`), a quoted string, a number, or `true`/`false`.
fn parse_operand(text: &str) -> Result<(Operand, &str), &'static str> {
    if text.starts_with('@') || text.starts_with('.') {
        let (steps, rest) = parse_steps(text)?;
        return Ok((Operand::Path(steps), rest));
    }
    if text.starts_with('$') {
        return Err("$ in a filter is not supported");
    }
    if let Some(quote @ ('"' | '\'')) = text.chars().next() {
        let body = &text[1..];
        let mut value = String::new();
        let mut chars = body.char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(match escaped {
                            'n' => '\n',
                            't' => '\t',
                            other => other,
                        });
                    }
                }
                c if c == quote => return Ok((Operand::Literal(value.into()), &body[at + 1..])),
                c => value.push(c),
            }
        }
        return Err("unterminated string");
    }
    let end = text
        .find(|c: char| c == ')' || c.is_whitespace())
        .unwrap_or(text.len());
    let (word, rest) = text.split_at(end);
    let literal = match word {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => {
            if let Ok(i) = word.parse::<i64>() {
                Value::from(i)
            } else if let Ok(f) = word.parse::<f64>() {
                Value::from(f)
            } else {
                return Err("a filter operand must be a path, a string, a number or a bool");
            }
        }
    };
    Ok((Operand::Literal(literal), rest))
}

fn evaluate<'a>(steps: &[Step], mut current: Vec<&'a Value>) -> Vec<&'a Value> {
    for step in steps {
        let mut next = Vec::new();
        for value in current {
            apply(step, value, &mut next);
        }
        current = next;
    }
    current
}

fn apply<'a>(step: &Step, value: &'a Value, out: &mut Vec<&'a Value>) {
    match (step, value) {
        (Step::Field(name), Value::Object(map)) => out.extend(map.get(name)),
        (Step::Field(_), _) => {}
        (Step::Wildcard, Value::Object(map)) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.extend(keys.into_iter().filter_map(|k| map.get(k)));
        }
        (Step::Wildcard, Value::Array(items)) => out.extend(items.iter()),
        (Step::Wildcard, _) => {}
        (Step::Descendants, value) => descendants(value, out),
        (Step::Index(index), Value::Array(items)) => {
            let len = items.len() as i64;
            let at = if *index < 0 { len + index } else { *index };
            if (0..len).contains(&at) {
                out.extend(items.get(at as usize));
            }
        }
        (Step::Index(_), _) => {}
        (Step::Slice { start, end, step }, Value::Array(items)) => {
            out.extend(slice(items, *start, *end, *step));
        }
        (Step::Slice { .. }, _) => {}
        (Step::Filter(filter), Value::Array(items)) => {
            out.extend(items.iter().filter(|item| filter.holds(item)));
        }
        (Step::Filter(_), _) => {}
    }
}

/// Pre-order: each non-empty map or list, then what is below it (maps by key).
fn descendants<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
    let children: Vec<&Value> = match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            keys.into_iter().filter_map(|k| map.get(k)).collect()
        }
        Value::Array(items) => items.iter().collect(),
        _ => Vec::new(),
    };
    if children.is_empty() {
        return;
    }
    out.push(value);
    for child in children {
        descendants(child, out);
    }
}

fn slice(items: &[Value], start: Option<i64>, end: Option<i64>, step: Option<i64>) -> Vec<&Value> {
    let len = items.len() as i64;
    let clamp = |i: i64| {
        let i = if i < 0 { len + i } else { i };
        i.clamp(0, len)
    };
    let step = step.filter(|s| *s > 0).unwrap_or(1);
    let start = clamp(start.unwrap_or(0));
    let end = clamp(end.unwrap_or(len));
    (start..end)
        .step_by(step as usize)
        .filter_map(|i| items.get(i as usize))
        .collect()
}

impl Filter {
    fn holds(&self, item: &Value) -> bool {
        let left = self.left.first(item);
        match &self.comparison {
            None => left.is_some(),
            Some((comparison, right)) => {
                let (Some(left), Some(right)) = (left, right.first(item)) else {
                    return false;
                };
                compare(&left, &right).is_some_and(|ordering| comparison.accepts(ordering))
            }
        }
    }
}

impl Operand {
    fn first(&self, item: &Value) -> Option<Value> {
        match self {
            Operand::Literal(value) => Some(value.clone()),
            Operand::Path(steps) => evaluate(steps, vec![item]).first().map(|v| (*v).clone()),
        }
    }
}

impl Comparison {
    fn accepts(self, ordering: Ordering) -> bool {
        match self {
            Comparison::Equal => ordering == Ordering::Equal,
            Comparison::NotEqual => ordering != Ordering::Equal,
            Comparison::Less => ordering == Ordering::Less,
            Comparison::LessOrEqual => ordering != Ordering::Greater,
            Comparison::Greater => ordering == Ordering::Greater,
            Comparison::GreaterOrEqual => ordering != Ordering::Less,
        }
    }
}

/// Values of the same basic kind compare (numbers with numbers, strings with strings, bools for
/// equality only); anything else is a comparison Go's template functions refuse.
fn compare(left: &Value, right: &Value) -> Option<Ordering> {
    match (left, right) {
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(a), Some(b)) => Some(a.cmp(&b)),
            _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
        },
        (Value::Bool(a), Value::Bool(b)) if a == b => Some(Ordering::Equal),
        (Value::Bool(_), Value::Bool(_)) => Some(Ordering::Less),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn first(path: &str, value: &Value) -> Option<Value> {
        let parsed = JsonPath::parse(path).unwrap_or_else(|e| panic!("{e}"));
        parsed.find(value).first().map(|v| (*v).clone())
    }

    fn object() -> Value {
        json!({
            "metadata": {"name": "w", "labels": {"app.kubernetes.io/name": "web"}},
            "spec": {"replicas": 3, "ports": [{"port": 80}, {"port": 443}], "size": 1.5},
            "status": {"conditions": [
                {"type": "Synced", "status": "False", "age": 2},
                {"type": "Ready", "status": "True", "age": 5}]}
        })
    }

    #[test]
    fn fields_indexes_and_slices() {
        let o = object();
        assert_eq!(first(".spec.replicas", &o), Some(json!(3)));
        assert_eq!(first("{.spec.replicas}", &o), Some(json!(3)));
        assert_eq!(first(".spec.ports[1].port", &o), Some(json!(443)));
        assert_eq!(first(".spec.ports[-1].port", &o), Some(json!(443)));
        assert_eq!(first(".spec.ports[5].port", &o), None);
        assert_eq!(first(".spec.ports[1:].port", &o), Some(json!(443)));
        assert_eq!(first(".spec.ports[*].port", &o), Some(json!(80)));
        assert_eq!(first(".spec['replicas']", &o), Some(json!(3)));
        assert_eq!(
            first(".metadata.labels.app\\.kubernetes\\.io/name", &o),
            Some(json!("web"))
        );
        assert_eq!(first(".spec.missing", &o), None);
        assert_eq!(first(".spec.replicas.deeper", &o), None);
        assert_eq!(first(".spec.ports.port", &o), None);
        assert_eq!(
            first(".spec", &o).map(|s| s["size"].clone()),
            Some(json!(1.5))
        );
        assert_eq!(first(".", &o), Some(o.clone()));
    }

    #[test]
    fn filters_pick_list_elements() {
        let o = object();
        assert_eq!(
            first(r#".status.conditions[?(@.type=="Ready")].status"#, &o),
            Some(json!("True"))
        );
        assert_eq!(
            first(".status.conditions[?(@.type == 'Synced')].status", &o),
            Some(json!("False"))
        );
        assert_eq!(
            first(".status.conditions[?(@.age>3)].type", &o),
            Some(json!("Ready"))
        );
        assert_eq!(
            first(".status.conditions[?(@.type!=\"Synced\")].age", &o),
            Some(json!(5))
        );
        assert_eq!(
            first(".status.conditions[?(@.age)].type", &o),
            Some(json!("Synced"))
        );
        assert_eq!(first(".status.conditions[?(@.nothing)].type", &o), None);
        // A string never equals a number.
        assert_eq!(first(".status.conditions[?(@.age=='5')].type", &o), None);
    }

    #[test]
    fn recursive_descent_and_wildcards() {
        let o = object();
        assert_eq!(first("..port", &o), Some(json!(80)));
        assert_eq!(first(".metadata.labels.*", &o), Some(json!("web")));
        assert_eq!(JsonPath::parse("..type").map(|p| p.find(&o).len()), Ok(2));
    }

    #[test]
    fn unsupported_paths_are_refused() {
        for bad in [
            ".a[",
            ".a[1,2]",
            ".a[?(@.b=~/x/)]",
            ".a[x]",
            ".a[?(@.b==$.c)]",
        ] {
            assert!(JsonPath::parse(bad).is_err(), "{bad}");
        }
    }
}
