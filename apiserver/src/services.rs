//! # Services: the addresses and ports kube-apiserver allocates for them
//!
//! A Service created on kube-apiserver comes back with fields nobody sent: a cluster IP from the
//! service range (`spec.clusterIP`, `spec.clusterIPs`) and, for `NodePort` and `LoadBalancer`
//! Services, a node port for each port. Controllers that manage Services read these back, so the
//! embedded server allocates them as kube-apiserver 1.37 (our yardstick) does:
//!
//! ```text
//!  create ─▶ strategy (defaults: type, sessionAffinity, externalTrafficPolicy, each port's
//!            protocol and targetPort; unless ExternalName, internalTrafficPolicy Cluster and
//!            the IPv4 single stack: ipFamilies [IPv4], ipFamilyPolicy SingleStack)
//!         ─▶ allocate, under the allocator's lock until the object is stored (a dry run gets
//!            the addresses a real create would, and holds none of them):
//!              clusterIP  the one asked for, if in the range and free (else 422), or the lowest
//!                         free address of SERVICE_RANGE (.1 is the `kubernetes` Service's);
//!                         "None" (headless) allocates nothing
//!              nodePort   the one asked for, if free (else 422, also when another entry of
//!                         the same protocol asks for it), or the one another entry of the same
//!                         port number has (TCP and UDP 53 share one), or the lowest free of
//!                         NODE_PORTS; a ClusterIP Service asking for one is refused, one that
//!                         was NodePort lets its node ports go
//!  update ─▶ what the client left out is kept (keep_allocated): a cluster IP left out is the old
//!            one, a port without a node port gets the one the old port of that name had; a
//!            cluster IP changed is refused (422: immutable)
//! ```
//!
//! 1.20 differed: no `internalTrafficPolicy` or `ipFamilies` fields (dual stack was alpha), nothing
//! allocated for a dry run, a node port asked twice in one Service reported as `Duplicate value`,
//! and an update kept nothing (a cluster IP left out was refused: "primary clusterIP can not be
//! unset"; ports left without node ports got new ones). The conformance case documents each.
//!
//! An address or port is free when no stored Service holds it: allocation scans the stored
//! Services, so a deleted Service's address is free again at once. Unlike kube-apiserver, which
//! picks at random, addresses and ports are handed out in order, which makes tests repeatable; no
//! client may rely on either order. Only IPv4 single-stack is served.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use serde_json::{Map, Value, json};

use crate::resource::ResourceType;
use crate::status::{Cause, StatusError};
use crate::store::Store;

/// The service range: kubeadm's default, `10.96.0.0/12` (network address and prefix length).
pub const SERVICE_RANGE: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 96, 0, 0), 12);

/// The node port range, kube-apiserver's default `30000-32767`.
pub const NODE_PORTS: std::ops::RangeInclusive<u16> = 30000..=32767;

/// Serializes allocations: held from the scan of the stored Services until the new object is
/// stored, so two Services created at once never get one address. One per server, shared by every
/// handle on its store.
#[derive(Debug, Default)]
pub struct ServiceAllocator {
    lock: Mutex<()>,
}

impl ServiceAllocator {
    /// Holds the allocator until the guard is dropped (after the write is stored).
    pub(crate) fn hold(&self) -> MutexGuard<'_, ()> {
        self.lock.lock()
    }
}

/// Whether `resource` is the core Services kind.
pub(crate) fn is_services(resource: &ResourceType) -> bool {
    resource.group.is_empty() && resource.kind == "Service"
}

/// The defaults kube-apiserver fills in a Service (see the [module docs](self)).
pub(crate) fn apply_defaults(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let kind = spec
        .entry("type")
        .or_insert_with(|| "ClusterIP".into())
        .as_str()
        .unwrap_or("ClusterIP")
        .to_string();
    spec.entry("sessionAffinity")
        .or_insert_with(|| "None".into());
    if kind == "NodePort" || kind == "LoadBalancer" {
        spec.entry("externalTrafficPolicy")
            .or_insert_with(|| "Cluster".into());
    }
    if kind != "ExternalName" {
        spec.entry("internalTrafficPolicy")
            .or_insert_with(|| "Cluster".into());
        spec.entry("ipFamilies").or_insert_with(|| json!(["IPv4"]));
        spec.entry("ipFamilyPolicy")
            .or_insert_with(|| "SingleStack".into());
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            port.entry("protocol").or_insert_with(|| "TCP".into());
            if let Some(number) = port.get("port").cloned() {
                port.entry("targetPort").or_insert(number);
            }
        }
    }
}

