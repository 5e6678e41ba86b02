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

#[path = "shared/server_pod.rs"]
mod server_pod;
use server_pod::pod;

const EVENTS: usize = 2_000;
const CHUNK: usize = 16 << 10;

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
