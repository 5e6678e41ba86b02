//! Resource quotas: a namespace's ResourceQuotas cap what its objects may use (how many pods,
//! how much CPU they request, how many secrets...). Two parts, as in Kubernetes:
//!
//! - **admission** ([`admit`], kube-apiserver's `ResourceQuota` admission plugin): before a new
//!   object is stored, what it would use is added to what the namespace uses now; if that passes a
//!   quota's `spec.hard` the create is refused with 403 Forbidden, `exceeded quota: <name>,
//!   requested: ..., used: ..., limited: ...`. A quota that limits CPU or memory also refuses a
//!   pod whose containers do not state them (`failed quota: <name>: must specify cpu`).
//! - **status** ([`QuotaController`], kube-controller-manager's `resourcequota` controller): each
//!   quota's `status.hard` and `status.used` are recomputed whenever an object in its namespace
//!   comes, changes or goes, so clients watching the quota see usage follow the objects.
//!
//! ```text
//!  create ──► Api::create_recorded ──► quota::admit: usage now (from the store) + the object's
//!                                         > hard? ──► 403 Forbidden
//!  store change in namespace N ──► QuotaController: N has quotas? ──► recompute each quota's
//!                                                                    used; write status if changed
//! ```
//!
//! What each object uses is in [`usage`], quantities in [`quantity`].
//!
//! # Differences from Kubernetes
//!
//! Admission computes usage from the stored objects at the time of the request, rather than from the
//! quota's recorded `status.used`, so it needs no status to be computed first. Two creates racing
//! each other can both pass a quota with room for one (kube-apiserver serializes them by updating
//! the quota's status inside admission). Only creates are charged: an update that makes an object
//! use more (a service turned NodePort) is not checked. Scope selectors (`scopeSelector`,
//! priority classes) are not evaluated: a quota with only them charges everything.

pub mod quantity;
pub mod usage;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::meta;
use crate::resource::ResourceType;
use crate::selection::Selection;
use crate::status::StatusError;
use crate::store::{Change, Store, Write};
use quantity::Quantity;
use usage::Quota;

/// The store table of ResourceQuotas.
const QUOTAS: &str = "resourcequotas";

/// The quotas of `namespace`.
fn quotas(store: &Store, namespace: &str) -> Vec<(Quota, Arc<Value>)> {
    store
        .list(
            QUOTAS,
            Some(namespace),
            &Selection::default(),
            None,
            None,
            None,
        )
        .map(|page| page.items)
        .unwrap_or_default()
        .into_iter()
        .map(|s| (Quota::from_object(&s.object), s.object))
        .collect()
}

/// What the objects of `namespace` charged to `quota` use of each of its hard resources.
fn used(store: &Store, namespace: &str, quota: &Quota) -> BTreeMap<String, Quantity> {
    let mut used: BTreeMap<String, Quantity> = quota
        .hard
        .keys()
        .map(|k| (k.clone(), Quantity::ZERO))
        .collect();
    let tables: BTreeSet<String> = quota
        .hard
        .keys()
        .filter_map(|k| usage::table_of(k))
        .collect();
    for table in tables {
        let Ok(page) = store.list(
            &table,
            Some(namespace),
            &Selection::default(),
            None,
            None,
            None,
        ) else {
            continue;
        };
        for item in page.items {
            if !quota.selects(&table, &item.object) {
                continue;
            }
            for (resource, total) in used.iter_mut() {
                if let Some(amount) = usage::usage(&table, &item.object, resource) {
                    *total += amount;
                }
            }
        }
    }
    used
}

/// `k=v,k=v` of the named entries, sorted, as quota messages print resource lists.
fn pretty(values: &BTreeMap<String, Quantity>, names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{n}={}", values.get(n).copied().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(",")
}

