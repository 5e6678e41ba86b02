//! Kubernetes' URL library for CEL (`library.URLs` in k8s.io/apiserver), which kube-apiserver adds
//! to the environment of every CRD validation rule:
//!
//! ```text
//!   isURL(s)   ──► whether Go's url.ParseRequestURI(s) succeeds
//!   url(s)     ──► a `kubernetes.URL`: ParseRequestURI(s) must succeed, then the value is url.Parse(s)
//!   u.getScheme(), getHost(), getHostname(), getPort(), getEscapedPath()   strings
//!   u.getQuery()                                                            map(string, list(string))
//!   u == v     (Go compares the two URLs' String())
//! ```
//!
//! # Why a parser of our own
//!
//! The `url` crate follows the WHATWG URL standard: it normalises (`HTTP://a/b/../c` becomes
//! `http://a/c`, default ports vanish, hosts are IDNA-mapped) and accepts or refuses other strings
//! than Go's `net/url`, which kube-apiserver uses. A rule's outcome depends on exactly those
//! differences (`url('http://a/b/../c').getEscapedPath()` is `/b/../c` in Go), so this module
//! follows Go's `net/url` (Go 1.26, the toolchain of kube-apiserver 1.37.2, with its default
//! `urlstrictcolons=1`) for what Kubernetes exposes: the parse (scheme, opaque part, userinfo,
//! host and port checks, IPv6 literals checked with `kubernetes_net::parse_addr`, path escapes,
//! fragment), `EscapedPath`, `Hostname`, `Port`, `Query` and `String`. Error texts are Go's.

use std::any::Any;
use std::collections::HashMap;

use cel::common::types::{CelBool, CelList, CelMap, CelMapKey, CelString, STRING_TYPE, Type};
use cel::common::value::{CowVal, StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::kubernetes_net::parse_addr;

/// The CEL type of a URL (kube-apiserver's `kubernetes.URL`).
static URL_TYPE: Type = Type::new_unspecified_type("kubernetes.URL");

/// The names this library declares (for the type checker's list of known functions).
pub const FUNCTIONS: [&str; 8] = [
    "url",
    "isURL",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
];

/// Go's escaping modes (`net/url`'s `encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    QueryComponent,
    Fragment,
}

/// Go's `shouldEscape`.
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone)
        && matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
        )
    {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => return c == b'?',
            Mode::UserPassword => return matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::QueryComponent => return true,
            Mode::Fragment => return false,
            Mode::Host | Mode::Zone => {}
        },
        _ => {}
    }
    if mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*') {
        return false;
    }
    true
}

/// Why a string is not a URL, in Go's words (without the `parse "…": ` of `url.Error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("invalid URL escape {}", go_quote(.0))]
    Escape(String),
    #[error("invalid character {} in host name", go_quote(.0))]
    HostCharacter(String),
    #[error("{0}")]
    Other(String),
}

/// Go's `url.Error` of the parse operation: `parse "<url>": <error>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parse {}: {error}", go_quote(url))]
pub struct ParseError {
    url: String,
    error: UrlError,
}

fn go_quote(text: &str) -> String {
    format!("{text:?}")
}

fn other(text: impl Into<String>) -> UrlError {
    UrlError::Other(text.into())
}

fn unhex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

/// Go's `unescape`: `%XX` decoded (and `+` as a space in a query component), with its checks.
fn unescape(s: &str, mode: Mode) -> Result<String, UrlError> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut escapes = 0;
    let mut plus = false;
    while i < b.len() {
        match b[i] {
            b'%' => {
                escapes += 1;
                if i + 2 >= b.len()
                    || !b[i + 1].is_ascii_hexdigit()
                    || !b[i + 2].is_ascii_hexdigit()
                {
                    let rest = &b[i..];
                    let end = rest.len().min(3);
                    return Err(UrlError::Escape(
                        String::from_utf8_lossy(&rest[..end]).into_owned(),
                    ));
                }
                let escape = &s[i..i + 3];
                if mode == Mode::Host && unhex(b[i + 1]) < 8 && escape != "%25" {
                    return Err(UrlError::Escape(escape.to_string()));
                }
                if mode == Mode::Zone {
                    let v = (unhex(b[i + 1]) << 4) | unhex(b[i + 2]);
                    if escape != "%25" && v != b' ' && should_escape(v, Mode::Host) {
                        return Err(UrlError::Escape(escape.to_string()));
                    }
                }
                i += 3;
            }
            b'+' => {
                plus = mode == Mode::QueryComponent;
                i += 1;
            }
            c => {
                if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) {
                    return Err(UrlError::HostCharacter((c as char).to_string()));
                }
                i += 1;
            }
        }
    }
    if escapes == 0 && !plus {
        return Ok(s.to_string());
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                out.push((unhex(b[i + 1]) << 4) | unhex(b[i + 2]));
                i += 2;
            }
            b'+' if mode == Mode::QueryComponent => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    // Go strings hold any bytes; a rule sees them as a CEL string (invalid UTF-8 replaced).
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Go's `escape`.
fn escape(s: &str, mode: Mode) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if c == b' ' && mode == Mode::QueryComponent {
            out.push('+');
        } else if should_escape(c, mode) {
            out.push_str(&format!("%{c:02X}"));
        } else {
            out.push(c as char);
        }
    }
    out
}

