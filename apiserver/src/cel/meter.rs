//! Runtime cost metering: the work a rule actually does, charged as kube-apiserver charges it, and
//! evaluation stopped when the rule's limit (or the write's budget) is spent.
//!
//! # Why
//!
//! kube-apiserver runs every rule with cel-go's cost tracker: each step of the evaluation adds to
//! the rule's cost (1 for a variable or a field, 10 for a list literal, a size-dependent figure for
//! string and list functions), and the evaluation is cancelled with `operation cancelled: actual
//! cost limit exceeded` as soon as the cost passes the per-call limit (`PerCallLimit`, 10^6). What
//! a rule did is then charged to the write's budget (`RuntimeCELCostBudget`, 10^7). The static
//! estimate made when the CRD is written is only a first filter; the runtime meter is what keeps a
//! rule that grows its own values (`'a'.replace('a', 'aaa…')` four times) or nests loops over
//! strings it builds (`s.split('').all(…)` in a loop) from running for hours or allocating 10^12
//! bytes.
//!
//! # How: instrumenting the expression, not patching the crate
//!
//! The `cel` crate's evaluator cannot be interrupted: it has no step hook, no cost tracker and no
//! cancellation. Two ways were open: write an evaluator of our own (a second copy of CEL's
//! semantics to keep right), or rewrite the expression so that the crate's evaluator calls back
//! into this module as it goes. This module does the second: [`instrument`] copies the checked
//! expression, wrapping nodes in calls of functions registered by [`extension`] (names starting
//! with `@`, which no rule can write):
//!
//! ```text
//!   self.a.size() > 2        ──►   @post(GT, @mark(),
//!                                       @arg(@cost(1, @cost(1, self).a).size()…), @arg(2)))
//!   variable or field x      ──►   @cost(1, x)            cel-go: SelectAndIdentCost
//!   [a, b] / {k: v}          ──►   @cost(10, [a, b])      ListCreateBaseCost / MapCreateBaseCost
//!   f(a, b) of fixed cost    ──►   @cost(1, f(a, b))
//!   f(a, b) sized            ──►   @post(F, @mark(), f(@arg(a), @arg(b)))
//!   s.replace(x, y)          ──►   @replace(s, x, y)      ours: charged before it allocates
//! ```
//!
//! `@arg` pushes the size of the value it passes through on a stack in [`Meter`]; `@post` pops what
//! was pushed since its `@mark` and charges cel-go's (or Kubernetes' `CallCost`) figure for the
//! function, from the sizes of its arguments and of its result. `&&`, `||` and `?:` cost nothing
//! themselves, as in cel-go. Comprehensions keep the shapes the crate recognises (`@result && x`,
//! `@result + [x]`: it appends in place rather than copying, and defers errors like cel-go), with
//! the accumulator's cost charged by a wrapper next to it.
//!
//! Every charge goes to the thread's [`Meter`] (evaluation runs on one thread, see
//! `super::on_big_stack`). Once the limit is passed, the charge fails, and so does every later
//! one, so the evaluation unwinds within a few steps even through `&&` or `all()`, which absorb
//! some errors; [`finish`] then reports the stop, whatever value came out. A wall-clock deadline
//! is the last resort: the meter checks it every [`CLOCK_EVERY`] charges.
//!
//! # Where the figures differ from kube-apiserver's
//!
//! Functions that produce more than they read (`replace`, `lists.range`) and the O(n²) ones
//! (`distinct`, `sort`) are charged *before* they run, from their arguments: cel-go charges them
//! after, which in Go is merely slow; here it would be the server's memory. `replace` is charged
//! the larger of Kubernetes' figure and a tenth of the bytes it would produce, so only a rule
//! whose output outgrows its input pays more than on kube-apiserver. Identifiers that are not
//! variables (type names, namespaces) are not charged.

use std::cell::RefCell;
use std::time::Instant;

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr};
use cel::common::types::{
    CelInt, CelList, CelString, DYN_TYPE, INT_TYPE, Kind, LIST_TYPE, STRING_TYPE,
};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// How many charges pass between two looks at the clock.
pub const CLOCK_EVERY: u32 = 1024;

/// cel-go's factor for reading a string (`StringTraversalCostFactor`).
const TRAVERSAL: f64 = 0.1;
/// cel-go's factor for the length of a regular expression (`RegexStringLengthCostFactor`).
const REGEX: f64 = 0.25;
/// cel-go's cost of building a list (`ListCreateBaseCost`).
const LIST_CREATE: u64 = 10;
/// cel-go's cost of building a map (`MapCreateBaseCost`).
const MAP_CREATE: u64 = 30;

/// kube-apiserver's error text when the per-call limit is passed.
pub const COST_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";
/// cel-go's error text when an evaluation is interrupted (here: by the deadline).
pub const INTERRUPTED: &str = "operation interrupted";

/// Why an evaluation was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The rule's cost passed its limit.
    CostLimit,
    /// The wall-clock deadline passed.
    Deadline,
}

