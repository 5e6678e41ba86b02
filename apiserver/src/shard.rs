//! The `shardSelector` of a list, watch or deletecollection: server-side sharding (KEP-5866),
//! parsed as kube-apiserver 1.37 parses it.
//!
//! # Why
//!
//! A sharded controller's replicas each want one slice of a collection. With the
//! `ShardedListAndWatch` feature gate on (alpha since 1.36), kube-apiserver sends a list or watch
//! only the objects whose `metadata.uid` (or `metadata.namespace`) hashes into the ranges the
//! request names. Tests of such replicas need the embedded server to do the same, with the same
//! answers to bad selectors.
//!
//! # How data flows
//!
//! ```text
//!  ?shardSelector=<text>            (ignored when the gate is off, or when empty)
//!     │  parse (here): CEL syntax by the `cel` crate's parser (never evaluated), then a walk of
//!     │  the tree that accepts `shardRange(field, 'start', 'end')` joined by `||`, and nothing else
//!     ▼
//!  ShardSelector (ferrokube-core)  ──► Selection (crate::selection), beside labels and fields
//!     │                                   list, watch (backlog and live events), deletecollection
//!     ▼                                   all filter through Selection::matches
//!  a sharded list answers metadata.shardInfo.selector = the selector's canonical text
//! ```
//!
//! A bad selector is a 500 whose Status has no reason and the message `invalid shard selector:
//! ...`: kube-apiserver's registry returns the parse error as a plain Go error, which its
//! handlers report that way. The messages below are kube-apiserver's (apiserver's
//! `pkg/sharding/parser.go`), checked against the real server by the `shard_selector`
//! conformance cases.
//!
//! Known difference: cel-go's parser runs with no macros, the `cel` crate's expands them, so
//! `has(x)` or `x.all(...)` arrive here already expanded; `has` is recognised, the comprehension
//! macros are reported as calls without their name. cel-go's limits are kept (100,000 code
//! points, a recursion depth of 250), the latter approximately (counted here in brackets).

use cel::common::ast::{Expr, IdedExpr, LiteralValue};
use ferrokube_core::shard::{HASH_SPACE_END, ShardField, ShardRange, ShardSelector};

use crate::status::StatusError;

/// The error status of a selector that does not parse (see the module docs).
pub fn invalid(message: &str) -> StatusError {
    StatusError::unknown(500, format!("invalid shard selector: {message}"))
}

/// Parses a `shardSelector` as kube-apiserver does; `Err` holds its message, to be wrapped by
/// [`invalid`]. An empty or blank text is an error: the caller treats an *absent or empty*
/// parameter as no selector before calling this (kube-apiserver skips `""` but parses `" "`).
pub fn parse(text: &str) -> Result<ShardSelector, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(
            "empty shard selector is not allowed; omit the parameter for unfiltered lists".into(),
        );
    }
    guard(text)?;
    let owned = text.to_string();
    let parsed = crate::cel::on_big_stack(move || {
        cel::parser::Parser::new()
            .max_recursion_depth(MAX_DEPTH)
            .parse(&owned)
            .map_err(|errors| match errors.errors.first() {
                Some(first) => format!("CEL parse error: {}", first.msg),
                None => "CEL parse error".to_string(),
            })
            .and_then(|tree| {
                let mut ranges = Vec::new();
                walk(&tree, &mut ranges)?;
                Ok(ranges)
            })
    })?;
    let ranges = parsed?;
    let mut ranges = ranges.into_iter();
    let Some((field, first)) = ranges.next() else {
        return Err("CEL parse error: no expression".into());
    };
    let mut selector = ShardSelector::new(field, first);
    for (other, range) in ranges {
        if other != field {
            return Err(format!(
                "all shard ranges must use the same field, got {:?} and {:?}",
                field.path(),
                other.path()
            ));
        }
        selector = selector.or(range);
    }
    Ok(selector)
}