/// Go's `validEncoded`.
fn valid_encoded(s: &str, mode: Mode) -> bool {
    s.bytes().all(|c| {
        matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'@'
                | b'['
                | b']'
                | b'%'
        ) || !should_escape(c, mode)
    })
}

/// Go's `validOptionalPort`: empty, or `:` and digits.
fn valid_optional_port(port: &str) -> bool {
    match port.strip_prefix(':') {
        None => port.is_empty(),
        Some(digits) => digits.bytes().all(|b| b.is_ascii_digit()),
    }
}

/// A parsed URL: Go's `url.URL`, as far as Kubernetes reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Url {
    scheme: String,
    opaque: String,
    /// The user name and, if written, the password (unescaped).
    user: Option<(String, Option<String>)>,
    host: String,
    path: String,
    raw_path: String,
    raw_query: String,
    force_query: bool,
    omit_host: bool,
    fragment: String,
    raw_fragment: String,
}

/// Go's `getScheme`: the scheme and the rest.
fn split_scheme(raw: &str) -> Result<(&str, &str), UrlError> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err(other("missing protocol scheme")),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

impl Url {
    /// Go's `url.Parse`.
    pub fn parse(raw: &str) -> Result<Url, ParseError> {
        let (before, fragment) = match raw.split_once('#') {
            Some((u, f)) => (u, Some(f)),
            None => (raw, None),
        };
        let mut url = Url::parse_inner(before, false).map_err(|error| ParseError {
            url: before.to_string(),
            error,
        })?;
        if let Some(f) = fragment.filter(|f| !f.is_empty()) {
            url.set_fragment(f).map_err(|error| ParseError {
                url: raw.to_string(),
                error,
            })?;
        }
        Ok(url)
    }

    /// Go's `url.ParseRequestURI`.
    pub fn parse_request_uri(raw: &str) -> Result<Url, ParseError> {
        Url::parse_inner(raw, true).map_err(|error| ParseError {
            url: raw.to_string(),
            error,
        })
    }

    /// Go's `parse`.
    fn parse_inner(raw: &str, via_request: bool) -> Result<Url, UrlError> {
        if raw.bytes().any(|b| b < b' ' || b == 0x7f) {
            return Err(other("net/url: invalid control character in URL"));
        }
        if raw.is_empty() && via_request {
            return Err(other("empty url"));
        }
        let mut url = Url::default();
        if raw == "*" {
            url.path = "*".into();
            return Ok(url);
        }
        let (scheme, mut rest) = split_scheme(raw)?;
        url.scheme = scheme.to_ascii_lowercase();
        if rest.ends_with('?') && rest.matches('?').count() == 1 {
            url.force_query = true;
            rest = &rest[..rest.len() - 1];
        } else if let Some((r, q)) = rest.split_once('?') {
            rest = r;
            url.raw_query = q.to_string();
        }
        if !rest.starts_with('/') {
            if !url.scheme.is_empty() {
                url.opaque = rest.to_string();
                return Ok(url);
            }
            if via_request {
                return Err(other("invalid URI for request"));
            }
            let segment = rest.split('/').next().unwrap_or("");
            if segment.contains(':') {
                return Err(other("first path segment in URL cannot contain colon"));
            }
        }
        let authority_follows = (!url.scheme.is_empty()
            || (!via_request && !rest.starts_with("///")))
            && rest.starts_with("//");
        if authority_follows {
            let after = &rest[2..];
            let (authority, path) = match after.find('/') {
                Some(i) => (&after[..i], &after[i..]),
                None => (after, ""),
            };
            let (user, host) = parse_authority(&url.scheme, authority)?;
            url.user = user;
            url.host = host;
            rest = path;
        } else if !url.scheme.is_empty() && rest.starts_with('/') {
            url.omit_host = true;
        }
        url.set_path(rest)?;
        Ok(url)
    }