/// On an update, keeps what `old` had allocated and the client left out of `new` (1.37's
/// `patchAllocatedValues`): a missing cluster IP (and clusterIPs) is the old one, and a port without
/// a node port gets the one the old port of the same name had, unless another port of `new` asks
/// for it. Then refuses a changed cluster IP (422, immutable). Called before [`allocate`].
pub(crate) fn check_update(
    resource: &ResourceType,
    name: &str,
    old: &Value,
    new: &mut Value,
) -> Result<(), StatusError> {
    if new.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        return Ok(());
    }
    keep_allocated(old, new);
    let Some(old_ip) = old
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .filter(|ip| !ip.is_empty())
    else {
        return Ok(());
    };
    let message = match new.pointer("/spec/clusterIP").and_then(Value::as_str) {
        None | Some("") => {
            "Invalid value: []string(nil): primary clusterIP can not be unset".to_string()
        }
        Some(ip) if ip != old_ip => format!("Invalid value: {ip:?}: field is immutable"),
        Some(_) => return Ok(()),
    };
    Err(cause(
        resource,
        name,
        "FieldValueInvalid",
        "spec.clusterIPs[0]",
        message,
    ))
}

/// The allocated values of `old` that `new` leaves out, copied in (see [`check_update`]); `new` is
/// not an ExternalName Service.
fn keep_allocated(old: &Value, new: &mut Value) {
    let (Some(old_spec), Some(spec)) = (
        old.get("spec").and_then(Value::as_object),
        new.get_mut("spec").and_then(Value::as_object_mut),
    ) else {
        return;
    };
    if kind_of(old_spec) == "ExternalName" {
        return;
    }
    if spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        if let Some(ip) = old_spec.get("clusterIP").filter(|ip| ip.is_string()) {
            spec.insert("clusterIP".into(), ip.clone());
        }
    }
    let no_ips = spec
        .get("clusterIPs")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if no_ips {
        if let Some(ips) = old_spec
            .get("clusterIPs")
            .filter(|ips| ips.as_array().is_some_and(|a| !a.is_empty()))
        {
            spec.insert("clusterIPs".into(), ips.clone());
        }
    }
    if !(takes_node_ports(kind_of(old_spec)) && takes_node_ports(kind_of(spec))) {
        return;
    }
    let ports_of = |spec: &Map<String, Value>| -> Vec<Value> {
        spec.get("ports")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let used_by = |ports: &[Value]| -> HashSet<u64> {
        ports
            .iter()
            .filter_map(node_port_of)
            .filter(|p| *p != 0)
            .collect()
    };
    let old_ports = ports_of(old_spec);
    let old_used = used_by(&old_ports);
    let new_used = used_by(&ports_of(spec));
    // A node port both the old and the new ports name is the new ports' to keep.
    let used: HashSet<u64> = old_used.intersection(&new_used).copied().collect();
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return;
    };
    let name_of = |p: &Value| p.get("name").cloned().unwrap_or(Value::Null);
    for port in ports.iter_mut() {
        if node_port_of(port).is_some_and(|p| p != 0) {
            continue;
        }
        let name = name_of(port);
        let old_value = old_ports
            .iter()
            .find(|p| name_of(p) == name)
            .and_then(node_port_of)
            .filter(|p| *p != 0 && !used.contains(p));
        if let (Some(node_port), Some(port)) = (old_value, port.as_object_mut()) {
            port.insert("nodePort".into(), node_port.into());
        }
    }
}

/// The Services stored now, taken with the allocator held and before the write's transaction
/// (which holds the store).
pub(crate) fn stored(store: &Store, resource: &ResourceType) -> Vec<Arc<Value>> {
    store
        .snapshot(&resource.qualified())
        .into_iter()
        .map(|stored| stored.object)
        .collect()
}

