//! CRD validation rules: the CEL expressions of `x-kubernetes-validations`, compiled when a CRD is
//! written and evaluated on every write of its custom objects.
//!
//! # Why
//!
//! A structural schema says what shape a custom object has (types, required fields, ranges); it
//! cannot say that `minReplicas <= maxReplicas`, that a field may not change once set, or that every
//! port in a list is unique. Since 1.25 kube-apiserver lets a CRD say such things itself, as rules
//! in the Common Expression Language (CEL) attached to any node of the schema:
//!
//! ```yaml
//! spec:
//!   type: object
//!   x-kubernetes-validations:
//!   - rule: "self.minReplicas <= self.maxReplicas"
//!     message: "minReplicas must not exceed maxReplicas"
//!   - rule: "self.region == oldSelf.region"        # a transition rule: only on update
//!     reason: FieldValueForbidden
//!     fieldPath: ".region"
//! ```
//!
//! Controllers' CRDs use them more and more, so a test server that ignored them would accept what
//! a real cluster refuses. This module makes the embedded server refuse the same objects, with the
//! same words.
//!
//! # How data flows through it
//!
//! ```text
//!  CRD written ──► Schema::root, then compile_schema: for each node, each rule:
//!                                     guard (length, nesting)   ─┐
//!                                     parse (the `cel` crate)    ├─► Rule.compiled, or Rule.problems
//!                                     check (types of self…)     │   (crd::validate turns problems
//!                                     estimate cost              ─┘    into the 422 of the CRD)
//!
//!  object written ──► strategy (pruned, defaulted, schema-checked) ──► validate(schema, new, old):
//!       walk the object and the schema together (on a thread with a big stack), with the old
//!       object at the same place:
//!         at each node with rules: self = the value here (oldSelf = the old one, on update)
//!           rule uses oldSelf but no old value here?  skip it (transition rules)
//!           run it, metered (meter.rs)              → over its limit: one cause, stop
//!           charge what it cost to the write's budget → over budget: one cause, stop
//!           error                                    → cause "… evaluating rule: …"
//!           false → cause at path(+fieldPath), reason, message / messageExpression / "failed rule"
//!       every cause joins the object's 422 Invalid, after the schema's own causes.
//! ```
//!
//! # Which CEL crate, and why
//!
//! [`cel`](https://crates.io/crates/cel) (cel-rust, formerly published as `cel-interpreter`, whose
//! last release, 0.10, is the same code under its old name). It is the maintained one: regular
//! releases, a parser generated from CEL's own ANTLR grammar (so syntax errors read like cel-go's,
//! which kube-apiserver prints), macro expansion of `has`, `all`, `exists`, `exists_one`, `map` and
//! `filter`, and the standard functions (`size`, `startsWith`, `endsWith`, `contains`, `matches`,
//! conversions). What it lacks, we add here: cel-go's *type checker* (the crate is dynamically
//! typed, so this module checks the references to `self` against the schema itself, as far as
//! kube-apiserver's common errors go), and a *cost model* (the crate counts nothing).
//!
//! # Bounds on hostile rules
//!
//! A rule comes from whoever can write a CRD; it must not crash or stall the server.
//!
//! - **Size.** A rule (or messageExpression) longer than [`MAX_CODE_POINTS`] (cel-go's limit,
//!   kube-apiserver's too) or nested deeper than [`MAX_NESTING`] brackets is refused before it is
//!   parsed; one that parses deeper than [`MAX_EXPRESSION_DEPTH`] (cel-go's recursion limit) is
//!   refused before it is checked. Chains of `&&` and `||` count as the balanced trees cel-go makes
//!   of them, and are rebuilt so (`balance`) before they are run: the parser and the evaluator
//!   recurse on the expression's depth.
//! - **Issues.** A rule that does not compile gets at most [`MAX_ISSUES`] issues, each quoting a
//!   line of at most [`MAX_SNIPPET_BYTES`] (cel-go's bounds): what a 100,000-character rule of
//!   undeclared names makes the server write back is bounded as on kube-apiserver.
//! - **Stack.** Parsing a rule, and each write's walk through the rules, run on a thread of their
//!   own with a [`STACK_BYTES`] stack (only what is touched is committed); a panic inside the crate
//!   becomes an error of the rule, not of the server.
//! - **Cost.** Like kube-apiserver, a rule's worst-case cost is estimated when the CRD is written,
//!   with kube-apiserver's own figures (`estimate.rs`: cel-go's node costs, Kubernetes' library
//!   costs and its size bounds: `maxLength` x 4 bytes, enums, formats, `maxItems`,
//!   `maxProperties`, or what fits in a 3 MiB request), times how often the rule can run in one
//!   object; a rule over [`STATIC_COST_LIMIT`] (or a CRD over [`STATIC_CRD_COST_LIMIT`] in total)
//!   is refused, with kube-apiserver's message. At run time the
//!   work actually done is metered as cel-go meters it (the `meter` module): each rule is stopped when it
//!   passes [`PER_CALL_LIMIT`] (`operation cancelled: actual cost limit exceeded`), its cost is
//!   charged to the write's [`RUNTIME_COST_BUDGET`], and functions that would allocate more than
//!   they read are charged before they run. [`EVALUATION_DEADLINE`] is the last resort.
//!
//! # Known differences with kube-apiserver 1.37
//!
//! - The type checker knows field names, list and map element types and scalar types; it reports
//!   undefined fields, undeclared names and functions, and rules that are not boolean. Overloads
//!   (e.g. `self.name + 1`) are caught only when evaluated ("no such overload").
//! - Of the libraries kube-apiserver 1.37 adds to CEL, the rules have cel-go's strings (version 2)
//!   and lists extensions (from the `cel` crate), `duration`/`timestamp` (the crate's, with its
//!   `chrono` feature), optional types (`optional.of`, `?.`, `orValue`, `hasValue`: the crate's),
//!   Kubernetes' list library (`cel/kubernetes_lists.rs`), its IP and CIDR libraries
//!   (`cel/kubernetes_net.rs`: `isIP`, `ip()`, `cidr()`, `isCIDR` and their methods), the
//!   quantity library (`cel/kubernetes_quantity.rs`), the URL library (`cel/kubernetes_url.rs`:
//!   Go's `net/url` semantics, not WHATWG's), the semver library (`cel/kubernetes_semver.rs`),
//!   regex `find`/`findAll` (`cel/kubernetes_regex.rs`), cel-go's sets (in
//!   `cel/kubernetes_lists.rs`) and the format library (`cel/kubernetes_format.rs`: every
//!   name, `format.named`). Kubernetes' other
//!   libraries (authz) and `optionalOldSelf` are not supported: a rule using them is
//!   refused when the CRD is written, as "undeclared reference" (kube-apiserver accepts it).
//! - `duration('1hx')`: the crate parses the leading `1h` and ignores the rest, where Go refuses
//!   the string (`type conversion error`); durations longer than Go's (±292 years) are taken.
//! - The type checker knows one quantity overload error (`q.sign()`, a method where Kubernetes
//!   declares a global function); other wrong arguments to the quantity functions are "no such
//!   overload" when evaluated rather than compile errors.
//! - The type names `net.IP` and `net.CIDR` (`type(ip(s)) == net.IP`) are undeclared references
//!   here; comparing an IP with a string is "no such overload" when evaluated, not a compile error
//!   (and so for the other libraries' types).
//! - `find`/`findAll`: the `regex` crate's `\d`, `\w`, `\s`, `\b` are Unicode-aware (ASCII in Go),
//!   and an invalid pattern's message is the crate's.
//! - The estimate of `==` between two named formats is not Kubernetes' (it reads them as unknown
//!   sizes, so `format.uri() == format.named('uri').value()` is refused as too expensive).
//! - Ratcheting is applied to rules without `oldSelf` (an unchanged value is not refused again)
//!   but produces no Warning header.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use cel::common::ast::SourceInfo;
use cel::common::ast::{ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::objects::{Key, Map as CelMap};
use cel::{Context, Env, ExecutionError};
use serde_json::Value;

use crate::schema::{Compiled, Problem, Rule, RuleSpec, Schema};
use crate::status::Cause;

mod estimate;
mod kubernetes_format;
mod kubernetes_lists;
mod kubernetes_net;
mod kubernetes_quantity;
mod kubernetes_regex;
mod kubernetes_semver;
mod kubernetes_url;
mod meter;

/// The longest rule or messageExpression accepted, in code points: cel-go's parser limit
/// (`expressionSizeCodePointLimit`), which kube-apiserver keeps at its default.
pub const MAX_CODE_POINTS: usize = 100_000;
/// The most operator characters (`+`, `.`, `[`, `==` as two, …) between two `&&`, `||` or `,` of
/// a rule. Such a stretch parses at least half as deep as this (more than cel-go's recursion
/// limit: kube-apiserver refuses it too, as `max recursion depth exceeded`), and the `cel` crate's
/// parser recurses on that depth before [`MAX_EXPRESSION_DEPTH`] can be checked: 50,000 `.b`
/// (within the code point limit) overflowed its 64 MiB stack, aborting the process. (A sum
/// bracketed as a balanced tree of more terms would be refused here and taken by kube-apiserver.)
pub const MAX_CHAIN_OPERATORS: usize = 2000;
/// The deepest nesting of brackets (`(`, `[`, `{`) in a rule: more is deeper than
/// [`MAX_RECURSION`] (each bracket nests an expression), refused before the parser recurses.
pub const MAX_NESTING: usize = MAX_RECURSION as usize - 1;
/// The deepest expression a rule may parse to, as kube-apiserver 1.37.2 measured it: `self.x` plus
/// 248 `+ 1` then `> 0` (an expression 251 deep here) compiles there, 249 `+ 1` is refused with
/// `max recursion depth exceeded` (cel-go's parser stops at a recursion depth of 250). Chains of
/// `&&` or `||` count as balanced trees, as cel-go builds them (300 `&&` compile there). Past some
/// hundreds of levels the evaluator's recursion would overflow even the big stack (990 `+ 1` did,
/// aborting the process), so this is a safety limit as well as kube-apiserver's.
pub const MAX_EXPRESSION_DEPTH: usize = 251;
/// The stack of the thread that parses and evaluates rules: the `cel` crate's parser and evaluator
/// recurse once or more per level of the expression.
pub const STACK_BYTES: usize = 64 * 1024 * 1024;
/// kube-apiserver's largest estimated cost of one rule (`StaticEstimatedCostLimit`).
pub const STATIC_COST_LIMIT: f64 = 10_000_000.0;
/// kube-apiserver's largest estimated cost of all the rules of a CRD (`StaticEstimatedCRDCostLimit`).
pub const STATIC_CRD_COST_LIMIT: f64 = 100_000_000.0;
/// kube-apiserver's cost budget of all the rules run for one write (`RuntimeCELCostBudget`).
pub const RUNTIME_COST_BUDGET: f64 = 10_000_000.0;
/// kube-apiserver's cost limit of one evaluation (`PerCallLimit`).
pub const PER_CALL_LIMIT: f64 = 1_000_000.0;
/// How long the rules of one write may run, whatever their cost: the last resort behind the cost
/// limits (a write's rules hold a blocking-pool thread and the big-stack thread while they run;
/// since the lock-free writes of [`crate::api`], not the store's lock).
/// (Unoptimized builds evaluate some ten times slower, and get more time.)
pub const EVALUATION_DEADLINE: Duration = if cfg!(debug_assertions) {
    Duration::from_secs(30)
} else {
    Duration::from_secs(5)
};

/// The reasons a rule may give its failures.
const REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// A rule (or messageExpression) that cannot be compiled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompileError {
    /// Nested too deep for this server (see the module docs).
    #[error("{0}")]
    TooBig(String),
    /// Syntax and type errors, in cel-go's words (`ERROR: <input>:1:5: …`).
    #[error("{0}")]
    Issues(String),
    /// The crate panicked or the thread could not start.
    #[error("unexpected compilation error: {0}")]
    Internal(String),
}