    fn set_path(&mut self, p: &str) -> Result<(), UrlError> {
        self.path = unescape(p, Mode::Path)?;
        self.raw_path = if escape(&self.path, Mode::Path) == p {
            String::new()
        } else {
            p.to_string()
        };
        Ok(())
    }

    fn set_fragment(&mut self, f: &str) -> Result<(), UrlError> {
        self.fragment = unescape(f, Mode::Fragment)?;
        self.raw_fragment = if escape(&self.fragment, Mode::Fragment) == f {
            String::new()
        } else {
            f.to_string()
        };
        Ok(())
    }

    /// Go's `EscapedPath`.
    pub fn escaped_path(&self) -> String {
        if !self.raw_path.is_empty()
            && valid_encoded(&self.raw_path, Mode::Path)
            && unescape(&self.raw_path, Mode::Path).ok().as_deref() == Some(self.path.as_str())
        {
            return self.raw_path.clone();
        }
        if self.path == "*" {
            return "*".into();
        }
        escape(&self.path, Mode::Path)
    }

    fn escaped_fragment(&self) -> String {
        if !self.raw_fragment.is_empty()
            && valid_encoded(&self.raw_fragment, Mode::Fragment)
            && unescape(&self.raw_fragment, Mode::Fragment).ok().as_deref()
                == Some(self.fragment.as_str())
        {
            return self.raw_fragment.clone();
        }
        escape(&self.fragment, Mode::Fragment)
    }

    /// Go's `splitHostPort` of the host.
    fn host_port(&self) -> (&str, &str) {
        let mut host = self.host.as_str();
        let mut port = "";
        if let Some(colon) = host.rfind(':') {
            if valid_optional_port(&host[colon..]) {
                (host, port) = (&host[..colon], &host[colon + 1..]);
            }
        }
        if host.starts_with('[') && host.ends_with(']') && host.len() >= 2 {
            host = &host[1..host.len() - 1];
        }
        (host, port)
    }

    pub fn hostname(&self) -> &str {
        self.host_port().0
    }

    pub fn port(&self) -> &str {
        self.host_port().1
    }

    /// Go's `Query()`: the pairs of the raw query that parse, in order, by key.
    pub fn query(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        // Go parses nothing past 10,000 parameters.
        if self.raw_query.matches('&').count() + 1 > 10_000 {
            return out;
        }
        for pair in self.raw_query.split('&') {
            if pair.contains(';') || pair.is_empty() {
                continue;
            }
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (Ok(key), Ok(value)) = (
                unescape(key, Mode::QueryComponent),
                unescape(value, Mode::QueryComponent),
            ) else {
                continue;
            };
            match out.iter_mut().find(|(k, _)| *k == key) {
                Some((_, values)) => values.push(value),
                None => out.push((key, vec![value])),
            }
        }
        out
    }

    /// Go's `String()` (what `==` compares).
    fn go_string(&self) -> String {
        let mut out = String::new();
        if !self.scheme.is_empty() {
            out.push_str(&self.scheme);
            out.push(':');
        }
        if !self.opaque.is_empty() {
            out.push_str(&self.opaque);
        } else {
            let has_authority =
                !self.scheme.is_empty() || !self.host.is_empty() || self.user.is_some();
            if has_authority && !(self.omit_host && self.host.is_empty() && self.user.is_none()) {
                if !self.host.is_empty() || !self.path.is_empty() || self.user.is_some() {
                    out.push_str("//");
                }
                if let Some((name, password)) = &self.user {
                    out.push_str(&escape(name, Mode::UserPassword));
                    if let Some(password) = password {
                        out.push(':');
                        out.push_str(&escape(password, Mode::UserPassword));
                    }
                    out.push('@');
                }
                out.push_str(&escape(&self.host, Mode::Host));
            }
            let path = self.escaped_path();
            if !path.is_empty() && !path.starts_with('/') && !self.host.is_empty() {
                out.push('/');
            }
            if out.is_empty() && path.split('/').next().unwrap_or("").contains(':') {
                out.push_str("./");
            }
            out.push_str(&path);
        }
        if self.force_query || !self.raw_query.is_empty() {
            out.push('?');
            out.push_str(&self.raw_query);
        }
        if !self.fragment.is_empty() {
            out.push('#');
            out.push_str(&self.escaped_fragment());
        }
        out
    }
}