/// What one argument of a sized call was, as `@arg` saw it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    /// cel-go's `actualSize`: characters of a string, bytes, items, entries; 1 otherwise.
    size: u64,
    /// Kubernetes' `traversalCost` (only when the function needs it, else 0).
    traversal: u64,
    kind: Kind,
    /// For a list: whether its first element is a string or bytes (cel-go's sort and distinct).
    stringy_items: bool,
    /// Recorded by `@pre`: the call was charged before it ran.
    precharged: bool,
}

/// The meter of the evaluation running on this thread.
///
/// Invariants: `spent` only grows during an evaluation; once `stop` is set, every charge fails;
/// `seen` holds the arguments of the sized calls under way (plus leftovers of calls whose
/// arguments failed, dropped by the enclosing `@post`).
struct Meter {
    spent: u64,
    limit: u64,
    deadline: Instant,
    stop: Option<Stop>,
    charges: u32,
    seen: Vec<Seen>,
}

thread_local! {
    static METER: RefCell<Option<Meter>> = const { RefCell::new(None) };
}

/// Starts metering an evaluation on this thread: at most `limit`, until `deadline`.
pub fn start(limit: u64, deadline: Instant) {
    METER.with(|m| {
        *m.borrow_mut() = Some(Meter {
            spent: 0,
            limit,
            deadline,
            stop: None,
            charges: 0,
            seen: Vec::new(),
        });
    });
}

/// Ends the evaluation's metering: its cost, and why it was stopped, if it was.
pub fn finish() -> (u64, Option<Stop>) {
    METER.with(|m| match m.borrow_mut().take() {
        Some(meter) => (meter.spent, meter.stop),
        None => (0, None),
    })
}

fn stop_error(stop: Stop) -> ExecutionError {
    let text = match stop {
        Stop::CostLimit => COST_LIMIT_EXCEEDED,
        Stop::Deadline => INTERRUPTED,
    };
    ExecutionError::function_error("@cost", text)
}

