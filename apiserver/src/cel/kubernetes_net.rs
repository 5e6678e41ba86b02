//! Kubernetes' IP and CIDR libraries for CEL (`library.IP` and `library.CIDR` in k8s.io/apiserver),
//! which kube-apiserver adds to the environment of every CRD validation rule:
//!
//! ```text
//!   isIP(s), ip(s)          ──► whether s parses / a `net.IP` value
//!   ip.isCanonical(s)       ──► whether s is how Go prints the address it parses to
//!   ip.family(), ip.isUnspecified(), isLoopback(), isLinkLocalMulticast(),
//!   isLinkLocalUnicast(), isGlobalUnicast()                   Go's netip predicates
//!   isCIDR(s), cidr(s)      ──► whether s parses / a `net.CIDR` value (address + prefix length)
//!   c.containsIP(ip | s), c.containsCIDR(cidr | s), c.ip(), c.masked(), c.prefixLength()
//!   string(ip), string(cidr), ==                               Go's printing and equality
//! ```
//!
//! # Why a parser of our own
//!
//! A rule's outcome can depend on exactly which strings parse and on the words of the error
//! (`ip('01.2.3.4')` fails the rule with Go's `ParseAddr("01.2.3.4"): IPv4 field has octet with
//! leading zero`). kube-apiserver parses with Go's `net/netip` (`ParseAddr`, `ParsePrefix`) and then
//! refuses zones and IPv4-mapped IPv6 addresses. Rust's `std::net` parsers accept and refuse much
//! the same strings but say nothing of why, so [`parse_addr`] and [`parse_prefix`] follow netip's
//! scanner step by step, with its messages; the values are then `std::net` addresses.
//!
//! # Data
//!
//! An [`Ip`] is an address without a zone (Kubernetes refuses zones, so none is kept). A [`Cidr`]
//! is an address and a prefix length as written: `cidr('10.0.0.1/8')` keeps `10.0.0.1` (that is
//! what `ip()` gives back); `masked()` clears the host bits.

use std::any::Any;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use cel::common::types::{CelBool, CelInt, CelString, STRING_TYPE, Type};
use cel::common::value::{CowVal, StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// The CEL type of an address (kube-apiserver's opaque `net.IP`).
static IP_TYPE: Type = Type::new_unspecified_type("net.IP");
/// The CEL type of a prefix (kube-apiserver's opaque `net.CIDR`).
static CIDR_TYPE: Type = Type::new_unspecified_type("net.CIDR");

/// The names this library declares (for the type checker's list of known functions).
pub const FUNCTIONS: [&str; 17] = [
    "isIP",
    "ip",
    "ip.isCanonical",
    "family",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "isCIDR",
    "cidr",
    "containsIP",
    "containsCIDR",
    "masked",
    "prefixLength",
    // `ip()` on a CIDR and `string()` of either type are overloads of names declared elsewhere;
    // listed so the checker's tables stay in one place.
    "string",
    "ip",
];

// ---------------------------------------------------------------------------------------------
// Go's netip, as far as Kubernetes uses it
// ---------------------------------------------------------------------------------------------

/// Why a string is not an address or prefix, in Go's and Kubernetes' words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    /// netip's `parseAddrError`: `ParseAddr("in"): msg (at "rest")`.
    #[error("ParseAddr({}): {msg}{}", go_quote(input), at.as_ref().map(|a| format!(" (at {})", go_quote(a))).unwrap_or_default())]
    Addr {
        input: String,
        msg: &'static str,
        at: Option<String>,
    },
    /// netip's `parsePrefixError`: `netip.ParsePrefix("in"): msg`.
    #[error("netip.ParsePrefix({}): {msg}", go_quote(input))]
    Prefix { input: String, msg: String },
}

/// Go's `strconv.Quote`, as far as the strings of addresses need it.
fn go_quote(text: &str) -> String {
    format!("{text:?}")
}

