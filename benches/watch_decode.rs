//! Watch decoding speed: a stream of realistic Pod events, split into 16 KiB chunks as they come off
//! the socket, through `LineDecoder` + `decode_event::<Pod>` — beside the floor, a plain
//! `serde_json::from_slice::<Pod>` over each event's object bytes (no framing, no event envelope).
//!
//! `cargo bench --bench watch_decode`; events/s from the `thrpt` line, MB/s = events/s × the average
//! event size printed first.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ferrokube::watch::{LineDecoder, WatchEvent, decode_event};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

const EVENTS: usize = 2_000;
const CHUNK: usize = 16 << 10;

/// A Pod as a controller sees it: two containers with env and resources, labels, an owner, status.
fn pod(i: usize) -> serde_json::Value {
    let container = |name: &str| {
        json!({
            "name": name, "image": format!("registry.example.com/team/{name}:1.{i}"),
            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
            "env": [{"name": "MODE", "value": "production"}, {"name": "POD_NAME",
                     "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"
        })
    };
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": format!("web-7d9f8b6c5d-{i:05}"), "namespace": "shop",
            "uid": format!("6f1c2a4e-0000-4000-8000-{i:012}"), "resourceVersion": format!("{}", 100_000 + i),
            "creationTimestamp": "2026-11-22T10:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "7d9f8b6c5d", "tier": "frontend"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8b6c5d",
                                  "uid": "11111111-2222-4333-8444-555555555555", "controller": true,
                                  "blockOwnerDeletion": true}]
        },
        "spec": {"containers": [container("app"), container("sidecar")], "nodeName": format!("node-{}", i % 50),
                 "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                 "serviceAccountName": "default", "schedulerName": "default-scheduler"},
        "status": {"phase": "Running", "podIP": format!("10.1.{}.{}", i / 250, i % 250), "hostIP": "10.0.0.7",
                   "startTime": "2026-11-22T10:00:01Z",
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-22T10:00:05Z"}],
                   "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "image": "x", "imageID": "y",
                                          "state": {"running": {"startedAt": "2026-11-22T10:00:03Z"}}}]}
    })
}

fn bench(c: &mut Criterion) {
    let objects: Vec<Vec<u8>> = (0..EVENTS)
        .map(|i| serde_json::to_vec(&pod(i)).expect("pod encodes"))
        .collect();
    let mut stream = Vec::new();
    for object in &objects {
        stream.extend_from_slice(br#"{"type":"MODIFIED","object":"#);
        stream.extend_from_slice(object);
        stream.extend_from_slice(b"}\n");
    }
    eprintln!(
        "{EVENTS} events, {} bytes, {} bytes per event",
        stream.len(),
        stream.len() / EVENTS
    );

    let mut group = c.benchmark_group("watch_decode");
    group.throughput(Throughput::Elements(EVENTS as u64));
    group.bench_function(
        "ferrokube LineDecoder + decode_event (16 KiB chunks)",
        |b| {
            b.iter(|| {
                let mut decoder = LineDecoder::new();
                let mut count = 0;
                for chunk in stream.chunks(CHUNK) {
                    decoder.push(chunk);
                    while let Some(line) = decoder.next_line() {
                        if let Ok(WatchEvent::Modified(pod)) = decode_event::<Pod>(&line) {
                            black_box(&pod);
                            count += 1;
                        }
                    }
                }
                assert_eq!(count, EVENTS);
            })
        },
    );
    group.bench_function("floor: serde_json::from_slice::<Pod> per object", |b| {
        b.iter(|| {
            for object in &objects {
                let pod: Pod = serde_json::from_slice(object).expect("decodes");
                black_box(&pod);
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
