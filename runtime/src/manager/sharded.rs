//! A shard ring's membership as the manager's [`Campaign`] (feature `shard`): the only module of
//! the manager that names sharding.

use std::future::Future;
use std::pin::Pin;

use super::campaign::{Campaign, CampaignRun};
use crate::leader::Leadership;
use crate::shard::ShardMember;

impl Campaign for ShardMember {
    fn leadership(&self) -> Leadership {
        self.membership()
    }

    fn run<'a>(
        &'a self,
        stopped: Pin<Box<dyn Future<Output = ()> + Send + 'a>>,
    ) -> CampaignRun<'a> {
        Box::pin(async move {
            ShardMember::run(self, stopped).await?;
            Ok(())
        })
    }
}
