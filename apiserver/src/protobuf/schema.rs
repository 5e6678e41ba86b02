//! The schema table: for each message kubectl's generators (and e2e.test's CustomResourceDefinition
//! clients) write, its field numbers, JSON names and types. Numbers are from Kubernetes'
//! `generated.proto` files; a field absent here makes the decoder refuse the body (415) rather than
//! drop it.
//!
//! `keep_zero` marks fields that are pointers in Go (`*int32`, `*bool`, `*string`): the Go
//! marshaller writes them only when set, so a zero there is a client's choice and is kept. It also
//! marks the few non-pointer fields whose JSON form has no `omitempty` and that a reader may tell
//! apart from absent (a CRD version's `served: false`).
//!
//! The table is recursive in one place: `JSONSchemaProps` (a CRD's OpenAPI schema) holds
//! `JSONSchemaProps` in `properties`, `items`, `allOf`... The decoder bounds the depth (see
//! [`super::MAX_DEPTH`]).

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
    /// `double` (wire type 1): a JSON number, written as an integer when it is one (as Go does).
    Double,
    /// A message `{1 bytes raw}` whose bytes are JSON text (apiextensions `JSON`, meta `FieldsV1`):
    /// the JSON value itself; empty bytes are `null`.
    Json,
    /// A message that Go writes in JSON as one of several shapes (see [`Fold`]): decoded by its
    /// schema, then folded into that shape.
    Fold(&'static Schema, Fold),
}

/// The JSON shapes of apiextensions' "or" types, each a message in protobuf: a schema, or what the
/// variant names. The JSON form follows their Go `MarshalJSON` methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// `JSONSchemaPropsOrArray {1 schema, 2 jSONSchemas}`: the array when it is not empty, else
    /// the schema (`null` without one).
    Array,
    /// `JSONSchemaPropsOrBool {1 allows, 2 schema}`: the schema when there is one, else `allows`.
    Bool,
    /// `JSONSchemaPropsOrStringArray {1 schema, 2 property}`: the strings when there are any,
    /// else the schema (`null` without one).
    StringArray,
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
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            Some(&CUSTOM_RESOURCE_DEFINITION)
        }
        // Registered in every group version (a typed client sends it under its own, e.g.
        // apiextensions.k8s.io/v1), and in meta.k8s.io/v1.
        (_, "DeleteOptions") => Some(&DELETE_OPTIONS),
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
        // Sent back by clients that read an object and write it again (an update after a get).
        many(17, "managedFields", Ty::Message(&MANAGED_FIELDS_ENTRY)),
    ],
};

