//! Kubernetes' regex library for CEL (`library.Regex` in k8s.io/apiserver):
//!
//! ```text
//!   s.find(re)          ──► the leftmost match of `re` in `s`, or ''
//!   s.findAll(re[, n])  ──► the successive non-overlapping matches (at most n when n >= 0)
//! ```
//!
//! kube-apiserver uses Go's `regexp` (RE2); the `regex` crate (which the `cel` crate's `matches`
//! uses too) has the same leftmost-first semantics and syntax for what rules write. One rule of
//! Go's `FindAllString` differs from `regex`'s iterator and is followed here: an empty match right
//! after the end of the previous match is dropped (`'baaa'.findAll('a*')` is `['', 'aaa']`).
//! Known differences: `\d`, `\w`, `\s` and `\b` are Unicode-aware in the `regex` crate, ASCII in
//! Go; an invalid pattern's error text is the crate's, after Kubernetes' `Illegal regex: `.

use cel::common::types::{CelInt, CelList, CelString, INT_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};
use regex::Regex;

/// The names this library declares (for the type checker's list of known functions).
pub const FUNCTIONS: [&str; 2] = ["find", "findAll"];

/// Registers the library's overloads on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload(
        "find",
        "string_find_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        find,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string_int",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all,
    )?;
    Ok(())
}

/// Go's `FindAllString(s, n)`: `n < 0` for all of them.
pub fn find_all_matches<'s>(re: &Regex, s: &'s str, n: i64) -> Vec<&'s str> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    let mut previous_end: Option<usize> = None;
    while (n < 0 || (out.len() as i64) < n) && pos <= s.len() {
        let Some(m) = re.find_at(s, pos) else {
            break;
        };
        let mut accept = true;
        if m.end() == pos {
            // An empty match: dropped right after a match; the search moves on one character.
            if Some(m.start()) == previous_end {
                accept = false;
            }
            pos += s[pos..].chars().next().map(char::len_utf8).unwrap_or(1);
        } else {
            pos = m.end();
        }
        previous_end = Some(m.end());
        if accept {
            out.push(m.as_str());
        }
    }
    out
}

fn no_overload(function: &str) -> ExecutionError {
    ExecutionError::no_such_overload(function, Vec::new())
}

fn text<'a>(function: &str, value: &'a dyn Val) -> Result<&'a str, ExecutionError> {
    value
        .downcast_ref::<CelString>()
        .map(|s| s.inner())
        .ok_or_else(|| no_overload(function))
}

fn compile(function: &str, pattern: &str) -> Result<Regex, ExecutionError> {
    Regex::new(pattern)
        .map_err(|e| ExecutionError::function_error(function, format!("Illegal regex: {e}")))
}

fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, re]: [CowVal<'b, 'v>; 2] = args.try_into().map_err(|_| no_overload("find"))?;
    let re = compile("find", text("find", re.as_ref())?)?;
    let found = re
        .find(text("find", s.as_ref())?)
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    Ok(CowVal::owned(CelString::from(found)))
}

fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let function = "findAll";
    let (s, re, n) = match args.as_slice() {
        [s, re] => (s, re, -1),
        [s, re, n] => {
            let n = n
                .downcast_ref::<CelInt>()
                .map(|n| *n.inner())
                .ok_or_else(|| no_overload(function))?;
            (s, re, n)
        }
        _ => return Err(no_overload(function)),
    };
    let re = compile(function, text(function, re.as_ref())?)?;
    let items: Vec<Box<dyn Val + 'v>> = find_all_matches(&re, text(function, s.as_ref())?, n)
        .into_iter()
        .map(|m| Box::new(CelString::from(m.to_string())) as Box<dyn Val + 'v>)
        .collect();
    Ok(CowVal::owned(CelList::from(items)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_all_drops_empty_matches_after_a_match_as_go_does() {
        let re = |p: &str| Regex::new(p).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(find_all_matches(&re("a*"), "baaa", -1), vec!["", "aaa"]);
        assert_eq!(
            find_all_matches(&re("a*"), "baaab", -1),
            vec!["", "aaa", ""]
        );
        assert_eq!(
            find_all_matches(&re("[0-9]+"), "a1b22c333", 2),
            vec!["1", "22"]
        );
        assert_eq!(find_all_matches(&re("x"), "xx", 0), Vec::<&str>::new());
        assert_eq!(find_all_matches(&re(""), "é", -1), vec!["", ""]);
    }
}
