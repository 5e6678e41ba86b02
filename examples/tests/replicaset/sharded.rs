//! The sample ReplicaSet controller sharded through the `Manager` (`Running::start_with` with
//! `.shard(member)`, which adds it by `Manager::add_sharded_controller`), two members in this
//! process on the embedded server, in both modes:
//!
//! - **server-side** (the embedded server's `shardSelector`, as kube-apiserver 1.37 with
//!   `ShardedListAndWatch`): member `a` runs alone and converges every ReplicaSet; `b` joins;
//!   once both Leases show the ring {a, b} adopted, every ReplicaSet is scaled up, and each pod is
//!   then created by the member whose hash ranges hold its namespace, and no ReplicaSet was ever
//!   labelled by an assigner.
//! - **labels** (the server's selector off): the assigner labels every ReplicaSet for a member.
//!
//! In both, every ReplicaSet ends with exactly its replicas in pods (no member created a pod
//! another had created).

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use ferrokube::api::{ListParams, Patch, PatchParams, PostParams};
use ferrokube::apiserver::{ApiServer, RunningServer};
use ferrokube::leader::Timings;
use ferrokube::shard::{HashRing, Marks, ShardMember};
use ferrokube::{Api, Client, Config};
use ferrokube_examples::replicaset::controller::{ControllerOptions, Running};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use serde_json::json;

const RING: &str = "rs";
const LEASES: &str = "shard-leases";
const TIMINGS: Timings = Timings {
    lease_duration: Duration::from_millis(3000),
    renew_deadline: Duration::from_millis(2000),
    retry_period: Duration::from_millis(300),
};

fn config(server: &RunningServer, agent: &str) -> Config {
    let mut config = Config::new(server.url().parse().expect("server url"));
    config.qps = None;
    config.user_agent = Some(agent.to_string());
    config
}

/// Namespaces such that each of `a` and `b` owns at least two in the ring {a, b}.
fn namespaces(run: &str) -> Vec<String> {
    let ring = HashRing::new(["a", "b"]);
    let mut names = Vec::new();
    for i in 0..200 {
        let owned = |m: &str| {
            names
                .iter()
                .filter(|ns: &&String| ring.owner_of_value(ns) == Some(m))
                .count()
        };
        if names.len() >= 6 && owned("a") >= 2 && owned("b") >= 2 {
            break;
        }
        names.push(format!("r{i}-{run}"));
    }
    names
}

async fn member(server: &RunningServer, identity: &str) -> Running {
    let agent = format!("ferrokube-replicaset/{identity}");
    let member = ShardMember::builder(
        Client::new(config(server, &agent)).expect("client"),
        LEASES,
        RING,
    )
    .identity(identity)
    .timings(TIMINGS)
    .build()
    .expect("member");
    Running::start_with(
        config(server, &agent),
        ControllerOptions::default(),
        |manager| manager.shard(member),
        std::future::pending(),
    )
    .await
    .expect("the member starts")
}

async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "not within 90 s: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether every ReplicaSet in `namespaces` has exactly `replicas` pods and says so.
async fn converged(client: &Client, namespaces: &[String], replicas: usize) -> bool {
    for ns in namespaces {
        let pods = Api::<Pod>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await;
        let rs = Api::<ReplicaSet>::namespaced(client.clone(), ns)
            .get("web")
            .await;
        let (Ok(pods), Ok(rs)) = (pods, rs) else {
            return false;
        };
        let live = pods
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .count();
        let status = rs.status.as_ref().map_or(0, |s| s.replicas);
        if live != replicas || status != replicas as i32 {
            return false;
        }
    }
    true
}

async fn setup(server: &RunningServer, names: &[String], replicas: i32) -> Client {
    let client = Client::new(config(server, "test")).expect("client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in names.iter().map(String::as_str).chain([LEASES]) {
        let namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).expect("ns");
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .expect("namespace");
    }
    for ns in names {
        let mut rs = ferrokube_testkit::replica_set("web", replicas, 0);
        rs.metadata.namespace = Some(ns.clone());
        Api::<ReplicaSet>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &rs)
            .await
            .expect("ReplicaSet");
    }
    client
}

