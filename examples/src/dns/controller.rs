//! The DnsRecord controller: keeps the provider's records equal to the DnsRecords' specs.
//!
//! ```text
//!  DnsRecord informer ─┐                         ┌─ finalizer: added before the provider is touched
//!  ConfigMap (owned) ──┼─▶ queue ─▶ reconcile ───┼─ apply:   upsert the record at the provider,
//!  provider change feed┘      ▲                  │           release a previous fqdn, write the
//!                             │                  │           owned ConfigMap, set Ready
//!     requeue after `poll` ───┘ (drift the       └─ cleanup: delete the provider's records of this
//!                                feed missed)                object, then remove the finalizer
//! ```
//!
//! Every step is idempotent and reads what is before it writes: an unchanged world costs no
//! provider write and no API write, which is why polling every few seconds is cheap.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ferrokube::controller::conditions::{ConditionBuilder, set_condition, update_status_from};
use ferrokube::controller::finalizer::{FinalizerError, finalize};
use ferrokube::controller::owner::{self, CreateOrUpdateError, OwnerError};
use ferrokube::controller::{Action, Context, Reconciler};
use ferrokube::core::ObjectKey;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;

use super::provider::{Entry, Provider};
use super::record::{DnsRecord, FINALIZER, READY};

/// Why a reconcile failed; the key is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    #[error(transparent)]
    Api(#[from] ferrokube::Error),
    #[error(transparent)]
    Finalizer(#[from] FinalizerError<Box<DnsError>>),
    #[error("owned ConfigMap: {0}")]
    ConfigMap(#[from] CreateOrUpdateError<OwnerError>),
    #[error("the DnsRecord has no uid yet")]
    Incomplete,
}

/// The reconciler: the provider it keeps in step, and how often it looks. It writes to the API
/// server only through each reconcile's [`Context`], so every write is recorded for the key.
pub struct DnsController {
    pub provider: Provider,
    /// How often a record is compared with the provider with nothing else happening: drift the
    /// provider does not announce is found within this long.
    pub poll: Duration,
    /// A deliberate bug, for the fault explorer's mutant corpus (see [`Mutant`]); none by
    /// default.
    mutant: Option<Mutant>,
    /// For [`Mutant::WaitsForItsOwnVersion`] only: the resourceVersion of the last status write,
    /// by key.
    own_versions: Mutex<HashMap<ObjectKey, String>>,
}

/// One deliberate bug of the DnsRecord sample, for the fault explorer's mutant corpus
/// (`crate::mutants`, issue 29; `examples/tests/explore_mutants_rs_dns.rs` finds each). Every
/// site it changes is marked with a comment naming it; without one the controller is exactly the
/// sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// **A status timestamp written on every reconcile.** The `Ready` condition's
    /// `lastTransitionTime` is stamped with now at each reconcile, not when the condition's
    /// status changes. The sample reconciles every `poll` to find drift, so the object is
    /// rewritten every `poll` for ever: it never settles, every watcher of it gets an event each
    /// time, and the server's history fills with writes that say nothing. Acto (SOSP 2023)
    /// reports operators that never reach a fixed point this way; `set_condition` keeps the time
    /// unless the status changes, as the API conventions ask.
    StatusTimestampEveryReconcile,
    /// **A reconcile that waits for ever on a cache that will not catch up.** After a status
    /// write, the controller refuses to reconcile the object again (it requeues) until its cache
    /// shows the resourceVersion that write returned, compared for equality, since
    /// resourceVersions are opaque strings to a client. If anyone writes the object before the
    /// cache has shown that version (the user edits it while the watch is slow, or while the
    /// watch hides the controller's own write: a coalesced event, a relist after compaction),
    /// the cache jumps past it and never shows it: the key requeues for ever and is never
    /// reconciled again, and nothing in the object says so. KEP-5647 (the staleness
    /// mitigation kube-controller-manager 1.36 adopted) names this risk: "a controller may stop
    /// reconciling an object entirely". The consistency store compares resourceVersions as the
    /// integers the server makes them, "at least", and so cannot wait past one.
    WaitsForItsOwnVersion,
}

/// How long [`Mutant::WaitsForItsOwnVersion`] waits before it looks at the cache again.
const OWN_VERSION_RECHECK: Duration = Duration::from_secs(1);

impl DnsController {
    /// The controller of `provider`'s records, polling it every `poll`.
    pub fn new(provider: Provider, poll: Duration) -> DnsController {
        DnsController {
            provider,
            poll,
            mutant: None,
            own_versions: Mutex::new(HashMap::new()),
        }
    }

    /// The controller with a deliberate bug (see [`Mutant`]): for the fault explorer's tests only.
    pub fn with_mutant(mut self, mutant: Option<Mutant>) -> DnsController {
        self.mutant = mutant;
        self
    }
}

impl Reconciler<DnsRecord> for DnsController {
    type Error = DnsError;

    async fn reconcile(&self, record: Arc<DnsRecord>, ctx: Context) -> Result<Action, DnsError> {
        // Mutant::WaitsForItsOwnVersion: nothing happens until the cache shows exactly the
        // resourceVersion the last status write returned.
        if self.mutant == Some(Mutant::WaitsForItsOwnVersion) {
            let key = ObjectKey::of(record.as_ref());
            let mut own = self.own_versions.lock();
            if let Some(wanted) = own.get(&key) {
                if record.metadata.resource_version.as_ref() != Some(wanted) {
                    return Ok(Action::requeue(OWN_VERSION_RECHECK));
                }
                own.remove(&key);
            }
        }
        let (api, ctx) = (&ctx.api_for_object(record.as_ref()), &ctx);
        let done = finalize(
            api,
            FINALIZER,
            record,
            |record| async move { self.apply(ctx, record).await.map_err(Box::new) },
            |record| async move { self.cleanup(record).map_err(Box::new) },
        )
        .await?;
        Ok(done.unwrap_or(Action::await_change()))
    }
}

impl DnsController {
    async fn apply(&self, ctx: &Context, record: Arc<DnsRecord>) -> Result<Action, DnsError> {
        let uid = record.metadata.uid.clone().ok_or(DnsError::Incomplete)?;
        let spec = &record.spec;
        let wanted = Entry {
            type_: spec.type_.clone(),
            value: spec.value.clone(),
            ttl: spec.ttl.unwrap_or(300),
            owner_uid: uid.clone(),
            owner_key: ObjectKey::of(record.as_ref()),
        };
        // 1. The provider: write only what differs; give back a name this object no longer wants.
        let ready = if self.provider.get(&spec.fqdn).as_ref() == Some(&wanted) {
            Ok(())
        } else {
            self.provider.upsert(&spec.fqdn, wanted)
        };
        self.provider.delete_owned(&uid, Some(&spec.fqdn));

        // 2. The owned ConfigMap: what the provider holds, for `kubectl get cm` (GC'd with it).
        owner::create_or_update(
            &ctx.api_in_primary_namespace::<ConfigMap>(),
            &format!("{}-dns", ObjectKey::of(record.as_ref()).name()),
            |cm: &mut ConfigMap| {
                owner::set_controller_reference(record.as_ref(), &mut cm.metadata)?;
                let data = [
                    ("fqdn", &spec.fqdn),
                    ("type", &spec.type_),
                    ("value", &spec.value),
                ];
                cm.data = Some(data.map(|(k, v)| (k.to_string(), v.clone())).into());
                Ok(())
            },
        )
        .await?;

        // 3. Status: Ready with the generation it answers, written only when it changes.
        let generation = record.metadata.generation;
        let condition = match &ready {
            Ok(()) => ConditionBuilder::from_bool(READY, true)
                .reason("Synced")
                .message(format!("{} {} {}", spec.fqdn, spec.type_, spec.value)),
            Err(other) => ConditionBuilder::from_bool(READY, false)
                .reason("NameTaken")
                .message(format!("{} is held by {other}", spec.fqdn)),
        }
        .observed_generation(generation);
        let wanted_fqdn = ready.as_ref().ok().map(|()| spec.fqdn.clone());
        let stamp_every_time = self.mutant == Some(Mutant::StatusTimestampEveryReconcile);
        let written = update_status_from(
            &ctx.api_for_object(record.as_ref()),
            record.as_ref(),
            |record: &mut DnsRecord| {
                let status = record.status.get_or_insert_default();
                let mut changed = set_condition(&mut status.conditions, condition.clone().build());
                changed |= status.observed_generation != generation || status.fqdn != wanted_fqdn;
                status.observed_generation = generation;
                status.fqdn = wanted_fqdn.clone();
                // Mutant::StatusTimestampEveryReconcile: the condition's time is now, always.
                if stamp_every_time {
                    changed |= stamp_now(&mut status.conditions);
                }
                changed
            },
        )
        .await?;
        // Mutant::WaitsForItsOwnVersion: remember the version to wait for.
        if let (Some(Mutant::WaitsForItsOwnVersion), Some(written)) = (self.mutant, written) {
            if let Some(version) = written.metadata.resource_version {
                let key = ObjectKey::of(record.as_ref());
                self.own_versions.lock().insert(key, version);
            }
        }
        Ok(Action::requeue(self.poll))
    }

    fn cleanup(&self, record: Arc<DnsRecord>) -> Result<Action, DnsError> {
        let uid = record.metadata.uid.as_deref().ok_or(DnsError::Incomplete)?;
        let deleted = self.provider.delete_owned(uid, None);
        tracing::info!(record = ?record.metadata.name, deleted, "provider records deleted");
        Ok(Action::await_change())
    }
}

/// Sets the `Ready` condition's `lastTransitionTime` to now (whole seconds, the precision the API
/// keeps); whether that changed it. Only [`Mutant::StatusTimestampEveryReconcile`] does this.
fn stamp_now(conditions: &mut [k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]) -> bool {
    let now = ferrokube::controller::now();
    let now = Time(Timestamp::new(now.as_second(), 0).unwrap_or(now));
    match conditions.iter_mut().find(|c| c.type_ == READY) {
        Some(ready) if ready.last_transition_time != now => {
            ready.last_transition_time = now;
            true
        }
        _ => false,
    }
}