/// A rule that could not be evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// An error of CEL (no such key, division by zero, …), in cel-go's words.
    #[error("{0}")]
    Cel(String),
    /// A call that matched no overload.
    #[error("no such overload")]
    NoSuchOverload,
    /// The crate panicked or the thread could not start.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The rule as kube-apiserver prints it in a compile error: its Go struct as JSON, with `<`, `>`
/// and `&` escaped as Go's encoder does.
fn go_json(rule: &Rule) -> String {
    let s = &rule.spec;
    let quoted = |t: &str| go_quote(t);
    let reason = s.reason.as_deref().map(quoted);
    let old = s.optional_old_self.map(|b| b.to_string());
    format!(
        "{{\"Rule\":{},\"Message\":{},\"MessageExpression\":{},\"Reason\":{},\"FieldPath\":{},\"OptionalOldSelf\":{}}}",
        quoted(&s.rule),
        quoted(s.message.as_deref().unwrap_or("")),
        quoted(s.message_expression.as_deref().unwrap_or("")),
        reason.as_deref().unwrap_or("null"),
        quoted(s.field_path.as_deref().unwrap_or("")),
        old.as_deref().unwrap_or("null"),
    )
}

/// A string as Go's `%q` prints it (field errors quote string values so).
fn go_q(text: &str) -> String {
    format!("{text:?}")
}

/// A string as Go's `encoding/json` writes it (HTML characters escaped).
fn go_quote(text: &str) -> String {
    let json = Value::String(text.to_string()).to_string();
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

// ---------------------------------------------------------------------------------------------
// Compiling
// ---------------------------------------------------------------------------------------------

/// A CEL library: registers its functions on an environment.
type Library = fn(&mut Env) -> Result<(), cel::DeclarationError>;

/// The environment of every rule, built once: CEL's standard library, cel-go's strings and lists
/// extensions (implemented by the `cel` crate) and Kubernetes' list library ([`kubernetes_lists`]),
/// as kube-apiserver 1.37 gives its CRD rules (its other libraries are not here: see the module
/// docs).
fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        let libraries: [(&str, Library); 10] = [
            ("strings", cel::extensions::strings),
            ("lists", cel::extensions::lists),
            ("kubernetes lists", kubernetes_lists::extension),
            ("kubernetes format", kubernetes_format::extension),
            ("kubernetes ip", kubernetes_net::extension),
            ("kubernetes quantity", kubernetes_quantity::extension),
            ("kubernetes urls", kubernetes_url::extension),
            ("kubernetes semver", kubernetes_semver::extension),
            ("kubernetes regex", kubernetes_regex::extension),
            ("runtime cost meter", meter::extension),
        ];
        for (name, library) in libraries {
            if let Err(error) = env.add_extension(library) {
                tracing::error!(%error, library = name, "a CEL library could not be registered");
            }
        }
        Arc::new(env)
    })
    .clone()
}

/// Runs `work` on a thread with a [`STACK_BYTES`] stack; a panic becomes `Err`.
pub(crate) fn on_big_stack<T: Send>(work: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("cel".into())
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, work)
            .map_err(|e| format!("cannot start the CEL thread: {e}"))?;
        handle
            .join()
            .map_err(|_| "the CEL library panicked".to_string())
    })
}

/// Refuses sources the parser should not see (see the module docs).
fn guard(source: &str) -> Result<(), CompileError> {
    let code_points = source.chars().count();
    if code_points > MAX_CODE_POINTS {
        return Err(CompileError::Issues(format!(
            "ERROR: <input>:-1:0: expression code point size exceeds limit: size: {code_points}, limit {MAX_CODE_POINTS}"
        )));
    }
    let (mut depth, mut deepest) = (0usize, 0usize);
    // Operator characters since the last `&&`, `||` or `,` (see [`MAX_CHAIN_OPERATORS`]), and the
    // last character outside blanks (a `-` after an operand is binary, else unary).
    let (mut chain, mut longest_chain) = (0usize, 0usize);
    let mut last = ' ';
    // In a quote: its character, and whether it is raw (`r'…'`: a backslash escapes nothing).
    let mut quote: Option<(char, bool)> = None;
    let mut escaped = false;
    let mut previous: [char; 2] = [' ', ' '];
    for c in source.chars() {
        let before = previous;
        previous = [before[1], c];
        if let Some((q, raw)) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' && !raw {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => {
                // `r` or `R` (after `b`, or alone) right before the quote makes a raw string.
                let prefix = |x: char| matches!(x, 'r' | 'R');
                let word = |x: char| x.is_alphanumeric() || x == '_';
                let raw = prefix(before[1]) && (!word(before[0]) || matches!(before[0], 'b' | 'B'));
                quote = Some((c, raw));
            }
            '(' | '[' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        let operand = |x: char| x.is_alphanumeric() || matches!(x, '_' | ')' | ']' | '\'' | '"');
        match c {
            '&' | '|' if before[1] == c => chain = 0,
            ',' => chain = 0,
            '+' | '*' | '/' | '%' | '<' | '>' | '=' | '.' | '[' | '(' => chain += 1,
            '-' if operand(last) => chain += 1,
            _ => {}
        }
        longest_chain = longest_chain.max(chain);
        if !c.is_whitespace() {
            last = c;
        }
    }
    if longest_chain > MAX_CHAIN_OPERATORS {
        return Err(CompileError::Issues(
            "ERROR: <input>:-1:0: max recursion depth exceeded".to_string(),
        ));
    }
    if deepest > MAX_NESTING {
        return Err(CompileError::Issues(recursion_exceeded()));
    }
    Ok(())
}

/// The most issues cel-go prints for one expression (`maxErrorsToReport`); past it, one line says
/// how many more there were.
pub const MAX_ISSUES: usize = 100;
/// The longest source line cel-go quotes under an issue, in bytes (`maxSnippetLength`); a longer
/// line is not quoted at all.
pub const MAX_SNIPPET_BYTES: usize = 16384;

/// cel-go's rendering of one issue: `ERROR: <input>:L:C: msg`, then the line and a caret under the
/// column (a wide dot or caret for each character wider than a byte), when the line is at most
/// [`MAX_SNIPPET_BYTES`] long.
fn issue(source: &str, offset: usize, message: &str) -> String {
    let mut line_no = 1;
    let mut line_start = 0;
    for (i, c) in source.char_indices() {
        if i >= offset {
            break;
        }
        if c == '\n' {
            line_no += 1;
            line_start = i + 1;
        }
    }
    let line = source[line_start..].split('\n').next().unwrap_or("");
    let before = source.get(line_start..offset.max(line_start)).unwrap_or("");
    let column = before.chars().count();
    let mut text = format!("ERROR: <input>:{line_no}:{}: {message}", column + 1);
    if line.len() <= MAX_SNIPPET_BYTES {
        let wide = |c: char| c.len_utf8() > 1;
        let dots: String = before
            .chars()
            .map(|c| if wide(c) { '\u{ff0e}' } else { '.' })
            .collect();
        let caret = match line[before.len().min(line.len())..].chars().next() {
            Some(c) if wide(c) => '\u{ff3e}',
            _ => '^',
        };
        text.push_str(&format!(
            "\n | {}\n | {dots}{caret}",
            line.replace('\t', " ")
        ));
    }
    text
}

/// cel-go's list of issues (`Errors.ToDisplayString`): sorted by position, at most
/// [`MAX_ISSUES`] of them, then `N more errors were truncated`. This bounds what a hostile rule
/// (thousands of undeclared names on one long line) can make the server write back: at most
/// 100 issues of two lines of at most 16 KiB each.
fn render_issues(source: &str, mut issues: Vec<(usize, String)>) -> String {
    issues.sort_by_key(|(offset, _)| *offset);
    let total = issues.len();
    let mut lines: Vec<String> = issues
        .iter()
        .take(MAX_ISSUES)
        .map(|(offset, message)| issue(source, *offset, message))
        .collect();
    if total > MAX_ISSUES {
        lines.push(format!("{} more errors were truncated", total - MAX_ISSUES));
    }
    lines.join("\n")
}

/// A parsed expression and where each of its nodes was written (what the crate's `Program` holds;
/// parsed here with the parser's recursion limit set to kube-apiserver's).
pub(crate) struct Parsed {
    expr: IdedExpr,
    source_info: SourceInfo,
}

impl Parsed {
    pub(crate) fn expression(&self) -> &IdedExpr {
        &self.expr
    }
    fn source_info(&self) -> &SourceInfo {
        &self.source_info
    }
}

/// The depth of nested expressions (brackets, calls, `?:`) cel-go's parser refuses, as
/// kube-apiserver 1.37.2 measured it: 249 nested parentheses compile, 250 do not.
pub const MAX_RECURSION: u16 = 250;
/// cel-go's words when a rule nests deeper than [`MAX_RECURSION`].
fn recursion_exceeded() -> String {
    format!("ERROR: <input>:-1:0: expression recursion limit exceeded: {MAX_RECURSION}")
}

/// Parses `source` (already guarded) into an expression, or cel-go's syntax error text.
fn parse(source: &str) -> Result<Parsed, CompileError> {
    let owned = source.to_string();
    let parser = env().parser().max_recursion_depth(MAX_RECURSION - 1);
    let parsed = on_big_stack(move || match parser.parse_with_source_info(&owned) {
        Ok((expr, source_info)) => Ok(Parsed { expr, source_info }),
        Err(errors)
            if errors
                .errors
                .iter()
                .any(|e| e.msg.contains("Recursion limit of")) =>
        {
            Err(recursion_exceeded())
        }
        Err(errors) => Err(render_issues(
            &owned,
            errors
                .errors
                .iter()
                .map(|e| {
                    // The crate's positions are (line, column), 1-based; make a byte offset.
                    let (line, column) = (e.pos.0.max(1) as usize, e.pos.1.max(1) as usize);
                    let start: usize = owned
                        .split_inclusive('\n')
                        .take(line - 1)
                        .map(str::len)
                        .sum();
                    let offset = owned[start..]
                        .char_indices()
                        .nth(column - 1)
                        .map(|(i, _)| start + i)
                        .unwrap_or(owned.len());
                    (offset, e.msg.clone())
                })
                .collect(),
        )),
    });
    match parsed {
        Ok(Ok(parsed)) => Ok(parsed),
        Ok(Err(issues)) => Err(CompileError::Issues(issues)),
        Err(e) => Err(CompileError::Internal(e)),
    }
}

/// Compiles every rule of `schema` and below; the results stay in the rules.
pub fn compile_schema(schema: &mut Schema) {
    compile_node(schema, true, Some(1.0));
}

/// `schema` (a root, from [`Schema::root`]) with its rules compiled.
pub fn compiled(mut schema: Schema) -> Schema {
    compile_schema(&mut schema);
    schema
}

/// Compiles the rules of `schema` and below. `cardinality` is how many times the node can occur
/// in one object when every list and map above it is bounded (`maxItems`, `maxProperties`), `None`
/// when one is not: then Kubernetes assumes the node repeats as often as its smallest JSON fits in
/// a request (`estimate::unbounded_cardinality`).
fn compile_node(schema: &mut Schema, root: bool, cardinality: Option<f64>) {
    for child in schema.properties_mut().values_mut() {
        let embedded = child.embedded_resource();
        compile_node(child, embedded, cardinality);
    }
    let times = |bound: Option<u64>| cardinality.zip(bound).map(|(c, b)| c * b as f64);
    let below_map = times(schema.max_properties);
    let below_list = times(schema.max_items);
    if let Some(additional) = schema.additional_mut() {
        let embedded = additional.embedded_resource();
        compile_node(additional, embedded, below_map);
    }
    if let Some(items) = schema.items_mut() {
        let embedded = items.embedded_resource();
        compile_node(items, embedded, below_list);
    }
    if schema.rules.is_empty() {
        return;
    }
    let node = schema.clone();
    let cardinality =
        cardinality.unwrap_or_else(|| estimate::unbounded_cardinality(estimate::min_size(&node)));
    for rule in &mut schema.rules {
        compile_rule(rule, &node, root, cardinality);
    }
}

