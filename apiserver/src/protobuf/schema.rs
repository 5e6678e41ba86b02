//! The schema table: for each message kubectl's generators write, its field numbers, JSON names
//! and types. Numbers are from Kubernetes' `generated.proto` files; a field absent here makes the
//! decoder refuse the body (415) rather than drop it.
//!
//! `keep_zero` marks fields that are pointers in Go (`*int32`, `*bool`, `*string`): the Go
//! marshaller writes them only when set, so a zero there is a client's choice and is kept.

/// A field's type.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    String,
    /// Base64 text in JSON.
    Bytes,
    Int32,
    Int64,
    Bool,
    Message(&'static Schema),
    /// `map<string, V>`: entries {1 key, 2 value}.
    Map(&'static Ty),
    /// `intstr.IntOrString`: a JSON number or string.
    IntOrString,
    /// `resource.Quantity`: a JSON string.
    Quantity,
    /// `meta.v1.Time`: an RFC 3339 string.
    Time,
}

/// One field of a message.
#[derive(Debug)]
pub struct Field {
    pub number: u32,
    pub name: &'static str,
    pub ty: Ty,
    pub repeated: bool,
    pub keep_zero: bool,
}

/// One message: its proto name (for errors) and its fields.
#[derive(Debug)]
pub struct Schema {
    pub name: &'static str,
    pub fields: &'static [Field],
}

/// A singular field whose zero value means unset.
const fn one(number: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        number,
        name,
        ty,
        repeated: false,
        keep_zero: false,
    }
}

/// A singular field that is a pointer in Go: a zero value is kept.
const fn ptr(number: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        number,
        name,
        ty,
        repeated: false,
        keep_zero: true,
    }
}

/// A repeated field: a JSON array.
const fn many(number: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        number,
        name,
        ty,
        repeated: true,
        keep_zero: false,
    }
}

const STRING_MAP: Ty = Ty::Map(&Ty::String);
const BYTES_MAP: Ty = Ty::Map(&Ty::Bytes);
const QUANTITY_MAP: Ty = Ty::Map(&Ty::Quantity);

/// The schema of a top-level kind, by apiVersion and kind.
pub fn top_level(api_version: &str, kind: &str) -> Option<&'static Schema> {
    match (api_version, kind) {
        ("v1", "Namespace") => Some(&NAMESPACE),
        ("v1", "ConfigMap") => Some(&CONFIG_MAP),
        ("v1", "Secret") => Some(&SECRET),
        ("v1", "Service") => Some(&SERVICE),
        ("v1", "Pod") => Some(&POD),
        ("apps/v1", "Deployment") => Some(&DEPLOYMENT),
        _ => None,
    }
}

// ---- meta/v1 ----

pub static OBJECT_META: Schema = Schema {
    name: "meta.v1.ObjectMeta",
    fields: &[
        one(1, "name", Ty::String),
        one(2, "generateName", Ty::String),
        one(3, "namespace", Ty::String),
        one(4, "selfLink", Ty::String),
        one(5, "uid", Ty::String),
        one(6, "resourceVersion", Ty::String),
        one(7, "generation", Ty::Int64),
        one(8, "creationTimestamp", Ty::Time),
        ptr(9, "deletionTimestamp", Ty::Time),
        ptr(10, "deletionGracePeriodSeconds", Ty::Int64),
        one(11, "labels", STRING_MAP),
        one(12, "annotations", STRING_MAP),
        many(13, "ownerReferences", Ty::Message(&OWNER_REFERENCE)),
        many(14, "finalizers", Ty::String),
        // Written (empty) by Go clients before 1.25, which removed it.
        one(15, "clusterName", Ty::String),
    ],
};

static OWNER_REFERENCE: Schema = Schema {
    name: "meta.v1.OwnerReference",
    fields: &[
        one(1, "kind", Ty::String),
        one(3, "name", Ty::String),
        one(4, "uid", Ty::String),
        one(5, "apiVersion", Ty::String),
        ptr(6, "controller", Ty::Bool),
        ptr(7, "blockOwnerDeletion", Ty::Bool),
    ],
};

