//! # Services: the addresses and ports kube-apiserver allocates for them
//!
//! A Service created on kube-apiserver comes back with fields nobody sent: a cluster IP from the
//! service range (`spec.clusterIP`, `spec.clusterIPs`) and, for `NodePort` and `LoadBalancer`
//! Services, a node port for each port. Controllers that manage Services read these back, so the
//! embedded server allocates them as kube-apiserver 1.20 (our yardstick) does:
//!
//! ```text
//!  create ─▶ strategy (defaults: type, sessionAffinity, externalTrafficPolicy, each port's
//!            protocol and targetPort)
//!         ─▶ allocate, under the allocator's lock until the object is stored (not for a dry run):
//!              clusterIP  the one asked for, if in the range and free (else 422), or the lowest
//!                         free address of SERVICE_RANGE from .2 up (.1 is the `kubernetes`
//!                         Service's on a real cluster); "None" (headless) allocates nothing
//!              nodePort   the one asked for, if free (else 422), or the lowest free of NODE_PORTS
//!  update ─▶ a cluster IP left out or changed is refused (422: it can be neither unset nor
//!            changed); a port sent without its node port gets a new one, as on 1.20 (later
//!            versions keep the old one)
//! ```
//!
//! An address or port is free when no stored Service holds it: allocation scans the stored
//! Services, so a deleted Service's address is free again at once. Unlike kube-apiserver, which
//! picks at random, addresses and ports are handed out in order, which makes tests repeatable; no
//! client may rely on either order. Only IPv4 single-stack is served, as on a default 1.20 cluster
//! (no `ipFamilies` fields).

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
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            port.entry("protocol").or_insert_with(|| "TCP".into());
            if let Some(number) = port.get("port").cloned() {
                port.entry("targetPort").or_insert(number);
            }
        }
    }
}

/// Refuses an update that unsets or changes the cluster IP `old` has (kube-apiserver 1.20 keeps
/// nothing a client leaves out). Called before [`allocate`] on an update.
pub(crate) fn check_update(
    resource: &ResourceType,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), StatusError> {
    if new.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        return Ok(());
    }
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
    Err(StatusError::invalid(
        resource,
        name,
        vec![Cause {
            reason: "FieldValueInvalid",
            field: "spec.clusterIPs[0]".into(),
            message,
        }],
    ))
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
/// cluster IP and IP family fields, and its node ports. Checks that addresses and ports it asks
/// for are in range and held by no other Service of `stored` (from [`stored`], with the
/// allocator held until the write is stored).
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
    let me = resource.key(namespace, name);
    let others: Vec<&Value> = stored
        .iter()
        .map(|object| object.as_ref())
        .filter(|object| {
            let ns = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str);
            let n = object.pointer("/metadata/name").and_then(Value::as_str);
            resource.key(ns, n.unwrap_or_default()) != me
        })
        .collect();
    let invalid = |field: &str, message: String| {
        StatusError::invalid(
            resource,
            name,
            vec![Cause {
                reason: "FieldValueInvalid",
                field: field.into(),
                message,
            }],
        )
    };

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
            let held = held_ips(&others);
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
            let address = free_ip(&held_ips(&others)).ok_or_else(|| {
                StatusError::internal("failed to allocate a serviceIP: range is full")
            })?;
            spec.insert("clusterIP".into(), address.to_string().into());
            spec.insert("clusterIPs".into(), json!([address.to_string()]));
        }
    }

    if kind != "NodePort" && kind != "LoadBalancer" {
        return Ok(());
    }
    let mut held = held_node_ports(&others);
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    for (index, port) in ports.iter_mut().enumerate() {
        let Some(port) = port.as_object_mut() else {
            continue;
        };
        match port.get("nodePort").and_then(Value::as_u64) {
            Some(asked) => {
                let fits = u16::try_from(asked).ok().filter(|p| NODE_PORTS.contains(p));
                let field = format!("spec.ports[{index}].nodePort");
                match fits {
                    None => {
                        return Err(invalid(
                            &field,
                            format!(
                                "Invalid value: {asked}: provided port is not in the valid \
                                 range. The range of valid ports is {}-{}",
                                NODE_PORTS.start(),
                                NODE_PORTS.end()
                            ),
                        ));
                    }
                    Some(p) if !held.insert(p) => {
                        return Err(invalid(
                            &field,
                            format!("Invalid value: {asked}: provided port is already allocated"),
                        ));
                    }
                    Some(_) => {}
                }
            }
            None => {
                let free = NODE_PORTS
                    .clone()
                    .find(|p| !held.contains(p))
                    .ok_or_else(|| {
                        StatusError::internal("failed to allocate a nodePort: range is full")
                    })?;
                held.insert(free);
                port.insert("nodePort".into(), free.into());
            }
        }
    }
    Ok(())
}

fn kind_of(spec: &Map<String, Value>) -> &str {
    spec.get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
}

fn in_range(address: Ipv4Addr) -> bool {
    let (network, bits) = SERVICE_RANGE;
    let mask = u32::MAX << (32 - u32::from(bits));
    u32::from(address) & mask == u32::from(network)
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

fn held_node_ports(services: &[&Value]) -> HashSet<u16> {
    services
        .iter()
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
                          "spec": {"clusterIP": "10.96.0.2", "ports": [{"port": 1, "nodePort": 30000}]}});
        allocate(&[Arc::new(held)], &resource, Some("n"), "a", &mut a).expect("allocated");
        assert_eq!(a["spec"]["clusterIP"], "10.96.0.3");
        assert_eq!(a["spec"]["clusterIPs"], json!(["10.96.0.3"]));
        assert_eq!(a["spec"]["ports"][0]["nodePort"], 30001);
        assert_eq!(a["spec"]["ports"][1]["nodePort"], 30002);
        assert_eq!(a["spec"]["ports"][1]["targetPort"], 81);
        assert_eq!(a["spec"]["externalTrafficPolicy"], "Cluster");
    }

    #[test]
    fn services_may_neither_unset_nor_change_their_address() {
        let resource = services();
        let old = json!({"spec": {"clusterIP": "10.96.0.7", "clusterIPs": ["10.96.0.7"]}});
        let same = json!({"spec": {"clusterIP": "10.96.0.7"}});
        assert!(check_update(&resource, "a", &old, &same).is_ok());
        for new in [
            json!({"spec": {}}),
            json!({"spec": {"clusterIP": "10.96.0.8"}}),
        ] {
            let refused = check_update(&resource, "a", &old, &new);
            assert_eq!(refused.map_err(|e| e.code), Err(422), "{new}");
        }
    }

    #[test]
    fn services_range_is_checked() {
        assert!(in_range("10.96.0.2".parse().expect("ip")));
        assert!(in_range("10.111.255.254".parse().expect("ip")));
        assert!(!in_range("10.112.0.1".parse().expect("ip")));
        assert_eq!(
            free_ip(&HashSet::from(["10.96.0.2".parse().expect("ip")])),
            Some("10.96.0.3".parse().expect("ip"))
        );
    }
}
