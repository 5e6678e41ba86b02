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

use std::sync::Arc;
use std::time::Duration;

use ferrokube::controller::conditions::{ConditionBuilder, set_condition, update_status_from};
use ferrokube::controller::finalizer::{FinalizerError, finalize};
use ferrokube::controller::owner::{self, CreateOrUpdateError, OwnerError};
use ferrokube::controller::{Action, Context, Reconciler};
use ferrokube::informer::ObjectKey;
use k8s_openapi::api::core::v1::ConfigMap;

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
}

impl Reconciler<DnsRecord> for DnsController {
    type Error = DnsError;

    async fn reconcile(&self, record: Arc<DnsRecord>, ctx: Context) -> Result<Action, DnsError> {
        let (api, ctx) = (&ctx.api_for(record.as_ref()), &ctx);
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
            &ctx.api_here::<ConfigMap>(),
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
        update_status_from(
            &ctx.api_for(record.as_ref()),
            record.as_ref(),
            |record: &mut DnsRecord| {
                let status = record.status.get_or_insert_default();
                let mut changed = set_condition(&mut status.conditions, condition.clone().build());
                changed |= status.observed_generation != generation || status.fqdn != wanted_fqdn;
                status.observed_generation = generation;
                status.fqdn = wanted_fqdn.clone();
                changed
            },
        )
        .await?;
        Ok(Action::requeue(self.poll))
    }

    fn cleanup(&self, record: Arc<DnsRecord>) -> Result<Action, DnsError> {
        let uid = record.metadata.uid.as_deref().ok_or(DnsError::Incomplete)?;
        let deleted = self.provider.delete_owned(uid, None);
        tracing::info!(record = ?record.metadata.name, deleted, "provider records deleted");
        Ok(Action::await_change())
    }
}