/// Charges `cost` to the running evaluation (nothing when none is metered).
pub fn charge(cost: u64) -> Result<(), ExecutionError> {
    METER.with(|m| {
        let mut guard = m.borrow_mut();
        let Some(meter) = guard.as_mut() else {
            return Ok(());
        };
        if let Some(stop) = meter.stop {
            return Err(stop_error(stop));
        }
        meter.spent = meter.spent.saturating_add(cost);
        if meter.spent > meter.limit {
            meter.stop = Some(Stop::CostLimit);
            return Err(stop_error(Stop::CostLimit));
        }
        meter.charges += 1;
        if meter.charges >= CLOCK_EVERY {
            meter.charges = 0;
            if Instant::now() >= meter.deadline {
                meter.stop = Some(Stop::Deadline);
                return Err(stop_error(Stop::Deadline));
            }
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------------------------

/// cel-go's `actualSize`.
fn size_of(value: &dyn Val) -> u64 {
    if let Some(s) = value.downcast_ref::<CelString>() {
        return s.inner().chars().count() as u64;
    }
    if let Some(size) = super::kubernetes_net::cost_size(value) {
        return size;
    }
    // A named format is read by its regular expression's size (Kubernetes' `MaxRegexSize`).
    if let Some(format) = value.downcast_ref::<super::kubernetes_format::NamedFormat>() {
        return format.max_regex_size();
    }
    match value.as_sizer() {
        Some(sizer) => u64::try_from(*sizer.size().inner()).unwrap_or(0),
        None => 1,
    }
}

/// Kubernetes' `traversalCost`: a tenth of each string's bytes (rounded down), 1 per other scalar.
fn traversal_of(value: &dyn Val) -> u64 {
    if let Some(s) = value.downcast_ref::<CelString>() {
        return (s.inner().len() as f64 * TRAVERSAL) as u64;
    }
    match value.get_type().kind() {
        Kind::Bytes => (size_of(value) as f64 * TRAVERSAL) as u64,
        Kind::List | Kind::Map => {
            let Some(iterable) = value.as_iterable() else {
                return 1;
            };
            let mut total = 0u64;
            let mut items = iterable.iter();
            let is_map = value.get_type().kind() == Kind::Map;
            while let Some(item) = items.next() {
                total = total.saturating_add(traversal_of(item));
                if is_map {
                    if let Some(entry) = value
                        .as_indexer()
                        .and_then(|indexer| indexer.get(item).ok())
                    {
                        total = total.saturating_add(traversal_of(entry.as_ref()));
                    }
                }
            }
            total
        }
        _ => 1,
    }
}

fn seen(value: &dyn Val, traversal: bool) -> Seen {
    let kind = value.get_type().kind();
    let stringy_items = kind == Kind::List
        && value.as_iterable().is_some_and(|i| {
            i.iter()
                .next()
                .is_some_and(|first| matches!(first.get_type().kind(), Kind::String | Kind::Bytes))
        });
    Seen {
        size: size_of(value),
        traversal: if traversal { traversal_of(value) } else { 0 },
        kind,
        stringy_items,
        precharged: false,
    }
}

fn ceil(x: f64) -> u64 {
    x.ceil() as u64
}

// ---------------------------------------------------------------------------------------------
// Call costs
// ---------------------------------------------------------------------------------------------

/// The functions whose cost depends on their arguments (or result): the code `@post` is given is
/// the index here.
const SIZED: [&str; 47] = [
    "indexOf",
    "lastIndexOf",
    "startsWith",
    "endsWith",
    "string",
    "bytes",
    "@in",
    "_<_",
    "_>_",
    "_<=_",
    "_>=_",
    "_==_",
    "_!=_",
    "_+_",
    "matches",
    "contains",
    "format",
    "isSorted",
    "sum",
    "max",
    "min",
    "lowerAscii",
    "upperAscii",
    "substring",
    "trim",
    "split",
    "join",
    "slice",
    "flatten",
    "quantity",
    "isQuantity",
    "isIP",
    "ip",
    "cidr",
    "isCIDR",
    "ip.isCanonical",
    "containsIP",
    "containsCIDR",
    "url",
    "semver",
    "isSemver",
    "find",
    "findAll",
    "sets.contains",
    "sets.intersects",
    "sets.equivalent",
    "validate",
];

/// Sized functions charged before they run (O(n²) or allocating more than they read), from their
/// arguments alone: the code is `SIZED.len() + ` the index here.
const PRECHARGED: [&str; 4] = ["distinct", "sort", "@sortByAssociatedKeys", "reverse"];

/// Whether `@arg` must compute Kubernetes' traversal cost for `function`'s arguments.
fn needs_traversal(function: &str) -> bool {
    matches!(
        function,
        "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf"
    )
}

/// cel-go's cost of a call of `function` (its checker's overloads told apart by argument kinds),
/// with Kubernetes' `CallCost` first, as kube-apiserver's tracker asks it first.
fn call_cost(function: &str, args: &[Seen], result: Option<&Seen>) -> u64 {
    let size = |i: usize| args.get(i).map(|s| s.size).unwrap_or(1);
    let kind = |i: usize| args.get(i).map(|s| s.kind);
    let stringy = |i: usize| matches!(kind(i), Some(Kind::String | Kind::Bytes));
    match function {
        "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" => {
            args.first().map(|s| s.traversal).unwrap_or(0)
        }
        "lowerAscii" | "upperAscii" | "substring" | "trim" => ceil(size(0) as f64 * TRAVERSAL),
        // Kubernetes' parsers: one traversal of their string.
        "quantity" | "isQuantity" | "isIP" | "cidr" | "isCIDR" | "url" | "semver" | "isSemver" => {
            ceil(size(0) as f64 * TRAVERSAL)
        }
        // `ip(s)` parses; `cidr.ip()` reads a field.
        "ip" if stringy(0) => ceil(size(0) as f64 * TRAVERSAL),
        "ip" => 1,
        // `ip.isCanonical(s)`: a parse and a print.
        "ip.isCanonical" => ceil(size(0) as f64 * 2.0 * TRAVERSAL),
        // `format.validate(s)`: a traversal of the string times the format's regex size.
        "validate" => ceil((1.0 + size(1) as f64) * TRAVERSAL) * ceil(size(0) as f64 * REGEX),
        "find" | "findAll" => {
            ceil((1.0 + size(0) as f64) * TRAVERSAL) * ceil(size(1) as f64 * REGEX)
        }
        // cel-go's sets: a call, and the product of the sizes (twice for equivalent).
        "sets.contains" | "sets.intersects" => 1 + size(0).saturating_mul(size(1)),
        "sets.equivalent" => 1 + size(0).saturating_mul(size(1)).saturating_mul(2),
        // Kubernetes reads the prefix twice, the other prefix once more, and parses a string.
        "containsIP" | "containsCIDR" => {
            let mut cost = ceil((size(0) + size(0)) as f64 * TRAVERSAL);
            if function == "containsCIDR" {
                cost += ceil(size(0) as f64 * TRAVERSAL) + 1;
            }
            if stringy(1) {
                cost += ceil(size(1) as f64 * TRAVERSAL);
            }
            cost
        }
        // Kubernetes' own types compare at a cost of 1.
        "_==_" if kind(0) == Some(Kind::Unspecified) => 1,
        "split" => ceil(size(0) as f64 * 2.0 * TRAVERSAL),
        "join" => ceil(result.map(|r| r.size).unwrap_or(0) as f64 * 2.0 * TRAVERSAL),
        "startsWith" | "endsWith" => ceil(size(1) as f64 * TRAVERSAL),
        "string" | "bytes" if stringy(0) => ceil(size(0) as f64 * TRAVERSAL),
        "format" => ceil(size(0) as f64 * TRAVERSAL),
        "@in" if kind(1) == Some(Kind::List) => size(1),
        "_<_" | "_>_" | "_<=_" | "_>=_" if stringy(0) && stringy(1) => {
            ceil(size(0).min(size(1)) as f64 * TRAVERSAL)
        }
        "_==_" | "_!=_" => ceil(size(0).min(size(1)) as f64 * TRAVERSAL),
        "_+_" if stringy(0) && stringy(1) => ceil((size(0) + size(1)) as f64 * TRAVERSAL),
        "matches" => ceil((1.0 + size(0) as f64) * TRAVERSAL) * ceil(size(1) as f64 * REGEX),
        "contains" if stringy(0) => {
            ceil(size(0) as f64 * TRAVERSAL) * ceil(size(1) as f64 * TRAVERSAL)
        }
        // cel-go's lists extension (version 3): the result's size, and a call and a list.
        "slice" => result.map(|r| r.size).unwrap_or(0) + 1 + LIST_CREATE,
        "flatten" => {
            let depth = if args.len() == 2 { 1.max(size(1)) } else { 1 };
            size(0).saturating_mul(depth) + 1 + LIST_CREATE
        }
        _ => 1,
    }
}

/// What the O(n²) and allocating list functions cost, from the list they work on.
fn precharge(function: &str, list: &Seen) -> u64 {
    match function {
        "reverse" => list.size + 1 + LIST_CREATE,
        _ => {
            let factor = if list.stringy_items && list.size > 0 {
                2.0 + TRAVERSAL
            } else {
                2.0
            };
            (list.size.saturating_mul(list.size) as f64 * factor) as u64 + 1 + LIST_CREATE
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The functions the instrumented expression calls
// ---------------------------------------------------------------------------------------------

fn int_arg(function: &str, value: &dyn Val) -> Result<i64, ExecutionError> {
    value
        .downcast_ref::<CelInt>()
        .map(|i| *i.inner())
        .ok_or_else(|| ExecutionError::no_such_overload(function, Vec::new()))
}

fn take<'b, 'v, const N: usize>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
) -> Result<[CowVal<'b, 'v>; N], ExecutionError> {
    args.try_into()
        .map_err(|_| ExecutionError::no_such_overload(function, Vec::new()))
}

/// `@cost(n, x)`: charges `n`, gives `x`.
fn cost<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [n, value] = take::<2>("@cost", args)?;
    charge(u64::try_from(int_arg("@cost", n.as_ref())?).unwrap_or(0))?;
    Ok(value)
}

/// `@mark()`: where the arguments of the next sized call start on the stack.
fn mark<'b, 'v>(_args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let depth = METER.with(|m| m.borrow().as_ref().map(|m| m.seen.len()).unwrap_or(0));
    Ok(CowVal::owned(CelInt::from(depth as i64)))
}

/// `@arg(code, x)`: records `x` for the sized call `code`, gives `x`.
fn arg<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [code, value] = take::<2>("@arg", args)?;
    let function = function_of(int_arg("@arg", code.as_ref())?);
    let record = seen(value.as_ref(), needs_traversal(function));
    METER.with(|m| {
        if let Some(meter) = m.borrow_mut().as_mut() {
            meter.seen.push(record);
        }
    });
    Ok(value)
}

/// `@pre(code, x)`: records `x`, the last argument of the pre-charged call `code`, and charges
/// the call now, before it runs.
fn pre<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [code, value] = take::<2>("@pre", args)?;
    let function = function_of(int_arg("@pre", code.as_ref())?);
    let mut record = seen(value.as_ref(), false);
    record.precharged = true;
    METER.with(|m| {
        if let Some(meter) = m.borrow_mut().as_mut() {
            meter.seen.push(record);
        }
    });
    charge(precharge(function, &record))?;
    Ok(value)
}

/// `@post(code, extra, mark, result)`: charges the sized call `code` whose arguments were
/// recorded since `mark` (unless `@pre` did, for its last argument), and `extra` for the names
/// and fields among its arguments; gives its result.
fn post<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [code, extra, at, result] = take::<4>("@post", args)?;
    let extra = u64::try_from(int_arg("@post", extra.as_ref())?).unwrap_or(0);
    let function = function_of(int_arg("@post", code.as_ref())?);
    let at = usize::try_from(int_arg("@post", at.as_ref())?).unwrap_or(0);
    let recorded = METER.with(|m| match m.borrow_mut().as_mut() {
        Some(meter) => meter.seen.split_off(at.min(meter.seen.len())),
        None => Vec::new(),
    });
    let call = if recorded.last().is_some_and(|s| s.precharged) {
        0
    } else {
        let outcome = seen(result.as_ref(), false);
        call_cost(function, &recorded, Some(&outcome))
    };
    charge(call.saturating_add(extra))?;
    Ok(result)
}

/// `@replace(s, from, to)` and `@replace(s, from, to, n)`: cel-go's `replace`, charged before the
/// new string is built (the larger of Kubernetes' figure and a tenth of the bytes produced).
fn replace<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let overload = || ExecutionError::no_such_overload("replace", Vec::new());
    let text = |v: &CowVal<'b, 'v>| -> Result<String, ExecutionError> {
        v.downcast_ref::<CelString>()
            .map(|s| s.inner().to_string())
            .ok_or_else(overload)
    };
    let (subject, from, to, limit) = match args.len() {
        3 => (text(&args[0])?, text(&args[1])?, text(&args[2])?, -1),
        4 => (
            text(&args[0])?,
            text(&args[1])?,
            text(&args[2])?,
            int_arg("replace", args[3].as_ref())?,
        ),
        _ => return Err(overload()),
    };
    let possible = if from.is_empty() {
        subject.chars().count() + 1
    } else {
        subject.matches(from.as_str()).count()
    };
    let count = match usize::try_from(limit) {
        Ok(n) => possible.min(n),
        Err(_) => possible,
    };
    let produced =
        (subject.len() - count * from.len()).saturating_add(count.saturating_mul(to.len()));
    let kubernetes = ceil(subject.chars().count() as f64 * 2.0 * TRAVERSAL);
    charge(kubernetes.max(ceil(produced as f64 * TRAVERSAL)))?;
    let replaced = if count == possible {
        subject.replace(from.as_str(), &to)
    } else {
        subject.replacen(from.as_str(), &to, count)
    };
    Ok(CowVal::owned(CelString::from(replaced)))
}

/// `@range(n)`: cel-go's `lists.range(n)`, charged (for its `n` items) before it is built.
fn range<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [n] = take::<1>("lists.range", args)?;
    let n = u64::try_from(int_arg("lists.range", n.as_ref())?).unwrap_or(0);
    charge(n + 1 + LIST_CREATE)?;
    let items: Vec<Box<dyn Val + 'v>> = (0..n as i64)
        .map(|i| Box::new(CelInt::from(i)) as Box<dyn Val + 'v>)
        .collect();
    Ok(CowVal::owned(CelList::from(items)))
}

fn function_of(code: i64) -> &'static str {
    let code = usize::try_from(code).unwrap_or(usize::MAX);
    SIZED
        .get(code)
        .or_else(|| PRECHARGED.get(code.wrapping_sub(SIZED.len())))
        .copied()
        .unwrap_or("")
}

