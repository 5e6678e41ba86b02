//! The garbage collector: what happens to an object's dependents (objects whose `ownerReferences`
//! name it) when it goes away, and what happens to a namespace's contents when it is deleted.
//!
//! It follows every change in the store (in commit order) and keeps two indexes: live objects by uid,
//! and dependents by owner uid. Then, like kube-controller-manager's garbage collector and namespace
//! controller:
//!
//! - **background** (the default): when an owner is deleted, each dependent with no remaining live
//!   owner is deleted; one that still has a live owner just loses the dangling reference. A new
//!   object whose owners are all already gone is deleted too.
//! - **foreground**: the owner carries the `foregroundDeletion` finalizer; its dependents are deleted
//!   (a dependent with another owner that is alive and not being deleted only loses the reference),
//!   and when the last is gone the finalizer is removed, which completes the owner's deletion.
//! - **orphan**: the owner carries the `orphan` finalizer; the reference to it is removed from every
//!   dependent, then the finalizer, and the owner goes.
//! - **namespaces**: a deleted namespace is `Terminating`; everything in it is deleted, then the
//!   namespace itself.
//!
//! All its writes go through the same [`Api`] as clients', so watchers see them as usual.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::api::{Api, DeleteOptions, Propagation, UpdateOptions};
use crate::meta;
use crate::patch::PatchType;
use crate::resource::ResourceType;
use crate::selection::Selection;
use crate::store::{Change, EventType, Stored};

/// Where an object lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ObjectRef {
    table: Arc<str>,
    namespace: Option<String>,
    name: String,
}

/// See the [module docs](self).
pub struct GarbageCollector {
    api: Arc<Api>,
    /// uid → the live object with that uid.
    live: HashMap<String, ObjectRef>,
    /// owner uid → its dependents. Invariant: holds exactly the live objects whose current
    /// ownerReferences name that uid.
    dependents: HashMap<String, HashSet<ObjectRef>>,
    /// Namespaces being deleted.
    terminating: HashSet<String>,
}

impl GarbageCollector {
    /// A collector acting through `api`.
    pub fn new(api: Arc<Api>) -> GarbageCollector {
        GarbageCollector {
            api,
            live: HashMap::new(),
            dependents: HashMap::new(),
            terminating: HashSet::new(),
        }
    }

    /// Processes changes until the store goes away.
    pub async fn run(mut self, mut changes: mpsc::UnboundedReceiver<Arc<Change>>) {
        while let Some(change) = changes.recv().await {
            self.observe(&change);
            self.react(&change);
        }
    }

    fn reference(change: &Change) -> ObjectRef {
        ObjectRef {
            table: change.table.clone(),
            namespace: meta::namespace(&change.object.object).map(str::to_string),
            name: meta::name(&change.object.object)
                .unwrap_or_default()
                .to_string(),
        }
    }

    /// Keeps the indexes in step with the store.
    fn observe(&mut self, change: &Change) {
        let object = &change.object.object;
        let reference = GarbageCollector::reference(change);
        if let Some(previous) = &change.previous {
            for owner in meta::owner_references(&previous.object) {
                if let Some(set) = self.dependents.get_mut(&owner.uid) {
                    set.remove(&reference);
                    if set.is_empty() {
                        self.dependents.remove(&owner.uid);
                    }
                }
            }
        }
        let Some(uid) = meta::uid(object).map(str::to_string) else {
            return;
        };
        if change.event == EventType::Deleted {
            self.live.remove(&uid);
            return;
        }
        self.live.insert(uid, reference.clone());
        for owner in meta::owner_references(object) {
            self.dependents
                .entry(owner.uid)
                .or_default()
                .insert(reference.clone());
        }
    }