/// cel-go's limit on the length of an expression, in code points (its parser's default).
pub const MAX_CODE_POINTS: usize = 100_000;
/// cel-go's parser's default recursion limit; here also the deepest nesting of brackets let
/// through to the `cel` crate's parser (a legitimate selector nests two deep).
pub const MAX_DEPTH: u16 = 250;

/// Refuses what the parser should not see: cel-go's size limit (its message), and brackets
/// nested deeper than its recursion limit (cel-go counts per grammar rule, so its limit falls at
/// about this depth; the message is its).
fn guard(text: &str) -> Result<(), String> {
    let size = text.chars().count();
    if size > MAX_CODE_POINTS {
        return Err(format!(
            "CEL parse error: expression code point size exceeds limit: size: {size}, limit {MAX_CODE_POINTS}"
        ));
    }
    let (mut depth, mut deepest) = (0usize, 0usize);
    for c in text.chars() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > usize::from(MAX_DEPTH) {
        return Err(format!(
            "CEL parse error: expression recursion limit exceeded: {MAX_DEPTH}"
        ));
    }
    Ok(())
}

/// cel-go's number for an expression's kind (its `ast.ExprKind`, which prints as a number in
/// kube-apiserver's messages). Macro expansions count as the calls cel-go, with no macros, sees.
fn kind(expr: &Expr) -> u8 {
    match expr {
        Expr::Unspecified => 0,
        Expr::Call(_) | Expr::Comprehension(_) => 1,
        Expr::Select(select) if select.test => 1,
        Expr::Ident(_) => 3,
        Expr::List(_) => 4,
        Expr::Literal(_) => 5,
        Expr::Map(_) => 6,
        Expr::Select(_) => 7,
        Expr::Struct(_) => 8,
    }
}

/// The ranges of a `shardRange(...)` call or an `||` of them, in the order written.
fn walk(tree: &IdedExpr, out: &mut Vec<(ShardField, ShardRange)>) -> Result<(), String> {
    match &tree.expr {
        Expr::Call(call) if call.func_name == "_||_" => {
            let [left, right] = call.args.as_slice() else {
                return Err("|| operator requires exactly 2 arguments".into());
            };
            walk(left, out)?;
            walk(right, out)
        }
        Expr::Call(call) if call.func_name == "shardRange" => {
            out.push(shard_range(&call.args)?);
            Ok(())
        }
        Expr::Call(call) => Err(format!(
            "unsupported function {:?}; only shardRange() and || are allowed",
            call.func_name
        )),
        Expr::Select(select) if select.test => {
            Err("unsupported function \"has\"; only shardRange() and || are allowed".into())
        }
        other => Err(format!(
            "unexpected expression kind {}; expected shardRange() call or || operator",
            kind(other)
        )),
    }
}

/// `shardRange(field, 'start', 'end')`'s arguments.
fn shard_range(args: &[IdedExpr]) -> Result<(ShardField, ShardRange), String> {
    let [field, start, end] = args else {
        return Err(format!(
            "shardRange() requires exactly 3 arguments, got {}",
            args.len()
        ));
    };
    let path = field_path(&field.expr).map_err(|e| format!("shardRange() first argument: {e}"))?;
    let field = ShardField::from_path(&path).ok_or_else(|| {
        format!(
            "unsupported field path {path:?}; supported: object.metadata.uid, object.metadata.namespace"
        )
    })?;
    let (start_text, start) = hex_literal(&start.expr, "hexStart")?;
    let (end_text, end) = hex_literal(&end.expr, "hexEnd")?;
    let start = u64::try_from(start)
        .ok()
        .and_then(|start| ShardRange::new(start, end).ok())
        .ok_or_else(|| {
            format!("shard range start {start_text} must be less than end {end_text}")
        })?;
    Ok((field, start))
}

/// `object.metadata.uid` from the select chain that spells it.
fn field_path(expr: &Expr) -> Result<String, String> {
    match expr {
        Expr::Ident(name) => Ok(name.clone()),
        Expr::Select(select) if !select.test => Ok(format!(
            "{}.{}",
            field_path(&select.operand.expr)?,
            select.field
        )),
        other => Err(format!(
            "expected field path (e.g. object.metadata.uid), got expression kind {}",
            kind(other)
        )),
    }
}