/// What netip's `ParseAddr` gives: an address and its zone (empty when none was written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub addr: IpAddr,
    pub zone: String,
}

fn addr_error(input: &str, msg: &'static str, at: Option<&str>) -> NetError {
    NetError::Addr {
        input: input.to_string(),
        msg,
        at: at.map(str::to_string),
    }
}

/// netip's `ParseAddr`: the first `.`, `:` or `%` decides how the string is read.
pub fn parse_addr(text: &str) -> Result<Parsed, NetError> {
    for b in text.bytes() {
        match b {
            b'.' => {
                let octets = parse_ipv4_fields(text, 0, text.len())?;
                return Ok(Parsed {
                    addr: IpAddr::V4(Ipv4Addr::from(octets)),
                    zone: String::new(),
                });
            }
            b':' => return parse_ipv6(text),
            b'%' => return Err(addr_error(text, "missing IPv6 address", None)),
            _ => {}
        }
    }
    Err(addr_error(text, "unable to parse IP", None))
}

/// netip's `parseIPv4Fields` on `input[from..to]`: four decimal fields, no leading zeros.
fn parse_ipv4_fields(input: &str, from: usize, to: usize) -> Result<[u8; 4], NetError> {
    let s = &input.as_bytes()[from..to];
    let rest = |i: usize| input.get(from + i..to);
    let mut fields = [0u8; 4];
    let (mut value, mut position, mut digits) = (0u32, 0usize, 0usize);
    for (i, &c) in s.iter().enumerate() {
        if c.is_ascii_digit() {
            if digits == 1 && value == 0 {
                return Err(addr_error(
                    input,
                    "IPv4 field has octet with leading zero",
                    None,
                ));
            }
            value = value * 10 + u32::from(c - b'0');
            digits += 1;
            if value > 255 {
                return Err(addr_error(input, "IPv4 field has value >255", None));
            }
        } else if c == b'.' {
            if i == 0 || i == s.len() - 1 || s[i - 1] == b'.' {
                return Err(addr_error(
                    input,
                    "IPv4 field must have at least one digit",
                    rest(i),
                ));
            }
            if position == 3 {
                return Err(addr_error(input, "IPv4 address too long", None));
            }
            fields[position] = value as u8;
            position += 1;
            value = 0;
            digits = 0;
        } else {
            return Err(addr_error(input, "unexpected character", rest(i)));
        }
    }
    if position < 3 {
        return Err(addr_error(input, "IPv4 address too short", None));
    }
    fields[3] = value as u8;
    Ok(fields)
}