/// Quota admission of a new object (see the [module docs](self)): `Ok` if every quota of its
/// namespace has room for it. Reads the store only: the verbs ([`crate::api`]) call it, so it
/// knows nothing of them.
pub fn admit(
    store: &Store,
    resource: &ResourceType,
    namespace: &str,
    name: &str,
    object: &Value,
) -> Result<(), StatusError> {
    let table = resource.qualified();
    for (quota, _) in quotas(store, namespace) {
        if !quota.selects(&table, object) {
            continue;
        }
        let requested: BTreeMap<String, Quantity> = quota
            .hard
            .keys()
            .filter_map(|k| Some((k.clone(), usage::usage(&table, object, k)?)))
            .collect();
        if requested.is_empty() {
            continue;
        }
        if table == "pods" {
            let missing = usage::unspecified(object, &quota.hard);
            if !missing.is_empty() {
                let why = format!(
                    "failed quota: {}: must specify {}",
                    quota.name,
                    missing.join(",")
                );
                return Err(StatusError::forbidden(resource, name, &why));
            }
        }
        let now = used(store, namespace, &quota);
        let exceeded: Vec<String> = requested
            .iter()
            .filter(|(k, amount)| {
                amount.is_positive()
                    && quota.hard.get(*k).is_some_and(|hard| {
                        now.get(*k).copied().unwrap_or_default() + **amount > *hard
                    })
            })
            .map(|(k, _)| k.clone())
            .collect();
        if !exceeded.is_empty() {
            let why = format!(
                "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                quota.name,
                pretty(&requested, &exceeded),
                pretty(&now, &exceeded),
                pretty(&quota.hard, &exceeded)
            );
            return Err(StatusError::forbidden(resource, name, &why));
        }
    }
    Ok(())
}

/// Keeps every quota's status up to date; see the [module docs](self).
pub struct QuotaController {
    store: Arc<Store>,
}

impl QuotaController {
    /// A controller reading and writing `store` (status writes go to the store directly, as
    /// they did through the verbs' store: no field manager, no hooks).
    pub fn new(store: Arc<Store>) -> QuotaController {
        QuotaController { store }
    }

    /// Follows changes until the store goes away.
    pub async fn run(self, mut changes: mpsc::UnboundedReceiver<Arc<Change>>) {
        while let Some(change) = changes.recv().await {
            // A burst of changes (a namespace emptied) is settled once per namespace.
            let mut namespaces = BTreeSet::new();
            let mut next = Some(change);
            while let Some(change) = next {
                if let Some(ns) = meta::namespace(&change.object.object) {
                    namespaces.insert(ns.to_string());
                }
                next = changes.try_recv().ok();
            }
            for namespace in namespaces {
                self.settle(&namespace);
            }
        }
    }

    /// Recomputes the status of every quota in `namespace`.
    fn settle(&self, namespace: &str) {
        for (quota, object) in quotas(&self.store, namespace) {
            let used = used(&self.store, namespace, &quota);
            let as_json = |values: &BTreeMap<String, Quantity>| -> Map<String, Value> {
                values
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.to_string())))
                    .collect()
            };
            let hard = object
                .pointer("/spec/hard")
                .cloned()
                .unwrap_or_else(|| json!({}));
            let status = json!({"hard": hard, "used": as_json(&used)});
            if object.get("status") == Some(&status) {
                continue;
            }
            self.write_status(namespace, &quota.name, meta::uid(&object), status);
        }
    }

    fn write_status(&self, namespace: &str, name: &str, uid: Option<&str>, status: Value) {
        let table: Arc<str> = Arc::from(QUOTAS);
        let key = format!("{namespace}/{name}");
        let result = self.store.transact(&table, &key, |current| {
            let Some(current) = current else {
                return Ok(Write::Keep);
            };
            if meta::uid(&current.object) != uid {
                return Ok(Write::Keep);
            }
            let mut object = (*current.object).clone();
            object["status"] = status;
            Ok(Write::Put(object))
        });
        if let Err(e) = result {
            tracing::warn!(namespace, quota = name, error = %e, "could not write a quota's status");
        }
    }
}