/// The ring each member's Lease says it adopted.
async fn adopted(client: &Client) -> BTreeMap<String, String> {
    let marks = Marks::new(RING).expect("marks");
    let leases = Api::<Lease>::namespaced(client.clone(), LEASES)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    leases
        .iter()
        .filter_map(|lease| {
            let member = marks.member_of_lease(lease.metadata.name.as_deref()?)?;
            let ring = lease
                .metadata
                .annotations
                .as_ref()?
                .get(marks.adopted_annotation())?;
            Some((member.to_string(), ring.clone()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_replicaset_sample_shards_through_the_manager_by_server_side_ranges() {
    let server = ApiServer::new()
        .audit(true)
        .start()
        .await
        .expect("server starts");
    let names = namespaces(&format!(
        "{:04x}",
        ferrokube::core::random::range_u64(0, 1 << 16)
    ));
    let client = setup(&server, &names, 2).await;
    let a = member(&server, "a").await;
    eventually("a alone converges every ReplicaSet", || async {
        converged(&client, &names, 2).await.then_some(())
    })
    .await;
    let b = member(&server, "b").await;
    eventually("both adopt the ring {a, b}", || async {
        let adopted = adopted(&client).await;
        (adopted.get("a").map(String::as_str) == Some("a,b")
            && adopted.get("b").map(String::as_str) == Some("a,b"))
        .then_some(())
    })
    .await;
    // The fence: a member acts on its ranges only once no peer claims them; b may still be
    // fencing. Each pod created from now on must come from its namespace's owner.
    let scaled = SystemTime::now();
    for ns in &names {
        Api::<ReplicaSet>::namespaced(client.clone(), ns)
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": 4}})),
            )
            .await
            .expect("scale");
    }
    eventually("both members converge every ReplicaSet at 4", || async {
        converged(&client, &names, 4).await.then_some(())
    })
    .await;
    let ring = HashRing::new(["a", "b"]);
    let mut creates: BTreeMap<String, usize> = BTreeMap::new();
    for entry in server.audit_log().entries() {
        if entry.method != "POST" || entry.received < scaled || !entry.path.ends_with("/pods") {
            continue;
        }
        let ns = entry.path.split('/').nth(4).unwrap_or_default();
        let owner = ring.owner_of_value(ns).unwrap_or_default();
        assert_eq!(
            entry.user_agent,
            format!("ferrokube-replicaset/{owner}"),
            "a pod of {ns} created by another member than its owner {owner}"
        );
        *creates.entry(owner.to_string()).or_default() += 1;
    }
    assert!(
        creates.get("a").is_some_and(|n| *n >= 2) && creates.get("b").is_some_and(|n| *n >= 2),
        "both members created pods in their own namespaces: {creates:?}"
    );
    let marks = Marks::new(RING).expect("marks");
    for ns in &names {
        let rs = Api::<ReplicaSet>::namespaced(client.clone(), ns)
            .get("web")
            .await
            .expect("rs");
        let labels = rs.metadata.labels.unwrap_or_default();
        assert!(
            !labels.contains_key(marks.owner_label()),
            "no assigner in the server-side mode, yet {ns}/web is labelled: {labels:?}"
        );
    }
    a.stop().await.expect("a stops");
    b.stop().await.expect("b stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_replicaset_sample_falls_back_to_labels_without_the_selector() {
    let server = ApiServer::new()
        .sharded_list_and_watch(false)
        .start()
        .await
        .expect("server starts");
    let names = namespaces(&format!(
        "{:04x}",
        ferrokube::core::random::range_u64(0, 1 << 16)
    ));
    let client = setup(&server, &names, 3).await;
    let (a, b) = (member(&server, "a").await, member(&server, "b").await);
    let marks = Marks::new(RING).expect("marks");
    eventually("every ReplicaSet labelled and converged", || async {
        let mut members = Vec::new();
        for ns in &names {
            let rs = Api::<ReplicaSet>::namespaced(client.clone(), ns)
                .get("web")
                .await
                .ok()?;
            members.push(rs.metadata.labels?.get(marks.owner_label())?.clone());
        }
        converged(&client, &names, 3).await.then_some(members)
    })
    .await;
    a.stop().await.expect("a stops");
    b.stop().await.expect("b stops");
}
