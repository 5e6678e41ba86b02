//! Three small controllers that reproduce bugs Sieve (OSDI 2022) found in real operators, each in
//! a buggy and a fixed form: the explorer finds every buggy one with no hint of where to look,
//! and passes every fixed one under the same search.
//!
//! The objects are ConfigMaps standing for the operators' kinds, so the tests need no CRD:
//! `role=cluster` for the custom resource, `role=sts` for the StatefulSet, `role=pvc` for a
//! PersistentVolumeClaim. An actor `app` stands for the database writing into its volume.
//!
//! | controller | reproduces | Sieve's class | what goes wrong |
//! |---|---|---|---|
//! | [`resize`] | rabbitmq/cluster-operator#782 | intermediate state | a crash between deleting the StatefulSet and growing the volume: the restart recreates the StatefulSet at the new size and never grows the volume |
//! | [`stale_deletion`] | pravega/zookeeper-operator#312 (also datastax/cass-operator#412) | stale state (time travel) | a restart reads, from a lagging API server, the deletion of an earlier cluster of the same name, and deletes the volumes of the live one, which it selects by name |
//! | [`stale_scale_down`] | pravega/zookeeper-operator#314 | stale state (time travel) | a restart reads a stale `replicas` after a scale-down and scale-up, and deletes the volume of a member that was scaled back up, with its data |

use std::collections::BTreeMap;
use std::sync::Arc;

use ferrokube_client::api::{DeleteParams, ListParams, PostParams};
use ferrokube_client::{Api, Client};
use ferrokube_core::Scope;
use ferrokube_explore::{
    BoxError, Budget, ControllerStart, Exploration, Found, Scenario, Searched, Step, Violation,
};
use ferrokube_informer::{FirstList, ReflectorOptions, SharedInformerFactory};
use ferrokube_runtime::controller::finalizer::finalize;
use ferrokube_runtime::controller::{Action, Context, Controller, Reconciler};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const NAMESPACE: &str = "default";

fn config_map(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NAMESPACE.into()),
            labels: Some(map(labels)),
            ..ObjectMeta::default()
        },
        data: Some(map(data)),
        ..ConfigMap::default()
    }
}

fn field(object: &ConfigMap, key: &str) -> String {
    object
        .data
        .as_ref()
        .and_then(|data| data.get(key))
        .cloned()
        .unwrap_or_default()
}

fn name_of(object: &ConfigMap) -> String {
    object.metadata.name.clone().unwrap_or_default()
}

fn api(client: Client) -> Api<ConfigMap> {
    Api::namespaced(client, NAMESPACE)
}

async fn delete_if_there(api: &Api<ConfigMap>, name: &str) -> Result<(), BoxError> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(error) if error.is_not_found() => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// Runs `reconciler` over the `role=cluster` ConfigMaps until the run ends, with informers that
/// list first from the API server's cache (`resourceVersion=0`), as controller-runtime's, and so
/// the operators Sieve tested, do: ferrokube's default first list is consistent
/// (`FirstList::Consistent`), which no lagging replica can answer from the past.
async fn run<R: Reconciler<ConfigMap>>(
    client: Client,
    shutdown: ferrokube_explore::BoxFuture<()>,
    reconciler: R,
) {
    let clusters = Scope::namespace(NAMESPACE).labels("role=cluster");
    let factory = Arc::new(SharedInformerFactory::new(client.clone()));
    factory.informer_with::<ConfigMap>(&clusters, |informer| {
        informer.reflector(ReflectorOptions {
            first_list: FirstList::FromCache,
            ..ReflectorOptions::default()
        })
    });
    if let Err(error) = Controller::<ConfigMap>::new(client, clusters)
        .with_factory(factory)
        .run(reconciler, shutdown)
        .await
    {
        tracing::warn!(%error, "the controller stopped with an error");
    }
}

/// A step of the user: create `name` with `data`.
fn create(
    name: &'static str,
    labels: &'static [(&'static str, &'static str)],
    data: &'static [(&'static str, &'static str)],
) -> Step {
    Step::new(format!("create {name}"), move |client| async move {
        api(client)
            .create(&PostParams::default(), &config_map(name, labels, data))
            .await?;
        Ok(())
    })
}

/// A step of the user: set `key` of `name` to `value`, once `name` exists (a volume appears when
/// the controller gets to it, which a fault may delay: the step waits, as the application would,
/// up to a minute of virtual time).
fn set(name: &'static str, key: &'static str, value: &'static str) -> Step {
    Step::new(
        format!("set {name} {key}={value}"),
        move |client| async move {
            let api = api(client);
            let mut waited = 0;
            while api.get_opt(name).await?.is_none() && waited < 60 {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                waited += 1;
            }
            let mut object = api.get(name).await?;
            object
                .data
                .get_or_insert_default()
                .insert(key.into(), value.into());
            api.replace(name, &PostParams::default(), &object).await?;
            Ok(())
        },
    )
}

