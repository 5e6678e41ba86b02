//! The built-in kinds' columns and how each row is computed from an object: what `kubectl get pods`
//! shows as `NAME READY STATUS RESTARTS AGE`.
//!
//! kube-apiserver has one printer per built-in kind (Kubernetes' `pkg/printers/internalversion`);
//! this module has one [`Printer`] per kind this server serves or is commonly given (`PodTemplate`,
//! `ServiceAccount`, `Node`). A printer is two things: its column definitions, and a function from
//! an object to its cells. The server always computes the *wide* cells (`-o wide` columns have
//! priority 1); kubectl hides priority-1 columns unless asked for `-o wide`.
//!
//! Each row function reads the stored JSON leniently: a missing field reads as Go's zero value (an
//! empty string, 0, no list), which is what the Go printers see for an unset field after decoding.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::descriptions as doc;
use super::format::{self, Instant};

/// One column of a Table, as its `columnDefinitions` list it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The header (`Name`, `Restarts`); kubectl prints it upper-cased.
    pub name: Cow<'static, str>,
    /// The OpenAPI type of the cells: `string`, `integer`, `number`, `boolean` or `date`.
    pub kind: Cow<'static, str>,
    /// An OpenAPI format hint (`name` marks the object's name column), often empty.
    pub format: Cow<'static, str>,
    /// What the column shows (see [`super::descriptions`]).
    pub description: Cow<'static, str>,
    /// 0: always shown; higher: only with `-o wide`.
    pub priority: i64,
}

impl Column {
    /// A priority-0 column of type `kind`.
    const fn new(name: &'static str, kind: &'static str, description: &'static str) -> Column {
        Column::with_priority(name, kind, description, 0)
    }

    /// A column shown only with `-o wide` (priority 1).
    const fn wide(name: &'static str, kind: &'static str, description: &'static str) -> Column {
        Column::with_priority(name, kind, description, 1)
    }

    const fn with_priority(
        name: &'static str,
        kind: &'static str,
        description: &'static str,
        priority: i64,
    ) -> Column {
        Column {
            name: Cow::Borrowed(name),
            kind: Cow::Borrowed(kind),
            format: Cow::Borrowed(""),
            description: Cow::Borrowed(description),
            priority,
        }
    }

    /// The `Name` column every printer starts with (format `name`).
    pub const fn name() -> Column {
        Column::name_with_priority(0)
    }

    /// The `Name` column with another priority (Events show names only with `-o wide`).
    const fn name_with_priority(priority: i64) -> Column {
        Column {
            name: Cow::Borrowed("Name"),
            kind: Cow::Borrowed("string"),
            format: Cow::Borrowed("name"),
            description: Cow::Borrowed(doc::NAME),
            priority,
        }
    }

    /// The `Age` column: a duration since `metadata.creationTimestamp`, as text.
    const fn age() -> Column {
        Column::new("Age", "string", doc::CREATION_TIMESTAMP)
    }

    /// The column as JSON, with every field present (kube-apiserver omits none).
    pub fn to_json(&self) -> Value {
        json!({"name": self.name, "type": self.kind, "format": self.format,
               "description": self.description, "priority": self.priority})
    }
}

/// The cells of one object (one per column, in order), and the row's conditions (a finished Pod's
/// `Completed` condition, by which a client can tell finished rows apart).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Row {
    pub cells: Vec<Value>,
    pub conditions: Vec<Value>,
}

impl Row {
    fn of(cells: Vec<Value>) -> Row {
        Row {
            cells,
            conditions: Vec::new(),
        }
    }
}

/// The columns and row function of one built-in kind.
#[derive(Debug)]
pub struct Printer {
    /// API group (`""` for core) and kind this printer is for.
    pub group: &'static str,
    pub kind: &'static str,
    pub columns: &'static [Column],
    /// The wide cells of one object at `now` (ages are computed against it).
    pub row: fn(&Value, Instant) -> Row,
}

/// The printer kube-apiserver uses for `group`/`kind`, if it has one we know.
pub fn printer_for(group: &str, kind: &str) -> Option<&'static Printer> {
    PRINTERS.iter().find(|p| p.group == group && p.kind == kind)
}