    fn react(&mut self, change: &Change) {
        let object = &change.object.object;
        let uid = meta::uid(object).unwrap_or_default().to_string();
        let is_namespace = &*change.table == "namespaces";
        match change.event {
            EventType::Deleted => {
                for dependent in self.dependents_of(&uid) {
                    self.settle_dependent(&dependent);
                }
                if let Some(previous) = &change.previous {
                    for owner in meta::owner_references(&previous.object) {
                        self.finish_foreground(&owner.uid);
                    }
                }
                if let Some(ns) = meta::namespace(object) {
                    if self.terminating.contains(ns) {
                        self.finish_namespace(ns);
                    }
                }
                if is_namespace {
                    if let Some(name) = meta::name(object) {
                        self.terminating.remove(name);
                    }
                }
            }
            EventType::Added | EventType::Modified => {
                let deleting = meta::string(object, "deletionTimestamp").is_some();
                let finalizers = meta::finalizers(object);
                if deleting && finalizers.iter().any(|f| f == "orphan") {
                    self.orphan(change, &uid);
                }
                if deleting && finalizers.iter().any(|f| f == "foregroundDeletion") {
                    for dependent in self.dependents_of(&uid) {
                        self.delete_or_release(&dependent, &uid);
                    }
                    self.finish_foreground(&uid);
                }
                // A dependent that let go of an owner (its reference removed) may be the last one a
                // foreground deletion waited for.
                if let Some(previous) = &change.previous {
                    let now: Vec<String> = meta::owner_references(object)
                        .into_iter()
                        .map(|o| o.uid)
                        .collect();
                    for owner in meta::owner_references(&previous.object) {
                        if !now.contains(&owner.uid) {
                            self.finish_foreground(&owner.uid);
                        }
                    }
                }
                if is_namespace && deleting {
                    if let Some(name) = meta::name(object) {
                        let name = name.to_string();
                        if self.terminating.insert(name.clone()) {
                            self.empty_namespace(&name);
                        }
                        self.finish_namespace(&name);
                    }
                }
                if change.event == EventType::Added && !deleting {
                    let owners = meta::owner_references(object);
                    if !owners.is_empty() && owners.iter().all(|o| !self.live.contains_key(&o.uid))
                    {
                        self.delete(
                            &GarbageCollector::reference(change),
                            Propagation::Background,
                        );
                    }
                }
            }
        }
    }

