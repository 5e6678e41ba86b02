//! Has the world converged? Checked against a fresh list from the API server, never a cache.
//!
//! A ReplicaSet has converged when the server holds exactly `spec.replicas` active pods controlled
//! by it, all of them ready and available (ready for `minReadySeconds`), and its status says so:
//! `replicas`, `readyReplicas` and `availableReplicas` all equal `spec.replicas`, for the current spec
//! (`observedGeneration == generation`). Both halves are needed: a status written before a pod was
//! killed can still show the right numbers once a replacement exists but is not ready yet. The demo's
//! last line and the tests' assertions both come from here.

use std::collections::HashMap;
use std::fmt;

use ferrokube::api::ListParams;
use ferrokube::{Api, Client, Error};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;

use super::controller::pod;

/// One ReplicaSet as the server has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSetState {
    pub name: String,
    pub desired: i32,
    /// Active pods on the server whose controller is this ReplicaSet (by uid).
    pub live: i32,
    /// Of those, ready ones, and ones ready for at least `minReadySeconds`.
    pub live_ready: i32,
    pub live_available: i32,
    pub replicas: i32,
    pub ready: i32,
    pub available: i32,
    /// `status.observedGeneration == metadata.generation`.
    pub observed: bool,
}

impl ReplicaSetState {
    pub fn converged(&self) -> bool {
        let d = self.desired;
        let pods = [self.live, self.live_ready, self.live_available];
        let status = [self.replicas, self.ready, self.available];
        self.observed && pods.iter().chain(&status).all(|n| *n == d)
    }
}

/// Every ReplicaSet of a namespace, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct World {
    pub replicasets: Vec<ReplicaSetState>,
}

impl World {
    /// Lists the namespace's ReplicaSets and pods (two requests) and compares them.
    pub async fn observe(client: &Client, namespace: &str) -> Result<World, Error> {
        let replicasets = Api::<ReplicaSet>::namespaced(client.clone(), namespace)
            .list(&ListParams::default())
            .await?;
        let pods = Api::<Pod>::namespaced(client.clone(), namespace)
            .list(&ListParams::default())
            .await?;
        let mut owned: HashMap<&str, Vec<&Pod>> = HashMap::new();
        for pod in pods.items.iter().filter(|p| pod::is_active(p)) {
            if let Some(owner) = ferrokube::controller::owner::controller_of(&pod.metadata) {
                owned.entry(owner.uid.as_str()).or_default().push(pod);
            }
        }
        let now = ferrokube::controller::now();
        let mut states: Vec<ReplicaSetState> = replicasets
            .items
            .iter()
            .map(|rs| {
                let status = rs.status.clone().unwrap_or_default();
                let uid = rs.metadata.uid.as_deref().unwrap_or_default();
                let pods = owned.get(uid).map(Vec::as_slice).unwrap_or_default();
                let min_ready = rs.spec.min_ready_seconds.unwrap_or(0);
                let count =
                    |keep: &dyn Fn(&Pod) -> bool| pods.iter().filter(|p| keep(p)).count() as i32;
                ReplicaSetState {
                    name: rs.metadata.name.clone().unwrap_or_default(),
                    desired: rs.spec.replicas.unwrap_or(1),
                    live: pods.len() as i32,
                    live_ready: count(&|p| pod::is_ready(p)),
                    live_available: count(&|p| pod::is_available(p, min_ready, now)),
                    replicas: status.replicas,
                    ready: status.ready_replicas.unwrap_or(0),
                    available: status.available_replicas.unwrap_or(0),
                    observed: status.observed_generation == rs.metadata.generation,
                }
            })
            .collect();
        states.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(World {
            replicasets: states,
        })
    }

    pub fn converged(&self) -> bool {
        self.replicasets.iter().all(ReplicaSetState::converged)
    }

    pub fn pods(&self) -> i32 {
        self.replicasets.iter().map(|rs| rs.live).sum()
    }
}

impl fmt::Display for World {
    /// `web 2/2 ready 2, api 4/4 ready 3 (status behind)`: desired/live pods, ready (and available,
    /// when it differs) pods, and whether the status disagrees.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, rs) in self.replicasets.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(
                f,
                "{} {}/{} ready {}",
                rs.name, rs.desired, rs.live, rs.live_ready
            )?;
            if rs.live_available != rs.live_ready {
                write!(f, " available {}", rs.live_available)?;
            }
            if (rs.replicas, rs.ready, rs.available) != (rs.live, rs.live_ready, rs.live_available)
                || !rs.observed
            {
                write!(f, " (status behind)")?;
            }
        }
        Ok(())
    }
}