static MANAGED_FIELDS_ENTRY: Schema = Schema {
    name: "meta.v1.ManagedFieldsEntry",
    fields: &[
        one(1, "manager", Ty::String),
        one(2, "operation", Ty::String),
        one(3, "apiVersion", Ty::String),
        ptr(4, "time", Ty::Time),
        one(6, "fieldsType", Ty::String),
        // `FieldsV1 {1 Raw}`: JSON text, a JSON object in the JSON form.
        ptr(7, "fieldsV1", Ty::Json),
        one(8, "subresource", Ty::String),
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

/// The body of a DELETE. `ignoreStoreReadErrorWithClusterBreakingPotential` (6) is left out: this
/// server has no unsafe deletion, so a body asking for it is refused (415) rather than obeyed in part.
pub static DELETE_OPTIONS: Schema = Schema {
    name: "meta.v1.DeleteOptions",
    fields: &[
        ptr(1, "gracePeriodSeconds", Ty::Int64),
        one(2, "preconditions", Ty::Message(&PRECONDITIONS)),
        ptr(3, "orphanDependents", Ty::Bool),
        ptr(4, "propagationPolicy", Ty::String),
        many(5, "dryRun", Ty::String),
    ],
};

static PRECONDITIONS: Schema = Schema {
    name: "meta.v1.Preconditions",
    fields: &[
        ptr(1, "uid", Ty::String),
        ptr(2, "resourceVersion", Ty::String),
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

// ---- apiextensions.k8s.io/v1: CustomResourceDefinition ----
//
// Numbers from Kubernetes 1.37's
// staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1/generated.proto.

pub static CUSTOM_RESOURCE_DEFINITION: Schema = Schema {
    name: "apiextensions.v1.CustomResourceDefinition",
    fields: &[
        one(1, "metadata", Ty::Message(&OBJECT_META)),
        one(2, "spec", Ty::Message(&CRD_SPEC)),
        one(3, "status", Ty::Message(&CRD_STATUS)),
    ],
};

static CRD_SPEC: Schema = Schema {
    name: "apiextensions.v1.CustomResourceDefinitionSpec",
    fields: &[
        one(1, "group", Ty::String),
        one(3, "names", Ty::Message(&CRD_NAMES)),
        one(4, "scope", Ty::String),
        many(7, "versions", Ty::Message(&CRD_VERSION)),
        one(9, "conversion", Ty::Message(&CRD_CONVERSION)),
        one(10, "preserveUnknownFields", Ty::Bool),
    ],
};

static CRD_NAMES: Schema = Schema {
    name: "apiextensions.v1.CustomResourceDefinitionNames",
    fields: &[
        one(1, "plural", Ty::String),
        one(2, "singular", Ty::String),
        many(3, "shortNames", Ty::String),
        one(4, "kind", Ty::String),
        one(5, "listKind", Ty::String),
        many(6, "categories", Ty::String),
    ],
};

static CRD_VERSION: Schema = Schema {
    name: "apiextensions.v1.CustomResourceDefinitionVersion",
    fields: &[
        one(1, "name", Ty::String),
        // No `omitempty` in Go's JSON: `served: false` is written, and kept here.
        ptr(2, "served", Ty::Bool),
        ptr(3, "storage", Ty::Bool),
        one(4, "schema", Ty::Message(&CRD_VALIDATION)),
        one(5, "subresources", Ty::Message(&CRD_SUBRESOURCES)),
        many(
            6,
            "additionalPrinterColumns",
            Ty::Message(&CRD_COLUMN_DEFINITION),
        ),
        one(7, "deprecated", Ty::Bool),
        ptr(8, "deprecationWarning", Ty::String),
        many(9, "selectableFields", Ty::Message(&CRD_SELECTABLE_FIELD)),
    ],
};

static CRD_SELECTABLE_FIELD: Schema = Schema {
    name: "apiextensions.v1.SelectableField",
    fields: &[one(1, "jsonPath", Ty::String)],
};

static CRD_COLUMN_DEFINITION: Schema = Schema {
    name: "apiextensions.v1.CustomResourceColumnDefinition",
    fields: &[
        one(1, "name", Ty::String),
        one(2, "type", Ty::String),
        one(3, "format", Ty::String),
        one(4, "description", Ty::String),
        one(5, "priority", Ty::Int32),
        one(6, "jsonPath", Ty::String),
    ],
};

static CRD_SUBRESOURCES: Schema = Schema {
    name: "apiextensions.v1.CustomResourceSubresources",
    fields: &[
        one(1, "status", Ty::Message(&CRD_SUBRESOURCE_STATUS)),
        one(2, "scale", Ty::Message(&CRD_SUBRESOURCE_SCALE)),
    ],
};

/// An empty message: its presence is the whole meaning (`status: {}`).
static CRD_SUBRESOURCE_STATUS: Schema = Schema {
    name: "apiextensions.v1.CustomResourceSubresourceStatus",
    fields: &[],
};

static CRD_SUBRESOURCE_SCALE: Schema = Schema {
    name: "apiextensions.v1.CustomResourceSubresourceScale",
    fields: &[
        one(1, "specReplicasPath", Ty::String),
        one(2, "statusReplicasPath", Ty::String),
        ptr(3, "labelSelectorPath", Ty::String),
    ],
};

static CRD_CONVERSION: Schema = Schema {
    name: "apiextensions.v1.CustomResourceConversion",
    fields: &[
        one(1, "strategy", Ty::String),
        one(2, "webhook", Ty::Message(&CRD_WEBHOOK_CONVERSION)),
    ],
};

static CRD_WEBHOOK_CONVERSION: Schema = Schema {
    name: "apiextensions.v1.WebhookConversion",
    fields: &[
        one(2, "clientConfig", Ty::Message(&CRD_WEBHOOK_CLIENT_CONFIG)),
        many(3, "conversionReviewVersions", Ty::String),
    ],
};

static CRD_WEBHOOK_CLIENT_CONFIG: Schema = Schema {
    name: "apiextensions.v1.WebhookClientConfig",
    fields: &[
        one(1, "service", Ty::Message(&CRD_SERVICE_REFERENCE)),
        one(2, "caBundle", Ty::Bytes),
        ptr(3, "url", Ty::String),
    ],
};

static CRD_SERVICE_REFERENCE: Schema = Schema {
    name: "apiextensions.v1.ServiceReference",
    fields: &[
        one(1, "namespace", Ty::String),
        one(2, "name", Ty::String),
        ptr(3, "path", Ty::String),
        ptr(4, "port", Ty::Int32),
    ],
};

static CRD_VALIDATION: Schema = Schema {
    name: "apiextensions.v1.CustomResourceValidation",
    fields: &[one(1, "openAPIV3Schema", Ty::Message(&JSON_SCHEMA_PROPS))],
};

static CRD_STATUS: Schema = Schema {
    name: "apiextensions.v1.CustomResourceDefinitionStatus",
    fields: &[
        many(1, "conditions", Ty::Message(&CRD_CONDITION)),
        one(2, "acceptedNames", Ty::Message(&CRD_NAMES)),
        many(3, "storedVersions", Ty::String),
        one(4, "observedGeneration", Ty::Int64),
    ],
};

static CRD_CONDITION: Schema = Schema {
    name: "apiextensions.v1.CustomResourceDefinitionCondition",
    fields: &[
        one(1, "type", Ty::String),
        one(2, "status", Ty::String),
        one(3, "lastTransitionTime", Ty::Time),
        one(4, "reason", Ty::String),
        one(5, "message", Ty::String),
        one(6, "observedGeneration", Ty::Int64),
    ],
};

/// A schema inside a schema as a map's value (`properties`, `definitions`...). A static, not a
/// const: a const may not refer to the static that uses it.
static PROPS_VALUE: Ty = Ty::Message(&JSON_SCHEMA_PROPS);

static JSON_SCHEMA_PROPS: Schema = Schema {
    name: "apiextensions.v1.JSONSchemaProps",
    fields: &[
        one(1, "id", Ty::String),
        one(2, "$schema", Ty::String),
        ptr(3, "$ref", Ty::String),
        one(4, "description", Ty::String),
        one(5, "type", Ty::String),
        one(6, "format", Ty::String),
        one(7, "title", Ty::String),
        ptr(8, "default", Ty::Json),
        ptr(9, "maximum", Ty::Double),
        one(10, "exclusiveMaximum", Ty::Bool),
        ptr(11, "minimum", Ty::Double),
        one(12, "exclusiveMinimum", Ty::Bool),
        ptr(13, "maxLength", Ty::Int64),
        ptr(14, "minLength", Ty::Int64),
        one(15, "pattern", Ty::String),
        ptr(16, "maxItems", Ty::Int64),
        ptr(17, "minItems", Ty::Int64),
        one(18, "uniqueItems", Ty::Bool),
        ptr(19, "multipleOf", Ty::Double),
        many(20, "enum", Ty::Json),
        ptr(21, "maxProperties", Ty::Int64),
        ptr(22, "minProperties", Ty::Int64),
        many(23, "required", Ty::String),
        ptr(
            24,
            "items",
            Ty::Fold(&JSON_SCHEMA_PROPS_OR_ARRAY, Fold::Array),
        ),
        many(25, "allOf", Ty::Message(&JSON_SCHEMA_PROPS)),
        many(26, "oneOf", Ty::Message(&JSON_SCHEMA_PROPS)),
        many(27, "anyOf", Ty::Message(&JSON_SCHEMA_PROPS)),
        one(28, "not", Ty::Message(&JSON_SCHEMA_PROPS)),
        one(29, "properties", Ty::Map(&PROPS_VALUE)),
        ptr(
            30,
            "additionalProperties",
            Ty::Fold(&JSON_SCHEMA_PROPS_OR_BOOL, Fold::Bool),
        ),
        one(31, "patternProperties", Ty::Map(&PROPS_VALUE)),
        one(
            32,
            "dependencies",
            Ty::Map(&Ty::Fold(
                &JSON_SCHEMA_PROPS_OR_STRING_ARRAY,
                Fold::StringArray,
            )),
        ),
        ptr(
            33,
            "additionalItems",
            Ty::Fold(&JSON_SCHEMA_PROPS_OR_BOOL, Fold::Bool),
        ),
        one(34, "definitions", Ty::Map(&PROPS_VALUE)),
        one(35, "externalDocs", Ty::Message(&EXTERNAL_DOCUMENTATION)),
        ptr(36, "example", Ty::Json),
        one(37, "nullable", Ty::Bool),
        ptr(38, "x-kubernetes-preserve-unknown-fields", Ty::Bool),
        one(39, "x-kubernetes-embedded-resource", Ty::Bool),
        one(40, "x-kubernetes-int-or-string", Ty::Bool),
        many(41, "x-kubernetes-list-map-keys", Ty::String),
        ptr(42, "x-kubernetes-list-type", Ty::String),
        ptr(43, "x-kubernetes-map-type", Ty::String),
        many(
            44,
            "x-kubernetes-validations",
            Ty::Message(&VALIDATION_RULE),
        ),
    ],
};

static JSON_SCHEMA_PROPS_OR_ARRAY: Schema = Schema {
    name: "apiextensions.v1.JSONSchemaPropsOrArray",
    fields: &[
        one(1, "schema", Ty::Message(&JSON_SCHEMA_PROPS)),
        many(2, "jSONSchemas", Ty::Message(&JSON_SCHEMA_PROPS)),
    ],
};

static JSON_SCHEMA_PROPS_OR_BOOL: Schema = Schema {
    name: "apiextensions.v1.JSONSchemaPropsOrBool",
    fields: &[
        one(1, "allows", Ty::Bool),
        one(2, "schema", Ty::Message(&JSON_SCHEMA_PROPS)),
    ],
};

static JSON_SCHEMA_PROPS_OR_STRING_ARRAY: Schema = Schema {
    name: "apiextensions.v1.JSONSchemaPropsOrStringArray",
    fields: &[
        one(1, "schema", Ty::Message(&JSON_SCHEMA_PROPS)),
        many(2, "property", Ty::String),
    ],
};

static EXTERNAL_DOCUMENTATION: Schema = Schema {
    name: "apiextensions.v1.ExternalDocumentation",
    fields: &[one(1, "description", Ty::String), one(2, "url", Ty::String)],
};

static VALIDATION_RULE: Schema = Schema {
    name: "apiextensions.v1.ValidationRule",
    fields: &[
        one(1, "rule", Ty::String),
        one(2, "message", Ty::String),
        one(3, "messageExpression", Ty::String),
        ptr(4, "reason", Ty::String),
        one(5, "fieldPath", Ty::String),
        ptr(6, "optionalOldSelf", Ty::Bool),
    ],
};
