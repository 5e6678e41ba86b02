//! An in-process Kubernetes API server: the real REST API over an in-memory store, for examples and
//! tests that must run without a cluster, with fault injection for the failures controllers must
//! survive.
//!
//! It is **not** the ground truth — a real kube-apiserver is — but it aims to be indistinguishable to
//! a client for the parts it implements, and the conformance suite (`tests/apiserver/conformance.rs`)
//! runs the same cases against both to keep it so.
//!
//! # How a request flows
//!
//! ```text
//!  HTTP/1.1 or h2, plain or TLS ──► http::handlers: host/origin, token, route
//!                                     │  http::request: verb, resource, namespace, name,
//!                                     │  subresource and typed options, parsed once (400/406/415)
//!                                     ▼
//!                                   http::verbs: one handler per verb (faults, body, answer)
//!                                     │
//!                                     ▼
//!                                   Api (verbs: create, patch, delete, ...)
//!                                     │  strategy: defaults, generation, status rules
//!                                     │  validation: names, required fields → 422
//!                                     │  custom kinds: schema pruning, defaults, checks
//!                                     │  quota admission: 403 over a ResourceQuota
//!                                     │  a CRD written ─► api::establish ─► Registry
//!                                     ▼
//!   watch stream ◄── WatchFeed ◄──── Store::transact: one lock, one global resourceVersion,
//!   (one task per watch)             history window, fan-out to bounded per-watcher buffers
//!                                         │
//!                                         └─► subscribers: GarbageCollector, ServiceAccounts,
//!                                             QuotaController, Kubelet (simulator)
//! ```
//!
//! # Layers
//!
//! The modules import one another in one direction only, from the server down to the object
//! model; none reaches back up (no import circles):
//!
//! ```text
//!  http                                       the server: routing, parsing, handlers, discovery
//!  gc, service_accounts, kubelet, table,      what runs beside the verbs or renders their results
//!  apply
//!  api (and api::establish)                   the verbs, and what a write sets off in-request
//!  strategy, validation, services, quota      what happens to an object on a write; admission
//!  store                                      objects, revisions, watches
//!  selection, shard, crd, patch               selectors, a CRD as an object, patches
//!  resource                                   the served types (and the errors about their objects)
//!  schema, cel, meta, status, faults,         leaves
//!  protobuf, wire,
//!  review, audit
//! ```
//!
//! Where a lower module needs something from a higher one, the dependency is turned around: the
//! quota admission reads the [`Store`], not the verbs; the errors about an object of a type are made
//! next to [`ResourceType`]; the CRD reconciler, which the verbs call, lives with them.
//!
//! | module | what it holds |
//! |---|---|
//! | [`store`] | objects, the global revision, watch history, watchers |
//! | [`api`] | the verbs, independent of HTTP |
//! | [`strategy`], [`validation`] | what happens to an object on create and update; 422s |
//! | [`patch`] | merge, JSON and strategic merge patches |
//! | [`protobuf`] | protobuf request bodies (kubectl's generators) decoded to JSON |
//! | [`apply`] | server-side apply, field managers and `managedFields` |
//! | [`selection`] | label and field selectors |
//! | [`shard`] | `shardSelector` (server-side sharded list and watch, KEP-5866): its parser and errors |
//! | [`resource`] | the served types: a [`Catalog`] snapshot per request, the live [`Registry`] |
//! | [`quota`] | ResourceQuota admission (403 when a create would exceed one) and usage status |
//! | [`review`] | token, self-subject and access reviews: answered, never stored |
//! | [`crd`] | CustomResourceDefinitions as objects: defaults, checks, status, the kinds one serves (the reconciler is the verbs', `api::establish`) |
//! | [`schema`] | structural schemas: pruning and validating custom objects → 422 |
//! | [`cel`] | CRD validation rules (`x-kubernetes-validations`): compiled when a CRD is written, run on every write of its objects |
//! | [`gc`] | ownerReferences: background, foreground, orphan; namespace deletion |
//! | [`kubelet`] | a stand-in scheduler + kubelet (Node objects; pods become Running/Ready; optional pod kills) |
//! | [`service_accounts`] | each namespace's `default` ServiceAccount; if asked, its `kube-root-ca.crt` and (as before 1.24) each account's token Secret |
//! | [`faults`] | injected failures: 500/429 writes, 409 updates, delayed watches, pause |
//! | [`table`] | Tables for `kubectl get`: built-in printers, CRD printer columns, Accept negotiation |
//! | [`http`] | the server, routing, discovery, TLS and kubeconfig |
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use ferrokube_apiserver::{ApiServer, KubeletSettings};
//! let server = ApiServer::new().tls(true).kubelet(KubeletSettings::default()).start().await?;
//! // Readable by its owner only (0600): the kubeconfig carries the token, when there is one.
//! server.write_kubeconfig(std::path::Path::new("/tmp/kubeconfig"))?;
//! // ... point a client (or kubectl) at it; then inject faults:
//! server.close_watches();
//! server.compact();
//! # Ok(()) }
//! ```
//!
//! # Known differences from kube-apiserver
//!
//! Found by the conformance suite or by design; each is deliberate unless marked otherwise.
//!
//! - Defaulting covers only the fields controllers commonly read (a Pod's restartPolicy, dnsPolicy,
//!   terminationGracePeriodSeconds, schedulerName, imagePullPolicy...; a workload's replicas). No
//!   service account, token volume or default tolerations are added to pods: the only admission
//!   step is ResourceQuota's.
//! - Validation covers names, a Pod's containers and images, a workload's selector and template. Other
//!   invalid specs are stored.
//! - Server-side apply and `managedFields`: see the differences listed in [`apply`] (field types
//!   from a table of names for built-in kinds, YAML 1.2 bodies, no manager caps or
//!   last-applied-configuration upgrade, the server's own writes unrecorded).
//! - Strategic merge patch knows the merge keys of the common list fields by name, not by Go type.
//! - Watch history is one window over all kinds (etcd-like), sized in events, not per kind or in time.
//! - A list or watch from a resourceVersion newer than the server's answers 504 at once instead of
//!   waiting up to 3 s for it.
//! - Namespace deletion is synchronous apart from finalizers: its contents are deleted by the garbage
//!   collector as soon as the namespace is marked Terminating.
//! - Protobuf request bodies (`application/vnd.kubernetes.protobuf`, what `kubectl create
//!   deployment|configmap|secret|service|namespace` sends) are decoded for the fields those generators
//!   write, for every field of a CustomResourceDefinition and for DeleteOptions (see [`protobuf`]);
//!   a body with any other field, or of any other kind, is refused with 415 rather than stored
//!   without it. Answers are always JSON, never protobuf.
//! - The stable groups beyond core, apps, coordination and apiextensions (admissionregistration,
//!   apiregistration, autoscaling, batch, certificates, discovery, events, networking, node,
//!   policy, scheduling, storage) are served with 1.37's resources, but as stored objects only: no
//!   defaults, no validation, no controller acting on them, no conversion between autoscaling v1
//!   and v2 (see `resource::stored_only`). Reviews answer for the server's one user and token
//!   (see [`review`]). RBAC objects are stored but authorize nothing.
//! - The action subresources (`pods/binding`, `pods/eviction`, `serviceaccounts/token`,
//!   `pods/log`, `exec`, the proxies) are answered as kube-apiserver answers them without a kubelet
//!   to dial; tokens are JWT-shaped but unsigned (see [`subresource`]).
//! - Messages of 400s about malformed JSON come from serde, not Go's decoder: the code and reason match,
//!   the wording does not.
//! - JSON answers follow Go's struct order at the levels clients see (`kind`, `apiVersion`,
//!   `metadata`, `spec`, `status`; ObjectMeta, managedFields entries, owner references; see
//!   [`wire`]); deeper maps (a spec's fields) are sorted, where kube-apiserver keeps each struct's
//!   order. Custom objects are sorted throughout, as kube-apiserver writes them.
//! - Field validation ([`field_validation`]) does not look into a JSON patch, and refuses a strict
//!   merge patch as a whole object is refused (400) where kube-apiserver quotes the patched object
//!   in a 422. An apply naming an undeclared field of a keyed list element writes its index
//!   (`containers[0]`), kube-apiserver its key (`containers[name="c"]`).
//! - An owner reference added through `/status` is recorded in managedFields with its fields;
//!   kube-apiserver 1.37 records the element alone (`k:{"uid":...}: {}`). Writes through `/scale`
//!   record no managedFields entry.
//! - Tables (`kubectl get`, see [`table`]): the built-in printers cover Pod, ReplicaSet, Deployment,
//!   Namespace, ConfigMap, Secret, Event, Lease, Service, ServiceAccount, Node and PodTemplate; any
//!   other type (a built-in kind given with `ApiServer::register` included) gets the default `Name`
//!   and `Created At` columns, where kube-apiserver has a printer for every built-in kind. Tables are
//!   written as JSON only: a YAML Table clause (`application/yaml;as=Table`) is skipped, where
//!   kube-apiserver writes the Table as YAML. CRD printer columns support the JSONPath that columns
//!   use (fields, `['key']`, indexes, slices, `*`, `..`, filters with comparisons); a column with a
//!   union or a regular expression is left out here, kube-apiserver evaluates it. Column
//!   descriptions keep 1.20's wording of Kubernetes' API documentation (1.37 reworded several); the
//!   Table suite compares only that they are there. A Pod's RESTARTS follows 1.37 (text, with
//!   `(… ago)` after the last restart) but not its counting of restartable init containers
//!   (sidecars) as containers.
//! - `Accept: ...;as=PartialObjectMetadata[List]` (metadata-only clients) is answered with
//!   `PartialObjectMetadata` on every verb and watch event, as JSON even for a protobuf clause.
//!   kube-apiserver leaves `operation` out of the `managedFields` of a single PartialObjectMetadata
//!   it gets or patches (not of a list's items or a watch's); here it stays.
//! - Deleting a pod when no kubelet runs (no graceful deletion) answers with the pod as it was;
//!   kube-apiserver's answer carries the `deletionTimestamp` it set on the way (grace period 0 for
//!   an unscheduled pod), so a Table of it says `Terminating` there and the phase here.
//! - A watch from a compacted resourceVersion ends with `too old resource version: R (C)`, the watch
//!   cache's wording; kube-apiserver says `The resourceVersion for the provided watch is too old.` for
//!   kinds it serves without a watch cache. Code (410) and reason (`Expired`) are the same.
//! - CustomResourceDefinitions are established inside the request that writes them (kube-apiserver's
//!   controllers take a moment): the kind is served, and `NamesAccepted`/`Established` are True, by
//!   the time the create returns. Deletion likewise runs at once, up to finalizers on custom objects.
//! - CRDs: no name-conflict detection between CRDs (NamesAccepted is always True), no conversion
//!   between versions (an object keeps the apiVersion it was written with; kube-apiserver rewrites it
//!   to the requested version), no webhook conversion, no validation of
//!   printer column paths, no immutability checks of scope or names.
//! - Schemas check `type`, `required`, `enum`, `minimum`/`maximum` (and exclusive), `minLength`/
//!   `maxLength`, `nullable`, `x-kubernetes-int-or-string`, prune with
//!   `x-kubernetes-preserve-unknown-fields`, `properties`, `additionalProperties` and `items`, and
//!   fill in `default`s on writes and reads. `pattern`, `format`, `multipleOf`, item and property
//!   counts, `allOf`/`anyOf`/`oneOf`/`not`, `x-kubernetes-embedded-resource` and list/map types are
//!   accepted and ignored.
//! - What kube-controller-manager would do is partly built in: each namespace's `default`
//!   ServiceAccount, and when asked its `kube-root-ca.crt` and (as before 1.24) every account's
//!   token Secret ([`service_accounts`]; the token is random, not a signed JWT), ResourceQuota status ([`quota`]), garbage collection and namespace deletion
//!   ([`gc`]). Its other controllers (replication, deployments...) are not: run it beside the server
//!   (`--controllers=replicationcontroller,replicaset,deployment --leader-elect=false`) for those.
//! - ResourceQuota admission charges creates only, from the objects stored at the time of the
//!   request (see [`quota`] for what differs).
//! - Nodes exist only with the stand-in kubelet ([`ApiServer::kubelet`]): it registers its fake
//!   nodes, Ready, and binds pods to them whatever their node selectors and affinities.
//! - Every `SelfSubjectAccessReview` is answered `allowed`: there is no authorization.
//! - Services get cluster IPs from `10.96.0.0/12` and node ports from 30000-32767 in order, lowest
//!   free first, where kube-apiserver picks at random from its configured ranges; IPv4 single-stack
//!   only, no load-balancer health-check node port, and no
//!   Endpoints or EndpointSlices (see [`services`]). A dry-run create answers the addresses a create
//!   would get, as 1.37 does (1.20 left the cluster IP out and answered a node port outside the
//!   range).
//! - `shardSelector` (server-side sharding, [`shard`]; gate `ShardedListAndWatch`, on here by
//!   default, off by default in kube-apiserver): a syntax error's "expecting" set is the `cel`
//!   crate's ANTLR runtime's (`expecting {'==', '!=', ...}` where cel-go says `expecting ')'`); a
//!   comprehension macro (`x.all(...)`) is "unexpected expression kind 1" where cel-go, parsing
//!   without macros, names the function; cel-go's recursion limit (250) is approximated by
//!   bracket depth. A bad selector with a bad
//!   `resourceVersion`/`continue` combination is refused for the selector first (kube-apiserver
//!   checks the list options first).
//! - The release imitated is the current one, 1.37 (`/version` says so); the conformance suite
//!   documents, case by case, where 1.20 answered differently.
//! - Several schema violations in one object are reported in alphabetical field order; kube-apiserver
//!   reports them in an order that varies between requests (Go map iteration). The same holds for the
//!   failures of CEL rules on sibling fields.
//! - CEL validation rules: the type checker, the cost model and the Kubernetes CEL libraries still
//!   missing (`quantity`, `url`, `ip`, ...) are listed in [`cel`]; the corpus
//!   `tests/fixtures/cel_corpus.json` says which answers match kube-apiserver 1.37.2.

pub mod api;
pub mod apply;
pub mod audit;
pub mod cel;
pub mod crd;
pub mod faults;
pub mod field_validation;
pub mod gc;
pub mod http;
pub mod kubelet;
pub mod meta;
pub mod patch;
pub mod protobuf;
pub mod quota;
pub mod resource;
pub mod review;
pub mod schema;
pub mod selection;
pub mod service_accounts;
pub mod services;
pub mod shard;
pub mod status;
pub mod store;
pub mod strategy;
pub mod subresource;
pub mod table;
pub mod validation;
pub mod wire;

pub use audit::{AuditEntry, AuditLog};
pub use faults::{FaultSettings, Faults, WriteFailure};
pub use http::{ApiServer, RunningServer, ServerControls};
pub use kubelet::KubeletSettings;
pub use resource::{Catalog, NameRule, Registry, ResourceType};
pub use status::StatusError;
pub use store::Store;

/// A server that could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The listening socket could not be bound.
    #[error("binding the listening socket: {0}")]
    Bind(#[source] std::io::Error),
    /// The certificate or TLS configuration could not be made.
    #[error("setting up TLS: {0}")]
    Tls(String),
    /// The built-in objects could not be created.
    #[error("setting up the server: {0}")]
    Setup(String),
}
