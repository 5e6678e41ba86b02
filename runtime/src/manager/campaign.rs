//! [`Campaign`]: what this replica holds a Lease for, as the manager sees it: leadership (a
//! [`LeaderElector`]), or a share of a shard ring (a `ShardMember`, feature `shard`, in the
//! manager's `sharded` module). The manager gates its client's writes on the campaign's
//! [`Leadership`], runs it beside the controllers, and stops it last; it never names sharding.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;

use crate::leader::{LeaderElector, Leadership};

/// A boxed future, as the campaign's `run` returns it (the manager's `BoxError`, spelled out:
/// this module names nothing of the manager's, so the manager may name it).
pub(super) type CampaignRun<'a> =
    Pin<Box<dyn Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>> + Send + 'a>>;

/// A Lease this replica campaigns for; see the [module docs](self). `Any` is a supertrait so
/// the manager can hand out the concrete campaign (the shard member) by downcasting.
pub(super) trait Campaign: Any + Send + Sync {
    /// The write gate: open while this replica holds the Lease.
    fn leadership(&self) -> Leadership;

    /// Campaigns (and holds the Lease once won) until `stopped` completes, then releases it.
    fn run<'a>(&'a self, stopped: Pin<Box<dyn Future<Output = ()> + Send + 'a>>)
    -> CampaignRun<'a>;
}

impl Campaign for LeaderElector {
    fn leadership(&self) -> Leadership {
        LeaderElector::leadership(self)
    }

    fn run<'a>(
        &'a self,
        stopped: Pin<Box<dyn Future<Output = ()> + Send + 'a>>,
    ) -> CampaignRun<'a> {
        Box::pin(async move {
            LeaderElector::run(self, stopped).await?;
            Ok(())
        })
    }
}
