//! Where the bytes of a typed cache go: an allocation census of decoded Pods.
//!
//! A typed informer caches one decoded object per Pod, and its memory per object is what the heap
//! holds for that object. This program decodes the Pods of a list the real kube-apiserver sent
//! (`benches/informer/pods-1.37.2.json`: 20 Pods of the informer benchmark, as kube-apiserver
//! 1.37.2 listed them, managedFields included) many times over, keeps every decoded object alive,
//! and counts, with a counting global allocator, what stays allocated per object:
//!
//! ```text
//!   JSON bytes ──serde──▶ Pod (k8s-openapi)            ┐
//!              ──serde──▶ Pod, managedFields dropped    │ each kept alive, × --copies
//!              ──serde──▶ serde_json::Value            │ ──▶ live allocations per object:
//!              ──serde──▶ Compact<Pod>                  ┘     count, bytes asked for, bytes malloc
//!                                                             holds (glibc chunk sizes), top sizes
//! ```
//!
//! "Bytes malloc holds" rounds each request up the way glibc's malloc does on x86-64 (8 bytes of
//! header, 16-byte granularity, 32 at least), so it is what the allocations cost in RSS before
//! fragmentation and per-thread arenas. The largest sizes are listed with their share: on a typed
//! Pod they are `BTreeMap` leaf nodes (k8s-openapi's maps and `serde_json::Map`), each allocated
//! for eleven entries whatever it holds.
//!
//! ```text
//! cargo run --release -p ferrokube-examples --bin typed_bytes -- [--pods FILE] [--copies 500] [--json]
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};

use ferrokube::core::ManagedFields;
use ferrokube::informer::Compact;
use ferrokube::protobuf;
use k8s_openapi::api::core::v1::Pod;

/// Sizes up to this are counted one by one; larger ones share the last slot.
const EXACT_SIZES: usize = 4096;

/// Live allocations by requested size (the last slot: every larger size), and their bytes.
struct Census {
    count: [AtomicI64; EXACT_SIZES + 1],
    bytes: [AtomicI64; EXACT_SIZES + 1],
}

impl Census {
    const fn new() -> Census {
        Census {
            count: [const { AtomicI64::new(0) }; EXACT_SIZES + 1],
            bytes: [const { AtomicI64::new(0) }; EXACT_SIZES + 1],
        }
    }

    fn record(&self, size: usize, sign: i64) {
        let slot = size.min(EXACT_SIZES);
        self.count[slot].fetch_add(sign, Ordering::Relaxed);
        self.bytes[slot].fetch_add(sign * size as i64, Ordering::Relaxed);
    }

    /// (size slot, live count, live bytes) now.
    fn snapshot(&self) -> Vec<(usize, i64, i64)> {
        (0..=EXACT_SIZES)
            .map(|slot| {
                (
                    slot,
                    self.count[slot].load(Ordering::Relaxed),
                    self.bytes[slot].load(Ordering::Relaxed),
                )
            })
            .collect()
    }
}

/// The system allocator, counting every live allocation by size.
struct Counting;

static CENSUS: Census = Census::new();

// SAFETY: every call is passed on unchanged to the system allocator; the census only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        CENSUS.record(layout.size(), 1);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CENSUS.record(layout.size(), -1);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        CENSUS.record(layout.size(), 1);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        CENSUS.record(layout.size(), -1);
        CENSUS.record(new_size, 1);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What glibc's malloc takes for a request of `size` bytes on x86-64: the size plus its 8-byte
/// header, rounded up to 16, at least 32.
fn chunk(size: usize) -> usize {
    ((size + 8 + 15) & !15).max(32)
}

#[derive(clap::Parser, Debug)]
#[command(
    name = "typed_bytes",
    about = "Allocation census of decoded Pods: what a typed cache holds per object, and where."
)]
struct Cli {
    /// A PodList as the API server sent it.
    #[arg(
        long,
        value_name = "FILE",
        default_value = "benches/informer/pods-1.37.2.json"
    )]
    pods: std::path::PathBuf,
    /// How many times each Pod of the list is decoded (all kept alive).
    #[arg(long, value_name = "N", default_value_t = 500)]
    copies: usize,
    /// Print one JSON line per variant instead of the table.
    #[arg(long)]
    json: bool,
}

/// Live allocations one variant added, per object.
struct PerObject {
    variant: &'static str,
    allocations: f64,
    requested: f64,
    malloc_bytes: f64,
    /// (requested size, live bytes per object), largest share first.
    top: Vec<(usize, f64)>,
}

