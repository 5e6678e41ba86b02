//! Decoding a Pod from JSON and from protobuf: the same object, as kube-apiserver 1.37.2 sent it
//! in each encoding (`benches/fixtures/pod-kube-apiserver-1.37.2.{json,pb}`: the Pod of
//! `shared/server_pod.rs` created with kubectl and given its status, so with two managedFields
//! entries), decoded into k8s-openapi's `Pod` with managedFields kept and dropped; and a list of
//! 2,000 of them through each streaming list decoder, fed in 16 KiB chunks as off a socket.
//!
//! `cargo bench -p ferrokube-client --bench protobuf_decode`; time per Pod from each line (the list lines: divide by
//! 2,000, or read the `thrpt` in elements/s).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ferrokube_client::api::ListDecoder as JsonListDecoder;
use ferrokube_client::protobuf::{Envelope, ListDecoder as ProtobufListDecoder};
use ferrokube_core::ManagedFields;
use k8s_openapi::api::core::v1::Pod;

const JSON: &[u8] = include_bytes!("../../benches/fixtures/pod-kube-apiserver-1.37.2.json");
const PROTOBUF: &[u8] = include_bytes!("../../benches/fixtures/pod-kube-apiserver-1.37.2.pb");
const ITEMS: usize = 2_000;
const CHUNK: usize = 16 << 10;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn len_field(out: &mut Vec<u8>, number: u64, bytes: &[u8]) {
    varint(out, number << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// `ITEMS` copies of the Pod as a PodList body in each encoding.
fn lists() -> (Vec<u8>, Vec<u8>) {
    let mut json =
        br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":["#
            .to_vec();
    for i in 0..ITEMS {
        if i > 0 {
            json.push(b',');
        }
        json.extend_from_slice(JSON);
    }
    json.extend_from_slice(b"]}");
    let raw = Envelope::read(PROTOBUF).expect("an enveloped Pod").raw;
    let mut list = Vec::new();
    let mut list_meta = Vec::new();
    len_field(&mut list_meta, 2, b"1");
    len_field(&mut list, 1, &list_meta);
    for _ in 0..ITEMS {
        len_field(&mut list, 2, raw);
    }
    let mut type_meta = Vec::new();
    len_field(&mut type_meta, 1, b"v1");
    len_field(&mut type_meta, 2, b"PodList");
    let mut protobuf = b"k8s\0".to_vec();
    len_field(&mut protobuf, 1, &type_meta);
    len_field(&mut protobuf, 2, &list);
    (json, protobuf)
}

fn bench(c: &mut Criterion) {
    // The two encodings are the same Pod.
    let from_json: Pod = serde_json::from_slice(JSON).expect("JSON Pod");
    let from_protobuf: Pod = ferrokube_client::protobuf::from_slice(PROTOBUF, ManagedFields::Keep)
        .expect("protobuf Pod");
    assert_eq!(from_json, from_protobuf);
    eprintln!(
        "one Pod: {} bytes of JSON, {} of protobuf",
        JSON.len(),
        PROTOBUF.len()
    );

    let mut group = c.benchmark_group("protobuf_decode/pod");
    group.throughput(Throughput::Elements(1));
    group.bench_function("json, managedFields kept", |b| {
        b.iter(|| black_box(serde_json::from_slice::<Pod>(black_box(JSON)).expect("pod")))
    });
    group.bench_function("json, managedFields dropped", |b| {
        b.iter(|| {
            black_box(
                ferrokube_client::api::decode::from_slice::<Pod>(
                    black_box(JSON),
                    ManagedFields::Drop,
                )
                .expect("pod"),
            )
        })
    });
    group.bench_function("protobuf, managedFields kept", |b| {
        b.iter(|| {
            black_box(
                ferrokube_client::protobuf::from_slice::<Pod>(
                    black_box(PROTOBUF),
                    ManagedFields::Keep,
                )
                .expect("pod"),
            )
        })
    });
    group.bench_function("protobuf, managedFields dropped", |b| {
        b.iter(|| {
            black_box(
                ferrokube_client::protobuf::from_slice::<Pod>(
                    black_box(PROTOBUF),
                    ManagedFields::Drop,
                )
                .expect("pod"),
            )
        })
    });
    group.finish();

    let (json_list, protobuf_list) = lists();
    eprintln!(
        "a list of {ITEMS}: {} bytes of JSON, {} of protobuf",
        json_list.len(),
        protobuf_list.len()
    );
    let mut group = c.benchmark_group("protobuf_decode/list");
    group.throughput(Throughput::Elements(ITEMS as u64));
    group.sample_size(20);
    for managed_fields in [ManagedFields::Keep, ManagedFields::Drop] {
        let name = match managed_fields {
            ManagedFields::Keep => "kept",
            ManagedFields::Drop => "dropped",
        };
        group.bench_function(format!("json list, managedFields {name}"), |b| {
            b.iter(|| {
                let mut decoder =
                    JsonListDecoder::new(|pod: Pod| pod).managed_fields(managed_fields);
                for chunk in json_list.chunks(CHUNK) {
                    decoder.push(chunk).expect("chunk");
                }
                assert_eq!(decoder.finish().expect("list").items.len(), ITEMS);
            })
        });
        group.bench_function(format!("protobuf list, managedFields {name}"), |b| {
            b.iter(|| {
                let mut decoder =
                    ProtobufListDecoder::new(|pod: Pod| pod).managed_fields(managed_fields);
                for chunk in protobuf_list.chunks(CHUNK) {
                    decoder.push(chunk).expect("chunk");
                }
                assert_eq!(decoder.finish().expect("list").items.len(), ITEMS);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
