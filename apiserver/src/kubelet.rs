//! A stand-in for the scheduler and the kubelets (like kwok): pods come alive without a node.
//!
//! With it enabled ([`crate::ApiServer::kubelet`]), the fake nodes are registered as Node objects
//! (Ready, schedulable), and a new pod is bound to one of them (unless its node selector or node
//! name rules them out: then it stays Pending, unschedulable) and,
//! [`KubeletSettings::ready_after`] later, reported `Running` with every container started and
//! `Ready`. A pod deleted with a grace period gets a `deletionTimestamp` (as on a real cluster, it is
//! still there, terminating) and is removed [`KubeletSettings::terminate_after`] later. Optionally it
//! kills running pods at a steady rate, so a controller sees a living cluster.
//!
//! Its writes are the kubelet's and scheduler's, so they bypass client validation (a client may not
//! set `spec.nodeName` by update) but go through the store, so watchers see them.

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::api::{Api, DeleteOptions, WriteOptions};
use crate::meta;
use crate::store::{Change, EventType, Write};

/// The kubelet's writes: its Node objects.
const KUBELET: WriteOptions<'static> = WriteOptions {
    dry_run: false,
    manager: "kubelet",
};

/// How the simulated kubelet behaves; every field has a default.
#[derive(Debug, Clone)]
pub struct KubeletSettings {
    /// From a pod's creation to Running and Ready (default 500 ms).
    pub ready_after: Duration,
    /// From a graceful delete to the pod's removal (default 300 ms).
    pub terminate_after: Duration,
    /// Fake nodes pods are spread over (default 3).
    pub nodes: usize,
    /// Running pods killed (deleted) per second; 0 = none (default 0).
    pub kill_rate: f64,
    /// Seed for choosing victims (default 0).
    pub seed: u64,
}

impl Default for KubeletSettings {
    fn default() -> KubeletSettings {
        KubeletSettings {
            ready_after: Duration::from_millis(500),
            terminate_after: Duration::from_millis(300),
            nodes: 3,
            kill_rate: 0.0,
            seed: 0,
        }
    }
}

enum Action {
    Start {
        key: String,
        uid: String,
    },
    Remove {
        namespace: String,
        name: String,
        uid: String,
    },
}

/// See the [module docs](self).
pub struct Kubelet {
    api: Arc<Api>,
    settings: KubeletSettings,
    started: u64,
}

impl Kubelet {
    /// A kubelet acting on `api`'s pods.
    pub fn new(api: Arc<Api>, settings: KubeletSettings) -> Kubelet {
        Kubelet {
            api,
            settings,
            started: 0,
        }
    }