/// Compiles one rule of `node` into `rule.compiled`, or records why not in `rule.problems`, in
/// kube-apiserver's order: the rule's own fields, the expression and its cost, the message
/// expression and its cost, then instrumenting for metering.
fn compile_rule(rule: &mut Rule, node: &Schema, root: bool, cardinality: f64) {
    rule.problems.clear();
    rule.compiled = None;
    let spec = rule.spec.clone();
    // The checks of the rule's own fields come first; compiling happens only without them.
    let field_path = match check_rule_fields(&spec, node) {
        Ok(field_path) => field_path,
        Err(problems) => {
            rule.problems = problems;
            return;
        }
    };
    if spec.optional_old_self.is_some() {
        let detail = "optionalOldSelf is not supported by this server";
        rule.problems
            .push(invalid_rule(rule, "optionalOldSelf", detail));
        return;
    }
    let self_type = Ty::of_schema(node, root);
    let Some((program, uses_old_self, rule_cost)) =
        compile_condition(rule, &self_type, node, root, cardinality)
    else {
        return;
    };
    let (message, message_cost) = compile_message(rule, &self_type, node, root);
    rule.cost = rule_cost;
    rule.message_cost = message_cost;
    if rule.problems.is_empty() {
        rule.compiled = instrumented(rule, &program, message.as_ref(), uses_old_self, field_path);
    }
}

/// A problem with the rule as a whole, quoting it as kube-apiserver does.
fn invalid_rule(rule: &Rule, field: &'static str, detail: &str) -> Problem {
    Problem {
        field,
        reason: "FieldValueInvalid",
        message: format!("Invalid value: {}: {detail}", go_json(rule)),
    }
}

/// The checks of the rule's own fields (`rule`, `message`, `messageExpression`, `reason`,
/// `fieldPath`), before any compiling: the normalized field path, or every problem found.
fn check_rule_fields(spec: &RuleSpec, node: &Schema) -> Result<Option<String>, Vec<Problem>> {
    let mut problems = Vec::new();
    if spec.rule.trim().is_empty() {
        problems.push(Problem {
            field: "rule",
            reason: "FieldValueRequired",
            message: "Required value: rule is not specified".into(),
        });
    }
    if let Some(message) = &spec.message {
        if message.trim().is_empty() {
            problems.push(Problem {
                field: "message",
                reason: "FieldValueInvalid",
                message: format!(
                    "Invalid value: {}: must be non-empty if specified",
                    go_q(message)
                ),
            });
        } else if message.contains('\n') {
            problems.push(Problem {
                field: "message",
                reason: "FieldValueInvalid",
                message: format!(
                    "Invalid value: {}: must not contain line breaks",
                    go_q(message)
                ),
            });
        }
    } else if spec.rule.contains('\n') {
        problems.push(Problem {
            field: "message",
            reason: "FieldValueRequired",
            message: "Required value: message must be specified if rule contains line breaks"
                .into(),
        });
    }
    if spec
        .message_expression
        .as_deref()
        .is_some_and(|m| m.trim().is_empty())
    {
        problems.push(Problem {
            field: "messageExpression",
            reason: "FieldValueRequired",
            message: "Required value: messageExpression must be non-empty if specified".into(),
        });
    }
    if let Some(reason) = spec.reason.as_deref() {
        if !REASONS.contains(&reason) {
            problems.push(Problem {
                field: "reason",
                reason: "FieldValueNotSupported",
                message: format!(
                    "Unsupported value: {}: supported values: {}",
                    go_q(reason),
                    REASONS.map(go_q).join(", ")
                ),
            });
        }
    }
    let mut field_path = None;
    if let Some(path) = spec.field_path.as_deref() {
        let bad = |why: &str| Problem {
            field: "fieldPath",
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {}: {why}", go_q(path)),
        };
        if path.trim().is_empty() {
            problems.push(bad("must be non-empty if specified"));
        } else if path.contains('\n') {
            problems.push(bad("must not contain line breaks"));
        } else {
            match normalize_field_path(path, node) {
                Some(normalized) => field_path = Some(normalized),
                None => problems.push(bad("must be a valid path")),
            }
        }
    }
    match problems.is_empty() {
        true => Ok(field_path),
        false => Err(problems),
    }
}

/// Compiles the rule's expression (it must be a bool) and checks its cost, times the node's
/// cardinality, against the per-rule limit as kube-apiserver does. `None` when it does not
/// compile (the problem recorded); a cost over the limit is recorded and compiling goes on.
fn compile_condition(
    rule: &mut Rule,
    self_type: &Ty<'_>,
    node: &Schema,
    root: bool,
    cardinality: f64,
) -> Option<(IdedExpr, bool, f64)> {
    let checked = compile_expression(&rule.spec.rule, self_type, node, root, Want::Bool);
    let (program, uses_old_self, cost) = match checked {
        Ok(ok) => ok,
        Err(e) => {
            let detail = match &e {
                CompileError::Issues(issues) => format!("compilation failed: {issues}"),
                CompileError::TooBig(why) => format!("compilation failed: {why}"),
                other => other.to_string(),
            };
            let detail = if detail == "compilation failed: must evaluate to a bool" {
                "cel expression must evaluate to a bool".to_string()
            } else {
                detail
            };
            let problem = invalid_rule(rule, "rule", &detail);
            rule.problems.push(problem);
            return None;
        }
    };
    // The rule's cost times its cardinality goes against the per-rule limit (and into the
    // CRD's total).
    let cost = (cost * cardinality).min(estimate::SATURATED);
    if cost > STATIC_COST_LIMIT {
        rule.problems.push(Problem {
            field: "rule",
            reason: "FieldValueForbidden",
            message: format!(
                "Forbidden: {}",
                cost_message("estimated rule cost", cost, STATIC_COST_LIMIT)
            ),
        });
    }
    Some((program, uses_old_self, cost))
}

/// Compiles the rule's `messageExpression`, if it has one (it must be a string), and checks its
/// cost alone against the per-rule limit: the program and its cost (0 without one).
fn compile_message(
    rule: &mut Rule,
    self_type: &Ty<'_>,
    node: &Schema,
    root: bool,
) -> (Option<IdedExpr>, f64) {
    let Some(source) = rule.spec.message_expression.clone() else {
        return (None, 0.0);
    };
    match compile_expression(&source, self_type, node, root, Want::String) {
        Ok((program, _, cost)) => {
            if cost > STATIC_COST_LIMIT {
                rule.problems.push(Problem {
                    field: "messageExpression",
                    reason: "FieldValueForbidden",
                    message: format!(
                        "Forbidden: {}",
                        cost_message("estimated messageExpression cost", cost, STATIC_COST_LIMIT)
                    ),
                });
            }
            (Some(program), cost)
        }
        Err(e) => {
            let detail = match &e {
                CompileError::Issues(i) if i == "must evaluate to a string" => {
                    "messageExpression must evaluate to a string".to_string()
                }
                CompileError::Issues(i) | CompileError::TooBig(i) => {
                    format!("messageExpression compilation failed: {i}")
                }
                other => other.to_string(),
            };
            let problem = invalid_rule(rule, "messageExpression", &detail);
            rule.problems.push(problem);
            (None, 0.0)
        }
    }
}

/// The rule's programs instrumented for metering (on the big-stack thread: instrumenting
/// recurses on the expression's depth too, see `compile_expression`); `None`, with the problem
/// recorded, if that thread could not run.
fn instrumented(
    rule: &mut Rule,
    program: &IdedExpr,
    message: Option<&IdedExpr>,
    uses_old_self: bool,
    field_path: Option<String>,
) -> Option<Arc<Compiled>> {
    let both = on_big_stack(|| (meter::instrument(program), message.map(meter::instrument)));
    match both {
        Ok((metered, message_metered)) => Some(Arc::new(Compiled {
            metered,
            message_metered,
            uses_old_self,
            field_path,
        })),
        Err(e) => {
            let detail = CompileError::Internal(e).to_string();
            let problem = invalid_rule(rule, "rule", &detail);
            rule.problems.push(problem);
            None
        }
    }
}

/// What an expression must evaluate to.
#[derive(Clone, Copy, PartialEq)]
enum Want {
    Bool,
    String,
}

/// Guards, parses, checks and estimates one expression: the expression (with its `&&` and `||`
/// chains balanced, see [`balance`]), whether it uses `oldSelf`, and its estimated cost.
///
/// Everything past the guard runs on the big stack, and the parsed program is dropped there: a
/// left-deep chain (`a + 1 + 1 …`, up to 50,000 deep within the code point limit) is parsed as
/// deep as it is long, and the checker, the estimator and even dropping the tree recurse on that
/// depth.
fn compile_expression(
    source: &str,
    self_type: &Ty<'_>,
    node: &Schema,
    root: bool,
    want: Want,
) -> Result<(IdedExpr, bool, f64), CompileError> {
    guard(source)?;
    let compiled = on_big_stack(|| {
        let program = parse(source)?;
        if expression_depth(program.expression()) > MAX_EXPRESSION_DEPTH {
            return Err(CompileError::Issues(
                "ERROR: <input>:-1:0: max recursion depth exceeded".to_string(),
            ));
        }
        let (uses_old_self, cost) =
            check_and_estimate(&program, source, self_type, node, root, want)?;
        Ok((balance(program.expression()), uses_old_self, cost))
    });
    compiled.map_err(CompileError::Internal)?
}

/// A copy of `expr` with every chain of one logical operator (`a && b && … && z`, which the
/// `cel` crate parses left-deep) rebuilt as a balanced tree, as cel-go's parser builds it. The
/// value is the same (CEL's `&&` and `||` are commutative, errors included); the evaluator's
/// recursion is then logarithmic in the chain's length, so a rule of 10,000 conditions, which
/// kube-apiserver takes, runs within the stack. Called after the depth check: the recursion
/// here is bounded by [`MAX_EXPRESSION_DEPTH`] (chains are walked with a stack of their own).
fn balance(expr: &IdedExpr) -> IdedExpr {
    let copy = |e: &IdedExpr| Box::new(balance(e));
    let out = match &expr.expr {
        Expr::Call(call) if matches!(call.func_name.as_str(), "_&&_" | "_||_") => {
            let mut operands = Vec::new();
            let mut chain = vec![expr];
            while let Some(link) = chain.pop() {
                match &link.expr {
                    Expr::Call(c) if c.func_name == call.func_name && c.target.is_none() => {
                        // Pushed right to left: popped (and kept) left to right.
                        chain.extend(c.args.iter().rev());
                    }
                    _ => operands.push(balance(link)),
                }
            }
            return balanced_tree(&call.func_name, expr.id, operands);
        }
        Expr::Call(call) => {
            let mut call = call.clone();
            call.target = call.target.as_deref().map(copy);
            call.args = call.args.iter().map(balance).collect();
            Expr::Call(call)
        }
        Expr::Select(select) => {
            let mut select = select.clone();
            select.operand = copy(&select.operand);
            Expr::Select(select)
        }
        Expr::List(list) => {
            let mut list = list.clone();
            list.elements = list.elements.iter().map(balance).collect();
            Expr::List(list)
        }
        Expr::Map(map) => {
            let mut map = map.clone();
            for entry in &mut map.entries {
                if let EntryExpr::MapEntry(e) = &mut entry.expr {
                    e.key = balance(&e.key);
                    e.value = balance(&e.value);
                }
            }
            Expr::Map(map)
        }
        Expr::Struct(st) => {
            let mut st = st.clone();
            for entry in &mut st.entries {
                if let EntryExpr::StructField(f) = &mut entry.expr {
                    f.value = balance(&f.value);
                }
            }
            Expr::Struct(st)
        }
        Expr::Comprehension(c) => {
            let mut c = c.clone();
            c.iter_range = balance(&c.iter_range);
            c.accu_init = balance(&c.accu_init);
            c.loop_cond = balance(&c.loop_cond);
            c.loop_step = balance(&c.loop_step);
            c.result = balance(&c.result);
            Expr::Comprehension(c)
        }
        other => other.clone(),
    };
    IdedExpr {
        id: expr.id,
        expr: out,
    }
}