/// A step of the user: create `name`, once an earlier object of that name has gone (its
/// finalizer may hold it a while longer under a fault: the step waits up to a minute).
fn create_again(name: &'static str, labels: &'static [(&'static str, &'static str)]) -> Step {
    Step::new(format!("create {name} again"), move |client| async move {
        let api = api(client);
        let mut waited = 0;
        while api.get_opt(name).await?.is_some() && waited < 60 {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            waited += 1;
        }
        api.create(&PostParams::default(), &config_map(name, labels, &[]))
            .await?;
        Ok(())
    })
}

fn delete(name: &'static str) -> Step {
    Step::new(format!("delete {name}"), move |client| async move {
        api(client).delete(name, &DeleteParams::default()).await?;
        Ok(())
    })
}

/// What the search found, or a failure that says it found nothing.
fn found(exploration: &Exploration) -> Box<Found> {
    match exploration.explore() {
        Err(Searched::Found(found)) => {
            println!("{found}");
            found
        }
        Err(other) => panic!("{other}"),
        Ok(report) => panic!("the explorer found nothing: {report:?}"),
    }
}

/// The fixed form's search, at twice the default budget (every single-fault candidate, then
/// twice its random plans): it must find nothing and cover every candidate.
fn clean(exploration: Exploration) {
    let report = exploration
        .budget(Budget::every_candidate(
            2 * ferrokube_explore::search::DEFAULT_RANDOM_PLANS,
        ))
        .check();
    println!("{report}");
    assert_eq!(report.covered, report.candidates, "{report:?}");
}

/// The search every test here makes: the same seed and budget for the buggy and the fixed form.
fn search<C, Fut>(controller: C, scenario: fn() -> Scenario) -> Exploration
where
    C: Fn(ControllerStart) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    Exploration::new(controller, scenario)
        .seed(2022)
        .budget(Budget::runs(300))
}

/// rabbitmq/cluster-operator#782: growing a cluster's volume.
///
/// The operator cannot change a StatefulSet's volume template in place, so to grow the volumes it
/// deletes the StatefulSet (leaving its pods and volumes), grows each volume, and lets the next
/// step recreate the StatefulSet from the new template. The buggy form decides whether to grow
/// by comparing the wanted size with the **StatefulSet's** template: after a crash between the
/// delete and the growth, the restart finds no StatefulSet, creates it at the new size, and from
/// then on sees nothing to do, so the volume never grows. The fixed form compares with the
/// volume itself, the thing it means to change.
mod resize {
    use super::*;

    pub struct Resize {
        /// The bug: compare with the StatefulSet, not the volume.
        pub compare_with_statefulset: bool,
    }

    impl Reconciler<ConfigMap> for Resize {
        type Error = BoxError;

        async fn reconcile(
            &self,
            cluster: Arc<ConfigMap>,
            ctx: Context,
        ) -> Result<Action, BoxError> {
            let api = ctx.api_in_primary_namespace::<ConfigMap>();
            let name = name_of(&cluster);
            let wanted = field(&cluster, "size");
            let (sts_name, pvc_name) = (format!("{name}-sts"), format!("{name}-pvc"));
            let sts = api.get_opt(&sts_name).await?;
            let pvc = api.get_opt(&pvc_name).await?;
            let must_grow = if self.compare_with_statefulset {
                sts.as_ref().is_some_and(|sts| field(sts, "size") != wanted)
            } else {
                pvc.as_ref().is_some_and(|pvc| field(pvc, "size") != wanted)
            };
            if must_grow {
                delete_if_there(&api, &sts_name).await?;
                if let Some(mut pvc) = pvc.clone() {
                    pvc.data
                        .get_or_insert_default()
                        .insert("size".into(), wanted.clone());
                    api.replace(&pvc_name, &PostParams::default(), &pvc).await?;
                }
            }
            if pvc.is_none() {
                let pvc = config_map(&pvc_name, &[("role", "pvc")], &[("size", &wanted)]);
                api.create(&PostParams::default(), &pvc).await?;
            }
            match api.get_opt(&sts_name).await? {
                None => {
                    let sts = config_map(&sts_name, &[("role", "sts")], &[("size", &wanted)]);
                    api.create(&PostParams::default(), &sts).await?;
                }
                Some(mut sts) if field(&sts, "size") != wanted => {
                    sts.data
                        .get_or_insert_default()
                        .insert("size".into(), wanted);
                    api.replace(&sts_name, &PostParams::default(), &sts).await?;
                }
                Some(_) => {}
            }
            Ok(Action::await_change())
        }
    }