/// netip's `parseIPv6`: hex groups, one `::`, an embedded IPv4 address at the end, a zone.
fn parse_ipv6(input: &str) -> Result<Parsed, NetError> {
    // Long: a step-by-step port of Go's `netip.parseIPv6`, kept in its order so that what it
    // accepts and the error it gives for each input read side by side with Go's.
    let (mut s, zone) = match input.find('%') {
        Some(i) => {
            let zone = &input[i + 1..];
            if zone.is_empty() {
                return Err(addr_error(input, "zone must be a non-empty string", None));
            }
            (&input[..i], zone)
        }
        None => (input, ""),
    };
    let done = |ip: [u8; 16]| Parsed {
        addr: IpAddr::V6(Ipv6Addr::from(ip)),
        zone: zone.to_string(),
    };
    let mut ip = [0u8; 16];
    let mut ellipsis: Option<usize> = None;
    if s.starts_with("::") {
        ellipsis = Some(0);
        s = &s[2..];
        if s.is_empty() {
            return Ok(done(ip));
        }
    }
    let mut i = 0usize;
    while i < 16 {
        let bytes = s.as_bytes();
        let mut off = 0usize;
        let mut acc = 0u32;
        while off < bytes.len() {
            let Some(digit) = (bytes[off] as char).to_digit(16) else {
                break;
            };
            acc = (acc << 4) + digit;
            if off > 3 {
                return Err(addr_error(
                    input,
                    "each group must have 4 or less digits",
                    Some(s),
                ));
            }
            if acc > 0xffff {
                return Err(addr_error(input, "IPv6 field has value >=2^16", Some(s)));
            }
            off += 1;
        }
        if off == 0 {
            return Err(addr_error(
                input,
                "each colon-separated field must have at least one digit",
                Some(s),
            ));
        }
        if off < bytes.len() && bytes[off] == b'.' {
            if ellipsis.is_none() && i != 12 {
                return Err(addr_error(
                    input,
                    "embedded IPv4 address must replace the final 2 fields of the address",
                    Some(s),
                ));
            }
            if i + 4 > 16 {
                return Err(addr_error(
                    input,
                    "too many hex fields to fit an embedded IPv4 at the end of the address",
                    Some(s),
                ));
            }
            let end = if zone.is_empty() {
                input.len()
            } else {
                input.len() - zone.len() - 1
            };
            let octets = parse_ipv4_fields(input, end - s.len(), end)?;
            ip[i..i + 4].copy_from_slice(&octets);
            s = "";
            i += 4;
            break;
        }
        ip[i] = (acc >> 8) as u8;
        ip[i + 1] = acc as u8;
        i += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if !s.starts_with(':') {
            return Err(addr_error(
                input,
                "unexpected character, want colon",
                Some(s),
            ));
        } else if s.len() == 1 {
            return Err(addr_error(
                input,
                "colon must be followed by more characters",
                Some(s),
            ));
        }
        s = &s[1..];
        if s.starts_with(':') {
            if ellipsis.is_some() {
                return Err(addr_error(input, "multiple :: in address", Some(s)));
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Err(addr_error(input, "trailing garbage after address", Some(s)));
    }
    if i < 16 {
        let Some(at) = ellipsis else {
            return Err(addr_error(input, "address string too short", None));
        };
        let n = 16 - i;
        for j in (at..i).rev() {
            ip[j + n] = ip[j];
        }
        ip[at..at + n].fill(0);
    } else if ellipsis.is_some() {
        return Err(addr_error(
            input,
            "the :: must expand to at least one field of zeros",
            None,
        ));
    }
    Ok(done(ip))
}

/// netip's `ParsePrefix`: an address (no zone), `/`, a decimal length without sign or leading zero.
pub fn parse_prefix(text: &str) -> Result<(Parsed, u8), NetError> {
    let prefix_error = |msg: String| NetError::Prefix {
        input: text.to_string(),
        msg,
    };
    let Some(slash) = text.rfind('/') else {
        return Err(prefix_error("no '/'".into()));
    };
    let parsed = parse_addr(&text[..slash]).map_err(|e| prefix_error(e.to_string()))?;
    if parsed.addr.is_ipv6() && !parsed.zone.is_empty() {
        return Err(prefix_error(
            "IPv6 zones cannot be present in a prefix".into(),
        ));
    }
    let bits_text = &text[slash + 1..];
    let bad = || prefix_error(format!("bad bits after slash: {}", go_quote(bits_text)));
    let first = bits_text.as_bytes().first().copied();
    if bits_text.len() > 1 && !matches!(first, Some(b'1'..=b'9')) {
        return Err(bad());
    }
    // strconv.Atoi: an optional sign, then decimal digits, within 64 bits.
    let digits = bits_text.strip_prefix(['+', '-']).unwrap_or(bits_text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let bits: i64 = bits_text.parse().map_err(|_| bad())?;
    let max = if parsed.addr.is_ipv4() { 32 } else { 128 };
    if !(0..=max).contains(&bits) {
        return Err(prefix_error("prefix length out of range".into()));
    }
    Ok((parsed, bits as u8))
}

/// Go's `Addr.String()`: dotted decimal, or RFC 5952 (the longest run of two or more zero groups
/// as `::`, the first of equal runs; an IPv4-mapped address as `::ffff:a.b.c.d`).
pub fn go_string(addr: &IpAddr) -> String {
    match addr {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return format!("::ffff:{v4}");
            }
            let groups = v6.segments();
            let (mut best_start, mut best_len) = (usize::MAX, 0usize);
            let mut i = 0;
            while i < 8 {
                if groups[i] == 0 {
                    let start = i;
                    while i < 8 && groups[i] == 0 {
                        i += 1;
                    }
                    if i - start >= 2 && i - start > best_len {
                        (best_start, best_len) = (start, i - start);
                    }
                } else {
                    i += 1;
                }
            }
            let mut out = String::new();
            let mut i = 0;
            while i < 8 {
                if i == best_start {
                    out.push_str("::");
                    i += best_len;
                    continue;
                }
                if i > 0 && !out.ends_with(':') {
                    out.push(':');
                }
                out.push_str(&format!("{:x}", groups[i]));
                i += 1;
            }
            out
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The values
// ---------------------------------------------------------------------------------------------

/// Why `ip(s)` or `cidr(s)` failed, in Kubernetes' words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeNetError {
    #[error(
        "IP Address {} parse error during conversion from string: {source}",
        go_quote(input)
    )]
    IpParse { input: String, source: NetError },
    #[error("IP address {} with zone value is not allowed", go_quote(.0))]
    Zone(String),
    #[error("IPv4-mapped IPv6 address {} is not allowed", go_quote(.0))]
    Mapped(String),
    /// Kubernetes wraps netip's error twice (once in `parseCIDR`, once in `cidr()`).
    #[error(
        "network address parse error during conversion from string: network address parse error during conversion from string: {0}"
    )]
    CidrParse(NetError),
    #[error("network address parse error during conversion from string: {0}")]
    Cidr(Box<KubeNetError>),
}