static PRINTERS: &[Printer] = &[
    Printer {
        group: "",
        kind: "Pod",
        columns: &[
            Column::name(),
            Column::new(
                "Ready",
                "string",
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            Column::new(
                "Status",
                "string",
                "The aggregate status of the containers in this pod.",
            ),
            // Text since 1.2x: the count and, once a container has restarted, how long ago the
            // last one did (`5 (3d ago)`); 1.20 had an integer.
            Column::new(
                "Restarts",
                "string",
                "The number of times the containers in this pod have been restarted.",
            ),
            Column::age(),
            Column::wide("IP", "string", doc::POD_IP),
            Column::wide("Node", "string", doc::POD_NODE),
            Column::wide("Nominated Node", "string", doc::POD_NOMINATED_NODE),
            Column::wide("Readiness Gates", "string", doc::POD_READINESS_GATES),
        ],
        row: pod,
    },
    Printer {
        group: "apps",
        kind: "ReplicaSet",
        columns: &[
            Column::name(),
            Column::new("Desired", "integer", doc::REPLICA_SET_REPLICAS),
            Column::new("Current", "integer", doc::REPLICA_SET_CURRENT),
            Column::new("Ready", "integer", doc::REPLICA_SET_READY),
            Column::age(),
            Column::wide(
                "Containers",
                "string",
                "Names of each container in the template.",
            ),
            Column::wide(
                "Images",
                "string",
                "Images referenced by each container in the template.",
            ),
            Column::wide("Selector", "string", doc::REPLICA_SET_SELECTOR),
        ],
        row: replica_set,
    },
    Printer {
        group: "apps",
        kind: "Deployment",
        columns: &[
            Column::name(),
            Column::new("Ready", "string", "Number of the pod with ready state"),
            Column::new("Up-to-date", "string", doc::DEPLOYMENT_UPDATED),
            Column::new("Available", "string", doc::DEPLOYMENT_AVAILABLE),
            Column::age(),
            Column::wide(
                "Containers",
                "string",
                "Names of each container in the template.",
            ),
            Column::wide(
                "Images",
                "string",
                "Images referenced by each container in the template.",
            ),
            Column::wide("Selector", "string", doc::DEPLOYMENT_SELECTOR),
        ],
        row: deployment,
    },
    Printer {
        group: "",
        kind: "Namespace",
        columns: &[
            Column::name(),
            Column::new("Status", "string", "The status of the namespace"),
            Column::age(),
        ],
        row: namespace,
    },
    Printer {
        group: "",
        kind: "ConfigMap",
        columns: &[
            Column::name(),
            Column::new("Data", "string", doc::CONFIG_MAP_DATA),
            Column::age(),
        ],
        row: config_map,
    },
    Printer {
        group: "",
        kind: "Secret",
        columns: &[
            Column::name(),
            Column::new("Type", "string", doc::SECRET_TYPE),
            Column::new("Data", "string", doc::SECRET_DATA),
            Column::age(),
        ],
        row: secret,
    },
    Printer {
        group: "",
        kind: "Event",
        columns: &[
            Column::new("Last Seen", "string", doc::EVENT_LAST_TIMESTAMP),
            Column::new("Type", "string", doc::EVENT_TYPE),
            Column::new("Reason", "string", doc::EVENT_REASON),
            Column::new("Object", "string", doc::EVENT_OBJECT),
            Column::wide("Subobject", "string", doc::EVENT_SUBOBJECT),
            Column::wide("Source", "string", doc::EVENT_SOURCE),
            Column::new("Message", "string", doc::EVENT_MESSAGE),
            Column::wide("First Seen", "string", doc::EVENT_FIRST_TIMESTAMP),
            Column::wide("Count", "string", doc::EVENT_COUNT),
            Column::name_with_priority(1),
        ],
        row: event,
    },
    Printer {
        group: "coordination.k8s.io",
        kind: "Lease",
        columns: &[
            Column::name(),
            Column::new("Holder", "string", doc::LEASE_HOLDER),
            Column::age(),
        ],
        row: lease,
    },
    Printer {
        group: "",
        kind: "Service",
        columns: &[
            Column::name(),
            Column::new("Type", "string", doc::SERVICE_TYPE),
            Column::new("Cluster-IP", "string", doc::SERVICE_CLUSTER_IP),
            Column::new("External-IP", "string", doc::SERVICE_EXTERNAL_IPS),
            Column::new("Port(s)", "string", doc::SERVICE_PORTS),
            Column::age(),
            Column::wide("Selector", "string", doc::SERVICE_SELECTOR),
        ],
        row: service,
    },
    Printer {
        group: "",
        kind: "ServiceAccount",
        columns: &[
            Column::name(),
            Column::new("Secrets", "string", doc::SERVICE_ACCOUNT_SECRETS),
            Column::age(),
        ],
        row: service_account,
    },
    Printer {
        group: "",
        kind: "Node",
        columns: &[
            Column::name(),
            Column::new("Status", "string", "The status of the node"),
            Column::new("Roles", "string", "The roles of the node"),
            Column::age(),
            Column::new("Version", "string", doc::NODE_KUBELET_VERSION),
            Column::wide("Internal-IP", "string", doc::NODE_ADDRESSES),
            Column::wide("External-IP", "string", doc::NODE_ADDRESSES),
            Column::wide("OS-Image", "string", doc::NODE_OS_IMAGE),
            Column::wide("Kernel-Version", "string", doc::NODE_KERNEL_VERSION),
            Column::wide("Container-Runtime", "string", doc::NODE_CONTAINER_RUNTIME),
        ],
        row: node,
    },
    // 1.37's own convertor for CRDs (1.20 had none: the default Name and Created At).
    Printer {
        group: "apiextensions.k8s.io",
        kind: "CustomResourceDefinition",
        columns: &[
            Column::name(),
            Column::new("Scope", "string", "Cluster/Namespaced"),
            Column::new("Versions", "string", "Served versions"),
            Column::new("Created At", "date", doc::CREATION_TIMESTAMP),
            Column::wide("Group", "string", "API group"),
            Column::wide("Kind", "string", "CustomResource kind"),
            Column::wide("ShortNames", "string", "Short names"),
            Column::wide("Established", "boolean", "Established status"),
        ],
        row: custom_resource_definition,
    },
    Printer {
        group: "",
        kind: "PodTemplate",
        columns: &[
            Column::name(),
            Column::new(
                "Containers",
                "string",
                "Names of each container in the template.",
            ),
            Column::new(
                "Images",
                "string",
                "Images referenced by each container in the template.",
            ),
            Column::new("Pod Labels", "string", "The labels for the pod template."),
        ],
        row: pod_template,
    },
];

/// The string at `pointer`, or `""` (Go's zero value).
fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The integer at `pointer`, or 0.
fn int(value: &Value, pointer: &str) -> i64 {
    value.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// The list at `pointer`, or none.
fn list<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// How many entries the map at `pointer` has.
fn map_len(value: &Value, pointer: &str) -> i64 {
    value
        .pointer(pointer)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len() as i64)
}

/// The object at `pointer` if it is set (a non-null value: Go's non-nil pointer).
fn set<'a>(value: &'a Value, pointer: &str) -> Option<&'a Value> {
    value.pointer(pointer).filter(|v| !v.is_null())
}

