//! The subresources that are actions rather than views of their object: `pods/binding`,
//! `pods/eviction`, `serviceaccounts/token`, `pods/log`, `pods/exec` (and `attach`,
//! `portforward`, the proxies), the `bindings` collection, and the ComponentStatus report.
//!
//! # Why this module exists
//!
//! Controllers and schedulers written with client-go or controller-runtime call these: a custom
//! scheduler binds pods, a drain evicts them (honouring PodDisruptionBudgets), a controller mints
//! service-account tokens for the workloads it configures. kube-apiserver answers each with its
//! own REST storage; here each is one method on [`Api`], over the same store as every other write,
//! so watchers see the pod bound or deleted as they would on a cluster.
//!
//! # How data flows
//!
//! ```text
//!  POST .../pods/{name}/binding ─┐
//!  POST .../bindings ────────────┴─► Api::bind:   spec.nodeName set (409 when already set)
//!  POST .../pods/{name}/eviction ──► Api::evict:  budgets checked (429), then Api::delete
//!  POST .../serviceaccounts/{name}/token ─► Api::token: a JWT-shaped token, never stored
//!  GET  .../pods/{name}/log ───────► Api::log:    the pod simulator's text, if it runs the pod
//!  GET|POST .../pods/{name}/exec ──► Api::connect: the answer kube-apiserver gives without an
//!                                                  upgraded connection to a kubelet
//!  GET  /api/v1/componentstatuses ─► component_statuses: a report, made on each read
//! ```
//!
//! The views (`pods/ephemeralcontainers`, `pods/resize`, `certificatesigningrequests/approval`)
//! are ordinary get/update/patch through a narrow [`crate::strategy::Endpoint`].
//!
//! # Differences from kube-apiserver
//!
//! - Tokens are JWT-shaped (header, claims, signature) with the claims kube-apiserver puts in
//!   them, but the signature is random bytes: the embedded server signs nothing and accepts no
//!   service-account token as a credential.
//! - An eviction that a budget allows is not recorded in the budget's `status.disruptedPods`
//!   (there is no disruption controller to clear it again); `disruptionsAllowed` is decremented.
//! - `exec`, `attach` and `portforward` to a pod on a node that exists answer 400 `Upgrade request
//!   required` (kube-apiserver would dial the node's kubelet); proxies answer 503.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::api::{Api, DeleteOptions};
use crate::meta;
use crate::resource::ResourceType;
use crate::status::{Cause, StatusError};

/// What an action answers.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionReply {
    /// A JSON document with its code (201 `Status` of `Success`, a TokenRequest).
    Json(u16, Value),
    /// A container log: `text/plain`.
    Text(String),
    /// Nothing to say: 204 (the log of a pod not yet on a node).
    NoContent,
}

/// The `Status` of `Success` a binding or an eviction answers with.
fn created_status() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

/// A 409 about a subresource (`pods/binding "a"`), worded as kube-apiserver words it.
fn subresource_conflict(kind: &str, name: &str, why: &str) -> StatusError {
    let mut error = StatusError::new(
        409,
        "Conflict",
        format!("Operation cannot be fulfilled on {kind} {name:?}: {why}"),
    );
    error.details = Some(json!({"name": name, "kind": kind}));
    error
}

/// The token audience kube-apiserver uses when neither the request nor its flags name one.
pub const DEFAULT_AUDIENCE: &str = "https://kubernetes.default.svc";

impl Api {
    /// The core/v1 type of `kind` (pods, nodes, service accounts), which the server always serves.
    fn core(&self, plural: &str) -> Result<std::sync::Arc<ResourceType>, StatusError> {
        self.registry
            .find("", "v1", plural)
            .ok_or_else(|| StatusError::internal(format!("{plural} are not registered")))
    }