static LABEL_SELECTOR: Schema = Schema {
    name: "meta.v1.LabelSelector",
    fields: &[
        one(1, "matchLabels", STRING_MAP),
        many(
            2,
            "matchExpressions",
            Ty::Message(&LABEL_SELECTOR_REQUIREMENT),
        ),
    ],
};

static LABEL_SELECTOR_REQUIREMENT: Schema = Schema {
    name: "meta.v1.LabelSelectorRequirement",
    fields: &[
        one(1, "key", Ty::String),
        one(2, "operator", Ty::String),
        many(3, "values", Ty::String),
    ],
};

// ---- core/v1: Namespace, ConfigMap, Secret ----

pub static NAMESPACE: Schema = Schema {
    name: "core.v1.Namespace",
    fields: &[
        one(1, "metadata", Ty::Message(&OBJECT_META)),
        one(2, "spec", Ty::Message(&NAMESPACE_SPEC)),
        one(3, "status", Ty::Message(&NAMESPACE_STATUS)),
    ],
};

static NAMESPACE_SPEC: Schema = Schema {
    name: "core.v1.NamespaceSpec",
    fields: &[many(1, "finalizers", Ty::String)],
};

static NAMESPACE_STATUS: Schema = Schema {
    name: "core.v1.NamespaceStatus",
    fields: &[one(1, "phase", Ty::String)],
};

pub static CONFIG_MAP: Schema = Schema {
    name: "core.v1.ConfigMap",
    fields: &[
        one(1, "metadata", Ty::Message(&OBJECT_META)),
        one(2, "data", STRING_MAP),
        one(3, "binaryData", BYTES_MAP),
        ptr(4, "immutable", Ty::Bool),
    ],
};

pub static SECRET: Schema = Schema {
    name: "core.v1.Secret",
    fields: &[
        one(1, "metadata", Ty::Message(&OBJECT_META)),
        one(2, "data", BYTES_MAP),
        one(3, "type", Ty::String),
        one(4, "stringData", STRING_MAP),
        ptr(5, "immutable", Ty::Bool),
    ],
};

// ---- core/v1: Service ----

pub static SERVICE: Schema = Schema {
    name: "core.v1.Service",
    fields: &[
        one(1, "metadata", Ty::Message(&OBJECT_META)),
        one(2, "spec", Ty::Message(&SERVICE_SPEC)),
        one(3, "status", Ty::Message(&SERVICE_STATUS)),
    ],
};

static SERVICE_SPEC: Schema = Schema {
    name: "core.v1.ServiceSpec",
    fields: &[
        many(1, "ports", Ty::Message(&SERVICE_PORT)),
        one(2, "selector", STRING_MAP),
        one(3, "clusterIP", Ty::String),
        one(4, "type", Ty::String),
        many(5, "externalIPs", Ty::String),
        one(7, "sessionAffinity", Ty::String),
        one(8, "loadBalancerIP", Ty::String),
        many(9, "loadBalancerSourceRanges", Ty::String),
        one(10, "externalName", Ty::String),
        one(11, "externalTrafficPolicy", Ty::String),
        one(12, "healthCheckNodePort", Ty::Int32),
        one(13, "publishNotReadyAddresses", Ty::Bool),
        ptr(17, "ipFamilyPolicy", Ty::String),
        many(18, "clusterIPs", Ty::String),
        many(19, "ipFamilies", Ty::String),
        ptr(20, "allocateLoadBalancerNodePorts", Ty::Bool),
    ],
};