/// An address as a rule holds it (`net.IP`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ip(pub IpAddr);

/// A prefix as a rule holds it (`net.CIDR`). Invariant: `bits` is at most the address's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub bits: u8,
}

/// Kubernetes' `parseIPAddr`: netip's parse, then no zone and no IPv4-mapped address.
pub fn parse_ip(text: &str) -> Result<Ip, KubeNetError> {
    let parsed = parse_addr(text).map_err(|source| KubeNetError::IpParse {
        input: text.to_string(),
        source,
    })?;
    if !parsed.zone.is_empty() {
        return Err(KubeNetError::Zone(text.to_string()));
    }
    if is_4in6(&parsed.addr) {
        return Err(KubeNetError::Mapped(text.to_string()));
    }
    Ok(Ip(parsed.addr))
}

/// Kubernetes' `parseCIDR`, with the error as `cidr()` words it.
pub fn parse_cidr(text: &str) -> Result<Cidr, KubeNetError> {
    let (parsed, bits) = parse_prefix(text).map_err(KubeNetError::CidrParse)?;
    if is_4in6(&parsed.addr) {
        return Err(KubeNetError::Cidr(Box::new(KubeNetError::Mapped(
            text.to_string(),
        ))));
    }
    Ok(Cidr {
        addr: parsed.addr,
        bits,
    })
}

fn is_4in6(addr: &IpAddr) -> bool {
    matches!(addr, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some())
}

/// The address as a 128-bit number and its length in bits (32 or 128).
fn as_bits(addr: &IpAddr) -> (u128, u32) {
    match addr {
        IpAddr::V4(v4) => (u128::from(u32::from(*v4)), 32),
        IpAddr::V6(v6) => (u128::from(*v6), 128),
    }
}

/// The mask of the first `bits` bits of an address `length` bits long.
fn mask(bits: u8, length: u32) -> u128 {
    let bits = u32::from(bits).min(length);
    if bits == 0 {
        return 0;
    }
    let ones = if bits == 128 {
        u128::MAX
    } else {
        ((1u128 << bits) - 1) << (128 - bits)
    };
    ones >> (128 - length)
}

