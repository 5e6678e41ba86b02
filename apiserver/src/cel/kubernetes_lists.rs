//! Kubernetes' list library for CEL, which kube-apiserver adds to the environment of every CRD
//! validation rule (`library.Lists` in k8s.io/apiserver): `isSorted()`, `sum()`, `min()`, `max()`,
//! `indexOf(x)` and `lastIndexOf(x)` on a list. The `cel` crate has cel-go's own extensions (the
//! strings and lists ones kube-apiserver also adds, registered beside this in [`super::env`]), but
//! not Kubernetes' libraries.
//!
//! Each function is a member overload on `list`. As in kube-apiserver:
//! - `isSorted()`: false as soon as an element is greater than the one after it; an empty list is
//!   sorted;
//! - `sum()`: the elements added with `+`, left to right; an empty list sums to `0`;
//! - `min()`, `max()`: the least or greatest element by `<`, the first one among equals; an empty
//!   list is the error `min called on empty list` (`max …`);
//! - `indexOf(x)`, `lastIndexOf(x)`: the index of the first or last element equal to `x` (CEL's
//!   equality), or `-1`.
//!
//! cel-go type-checks a rule, so its elements can always be compared (or added); here, where the
//! crate is dynamically typed, elements that cannot be are "no such overload".

use std::cmp::Ordering;

use cel::common::types::{CelBool, CelInt, DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// The names this library declares (for the type checker's list of known functions), with
/// cel-go's sets extension (`sets.contains(a, b)`: every element of `b` is in `a`;
/// `sets.equivalent(a, b)`: both ways; `sets.intersects(a, b)`: one in common; CEL's equality),
/// which kube-apiserver adds too.
pub const FUNCTIONS: [&str; 9] = [
    "isSorted",
    "sum",
    "min",
    "max",
    "indexOf",
    "lastIndexOf",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
];

/// Registers the library's overloads on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    let sets: [(&str, &str, cel::common::functions::Function); 3] = [
        ("sets.contains", "list_sets_contains_list", sets_contains),
        (
            "sets.equivalent",
            "list_sets_equivalent_list",
            sets_equivalent,
        ),
        (
            "sets.intersects",
            "list_sets_intersects_list",
            sets_intersects,
        ),
    ];
    for (name, id, function) in sets {
        env.add_overload(name, id, vec![LIST_TYPE, LIST_TYPE], function)?;
    }
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    Ok(())
}

fn no_overload(function: &str) -> ExecutionError {
    ExecutionError::no_such_overload(function, Vec::new())
}

/// The list (the receiver) and the other arguments of a call of `function`.
fn receiver_and<'b, 'v, const N: usize>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
) -> Result<(CowVal<'b, 'v>, [CowVal<'b, 'v>; N]), ExecutionError> {
    let mut args = args.into_iter();
    let list = args.next().ok_or_else(|| no_overload(function))?;
    let rest: Vec<CowVal<'b, 'v>> = args.collect();
    let rest: [CowVal<'b, 'v>; N] = rest.try_into().map_err(|_| no_overload(function))?;
    Ok((list, rest))
}

/// Borrows of the elements of `list`.
fn elements<'a, 'v>(
    function: &str,
    list: &'a (dyn Val + 'v),
) -> Result<Vec<&'a (dyn Val + 'v)>, ExecutionError> {
    let iterable = list.as_iterable().ok_or_else(|| no_overload(function))?;
    let mut items = iterable.iter();
    let mut all = Vec::new();
    while let Some(item) = items.next() {
        all.push(item);
    }
    Ok(all)
}

fn compare(function: &str, a: &dyn Val, b: &dyn Val) -> Result<Ordering, ExecutionError> {
    a.as_comparer()
        .ok_or_else(|| no_overload(function))?
        .compare(b)
        .map_err(|_| no_overload(function))
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (list, []) = receiver_and::<0>("isSorted", args)?;
    let items = elements("isSorted", list.as_ref())?;
    let mut sorted = true;
    for pair in items.windows(2) {
        if compare("isSorted", pair[0], pair[1])? == Ordering::Greater {
            sorted = false;
            break;
        }
    }
    Ok(CowVal::owned(CelBool::from(sorted)))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (list, []) = receiver_and::<0>("sum", args)?;
    let items = elements("sum", list.as_ref())?;
    let Some((first, rest)) = items.split_first() else {
        return Ok(CowVal::owned(CelInt::from(0)));
    };
    let mut total: Box<dyn Val + 'v> = first.clone_as_boxed();
    for item in rest {
        let next = total
            .as_adder()
            .ok_or_else(|| no_overload("sum"))?
            .add(*item)?
            .into_owned();
        total = next;
    }
    Ok(CowVal::Owned(total))
}

