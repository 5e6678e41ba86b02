//! The `description` of each built-in column: the API documentation of the field the column shows,
//! in the words kube-apiserver 1.20 sends (its generated swagger docs; ReplicaSet and Deployment
//! columns quote the old `extensions/v1beta1` wording, as kube-apiserver's printers do).
//!
//! kubectl never prints these, but a client that renders a Table itself (a dashboard, a UI) shows
//! them as column tooltips, and the conformance comparison checks the whole Table.

/// `metadata.name`.
pub const NAME: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: http://kubernetes.io/docs/user-guide/identifiers#names";
/// `metadata.creationTimestamp`.
pub const CREATION_TIMESTAMP: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
/// A Pod's `status.podIP`.
pub const POD_IP: &str = "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.";
/// A Pod's `status.nominatedNodeName`.
pub const POD_NOMINATED_NODE: &str = "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.";
/// A Pod's `spec.nodeName`.
pub const POD_NODE: &str = "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the scheduler simply schedules this pod onto that node, assuming that it fits resource requirements.";
/// A Pod's `spec.readinessGates`.
pub const POD_READINESS_GATES: &str = "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/0007-pod-ready%2B%2B.md";
/// A ReplicaSet's `spec.replicas` (extensions/v1beta1 wording, as kube-apiserver sends).
pub const REPLICA_SET_REPLICAS: &str = "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller";
/// A ReplicaSet's `spec.selector`.
pub const REPLICA_SET_SELECTOR: &str = "Selector is a label query over pods that should match the replica count. If the selector is empty, it is defaulted to the labels present on the pod template. Label keys and values that must match in order to be controlled by this replica set. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
/// A ReplicaSet's `status.replicas`.
pub const REPLICA_SET_CURRENT: &str = "Replicas is the most recently oberved number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller";
/// A ReplicaSet's `status.readyReplicas`.
pub const REPLICA_SET_READY: &str = "The number of ready replicas for this replica set.";
/// A Deployment's `status.updatedReplicas`.
pub const DEPLOYMENT_UPDATED: &str = "Total number of non-terminated pods targeted by this deployment that have the desired template spec.";
/// A Deployment's `status.availableReplicas`.
pub const DEPLOYMENT_AVAILABLE: &str = "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.";
/// A Deployment's `spec.selector`.
pub const DEPLOYMENT_SELECTOR: &str = "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.";
/// An Event's `lastTimestamp`.
pub const EVENT_LAST_TIMESTAMP: &str =
    "The time at which the most recent occurrence of this event was recorded.";
/// An Event's `type`.
pub const EVENT_TYPE: &str =
    "Type of this event (Normal, Warning), new types could be added in the future";
/// An Event's `reason`.
pub const EVENT_REASON: &str = "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.";
/// An Event's `involvedObject`.
pub const EVENT_OBJECT: &str = "The object that this event is about.";
/// An Event's `involvedObject.fieldPath`.
pub const EVENT_SUBOBJECT: &str = "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.";
/// An Event's `source`.
pub const EVENT_SOURCE: &str =
    "The component reporting this event. Should be a short machine understandable string.";
/// An Event's `message`.
pub const EVENT_MESSAGE: &str = "A human-readable description of the status of this operation.";
/// An Event's `firstTimestamp`.
pub const EVENT_FIRST_TIMESTAMP: &str =
    "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)";
/// An Event's `count`.
pub const EVENT_COUNT: &str = "The number of times this event has occurred.";
/// A Secret's `type`.
pub const SECRET_TYPE: &str = "Used to facilitate programmatic handling of secret data.";
/// A Secret's `data`.
pub const SECRET_DATA: &str = "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4";
/// A ConfigMap's `data`.
pub const CONFIG_MAP_DATA: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";
/// A Lease's `spec.holderIdentity`.
pub const LEASE_HOLDER: &str =
    "holderIdentity contains the identity of the holder of a current lease.";
/// A Service's `spec.type`.
pub const SERVICE_TYPE: &str = "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types";
/// A Service's `spec.clusterIP`.
pub const SERVICE_CLUSTER_IP: &str = "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
/// A Service's `spec.externalIPs`.
pub const SERVICE_EXTERNAL_IPS: &str = "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.";
/// A Service's `spec.ports`.
pub const SERVICE_PORTS: &str = "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
/// A Service's `spec.selector`.
pub const SERVICE_SELECTOR: &str = "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/";
/// A ServiceAccount's `secrets`.
pub const SERVICE_ACCOUNT_SECRETS: &str = "Secrets is the list of secrets allowed to be used by pods running using this ServiceAccount. More info: https://kubernetes.io/docs/concepts/configuration/secret";
/// A Node's `status.nodeInfo.kubeletVersion`.
pub const NODE_KUBELET_VERSION: &str = "Kubelet Version reported by the node.";
/// A Node's `status.nodeInfo.osImage`.
pub const NODE_OS_IMAGE: &str =
    "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).";
/// A Node's `status.nodeInfo.kernelVersion`.
pub const NODE_KERNEL_VERSION: &str =
    "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).";
/// A Node's `status.nodeInfo.containerRuntimeVersion`.
pub const NODE_CONTAINER_RUNTIME: &str = "ContainerRuntime Version reported by the node through runtime remote API (e.g. docker://1.5.0).";
/// A Node's `status.addresses`.
pub const NODE_ADDRESSES: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/concepts/nodes/node/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See http://pr.k8s.io/79391 for an example.";