/// Allocates what `object` (a Service to be stored as `name` in `namespace`) still lacks: its
/// cluster IP and its node ports. Checks that addresses and ports it asks
/// for are in range and held by no other Service of `stored` (from [`stored`], with the
/// allocator held until the write is stored).
///
/// The steps, each a function below: the cluster IP ([`allocate_cluster_ip`]); for a type without
/// node ports, letting them go or refusing them ([`without_node_ports`]); else the node ports
/// asked for checked ([`check_asked_node_ports`]) and the missing ones assigned
/// ([`assign_node_ports`]).
pub(crate) fn allocate(
    stored: &[Arc<Value>],
    resource: &ResourceType,
    namespace: Option<&str>,
    name: &str,
    object: &mut Value,
) -> Result<(), StatusError> {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let kind = kind_of(spec).to_string();
    if kind == "ExternalName" {
        return Ok(());
    }
    // This Service as stored before this write (none on a create), and every other one.
    let me = resource.key(namespace, name);
    let (mine, others): (Vec<&Value>, Vec<&Value>) = stored
        .iter()
        .map(|object| object.as_ref())
        .partition(|object| key_of(resource, object) == me);
    let before = mine.first().copied();
    let invalid =
        |field: &str, message: String| cause(resource, name, "FieldValueInvalid", field, message);

    allocate_cluster_ip(spec, &others, &invalid)?;
    if !takes_node_ports(&kind) {
        let had_node_ports = before.is_some_and(|old| {
            old.get("spec")
                .and_then(Value::as_object)
                .is_some_and(|spec| takes_node_ports(kind_of(spec)))
        });
        return without_node_ports(spec, &kind, had_node_ports, resource, name);
    }
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    let taken = held_node_ports(&others);
    let asked = check_asked_node_ports(ports, &taken, &invalid)?;
    // Unavailable for a fresh node port: held by another Service, asked for by this one, or held
    // by this one before (an update that leaves its node ports out gets new ones, as on
    // kube-apiserver 1.20).
    let mut unavailable: HashSet<u16> = taken;
    unavailable.extend(asked.iter().map(|(port, _)| *port));
    if let Some(old) = before {
        unavailable.extend(held_node_ports(&[old]));
    }
    assign_node_ports(ports, unavailable)
}

/// How a field's invalid value is refused (`FieldValueInvalid` on this Service).
type Invalid<'a> = dyn Fn(&str, String) -> StatusError + 'a;

/// The cluster IP: `None` (headless) kept, one asked for checked (a valid address, in range, held
/// by none of `others`), else the lowest free one.
fn allocate_cluster_ip(
    spec: &mut Map<String, Value>,
    others: &[&Value],
    invalid: &Invalid<'_>,
) -> Result<(), StatusError> {
    let asked = spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .filter(|ip| !ip.is_empty())
        .map(str::to_string);
    match asked.as_deref() {
        Some("None") => {
            spec.insert("clusterIPs".into(), json!(["None"]));
        }
        Some(ip) => {
            let held = held_ips(others);
            let parsed: Option<Ipv4Addr> = ip.parse().ok();
            match parsed {
                Some(address) if !in_range(address) => {
                    return Err(invalid(
                        "spec.clusterIPs",
                        format!(
                            "Invalid value: []string{{{ip:?}}}: failed to allocate IP {ip}: \
                             the provided IP ({ip}) is not in the valid range"
                        ),
                    ));
                }
                Some(address) if held.contains(&address) => {
                    return Err(invalid(
                        "spec.clusterIPs",
                        format!(
                            "Invalid value: []string{{{ip:?}}}: failed to allocate IP {ip}: \
                             provided IP is already allocated"
                        ),
                    ));
                }
                Some(_) => {
                    spec.insert("clusterIPs".into(), json!([ip]));
                }
                None => {
                    return Err(invalid(
                        "spec.clusterIPs[0]",
                        format!("Invalid value: {ip:?}: must be a valid IP address"),
                    ));
                }
            }
        }
        None => {
            let address = free_ip(&held_ips(others)).ok_or_else(|| {
                StatusError::internal("failed to allocate a serviceIP: range is full")
            })?;
            spec.insert("clusterIP".into(), address.to_string().into());
            spec.insert("clusterIPs".into(), json!([address.to_string()]));
        }
    }
    Ok(())
}