/// `operands` joined by `function` as a balanced tree, left to right (the inner nodes take `id`).
fn balanced_tree(function: &str, id: u64, mut operands: Vec<IdedExpr>) -> IdedExpr {
    if operands.len() <= 1 {
        return operands.pop().unwrap_or(IdedExpr {
            id,
            expr: Expr::Literal(LiteralValue::Boolean((function == "_&&_").into())),
        });
    }
    let right = operands.split_off(operands.len() / 2);
    IdedExpr {
        id,
        expr: Expr::Call(cel::common::ast::CallExpr {
            func_name: function.to_string(),
            target: None,
            args: vec![
                balanced_tree(function, id, operands),
                balanced_tree(function, id, right),
            ],
        }),
    }
}

/// How deep `expr` is, with chains of one logical operator (`a && b && c`) counted as the balanced
/// trees cel-go's parser makes of them. Walked with a stack of its own, not by recursion: the point
/// is to refuse what would recurse too deep.
fn expression_depth(expr: &IdedExpr) -> usize {
    let mut deepest = 0;
    let mut pending: Vec<(&IdedExpr, usize)> = vec![(expr, 1)];
    while let Some((e, depth)) = pending.pop() {
        deepest = deepest.max(depth);
        match &e.expr {
            Expr::Call(call) if matches!(call.func_name.as_str(), "_&&_" | "_||_") => {
                // The chain's operands, however the parser nested them.
                let mut operands = Vec::new();
                let mut chain = vec![e];
                while let Some(link) = chain.pop() {
                    match &link.expr {
                        Expr::Call(c) if c.func_name == call.func_name && c.target.is_none() => {
                            chain.extend(c.args.iter());
                        }
                        _ => operands.push(link),
                    }
                }
                // A balanced tree of n leaves is ceil(log2 n) deep.
                let levels = operands.len().max(2).next_power_of_two().trailing_zeros() as usize;
                pending.extend(operands.into_iter().map(|o| (o, depth + levels)));
            }
            Expr::Call(call) => {
                pending.extend(call.target.iter().map(|t| (t.as_ref(), depth + 1)));
                pending.extend(call.args.iter().map(|a| (a, depth + 1)));
            }
            Expr::Select(select) => pending.push((select.operand.as_ref(), depth + 1)),
            Expr::List(list) => pending.extend(list.elements.iter().map(|x| (x, depth + 1))),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(e) = &entry.expr {
                        pending.push((&e.key, depth + 1));
                        pending.push((&e.value, depth + 1));
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        pending.push((&f.value, depth + 1));
                    }
                }
            }
            Expr::Comprehension(c) => {
                for part in [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ] {
                    pending.push((part, depth + 1));
                }
            }
            Expr::Literal(_) | Expr::Ident(_) | Expr::Unspecified => {}
        }
    }
    deepest
}

/// Type-checks a parsed expression and estimates its cost: whether it uses `oldSelf`, and the cost.
fn check_and_estimate(
    program: &Parsed,
    source: &str,
    self_type: &Ty<'_>,
    node: &Schema,
    root: bool,
    want: Want,
) -> Result<(bool, f64), CompileError> {
    let mut checker = Checker {
        source,
        program,
        scopes: Vec::new(),
        self_type: self_type.clone(),
        issues: Vec::new(),
        uses_old_self: false,
    };
    let result = checker.check(program.expression());
    if !checker.issues.is_empty() {
        let issues = std::mem::take(&mut checker.issues);
        return Err(CompileError::Issues(render_issues(source, issues)));
    }
    let wrong = match want {
        Want::Bool => !matches!(result, Ty::Bool | Ty::Dyn),
        Want::String => !matches!(result, Ty::String | Ty::Dyn),
    };
    if wrong {
        let what = if want == Want::Bool { "bool" } else { "string" };
        return Err(CompileError::Issues(format!("must evaluate to a {what}")));
    }
    let cost = estimate::estimate(program.expression(), node, root);
    Ok((checker.uses_old_self, cost))
}

// ---------------------------------------------------------------------------------------------
// Type checking (the part of cel-go's checker that kube-apiserver users meet)
// ---------------------------------------------------------------------------------------------