    pub fn scenario() -> Scenario {
        Scenario::new()
            .step(create(
                "rabbit",
                &[("role", "cluster")],
                &[("size", "10Gi")],
            ))
            .step(set("rabbit", "size", "15Gi"))
    }

    pub fn exploration(compare_with_statefulset: bool) -> Exploration {
        search(
            move |start: ControllerStart| {
                run(
                    start.client,
                    start.shutdown,
                    Resize {
                        compare_with_statefulset,
                    },
                )
            },
            scenario,
        )
    }
}

#[test]
fn explore_sieve_rabbitmq_782_a_crash_mid_resize_is_found() {
    let found = found(&resize::exploration(true));
    assert!(
        matches!(&found.violation, Violation::EndState { differences }
            if differences.iter().any(|d| d.contains("rabbit-pvc"))),
        "{found}"
    );
    assert_eq!(found.plan.faults.len(), 1, "{found}");
    assert!(found.plan.faults[0].restarts(), "{found}");
}

#[test]
fn explore_sieve_rabbitmq_782_fixed_passes() {
    clean(resize::exploration(false));
}

/// pravega/zookeeper-operator#312 (and datastax/cass-operator#412): volumes deleted on a stale
/// deletion.
///
/// When a cluster is being deleted, the operator deletes its volumes, which it finds **by the
/// cluster's name**, then removes its finalizer. A cluster deleted and created again under the
/// same name is a different object with the same name. A restarted operator whose API server
/// lags sees the old object, still being deleted, and deletes the volumes of the new one. The
/// fixed form finds the volumes by the cluster's **uid** (the old cluster's volumes are gone
/// already, so the stale view deletes nothing), and labels a new volume only with a uid the
/// server confirms (otherwise the stale view of the old cluster, alive, labels the new cluster's
/// volume with the old uid, and the old cluster's deletion, read next, deletes it: the explorer
/// found that in a fixed form that only selected by uid).
mod stale_deletion {
    use super::*;

    pub const FINALIZER: &str = "explore.ferrokube.dev/volumes";

    pub struct Volumes {
        /// The bug: find the volumes by the cluster's name.
        pub select_by_name: bool,
    }

    impl Reconciler<ConfigMap> for Volumes {
        type Error = BoxError;

        async fn reconcile(
            &self,
            cluster: Arc<ConfigMap>,
            ctx: Context,
        ) -> Result<Action, BoxError> {
            let api = ctx.api_in_primary_namespace::<ConfigMap>();
            let select_by_name = self.select_by_name;
            finalize(
                &api,
                FINALIZER,
                cluster,
                |cluster| {
                    let api = api.clone();
                    async move {
                        let name = name_of(&cluster);
                        let uid = cluster.metadata.uid.clone().unwrap_or_default();
                        let pvc_name = format!("{name}-pvc");
                        if api.get_opt(&pvc_name).await?.is_none() {
                            // The fixed form labels a new volume only with a uid the server
                            // confirms: a stale view of an earlier cluster of the same name
                            // would label the new cluster's volume with the old uid, and the
                            // old cluster's deletion, read later, would delete it (the explorer
                            // found this in the first fixed form, which only selected by uid).
                            if !select_by_name {
                                let fresh = api.get_opt(&name).await?;
                                let live = fresh.and_then(|fresh| fresh.metadata.uid);
                                if live.as_deref() != Some(uid.as_str()) {
                                    return Ok(());
                                }
                            }
                            let pvc = config_map(
                                &pvc_name,
                                &[("role", "pvc"), ("cluster", &name), ("cluster-uid", &uid)],
                                &[],
                            );
                            api.create(&PostParams::default(), &pvc).await?;
                        }
                        Ok::<_, BoxError>(())
                    }
                },
                |cluster| {
                    let api = api.clone();
                    async move {
                        let selector = if select_by_name {
                            format!("role=pvc,cluster={}", name_of(&cluster))
                        } else {
                            let uid = cluster.metadata.uid.clone().unwrap_or_default();
                            format!("role=pvc,cluster-uid={uid}")
                        };
                        let volumes = api.list(&ListParams::default().labels(&selector)).await?;
                        for volume in volumes.items {
                            delete_if_there(&api, &name_of(&volume)).await?;
                        }
                        Ok(())
                    }
                },
            )
            .await
            .map_err(|error| -> BoxError { error.to_string().into() })?;
            Ok(Action::await_change())
        }
    }

    pub fn scenario() -> Scenario {
        Scenario::new()
            .step(create("zk", &[("role", "cluster")], &[]))
            .step(delete("zk"))
            .step(create_again("zk", &[("role", "cluster")]))
            .step(set_volume_data("zk-pvc", "snapshot-2"))
    }