/// A Service whose type has no node ports (`kind`): one that had them (a NodePort Service turned
/// ClusterIP) lets them go; one that asks for a node port is refused.
fn without_node_ports(
    spec: &mut Map<String, Value>,
    kind: &str,
    had_node_ports: bool,
    resource: &ResourceType,
    name: &str,
) -> Result<(), StatusError> {
    if had_node_ports {
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                port.remove("nodePort");
            }
        }
        spec.remove("externalTrafficPolicy");
        return Ok(());
    }
    let asked = spec
        .get("ports")
        .and_then(Value::as_array)
        .and_then(|ports| ports.iter().position(|port| node_port_of(port).is_some()));
    match asked {
        Some(index) => Err(cause(
            resource,
            name,
            "FieldValueForbidden",
            &format!("spec.ports[{index}].nodePort"),
            format!("Forbidden: may not be used when `type` is '{kind}'"),
        )),
        None => Ok(()),
    }
}

/// The node ports `ports` asks for, as (port, protocol): each in range, held by no other Service
/// (`taken`), and shared within this one only by entries of different protocols.
fn check_asked_node_ports(
    ports: &[Value],
    taken: &HashSet<u16>,
    invalid: &Invalid<'_>,
) -> Result<Vec<(u16, String)>, StatusError> {
    let mut asked: Vec<(u16, String)> = Vec::new();
    for (index, port) in ports.iter().enumerate() {
        let Some(number) = node_port_of(port) else {
            continue;
        };
        let field = format!("spec.ports[{index}].nodePort");
        let protocol = port
            .get("protocol")
            .and_then(Value::as_str)
            .unwrap_or("TCP")
            .to_string();
        let Some(fits) = u16::try_from(number)
            .ok()
            .filter(|p| NODE_PORTS.contains(p))
        else {
            return Err(invalid(
                &field,
                format!(
                    "Invalid value: {number}: provided port is not in the valid range. The \
                     range of valid ports is {}-{}",
                    NODE_PORTS.start(),
                    NODE_PORTS.end()
                ),
            ));
        };
        if taken.contains(&fits) {
            return Err(invalid(
                &field,
                format!("Invalid value: {number}: provided port is already allocated"),
            ));
        }
        if asked
            .iter()
            .any(|(p, proto)| *p == fits && *proto == protocol)
        {
            // 1.37 allocates the entries in turn, so the second finds the port taken (1.20's
            // validation caught it first: "Duplicate value", FieldValueDuplicate).
            return Err(invalid(
                &field,
                format!("Invalid value: {number}: provided port is already allocated"),
            ));
        }
        asked.push((fits, protocol));
    }
    Ok(asked)
}

/// Fresh node ports for the entries without one: shared by the entries of one port number, else
/// the lowest port not in `unavailable`.
fn assign_node_ports(
    ports: &mut [Value],
    mut unavailable: HashSet<u16>,
) -> Result<(), StatusError> {
    let mut by_number: Vec<(Value, u16)> = ports
        .iter()
        .filter_map(|port| {
            let node_port = node_port_of(port).and_then(|p| u16::try_from(p).ok())?;
            Some((port.get("port")?.clone(), node_port))
        })
        .collect();
    for port in ports.iter_mut().filter_map(Value::as_object_mut) {
        if node_port_of_map(port).is_some() {
            continue;
        }
        let number = port.get("port").cloned().unwrap_or(Value::Null);
        let shared = by_number
            .iter()
            .find(|(n, _)| *n == number)
            .map(|(_, p)| *p);
        let node_port = match shared {
            Some(node_port) => node_port,
            None => {
                let free = NODE_PORTS
                    .clone()
                    .find(|p| !unavailable.contains(p))
                    .ok_or_else(|| {
                        StatusError::internal("failed to allocate a nodePort: range is full")
                    })?;
                unavailable.insert(free);
                by_number.push((number, free));
                free
            }
        };
        port.insert("nodePort".into(), node_port.into());
    }
    Ok(())
}

/// Whether a Service of this type has node ports.
fn takes_node_ports(kind: &str) -> bool {
    kind == "NodePort" || kind == "LoadBalancer"
}