fn or_none(text: &str) -> String {
    if text.is_empty() {
        "<none>".to_string()
    } else {
        text.to_string()
    }
}

fn name(object: &Value) -> Value {
    text(object, "/metadata/name").into()
}

fn age(object: &Value, now: Instant) -> Value {
    format::age(object.pointer("/metadata/creationTimestamp"), now).into()
}

/// Container names and images, each comma-joined, from the containers at `pointer`.
fn containers(object: &Value, pointer: &str) -> (Value, Value) {
    let containers = list(object, pointer);
    let names: Vec<&str> = containers.iter().map(|c| text(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| text(c, "/image")).collect();
    (names.join(",").into(), images.join(",").into())
}

/// Kubernetes' pod status summary: the phase, overridden by the pod's reason, by the first init
/// container still working (`Init:1/2`, `Init:CrashLoopBackOff`), else by the last container's
/// waiting or terminated reason (`ContainerCreating`, `Completed`, `ExitCode:1`), and by deletion
/// (`Terminating`, unless it has finished) or by a scheduling gate (`SchedulingGated`), as
/// kube-apiserver 1.37 prints it. Sidecars (restartable init containers) count in READY and RESTARTS.
fn pod(pod: &Value, now: Instant) -> Row {
    // Long: a port of Kubernetes' `printPod` (pkg/printers/internalversion), kept in its order so
    // that the two read side by side when kube-apiserver's output changes.
    // Sidecars (init containers with `restartPolicy: Always`, 1.28+) count as containers: in
    // READY's total, in READY once started, and their restarts in RESTARTS.
    let init_specs = list(pod, "/spec/initContainers");
    let is_sidecar = |name: &str| {
        init_specs
            .iter()
            .any(|c| text(c, "/name") == name && text(c, "/restartPolicy") == "Always")
    };
    let sidecars = init_specs
        .iter()
        .filter(|c| text(c, "/restartPolicy") == "Always")
        .count();
    let total = list(pod, "/spec/containers").len() + sidecars;
    let init_total = init_specs.len();
    let mut reason = text(pod, "/status/phase").to_string();
    let pod_reason = text(pod, "/status/reason");
    if !pod_reason.is_empty() {
        reason = pod_reason.to_string();
    }
    let scheduling_gated = list(pod, "/status/conditions")
        .iter()
        .any(|c| text(c, "/type") == "PodScheduled" && text(c, "/reason") == "SchedulingGated");
    if scheduling_gated {
        reason = "SchedulingGated".to_string();
    }
    let conditions = match text(pod, "/status/phase") {
        "Succeeded" => vec![
            json!({"type": "Completed", "status": "True", "reason": "Succeeded",
                   "message": "The pod has completed successfully."}),
        ],
        "Failed" => vec![
            json!({"type": "Completed", "status": "True", "reason": "Failed",
                   "message": "The pod failed."}),
        ],
        _ => Vec::new(),
    };

    let mut restarts = 0;
    // The latest `lastState.terminated.finishedAt` of the containers counted (RFC 3339 in UTC, so
    // the greatest string is the latest time).
    let mut last_restart: Option<&str> = None;
    // The same for the sidecars alone: they keep counting once the pod has initialized.
    let (mut sidecar_restarts, mut last_sidecar_restart) = (0, None);
    let mut ready = 0;
    let mut initializing = false;
    for (i, status) in list(pod, "/status/initContainerStatuses")
        .iter()
        .enumerate()
    {
        restarts += int(status, "/restartCount");
        note_restart(status, &mut last_restart);
        let sidecar = is_sidecar(text(status, "/name"));
        if sidecar {
            sidecar_restarts += int(status, "/restartCount");
            note_restart(status, &mut last_sidecar_restart);
        }
        let terminated = set(status, "/state/terminated");
        let waiting_reason = text(status, "/state/waiting/reason");
        let started = status.get("started").and_then(Value::as_bool) == Some(true);
        match terminated {
            Some(t) if int(t, "/exitCode") == 0 => continue,
            _ if sidecar && started => {
                if status.get("ready").and_then(Value::as_bool) == Some(true) {
                    ready += 1;
                }
                continue;
            }
            Some(t) => {
                let why = text(t, "/reason");
                reason = if !why.is_empty() {
                    format!("Init:{why}")
                } else if int(t, "/signal") != 0 {
                    format!("Init:Signal:{}", int(t, "/signal"))
                } else {
                    format!("Init:ExitCode:{}", int(t, "/exitCode"))
                };
            }
            None if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" => {
                reason = format!("Init:{waiting_reason}");
            }
            None => reason = format!("Init:{i}/{init_total}"),
        }
        initializing = true;
        break;
    }
    if !initializing || condition_is_true(pod, "Initialized") {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut running = false;
        for status in list(pod, "/status/containerStatuses").iter().rev() {
            restarts += int(status, "/restartCount");
            note_restart(status, &mut last_restart);
            let waiting_reason = text(status, "/state/waiting/reason");
            let terminated = set(status, "/state/terminated");
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                let why = text(t, "/reason");
                reason = if !why.is_empty() {
                    why.to_string()
                } else if int(t, "/signal") != 0 {
                    format!("Signal:{}", int(t, "/signal"))
                } else {
                    format!("ExitCode:{}", int(t, "/exitCode"))
                };
            } else if status.get("ready").and_then(Value::as_bool) == Some(true)
                && set(status, "/state/running").is_some()
            {
                running = true;
                ready += 1;
            }
        }
        // A pod whose last container completed while another still runs is not finished.
        if reason == "Completed" && running {
            reason = if condition_is_true(pod, "Ready") {
                "Running".to_string()
            } else {
                "NotReady".to_string()
            };
        }
    }
    if set(pod, "/metadata/deletionTimestamp").is_some() {
        let terminal = matches!(text(pod, "/status/phase"), "Succeeded" | "Failed");
        if pod_reason == "NodeLost" {
            reason = "Unknown".to_string();
        } else if !terminal {
            reason = "Terminating".to_string();
        }
    }

    let ip = list(pod, "/status/podIPs")
        .first()
        .map(|ip| text(ip, "/ip"))
        .unwrap_or("");
    let gates = list(pod, "/spec/readinessGates");
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let passed = gates
            .iter()
            .filter(|gate| condition_is_true(pod, text(gate, "/conditionType")))
            .count();
        format!("{passed}/{}", gates.len())
    };
    let restarts = match last_restart {
        Some(when) if restarts != 0 => {
            format!("{restarts} ({} ago)", format::age(Some(&when.into()), now))
        }
        _ => restarts.to_string(),
    };
    Row {
        cells: vec![
            name(pod),
            format!("{ready}/{total}").into(),
            reason.into(),
            restarts.into(),
            age(pod, now),
            or_none(ip).into(),
            or_none(text(pod, "/spec/nodeName")).into(),
            or_none(text(pod, "/status/nominatedNodeName")).into(),
            readiness_gates.into(),
        ],
        conditions,
    }
}