/// A CEL type, as far as the checker follows it.
#[derive(Debug, Clone)]
enum Ty<'s> {
    Dyn,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    List(Box<Ty<'s>>),
    Map(Box<Ty<'s>>),
    /// An object with declared properties; `true` at the root of a resource (which also has
    /// `apiVersion`, `kind` and `metadata`).
    Object(&'s Schema, bool),
    /// The `metadata` of a resource's root: `name` and `generateName` only.
    Meta,
    /// A `kubernetes.Quantity` (`quantity(s)`, `q.add(r)`, `q.sub(r)`).
    Quantity,
}

impl<'s> Ty<'s> {
    fn of_schema(schema: &'s Schema, root: bool) -> Ty<'s> {
        if schema.int_or_string() {
            return Ty::Dyn;
        }
        if schema.is_object() || (root && schema.type_name().is_empty()) {
            if let Some(additional) = schema.additional() {
                if schema.properties().is_empty() {
                    return Ty::Map(Box::new(Ty::of_schema(additional, false)));
                }
            }
            if schema.preserves_unknown() && schema.properties().is_empty() && !root {
                return Ty::Dyn;
            }
            return Ty::Object(schema, root);
        }
        if schema.is_array() {
            let items = schema.items().map(|i| Ty::of_schema(i, false));
            return Ty::List(Box::new(items.unwrap_or(Ty::Dyn)));
        }
        if schema.is_string() {
            Ty::String
        } else if schema.is_integer() {
            Ty::Int
        } else if schema.is_number() {
            Ty::Double
        } else if schema.is_boolean() {
            Ty::Bool
        } else {
            Ty::Dyn
        }
    }

    fn element(&self) -> Ty<'s> {
        match self {
            Ty::List(t) | Ty::Map(t) => (**t).clone(),
            _ => Ty::Dyn,
        }
    }
}

/// Names a property has in CEL (kube-apiserver escapes what is not an identifier); `None` if it
/// cannot be named.
pub(crate) fn escape(name: &str) -> Option<String> {
    const RESERVED: [&str; 19] = [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
    ];
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let escaped = name
        .replace("__", "__underscores__")
        .replace('.', "__dot__")
        .replace('-', "__dash__")
        .replace('/', "__slash__");
    let mut chars = escaped.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    (first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')).then_some(escaped)
}

/// The standard functions the checker lets through (the crate implements them).
const FUNCTIONS: [&str; 36] = [
    "_==_",
    "_!=_",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "_&&_",
    "_||_",
    "!_",
    "-_",
    "_+_",
    "_-_",
    "_*_",
    "_/_",
    "_%_",
    "_?_:_",
    "_[_]",
    "@in",
    "@not_strictly_false",
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "string",
    "int",
    "uint",
    "double",
    "bytes",
    "bool",
    "type",
    "dyn",
    "has",
    "max",
    "min",
    "exists",
];

/// cel-go's strings extension as kube-apiserver 1.37 has it (version 2; the crate also has
/// version 3's `reverse`, which kube-apiserver would refuse, so it is not let through on strings).
const STRING_FUNCTIONS: [&str; 12] = [
    "charAt",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "replace",
    "split",
    "substring",
    "trim",
    "join",
    "format",
    "strings.quote",
];

/// cel-go's lists extension (version 3, kube-apiserver 1.34+); `sortBy` is a macro, expanded to
/// the crate's `@sortByAssociatedKeys` while parsing.
const LIST_FUNCTIONS: [&str; 7] = [
    "slice",
    "flatten",
    "distinct",
    "reverse",
    "sort",
    "@sortByAssociatedKeys",
    "lists.range",
];

/// Whether the checker lets a call of `name` through.
fn is_declared(name: &str) -> bool {
    FUNCTIONS.contains(&name)
        || STRING_FUNCTIONS.contains(&name)
        || LIST_FUNCTIONS.contains(&name)
        || kubernetes_lists::FUNCTIONS.contains(&name)
        || kubernetes_net::FUNCTIONS.contains(&name)
        || kubernetes_quantity::FUNCTIONS.contains(&name)
        || kubernetes_url::FUNCTIONS.contains(&name)
        || kubernetes_semver::FUNCTIONS.contains(&name)
        || kubernetes_regex::FUNCTIONS.contains(&name)
        || kubernetes_format::is_function(name)
        || TIME_FUNCTIONS.contains(&name)
        || OPTIONAL_FUNCTIONS.contains(&name)
}

/// cel-go's optional types, which kube-apiserver 1.37 enables for CRD rules (the `cel` crate's;
/// `optMap` and `optFlatMap` are macros, expanded while parsing into these).
const OPTIONAL_FUNCTIONS: [&str; 9] = [
    "optional.of",
    "optional.ofNonZeroValue",
    "optional.none",
    "hasValue",
    "value",
    "orValue",
    "or",
    "_?._",
    "_[?_]",
];

/// CEL's `duration` and `timestamp` (the `cel` crate's, with its `chrono` feature) and their
/// accessors.
const TIME_FUNCTIONS: [&str; 12] = [
    "duration",
    "timestamp",
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getFullYear",
    "getHours",
    "getMilliseconds",
    "getMinutes",
    "getMonth",
    "getSeconds",
];

struct Checker<'a, 's> {
    source: &'a str,
    program: &'a Parsed,
    scopes: Vec<(String, Ty<'s>)>,
    self_type: Ty<'s>,
    issues: Vec<(usize, String)>,
    uses_old_self: bool,
}

impl<'a, 's> Checker<'a, 's> {
    /// The byte offset of an expression in the source (cel-go's "location").
    fn offset(&self, expr: &IdedExpr) -> usize {
        let offset = self
            .program
            .source_info()
            .offset_for(expr.id)
            .map(|(start, _)| start as usize)
            .unwrap_or(0);
        // The crate counts characters; the issue printer wants bytes.
        self.source
            .char_indices()
            .nth(offset)
            .map(|(i, _)| i)
            .unwrap_or(self.source.len())
    }

    fn report(&mut self, expr: &IdedExpr, message: String) {
        let offset = self.offset(expr);
        self.issues.push((offset, message));
    }

    fn check(&mut self, expr: &IdedExpr) -> Ty<'s> {
        match &expr.expr {
            Expr::Literal(literal) => match literal {
                LiteralValue::Boolean(_) => Ty::Bool,
                LiteralValue::Int(_) => Ty::Int,
                LiteralValue::UInt(_) => Ty::Uint,
                LiteralValue::Double(_) => Ty::Double,
                LiteralValue::String(_) => Ty::String,
                LiteralValue::Bytes(_) => Ty::Bytes,
                LiteralValue::Null => Ty::Null,
            },
            Expr::Ident(name) => self.ident(expr, name),
            Expr::Select(select) => {
                let operand = self.check(&select.operand);
                let found = self.field(expr, &operand, &select.field);
                if select.test { Ty::Bool } else { found }
            }
            Expr::Call(call) => {
                // `format.dns1123Label()`, `strings.quote(s)`: a function in a namespace, when
                // the namespace is not a variable (cel-go resolves such names so).
                if let Some(name) = self.qualified_function(call) {
                    let args: Vec<Ty<'s>> = call.args.iter().map(|a| self.check(a)).collect();
                    return call_type(&name, None, &args);
                }
                let target = call.target.as_deref().map(|t| self.check(t));
                let args: Vec<Ty<'s>> = call.args.iter().map(|a| self.check(a)).collect();
                if !is_declared(&call.func_name) {
                    self.report(
                        expr,
                        format!(
                            "undeclared reference to '{}' (in container '')",
                            call.func_name
                        ),
                    );
                    return Ty::Dyn;
                }
                // `sign` is a global function of quantities, not a method (cel-go's checker).
                if call.func_name == "sign"
                    && matches!(target, Some(Ty::Quantity))
                    && args.is_empty()
                {
                    self.report(
                        expr,
                        "found no matching overload for 'sign' applied to 'kubernetes.Quantity.()'"
                            .into(),
                    );
                    return Ty::Dyn;
                }
                call_type(&call.func_name, target.as_ref(), &args)
            }
            Expr::List(list) => {
                let mut element = None;
                for item in &list.elements {
                    element = Some(self.check(item));
                }
                Ty::List(Box::new(element.unwrap_or(Ty::Dyn)))
            }
            Expr::Map(map) => {
                let mut value = None;
                for entry in &map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(e) = &entry.expr {
                        self.check(&e.key);
                        value = Some(self.check(&e.value));
                    }
                }
                Ty::Map(Box::new(value.unwrap_or(Ty::Dyn)))
            }
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Struct(_) | Expr::Unspecified => Ty::Dyn,
        }
    }

    /// `ns.f` when `call` is `ns.f(…)` with `ns` not a variable and `ns.f` a declared function.
    fn qualified_function(&self, call: &cel::common::ast::CallExpr) -> Option<String> {
        let Expr::Ident(namespace) = &call.target.as_deref()?.expr else {
            return None;
        };
        let variable = matches!(namespace.as_str(), "self" | "oldSelf")
            || self.scopes.iter().any(|(n, _)| n == namespace);
        let name = format!("{namespace}.{}", call.func_name);
        (!variable && is_declared(&name)).then_some(name)
    }

    fn ident(&mut self, expr: &IdedExpr, name: &str) -> Ty<'s> {
        if let Some((_, t)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return t.clone();
        }
        match name {
            "self" => self.self_type.clone(),
            "oldSelf" => {
                self.uses_old_self = true;
                self.self_type.clone()
            }
            "int" | "uint" | "double" | "string" | "bool" | "bytes" | "list" | "map"
            | "null_type" | "type" => Ty::Dyn,
            _ => {
                self.report(
                    expr,
                    format!("undeclared reference to '{name}' (in container '')"),
                );
                Ty::Dyn
            }
        }
    }

    fn field(&mut self, expr: &IdedExpr, operand: &Ty<'s>, name: &str) -> Ty<'s> {
        match operand {
            Ty::Object(schema, root) => {
                if *root {
                    match name {
                        "apiVersion" | "kind" => return Ty::String,
                        "metadata" => return Ty::Meta,
                        _ => {}
                    }
                }
                let found = schema
                    .properties()
                    .iter()
                    .find(|(property, _)| escape(property).as_deref() == Some(name));
                match found {
                    Some((_, child)) => Ty::of_schema(child, false),
                    None => {
                        self.report(expr, format!("undefined field '{name}'"));
                        Ty::Dyn
                    }
                }
            }
            Ty::Meta => match name {
                "name" | "generateName" => Ty::String,
                _ => {
                    self.report(expr, format!("undefined field '{name}'"));
                    Ty::Dyn
                }
            },
            Ty::Map(value) => (**value).clone(),
            _ => Ty::Dyn,
        }
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Ty<'s> {
        let range = self.check(&c.iter_range);
        let element = match &range {
            Ty::Map(_) | Ty::Object(..) | Ty::Meta => Ty::String,
            other => other.element(),
        };
        let accu = self.check(&c.accu_init);
        let depth = self.scopes.len();
        self.scopes.push((c.iter_var.clone(), element.clone()));
        if let Some(second) = &c.iter_var2 {
            self.scopes.push((second.clone(), range.element()));
        }
        self.scopes.push((c.accu_var.clone(), accu));
        self.check(&c.loop_cond);
        let step = self.check(&c.loop_step);
        self.scopes
            .truncate(depth + 1 + usize::from(c.iter_var2.is_some()));
        self.scopes.push((c.accu_var.clone(), step));
        let result = self.check(&c.result);
        self.scopes.truncate(depth);
        result
    }
}

/// The result type of a standard function (or `Dyn` when it depends on more than we follow).
fn call_type<'s>(name: &str, target: Option<&Ty<'s>>, args: &[Ty<'s>]) -> Ty<'s> {
    let first = target.or(args.first()).cloned().unwrap_or(Ty::Dyn);
    match name {
        "_==_"
        | "_!=_"
        | "_<_"
        | "_<=_"
        | "_>_"
        | "_>=_"
        | "_&&_"
        | "_||_"
        | "!_"
        | "@in"
        | "@not_strictly_false"
        | "contains"
        | "startsWith"
        | "endsWith"
        | "matches"
        | "bool"
        | "has"
        | "exists" => Ty::Bool,
        "isSorted" | "isIP" | "hasValue" => Ty::Bool,
        "isCIDR"
        | "ip.isCanonical"
        | "containsIP"
        | "containsCIDR"
        | "isUnspecified"
        | "isLoopback"
        | "isLinkLocalMulticast"
        | "isLinkLocalUnicast"
        | "isGlobalUnicast" => Ty::Bool,
        "family" | "prefixLength" => Ty::Int,
        "isURL" | "isSemver" | "sets.contains" | "sets.equivalent" | "sets.intersects" => Ty::Bool,
        "find" => Ty::String,
        "findAll" => Ty::List(Box::new(Ty::String)),
        "major" | "minor" | "patch" => Ty::Int,
        "getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath" => Ty::String,
        "getQuery" => Ty::Map(Box::new(Ty::List(Box::new(Ty::String)))),
        "isQuantity" | "isGreaterThan" | "isLessThan" | "isInteger" => Ty::Bool,
        "size" | "int" | "indexOf" | "lastIndexOf" => Ty::Int,
        "sign" | "compareTo" | "asInteger" => Ty::Int,
        "asApproximateFloat" => Ty::Double,
        "quantity" => Ty::Quantity,
        "add" | "sub" if matches!(target, Some(Ty::Quantity)) => Ty::Quantity,
        "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "charAt" | "join"
        | "format" | "strings.quote" => Ty::String,
        "split" => Ty::List(Box::new(Ty::String)),
        "sum" | "min" | "max" if target.is_some() => match first {
            Ty::List(element) => *element,
            _ => Ty::Dyn,
        },
        "uint" => Ty::Uint,
        "double" => Ty::Double,
        "string" => Ty::String,
        "bytes" => Ty::Bytes,
        "_[_]" => match args.first() {
            Some(Ty::List(t)) | Some(Ty::Map(t)) => (**t).clone(),
            _ => Ty::Dyn,
        },
        "_?_:_" => args.get(1).cloned().unwrap_or(Ty::Dyn),
        "_+_" | "_-_" | "_*_" | "_/_" | "_%_" | "-_" => match first {
            Ty::Int | Ty::Uint | Ty::Double | Ty::String | Ty::Bytes | Ty::List(_) => first,
            _ => Ty::Dyn,
        },
        _ => Ty::Dyn,
    }
}

/// The normalized form of a `fieldPath` (`.a.b`, `.a['x.y']`, `['a']`) if every step names a
/// declared property (or a key of a map); `None` otherwise.
fn normalize_field_path(path: &str, node: &Schema) -> Option<String> {
    let mut schema = node;
    let mut out = String::new();
    let mut rest = path;
    while !rest.is_empty() {
        let (name, after) = if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            (r[..end].to_string(), &r[end..])
        } else if let Some(r) = rest.strip_prefix("['") {
            let mut name = String::new();
            let mut chars = r.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        let (_, next) = chars.next()?;
                        name.push(match next {
                            'n' => '\n',
                            't' => '\t',
                            '\'' => '\'',
                            '\\' => '\\',
                            _ => return None,
                        });
                    }
                    '\'' => {
                        end = Some(i);
                        break;
                    }
                    other => name.push(other),
                }
            }
            let end = end?;
            let after = r[end + 1..].strip_prefix(']')?;
            (name, after)
        } else {
            return None;
        };
        if name.is_empty() {
            return None;
        }
        if !schema.properties().is_empty() {
            schema = schema.properties().get(&name)?;
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&name);
        } else if let Some(additional) = schema.additional() {
            schema = additional;
            out.push_str(&format!("[{name}]"));
        } else {
            return None;
        }
        rest = after;
    }
    (!out.is_empty()).then_some(out)
}

// ---------------------------------------------------------------------------------------------
// Cost
// ---------------------------------------------------------------------------------------------

/// kube-apiserver's words for an estimated cost over its limit.
fn cost_message(what: &str, cost: f64, limit: f64) -> String {
    let factor = cost / limit;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

// ---------------------------------------------------------------------------------------------
// The CRD's checks
// ---------------------------------------------------------------------------------------------

/// The causes of a CRD's 422 for the rules of `schema` (read from `openAPIV3Schema` at `path`,
/// e.g. `spec.validation.openAPIV3Schema`): each rule's problems, rules with `oldSelf` below a list
/// that is not a `map` list, and the CRD's total estimated cost.
pub fn check_schema(schema: &Schema, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut costs: Vec<(String, f64)> = Vec::new();
    check_node(schema, path, None, &mut causes, &mut costs);
    let total: f64 = costs.iter().map(|(_, c)| *c).sum();
    if total > STATIC_CRD_COST_LIMIT {
        let mut expensive: Vec<&(String, f64)> = costs
            .iter()
            .filter(|(_, c)| *c >= STATIC_CRD_COST_LIMIT / 100.0)
            .collect();
        expensive.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (at, _) in expensive.into_iter().take(4) {
            causes.push(Cause {
                reason: "FieldValueForbidden",
                field: at.clone(),
                message: "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema".into(),
            });
        }
        causes.push(Cause {
            reason: "FieldValueForbidden",
            field: path.to_string(),
            message: format!(
                "Forbidden: {}",
                cost_message(
                    "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                    total,
                    STATIC_CRD_COST_LIMIT
                )
            ),
        });
    }
    causes
}

fn check_node(
    schema: &Schema,
    path: &str,
    uncorrelatable: Option<&str>,
    causes: &mut Vec<Cause>,
    costs: &mut Vec<(String, f64)>,
) {
    if let Some(additional) = schema.additional() {
        let at = format!("{path}.additionalProperties");
        check_node(additional, &at, uncorrelatable, causes, costs);
    }
    for (name, child) in schema.properties() {
        let at = format!("{path}.properties[{name}]");
        check_node(child, &at, uncorrelatable, causes, costs);
    }
    if let Some(items) = schema.items() {
        let at = format!("{path}.items");
        let below = if uncorrelatable.is_some() || schema.list_type.as_deref() == Some("map") {
            uncorrelatable.map(str::to_string)
        } else {
            Some(path.to_string())
        };
        check_node(items, &at, below.as_deref(), causes, costs);
    }
    for (i, rule) in schema.rules.iter().enumerate() {
        let at = |field: &str| format!("{path}.x-kubernetes-validations[{i}].{field}");
        for problem in &rule.problems {
            causes.push(Cause {
                reason: problem.reason,
                field: at(problem.field),
                message: problem.message.clone(),
            });
        }
        if rule.cost > 0.0 {
            costs.push((at("rule"), rule.cost));
        }
        if rule.message_cost > 0.0 {
            costs.push((at("messageExpression"), rule.message_cost));
        }
        if let (Some(compiled), Some(within)) = (&rule.compiled, uncorrelatable) {
            if compiled.uses_old_self {
                causes.push(Cause {
                    reason: "FieldValueInvalid",
                    field: at("rule"),
                    message: format!(
                        "Invalid value: {}: oldSelf cannot be used on the uncorrelatable portion of the schema within {within}",
                        go_q(&rule.spec.rule)
                    ),
                });
            }
        }
    }
}

/// True if `schema` or a node below has rules.
pub fn has_rules(schema: &Schema) -> bool {
    !schema.rules.is_empty()
        || schema.properties().values().any(has_rules)
        || schema.additional().is_some_and(has_rules)
        || schema.items().is_some_and(has_rules)
}

// ---------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------

/// A JSON value as CEL sees it at a node of `schema`: numbers of `type: number` are doubles,
/// properties of objects go by their escaped names.
fn to_cel(value: &Value, schema: Option<&Schema>) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => {
            let double = schema.is_some_and(Schema::is_number);
            match (n.as_i64(), n.as_u64()) {
                (Some(i), _) if !double => cel::Value::Int(i),
                (None, Some(u)) if !double => cel::Value::UInt(u),
                _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            }
        }
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => {
            let item_schema = schema.and_then(Schema::items);
            cel::Value::List(Arc::new(
                items.iter().map(|i| to_cel(i, item_schema)).collect(),
            ))
        }
        Value::Object(map) => {
            let mut out: HashMap<Key, cel::Value> = HashMap::with_capacity(map.len());
            for (key, child) in map {
                let (name, child_schema) = match schema {
                    Some(s) if !s.properties().is_empty() => match s.properties().get(key) {
                        Some(child_schema) => match escape(key) {
                            Some(escaped) => (escaped, Some(child_schema)),
                            None => continue,
                        },
                        None => (key.clone(), None),
                    },
                    Some(s) => (key.clone(), s.additional()),
                    None => (key.clone(), None),
                };
                out.insert(Key::String(Arc::new(name)), to_cel(child, child_schema));
            }
            cel::Value::Map(CelMap { map: Arc::new(out) })
        }
    }
}