/// A port entry's node port, if it asks for one (`0` or none: it does not).
fn node_port_of(port: &Value) -> Option<u64> {
    port.as_object().and_then(node_port_of_map)
}

fn node_port_of_map(port: &Map<String, Value>) -> Option<u64> {
    port.get("nodePort")
        .and_then(Value::as_u64)
        .filter(|p| *p != 0)
}

fn key_of(resource: &ResourceType, object: &Value) -> String {
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str);
    let name = object.pointer("/metadata/name").and_then(Value::as_str);
    resource.key(namespace, name.unwrap_or_default())
}

/// A 422 `Invalid` with one cause.
fn cause(
    resource: &ResourceType,
    name: &str,
    reason: &'static str,
    field: &str,
    message: String,
) -> StatusError {
    StatusError::invalid(
        resource,
        name,
        vec![Cause {
            reason,
            field: field.into(),
            message,
        }],
    )
}

fn kind_of(spec: &Map<String, Value>) -> &str {
    spec.get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
}

/// Whether `address` may be a cluster IP: in the range, neither its network nor its broadcast
/// address.
fn in_range(address: Ipv4Addr) -> bool {
    let (network, bits) = SERVICE_RANGE;
    let first = u32::from(network);
    let broadcast = first + (1u32 << (32 - u32::from(bits))) - 1;
    (first + 1..broadcast).contains(&u32::from(address))
}

/// The lowest free address of the range, from `.2` up to the one before the broadcast address.
fn free_ip(held: &HashSet<Ipv4Addr>) -> Option<Ipv4Addr> {
    let (network, bits) = SERVICE_RANGE;
    let first = u32::from(network) + 2;
    let last = u32::from(network) + (1u32 << (32 - u32::from(bits))) - 2;
    (first..=last)
        .map(Ipv4Addr::from)
        .find(|address| !held.contains(address))
}

fn held_ips(services: &[&Value]) -> HashSet<Ipv4Addr> {
    services
        .iter()
        .filter_map(|s| s.pointer("/spec/clusterIP").and_then(Value::as_str))
        .filter_map(|ip| ip.parse().ok())
        .collect()
}