/// Go's `parseAuthority`: userinfo (before the last `@`) and host.
type Authority = (Option<(String, Option<String>)>, String);

fn parse_authority(scheme: &str, authority: &str) -> Result<Authority, UrlError> {
    let at = authority.rfind('@');
    let host = parse_host(scheme, &authority[at.map(|i| i + 1).unwrap_or(0)..])?;
    let Some(at) = at else {
        return Ok((None, host));
    };
    let userinfo = &authority[..at];
    let valid = userinfo.chars().all(|r| {
        r.is_ascii_alphanumeric()
            || matches!(
                r,
                '-' | '.'
                    | '_'
                    | ':'
                    | '~'
                    | '!'
                    | '$'
                    | '&'
                    | '\''
                    | '('
                    | ')'
                    | '*'
                    | '+'
                    | ','
                    | ';'
                    | '='
                    | '%'
                    | '@'
            )
    });
    if !valid {
        return Err(other("net/url: invalid userinfo"));
    }
    let user = match userinfo.split_once(':') {
        None => (unescape(userinfo, Mode::UserPassword)?, None),
        Some((name, password)) => (
            unescape(name, Mode::UserPassword)?,
            Some(unescape(password, Mode::UserPassword)?),
        ),
    };
    Ok((Some(user), host))
}

/// Go's `parseHost` (with `urlstrictcolons=1`).
fn parse_host(scheme: &str, host: &str) -> Result<String, UrlError> {
    match host.rfind('[') {
        Some(open) if open > 0 => return Err(other("invalid IP-literal")),
        Some(_) => {
            let Some(close) = host.rfind(']') else {
                return Err(other("missing ']' in host"));
            };
            let colon_port = &host[close + 1..];
            if !valid_optional_port(colon_port) {
                return Err(other(format!(
                    "invalid port {} after host",
                    go_quote(colon_port)
                )));
            }
            let colon_port = unescape(colon_port, Mode::Host)?;
            let hostname = host.get(1..close).unwrap_or("");
            let unescaped = match hostname.find("%25") {
                Some(zone) => {
                    unescape(&hostname[..zone], Mode::Host)?
                        + &unescape(&hostname[zone..], Mode::Zone)?
                }
                None => unescape(hostname, Mode::Host)?,
            };
            let addr = parse_addr(&unescaped).map_err(|e| other(format!("invalid host: {e}")))?;
            if addr.addr.is_ipv4() {
                return Err(other("invalid IP-literal"));
            }
            return Ok(format!("[{unescaped}]{colon_port}"));
        }
        None => {}
    }
    if let Some(first) = host.find(':') {
        let last = host.rfind(':').unwrap_or(first);
        let i = if last != first && !matches!(scheme, "http" | "https") {
            last
        } else {
            first
        };
        let colon_port = &host[i..];
        if !valid_optional_port(colon_port) {
            return Err(other(format!(
                "invalid port {} after host",
                go_quote(colon_port)
            )));
        }
    }
    unescape(host, Mode::Host)
}

// ---------------------------------------------------------------------------------------------
// The CEL values and functions
// ---------------------------------------------------------------------------------------------

/// Kubernetes' `url(s)`: `ParseRequestURI` must accept the string; the value is `Parse`'s.
pub fn kubernetes_url(text: &str) -> Result<Url, ParseError> {
    Url::parse_request_uri(text)?;
    Url::parse(text)
}

impl Val for Url {
    fn get_type(&self) -> &Type {
        <Self as Val>::cel_type()
    }
    fn cel_type() -> &'static Type {
        &URL_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<Url>()
            .is_some_and(|o| o.go_string() == self.go_string())
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for Url {}

type Function = cel::common::functions::Function;

/// Registers the library's overloads on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("url", "string_to_url", vec![STRING_TYPE], to_url)?;
    env.add_overload("isURL", "is_url_string", vec![STRING_TYPE], is_url)?;
    let members: [(&str, &str, Function); 6] = [
        ("getScheme", "url_get_scheme", get_scheme),
        ("getHost", "url_get_host", get_host),
        ("getHostname", "url_get_hostname", get_hostname),
        ("getPort", "url_get_port", get_port),
        ("getEscapedPath", "url_get_escaped_path", get_escaped_path),
        ("getQuery", "url_get_query", get_query),
    ];
    for (name, id, function) in members {
        env.add_member_overload(name, id, URL_TYPE.to_owned(), vec![], function)?;
    }
    Ok(())
}