/// Registers the functions of instrumented expressions.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("@cost", "meter_cost", vec![INT_TYPE, DYN_TYPE], cost)?;
    env.add_overload("@mark", "meter_mark", vec![], mark)?;
    env.add_overload("@arg", "meter_arg", vec![INT_TYPE, DYN_TYPE], arg)?;
    env.add_overload("@pre", "meter_pre", vec![INT_TYPE, DYN_TYPE], pre)?;
    env.add_overload(
        "@post",
        "meter_post",
        vec![INT_TYPE, INT_TYPE, INT_TYPE, DYN_TYPE],
        post,
    )?;
    env.add_overload(
        "@replace",
        "meter_replace",
        vec![DYN_TYPE, DYN_TYPE, DYN_TYPE],
        replace,
    )?;
    env.add_overload(
        "@replace",
        "meter_replace_n",
        vec![DYN_TYPE, DYN_TYPE, DYN_TYPE, DYN_TYPE],
        replace,
    )?;
    env.add_overload("@range", "meter_range", vec![DYN_TYPE], range)?;
    for (name, string_search, list_search) in [
        (
            "@indexOf",
            index_of as cel::common::functions::Function,
            super::kubernetes_lists::index_of as cel::common::functions::Function,
        ),
        (
            "@lastIndexOf",
            last_index_of,
            super::kubernetes_lists::last_index_of,
        ),
    ] {
        env.add_member_overload(name, name, STRING_TYPE, vec![STRING_TYPE], string_search)?;
        let with_offset = format!("{name}_offset");
        env.add_member_overload(
            name,
            &with_offset,
            STRING_TYPE,
            vec![STRING_TYPE, INT_TYPE],
            string_search,
        )?;
        let on_list = format!("{name}_list");
        env.add_member_overload(name, &on_list, LIST_TYPE, vec![DYN_TYPE], list_search)?;
    }
    Ok(())
}