impl Ip {
    fn octet0(&self) -> Option<[u8; 4]> {
        match self.0 {
            IpAddr::V4(v4) => Some(v4.octets()),
            IpAddr::V6(_) => None,
        }
    }
    fn group0(&self) -> u16 {
        match self.0 {
            IpAddr::V6(v6) => v6.segments()[0],
            IpAddr::V4(_) => 0,
        }
    }
    pub fn family(&self) -> i64 {
        if self.0.is_ipv4() { 4 } else { 6 }
    }
    pub fn is_unspecified(&self) -> bool {
        self.0.is_unspecified()
    }
    pub fn is_loopback(&self) -> bool {
        match self.octet0() {
            Some(o) => o[0] == 127,
            None => self.0 == IpAddr::V6(Ipv6Addr::LOCALHOST),
        }
    }
    fn is_multicast(&self) -> bool {
        match self.octet0() {
            Some(o) => o[0] & 0xf0 == 0xe0,
            None => self.group0() >> 8 == 0xff,
        }
    }
    pub fn is_link_local_multicast(&self) -> bool {
        match self.octet0() {
            Some(o) => o[0] == 224 && o[1] == 0 && o[2] == 0,
            None => self.group0() & 0xff0f == 0xff02,
        }
    }
    pub fn is_link_local_unicast(&self) -> bool {
        match self.octet0() {
            Some(o) => o[0] == 169 && o[1] == 254,
            None => self.group0() & 0xffc0 == 0xfe80,
        }
    }
    /// Go's rule: private and unique-local addresses count as global unicast.
    pub fn is_global_unicast(&self) -> bool {
        if self.0 == IpAddr::V4(Ipv4Addr::UNSPECIFIED) || self.0 == IpAddr::V4(Ipv4Addr::BROADCAST)
        {
            return false;
        }
        self.0 != IpAddr::V6(Ipv6Addr::UNSPECIFIED)
            && !self.is_loopback()
            && !self.is_multicast()
            && !self.is_link_local_unicast()
    }
    /// cel-go's size of the value (what the cost of a call reads): its bytes.
    pub fn size(&self) -> u64 {
        if self.0.is_ipv4() { 4 } else { 16 }
    }
}

impl Cidr {
    /// netip's `Prefix.Contains`: same family, same first `bits` bits.
    pub fn contains(&self, ip: &IpAddr) -> bool {
        let ((a, la), (b, lb)) = (as_bits(&self.addr), as_bits(ip));
        la == lb && (a ^ b) & mask(self.bits, la) == 0
    }
    /// netip's `Prefix.Overlaps`.
    fn overlaps(&self, other: &Cidr) -> bool {
        if self == other {
            return true;
        }
        let ((a, la), (b, lb)) = (as_bits(&self.addr), as_bits(&other.addr));
        if la != lb {
            return false;
        }
        let bits = self.bits.min(other.bits);
        (a ^ b) & mask(bits, la) == 0
    }
    /// Kubernetes' `containsCIDR`: overlapping, and at least as wide.
    pub fn contains_cidr(&self, other: &Cidr) -> bool {
        self.overlaps(other) && self.bits <= other.bits
    }
    /// netip's `Prefix.Masked`: the host bits cleared.
    pub fn masked(&self) -> Cidr {
        let (a, length) = as_bits(&self.addr);
        let kept = a & mask(self.bits, length);
        let addr = match self.addr {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(kept as u32)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(kept)),
        };
        Cidr {
            addr,
            bits: self.bits,
        }
    }
    /// cel-go's size of the value: the prefix's bytes, rounded up.
    pub fn size(&self) -> u64 {
        u64::from(self.bits).div_ceil(8)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", go_string(&self.addr), self.bits)
    }
}