fn no_overload(function: &str) -> ExecutionError {
    ExecutionError::no_such_overload(function, Vec::new())
}

fn one<'b, 'v>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [arg]: [CowVal<'b, 'v>; 1] = args.try_into().map_err(|_| no_overload(function))?;
    Ok(arg)
}

fn text_of(function: &str, value: &dyn Val) -> Result<String, ExecutionError> {
    value
        .downcast_ref::<CelString>()
        .map(|s| s.inner().to_string())
        .ok_or_else(|| no_overload(function))
}

fn to_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = text_of("url", one("url", args)?.as_ref())?;
    let url = kubernetes_url(&text).map_err(|e| {
        ExecutionError::function_error(
            "url",
            format!("URL parse error during conversion from string: {e}"),
        )
    })?;
    Ok(CowVal::owned(url))
}

fn is_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = text_of("isURL", one("isURL", args)?.as_ref())?;
    Ok(CowVal::owned(CelBool::from(
        Url::parse_request_uri(&text).is_ok(),
    )))
}

/// A getter: `read` of the URL, as a CEL string.
fn getter<'b, 'v>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
    read: fn(&Url) -> String,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let arg = one(function, args)?;
    let url = arg
        .downcast_ref::<Url>()
        .ok_or_else(|| no_overload(function))?;
    Ok(CowVal::owned(CelString::from(read(url))))
}

fn get_scheme<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    getter("getScheme", args, |u| u.scheme.clone())
}

fn get_host<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    getter("getHost", args, |u| u.host.clone())
}

fn get_hostname<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    getter("getHostname", args, |u| u.hostname().to_string())
}

fn get_port<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    getter("getPort", args, |u| u.port().to_string())
}

fn get_escaped_path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    getter("getEscapedPath", args, Url::escaped_path)
}

fn get_query<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let arg = one("getQuery", args)?;
    let url = arg
        .downcast_ref::<Url>()
        .ok_or_else(|| no_overload("getQuery"))?;
    let mut map: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = HashMap::new();
    for (key, values) in url.query() {
        let items: Vec<Box<dyn Val + 'v>> = values
            .into_iter()
            .map(|v| Box::new(CelString::from(v)) as Box<dyn Val + 'v>)
            .collect();
        map.insert(CelMapKey::from(key), Box::new(CelList::from(items)));
    }
    Ok(CowVal::owned(CelMap::from(map)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        kubernetes_url(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn urls_parse_as_go_net_url_parses_them() {
        let u = url("HTTPS://user:p%40ss@Example.com:8443/a%2Fb/../c?x=1&x=2&y=%20+z#frag");
        assert_eq!(u.scheme, "https");
        assert_eq!(u.host, "Example.com:8443");
        assert_eq!((u.hostname(), u.port()), ("Example.com", "8443"));
        assert_eq!(u.escaped_path(), "/a%2Fb/../c");
        assert_eq!(
            u.query(),
            vec![
                ("x".to_string(), vec!["1".to_string(), "2".to_string()]),
                ("y".to_string(), vec!["  z".to_string()])
            ]
        );
        let v6 = url("http://[::1]:80/");
        assert_eq!((v6.hostname(), v6.port()), ("::1", "80"));
        assert_eq!(url("/just/a/path").escaped_path(), "/just/a/path");
        assert_eq!(url("mailto:a@b").opaque, "a@b");
        let err = |t: &str| kubernetes_url(t).err().map(|e| e.to_string());
        assert_eq!(
            err("example.com").as_deref(),
            Some("parse \"example.com\": invalid URI for request")
        );
        assert_eq!(
            err("http://a:b:80/").as_deref(),
            Some("parse \"http://a:b:80/\": invalid port \":b:80\" after host")
        );
        assert_eq!(
            err("http://[1.2.3.4]/").as_deref(),
            Some("parse \"http://[1.2.3.4]/\": invalid IP-literal")
        );
        assert_eq!(
            err("http://a/%zz").as_deref(),
            Some("parse \"http://a/%zz\": invalid URL escape \"%zz\"")
        );
        assert_eq!(err("").as_deref(), Some("parse \"\": empty url"));
        assert!(url("http://a/b") == url("http://a/b"));
        assert_eq!(url("http://a/b c").go_string(), "http://a/b%20c");
    }
}