static SERVICE_PORT: Schema = Schema {
    name: "core.v1.ServicePort",
    fields: &[
        one(1, "name", Ty::String),
        one(2, "protocol", Ty::String),
        one(3, "port", Ty::Int32),
        // Not a pointer in Go, but Go's JSON writes it even when 0 (a struct is never omitted).
        ptr(4, "targetPort", Ty::IntOrString),
        one(5, "nodePort", Ty::Int32),
        ptr(6, "appProtocol", Ty::String),
    ],
};

static SERVICE_STATUS: Schema = Schema {
    name: "core.v1.ServiceStatus",
    fields: &[one(1, "loadBalancer", Ty::Message(&LOAD_BALANCER_STATUS))],
};

static LOAD_BALANCER_STATUS: Schema = Schema {
    name: "core.v1.LoadBalancerStatus",
    fields: &[many(1, "ingress", Ty::Message(&LOAD_BALANCER_INGRESS))],
};

static LOAD_BALANCER_INGRESS: Schema = Schema {
    name: "core.v1.LoadBalancerIngress",
    fields: &[one(1, "ip", Ty::String), one(2, "hostname", Ty::String)],
};

// ---- core/v1: Pod ----

pub static POD: Schema = Schema {
    name: "core.v1.Pod",
    fields: &[
        one(1, "metadata", Ty::Message(&OBJECT_META)),
        one(2, "spec", Ty::Message(&POD_SPEC)),
        one(3, "status", Ty::Message(&POD_STATUS)),
    ],
};

static POD_TEMPLATE_SPEC: Schema = Schema {
    name: "core.v1.PodTemplateSpec",
    fields: &[
        one(1, "metadata", Ty::Message(&OBJECT_META)),
        one(2, "spec", Ty::Message(&POD_SPEC)),
    ],
};

static POD_SPEC: Schema = Schema {
    name: "core.v1.PodSpec",
    fields: &[
        many(2, "containers", Ty::Message(&CONTAINER)),
        one(3, "restartPolicy", Ty::String),
        ptr(4, "terminationGracePeriodSeconds", Ty::Int64),
        ptr(5, "activeDeadlineSeconds", Ty::Int64),
        one(6, "dnsPolicy", Ty::String),
        one(7, "nodeSelector", STRING_MAP),
        one(8, "serviceAccountName", Ty::String),
        one(9, "serviceAccount", Ty::String),
        one(10, "nodeName", Ty::String),
        one(11, "hostNetwork", Ty::Bool),
        one(12, "hostPID", Ty::Bool),
        one(13, "hostIPC", Ty::Bool),
        many(15, "imagePullSecrets", Ty::Message(&LOCAL_OBJECT_REFERENCE)),
        one(16, "hostname", Ty::String),
        one(17, "subdomain", Ty::String),
        one(19, "schedulerName", Ty::String),
        many(20, "initContainers", Ty::Message(&CONTAINER)),
        ptr(21, "automountServiceAccountToken", Ty::Bool),
        one(24, "priorityClassName", Ty::String),
        ptr(25, "priority", Ty::Int32),
        ptr(27, "shareProcessNamespace", Ty::Bool),
        ptr(29, "runtimeClassName", Ty::String),
        ptr(30, "enableServiceLinks", Ty::Bool),
        ptr(31, "preemptionPolicy", Ty::String),
        ptr(35, "setHostnameAsFQDN", Ty::Bool),
    ],
};

static LOCAL_OBJECT_REFERENCE: Schema = Schema {
    name: "core.v1.LocalObjectReference",
    fields: &[one(1, "name", Ty::String)],
};

static CONTAINER: Schema = Schema {
    name: "core.v1.Container",
    fields: &[
        one(1, "name", Ty::String),
        one(2, "image", Ty::String),
        many(3, "command", Ty::String),
        many(4, "args", Ty::String),
        one(5, "workingDir", Ty::String),
        many(6, "ports", Ty::Message(&CONTAINER_PORT)),
        many(7, "env", Ty::Message(&ENV_VAR)),
        one(8, "resources", Ty::Message(&RESOURCE_REQUIREMENTS)),
        one(13, "terminationMessagePath", Ty::String),
        one(14, "imagePullPolicy", Ty::String),
        one(16, "stdin", Ty::Bool),
        one(17, "stdinOnce", Ty::Bool),
        one(18, "tty", Ty::Bool),
        one(20, "terminationMessagePolicy", Ty::String),
    ],
};