    fn dependents_of(&self, uid: &str) -> Vec<ObjectRef> {
        self.dependents
            .get(uid)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn resource(&self, table: &str) -> Option<Arc<ResourceType>> {
        self.api
            .registry
            .all()
            .into_iter()
            .find(|t| t.qualified() == table)
    }

    /// The object as stored now, if it still exists.
    fn current(&self, target: &ObjectRef) -> Option<Stored> {
        let resource = self.resource(&target.table)?;
        self.api
            .get(&resource, target.namespace.as_deref(), &target.name)
            .ok()
    }

    /// A dependent whose owner went: delete it, or drop the dangling references.
    fn settle_dependent(&self, dependent: &ObjectRef) {
        let Some(current) = self.current(dependent) else {
            return;
        };
        let owners = meta::owner_references(&current.object);
        if owners.iter().all(|o| !self.live.contains_key(&o.uid)) {
            self.delete(dependent, Propagation::Background);
            return;
        }
        let kept = owner_references_where(&current.object, |uid| self.live.contains_key(uid));
        self.patch_metadata(dependent, json!({"ownerReferences": kept}));
    }

    /// A dependent of an owner being deleted in the foreground: deleted, unless another of its
    /// owners is alive and not being deleted itself; then it only loses the reference to
    /// `owner_uid` and stays, as kube-controller-manager's garbage collector keeps a dependent
    /// with a "solid" owner.
    fn delete_or_release(&self, dependent: &ObjectRef, owner_uid: &str) {
        let Some(current) = self.current(dependent) else {
            return;
        };
        let solid = meta::owner_references(&current.object)
            .iter()
            .filter(|o| o.uid != owner_uid)
            .any(|o| self.is_solid(&o.uid));
        if !solid {
            self.delete(dependent, Propagation::Background);
            return;
        }
        let kept = owner_references_where(&current.object, |uid| uid != owner_uid);
        self.patch_metadata(dependent, json!({"ownerReferences": kept}));
    }

    /// True if the object with `uid` exists and is not being deleted.
    fn is_solid(&self, uid: &str) -> bool {
        self.live
            .get(uid)
            .and_then(|owner| self.current(owner))
            .is_some_and(|o| meta::string(&o.object, "deletionTimestamp").is_none())
    }

    /// Removes the owner's reference from every dependent, then the `orphan` finalizer.
    fn orphan(&self, change: &Change, uid: &str) {
        for dependent in self.dependents_of(uid) {
            let Some(resource) = self.resource(&dependent.table) else {
                continue;
            };
            let Ok(current) =
                self.api
                    .get(&resource, dependent.namespace.as_deref(), &dependent.name)
            else {
                continue;
            };
            let kept = owner_references_where(&current.object, |owner| owner != uid);
            let refs = if kept.is_empty() {
                Value::Null
            } else {
                json!(kept)
            };
            self.patch_metadata(&dependent, json!({"ownerReferences": refs}));
        }
        self.remove_finalizer(
            &GarbageCollector::reference(change),
            &change.object.object,
            "orphan",
        );
    }

    /// Completes a foreground deletion whose dependents are all gone.
    fn finish_foreground(&self, owner_uid: &str) {
        if self
            .dependents
            .get(owner_uid)
            .is_some_and(|d| !d.is_empty())
        {
            return;
        }
        let Some(owner) = self.live.get(owner_uid) else {
            return;
        };
        let Some(current) = self.current(owner) else {
            return;
        };
        let deleting = meta::string(&current.object, "deletionTimestamp").is_some();
        let foreground = meta::finalizers(&current.object)
            .iter()
            .any(|f| f == "foregroundDeletion");
        if deleting && foreground {
            self.remove_finalizer(owner, &current.object, "foregroundDeletion");
        }
    }

    fn remove_finalizer(&self, target: &ObjectRef, object: &Value, finalizer: &str) {
        let kept: Vec<String> = meta::finalizers(object)
            .into_iter()
            .filter(|f| f != finalizer)
            .collect();
        let value = if kept.is_empty() {
            Value::Null
        } else {
            json!(kept)
        };
        self.patch_metadata(target, json!({"finalizers": value}));
    }

    fn patch_metadata(&self, target: &ObjectRef, metadata: Value) {
        let Some(resource) = self.resource(&target.table) else {
            return;
        };
        let patch = json!({"metadata": metadata});
        let options = UpdateOptions {
            manager: "kube-controller-manager",
            ..UpdateOptions::default()
        };
        let result = self.api.patch(
            &resource,
            target.namespace.as_deref(),
            &target.name,
            PatchType::Merge,
            &patch,
            &options,
        );
        if let Err(e) = result {
            if e.code != 404 {
                tracing::warn!(object = ?target, error = %e, "garbage collector patch failed");
            }
        }
    }

    fn delete(&self, target: &ObjectRef, propagation: Propagation) {
        let Some(resource) = self.resource(&target.table) else {
            return;
        };
        let options = DeleteOptions {
            propagation: Some(propagation),
            grace_period_seconds: Some(0),
            ..DeleteOptions::default()
        };
        let result = self.api.delete(
            &resource,
            target.namespace.as_deref(),
            &target.name,
            &options,
            false,
        );
        if let Err(e) = result {
            if e.code != 404 {
                tracing::warn!(object = ?target, error = %e, "garbage collector delete failed");
            }
        }
    }

    /// Deletes everything in a terminating namespace.
    fn empty_namespace(&self, namespace: &str) {
        let everything = Selection::default();
        for resource in self.api.registry.all().into_iter().filter(|t| t.namespaced) {
            let Ok(page) = self.api.store.list(
                &resource.qualified(),
                Some(namespace),
                &everything,
                None,
                None,
                None,
            ) else {
                continue;
            };
            for item in page.items {
                let target = ObjectRef {
                    table: Arc::from(resource.qualified()),
                    namespace: Some(namespace.to_string()),
                    name: meta::name(&item.object).unwrap_or_default().to_string(),
                };
                self.delete(&target, Propagation::Background);
            }
        }
    }

    /// Deletes a terminating namespace once it is empty.
    fn finish_namespace(&self, namespace: &str) {
        let everything = Selection::default();
        let empty = self
            .api
            .registry
            .all()
            .iter()
            .filter(|t| t.namespaced)
            .all(|t| {
                self.api
                    .store
                    .list(
                        &t.qualified(),
                        Some(namespace),
                        &everything,
                        None,
                        None,
                        Some(1),
                    )
                    .map(|page| page.items.is_empty())
                    .unwrap_or(true)
            });
        if !empty {
            return;
        }
        let Some(namespaces) = self.api.registry.find("", "v1", "namespaces") else {
            return;
        };
        let table: Arc<str> = Arc::from(namespaces.qualified());
        let result = self.api.store.transact(&table, namespace, |current| {
            Ok(match current {
                Some(c) if meta::string(&c.object, "deletionTimestamp").is_some() => {
                    crate::store::Write::Delete
                }
                _ => crate::store::Write::Keep,
            })
        });
        if let Err(e) = result {
            tracing::warn!(namespace, error = %e, "could not finish deleting a namespace");
        }
    }
}

/// The object's ownerReferences (as JSON) whose owner uid passes `keep`.
fn owner_references_where(object: &Value, keep: impl Fn(&str) -> bool) -> Vec<Value> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter(|r| r.get("uid").and_then(Value::as_str).is_some_and(&keep))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}
