//! Create and update throughput through the client against the embedded server, JSON bodies and
//! answers beside protobuf ones (core's encoder on the client, the server decoding protobuf and
//! answering it), and the client-side cost of writing one body each way.
//!
//! One process, one server, the same Pods (`shared/server_pod.rs`, status left out), one write at
//! a time; the two encodings alternate round by round (JSON, protobuf, JSON, ...) so that a change
//! in the machine's load falls on both. Prints one JSON line per round and measure, and the
//! `uptime` load average before and after: the machine may be shared.
//!
//! `cargo bench --bench write_throughput [-- ROUNDS PODS]` (defaults 3 and 300).

use std::time::Instant;

use ferrokube::Api;
use ferrokube::api::{DeleteParams, PostParams};
use ferrokube::apiserver::ApiServer;
use ferrokube::testing::ServerClient;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

#[path = "shared/server_pod.rs"]
mod server_pod;

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

fn pods(count: usize) -> Vec<Pod> {
    (0..count)
        .map(|i| {
            let mut value = server_pod::pod(i);
            if let Some(object) = value.as_object_mut() {
                object.remove("status");
            }
            value["metadata"] = json!({"name": format!("bench-{i}"), "labels": {"app": "bench"}});
            serde_json::from_value(value).expect("a Pod")
        })
        .collect()
}

fn line(bench: &str, mode: &str, round: usize, count: usize, seconds: f64) {
    println!(
        "{}",
        json!({"bench": bench, "mode": mode, "round": round, "n": count,
               "seconds": seconds, "per_second": count as f64 / seconds, "load": load()})
    );
}

/// The client's cost of one body: serde_json's text, or core's protobuf, of the same typed Pod.
fn encode_cost(pods: &[Pod], round: usize) {
    let repeat = 20;
    let started = Instant::now();
    let mut bytes = 0;
    for _ in 0..repeat {
        for pod in pods {
            bytes += serde_json::to_vec(pod).expect("json").len();
        }
    }
    line(
        "encode_body_json",
        "json",
        round,
        pods.len() * repeat,
        started.elapsed().as_secs_f64(),
    );
    let started = Instant::now();
    let mut protobuf_bytes = 0;
    for _ in 0..repeat {
        for pod in pods {
            protobuf_bytes += ferrokube::core::protobuf::encode(pod, "v1", "Pod")
                .expect("protobuf")
                .len();
        }
    }
    line(
        "encode_body_protobuf",
        "protobuf",
        round,
        pods.len() * repeat,
        started.elapsed().as_secs_f64(),
    );
    println!(
        "{}",
        json!({"bench": "body_bytes", "json": bytes / repeat / pods.len().max(1),
                          "protobuf": protobuf_bytes / repeat / pods.len().max(1)})
    );
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with('-'));
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let count: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(300);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        println!("{}", json!({"bench": "start", "load": load()}));
        let server = ApiServer::new().start().await.expect("server starts");
        let config = server.config().expect("config");
        let client = ferrokube::Client::new(config).expect("client");
        let protobuf: Api<Pod> = Api::namespaced(client.clone(), "default");
        let json_only = protobuf.clone().with_protobuf(false);
        assert!(protobuf.writes_protobuf() && !json_only.writes_protobuf());
        let objects = pods(count);
        let post = PostParams::default();
        for round in 0..rounds {
            encode_cost(&objects, round);
            for (mode, api) in [("json", &json_only), ("protobuf", &protobuf)] {
                let started = Instant::now();
                let mut created = Vec::with_capacity(count);
                for pod in &objects {
                    created.push(api.create(&post, pod).await.expect("create"));
                }
                line(
                    "create",
                    mode,
                    round,
                    count,
                    started.elapsed().as_secs_f64(),
                );
                let started = Instant::now();
                for mut pod in created {
                    pod.metadata
                        .labels
                        .get_or_insert_default()
                        .insert("round".into(), round.to_string());
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    api.replace(&name, &post, &pod).await.expect("replace");
                }
                line(
                    "update",
                    mode,
                    round,
                    count,
                    started.elapsed().as_secs_f64(),
                );
                api.delete_collection(&DeleteParams::default(), &Default::default())
                    .await
                    .expect("delete");
            }
        }
        println!("{}", json!({"bench": "end", "load": load()}));
    });
}