static CONTAINER_PORT: Schema = Schema {
    name: "core.v1.ContainerPort",
    fields: &[
        one(1, "name", Ty::String),
        one(2, "hostPort", Ty::Int32),
        one(3, "containerPort", Ty::Int32),
        one(4, "protocol", Ty::String),
        one(5, "hostIP", Ty::String),
    ],
};

static ENV_VAR: Schema = Schema {
    name: "core.v1.EnvVar",
    fields: &[one(1, "name", Ty::String), one(2, "value", Ty::String)],
};

static RESOURCE_REQUIREMENTS: Schema = Schema {
    name: "core.v1.ResourceRequirements",
    fields: &[
        one(1, "limits", QUANTITY_MAP),
        one(2, "requests", QUANTITY_MAP),
    ],
};

static POD_STATUS: Schema = Schema {
    name: "core.v1.PodStatus",
    fields: &[
        one(1, "phase", Ty::String),
        one(3, "message", Ty::String),
        one(4, "reason", Ty::String),
        one(5, "hostIP", Ty::String),
        one(6, "podIP", Ty::String),
        ptr(7, "startTime", Ty::Time),
        one(9, "qosClass", Ty::String),
        one(11, "nominatedNodeName", Ty::String),
    ],
};

// ---- apps/v1: Deployment ----

pub static DEPLOYMENT: Schema = Schema {
    name: "apps.v1.Deployment",
    fields: &[
        one(1, "metadata", Ty::Message(&OBJECT_META)),
        one(2, "spec", Ty::Message(&DEPLOYMENT_SPEC)),
        one(3, "status", Ty::Message(&DEPLOYMENT_STATUS)),
    ],
};

static DEPLOYMENT_SPEC: Schema = Schema {
    name: "apps.v1.DeploymentSpec",
    fields: &[
        ptr(1, "replicas", Ty::Int32),
        one(2, "selector", Ty::Message(&LABEL_SELECTOR)),
        one(3, "template", Ty::Message(&POD_TEMPLATE_SPEC)),
        one(4, "strategy", Ty::Message(&DEPLOYMENT_STRATEGY)),
        one(5, "minReadySeconds", Ty::Int32),
        ptr(6, "revisionHistoryLimit", Ty::Int32),
        one(7, "paused", Ty::Bool),
        ptr(9, "progressDeadlineSeconds", Ty::Int32),
    ],
};

static DEPLOYMENT_STRATEGY: Schema = Schema {
    name: "apps.v1.DeploymentStrategy",
    fields: &[
        one(1, "type", Ty::String),
        one(2, "rollingUpdate", Ty::Message(&ROLLING_UPDATE_DEPLOYMENT)),
    ],
};

static ROLLING_UPDATE_DEPLOYMENT: Schema = Schema {
    name: "apps.v1.RollingUpdateDeployment",
    fields: &[
        ptr(1, "maxUnavailable", Ty::IntOrString),
        ptr(2, "maxSurge", Ty::IntOrString),
    ],
};

static DEPLOYMENT_STATUS: Schema = Schema {
    name: "apps.v1.DeploymentStatus",
    fields: &[
        one(1, "observedGeneration", Ty::Int64),
        one(2, "replicas", Ty::Int32),
        one(3, "updatedReplicas", Ty::Int32),
        one(4, "availableReplicas", Ty::Int32),
        one(5, "unavailableReplicas", Ty::Int32),
        one(7, "readyReplicas", Ty::Int32),
        ptr(8, "collisionCount", Ty::Int32),
    ],
};