    /// The application writes into the new cluster's volume.
    fn set_volume_data(volume: &'static str, value: &'static str) -> Step {
        set(volume, "data", value).by("app")
    }

    pub fn exploration(select_by_name: bool) -> Exploration {
        search(
            move |start: ControllerStart| {
                run(start.client, start.shutdown, Volumes { select_by_name })
            },
            scenario,
        )
    }
}

#[test]
fn explore_sieve_zookeeper_312_a_stale_deletion_is_found() {
    let found = found(&stale_deletion::exploration(true));
    // The new cluster's volume, with the data the application wrote, is gone: the controller
    // recreated it empty, or not at all.
    assert!(
        matches!(&found.violation, Violation::EndState { differences }
            if differences.iter().any(|d| d.contains("zk-pvc"))),
        "{found}"
    );
    assert_eq!(found.plan.faults.len(), 1, "{found}");
    assert!(
        matches!(
            found.plan.faults[0],
            ferrokube_explore::Fault::RestartLagging { .. }
        ),
        "{found}"
    );
}

#[test]
fn explore_sieve_zookeeper_312_fixed_passes() {
    clean(stale_deletion::exploration(false));
}

/// pravega/zookeeper-operator#314: a member's volume deleted on a stale scale-down.
///
/// The operator keeps one volume per member, `<name>-pvc-<i>` for `i < replicas`, and deletes
/// the volumes of members scaled away. After a scale-down from 2 to 1 and back up to 2, a
/// restarted operator whose API server lags reads `replicas: 1` and deletes member 1's new
/// volume with the data written to it since. The fixed form confirms a destructive decision with
/// a read from the server itself (a GET, which is not served from the lagging watch cache)
/// before it deletes.
mod stale_scale_down {
    use super::*;

    pub struct Members {
        /// The bug: delete on the cached spec alone.
        pub trust_the_cache: bool,
    }

    impl Reconciler<ConfigMap> for Members {
        type Error = BoxError;

        async fn reconcile(
            &self,
            cluster: Arc<ConfigMap>,
            ctx: Context,
        ) -> Result<Action, BoxError> {
            let api = ctx.api_in_primary_namespace::<ConfigMap>();
            let name = name_of(&cluster);
            let replicas: usize = field(&cluster, "replicas").parse().unwrap_or(0);
            for member in 0..replicas {
                let pvc_name = format!("{name}-pvc-{member}");
                if api.get_opt(&pvc_name).await?.is_none() {
                    let pvc = config_map(&pvc_name, &[("role", "pvc"), ("cluster", &name)], &[]);
                    api.create(&PostParams::default(), &pvc).await?;
                }
            }
            let selector = format!("role=pvc,cluster={name}");
            let volumes = api.list(&ListParams::default().labels(&selector)).await?;
            let extra: Vec<String> = volumes
                .items
                .iter()
                .map(name_of)
                .filter(|volume| {
                    volume
                        .rsplit('-')
                        .next()
                        .and_then(|i| i.parse::<usize>().ok())
                        .is_some_and(|i| i >= replicas)
                })
                .collect();
            if extra.is_empty() {
                return Ok(Action::await_change());
            }
            if !self.trust_the_cache {
                // Confirm with the server before destroying anything.
                let fresh = api.get(&name).await?;
                let now: usize = field(&fresh, "replicas").parse().unwrap_or(0);
                if now != replicas {
                    return Ok(Action::requeue(std::time::Duration::from_secs(1)));
                }
            }
            for volume in extra {
                delete_if_there(&api, &volume).await?;
            }
            Ok(Action::await_change())
        }
    }

    pub fn scenario() -> Scenario {
        Scenario::new()
            .step(create("zk", &[("role", "cluster")], &[("replicas", "2")]))
            .step(set("zk", "replicas", "1"))
            .step(set("zk", "replicas", "2"))
            .step(set("zk-pvc-1", "data", "written-after-scale-up").by("app"))
    }

    pub fn exploration(trust_the_cache: bool) -> Exploration {
        search(
            move |start: ControllerStart| {
                run(start.client, start.shutdown, Members { trust_the_cache })
            },
            scenario,
        )
    }
}

#[test]
fn explore_sieve_zookeeper_314_a_stale_scale_down_is_found() {
    let found = found(&stale_scale_down::exploration(true));
    assert!(
        matches!(&found.violation, Violation::EndState { differences }
            if differences.iter().any(|d| d.contains("zk-pvc-1"))),
        "{found}"
    );
    assert_eq!(found.plan.faults.len(), 1, "{found}");
}

#[test]
fn explore_sieve_zookeeper_314_fixed_passes() {
    clean(stale_scale_down::exploration(false));
}
