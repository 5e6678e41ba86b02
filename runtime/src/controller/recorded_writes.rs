//! # Recorded writes: write through an `Api`, then tell someone what the server committed
//!
//! Two parts of the controller layer must learn of every write a controller makes, with the
//! object the server answered:
//!
//! - the [consistency store](super::consistency), through [`TrackedApi`](super::TrackedApi): a
//!   reconcile of the key is skipped until the caches show the key's own writes;
//! - the [read-your-own-writes client](super::read_your_writes), through
//!   [`ReadYourWrites`](super::ReadYourWrites): a cache read waits until it shows them.
//!
//! Both wrap the same six verbs of [`Api`] and differ only in what they do with a write's answer.
//! That difference is a [`WriteLog`]; the wrapping is written once, here, in [`Recorded`]:
//!
//! ```text
//!   verb(params, ..) ──▶ Api ──▶ server
//!                                  │ Ok(answer), and not a dry run
//!                                  ▼
//!                 create / replace / patch / *_status: log.wrote(answer)
//!                 delete:                              log.deleted(before, answer)
//!                                                      (`before`: what the log asked to keep
//!                                                       from just before the request was sent)
//! ```
//!
//! A failed write records nothing (the server committed nothing), and neither does a dry run
//! (`dryRun=All`: the server answers as if it wrote, but commits nothing, so no cache will ever
//! show it and nothing may wait for it).

use serde::Serialize;

use ferrokube_client::api::{Api, DeleteParams, Deleted, Object, Patch, PatchParams, PostParams};
use ferrokube_client::error::Error;
use ferrokube_informer::ObjectKey;

/// What happens to the answer of each write the server committed (see the [module docs](self)).
pub(crate) trait WriteLog<O> {
    /// What the log keeps from just before a delete is sent (the read-your-own-writes client: the
    /// uid its cache held under the key, so it can tell afterwards whether the cache has applied
    /// the delete already).
    type BeforeDelete;

    /// Called just before a delete of `object` is sent.
    fn before_delete(&self, object: &ObjectKey) -> Self::BeforeDelete;

    /// A create, replace, patch or status write of `api`'s kind was committed and answered
    /// `written`.
    fn wrote(&self, api: &Api<O>, written: &O);

    /// A delete of `object` was committed and answered `outcome` (the object still there, held by
    /// finalizers or a grace period, or a `Status` saying it is gone).
    fn deleted(
        &self,
        api: &Api<O>,
        object: &ObjectKey,
        before: Self::BeforeDelete,
        outcome: &Deleted<O>,
    );
}

/// The six write verbs of `api`, each followed by `log` on success: borrowed for one call by the
/// wrappers that share it.
pub(crate) struct Recorded<'a, O, L> {
    pub(crate) api: &'a Api<O>,
    pub(crate) log: &'a L,
}

impl<O: Object, L: WriteLog<O>> Recorded<'_, O, L> {
    fn record(&self, result: Result<O, Error>, dry_run: bool) -> Result<O, Error> {
        if let (Ok(written), false) = (&result, dry_run) {
            self.log.wrote(self.api, written);
        }
        result
    }

    pub(crate) async fn create(&self, params: &PostParams, object: &O) -> Result<O, Error> {
        let result = self.api.create(params, object).await;
        self.record(result, params.dry_run)
    }

    pub(crate) async fn replace(
        &self,
        name: &str,
        params: &PostParams,
        object: &O,
    ) -> Result<O, Error> {
        let result = self.api.replace(name, params, object).await;
        self.record(result, params.dry_run)
    }

    pub(crate) async fn replace_status(
        &self,
        name: &str,
        params: &PostParams,
        object: &O,
    ) -> Result<O, Error> {
        let result = self.api.replace_status(name, params, object).await;
        self.record(result, params.dry_run)
    }

    pub(crate) async fn patch<P: Serialize>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<O, Error> {
        let result = self.api.patch(name, params, patch).await;
        self.record(result, params.dry_run)
    }

    pub(crate) async fn patch_status<P: Serialize>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<O, Error> {
        let result = self.api.patch_status(name, params, patch).await;
        self.record(result, params.dry_run)
    }

    pub(crate) async fn delete(
        &self,
        name: &str,
        params: &DeleteParams,
    ) -> Result<Deleted<O>, Error> {
        let object = ObjectKey::new(self.api.namespace(), name);
        let before = self.log.before_delete(&object);
        let outcome = self.api.delete(name, params).await?;
        if !params.dry_run {
            self.log.deleted(self.api, &object, before, &outcome);
        }
        Ok(outcome)
    }
}