/// The name an instrumented call uses: our linear string searches for `indexOf` and
/// `lastIndexOf` (the `cel` crate compares the needle at every position, O(n·m), where
/// kube-apiserver charges one traversal), the call's own name otherwise.
fn linear_name(name: &str, namespaced: bool) -> String {
    match name {
        "indexOf" if !namespaced => "@indexOf".into(),
        "lastIndexOf" if !namespaced => "@lastIndexOf".into(),
        other => other.into(),
    }
}

/// The byte offset of the `chars`-th character of `text` (its length when past the end).
fn byte_of(text: &str, chars: usize) -> usize {
    text.char_indices()
        .nth(chars)
        .map(|(i, _)| i)
        .unwrap_or(text.len())
}

/// The receiver, needle and optional code-point offset of a string search.
fn search_args(
    function: &str,
    args: &[CowVal<'_, '_>],
) -> Result<(String, String, Option<i64>), ExecutionError> {
    let overload = || ExecutionError::no_such_overload(function, Vec::new());
    let text = |v: &CowVal<'_, '_>| -> Result<String, ExecutionError> {
        v.downcast_ref::<CelString>()
            .map(|s| s.inner().to_string())
            .ok_or_else(overload)
    };
    match args {
        [s, n] => Ok((text(s)?, text(n)?, None)),
        [s, n, o] => Ok((text(s)?, text(n)?, Some(int_arg(function, o.as_ref())?))),
        _ => Err(overload()),
    }
}