    /// Registers the fake nodes as Node objects, Ready and schedulable, as each kubelet does when it
    /// starts: `ferrokube-node-0` .. `ferrokube-node-{n-1}`. A node that exists already is left as it
    /// is.
    pub fn register_nodes(&self) -> Result<(), crate::StatusError> {
        let Some(nodes) = self.api.registry.find("", "v1", "nodes") else {
            return Ok(());
        };
        for index in 0..self.settings.nodes.max(1) {
            let node = fake_node(index);
            match self.api.create(&nodes, None, node, &KUBELET) {
                Ok(_) => {}
                Err(e) if e.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Follows pod changes until the store goes away.
    pub async fn run(mut self, mut changes: mpsc::UnboundedReceiver<Arc<Change>>) {
        let (timer_tx, mut timers) = mpsc::unbounded_channel::<Action>();
        let mut rng = StdRng::seed_from_u64(self.settings.seed);
        let kill_every = (self.settings.kill_rate > 0.0)
            .then(|| Duration::from_secs_f64(1.0 / self.settings.kill_rate));
        let mut kill = tokio::time::interval(kill_every.unwrap_or(Duration::from_secs(3600)));
        kill.tick().await;
        loop {
            tokio::select! {
                // Fair by construction: a kill is ready at most once a period and a timer at most
                // once per change observed, so both go before the changes, which a flood of writes
                // could keep ready and would otherwise starve them.
                biased;
                _ = kill.tick(), if kill_every.is_some() => self.kill_one(&mut rng),
                Some(action) = timers.recv() => self.act(action),
                change = changes.recv() => match change {
                    Some(change) => self.observe(&change, &timer_tx),
                    None => return,
                },
            }
        }
    }

    fn observe(&self, change: &Change, timers: &mpsc::UnboundedSender<Action>) {
        if &*change.table != "pods" || change.event == EventType::Deleted {
            return;
        }
        let pod = &change.object.object;
        let uid = meta::uid(pod).unwrap_or_default().to_string();
        let deleting = meta::string(pod, "deletionTimestamp").is_some();
        let (after, action) = if change.event == EventType::Added && !deleting {
            let key = change.key.clone();
            (self.settings.ready_after, Action::Start { key, uid })
        } else if deleting && !was_deleting(change) {
            let namespace = meta::namespace(pod).unwrap_or_default().to_string();
            let name = meta::name(pod).unwrap_or_default().to_string();
            let action = Action::Remove {
                namespace,
                name,
                uid,
            };
            (self.settings.terminate_after, action)
        } else {
            return;
        };
        let timers = timers.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let _ = timers.send(action);
        });
    }

    fn act(&mut self, action: Action) {
        match action {
            Action::Start { key, uid } => self.start(&key, &uid),
            Action::Remove {
                namespace,
                name,
                uid,
            } => {
                let Some(pods) = self.api.registry.find("", "v1", "pods") else {
                    return;
                };
                let options = DeleteOptions {
                    uid: Some(uid),
                    grace_period_seconds: Some(0),
                    ..DeleteOptions::default()
                };
                let _ = self
                    .api
                    .delete(&pods, Some(&namespace), &name, &options, false);
            }
        }
    }

    /// Binds the pod to a node and reports it Running and Ready.
    fn start(&mut self, key: &str, uid: &str) {
        self.started += 1;
        let n = self.started;
        let nodes_count = self.settings.nodes.max(1);
        let node = (n as usize) % nodes_count;
        let now = meta::now();
        let table: Arc<str> = Arc::from("pods");
        let result = self.api.store.transact(&table, key, |current| {
            let Some(current) = current else {
                return Ok(Write::Keep);
            };
            let pod = &current.object;
            let deleting = meta::string(pod, "deletionTimestamp").is_some();
            if meta::uid(pod) != Some(uid) || deleting {
                return Ok(Write::Keep);
            }
            if !fits_fake_nodes(pod, nodes_count) {
                // As the scheduler would: the pod stays Pending, marked unschedulable.
                let mut pod = (**pod).clone();
                let nodes = nodes_count;
                pod["status"]["conditions"] = json!([{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "lastProbeTime": null, "lastTransitionTime": now,
                    "message": format!("0/{nodes} nodes are available: {nodes} node(s) didn't match node selector.")}]);
                return Ok(Write::Put(pod));
            }
            let mut pod = (**pod).clone();
            // A node the pod names (by nodeName or a hostname selector) is kept; otherwise the
            // nodes take turns.
            let named = pod
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .or_else(|| {
                    pod.pointer("/spec/nodeSelector/kubernetes.io~1hostname")
                        .and_then(Value::as_str)
                })
                .map(str::to_string);
            // `fits_fake_nodes` checked that a named node is one of ours.
            let node = named
                .as_deref()
                .and_then(|n| fake_node_index(n, nodes_count))
                .unwrap_or(node);
            pod["spec"]["nodeName"] = named.unwrap_or_else(|| node_name(node)).into();
            let condition = |kind: &str| {
                json!({"type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": now})
            };
            let containers: Vec<Value> = pod
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .map(|c| {
                            let image = c.get("image").cloned().unwrap_or(Value::Null);
                            json!({"name": c.get("name"), "state": {"running": {"startedAt": now}},
                                   "lastState": {}, "ready": true, "restartCount": 0,
                                   "image": image, "imageID": "",
                                   "containerID": format!("ferrokube://{uid}"), "started": true})
                        })
                        .collect()
                })
                .unwrap_or_default();
            let qos = pod.pointer("/status/qosClass").cloned().unwrap_or(Value::Null);
            let ip = format!("10.244.{node}.{}", n % 250 + 2);
            pod["status"] = json!({
                "phase": "Running",
                "conditions": [condition("Initialized"), condition("Ready"),
                               condition("ContainersReady"), condition("PodScheduled")],
                "hostIP": format!("10.0.0.{}", node.saturating_add(10)),
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "startTime": now,
                "containerStatuses": containers,
                "qosClass": qos,
            });
            Ok(Write::Put(pod))
        });
        if let Err(e) = result {
            tracing::warn!(pod = key, error = %e, "simulated kubelet could not start a pod");
        }
    }

    /// Deletes one running pod, chosen by the seeded generator.
    fn kill_one(&self, rng: &mut StdRng) {
        let running = running_pods(&self.api);
        if running.is_empty() {
            return;
        }
        kill(&self.api, &running[rng.random_range(0..running.len())]);
    }
}

/// The pods that are Running and not being deleted, in the store's order.
pub(crate) fn running_pods(api: &Api) -> Vec<Arc<Value>> {
    api.store
        .snapshot("pods")
        .into_iter()
        .filter(|s| {
            s.object.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
                && meta::string(&s.object, "deletionTimestamp").is_none()
        })
        .map(|s| s.object)
        .collect()
}