    /// `pods/binding` (and the `bindings` collection, `name` then from the body): sets the
    /// pod's `spec.nodeName` to the Binding's target. A pod already on a node, or being
    /// deleted, is a 409; a body naming another pod a 400.
    pub fn bind(
        &self,
        namespace: Option<&str>,
        name: Option<&str>,
        binding: &Value,
        dry_run: bool,
    ) -> Result<ActionReply, StatusError> {
        let pods = self.core("pods")?;
        let named = meta::name(binding).unwrap_or("");
        let name = match name {
            Some(url) if !named.is_empty() && named != url => {
                return Err(StatusError::bad_request(
                    "name in URL does not match name in Binding object",
                ));
            }
            Some(url) => url,
            None => named,
        };
        let node = binding
            .pointer("/target/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if node.is_empty() {
            let cause = Cause::required("target.name");
            return Err(StatusError::invalid(
                self.core("bindings")?.as_ref(),
                name,
                vec![cause],
            ));
        }
        self.write(&pods, namespace, name, dry_run, |current| {
            if meta::string(current, "deletionTimestamp").is_some() {
                return Err(subresource_conflict(
                    "pods/binding",
                    name,
                    &format!("pod {name} is being deleted, cannot be assigned to a host"),
                ));
            }
            if let Some(bound) = current
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                return Err(subresource_conflict(
                    "pods/binding",
                    name,
                    &format!("pod {name} is already assigned to node {bound:?}"),
                ));
            }
            let mut pod = current.clone();
            pod["spec"]["nodeName"] = node.into();
            meta::metadata_mut(&mut pod).remove("resourceVersion");
            Ok(pod)
        })?;
        Ok(ActionReply::Json(201, created_status()))
    }

    /// `pods/eviction`: deletes the pod (with the Eviction's `deleteOptions`) unless a
    /// PodDisruptionBudget forbids it (429, as kube-apiserver answers without a disruption
    /// controller: a budget whose status was never observed forbids every eviction of a running
    /// pod). Pods that are pending, finished or being deleted are evicted whatever the budgets say.
    pub fn evict(
        &self,
        namespace: Option<&str>,
        name: &str,
        eviction: &Value,
        dry_run: bool,
    ) -> Result<ActionReply, StatusError> {
        let pods = self.core("pods")?;
        if meta::name(eviction).is_some_and(|n| n != name) {
            return Err(StatusError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        let pod = self.get(&pods, namespace, name)?;
        let phase = pod
            .object
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("");
        let ignores_budgets = matches!(phase, "Pending" | "Succeeded" | "Failed" | "")
            || meta::string(&pod.object, "deletionTimestamp").is_some();
        if !ignores_budgets && let Some(ns) = namespace {
            self.check_budgets(ns, &pod.object, dry_run)?;
        }
        let options = eviction.get("deleteOptions");
        let precondition = |field: &str| {
            options
                .and_then(|o| o.pointer(&format!("/preconditions/{field}")))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let delete = DeleteOptions {
            propagation: None,
            uid: precondition("uid"),
            resource_version: precondition("resourceVersion"),
            grace_period_seconds: options
                .and_then(|o| o.get("gracePeriodSeconds"))
                .and_then(Value::as_i64),
        };
        self.delete(&pods, namespace, name, &delete, dry_run)?;
        Ok(ActionReply::Json(201, created_status()))
    }

    /// The budgets of `pod`'s namespace whose selector matches it: none, or one that allows a
    /// disruption now (which it then counts). kube-apiserver refuses a pod matched by several.
    fn check_budgets(
        &self,
        namespace: &str,
        pod: &Value,
        dry_run: bool,
    ) -> Result<(), StatusError> {
        let Some(budgets) = self.registry.find("policy", "v1", "poddisruptionbudgets") else {
            return Ok(());
        };
        let labels = pod
            .pointer("/metadata/labels")
            .cloned()
            .unwrap_or(json!({}));
        let page = self.store.list(
            &budgets.qualified(),
            Some(namespace),
            &crate::selection::Selection::default(),
            None,
            None,
            None,
        )?;
        let matching: Vec<Value> = page
            .items
            .iter()
            .map(|s| (*s.object).clone())
            .filter(|b| {
                b.pointer("/spec/selector")
                    .is_some_and(|s| selector_matches(s, &labels))
            })
            .collect();
        let budget = match matching.as_slice() {
            [] => return Ok(()),
            [one] => one,
            _ => {
                return Err(StatusError::internal(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                ));
            }
        };
        let budget_name = meta::name(budget).unwrap_or("").to_string();
        let refuse = |why: String| {
            let mut error = StatusError::new(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.".into(),
            );
            error.details = Some(
                json!({"causes": [{"reason": "DisruptionBudget", "message": why}],
                                        "retryAfterSeconds": 10}),
            );
            error
        };
        let number = |path: &str| budget.pointer(path).and_then(Value::as_i64).unwrap_or(0);
        if number("/status/observedGeneration") < number("/metadata/generation") {
            return Err(refuse(format!(
                "The disruption budget {budget_name} is still being processed by the server."
            )));
        }
        let (healthy, desired) = (
            number("/status/currentHealthy"),
            number("/status/desiredHealthy"),
        );
        // An unready pod is evicted while the budget has its healthy pods (the default
        // IfHealthyBudget policy), without using up a disruption.
        let ready = pod["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        let always =
            budget.pointer("/spec/unhealthyPodEvictionPolicy") == Some(&json!("AlwaysAllow"));
        if !ready && (always || healthy >= desired) {
            return Ok(());
        }
        if number("/status/disruptionsAllowed") <= 0 {
            return Err(refuse(format!(
                "The disruption budget {budget_name} needs {desired} healthy pods and has {healthy} currently"
            )));
        }
        if dry_run {
            return Ok(());
        }
        let budget_namespace = Some(namespace);
        self.write(&budgets, budget_namespace, &budget_name, false, |current| {
            let mut next = current.clone();
            let allowed = current
                .pointer("/status/disruptionsAllowed")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            next["status"]["disruptionsAllowed"] = (allowed - 1).max(0).into();
            meta::metadata_mut(&mut next).remove("resourceVersion");
            Ok(next)
        })?;
        Ok(())
    }

    /// `serviceaccounts/token`: a TokenRequest answered with a JWT-shaped token for the account
    /// (see the [module docs](self)); nothing is stored.
    pub fn token(
        &self,
        namespace: Option<&str>,
        name: &str,
        request: &Value,
    ) -> Result<ActionReply, StatusError> {
        let accounts = self.core("serviceaccounts")?;
        let account = self.get(&accounts, namespace, name)?;
        let namespace = namespace.unwrap_or("");
        let uid = meta::uid(&account.object).unwrap_or("").to_string();
        let seconds = request
            .pointer("/spec/expirationSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(3600);
        if seconds < 600 {
            let cause = Cause {
                reason: "FieldValueInvalid",
                field: "spec.expirationSeconds".into(),
                message: format!(
                    "Invalid value: {seconds}: may not specify a duration less than 10 minutes"
                ),
            };
            let kind = ResourceType::new("authentication.k8s.io", "v1", "TokenRequest");
            return Err(StatusError::invalid(&kind, name, vec![cause]));
        }
        let audiences = request
            .pointer("/spec/audiences")
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty())
            .cloned()
            .unwrap_or_else(|| vec![json!(DEFAULT_AUDIENCE)]);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let expires = now.saturating_add(seconds.unsigned_abs());
        let claims = json!({
            "aud": audiences, "exp": expires, "iat": now, "nbf": now,
            "iss": DEFAULT_AUDIENCE, "jti": ferrokube_core::id::uuid_v4(),
            "kubernetes.io": {"namespace": namespace,
                              "serviceaccount": {"name": name, "uid": uid}},
            "sub": format!("system:serviceaccount:{namespace}:{name}"),
        });
        let header = json!({"alg": "RS256", "kid": "ferrokube"});
        let signature: [u8; 32] = rand::random();
        let token = format!(
            "{}.{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string()),
            URL_SAFE_NO_PAD.encode(signature)
        );
        let answer = json!({
            "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": meta::now()},
            "spec": {"audiences": audiences, "expirationSeconds": seconds,
                     "boundObjectRef": request.pointer("/spec/boundObjectRef").cloned()},
            "status": {"token": token,
                       "expirationTimestamp": ferrokube_core::time::rfc3339(expires)},
        });
        Ok(ActionReply::Json(201, answer))
    }

    /// The node a pod runs on, for its log and streams: 204 (log) or 400 (streams) when it has
    /// none, and kube-apiserver's 404 (worded as about a pod) when the node does not exist.
    fn pod_node(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<(Value, Value)>, StatusError> {
        let pods = self.core("pods")?;
        let pod = self.get(&pods, namespace, name)?;
        let Some(node) = pod
            .object
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
        else {
            return Ok(None);
        };
        let nodes = self.core("nodes")?;
        match self.get(&nodes, None, &node) {
            Ok(stored) => Ok(Some(((*pod.object).clone(), (*stored.object).clone()))),
            Err(_) => Err(StatusError::not_found(&pods, &node)),
        }
    }

    /// `pods/log`: 204 for a pod on no node; else the log the pod simulator keeps for the
    /// container (empty when it does not run the pod).
    pub fn log(
        &self,
        namespace: Option<&str>,
        name: &str,
        container: Option<&str>,
    ) -> Result<ActionReply, StatusError> {
        let Some((pod, _node)) = self.pod_node(namespace, name)? else {
            return Ok(ActionReply::NoContent);
        };
        let containers: Vec<&str> = pod["spec"]["containers"]
            .as_array()
            .map(|c| c.iter().filter_map(|c| c["name"].as_str()).collect())
            .unwrap_or_default();
        match container {
            Some(c) if !containers.contains(&c) => Err(StatusError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            ))),
            None if containers.len() > 1 => Err(StatusError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            ))),
            _ => Ok(ActionReply::Text(String::new())),
        }
    }

    /// `pods/exec`, `attach`, `portforward`: kube-apiserver's answers to a request that is not
    /// an upgraded stream (what a client without SPDY or websockets sends).
    pub fn connect(&self, namespace: Option<&str>, name: &str) -> Result<ActionReply, StatusError> {
        match self.pod_node(namespace, name)? {
            None => Err(StatusError::bad_request(format!(
                "pod {name} does not have a host assigned"
            ))),
            Some(_) => Err(StatusError::bad_request("Upgrade request required")),
        }
    }

    /// The proxies: a pod without an address is a 400, as on kube-apiserver; everything else a
    /// 503 (the embedded server proxies nothing).
    pub fn proxy(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<ActionReply, StatusError> {
        let object = self.get(resource, namespace, name)?;
        let is_pod = resource.group.is_empty() && resource.kind == "Pod";
        if is_pod
            && object
                .object
                .pointer("/status/podIP")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            return Err(StatusError::bad_request("address not allowed"));
        }
        Err(StatusError::new(
            503,
            "ServiceUnavailable",
            format!(
                "ferrokube-apiserver proxies nothing: {} {name:?}",
                resource.qualified()
            ),
        ))
    }
}