/// cel-go's `string.indexOf(needle[, offset])` in code points, by the standard library's linear
/// substring search (a match of valid UTF-8 always starts on a character boundary, so searching
/// bytes and counting the characters before the match gives the code-point index).
fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (text, needle, offset) = search_args("indexOf", &args)?;
    let chars = text.chars().count();
    let start = match offset {
        None => 0,
        Some(o) if o < 0 => return Err(out_of_range("indexOf", o)),
        Some(o) if needle.is_empty() => {
            return Ok(CowVal::owned(CelInt::from(o.min(chars as i64))));
        }
        Some(o) if o >= chars as i64 => return Err(out_of_range("indexOf", o)),
        Some(o) => o as usize,
    };
    let from = byte_of(&text, start);
    let found = text[from..]
        .find(needle.as_str())
        .map(|i| (start + text[from..from + i].chars().count()) as i64);
    Ok(CowVal::owned(CelInt::from(found.unwrap_or(-1))))
}

/// cel-go's `string.lastIndexOf(needle[, offset])`: the last match starting at or before the
/// offset (the end by default), in code points, searched linearly.
fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (text, needle, offset) = search_args("lastIndexOf", &args)?;
    let chars = text.chars().count();
    let needle_chars = needle.chars().count();
    let limit = match offset {
        None => chars,
        Some(o) if o < 0 => return Err(out_of_range("lastIndexOf", o)),
        Some(o) if needle.is_empty() => {
            return Ok(CowVal::owned(CelInt::from(o.min(chars as i64))));
        }
        Some(o) if o >= chars as i64 => return Err(out_of_range("lastIndexOf", o)),
        Some(o) => o as usize,
    };
    if needle_chars > chars {
        return Ok(CowVal::owned(CelInt::from(-1)));
    }
    let last = limit.min(chars - needle_chars);
    let end = (byte_of(&text, last) + needle.len()).min(text.len());
    let found = text[..end]
        .rfind(needle.as_str())
        .map(|i| text[..i].chars().count() as i64);
    Ok(CowVal::owned(CelInt::from(found.unwrap_or(-1))))
}

fn out_of_range(function: &str, index: i64) -> ExecutionError {
    ExecutionError::function_error(function, format!("index out of range: {index}"))
}

// ---------------------------------------------------------------------------------------------
// Instrumenting
// ---------------------------------------------------------------------------------------------

fn node(expr: Expr) -> IdedExpr {
    IdedExpr { id: 0, expr }
}

fn int(n: i64) -> IdedExpr {
    node(Expr::Literal(cel::common::ast::LiteralValue::Int(n.into())))
}

fn global(name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    node(Expr::Call(CallExpr {
        func_name: name.to_string(),
        target: None,
        args,
    }))
}

/// `@cost(n, expr)`; when `expr` is already `@cost(m, e)`, `@cost(n + m, e)`.
fn costing(n: u64, expr: IdedExpr) -> IdedExpr {
    if let Expr::Call(call) = &expr.expr {
        if call.func_name == "@cost" && call.args.len() == 2 {
            if let Expr::Literal(cel::common::ast::LiteralValue::Int(m)) = &call.args[0].expr {
                let m = u64::try_from(i64::from(*m)).unwrap_or(0);
                return global("@cost", vec![int((n + m) as i64), call.args[1].clone()]);
            }
        }
    }
    global("@cost", vec![int(n as i64), expr])
}

/// `@post(code, extra, @mark(), call)`.
fn post_call(code: i64, extra: u64, call: IdedExpr) -> IdedExpr {
    global(
        "@post",
        vec![int(code), int(extra as i64), global("@mark", vec![]), call],
    )
}

/// A copy of `expr` that charges the running [`Meter`] as it is evaluated (see the module docs).
pub fn instrument(expr: &IdedExpr) -> IdedExpr {
    let mut variables = vec!["self".to_string(), "oldSelf".to_string()];
    Instrument {
        variables: &mut variables,
    }
    .expr(expr)
}

struct Instrument<'a> {
    /// The names bound here: `self`, `oldSelf`, comprehension variables.
    variables: &'a mut Vec<String>,
}