/// cel-go's words for an evaluation error.
fn eval_error(error: &ExecutionError) -> EvalError {
    match error {
        ExecutionError::NoSuchKey(key) => EvalError::Cel(format!("no such key: {key}")),
        ExecutionError::DivisionByZero(_) => EvalError::Cel("division by zero".into()),
        ExecutionError::RemainderByZero(_) => EvalError::Cel("modulus by zero".into()),
        ExecutionError::Overflow(..) => EvalError::Cel("integer overflow".into()),
        ExecutionError::NoSuchOverload(_) => EvalError::NoSuchOverload,
        ExecutionError::UnsupportedBinaryOperator(..) | ExecutionError::ValuesNotComparable(..) => {
            EvalError::NoSuchOverload
        }
        ExecutionError::IndexOutOfBounds(index) => {
            EvalError::Cel(format!("index out of range: {index:?}"))
        }
        // cel-go converts a string it cannot parse to a duration or timestamp with one message,
        // whatever was wrong with it.
        ExecutionError::FunctionError { function, .. } if function == "duration" => EvalError::Cel(
            "type conversion error from 'string' to 'google.protobuf.Duration'".into(),
        ),
        ExecutionError::FunctionError { function, .. } if function == "timestamp" => {
            EvalError::Cel(
                "type conversion error from 'string' to 'google.protobuf.Timestamp'".into(),
            )
        }
        // cel-go reports a library function's error by its message alone.
        ExecutionError::FunctionError { message, .. } => EvalError::Cel(message.clone()),
        other => EvalError::Cel(other.to_string()),
    }
}

/// What one metered evaluation came to.
struct Ran {
    outcome: Result<cel::Value, EvalError>,
    /// cel-go's actual cost of what was evaluated.
    cost: u64,
    /// Why the meter stopped the evaluation, if it did (the outcome is then meaningless).
    stopped: Option<meter::Stop>,
}

/// Runs the instrumented `expr` with `self` (and `oldSelf`) bound, metered against `limit` until
/// `deadline`. Call it on a big stack ([`validate`] runs its whole walk on one); a panic of the
/// crate becomes an error of the rule.
fn run(
    expr: &cel::IdedExpr,
    this: &cel::Value,
    old: Option<&cel::Value>,
    limit: u64,
    deadline: Instant,
) -> Ran {
    meter::start(limit, deadline);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut context = Context::with_env(env());
        context.add_variable_from_value("self", this.clone());
        if let Some(old) = old {
            context.add_variable_from_value("oldSelf", old.clone());
        }
        cel::Value::resolve(expr, &context).map_err(|e| eval_error(&e))
    }));
    let (cost, stopped) = meter::finish();
    let outcome = match outcome {
        Ok(result) => result,
        Err(_) => Err(EvalError::Internal("the CEL library panicked".into())),
    };
    Ran {
        outcome,
        cost,
        stopped,
    }
}

/// The walk of one write (see the module docs).
struct Walk {
    /// What is left of the write's [`RUNTIME_COST_BUDGET`]; below zero once it ran out.
    budget: i64,
    causes: Vec<Cause>,
    /// When the write's rules must have finished (the last resort behind the cost limits).
    deadline: Instant,
}

/// Why a walk stopped early: the budget ran out.
struct OutOfBudget;

/// Evaluates the rules of `schema` on a (pruned, defaulted, schema-valid) custom object; `old` is
/// the stored object on an update. Returns the causes of the 422, in kube-apiserver's words.
pub fn validate(schema: &Schema, new: &Value, old: Option<&Value>) -> Vec<Cause> {
    if !has_rules(schema) {
        return Vec::new();
    }
    let mut walk = Walk {
        budget: RUNTIME_COST_BUDGET as i64,
        causes: Vec::new(),
        deadline: Instant::now() + EVALUATION_DEADLINE,
    };
    // One thread with a big stack for the whole walk (the crate's evaluator recurses).
    let walked = on_big_stack(|| {
        let _ = walk.node(schema, new, old, None, true);
        walk.causes
    });
    walked.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "CEL rules could not be run");
        vec![Cause {
            reason: "FieldValueInternal",
            field: "<nil>".into(),
            message: format!("Internal error: {e}"),
        }]
    })
}

/// The path of a child field: `spec`, `spec.size`.
fn child(path: Option<&str>, name: &str) -> String {
    match path {
        None | Some("") => name.to_string(),
        Some(p) => format!("{p}.{name}"),
    }
}

/// The path of a list item or map entry: `spec.ports[0]`, `spec.labels[a]`.
fn index(path: Option<&str>, key: &str) -> String {
    format!("{}[{key}]", path.unwrap_or("<nil>"))
}