impl Val for Ip {
    fn get_type(&self) -> &Type {
        <Self as Val>::cel_type()
    }
    fn cel_type() -> &'static Type {
        &IP_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<Ip>().is_some_and(|o| o == self)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(*self)
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for Ip {}

impl Val for Cidr {
    fn get_type(&self) -> &Type {
        <Self as Val>::cel_type()
    }
    fn cel_type() -> &'static Type {
        &CIDR_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<Cidr>().is_some_and(|o| o == self)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(*self)
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for Cidr {}

/// cel-go's size of a value of this library (for the runtime cost meter), `None` for others.
pub fn cost_size(value: &dyn Val) -> Option<u64> {
    if let Some(ip) = value.downcast_ref::<Ip>() {
        return Some(ip.size());
    }
    value.downcast_ref::<Cidr>().map(Cidr::size)
}

// ---------------------------------------------------------------------------------------------
// The functions
// ---------------------------------------------------------------------------------------------

type Function = cel::common::functions::Function;

/// Registers the library's overloads on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    let ip = || IP_TYPE.to_owned();
    let cidr = || CIDR_TYPE.to_owned();
    let globals: [(&str, &str, Type, Function); 7] = [
        ("isIP", "is_ip", STRING_TYPE, is_ip),
        ("ip", "string_to_ip", STRING_TYPE, to_ip),
        (
            "ip.isCanonical",
            "ip_is_canonical",
            STRING_TYPE,
            is_canonical,
        ),
        ("isCIDR", "is_cidr", STRING_TYPE, is_cidr),
        ("cidr", "string_to_cidr", STRING_TYPE, to_cidr),
        ("string", "ip_to_string", ip(), to_string),
        ("string", "cidr_to_string", cidr(), to_string),
    ];
    for (name, id, arg, function) in globals {
        env.add_overload(name, id, vec![arg], function)?;
    }
    let ip_members: [(&str, &str, Function); 6] = [
        ("family", "ip_family", family),
        ("isUnspecified", "ip_is_unspecified", is_unspecified),
        ("isLoopback", "ip_is_loopback", is_loopback),
        (
            "isLinkLocalMulticast",
            "ip_is_link_local_multicast",
            is_link_local_multicast,
        ),
        (
            "isLinkLocalUnicast",
            "ip_is_link_local_unicast",
            is_link_local_unicast,
        ),
        ("isGlobalUnicast", "ip_is_global_unicast", is_global_unicast),
    ];
    for (name, id, function) in ip_members {
        env.add_member_overload(name, id, ip(), vec![], function)?;
    }
    let cidr_members: [(&str, &str, Vec<Type>, Function); 7] = [
        (
            "containsIP",
            "cidr_contains_ip_string",
            vec![STRING_TYPE],
            contains_ip,
        ),
        ("containsIP", "cidr_contains_ip_ip", vec![ip()], contains_ip),
        (
            "containsCIDR",
            "cidr_contains_cidr_string",
            vec![STRING_TYPE],
            contains_cidr,
        ),
        (
            "containsCIDR",
            "cidr_contains_cidr",
            vec![cidr()],
            contains_cidr,
        ),
        ("ip", "cidr_ip", vec![], cidr_ip),
        ("prefixLength", "cidr_prefix_length", vec![], prefix_length),
        ("masked", "cidr_masked", vec![], masked),
    ];
    for (name, id, args, function) in cidr_members {
        env.add_member_overload(name, id, cidr(), args, function)?;
    }
    Ok(())
}

fn no_overload(function: &str) -> ExecutionError {
    ExecutionError::no_such_overload(function, Vec::new())
}

fn failed(function: &str, error: KubeNetError) -> ExecutionError {
    ExecutionError::function_error(function, error.to_string())
}

fn text_of(function: &str, value: &dyn Val) -> Result<String, ExecutionError> {
    value
        .downcast_ref::<CelString>()
        .map(|s| s.inner().to_string())
        .ok_or_else(|| no_overload(function))
}

fn args_of<'b, 'v, const N: usize>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
) -> Result<[CowVal<'b, 'v>; N], ExecutionError> {
    args.try_into().map_err(|_| no_overload(function))
}

