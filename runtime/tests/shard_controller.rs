//! A sharded controller in one process, through the library alone (no sample): three members of
//! one ring reconcile ConfigMaps on the embedded API server. Each object must be labelled for,
//! and reconciled by, the member the hash ring gives it; when a member leaves gracefully its share
//! moves at once (no lease expiry to wait for) to the members the smaller ring names; and the live
//! view's journal shows the ring (stage `shard`: members and owners).

use ferrokube_testkit as common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokube_apiserver::ApiServer;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::api::PostParams;
use ferrokube_core::Scope;
use ferrokube_runtime::controller::Action;
use ferrokube_runtime::controller::Controller;
use ferrokube_runtime::controller::from_fn;
use ferrokube_runtime::leader::Timings;
use ferrokube_runtime::shard::HashRing;
use ferrokube_runtime::shard::ShardMember;
use ferrokube_view::Journal;
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio::sync::watch;
use tracing_subscriber::layer::SubscriberExt;

const NS: &str = "default";
const LABEL: &str = "shard.ferrokube.dev/cms";

/// Who reconciled which key, last.
type Reconciled = Arc<Mutex<HashMap<String, String>>>;

/// One member: its membership and its controller, until `stop` turns true (controller first,
/// then the Lease is released, as the manager does it).
fn start_member(client: &Client, name: &str, reconciled: &Reconciled) -> watch::Sender<bool> {
    let member = ShardMember::builder(client.clone(), NS, "cms")
        .identity(name)
        .timings(Timings {
            lease_duration: Duration::from_millis(1500),
            renew_deadline: Duration::from_millis(1000),
            retry_period: Duration::from_millis(250),
        })
        .build()
        .expect("member");
    let (stop, stopped) = watch::channel(false);
    let controller = Controller::<ConfigMap>::new(member.client(), Scope::namespace(NS))
        .name(&format!("cms-{name}"))
        .shard(&member);
    let (member_name, seen) = (name.to_string(), reconciled.clone());
    let reconciler = from_fn(move |_: Arc<ConfigMap>, ctx| {
        seen.lock()
            .insert(ctx.key().to_string(), member_name.clone());
        async { Ok::<_, ferrokube_client::Error>(Action::await_change()) }
    });
    let (controller_done, mut controller_stopped) = watch::channel(false);
    let mut stop_controller = stopped.clone();
    tokio::spawn(async move {
        let _ = controller
            .run(reconciler, async move {
                let _ = stop_controller.wait_for(|s| *s).await;
            })
            .await;
        let _ = controller_done.send(true);
    });
    tokio::spawn(async move {
        let _ = member
            .run(async move {
                let _ = controller_stopped.wait_for(|s| *s).await;
            })
            .await;
    });
    stop
}

async fn labels(api: &Api<ConfigMap>) -> BTreeMap<String, String> {
    api.list(&Default::default())
        .await
        .map(|list| {
            list.items
                .iter()
                .map(|cm| {
                    let name = cm.metadata.name.clone().unwrap_or_default();
                    let owner = cm
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(LABEL))
                        .cloned()
                        .unwrap_or_default();
                    (format!("{NS}/{name}"), owner)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until every ConfigMap is labelled for, and was last reconciled by, its ring owner.
async fn placed(api: &Api<ConfigMap>, reconciled: &Reconciled, members: &[&str], count: usize) {
    let ring = HashRing::new(members.iter().copied());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let labels = labels(api).await;
        let done = labels.len() == count
            && labels.iter().all(|(key, owner)| {
                let want = ring.owner(key);
                want == Some(owner.as_str())
                    && reconciled.lock().get(key).map(String::as_str) == want
            });
        if done {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not placed on {members:?}: labels {labels:?}, reconciled {:?}",
            reconciled.lock()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_controller_places_each_object_with_its_ring_owner_and_moves_a_leavers_share() {
    let journal = Journal::new(100_000);
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(journal.layer()))
        .expect("the only subscriber");
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    for i in 0..30 {
        let cm = common::config_map(&format!("cm-{i}"), "v");
        api.create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    let reconciled = Reconciled::default();
    let mut stops: HashMap<&str, watch::Sender<bool>> = ["m1", "m2", "m3"]
        .into_iter()
        .map(|m| (m, start_member(&client, m, &reconciled)))
        .collect();
    placed(&api, &reconciled, &["m1", "m2", "m3"], 30).await;

    // m2 leaves: its share moves to the members the ring of two names, well before its lease
    // (1.5 s) could have expired.
    let left = Instant::now();
    let _ = stops.remove("m2").expect("m2").send(true);
    placed(&api, &reconciled, &["m1", "m3"], 30).await;
    let moved_after = left.elapsed();
    eprintln!("a leaver's share moved in {moved_after:?}");

    // The journal has the ring: every member, and an owner for every object.
    let snapshot = journal.snapshot();
    let shard: Vec<_> = snapshot
        .records
        .iter()
        .filter(|r| r.stage == "shard")
        .collect();
    for member in ["m1", "m2", "m3"] {
        assert!(
            shard
                .iter()
                .any(|r| r.op == "member" && r.key.as_deref() == Some(member)),
            "no member record for {member}: {shard:#?}"
        );
    }
    let owners = shard.iter().filter(|r| r.op == "owner").count();
    assert_eq!(owners, 30, "an owner record per object: {shard:#?}");
    for stop in stops.values() {
        let _ = stop.send(true);
    }
}
