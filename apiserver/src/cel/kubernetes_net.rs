//! Kubernetes' IP library for CEL (`library.IP` in k8s.io/apiserver), the part CRD rules use most:
//! `isIP(s)`, whether a string is an IP address as kube-apiserver parses one.
//!
//! kube-apiserver parses with Go's `netip.ParseAddr` and then refuses two forms: an address with a
//! zone (`fe80::1%eth0`) and an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`). Rust's standard
//! parsers (`std::net::IpAddr`) agree with `netip.ParseAddr` on the rest (dotted quads without
//! leading zeros, every IPv6 form) and know no zones, so no crate is needed.
//!
//! Not here yet (refused as undeclared references where kube-apiserver accepts them): the `ip(s)`
//! and `cidr(s)` values and their methods (`family()`, `containsIP()`, …), `isCIDR`.

use std::net::IpAddr;

use cel::common::types::{CelBool, CelString, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError};

/// The names this library declares (for the type checker's list of known functions).
pub const FUNCTIONS: [&str; 1] = ["isIP"];

/// Registers the library's overloads on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("isIP", "is_ip", vec![STRING_TYPE], is_ip)
}

/// Whether `text` is an IP address kube-apiserver accepts (see the module docs).
pub fn parse_ip(text: &str) -> Option<IpAddr> {
    match text.parse::<IpAddr>().ok()? {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => None,
        ip => Some(ip),
    }
}

fn is_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let no_overload = || ExecutionError::no_such_overload("isIP", Vec::new());
    let [text]: [CowVal<'b, 'v>; 1] = args.try_into().map_err(|_| no_overload())?;
    let text = text
        .as_ref()
        .downcast_ref::<CelString>()
        .ok_or_else(no_overload)?;
    Ok(CowVal::owned(CelBool::from(
        parse_ip(text.inner()).is_some(),
    )))
}

#[cfg(test)]
mod tests {
    use super::parse_ip;

    #[test]
    fn ip_addresses_as_kube_apiserver_parses_them() {
        for good in ["1.2.3.4", "::1", "2001:db8::1", "::", "::1.2.3.4"] {
            assert!(parse_ip(good).is_some(), "{good}");
        }
        for bad in [
            "01.2.3.4",
            "1.2.3",
            "::ffff:1.2.3.4",
            "fe80::1%eth0",
            "example.com",
            "",
            " 1.2.3.4",
        ] {
            assert!(parse_ip(bad).is_none(), "{bad}");
        }
    }
}
