//! What writing a CustomResourceDefinition sets off, inside the same request: the reconciler that
//! serves a CRD's kind, or stops serving it (the story is in [`crate::crd`]'s docs).
//!
//! It lives with the verbs because they call it ([`Api::after_write`]) and it writes through their
//! unhooked halves ([`Api::write`], [`Api::delete_object`]); [`crate::crd`] keeps what a CRD is as
//! an object, below the verbs.

use std::sync::Arc;

use serde_json::json;

use super::{Api, DeleteOptions, Deletion, Propagation};
use crate::crd::{FINALIZER, definitions_type, established_status, served_types, set_terminating};
use crate::meta;
use crate::resource::ResourceType;
use crate::selection::Selection;
use crate::store::Write;

/// Brings what is served for CRD `name` in line with the stored CRD (see the
/// [`crate::crd`] docs). Runs under [`crate::Registry`]'s change lock, so it must not call the
/// hooked verbs of [`Api`] (which would call it again).
pub(crate) fn reconcile(api: &Api, name: &str) {
    let registry = &api.registry;
    let _changes = registry.lock_changes();
    let definitions = Arc::new(definitions_type());
    let Some(stored) = api.store.get(&definitions.qualified(), name) else {
        purge(api, name);
        registry.set_definition(name, Vec::new());
        tracing::info!(crd = name, "no longer serving");
        return;
    };
    let crd = &stored.object;
    if meta::string(crd, "deletionTimestamp").is_none() {
        registry.set_definition(name, served_types(crd, false));
        let status = established_status(crd);
        if crd.get("status") != Some(&status) {
            let written = api.write(&definitions, None, name, false, |current| {
                let mut next = current.clone();
                next["status"] = status.clone();
                Ok(next)
            });
            if let Err(e) = written {
                tracing::warn!(crd = name, error = %e, "could not write the CRD's status");
            }
        }
        tracing::debug!(crd = name, "serving");
        return;
    }
    let types = served_types(crd, true);
    registry.set_definition(name, types.clone());
    let remaining = delete_objects(api, &types);
    let written = api.write(&definitions, None, name, false, |current| {
        let mut next = current.clone();
        if remaining == 0 {
            let finalizers: Vec<String> = meta::finalizers(current)
                .into_iter()
                .filter(|f| f != FINALIZER)
                .collect();
            let metadata = meta::metadata_mut(&mut next);
            if finalizers.is_empty() {
                metadata.remove("finalizers");
            } else {
                metadata.insert("finalizers".into(), json!(finalizers));
            }
        } else {
            set_terminating(
                &mut next,
                "InstanceDeletionInProgress",
                "CustomResource deletion is in progress",
            );
        }
        Ok(next)
    });
    match written {
        Err(e) => tracing::warn!(crd = name, error = %e, "could not update a terminating CRD"),
        Ok(_) if api.store.get(&definitions.qualified(), name).is_none() => {
            registry.set_definition(name, Vec::new());
            tracing::info!(crd = name, "deleted; no longer serving");
        }
        Ok(_) => {}
    }
}

/// Deletes every object of a terminating CRD as a client would (finalizers are respected); returns
/// how many are left.
fn delete_objects(api: &Api, types: &[ResourceType]) -> usize {
    let Some(resource) = types.first() else {
        return 0;
    };
    let everything = Selection::default();
    let Ok(page) = api
        .store
        .list(&resource.qualified(), None, &everything, None, None, None)
    else {
        return 0;
    };
    let options = DeleteOptions {
        propagation: Some(Propagation::Background),
        ..DeleteOptions::default()
    };
    let mut remaining = 0;
    for item in page.items {
        let object_name = meta::name(&item.object).unwrap_or_default();
        let namespace = meta::namespace(&item.object);
        match api.delete_object(resource, namespace, object_name, &options, false) {
            Ok(Deletion::Deleted(_)) => {}
            Ok(Deletion::Pending(_)) => remaining += 1,
            Err(e) if e.code == 404 => {}
            Err(e) => {
                tracing::warn!(object = object_name, error = %e, "could not delete a custom object");
                remaining += 1;
            }
        }
    }
    remaining
}

/// Removes whatever is left in the table of a CRD that is gone (its finalizer was removed by hand,
/// or a create raced the deletion), finalizers or not.
fn purge(api: &Api, name: &str) {
    let table: Arc<str> = Arc::from(name);
    for item in api.store.snapshot(name) {
        let key = match meta::namespace(&item.object) {
            Some(ns) => format!("{ns}/{}", meta::name(&item.object).unwrap_or_default()),
            None => meta::name(&item.object).unwrap_or_default().to_string(),
        };
        if let Err(e) = api.store.transact(&table, &key, |_| Ok(Write::Delete)) {
            tracing::warn!(crd = name, key, error = %e, "could not purge a custom object");
        }
    }
}
