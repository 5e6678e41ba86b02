//! What `Compact<Pod>` costs and saves, per object: the JSON it keeps, the work to build one as an
//! object arrives, and the work to read the whole object back (`decode`), beside the typed cache's
//! read (an `Arc` clone) and the typed decode every informer does on arrival anyway.
//!
//! The Pod is `shared/server_pod.rs` (two containers, env, resources, owner, status) plus the
//! `managedFields` kube-apiserver 1.20 writes for such a Pod (two managers).
//!
//! `cargo bench --bench compact`; sizes are printed first.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use ferrokube::Object;
use ferrokube::core::drop_managed_fields;
use ferrokube::informer::Compact;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

#[path = "shared/server_pod.rs"]
mod server_pod;

/// `server_pod::pod(7)` with the managedFields of one create (kube-controller-manager) and one
/// status update (kubelet).
fn pod_json() -> Vec<u8> {
    let mut pod = server_pod::pod(7);
    let container = json!({"f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:ports": {},
        "f:resources": {"f:limits": {".": {}, "f:memory": {}}, "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}},
        "f:env": {}, "f:terminationMessagePath": {}});
    pod["metadata"]["managedFields"] = json!([
        {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
         "time": "2026-11-22T10:00:00Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}, "f:tier": {}},
                                     "f:ownerReferences": {".": {}, "k:{\"uid\":\"11111111-2222-4333-8444-555555555555\"}": {}}},
                      "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": container.clone(),
                                                  "k:{\"name\":\"sidecar\"}": container},
                                 "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {},
                                 "f:serviceAccountName": {}, "f:terminationGracePeriodSeconds": {}}}},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
         "time": "2026-11-22T10:00:05Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:lastTransitionTime": {},
                                                    "f:status": {}, "f:type": {}}},
                                   "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {},
                                   "f:startTime": {}}}}
    ]);
    serde_json::to_vec(&pod).expect("pod encodes")
}

fn bench(c: &mut Criterion) {
    let bytes = pod_json();
    let typed: Pod = serde_json::from_slice(&bytes).expect("pod decodes");
    let compact = Compact::new(typed.clone()).expect("compacts");
    let stripped = drop_managed_fields(compact.clone());
    eprintln!(
        "pod JSON from the server: {} bytes; Compact<Pod> keeps {} bytes of JSON ({} without managedFields) besides its typed metadata",
        bytes.len(),
        compact.json_len(),
        stripped.json_len()
    );

    let mut group = c.benchmark_group("compact");
    group.bench_function(
        "arrival: serde_json::from_slice::<Pod> (every informer)",
        |b| {
            b.iter(|| black_box(serde_json::from_slice::<Pod>(black_box(&bytes)).expect("decodes")))
        },
    );
    group.bench_function("arrival: Compact::new (extra, compact only)", |b| {
        b.iter(|| black_box(Compact::new(black_box(typed.clone())).expect("compacts")))
    });
    let shared = Arc::new(typed.clone());
    group.bench_function("read: Arc<Pod> clone (typed cache)", |b| {
        b.iter(|| black_box(Arc::clone(black_box(&shared))))
    });
    group.bench_function("read: Compact::decode, with managedFields", |b| {
        b.iter(|| black_box(black_box(&compact).decode().expect("decodes")))
    });
    group.bench_function("read: Compact::decode, managedFields dropped", |b| {
        b.iter(|| black_box(black_box(&stripped).decode().expect("decodes")))
    });
    group.bench_function("read: Compact::meta (labels, owners)", |b| {
        b.iter(|| black_box(black_box(&stripped).meta().labels.as_ref().map(|l| l.len())))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