/// Keeps in `last` the later of it and a container status' `lastState.terminated.finishedAt`.
fn note_restart<'a>(status: &'a Value, last: &mut Option<&'a str>) {
    let finished = status
        .pointer("/lastState/terminated/finishedAt")
        .and_then(Value::as_str);
    if let Some(finished) = finished {
        if last.is_none_or(|seen| finished > seen) {
            *last = Some(finished);
        }
    }
}

/// Whether the pod's first condition of type `kind` has status `True`.
fn condition_is_true(pod: &Value, kind: &str) -> bool {
    list(pod, "/status/conditions")
        .iter()
        .find(|c| text(c, "/type") == kind)
        .is_some_and(|c| text(c, "/status") == "True")
}

fn replica_set(rs: &Value, now: Instant) -> Row {
    let (names, images) = containers(rs, "/spec/template/spec/containers");
    // `spec.replicas` is defaulted to 1 on every write; a missing one reads as the default.
    let desired = rs
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    Row::of(vec![
        name(rs),
        desired.into(),
        int(rs, "/status/replicas").into(),
        int(rs, "/status/readyReplicas").into(),
        age(rs, now),
        names,
        images,
        format::label_selector(rs.pointer("/spec/selector")).into(),
    ])
}

fn deployment(deployment: &Value, now: Instant) -> Row {
    let (names, images) = containers(deployment, "/spec/template/spec/containers");
    let desired = deployment
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    // kube-apiserver prints the selector without FormatLabelSelector's `<none>`.
    let selector = format::selector(deployment.pointer("/spec/selector"))
        .unwrap_or_else(|_| "<error>".to_string());
    Row::of(vec![
        name(deployment),
        format!("{}/{desired}", int(deployment, "/status/readyReplicas")).into(),
        int(deployment, "/status/updatedReplicas").into(),
        int(deployment, "/status/availableReplicas").into(),
        age(deployment, now),
        names,
        images,
        selector.into(),
    ])
}

fn namespace(namespace: &Value, now: Instant) -> Row {
    Row::of(vec![
        name(namespace),
        text(namespace, "/status/phase").into(),
        age(namespace, now),
    ])
}

fn config_map(config_map: &Value, now: Instant) -> Row {
    let entries = map_len(config_map, "/data") + map_len(config_map, "/binaryData");
    Row::of(vec![name(config_map), entries.into(), age(config_map, now)])
}

fn secret(secret: &Value, now: Instant) -> Row {
    Row::of(vec![
        name(secret),
        text(secret, "/type").into(),
        map_len(secret, "/data").into(),
        age(secret, now),
    ])
}