impl Instrument<'_> {
    fn is_variable(&self, name: &str) -> bool {
        self.variables.iter().any(|v| v == name)
    }

    /// The cost of `expr` when it is a name, a literal or fields of a name (cheap, and evaluated
    /// whenever the call around it is): it is then charged with that call, not wrapped itself.
    fn fixed(&self, expr: &IdedExpr) -> Option<u64> {
        match &expr.expr {
            Expr::Literal(_) => Some(0),
            Expr::Ident(name) => Some(u64::from(self.is_variable(name))),
            Expr::Select(select) => {
                let operand = self.fixed(&select.operand)?;
                Some(operand + u64::from(!select.test))
            }
            _ => None,
        }
    }

    fn expr(&mut self, expr: &IdedExpr) -> IdedExpr {
        match &expr.expr {
            Expr::Literal(_) | Expr::Struct(_) | Expr::Unspecified => expr.clone(),
            Expr::Ident(name) if self.is_variable(name) => costing(1, expr.clone()),
            Expr::Ident(_) => expr.clone(),
            Expr::Select(select) => {
                let mut copy = select.clone();
                copy.operand = Box::new(self.expr(&select.operand));
                let selected = IdedExpr {
                    id: expr.id,
                    expr: Expr::Select(copy),
                };
                // `has()` costs nothing more (kube-apiserver: PresenceTestHasCost(false)).
                if select.test {
                    selected
                } else {
                    costing(1, selected)
                }
            }
            Expr::List(list) => {
                let elements = list.elements.iter().map(|e| self.expr(e)).collect();
                let copy = ListExpr {
                    elements,
                    optional_indices: list.optional_indices.clone(),
                };
                costing(LIST_CREATE, node(Expr::List(copy)))
            }
            Expr::Map(map) => {
                let mut copy = map.clone();
                for entry in &mut copy.entries {
                    if let EntryExpr::MapEntry(e) = &mut entry.expr {
                        e.key = self.expr(&e.key);
                        e.value = self.expr(&e.value);
                    }
                }
                costing(MAP_CREATE, node(Expr::Map(copy)))
            }
            Expr::Call(call) => self.call(expr, call),
            Expr::Comprehension(c) => self.comprehension(c),
        }
    }

    fn call(&mut self, expr: &IdedExpr, call: &CallExpr) -> IdedExpr {
        // Long: one branch per function whose work the meter must see before it allocates
        // (`replace`, `split`, `join`, the searches, the comprehensions' producers): a table.
        let name = call.func_name.as_str();
        let namespaced = matches!(call.target.as_deref(),
            Some(IdedExpr { expr: Expr::Ident(t), .. }) if !self.is_variable(t));
        // The producers: ours, charged before they allocate.
        if name == "replace" && !namespaced {
            if let Some(target) = call.target.as_deref() {
                let mut args = vec![self.expr(target)];
                args.extend(call.args.iter().map(|a| self.expr(a)));
                return global("@replace", args);
            }
        }
        if name == "range" && namespaced {
            if let Some(IdedExpr {
                expr: Expr::Ident(ns),
                ..
            }) = call.target.as_deref()
            {
                if ns == "lists" {
                    let args = call.args.iter().map(|a| self.expr(a)).collect();
                    return global("@range", args);
                }
            }
        }
        // The names and fields among the arguments, charged with the call.
        let mut extra = 0u64;
        let copy_with =
            |this: &mut Self, extra: &mut u64, wrap: &dyn Fn(IdedExpr, bool) -> IdedExpr| {
                let mut operand = |this: &mut Self, e: &IdedExpr| match this.fixed(e) {
                    Some(cost) => {
                        *extra += cost;
                        e.clone()
                    }
                    None => this.expr(e),
                };
                let count = call.args.len() + usize::from(call.target.is_some() && !namespaced);
                let mut position = 0;
                let mut next = |e: IdedExpr| {
                    position += 1;
                    wrap(e, position == count)
                };
                let target = call.target.as_deref().map(|t| {
                    if namespaced {
                        t.clone()
                    } else {
                        let t = operand(this, t);
                        next(t)
                    }
                });
                let args: Vec<IdedExpr> = call
                    .args
                    .iter()
                    .map(|a| {
                        let a = operand(this, a);
                        next(a)
                    })
                    .collect();
                IdedExpr {
                    id: expr.id,
                    expr: Expr::Call(CallExpr {
                        func_name: linear_name(&call.func_name, namespaced),
                        target: target.map(Box::new),
                        args,
                    }),
                }
            };
        match name {
            // No cost of their own in cel-go: only what they evaluate.
            "_&&_" | "_||_" | "_?_:_" => {
                let copy = |this: &mut Self| {
                    let args = call.args.iter().map(|a| this.expr(a)).collect();
                    IdedExpr {
                        id: expr.id,
                        expr: Expr::Call(CallExpr {
                            func_name: call.func_name.clone(),
                            target: None,
                            args,
                        }),
                    }
                };
                copy(self)
            }
            _ => {
                // A function in a namespace (`sets.contains`) is listed by its full name.
                let qualified = match call.target.as_deref() {
                    Some(IdedExpr {
                        expr: Expr::Ident(ns),
                        ..
                    }) if namespaced => format!("{ns}.{name}"),
                    _ => name.to_string(),
                };
                let sized = SIZED.iter().position(|f| *f == qualified);
                let precharged = PRECHARGED.iter().position(|f| *f == name);
                match (sized, precharged) {
                    (Some(code), _) => {
                        let code = code as i64;
                        let inner =
                            copy_with(self, &mut extra, &|e, _| global("@arg", vec![int(code), e]));
                        post_call(code, extra, inner)
                    }
                    (None, Some(index)) => {
                        let code = (SIZED.len() + index) as i64;
                        let inner = copy_with(self, &mut extra, &|e, last| {
                            if last {
                                global("@pre", vec![int(code), e])
                            } else {
                                global("@arg", vec![int(code), e])
                            }
                        });
                        post_call(code, extra, inner)
                    }
                    (None, None) => {
                        let inner = copy_with(self, &mut extra, &|e, _| e);
                        costing(1 + extra, inner)
                    }
                }
            }
        }
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> IdedExpr {
        let accu = c.accu_var.as_str();
        let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if n == accu);
        let mut copy = c.clone();
        copy.iter_range = self.expr(&c.iter_range);
        copy.accu_init = self.expr(&c.accu_init);
        let depth = self.variables.len();
        self.variables.push(c.iter_var.clone());
        if let Some(second) = &c.iter_var2 {
            self.variables.push(second.clone());
        }
        self.variables.push(c.accu_var.clone());
        copy.loop_cond = self.expr(&c.loop_cond);
        copy.loop_step = match &c.loop_step.expr {
            // `@result && x`, `@result || x`: the crate defers errors on this shape.
            Expr::Call(call)
                if matches!(call.func_name.as_str(), "_&&_" | "_||_")
                    && call.target.is_none()
                    && call.args.len() == 2
                    && is_accu(&call.args[0]) =>
            {
                let mut step = call.clone();
                step.args[1] = costing(1, self.expr(&call.args[1]));
                node(Expr::Call(step))
            }
            // `@result + [x]` and `cond ? @result + [x] : @result`: the crate appends in place.
            Expr::Call(call) if self.append(call, accu).is_some() => self
                .append(call, accu)
                .unwrap_or_else(|| c.loop_step.clone()),
            Expr::Call(call)
                if call.func_name == "_?_:_" && call.args.len() == 3 && is_accu(&call.args[2]) =>
            {
                match &call.args[1].expr {
                    Expr::Call(add) if self.append(add, accu).is_some() => {
                        let mut step = call.clone();
                        step.args[0] = costing(1, self.expr(&call.args[0]));
                        step.args[1] = self
                            .append(add, accu)
                            .unwrap_or_else(|| call.args[1].clone());
                        node(Expr::Call(step))
                    }
                    _ => self.expr(&c.loop_step),
                }
            }
            _ => self.expr(&c.loop_step),
        };
        copy.result = if is_accu(&c.result) {
            // The accumulator stays a bare name (the crate's shapes want it); its cost (1) is
            // charged with the range.
            copy.iter_range = costing(1, copy.iter_range.clone());
            c.result.clone()
        } else {
            self.expr(&c.result)
        };
        self.variables.truncate(depth);
        node(Expr::Comprehension(Box::new(copy)))
    }

    /// `@result + [x]` instrumented with its shape kept: the `_+_`, the accumulator and the list
    /// are charged (12) with `x`.
    fn append(&mut self, call: &CallExpr, accu: &str) -> Option<IdedExpr> {
        if call.func_name != "_+_" || call.target.is_some() || call.args.len() != 2 {
            return None;
        }
        if !matches!(&call.args[0].expr, Expr::Ident(n) if n == accu) {
            return None;
        }
        let Expr::List(list) = &call.args[1].expr else {
            return None;
        };
        let elements = list
            .elements
            .iter()
            .map(|e| costing(LIST_CREATE + 2, self.expr(e)))
            .collect();
        let mut add = call.clone();
        add.args[1] = node(Expr::List(ListExpr {
            elements,
            optional_indices: list.optional_indices.clone(),
        }));
        Some(node(Expr::Call(add)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen_of(value: &dyn Val) -> Seen {
        seen(value, false)
    }

    #[test]
    fn library_calls_cost_what_kubernetes_charges() {
        // `format.uri().validate(s)` of 19 characters: ceil(20 x 0.1) x ceil(1103 x 0.25).
        let format = super::super::kubernetes_format::NamedFormat::Uri;
        let text = CelString::from("https://example.com".to_string());
        let args = [seen_of(&format), seen_of(&text)];
        assert_eq!(call_cost("validate", &args, None), 2 * 276);
        // `cidr.containsIP(ip)` of a /24 and an address: ceil((3 + 3) x 0.1).
        let cidr = super::super::kubernetes_net::parse_cidr("10.0.0.0/24");
        let ip = super::super::kubernetes_net::parse_ip("10.0.0.1");
        if let (Ok(cidr), Ok(ip)) = (cidr, ip) {
            let args = [seen_of(&cidr), seen_of(&ip)];
            assert_eq!(call_cost("containsIP", &args, None), 1);
            let args = [seen_of(&cidr), seen_of(&cidr)];
            assert_eq!(call_cost("containsCIDR", &args, None), 1 + 1 + 1);
        } else {
            panic!("parses");
        }
        // cel-go's sets: a call and the product of the sizes.
        let list = |n: i64| -> CelList {
            let items: Vec<Box<dyn Val>> = (0..n)
                .map(|i| Box::new(CelInt::from(i)) as Box<dyn Val>)
                .collect();
            CelList::from(items)
        };
        let args = [seen_of(&list(3)), seen_of(&list(4))];
        assert_eq!(call_cost("sets.contains", &args, None), 13);
        assert_eq!(call_cost("sets.equivalent", &args, None), 25);
    }
}