/// A bound: a string literal of `0x` and exactly 16 lowercase hex digits, or `0x1` and 16 zeros
/// (2^64). Its text (for messages) and value.
fn hex_literal(expr: &Expr, name: &str) -> Result<(String, u128), String> {
    let Expr::Literal(literal) = expr else {
        return Err(format!(
            "{name} must be a string literal (e.g. '0xff'), got expression kind {}",
            kind(expr)
        ));
    };
    let text = match literal {
        LiteralValue::String(s) => s.inner().to_string(),
        // Go's names of the literal's type, as `%T` prints them.
        other => {
            let go_type = match other {
                LiteralValue::Boolean(_) => "bool",
                LiteralValue::Bytes(_) => "[]uint8",
                LiteralValue::Double(_) => "float64",
                LiteralValue::Int(_) => "int64",
                LiteralValue::Null => "structpb.NullValue",
                LiteralValue::UInt(_) => "uint64",
                LiteralValue::String(_) => "string",
            };
            return Err(format!("{name} must be a string literal, got {go_type}"));
        }
    };
    let Some(hex) = text.strip_prefix("0x") else {
        return Err(format!("{name} must have '0x' prefix, got {text:?}"));
    };
    if hex.is_empty() {
        return Err(format!("{name}: hex value is required after '0x'"));
    }
    if hex.len() > 17 {
        return Err(format!(
            "{name}: hex value too long ({} chars, max 17): {hex:?}",
            hex.len()
        ));
    }
    if let Some(bad) = hex.chars().find(|c| !matches!(c, '0'..='9' | 'a'..='f')) {
        return Err(format!(
            "{name}: invalid hex character {:?} in {text:?}",
            bad.to_string()
        ));
    }
    if hex.len() == 17 {
        if text != "0x10000000000000000" {
            return Err(format!(
                "{name}: 17-digit hex value must be '0x10000000000000000' (2^64), got {text:?}"
            ));
        }
        return Ok((text, HASH_SPACE_END));
    }
    if hex.len() != 16 {
        let padded = format!("0x{hex:0>16}");
        return Err(format!(
            "{name} must be a 0x-prefixed 16-digit hex value, got {text:?} (did you mean {padded:?}?)"
        ));
    }
    let value = u64::from_str_radix(hex, 16).map_err(|e| format!("{name}: {e}"))?;
    Ok((text, u128::from(value)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HALF: &str =
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";

    #[test]
    fn shard_selector_parses_ranges_and_echoes_canonical_text() {
        let selector = parse(HALF).expect("parses");
        assert_eq!(selector.to_string(), HALF);
        let two = format!(
            "{HALF} || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
        );
        assert_eq!(parse(&two).expect("parses").to_string(), two);
        let three = "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000005') || shardRange(object.metadata.uid, '0x0000000000000005', '0x000000000000000a') || shardRange(object.metadata.uid, '0x000000000000000a', '0x000000000000000f')";
        assert_eq!(parse(three).expect("parses").ranges().len(), 3);
        assert_eq!(parse(three).expect("parses").to_string(), three);
        let spaced =
            "  shardRange( object.metadata.uid ,\"0x0000000000000000\",'0x8000000000000000' )  ";
        assert_eq!(parse(spaced).expect("parses").to_string(), HALF);
        let ns = parse(
            "shardRange(object.metadata.namespace,'0x00000000000000aa','0x00000000000000ff')",
        )
        .expect("parses");
        assert_eq!(ns.field(), ShardField::Namespace);
    }

    #[test]
    fn shard_selector_takes_hundreds_of_ranges_as_kube_apiserver_does() {
        let ranges: Vec<String> = (0..400u64)
            .map(|i| {
                let range = ferrokube_core::shard::ShardRange::part(i, 400).expect("part");
                format!(
                    "shardRange(object.metadata.uid, '0x{:016x}', '0x{:016x}')",
                    range.start(),
                    range.end()
                )
            })
            .collect();
        let text = ranges.join(" || ");
        let selector = parse(&text).expect("400 ranges parse");
        assert_eq!(selector.ranges().len(), 400);
        assert_eq!(selector.to_string(), text);
        let long = "a".repeat(MAX_CODE_POINTS + 1);
        assert_eq!(
            parse(&long),
            Err(format!(
                "CEL parse error: expression code point size exceeds limit: size: {}, limit 100000",
                MAX_CODE_POINTS + 1
            ))
        );
        let deep = format!("{}1{}", "(".repeat(300), ")".repeat(300));
        assert_eq!(
            parse(&deep),
            Err("CEL parse error: expression recursion limit exceeded: 250".to_string())
        );
        let shallow = format!("{}1{}", "(".repeat(240), ")".repeat(240));
        assert_eq!(
            parse(&shallow),
            Err("unexpected expression kind 5; expected shardRange() call or || operator".into())
        );
    }

    #[test]
    fn shard_selector_errors_are_kube_apiservers() {
        let cases = [
            (
                "  ",
                "empty shard selector is not allowed; omit the parameter for unfiltered lists",
            ),
            (
                "x",
                "unexpected expression kind 3; expected shardRange() call or || operator",
            ),
            (
                "1",
                "unexpected expression kind 5; expected shardRange() call or || operator",
            ),
            (
                "shardRange(object.metadata.uid,'0x0','0x8000000000000000')",
                "hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)",
            ),
            (
                "shardRange(object.metadata.name,'0x0000000000000000','0x8000000000000000')",
                "unsupported field path \"object.metadata.name\"; supported: object.metadata.uid, object.metadata.namespace",
            ),
            (
                "shardRange(object.metadata.uid, 1, 2)",
                "hexStart must be a string literal, got int64",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000' ",
                "CEL parse error: Syntax error: missing ')' at '<EOF>'",
            ),
            (
                "invalidFunc(object.metadata.uid, '0x00', '0x80')",
                "unsupported function \"invalidFunc\"; only shardRange() and || are allowed",
            ),
            (
                "shardRange(object.metadata.uid, '0x0')",
                "shardRange() requires exactly 3 arguments, got 2",
            ),
            (
                "shardRange(object.metadata.uid, hex(0), '0x8')",
                "hexStart must be a string literal (e.g. '0xff'), got expression kind 1",
            ),
            (
                "shardRange(object.metadata.uid, '0x0g', '0x80')",
                "hexStart: invalid hex character \"g\" in \"0x0g\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x000000000000000000', '0x80')",
                "hexStart: hex value too long (18 chars, max 17): \"000000000000000000\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x', '0x8000000000000000')",
                "hexStart: hex value is required after '0x'",
            ),
            (
                "shardRange(object.metadata.uid, '0000000000000000', '0x8000000000000000')",
                "hexStart must have '0x' prefix, got \"0000000000000000\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x20000000000000000')",
                "hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), got \"0x20000000000000000\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
                "shard range start 0x8000000000000000 must be less than end 0x8000000000000000",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')",
                "all shard ranges must use the same field, got \"object.metadata.uid\" and \"object.metadata.namespace\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') && shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
                "unsupported function \"_&&_\"; only shardRange() and || are allowed",
            ),
            (
                "has(object.metadata.uid)",
                "unsupported function \"has\"; only shardRange() and || are allowed",
            ),
            (
                "shardRange(object['metadata'], '0x0000000000000000', '0x8000000000000000')",
                "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 1",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                parse(input).map(|s| s.to_string()),
                Err(want.to_string()),
                "{input}"
            );
        }
        let error = invalid("x");
        assert_eq!((error.code, error.reason), (500, ""));
        assert_eq!(error.message, "invalid shard selector: x");
    }
}