/// An event's times: first seen from `firstTimestamp` (else `eventTime`), last seen from
/// `lastTimestamp` (else first seen; a series' last observation wins), and the count (a series'
/// own count, as 1.37 prints it, where 1.20 added one for the series' first, singleton event; a count
/// of 0 is the new API's singleton, 1).
fn event(event: &Value, now: Instant) -> Row {
    let first_seen = match set(event, "/firstTimestamp") {
        Some(first) => format::age(Some(first), now),
        None => format::age(event.pointer("/eventTime"), now),
    };
    let mut last_seen = match set(event, "/lastTimestamp") {
        Some(last) => format::age(Some(last), now),
        None => first_seen.clone(),
    };
    let mut count = int(event, "/count");
    if let Some(series) = set(event, "/series") {
        last_seen = format::age(series.get("lastObservedTime"), now);
        count = int(series, "/count");
    } else if count == 0 {
        count = 1;
    }
    let kind = text(event, "/involvedObject/kind").to_lowercase();
    let involved = text(event, "/involvedObject/name");
    let target = if involved.is_empty() {
        kind
    } else {
        format!("{kind}/{involved}")
    };
    let first_non_empty = |a: &'static str, b: &'static str| {
        let a = text(event, a);
        if a.is_empty() { text(event, b) } else { a }
    };
    let component = first_non_empty("/source/component", "/reportingComponent");
    let instance = first_non_empty("/source/host", "/reportingInstance");
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    Row::of(vec![
        last_seen.into(),
        text(event, "/type").into(),
        text(event, "/reason").into(),
        target.into(),
        text(event, "/involvedObject/fieldPath").into(),
        source.into(),
        text(event, "/message").trim().into(),
        first_seen.into(),
        count.into(),
        name(event),
    ])
}

/// A CRD: its scope, its served versions (`name`, `(storage)` after the stored one) sorted and
/// joined by commas, its creation time as written (RFC 3339), and, wide, its group, kind, short
/// names and whether it is Established.
fn custom_resource_definition(crd: &Value, _now: Instant) -> Row {
    let mut versions: Vec<String> = list(crd, "/spec/versions")
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
        .map(|v| {
            let name = text(v, "/name");
            if v.get("storage").and_then(Value::as_bool) == Some(true) {
                format!("{name}(storage)")
            } else {
                name.to_string()
            }
        })
        .collect();
    versions.sort();
    let short_names: Vec<&str> = list(crd, "/spec/names/shortNames")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let established = list(crd, "/status/conditions")
        .iter()
        .any(|c| text(c, "/type") == "Established" && text(c, "/status") == "True");
    Row::of(vec![
        name(crd),
        text(crd, "/spec/scope").into(),
        versions.join(",").into(),
        text(crd, "/metadata/creationTimestamp").into(),
        text(crd, "/spec/group").into(),
        text(crd, "/spec/names/kind").into(),
        short_names.join(",").into(),
        established.into(),
    ])
}

fn lease(lease: &Value, now: Instant) -> Row {
    Row::of(vec![
        name(lease),
        text(lease, "/spec/holderIdentity").into(),
        age(lease, now),
    ])
}

/// A Service: its first cluster IP, its external address by type, and its ports as
/// `port[:nodePort]/protocol`.
fn service(service: &Value, now: Instant) -> Row {
    let kind = text(service, "/spec/type");
    let cluster_ip = list(service, "/spec/clusterIPs")
        .first()
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let external: Vec<&str> = list(service, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let external_ip = match kind {
        "ClusterIP" | "NodePort" if !external.is_empty() => external.join(","),
        "ClusterIP" | "NodePort" => "<none>".to_string(),
        "LoadBalancer" => {
            // Ingress IPs (else hostnames), deduplicated and sorted, then the external IPs.
            let mut balancers: Vec<&str> = list(service, "/status/loadBalancer/ingress")
                .iter()
                .map(|i| match text(i, "/ip") {
                    "" => text(i, "/hostname"),
                    ip => ip,
                })
                .filter(|a| !a.is_empty())
                .collect();
            balancers.sort_unstable();
            balancers.dedup();
            let mut all: Vec<&str> = balancers.clone();
            all.extend(&external);
            if !external.is_empty() {
                all.join(",")
            } else if !balancers.is_empty() {
                balancers.join(",")
            } else {
                "<pending>".to_string()
            }
        }
        "ExternalName" => text(service, "/spec/externalName").to_string(),
        _ => "<unknown>".to_string(),
    };
    let ports: Vec<String> = list(service, "/spec/ports")
        .iter()
        .map(|p| {
            let (port, protocol) = (int(p, "/port"), text(p, "/protocol"));
            match int(p, "/nodePort") {
                0 => format!("{port}/{protocol}"),
                node_port => format!("{port}:{node_port}/{protocol}"),
            }
        })
        .collect();
    Row::of(vec![
        name(service),
        kind.into(),
        cluster_ip.into(),
        external_ip.into(),
        or_none(&ports.join(",")).into(),
        age(service, now),
        format::labels(service.pointer("/spec/selector")).into(),
    ])
}

fn service_account(account: &Value, now: Instant) -> Row {
    Row::of(vec![
        name(account),
        (list(account, "/secrets").len() as i64).into(),
        age(account, now),
    ])
}

/// A Node: `Ready`/`NotReady`/`Unknown` from its Ready condition (plus `SchedulingDisabled`), its
/// roles from `node-role.kubernetes.io/<role>` and `kubernetes.io/role` labels.
fn node(node: &Value, now: Instant) -> Row {
    let mut status: Vec<String> = list(node, "/status/conditions")
        .iter()
        .rev()
        .find(|c| text(c, "/type") == "Ready")
        .map(|c| {
            if text(c, "/status") == "True" {
                "Ready".to_string()
            } else {
                "NotReady".to_string()
            }
        })
        .into_iter()
        .collect();
    if status.is_empty() {
        status.push("Unknown".to_string());
    }
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled".to_string());
    }
    let mut roles: Vec<&str> = node
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(
                    |(key, value)| match key.strip_prefix("node-role.kubernetes.io/") {
                        Some(role) if !role.is_empty() => Some(role),
                        Some(_) => None,
                        None if key == "kubernetes.io/role" => {
                            value.as_str().filter(|v| !v.is_empty())
                        }
                        None => None,
                    },
                )
                .collect()
        })
        .unwrap_or_default();
    roles.sort_unstable();
    roles.dedup();
    let address = |kind: &str| {
        list(node, "/status/addresses")
            .iter()
            .find(|a| text(a, "/type") == kind)
            .map_or("<none>", |a| text(a, "/address"))
            .to_string()
    };
    let info = |field: &str| match text(node, &format!("/status/nodeInfo/{field}")) {
        "" => "<unknown>".to_string(),
        value => value.to_string(),
    };
    Row::of(vec![
        name(node),
        status.join(",").into(),
        or_none(&roles.join(",")).into(),
        age(node, now),
        text(node, "/status/nodeInfo/kubeletVersion").into(),
        address("InternalIP").into(),
        address("ExternalIP").into(),
        info("osImage").into(),
        info("kernelVersion").into(),
        info("containerRuntimeVersion").into(),
    ])
}