/// The element `keep` prefers: the least (`Ordering::Less`) or the greatest.
fn extreme<'b, 'v>(
    function: &str,
    keep: Ordering,
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (list, []) = receiver_and::<0>(function, args)?;
    let items = elements(function, list.as_ref())?;
    let Some((first, rest)) = items.split_first() else {
        return Err(ExecutionError::function_error(
            function,
            format!("{function} called on empty list"),
        ));
    };
    let mut best = *first;
    for item in rest {
        if compare(function, *item, best)? == keep {
            best = *item;
        }
    }
    Ok(CowVal::Owned(best.clone_as_boxed()))
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme("min", Ordering::Less, args)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme("max", Ordering::Greater, args)
}

fn position<'b, 'v>(
    function: &str,
    last: bool,
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (list, [wanted]) = receiver_and::<1>(function, args)?;
    let items = elements(function, list.as_ref())?;
    let wanted = wanted.as_ref();
    let found = if last {
        items.iter().rposition(|item| item.equals(wanted))
    } else {
        items.iter().position(|item| item.equals(wanted))
    };
    let index = found.and_then(|i| i64::try_from(i).ok()).unwrap_or(-1);
    Ok(CowVal::owned(CelInt::from(index)))
}

pub(super) fn index_of<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position("indexOf", false, args)
}

pub(super) fn last_index_of<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position("lastIndexOf", true, args)
}

/// Whether every element of `sub` equals an element of `list`.
fn contains_all(function: &str, list: &dyn Val, sub: &dyn Val) -> Result<bool, ExecutionError> {
    let items = elements(function, list)?;
    Ok(elements(function, sub)?
        .iter()
        .all(|wanted| items.iter().any(|item| item.equals(*wanted))))
}

fn two<'b, 'v>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
) -> Result<[CowVal<'b, 'v>; 2], ExecutionError> {
    args.try_into().map_err(|_| no_overload(function))
}

fn sets_contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let f = "sets.contains";
    let [a, b] = two(f, args)?;
    Ok(CowVal::owned(CelBool::from(contains_all(
        f,
        a.as_ref(),
        b.as_ref(),
    )?)))
}

fn sets_equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let f = "sets.equivalent";
    let [a, b] = two(f, args)?;
    let both = contains_all(f, a.as_ref(), b.as_ref())? && contains_all(f, b.as_ref(), a.as_ref())?;
    Ok(CowVal::owned(CelBool::from(both)))
}

fn sets_intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let f = "sets.intersects";
    let [a, b] = two(f, args)?;
    let others = elements(f, b.as_ref())?;
    let any = elements(f, a.as_ref())?
        .iter()
        .any(|x| others.iter().any(|y| y.equals(*x)));
    Ok(CowVal::owned(CelBool::from(any)))
}

#[cfg(test)]
mod tests {
    use cel::{Context, Value};

    fn eval(source: &str) -> Result<Value, String> {
        let program = super::super::env()
            .compile(source)
            .map_err(|e| format!("{e:?}"))?;
        program
            .execute(&Context::with_env(super::super::env()))
            .map_err(|e| super::super::eval_error(&e).to_string())
    }

    #[test]
    fn each_function_answers_as_kubernetes_does() {
        for holds in [
            "[1, 2, 2].isSorted()",
            "![3, 1].isSorted()",
            "[].isSorted()",
            "['a', 'b'].isSorted()",
            "[1, 2, 3].sum() == 6",
            "[1.5, 2.5].sum() == 4.0",
            "[].sum() == 0",
            "[3, 1, 2].min() == 1",
            "['b', 'c', 'a'].max() == 'c'",
            "[3, 1, 3].indexOf(3) == 0",
            "[3, 1, 3].lastIndexOf(3) == 2",
            "['a'].indexOf('z') == -1",
            // The strings extension's indexOf, on a string receiver, is still there.
            "'abcb'.lastIndexOf('b') == 3",
        ] {
            assert_eq!(eval(holds), Ok(Value::Bool(true)), "{holds}");
        }
    }

    #[test]
    fn empty_and_mixed_lists_are_errors() {
        assert_eq!(eval("[].min() > 0"), Err("min called on empty list".into()));
        assert_eq!(eval("[].max() > 0"), Err("max called on empty list".into()));
        assert_eq!(
            eval("[1, 'a'].isSorted()"),
            Err("no such overload".into()),
            "elements that do not compare"
        );
        assert_eq!(eval("['a', 1].sum() == 1"), Err("no such overload".into()));
    }
}
