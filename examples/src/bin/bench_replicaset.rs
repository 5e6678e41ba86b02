//! The ReplicaSet controller scale benchmark's driver: 500 ReplicaSets × 10 replicas on a real cluster.
//!
//! It does not run a controller; `scripts/bench-replicaset.sh` starts ours or kube-controller-manager
//! beside it (never both) and runs this once per controller, interleaved. In a fresh namespace:
//!
//! 1. **create**: N ReplicaSets of R replicas (concurrently); done when every one reports
//!    `status.replicas == R` for its current generation;
//! 2. **scale down**: every ReplicaSet to R/2; done likewise;
//! 3. **delete 20%**: a seeded random fifth of the pods; done when every ReplicaSet has R/2 live pods
//!    again and says so in its status;
//! 4. **flap** (with `--flap K`, K > 0): the first K ReplicaSets' replicas flipped between 0 and R
//!    every `--flap-ms` milliseconds, `--flips` times, then settled at R; timed from the settling
//!    write until every ReplicaSet reports its count and the namespace holds exactly that many
//!    live pods. Its line counts the pods the controller created (`POST pods`) and deleted
//!    (`DELETE pods`) while the replicas flapped and settled: a controller that acts on a stale
//!    view of its own pods creates or deletes more than the flips need.
//!
//! For each phase it prints the time taken and the API requests the *controller* made, from
//! kube-apiserver's `/metrics` (`apiserver_request_total`, pods/replicasets/events only) before and
//! after, minus the requests this driver made itself (it counts its own), by verb, and the ones
//! answered 409 Conflict again under `409 <verb resource>`. Then it deletes what it
//! created.
//!
//! ```text
//! cargo run --release -p ferrokube-examples --bin bench_replicaset -- --label ours
//!     [--replicasets 500] [--replicas 10] [--flap 20 --flips 20 --flap-ms 300]
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrokube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use ferrokube::client::Call;
use ferrokube::{Api, Client, Config};
use futures_util::StreamExt;
use futures_util::stream;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use parking_lot::Mutex;
use serde_json::json;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Requests by `VERB resource[/subresource]`.
type Counts = BTreeMap<String, f64>;

/// The prefix of the keys that count 409 Conflict answers (`409 PUT replicasets/status`); those
/// requests are also in their verb's own key.
const CONFLICTS: &str = "409 ";

/// The requests in `counts`, without counting the 409s twice.
fn requests_in(counts: &Counts) -> f64 {
    counts
        .iter()
        .filter(|(key, _)| !key.starts_with(CONFLICTS))
        .map(|(_, value)| value)
        .sum()
}

/// The driver's own requests, to subtract from the server's counts.
#[derive(Default)]
struct Own(Mutex<Counts>);

impl Own {
    fn add(&self, key: &str, n: usize) {
        *self.0.lock().entry(key.to_string()).or_default() += n as f64;
    }
}

struct Driver {
    client: Client,
    namespace: String,
    own: Arc<Own>,
    replicasets: usize,
    replicas: i32,
    flap: Flap,
}

/// The flap phase's settings (`--flap 0`: no flap phase).
#[derive(Debug, Clone, Copy)]
struct Flap {
    /// How many ReplicaSets flap (the first ones by name).
    replicasets: usize,
    /// How many times their replicas flip.
    flips: usize,
    /// The time between two flips.
    every: Duration,
}

/// The command line.
#[derive(clap::Parser, Debug)]
#[command(
    name = "bench_replicaset",
    about = "The ReplicaSet controller scale benchmark's driver (scripts/bench-replicaset.sh starts \
             the controller beside it): create, scale down, delete 20% of the pods, on the $KUBECONFIG \
             cluster.",
    args_override_self = true
)]
struct Cli {
    /// The controller's name in the printed lines.
    #[arg(long, value_name = "NAME", default_value = "controller")]
    label: String,
    /// ReplicaSets to create.
    #[arg(long, value_name = "N", default_value_t = 500)]
    replicasets: usize,
    /// Replicas of each.
    #[arg(long, value_name = "R", default_value_t = 10)]
    replicas: i32,
    /// ReplicaSets whose replicas flap between 0 and R after the other phases (0: no flap phase).
    #[arg(long, value_name = "K", default_value_t = 0)]
    flap: usize,
    /// Flips in the flap phase.
    #[arg(long, value_name = "N", default_value_t = 20)]
    flips: usize,
    /// Milliseconds between two flips.
    #[arg(long, value_name = "MS", default_value_t = 300)]
    flap_ms: u64,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let Cli {
        label,
        replicasets,
        replicas,
        flap,
        flips,
        flap_ms,
    } = <Cli as clap::Parser>::parse();
    let mut config = Config::infer()?;
    config.qps = None;
    // The clean-up's collection delete of thousands of pods can take longer than the default
    // 30 s (it did on 2026-11-26, and the run stopped there); the driver is not what is measured.
    config.timeout = Some(Duration::from_secs(600));
    let client = Client::new(config)?;
    let created = Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"generateName": "bench-rs-"}}))?,
        )
        .await?;
    let driver = Driver {
        client,
        namespace: created.metadata.name.unwrap_or_default(),
        own: Arc::default(),
        replicasets,
        replicas,
        flap: Flap {
            replicasets: flap.min(replicasets),
            flips,
            every: Duration::from_millis(flap_ms),
        },
    };
    let result = driver.phases(&label).await;
    driver.clean_up().await?;
    result
}