fn measure<T>(
    variant: &'static str,
    items: &[Vec<u8>],
    copies: usize,
    decode: impl Fn(&[u8]) -> Result<T, String>,
) -> Result<(PerObject, Vec<T>), String> {
    // The Vec that keeps the objects is the harness's, not the objects': allocated before counting.
    let mut kept = Vec::with_capacity(items.len() * copies);
    let before = CENSUS.snapshot();
    for _ in 0..copies {
        for item in items {
            kept.push(decode(item)?);
        }
    }
    let after = CENSUS.snapshot();
    let objects = kept.len() as f64;
    let mut allocations = 0i64;
    let mut requested = 0i64;
    let mut malloc = 0i64;
    let mut by_size = BTreeMap::new();
    for ((slot, count, bytes), (_, count_before, bytes_before)) in after.iter().zip(before.iter()) {
        let count = count - count_before;
        let bytes = bytes - bytes_before;
        if count == 0 {
            continue;
        }
        allocations += count;
        requested += bytes;
        malloc += if *slot < EXACT_SIZES {
            count * chunk(*slot) as i64
        } else {
            bytes + count * 16
        };
        by_size.insert(*slot, bytes);
    }
    let mut top: Vec<(usize, f64)> = by_size
        .into_iter()
        .map(|(size, bytes)| (size, bytes as f64 / objects))
        .collect();
    top.sort_by(|a, b| b.1.total_cmp(&a.1));
    top.truncate(6);
    Ok((
        PerObject {
            variant,
            allocations: allocations as f64 / objects,
            requested: requested as f64 / objects,
            malloc_bytes: malloc as f64 / objects,
            top,
        },
        kept,
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = <Cli as clap::Parser>::parse();
    let list: serde_json::Value = serde_json::from_slice(&std::fs::read(&cli.pods)?)?;
    let items: Vec<Vec<u8>> = list["items"]
        .as_array()
        .ok_or("the file holds no PodList (no items)")?
        .iter()
        .map(serde_json::to_vec)
        .collect::<Result<_, _>>()?;
    if items.is_empty() {
        return Err("the PodList is empty".into());
    }
    let json_len = items.iter().map(Vec::len).sum::<usize>() as f64 / items.len() as f64;
    let copies = cli.copies.max(1);
    let decode_pod = |bytes: &[u8]| serde_json::from_slice::<Pod>(bytes).map_err(|e| e.to_string());
    let mut results = Vec::new();
    // Each variant's objects are dropped before the next is measured.
    {
        let (r, _kept) = measure("Pod", &items, copies, decode_pod)?;
        results.push(r);
    }
    {
        let (r, _kept) = measure("Pod, managedFields dropped", &items, copies, |bytes| {
            let mut pod = decode_pod(bytes)?;
            pod.metadata.managed_fields = None;
            Ok(pod)
        })?;
        results.push(r);
    }
    // The same Pods as kube-apiserver sends them to a client that asks for protobuf (the
    // informers' default for built-in kinds), decoded as the informers decode them.
    let protobuf_items: Vec<Vec<u8>> = items
        .iter()
        .map(|json| {
            let pod: serde_json::Value = serde_json::from_slice(json)?;
            ferrokube::core::protobuf::encode(&pod, "v1", "Pod").map_err(|e| e.to_string().into())
        })
        .collect::<Result<_, Box<dyn std::error::Error>>>()?;
    {
        let (r, _kept) = measure("Pod from protobuf", &protobuf_items, copies, |bytes| {
            protobuf::from_slice::<Pod>(bytes, ManagedFields::Keep).map_err(|e| e.to_string())
        })?;
        results.push(r);
    }
    {
        let (r, _kept) = measure(
            "Pod from protobuf, managedFields skipped (informer default)",
            &protobuf_items,
            copies,
            |bytes| {
                protobuf::from_slice::<Pod>(bytes, ManagedFields::Drop).map_err(|e| e.to_string())
            },
        )?;
        results.push(r);
    }
    {
        let (r, _kept) = measure(
            "Pod from JSON, managedFields skipped (informer default)",
            &items,
            copies,
            |bytes| {
                ferrokube::api::decode::from_slice::<Pod>(bytes, ManagedFields::Drop)
                    .map_err(|e| e.to_string())
            },
        )?;
        results.push(r);
    }
    {
        let (r, _kept) = measure("serde_json::Value", &items, copies, |bytes| {
            serde_json::from_slice::<serde_json::Value>(bytes).map_err(|e| e.to_string())
        })?;
        results.push(r);
    }
    {
        let (r, _kept) = measure("Compact<Pod>", &items, copies, |bytes| {
            Compact::new(decode_pod(bytes)?).map_err(|e| e.to_string())
        })?;
        results.push(r);
    }
    if cli.json {
        for r in &results {
            println!(
                "{}",
                serde_json::json!({
                    "variant": r.variant,
                    "objects": items.len() * copies,
                    "json_bytes": json_len,
                    "allocations": r.allocations,
                    "requested_bytes": r.requested,
                    "malloc_bytes": r.malloc_bytes,
                    "top_sizes": r.top.iter().map(|(size, bytes)| serde_json::json!({
                        "size": size, "bytes_per_object": bytes})).collect::<Vec<_>>(),
                })
            );
        }
        return Ok(());
    }
    println!(
        "{} Pods of {} ({:.0} JSON bytes each), each decoded {copies} times, all kept alive; per object:",
        items.len(),
        cli.pods.display(),
        json_len
    );
    println!(
        "| variant | live allocations | bytes asked for | bytes malloc holds | largest sizes (bytes per object) |"
    );
    println!("|---|---|---|---|---|");
    for r in &results {
        let top: Vec<String> = r
            .top
            .iter()
            .map(|(size, bytes)| format!("{size} B: {bytes:.0}"))
            .collect();
        println!(
            "| {} | {:.1} | {:.0} | {:.0} | {} |",
            r.variant,
            r.allocations,
            r.requested,
            r.malloc_bytes,
            top.join(", ")
        );
    }
    Ok(())
}