/// The node ports `services` hold (only NodePort and LoadBalancer Services hold any).
fn held_node_ports(services: &[&Value]) -> HashSet<u16> {
    services
        .iter()
        .filter(|s| {
            s.get("spec")
                .and_then(Value::as_object)
                .is_some_and(|spec| takes_node_ports(kind_of(spec)))
        })
        .filter_map(|s| s.pointer("/spec/ports").and_then(Value::as_array))
        .flatten()
        .filter_map(|port| port.get("nodePort").and_then(Value::as_u64))
        .filter_map(|p| u16::try_from(p).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Registry;

    fn services() -> std::sync::Arc<ResourceType> {
        Registry::default()
            .find("", "v1", "services")
            .expect("built in")
    }

    #[test]
    fn services_get_the_lowest_free_address_and_node_port() {
        // b holds 10.96.0.2 and node port 30000.
        let resource = services();
        let mut a = json!({"metadata": {"name": "a", "namespace": "n"},
                           "spec": {"type": "NodePort", "ports": [{"port": 80}, {"port": 81}]}});
        apply_defaults(&mut a);
        let held = json!({"metadata": {"name": "b", "namespace": "n"},
                          "spec": {"type": "NodePort", "clusterIP": "10.96.0.2",
                                   "ports": [{"port": 1, "nodePort": 30000}]}});
        allocate(&[Arc::new(held)], &resource, Some("n"), "a", &mut a).expect("allocated");
        assert_eq!(a["spec"]["clusterIP"], "10.96.0.3");
        assert_eq!(a["spec"]["clusterIPs"], json!(["10.96.0.3"]));
        assert_eq!(a["spec"]["ports"][0]["nodePort"], 30001);
        assert_eq!(a["spec"]["ports"][1]["nodePort"], 30002);
        assert_eq!(a["spec"]["ports"][1]["targetPort"], 81);
        assert_eq!(a["spec"]["externalTrafficPolicy"], "Cluster");
    }

    #[test]
    fn services_keep_what_an_update_leaves_out_and_may_not_change_their_address() {
        let resource = services();
        let old = json!({"spec": {"type": "NodePort", "clusterIP": "10.96.0.7",
            "clusterIPs": ["10.96.0.7"],
            "ports": [{"name": "a", "port": 80, "nodePort": 30001},
                      {"name": "b", "port": 81, "nodePort": 30002}]}});
        let mut same = json!({"spec": {"clusterIP": "10.96.0.7"}});
        assert!(check_update(&resource, "a", &old, &mut same).is_ok());
        // Left out: kept. Port b asks for a's old node port, so a does not get it back.
        let mut unset = json!({"spec": {"type": "NodePort", "ports": [
            {"name": "a", "port": 80}, {"name": "b", "port": 81, "nodePort": 30001}]}});
        check_update(&resource, "a", &old, &mut unset).expect("kept");
        assert_eq!(unset["spec"]["clusterIP"], "10.96.0.7");
        assert_eq!(unset["spec"]["clusterIPs"], json!(["10.96.0.7"]));
        assert!(unset["spec"]["ports"][0].get("nodePort").is_none());
        let mut renamed =
            json!({"spec": {"type": "NodePort", "ports": [{"name": "b", "port": 9}]}});
        check_update(&resource, "a", &old, &mut renamed).expect("kept");
        assert_eq!(renamed["spec"]["ports"][0]["nodePort"], 30002);
        let mut changed = json!({"spec": {"clusterIP": "10.96.0.8"}});
        let refused = check_update(&resource, "a", &old, &mut changed);
        assert_eq!(refused.map_err(|e| e.code), Err(422));
    }

    #[test]
    fn services_node_ports_are_shared_by_protocols_and_asked_ones_come_first() {
        let resource = services();
        // An entry without a node port never takes the one a later entry asks for; TCP and UDP of
        // one port number share one.
        let mut a = json!({"metadata": {"name": "a", "namespace": "n"},
                           "spec": {"type": "NodePort", "ports": [
                               {"port": 80}, {"port": 81, "nodePort": 30000},
                               {"port": 53}, {"port": 53, "protocol": "UDP", "nodePort": 0}]}});
        apply_defaults(&mut a);
        allocate(&[], &resource, Some("n"), "a", &mut a).expect("allocated");
        let node_ports: Vec<Value> = (0..4)
            .map(|i| a["spec"]["ports"][i]["nodePort"].clone())
            .collect();
        assert_eq!(
            node_ports,
            [json!(30001), json!(30000), json!(30002), json!(30002)]
        );
        // The same node port twice for one protocol is a duplicate.
        let mut twice = json!({"spec": {"type": "NodePort", "ports": [
            {"port": 80, "nodePort": 30100}, {"port": 81, "nodePort": 30100}]}});
        let refused = allocate(&[], &resource, Some("n"), "t", &mut twice);
        assert_eq!(refused.map_err(|e| e.code), Err(422));
        // A ClusterIP Service may not ask for one; one that was NodePort lets its ports go.
        let mut cluster_ip = json!({"spec": {"ports": [{"port": 80, "nodePort": 30100}]}});
        let refused = allocate(&[], &resource, Some("n"), "c", &mut cluster_ip);
        assert_eq!(refused.map_err(|e| e.code), Err(422));
        let stored = Arc::new(a.clone());
        let mut turned = a.clone();
        turned["spec"]["type"] = json!("ClusterIP");
        allocate(&[stored], &resource, Some("n"), "a", &mut turned).expect("released");
        assert!(turned["spec"]["ports"][0].get("nodePort").is_none());
        assert!(turned["spec"].get("externalTrafficPolicy").is_none());
    }

    #[test]
    fn services_range_is_checked() {
        assert!(!in_range("10.96.0.0".parse().expect("ip")));
        assert!(!in_range("10.111.255.255".parse().expect("ip")));
        assert!(in_range("10.96.0.2".parse().expect("ip")));
        assert!(in_range("10.111.255.254".parse().expect("ip")));
        assert!(!in_range("10.112.0.1".parse().expect("ip")));
        assert_eq!(
            free_ip(&HashSet::from(["10.96.0.2".parse().expect("ip")])),
            Some("10.96.0.3".parse().expect("ip"))
        );
    }
}