impl Driver {
    fn replicaset_api(&self) -> Api<ReplicaSet> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn pod_api(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    async fn phases(&self, label: &str) -> Result<(), BoxError> {
        let half = self.replicas / 2;
        let mut phases: Vec<(&str, i32)> = vec![
            ("create", self.replicas),
            ("scale-down", half),
            ("delete-20%", half),
        ];
        if self.flap.replicasets > 0 {
            phases.push(("flap", half));
        }
        let mut total = (Duration::ZERO, 0.0);
        let first = self.scrape().await?;
        let mut own_all = Counts::new();
        for (phase, want) in phases {
            let before = self.scrape().await?;
            self.own.0.lock().clear();
            let mut started = Instant::now();
            match phase {
                "create" => self.create_all().await?,
                "scale-down" => self.scale_first(self.replicasets, half).await?,
                "flap" => started = self.flap_some().await?,
                _ => self.delete_fifth().await?,
            }
            let flapped = if phase == "flap" {
                self.flap.replicasets
            } else {
                0
            };
            // After the flap phase the flapped ReplicaSets want R and the others R/2.
            let wants = |index: usize| if index < flapped { self.replicas } else { want };
            self.wait_converged(&wants, matches!(phase, "delete-20%" | "flap"))
                .await?;
            let took = started.elapsed();
            let after = self.scrape().await?;
            for (key, value) in self.own.0.lock().iter() {
                *own_all.entry(key.clone()).or_default() += value;
            }
            let mut requests = Counts::new();
            for (key, value) in &after {
                let own = self.own.0.lock().get(key).copied().unwrap_or(0.0);
                let delta = value - before.get(key).copied().unwrap_or(0.0) - own;
                if delta.abs() > 0.5 {
                    requests.insert(key.clone(), delta);
                }
            }
            let sum = requests_in(&requests);
            total.0 += took;
            total.1 += sum;
            let detail: Vec<String> = requests.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!(
                "RESULT {label} phase={phase} seconds={:.1} requests={sum} {}",
                took.as_secs_f64(),
                detail.join(" ")
            );
        }
        println!(
            "RESULT {label} phase=total seconds={:.1} requests={}",
            total.0.as_secs_f64(),
            total.1
        );
        // Work a controller left queued (events, mostly: they wait behind the controller's other
        // requests for the same client rate limit) still counts: wait until the counts are still
        // for 6 s, then report everything since the first phase began.
        let flush = Instant::now();
        let mut last = self.scrape().await?;
        let mut still = 0;
        while still < 3 && flush.elapsed() < Duration::from_secs(600) {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let now = self.scrape().await?;
            still = if now == last { still + 1 } else { 0 };
            last = now;
        }
        let mut requests = Counts::new();
        for (key, value) in &last {
            let own = own_all.get(key).copied().unwrap_or(0.0);
            let delta = value - first.get(key).copied().unwrap_or(0.0) - own;
            if delta.abs() > 0.5 {
                requests.insert(key.clone(), delta);
            }
        }
        let detail: Vec<String> = requests.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!(
            "RESULT {label} phase=all-until-quiet flush_seconds={:.1} requests={} {}",
            flush.elapsed().as_secs_f64(),
            requests_in(&requests),
            detail.join(" ")
        );
        Ok(())
    }

    async fn create_all(&self) -> Result<(), BoxError> {
        let api = self.replicaset_api();
        let all = (0..self.replicasets)
            .map(|i| replica_set(&format!("rs-{i:04}"), self.replicas))
            .collect::<Result<Vec<_>, _>>()?;
        let results: Vec<Result<ReplicaSet, ferrokube::Error>> = stream::iter(all)
            .map(|rs| {
                let api = api.clone();
                async move { api.create(&PostParams::default(), &rs).await }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        self.own.add("POST replicasets", results.len());
        results.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(())
    }

    /// Scales the first `count` ReplicaSets (`rs-0000` on) to `replicas`.
    async fn scale_first(&self, count: usize, replicas: i32) -> Result<(), BoxError> {
        let api = self.replicaset_api();
        let patch = Patch::Merge(json!({"spec": {"replicas": replicas}}));
        let results: Vec<_> = stream::iter(0..count)
            .map(|i| {
                let (api, patch) = (api.clone(), patch.clone());
                async move {
                    api.patch(&format!("rs-{i:04}"), &PatchParams::default(), &patch)
                        .await
                }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        self.own.add("PATCH replicasets", results.len());
        results.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(())
    }

    /// Flips the first `flap.replicasets` ReplicaSets between 0 and R replicas, `flap.flips` times,
    /// `flap.every` apart, then settles them at R; returns when it settled them.
    async fn flap_some(&self) -> Result<Instant, BoxError> {
        let count = self.flap.replicasets;
        let mut next = tokio::time::Instant::now();
        for flip in 0..self.flap.flips {
            self.scale_first(count, if flip % 2 == 0 { 0 } else { self.replicas })
                .await?;
            next += self.flap.every;
            tokio::time::sleep_until(next).await;
        }
        self.scale_first(count, self.replicas).await?;
        Ok(Instant::now())
    }

    /// Deletes a seeded random fifth of the live pods.
    async fn delete_fifth(&self) -> Result<(), BoxError> {
        let pods = self.pod_api();
        self.own.add("LIST pods", 1);
        let mut names: Vec<String> = pods
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name)
            .collect();
        names.sort();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let count = names.len() / 5;
        let mut victims = Vec::with_capacity(count);
        for _ in 0..count {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let index = (seed % names.len() as u64) as usize;
            victims.push(names.swap_remove(index));
        }
        let results: Vec<_> = stream::iter(victims)
            .map(|name| {
                let pods = pods.clone();
                async move { pods.delete(&name, &DeleteParams::default()).await }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        self.own.add("DELETE pods", results.len());
        results.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(())
    }

    /// Polls until every ReplicaSet `rs-<i>` reports `wants(i)` replicas for its current generation
    /// (and, with `count_pods`, the namespace holds exactly as many live pods as they want in all).
    async fn wait_converged(
        &self,
        wants: &dyn Fn(usize) -> i32,
        count_pods: bool,
    ) -> Result<(), BoxError> {
        let want_of = |rs: &ReplicaSet| {
            let name = rs.metadata.name.as_deref().unwrap_or_default();
            name.strip_prefix("rs-")
                .and_then(|index| index.parse::<usize>().ok())
                .map(wants)
        };
        let total: usize = (0..self.replicasets)
            .map(|i| wants(i).max(0) as usize)
            .sum();
        let deadline = Instant::now() + Duration::from_secs(3600);
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            self.own.add("LIST replicasets", 1);
            let list = self.replicaset_api().list(&ListParams::default()).await?;
            let done = list.items.len() == self.replicasets
                && list.items.iter().all(|rs| {
                    let status = rs.status.clone().unwrap_or_default();
                    want_of(rs) == Some(status.replicas)
                        && status.observed_generation == rs.metadata.generation
                });
            if done && count_pods {
                self.own.add("LIST pods", 1);
                let live = self
                    .pod_api()
                    .list(&ListParams::default())
                    .await?
                    .items
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .count();
                if live == total {
                    return Ok(());
                }
            } else if done {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("not converged within an hour".into());
            }
        }
    }

    /// `apiserver_request_total` for pods, replicasets and events, by verb and resource.
    async fn scrape(&self) -> Result<Counts, BoxError> {
        let call = Call {
            request: http::Request::get("/metrics").body(Bytes::new())?,
            idempotent: true,
            streaming: false,
        };
        let body = self.client.request_bytes(call).await?;
        let text = String::from_utf8_lossy(&body);
        let mut counts = Counts::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
                continue;
            };
            let Some((labels, value)) = rest.rsplit_once("} ") else {
                continue;
            };
            let label = |name: &str| {
                labels
                    .split(',')
                    .find_map(|pair| pair.strip_prefix(&format!("{name}=\"")))
                    .map(|v| v.trim_end_matches('"').to_string())
                    .unwrap_or_default()
            };
            let resource = label("resource");
            if !matches!(resource.as_str(), "pods" | "replicasets" | "events") {
                continue;
            }
            let subresource = label("subresource");
            let mut key = format!("{} {resource}", label("verb"));
            if !subresource.is_empty() {
                key = format!("{key}/{subresource}");
            }
            let value = value.parse::<f64>().unwrap_or(0.0);
            if label("code") == "409" {
                *counts.entry(format!("{CONFLICTS}{key}")).or_default() += value;
            }
            *counts.entry(key).or_default() += value;
        }
        Ok(counts)
    }

    async fn clean_up(&self) -> Result<(), BoxError> {
        let list = ListParams::default();
        self.replicaset_api()
            .delete_collection(&DeleteParams::default(), &list)
            .await?;
        self.pod_api()
            .delete_collection(&DeleteParams::default(), &list)
            .await?;
        Ok(())
    }
}

fn replica_set(name: &str, replicas: i32) -> Result<ReplicaSet, serde_json::Error> {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "bench": "replicaset"}},
                "spec": {"containers": [{"name": "main", "image": "registry.invalid/pause:1",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]},
            },
        },
    }))
}