fn ip_of(function: &str, value: &dyn Val) -> Result<Ip, ExecutionError> {
    value
        .downcast_ref::<Ip>()
        .copied()
        .ok_or_else(|| no_overload(function))
}

fn cidr_of(function: &str, value: &dyn Val) -> Result<Cidr, ExecutionError> {
    value
        .downcast_ref::<Cidr>()
        .copied()
        .ok_or_else(|| no_overload(function))
}

fn boolean<'b, 'v>(b: bool) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::owned(CelBool::from(b)))
}

fn is_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [text] = args_of("isIP", args)?;
    boolean(parse_ip(&text_of("isIP", text.as_ref())?).is_ok())
}

fn to_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [text] = args_of("ip", args)?;
    let ip = parse_ip(&text_of("ip", text.as_ref())?).map_err(|e| failed("ip", e))?;
    Ok(CowVal::owned(ip))
}

fn is_canonical<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let function = "ip.isCanonical";
    let [text] = args_of(function, args)?;
    let text = text_of(function, text.as_ref())?;
    let ip = parse_ip(&text).map_err(|e| failed(function, e))?;
    boolean(go_string(&ip.0) == text)
}

fn is_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [text] = args_of("isCIDR", args)?;
    boolean(parse_cidr(&text_of("isCIDR", text.as_ref())?).is_ok())
}

fn to_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [text] = args_of("cidr", args)?;
    let cidr = parse_cidr(&text_of("cidr", text.as_ref())?).map_err(|e| failed("cidr", e))?;
    Ok(CowVal::owned(cidr))
}

fn to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [value] = args_of("string", args)?;
    let text = if let Some(ip) = value.downcast_ref::<Ip>() {
        go_string(&ip.0)
    } else {
        cidr_of("string", value.as_ref())?.to_string()
    };
    Ok(CowVal::owned(CelString::from(text)))
}

fn family<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [ip] = args_of("family", args)?;
    Ok(CowVal::owned(CelInt::from(
        ip_of("family", ip.as_ref())?.family(),
    )))
}

/// One predicate of an address, as a rule calls it (`ip.isLoopback()`).
fn predicate<'b, 'v>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
    test: fn(&Ip) -> bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [ip] = args_of(function, args)?;
    boolean(test(&ip_of(function, ip.as_ref())?))
}

fn is_unspecified<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    predicate("isUnspecified", args, Ip::is_unspecified)
}

fn is_loopback<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    predicate("isLoopback", args, Ip::is_loopback)
}

fn is_link_local_multicast<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    predicate("isLinkLocalMulticast", args, Ip::is_link_local_multicast)
}

fn is_link_local_unicast<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    predicate("isLinkLocalUnicast", args, Ip::is_link_local_unicast)
}

fn is_global_unicast<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    predicate("isGlobalUnicast", args, Ip::is_global_unicast)
}

fn contains_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let function = "containsIP";
    let [cidr, other] = args_of(function, args)?;
    let cidr = cidr_of(function, cidr.as_ref())?;
    // Kubernetes hands the parse error to the IP overload, which answers "no such overload"
    // rather than the error (unlike `containsCIDR`, which passes the error on).
    let ip = match other.downcast_ref::<CelString>() {
        Some(text) => parse_ip(text.inner()).map_err(|_| no_overload(function))?,
        None => ip_of(function, other.as_ref())?,
    };
    boolean(cidr.contains(&ip.0))
}

fn contains_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let function = "containsCIDR";
    let [cidr, other] = args_of(function, args)?;
    let cidr = cidr_of(function, cidr.as_ref())?;
    let other = match other.downcast_ref::<CelString>() {
        Some(text) => parse_cidr(text.inner()).map_err(|e| failed(function, e))?,
        None => cidr_of(function, other.as_ref())?,
    };
    boolean(cidr.contains_cidr(&other))
}

fn cidr_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [cidr] = args_of("ip", args)?;
    Ok(CowVal::owned(Ip(cidr_of("ip", cidr.as_ref())?.addr)))
}