impl Walk {
    fn node(
        &mut self,
        schema: &Schema,
        value: &Value,
        old: Option<&Value>,
        path: Option<&str>,
        root: bool,
    ) -> Result<(), OutOfBudget> {
        if value.is_null() {
            return Ok(());
        }
        let old = old.filter(|o| !o.is_null());
        if !schema.rules.is_empty() {
            self.rules(schema, value, old, path, root)?;
        }
        match value {
            Value::Object(map) => {
                let correlatable = matches!(
                    schema.map_type.as_deref(),
                    None | Some("granular") | Some("atomic")
                );
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for key in keys {
                    let Some(child_value) = map.get(key) else {
                        continue;
                    };
                    let old_child = old
                        .filter(|_| correlatable)
                        .and_then(|o| o.get(key.as_str()));
                    if let Some(additional) = schema.additional() {
                        let at = index(path, key);
                        self.node(additional, child_value, old_child, Some(&at), false)?;
                    } else if let Some(property) = schema.properties().get(key) {
                        if root && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                            continue;
                        }
                        let at = child(path, key);
                        self.node(property, child_value, old_child, Some(&at), false)?;
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = schema.items() {
                    let keys = &schema.list_map_keys;
                    let map_list = schema.list_type.as_deref() == Some("map") && !keys.is_empty();
                    let old_items = old.and_then(Value::as_array);
                    for (i, item) in items.iter().enumerate() {
                        let old_item = if map_list {
                            old_items.and_then(|olds| {
                                olds.iter()
                                    .find(|o| keys.iter().all(|k| o.get(k) == item.get(k)))
                            })
                        } else {
                            None
                        };
                        let at = index(path, &i.to_string());
                        self.node(item_schema, item, old_item, Some(&at), false)?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn rules(
        &mut self,
        schema: &Schema,
        value: &Value,
        old: Option<&Value>,
        path: Option<&str>,
        root: bool,
    ) -> Result<(), OutOfBudget> {
        // Long: one rule after another in kube-apiserver's order (compile errors, `oldSelf`,
        // the budget, evaluation, the message expression, the field path, the reason), each step
        // reading the walk's budget and causes; split, the steps would pass all of them around.
        let here = path.unwrap_or("<nil>").to_string();
        let type_name = if root { "object" } else { schema.type_name() };
        let invalid_here = |detail: String| Cause {
            reason: "FieldValueInvalid",
            field: here.clone(),
            message: format!("Invalid value: {}: {detail}", go_q(type_name)),
        };
        let this = to_cel(value, Some(schema));
        let old_cel = old.map(|o| to_cel(o, Some(schema)));
        for rule in &schema.rules {
            let Some(compiled) = rule.compiled.as_deref() else {
                let problems: Vec<String> =
                    rule.problems.iter().map(|p| p.message.clone()).collect();
                self.causes.push(invalid_here(format!(
                    "rule compile error: {}",
                    problems.join("; ")
                )));
                continue;
            };
            if compiled.uses_old_self && old.is_none() {
                continue;
            }
            if self.budget <= 0 {
                self.causes.push(invalid_here(
                    "validation failed due to running out of cost budget, no further validation rules will be run".into(),
                ));
                return Err(OutOfBudget);
            }
            let shown_rule = rule_text(&rule.spec);
            let old_for_rule = if compiled.uses_old_self {
                old_cel.as_ref()
            } else {
                None
            };
            let ran = run(
                &compiled.metered,
                &this,
                old_for_rule,
                PER_CALL_LIMIT as u64,
                self.deadline,
            );
            if ran.cost > self.budget as u64 {
                self.causes.push(invalid_here(
                    "validation failed due to running out of cost budget, no further validation rules will be run".into(),
                ));
                return Err(OutOfBudget);
            }
            self.budget -= ran.cost as i64;
            match ran.stopped {
                Some(meter::Stop::CostLimit) => {
                    self.causes.push(invalid_here(format!(
                        "'{}': no further validation rules will be run due to call cost exceeds limit for rule: {shown_rule}",
                        meter::COST_LIMIT_EXCEEDED
                    )));
                    return Err(OutOfBudget);
                }
                Some(meter::Stop::Deadline) => {
                    tracing::warn!(rule = %rule.spec.rule, "CEL rule interrupted by the deadline");
                    self.causes.push(invalid_here(format!(
                        "{} evaluating rule: {shown_rule}",
                        meter::INTERRUPTED
                    )));
                    return Err(OutOfBudget);
                }
                None => {}
            }
            match ran.outcome {
                Ok(cel::Value::Bool(true)) => continue,
                Ok(_) => {}
                Err(EvalError::NoSuchOverload) => {
                    self.causes.push(invalid_here(format!(
                        "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {shown_rule}"
                    )));
                    continue;
                }
                Err(e) => {
                    tracing::debug!(rule = %rule.spec.rule, error = %e, "CEL rule failed to evaluate");
                    self.causes
                        .push(invalid_here(format!("{e} evaluating rule: {shown_rule}")));
                    continue;
                }
            }
            // Ratcheting: an unchanged value is not refused again by a rule without oldSelf.
            if !compiled.uses_old_self && old == Some(value) {
                tracing::debug!(rule = %rule.spec.rule, "unchanged value fails a rule; ratcheted");
                continue;
            }
            let at = match &compiled.field_path {
                Some(extra) if extra.starts_with('[') => {
                    format!("{}{extra}", path.unwrap_or("<nil>"))
                }
                Some(extra) => child(path, extra),
                None => here.clone(),
            };
            let mut detail = None;
            if let (Some(message), Some(source)) = (
                &compiled.message_metered,
                rule.spec.message_expression.as_deref(),
            ) {
                let ran = run(
                    message,
                    &this,
                    old_for_rule,
                    PER_CALL_LIMIT as u64,
                    self.deadline,
                );
                let invalid_at = |detail: String| Cause {
                    reason: "FieldValueInvalid",
                    field: at.clone(),
                    message: format!("Invalid value: {}: {detail}", go_q(type_name)),
                };
                if ran.cost > self.budget as u64 {
                    self.causes.push(invalid_at("messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run".into()));
                    return Err(OutOfBudget);
                }
                if ran.stopped.is_some() {
                    self.causes.push(invalid_at(format!(
                        "no further validation rules will be run due to call cost exceeds limit for messageExpression: {}",
                        go_q(source)
                    )));
                    return Err(OutOfBudget);
                }
                self.budget -= ran.cost as i64;
                match ran.outcome {
                    Ok(cel::Value::String(text)) => {
                        let text = text.trim();
                        if !text.is_empty() && !text.contains('\n') && text.len() <= 5 * 1024 {
                            detail = Some(text.to_string());
                        }
                    }
                    Ok(_) | Err(_) => {
                        tracing::debug!(rule = %rule.spec.rule, "messageExpression gave no message");
                    }
                }
            }
            let detail = detail.unwrap_or_else(|| match rule.spec.message.as_deref() {
                Some(m) if !m.trim().is_empty() => m.trim().to_string(),
                _ => format!("failed rule: {shown_rule}"),
            });
            let shown_value = if root || schema.is_object() || schema.is_array() {
                None
            } else {
                Some(go_value(value))
            };
            let cause = match rule.spec.reason.as_deref() {
                Some("FieldValueForbidden") => Cause {
                    reason: "FieldValueForbidden",
                    field: at,
                    message: format!("Forbidden: {detail}"),
                },
                Some("FieldValueRequired") => Cause {
                    reason: "FieldValueRequired",
                    field: at,
                    message: format!("Required value: {detail}"),
                },
                Some("FieldValueDuplicate") => Cause {
                    reason: "FieldValueDuplicate",
                    field: at,
                    message: match shown_value {
                        Some(v) => format!("Duplicate value: {v}"),
                        None => "Duplicate value".into(),
                    },
                },
                _ => Cause {
                    reason: "FieldValueInvalid",
                    field: at,
                    message: match shown_value {
                        Some(v) => format!("Invalid value: {v}: {detail}"),
                        None => format!("Invalid value: {detail}"),
                    },
                },
            };
            self.causes.push(cause);
        }
        Ok(())
    }
}

/// The rule as failures quote it: its message if it has one, else its expression (trimmed).
fn rule_text(spec: &RuleSpec) -> String {
    match spec.message.as_deref() {
        Some(m) if !m.trim().is_empty() => m.trim().to_string(),
        _ => spec.rule.trim().to_string(),
    }
}

/// A scalar as Go's field errors print it: strings quoted, numbers and booleans bare.
fn go_value(value: &Value) -> String {
    match value {
        Value::String(s) => go_q(s),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => n.to_string(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(raw: Value) -> Schema {
        compiled(Schema::root(&raw, "s").unwrap_or_else(|e| panic!("{e}")))
    }

    #[test]
    fn the_standard_functions_and_macros_run() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.a.startsWith('a') && self.a.endsWith('c') && self.a.contains('b') && self.a.matches('^a.c$') && size(self.a) == 3 && self.l.all(x, x > 0) && self.l.exists(x, x == 2) && self.l.exists_one(x, x == 3) && self.l.map(x, x * 2).filter(x, x > 2).size() == 2 && has(self.a) && !has(self.b)"}],
            "properties": {"a": {"type": "string", "maxLength": 10}, "b": {"type": "string"},
                "l": {"type": "array", "maxItems": 10, "items": {"type": "integer"}}}}}}),
        );
        let causes = check_schema(&s, "s");
        assert!(causes.is_empty(), "{causes:?}");
        let ok = json!({"spec": {"a": "abc", "l": [1, 2, 3]}});
        assert_eq!(validate(&s, &ok, None), vec![]);
        let bad = json!({"spec": {"a": "abd", "l": [1, 2, 3]}});
        assert_eq!(validate(&s, &bad, None).len(), 1);
    }

    #[test]
    fn a_long_left_deep_chain_is_checked_estimated_and_run_off_the_callers_stack() {
        // 248 additions, the longest chain kube-apiserver 1.37.2 compiles: as deep as it is long,
        // compiled and run from a thread with a small stack. (Not shown to fail without the
        // big-stack checker.)
        let rule = format!("self.n{} > 0", " + 1".repeat(248));
        let raw = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": rule}],
            "properties": {"n": {"type": "integer"}}}}});
        let small = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let s = schema(raw);
                let causes = check_schema(&s, "s");
                let ok = validate(&s, &json!({"spec": {"n": 1}}), None);
                (causes, ok)
            })
            .expect("thread");
        let (causes, ok) = small.join().expect("no overflow");
        assert!(causes.is_empty(), "{causes:?}");
        assert_eq!(ok, vec![]);
    }

    #[test]
    fn a_chain_deeper_than_kube_apiservers_parser_allows_is_refused_not_run() {
        let compile = |rule: String| {
            let s = schema(
                json!({"type": "object", "properties": {"n": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": rule}]}),
            );
            check_schema(&s, "s")
        };
        // kube-apiserver 1.37.2: 248 `+ 1` compile, 249 do not. 990 (within the operator limit)
        // overflowed the 64 MiB `cel` thread when an object was validated, aborting the server.
        assert!(compile(format!("self.n{} > 0", " + 1".repeat(248))).is_empty());
        for n in [249, 990] {
            let causes = compile(format!("self.n{} > 0", " + 1".repeat(n)));
            assert_eq!(causes.len(), 1, "{n}: {causes:?}");
            assert!(
                causes[0].message.ends_with(
                    "compilation failed: ERROR: <input>:-1:0: max recursion depth exceeded"
                ),
                "{n}: {}",
                causes[0].message
            );
        }
        // A chain of `&&` is a balanced tree for cel-go (300 compile on kube-apiserver 1.37.2).
        assert!(compile(vec!["true"; 300].join(" && ")).is_empty());
    }

    #[test]
    fn compile_errors_of_a_hostile_rule_are_bounded_abuse_fidelity() {
        // kube-apiserver 1.37.2 answered this 16 KiB rule of 1,000 undeclared names (measured
        // with kubectl) with cel-go's bounded report: 100 issues, each quoting the whole line and
        // a caret under the name, then `900 more errors were truncated` (1.7 MB). Before, this
        // server refused the rule for its operators; without the bound it would write 1,000
        // issues (32 MB, twice in the Status).
        let names: Vec<String> = (0..1000).map(|i| format!("u{i:011}")).collect();
        let rule = names.join(" && ");
        assert!(rule.len() > 15 * 1024 && rule.len() <= 16 * 1024);
        let s = schema(json!({"type": "object", "x-kubernetes-validations": [{"rule": rule}]}));
        let causes = check_schema(&s, "s");
        assert_eq!(causes.len(), 1, "{causes:?}");
        let message = &causes[0].message;
        assert_eq!(message.matches("ERROR: <input>:1:").count(), MAX_ISSUES);
        assert!(message.ends_with("^\n900 more errors were truncated"));
        let first = format!(
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'u00000000000' (in container '')\n | {rule}\n | ^\nERROR: <input>:1:17: undeclared reference to 'u00000000001' (in container '')\n | {rule}\n | ................^\n"
        );
        assert!(message.contains(&first));
        assert!(message.len() < 2 * 1024 * 1024, "{}", message.len());
        // A line longer than cel-go's snippet limit is not quoted at all.
        let long = vec!["u0"; 6000].join(" && ");
        let s = schema(json!({"type": "object", "x-kubernetes-validations": [{"rule": long}]}));
        let causes = check_schema(&s, "s");
        let message = &causes[0].message;
        assert!(
            message.contains("(in container '')\nERROR: <input>:1:7: undeclared reference to 'u0'")
        );
        assert!(message.ends_with("5900 more errors were truncated"));
        // The rule itself, quoted once in the Invalid value (`&` as `\u0026`), and 101 short lines.
        assert!(!message.contains("\n | u0 "));
        assert!(message.len() < 110 * 1024, "{}", message.len());
    }

    #[test]
    fn deep_rules_within_the_size_limit_are_refused_without_overflow_abuse() {
        let n = MAX_CODE_POINTS / 2 - 10;
        for rule in [
            format!("1{} == 0", "+1".repeat(n)),
            format!("a{} == 0", ".b".repeat(n)),
            format!("a{} == 0", "[0]".repeat(n * 2 / 3)),
            format!("{}1", "true?1:".repeat(n * 2 / 7)),
            format!("a{} == 0", ".f()".repeat(n / 2)),
        ] {
            let head: String = rule.chars().take(12).collect();
            let s = schema(json!({"type": "object", "x-kubernetes-validations": [{"rule": rule}]}));
            let causes = check_schema(&s, "s");
            assert_eq!(causes.len(), 1, "{head}: {causes:?}");
            // (A chain of `?:` nests expressions: cel-go's recursion limit.)
            assert!(
                causes[0].message.ends_with("max recursion depth exceeded")
                    || causes[0]
                        .message
                        .ends_with("expression recursion limit exceeded: 250"),
                "{head}: {}",
                causes[0].message
            );
        }
        // Unary operators fold (cel-go and the crate alike): compiled, whatever their number.
        for rule in [
            format!("{}true", "!".repeat(n)),
            format!("{}1 < 0", "-".repeat(n)),
        ] {
            let s = schema(json!({"type": "object", "x-kubernetes-validations": [{"rule": rule}]}));
            assert_eq!(check_schema(&s, "s").len(), 0);
        }
    }

    #[test]
    fn nested_brackets_as_deep_as_kube_apiserver_takes_compile_fidelity() {
        // kube-apiserver 1.37.2 (kubectl): 249 nested parentheses compile, 250 are refused with
        // cel-go's `expression recursion limit exceeded: 250`.
        let nested = |n: usize, open: &str, close: &str| {
            format!("{}1{} == 1", open.repeat(n), close.repeat(n))
        };
        for rule in [
            nested(249, "(", ")"),
            nested(240, "int(", ")"),
            format!("size({}1{}) == 1", "[".repeat(240), "]".repeat(240)),
        ] {
            let head: String = rule.chars().take(12).collect();
            let s = schema(json!({"type": "object", "x-kubernetes-validations": [{"rule": rule}]}));
            assert_eq!(check_schema(&s, "s"), vec![], "{head}");
            assert_eq!(validate(&s, &json!({}), None), vec![], "{head}");
        }
        for rule in [
            nested(250, "(", ")"),
            nested(400, "int(", ")"),
            format!("{}1{}", "true ? (".repeat(300), ") : 0".repeat(300)),
        ] {
            let head: String = rule.chars().take(12).collect();
            let s = schema(json!({"type": "object", "x-kubernetes-validations": [{"rule": rule}]}));
            let causes = check_schema(&s, "s");
            assert_eq!(causes.len(), 1, "{head}");
            assert!(
                causes[0]
                    .message
                    .ends_with("compilation failed: ERROR: <input>:-1:0: expression recursion limit exceeded: 250"),
                "{head}: {}",
                causes[0].message
            );
        }
    }

    #[test]
    fn long_and_chains_compile_and_run_as_on_kube_apiserver_fidelity() {
        // cel-go parses `&&` chains into balanced trees: kube-apiserver 1.37.2 compiles them up
        // to its 100,000 code point limit. 7,000 operands (about 98 KB) here, run off a small
        // caller's stack.
        let chain = |n: usize| vec!["self.n > 0"; n].join(" && ");
        let rule = chain(7000);
        assert!(rule.len() < MAX_CODE_POINTS);
        let raw = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": rule}],
            "properties": {"n": {"type": "integer"}}}}});
        let small = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let s = schema(raw);
                let causes = check_schema(&s, "s");
                let ok = validate(&s, &json!({"spec": {"n": 1}}), None);
                let bad = validate(&s, &json!({"spec": {"n": 0}}), None);
                (causes, ok, bad)
            })
            .expect("thread");
        let (causes, ok, bad) = small.join().expect("no overflow");
        assert!(causes.is_empty(), "{causes:?}");
        assert_eq!(ok, vec![]);
        assert_eq!(bad.len(), 1);
    }

    #[test]
    fn the_bundles_library_functions_compile_and_run() {
        let rules = [
            "!(duration(self.d) < duration('1s') || duration(self.d) > duration('1h'))",
            "self.hosts.all(h, !isIP(h))",
            "size(self.name) == 0 || format.dns1123Label().validate(self.name) == null",
            "size(self.name) == 0 || !format.dns1123Label().validate(self.name).hasValue() || self.name == 'Bad'",
        ];
        let rules: Vec<Value> = rules.iter().map(|r| json!({"rule": r})).collect();
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": rules,
            "properties": {"d": {"type": "string", "maxLength": 10},
                "name": {"type": "string", "maxLength": 63},
                "hosts": {"type": "array", "maxItems": 4,
                    "items": {"type": "string", "maxLength": 253}}}}}}),
        );
        let causes = check_schema(&s, "s");
        assert!(causes.is_empty(), "{causes:?}");
        let messages = |spec: Value| -> Vec<String> {
            validate(&s, &json!({ "spec": spec }), None)
                .into_iter()
                .map(|c| c.message)
                .collect()
        };
        // An empty name passes the third rule; an IP among the hosts fails the second; a valid
        // name fails the third (an optional is never null in cel-go), an invalid one the fourth
        // unless it is 'Bad'.
        let ok = messages(json!({"d": "90s", "name": "", "hosts": ["example.com"]}));
        assert_eq!(ok, Vec::<String>::new());
        let failed = messages(json!({"d": "2h", "name": "my-name", "hosts": ["10.0.0.1"]}));
        assert_eq!(failed.len(), 3, "{failed:?}");
        let failed = messages(json!({"d": "1s", "name": "Bad", "hosts": ["::ffff:1.2.3.4"]}));
        assert_eq!(failed.len(), 1, "{failed:?}");
    }

    #[test]
    fn undefined_fields_and_names_are_refused_like_cel_go() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.foo > 1"}, {"rule": "bar == 1"},
                {"rule": "self.a >"}, {"rule": "self.a"}],
            "properties": {"a": {"type": "string"}}}}}),
        );
        let messages: Vec<String> = check_schema(&s, "s")
            .into_iter()
            .map(|c| c.message)
            .collect();
        assert!(messages[0].ends_with("compilation failed: ERROR: <input>:1:5: undefined field 'foo'\n | self.foo > 1\n | ....^"), "{}", messages[0]);
        assert!(messages[1].ends_with("ERROR: <input>:1:1: undeclared reference to 'bar' (in container '')\n | bar == 1\n | ^"), "{}", messages[1]);
        assert!(
            messages[2].contains("Syntax error: mismatched input '<EOF>'"),
            "{}",
            messages[2]
        );
        assert!(
            messages[3].ends_with("cel expression must evaluate to a bool"),
            "{}",
            messages[3]
        );
    }

    #[test]
    fn hostile_rules_are_refused_not_run() {
        for rule in [
            format!("{}1{} == 1", "(".repeat(300), ")".repeat(300)),
            vec!["1"; 5000].join(" + ") + " > 0",
            "x".repeat(MAX_CODE_POINTS + 1),
            // A raw string's backslash escapes nothing: the brackets after it are counted.
            format!(
                "r'\\' == '' || {}1{} == 1",
                "(".repeat(300),
                ")".repeat(300)
            ),
        ] {
            let s = schema(json!({"type": "object", "x-kubernetes-validations": [{"rule": rule}]}));
            let causes = check_schema(&s, "s");
            assert_eq!(causes.len(), 1, "{causes:?}");
            let message = &causes[0].message;
            assert!(
                message.ends_with("expression recursion limit exceeded: 250")
                    || message.ends_with("max recursion depth exceeded")
                    || message.ends_with(
                        "expression code point size exceeds limit: size: 100001, limit 100000"
                    ),
                "{message}"
            );
        }
        // Quadratic over unbounded lists: refused by the cost estimate.
        let s = schema(
            json!({"type": "object", "properties": {"l": {"type": "array",
            "items": {"type": "string"}}},
            "x-kubernetes-validations": [{"rule": "self.l.all(x, self.l.all(y, x == y))"}]}),
        );
        let causes = check_schema(&s, "s");
        assert!(causes[0].message.contains("more than 100x"), "{causes:?}");
    }

    #[test]
    fn evaluation_is_bounded_by_the_cost_of_the_actual_object() {
        // Quadratic but bounded: accepted when the CRD is written (800 items at most)...
        let s = schema(
            json!({"type": "object", "properties": {"l": {"type": "array",
            "maxItems": 800, "items": {"type": "integer"}}},
            "x-kubernetes-validations": [{"rule": "self.l.all(x, self.l.all(y, x <= y || x > y))"}]}),
        );
        assert!(check_schema(&s, "s").is_empty());
        // ...cheap on a small object...
        assert!(validate(&s, &json!({"l": [1, 2, 3]}), None).is_empty());
        // ...and stopped by the per-call limit when the object makes it expensive.
        let big: Vec<i64> = (0..800).collect();
        let causes = validate(&s, &json!({"l": big}), None);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert!(
            causes[0].message.contains("call cost exceeds limit"),
            "{}",
            causes[0].message
        );
    }

    /// Runs `work` on a thread of its own and fails the test if it takes more than 120 s (a rule
    /// that is not stopped would run for hours, or exhaust the memory).
    fn within_120s<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
        within(Duration::from_secs(120), work)
    }

    /// Runs `work` on a thread of its own and fails the test if it takes more than `limit`.
    fn within<T: Send + 'static>(limit: Duration, work: impl FnOnce() -> T + Send + 'static) -> T {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .stack_size(STACK_BYTES)
            .spawn(move || {
                let _ = sender.send(work());
            })
            .unwrap_or_else(|e| panic!("{e}"));
        receiver
            .recv_timeout(limit)
            .unwrap_or_else(|_| panic!("the evaluation did not end within {limit:?}"))
    }

    /// `rule` parsed, instrumented and run on `this` under the per-call limit.
    fn metered(rule: &str, this: Value) -> Ran {
        let program = parse(rule).unwrap_or_else(|e| panic!("{e}"));
        let expr = meter::instrument(program.expression());
        let this = to_cel(&this, None);
        let deadline = Instant::now() + EVALUATION_DEADLINE;
        run(&expr, &this, None, PER_CALL_LIMIT as u64, deadline)
    }

    #[test]
    fn a_replace_that_grows_its_string_is_stopped_before_it_allocates() {
        let thousand = "a".repeat(1000);
        let rule = format!(
            "'a'{}.size() > 0",
            format!(".replace('a', '{thousand}')").repeat(4)
        );
        let ran = within_120s(move || metered(&rule, json!({})));
        assert_eq!(
            ran.stopped,
            Some(meter::Stop::CostLimit),
            "{:?}",
            ran.outcome
        );
        // Two replaces (10^6 bytes) fit: 100 + 100,000 and the rest.
        let rule = format!(
            "'a'{}.size() > 0",
            format!(".replace('a', '{}')", "a".repeat(1000)).repeat(2)
        );
        let ran = within_120s(move || metered(&rule, json!({})));
        assert_eq!(ran.outcome, Ok(cel::Value::Bool(true)));
    }

    #[test]
    fn string_searches_are_linear_as_kube_apiserver_charges_them() {
        // A needle that almost matches everywhere: comparing it at every position (the `cel`
        // crate's search) is 2·10^12 character comparisons (minutes even as memcmp: 19 s for a
        // quarter of this on the machine it was written on); a linear search takes milliseconds.
        let text = "a".repeat(2_000_000);
        let needle = format!("{}b", "a".repeat(1_000_000));
        let this = json!({"s": text, "t": needle});
        let ran = within(Duration::from_secs(30), move || {
            metered(
                "self.s.indexOf(self.t) == -1 && self.s.lastIndexOf(self.t) == -1 \
                 && self.s.indexOf('aa', 1999998) == 1999998 && self.s.lastIndexOf('a', 5) == 5 \
                 && 'héllo wörld'.indexOf('wö') == 6 && 'héllo wörld'.lastIndexOf('l', 8) == 3 \
                 && 'abc'.lastIndexOf('abcd') == -1 && [1, 2, 1].lastIndexOf(1) == 2",
                this,
            )
        });
        assert_eq!(ran.outcome, Ok(cel::Value::Bool(true)));
    }

    #[test]
    fn nested_loops_over_a_split_string_are_stopped_by_the_per_call_limit() {
        let long = "x".repeat(100_000);
        let ran = within_120s(move || {
            metered(
                "self.s.split('').all(x, self.s.split('').all(y, x == y))",
                json!({"s": long}),
            )
        });
        assert_eq!(ran.stopped, Some(meter::Stop::CostLimit));
        assert!(ran.cost > PER_CALL_LIMIT as u64, "{}", ran.cost);
    }

    #[test]
    fn the_meter_charges_what_cel_go_charges() {
        // self (1) .l (1) @result (1); per item: @not_strictly_false(@result) (2), @result (1),
        // x (1), > (1).
        let ran = metered("self.l.all(x, x > 0)", json!({"l": [1, 2, 3]}));
        assert_eq!((ran.outcome, ran.cost), (Ok(cel::Value::Bool(true)), 18));
        // self .s (2), size (1), == of ints (1); a string comparison costs a tenth of the shorter.
        let ran = metered("size(self.s) == 3 && self.s == 'abc'", json!({"s": "abc"}));
        assert_eq!((ran.outcome, ran.cost), (Ok(cel::Value::Bool(true)), 7));
        // A list literal costs 10.
        let ran = metered("[1, 2].size() == 2", json!({}));
        assert_eq!(ran.cost, 12);
    }

    #[test]
    fn a_write_whose_rules_run_out_of_budget_is_refused_with_kube_apiservers_words() {
        // Each rule costs about 90,000 (a tenth of the string it reads): the 10^7 budget lasts
        // about 110 of them.
        let rules: Vec<Value> = (0..120)
            .map(|i| json!({"rule": format!("!self.s.contains('b{i}')")}))
            .collect();
        let s = schema(
            json!({"type": "object", "properties": {"s": {"type": "string",
            "maxLength": 900000}}, "x-kubernetes-validations": rules}),
        );
        let causes = check_schema(&s, "s");
        assert!(causes.is_empty(), "{causes:?}");
        let long = "a".repeat(900_000);
        let causes = within_120s(move || validate(&s, &json!({"s": long}), None));
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert!(
            causes[0].message.ends_with("validation failed due to running out of cost budget, no further validation rules will be run"),
            "{}",
            causes[0].message
        );
    }

    #[test]
    fn transition_rules_run_only_with_an_old_value() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.n == oldSelf.n", "message": "immutable"}],
            "properties": {"n": {"type": "integer"}}}}}),
        );
        let new = json!({"spec": {"n": 2}});
        assert!(validate(&s, &new, None).is_empty());
        assert!(validate(&s, &new, Some(&json!({"spec": {"n": 2}}))).is_empty());
        let causes = validate(&s, &new, Some(&json!({"spec": {"n": 1}})));
        assert_eq!(causes[0].message, "Invalid value: immutable");
        assert_eq!(causes[0].field, "spec");
    }
}