/// Whether a LabelSelector (`matchLabels`, `matchExpressions` with `In`, `NotIn`, `Exists`,
/// `DoesNotExist`) selects `labels`. An empty selector selects nothing here, as a budget's does.
fn selector_matches(selector: &Value, labels: &Value) -> bool {
    let label = |key: &str| labels.get(key).and_then(Value::as_str);
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    if match_labels.is_none_or(|m| m.is_empty()) && expressions.is_none_or(|e| e.is_empty()) {
        return false;
    }
    let labels_ok = match_labels.is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let expressions_ok = expressions.is_none_or(|list| {
        list.iter().all(|e| {
            let key = e["key"].as_str().unwrap_or("");
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match (e["operator"].as_str().unwrap_or(""), label(key)) {
                ("In", Some(v)) => values.contains(&v),
                ("NotIn", v) => v.is_none_or(|v| !values.contains(&v)),
                ("Exists", v) => v.is_some(),
                ("DoesNotExist", v) => v.is_none(),
                _ => false,
            }
        })
    });
    labels_ok && expressions_ok
}

/// `/api/v1/componentstatuses`: the store as `etcd-0` (healthy), and the scheduler and
/// controller manager, which the embedded server does not run (unhealthy, as kube-apiserver
/// reports components it cannot reach).
pub fn component_statuses() -> Vec<Value> {
    let component = |name: &str, healthy: bool, message: &str| {
        json!({"kind": "ComponentStatus", "apiVersion": "v1", "metadata": {"name": name},
               "conditions": [{"type": "Healthy", "status": if healthy { "True" } else { "False" },
                               "message": message}]})
    };
    vec![
        component(
            "scheduler",
            false,
            "ferrokube-apiserver runs no kube-scheduler",
        ),
        component(
            "controller-manager",
            false,
            "ferrokube-apiserver runs no kube-controller-manager",
        ),
        component("etcd-0", true, "ok"),
    ]
}