fn pod_template(template: &Value, _now: Instant) -> Row {
    let (names, images) = containers(template, "/template/spec/containers");
    Row::of(vec![
        name(template),
        names,
        images,
        format::labels(template.pointer("/template/metadata/labels")).into(),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000;

    fn now() -> Instant {
        Instant::from_unix_seconds(NOW)
    }

    fn ago(seconds: i64) -> String {
        crate::meta::rfc3339((NOW - seconds) as u64)
    }

    fn cells(group: &str, kind: &str, object: Value) -> Vec<Value> {
        let printer = printer_for(group, kind).unwrap_or_else(|| panic!("{kind} has a printer"));
        let row = (printer.row)(&object, now());
        assert_eq!(
            row.cells.len(),
            printer.columns.len(),
            "{kind}: a cell per column"
        );
        row.cells
    }

    fn pod_with(status: Value) -> Value {
        json!({"metadata": {"name": "p", "creationTimestamp": ago(5)},
               "spec": {"containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "i"}]},
               "status": status})
    }

    /// STATUS, READY and RESTARTS of a pod with `status`.
    fn summary(status: Value) -> (String, String, i64) {
        let c = cells("", "Pod", pod_with(status));
        (
            c[2].as_str().unwrap_or("").to_string(),
            c[1].as_str().unwrap_or("").to_string(),
            // The restarts, a number as text (without an "(… ago)" here).
            c[3].as_str().and_then(|r| r.parse().ok()).unwrap_or(-1),
        )
    }

    #[test]
    fn restarts_say_when_the_last_one_was() {
        let restarted = pod_with(json!({"phase": "Running", "containerStatuses": [
            {"name": "a", "restartCount": 2, "state": {"running": {}},
             "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(7200)}}},
            {"name": "b", "restartCount": 1, "state": {"running": {}},
             "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(300)}}}]}));
        assert_eq!(cells("", "Pod", restarted)[3], json!("3 (5m ago)"));
    }

    #[test]
    fn sidecars_count_in_ready_and_restarts_as_1_37_prints_them() {
        let pod = |status: Value| {
            json!({"metadata": {"name": "p", "creationTimestamp": ago(5)},
                   "spec": {"containers": [{"name": "app"}],
                            "initContainers": [{"name": "setup"},
                                               {"name": "proxy", "restartPolicy": "Always"}]},
                   "status": status})
        };
        let summary = |status: Value| {
            let c = cells("", "Pod", pod(status));
            (c[2].clone(), c[1].clone(), c[3].clone())
        };
        let setup_done =
            json!({"name": "setup", "restartCount": 1, "state": {"terminated": {"exitCode": 0}}});
        let proxy = |restarts: i64, started: bool, ready: bool| {
            json!({"name": "proxy", "restartCount": restarts, "started": started, "ready": ready,
                   "state": {"running": {}}})
        };
        // Initialized and running: the sidecar is ready, its restarts count with the app's (the
        // finished init container's do not).
        let running = summary(json!({"phase": "Running",
            "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
            "initContainerStatuses": [setup_done.clone(), proxy(3, true, true)],
            "containerStatuses": [{"name": "app", "restartCount": 1, "ready": true, "state": {"running": {}}}]}));
        assert_eq!(running, (json!("Running"), json!("2/2"), json!("4")));
        // The sidecar not started yet: the pod is still initializing at it.
        let starting = summary(json!({"phase": "Pending",
            "initContainerStatuses": [setup_done, proxy(0, false, false)]}));
        assert_eq!(starting, (json!("Init:1/2"), json!("0/2"), json!("1")));
        // A gated pod says so; a finished pod being deleted is not "Terminating".
        let gated = summary(json!({"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}));
        assert_eq!(gated.0, json!("SchedulingGated"));
        let mut done = pod(json!({"phase": "Succeeded", "containerStatuses": [
            {"name": "app", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}));
        done["metadata"]["deletionTimestamp"] = json!(ago(1));
        assert_eq!(cells("", "Pod", done)[2], json!("Completed"));
    }

    #[test]
    fn pod_status_summaries() {
        let running = |ready: bool, restarts: i64| json!({"ready": ready, "restartCount": restarts, "state": {"running": {}}});
        let init_done = json!([{"restartCount": 1, "state": {"terminated": {"exitCode": 0}}}]);
        let cases = [
            (json!({"phase": "Pending"}), ("Pending", "0/2", 0)),
            (
                json!({"phase": "Pending", "initContainerStatuses": [{"restartCount": 2, "state": {"waiting": {"reason": "PodInitializing"}}}]}),
                ("Init:0/1", "0/2", 2),
            ),
            (
                json!({"phase": "Pending", "initContainerStatuses": [{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
                ("Init:CrashLoopBackOff", "0/2", 0),
            ),
            (
                json!({"phase": "Pending", "initContainerStatuses": [{"state": {"terminated": {"exitCode": 3}}}]}),
                ("Init:ExitCode:3", "0/2", 0),
            ),
            (
                json!({"phase": "Pending", "initContainerStatuses": [{"state": {"terminated": {"exitCode": 137, "signal": 9}}}]}),
                ("Init:Signal:9", "0/2", 0),
            ),
            (
                json!({"phase": "Running", "initContainerStatuses": init_done,
                       "containerStatuses": [running(true, 1), running(true, 2)]}),
                ("Running", "2/2", 3),
            ),
            (
                json!({"phase": "Running", "containerStatuses": [running(true, 0),
                    {"restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
                ("CrashLoopBackOff", "1/2", 4),
            ),
            (
                json!({"phase": "Running", "containerStatuses": [running(true, 0),
                    {"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
                    "conditions": [{"type": "Ready", "status": "False"}]}),
                ("NotReady", "1/2", 0),
            ),
            (
                json!({"phase": "Running", "containerStatuses": [running(true, 0),
                    {"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
                    "conditions": [{"type": "Ready", "status": "True"}]}),
                ("Running", "1/2", 0),
            ),
            (
                json!({"phase": "Failed", "reason": "Evicted"}),
                ("Evicted", "0/2", 0),
            ),
            (
                json!({"phase": "Running", "containerStatuses": [
                    {"state": {"terminated": {"exitCode": 2}}}, running(false, 0)]}),
                ("ExitCode:2", "0/2", 0),
            ),
        ];
        for (status, (expected, ready, restarts)) in cases {
            assert_eq!(
                summary(status.clone()),
                (expected.to_string(), ready.to_string(), restarts),
                "{status}"
            );
        }
    }

    #[test]
    fn pods_being_deleted_and_finished_pods() {
        let mut deleting = pod_with(json!({"phase": "Running"}));
        deleting["metadata"]["deletionTimestamp"] = ago(1).into();
        assert_eq!(cells("", "Pod", deleting.clone())[2], "Terminating");
        deleting["status"]["reason"] = "NodeLost".into();
        assert_eq!(cells("", "Pod", deleting)[2], "Unknown");

        let printer = printer_for("", "Pod").map(|p| p.row);
        let done = pod_with(json!({"phase": "Succeeded"}));
        let row = printer.map(|row| row(&done, now())).unwrap_or_default();
        assert_eq!(row.conditions[0]["reason"], "Succeeded");
        assert_eq!(row.cells[2], "Succeeded");
    }

    #[test]
    fn pod_wide_cells() {
        let pod = json!({"metadata": {"name": "p", "creationTimestamp": ago(303)},
            "spec": {"containers": [{"name": "a"}], "nodeName": "n1",
                     "readinessGates": [{"conditionType": "x"}, {"conditionType": "y"}]},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.7"}], "podIP": "10.0.0.7",
                       "conditions": [{"type": "x", "status": "True"}, {"type": "y", "status": "False"}]}});
        assert_eq!(
            cells("", "Pod", pod),
            [
                json!("p"),
                json!("0/1"),
                json!("Running"),
                json!("0"),
                json!("5m3s"),
                json!("10.0.0.7"),
                json!("n1"),
                json!("<none>"),
                json!("1/2")
            ]
        );
    }

    #[test]
    fn workloads() {
        let rs = json!({"metadata": {"name": "web", "creationTimestamp": ago(7200)},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "busybox"}]}}},
            "status": {"replicas": 2, "readyReplicas": 1}});
        assert_eq!(
            cells("apps", "ReplicaSet", rs.clone()),
            [
                json!("web"),
                json!(3),
                json!(2),
                json!(1),
                json!("120m"),
                json!("a,b"),
                json!("nginx,busybox"),
                json!("app=web")
            ]
        );
        let deploy = cells("apps", "Deployment", rs);
        assert_eq!(deploy[1], "1/3");
        assert_eq!(deploy[7], "app=web");
    }

    #[test]
    fn events() {
        let event = json!({"metadata": {"name": "e.1"}, "type": "Warning", "reason": "BackOff",
            "involvedObject": {"kind": "Pod", "name": "web-1", "fieldPath": "spec.containers{a}"},
            "source": {"component": "kubelet", "host": "n1"}, "message": " Back-off \n",
            "firstTimestamp": ago(3 * 86_400), "lastTimestamp": ago(60), "count": 7});
        assert_eq!(
            cells("", "Event", event),
            [
                json!("60s"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/web-1"),
                json!("spec.containers{a}"),
                json!("kubelet, n1"),
                json!("Back-off"),
                json!("3d"),
                json!(7),
                json!("e.1")
            ]
        );
        let new_api = json!({"metadata": {"name": "e.2"}, "eventTime": "2023-11-14T22:13:10.000000Z",
            "reportingComponent": "ctl", "involvedObject": {"kind": "Node"},
            "series": {"count": 2, "lastObservedTime": "2023-11-14T22:13:15.500000Z"}});
        let c = cells("", "Event", new_api);
        assert_eq!(
            (&c[0], &c[3], &c[5], &c[7], &c[8]),
            (
                &json!("4s"),
                &json!("node"),
                &json!("ctl"),
                &json!("10s"),
                &json!(2)
            )
        );
        let bare = cells("", "Event", json!({"metadata": {"name": "e.3"}}));
        assert_eq!(
            (&bare[0], &bare[7], &bare[8]),
            (&json!("<unknown>"), &json!("<unknown>"), &json!(1))
        );
    }

    #[test]
    fn small_kinds() {
        let made = ago(10);
        assert_eq!(
            cells(
                "",
                "ConfigMap",
                json!({"metadata": {"name": "c", "creationTimestamp": made},
                "data": {"a": "1", "b": "2"}, "binaryData": {"c": ""}})
            ),
            [json!("c"), json!(3), json!("10s")]
        );
        assert_eq!(
            cells(
                "",
                "Namespace",
                json!({"metadata": {"name": "n"}, "status": {"phase": "Terminating"}})
            ),
            [json!("n"), json!("Terminating"), json!("<unknown>")]
        );
        assert_eq!(
            cells(
                "coordination.k8s.io",
                "Lease",
                json!({"metadata": {"name": "l"}, "spec": {}})
            ),
            [json!("l"), json!(""), json!("<unknown>")]
        );
        assert_eq!(
            cells(
                "",
                "Secret",
                json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "dg=="}})
            )[1..3],
            [json!("Opaque"), json!(1)]
        );
        assert_eq!(
            cells(
                "",
                "PodTemplate",
                json!({"metadata": {"name": "t"},
                "template": {"metadata": {"labels": {"b": "2", "a": "1"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}})
            ),
            [json!("t"), json!("c"), json!("i"), json!("a=1,b=2")]
        );
    }

    #[test]
    fn services() {
        let svc = |spec: Value, status: Value| {
            cells(
                "",
                "Service",
                json!({"metadata": {"name": "s"}, "spec": spec, "status": status}),
            )
        };
        let c = svc(
            json!({"type": "NodePort", "clusterIPs": ["10.0.0.1"], "selector": {"app": "web"},
                   "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}, {"port": 53, "protocol": "UDP"}]}),
            json!({}),
        );
        assert_eq!(
            &c[1..5],
            [
                json!("NodePort"),
                json!("10.0.0.1"),
                json!("<none>"),
                json!("80:30080/TCP,53/UDP")
            ]
        );
        assert_eq!(c[6], "app=web");
        let lb = svc(
            json!({"type": "LoadBalancer", "externalIPs": ["9.9.9.9"]}),
            json!({"loadBalancer": {"ingress": [{"ip": "2.2.2.2"}, {"hostname": "lb.example"}]}}),
        );
        assert_eq!(lb[3], "2.2.2.2,lb.example,9.9.9.9");
        assert_eq!(lb[2], "<none>");
        assert_eq!(lb[4], "<none>");
        let pending = svc(json!({"type": "LoadBalancer"}), json!({}));
        assert_eq!(pending[3], "<pending>");
        let external = svc(
            json!({"type": "ExternalName", "externalName": "db.example"}),
            json!({}),
        );
        assert_eq!(external[3], "db.example");
    }

    #[test]
    fn nodes() {
        let n = json!({"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/master": "",
                "kubernetes.io/role": "worker", "node-role.kubernetes.io/": "x"}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "False"}],
                       "addresses": [{"type": "InternalIP", "address": "10.1.1.1"}],
                       "nodeInfo": {"kubeletVersion": "v1.20.2", "osImage": "Debian"}}});
        assert_eq!(
            cells("", "Node", n),
            [
                json!("n1"),
                json!("NotReady,SchedulingDisabled"),
                json!("master,worker"),
                json!("<unknown>"),
                json!("v1.20.2"),
                json!("10.1.1.1"),
                json!("<none>"),
                json!("Debian"),
                json!("<unknown>"),
                json!("<unknown>")
            ]
        );
        let bare = cells("", "Node", json!({"metadata": {"name": "n2"}}));
        assert_eq!((&bare[1], &bare[2]), (&json!("Unknown"), &json!("<none>")));
    }
}