/// Deletes `victim` (a pod) as a failing node would make it go; true if the delete was accepted.
pub(crate) fn kill(api: &Api, victim: &Value) -> bool {
    let (Some(pods), Some(ns), Some(name)) = (
        api.registry.find("", "v1", "pods"),
        meta::namespace(victim),
        meta::name(victim),
    ) else {
        return false;
    };
    tracing::info!(namespace = ns, pod = name, "simulated kubelet kills a pod");
    let options = DeleteOptions {
        uid: meta::uid(victim).map(str::to_string),
        ..DeleteOptions::default()
    };
    api.delete(&pods, Some(ns), name, &options, false).is_ok()
}

/// True if the pod can run on the fake nodes: every `spec.nodeSelector` entry is one of their
/// common labels (os, arch; a hostname selector names one of them), and `spec.nodeName`, if set,
/// names one of them. The quota specs of Kubernetes' e2e suite, for one, give their pods an
/// unsatisfiable selector so that they stay Pending.
fn fits_fake_nodes(pod: &Value, nodes: usize) -> bool {
    if let Some(name) = pod.pointer("/spec/nodeName").and_then(Value::as_str) {
        if !name.is_empty() && fake_node_index(name, nodes).is_none() {
            return false;
        }
    }
    let labels = fake_node(0)["metadata"]["labels"].clone();
    pod.pointer("/spec/nodeSelector")
        .and_then(Value::as_object)
        .is_none_or(|selector| {
            selector.iter().all(|(key, wanted)| match key.as_str() {
                "kubernetes.io/hostname" => wanted
                    .as_str()
                    .is_some_and(|h| fake_node_index(h, nodes).is_some()),
                _ => labels.get(key) == Some(wanted),
            })
        })
}

/// The index of the fake node called `name`, if it is one of the `nodes` fake nodes (so a pod
/// naming `ferrokube-node-99` of 3, or a number past `usize`, stays Pending instead of being bound
/// to a node that does not exist).
fn fake_node_index(name: &str, nodes: usize) -> Option<usize> {
    name.strip_prefix("ferrokube-node-")?
        .parse::<usize>()
        .ok()
        .filter(|index| *index < nodes)
}

/// The name of fake node `index`.
fn node_name(index: usize) -> String {
    format!("ferrokube-node-{index}")
}

/// Node `index` as its kubelet registers it: labelled like a Linux node, with capacity, addresses and
/// a `Ready` condition (and the pressure conditions False), so that clients that wait for ready,
/// schedulable nodes find it.
fn fake_node(index: usize) -> Value {
    let name = node_name(index);
    let now = meta::now();
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let version = format!(
        "v{}.{}.0",
        crate::resource::VERSION.0,
        crate::resource::VERSION.1
    );
    let capacity =
        json!({"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64"}},
        "spec": {"podCIDR": format!("10.244.{index}.0/24"), "podCIDRs": [format!("10.244.{index}.0/24")]},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [{"type": "InternalIP", "address": format!("10.0.0.{}", index + 10)},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "",
                         "kernelVersion": "", "osImage": "ferrokube simulated node",
                         "containerRuntimeVersion": "ferrokube://0", "kubeletVersion": version.clone(),
                         "kubeProxyVersion": version, "operatingSystem": "linux",
                         "architecture": "amd64"},
        },
    })
}

fn was_deleting(change: &Change) -> bool {
    change
        .previous
        .as_ref()
        .is_some_and(|p| meta::string(&p.object, "deletionTimestamp").is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_existing_fake_nodes_are_named() {
        assert_eq!(fake_node_index("ferrokube-node-2", 3), Some(2));
        assert_eq!(fake_node_index("ferrokube-node-3", 3), None);
        assert_eq!(
            fake_node_index("ferrokube-node-18446744073709551615", 3),
            None
        );
        assert_eq!(
            fake_node_index("ferrokube-node-99999999999999999999999", 3),
            None
        );
        assert_eq!(fake_node_index("ferrokube-node-foo", 3), None);
        assert_eq!(fake_node_index("other", 3), None);
        let pod = |spec: Value| json!({"spec": spec});
        assert!(fits_fake_nodes(
            &pod(json!({"nodeName": "ferrokube-node-0"})),
            3
        ));
        assert!(!fits_fake_nodes(
            &pod(json!({"nodeName": "ferrokube-node-18446744073709551615"})),
            3
        ));
        assert!(!fits_fake_nodes(
            &pod(json!({"nodeSelector": {"kubernetes.io/hostname": "ferrokube-node-7"}})),
            3
        ));
    }
}