fn prefix_length<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [cidr] = args_of("prefixLength", args)?;
    let bits = cidr_of("prefixLength", cidr.as_ref())?.bits;
    Ok(CowVal::owned(CelInt::from(i64::from(bits))))
}

fn masked<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [cidr] = args_of("masked", args)?;
    Ok(CowVal::owned(cidr_of("masked", cidr.as_ref())?.masked()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_as_go_netip_parses_them() {
        for good in [
            "1.2.3.4",
            "::1",
            "2001:db8::1",
            "::",
            "::1.2.3.4",
            "1:2:3:4:5:6:7:8",
        ] {
            assert!(parse_ip(good).is_ok(), "{good}");
        }
        let err = |text: &str| parse_ip(text).err().map(|e| e.to_string());
        assert_eq!(
            err("01.2.3.4").as_deref(),
            Some(
                "IP Address \"01.2.3.4\" parse error during conversion from string: ParseAddr(\"01.2.3.4\"): IPv4 field has octet with leading zero"
            )
        );
        assert_eq!(
            err("1.2.3").as_deref(),
            Some(
                "IP Address \"1.2.3\" parse error during conversion from string: ParseAddr(\"1.2.3\"): IPv4 address too short"
            )
        );
        assert_eq!(
            err("::ffff:1.2.3.4").as_deref(),
            Some("IPv4-mapped IPv6 address \"::ffff:1.2.3.4\" is not allowed")
        );
        assert_eq!(
            err("fe80::1%eth0").as_deref(),
            Some("IP address \"fe80::1%eth0\" with zone value is not allowed")
        );
        assert_eq!(
            err("1:2::3:4:5:6:7:8").as_deref(),
            Some(
                "IP Address \"1:2::3:4:5:6:7:8\" parse error during conversion from string: ParseAddr(\"1:2::3:4:5:6:7:8\"): the :: must expand to at least one field of zeros"
            )
        );
        for bad in [
            "example.com",
            "",
            " 1.2.3.4",
            "1.2.3.4.5",
            "12345::",
            ":1",
            "1:",
        ] {
            assert!(parse_ip(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn addresses_print_as_go_prints_them() {
        for (text, printed) in [
            ("::1.2.3.4", "::102:304"),
            ("2001:0db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"),
            ("1:0:2:3:4:5:6:7", "1:0:2:3:4:5:6:7"),
            ("0:0:0:0:0:0:0:0", "::"),
            ("FE80::A", "fe80::a"),
        ] {
            let ip = parse_ip(text).map(|ip| go_string(&ip.0));
            assert_eq!(ip.as_deref(), Ok(printed), "{text}");
        }
    }

    #[test]
    fn prefixes_parse_contain_and_mask_as_go_does() {
        let c = |text: &str| parse_cidr(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(c("10.1.2.3/8").masked().to_string(), "10.0.0.0/8");
        assert_eq!(c("10.1.2.3/8").to_string(), "10.1.2.3/8");
        assert!(
            c("10.0.0.0/8").contains(
                &"10.255.0.1"
                    .parse()
                    .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
            )
        );
        assert!(c("10.0.0.0/8").contains_cidr(&c("10.1.0.0/16")));
        assert!(!c("10.1.0.0/16").contains_cidr(&c("10.0.0.0/8")));
        assert!(!c("10.0.0.0/8").contains_cidr(&c("::/0")));
        assert!(c("::/0").contains_cidr(&c("2001:db8::/32")));
        assert_eq!(c("2001:db8::1/64").size(), 8);
        for bad in [
            "10.0.0.0/33",
            "10.0.0.0/08",
            "10.0.0.0/+8",
            "10.0.0.0",
            "::ffff:1.2.3.4/120",
            "fe80::1%e/64",
            "1.2.3.4/",
        ] {
            assert!(parse_cidr(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_cidr("10.0.0.0/33")
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some(
                "network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix(\"10.0.0.0/33\"): prefix length out of range"
            )
        );
    }
}
