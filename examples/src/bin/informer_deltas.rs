//! Watch the informer machinery work, one delta at a time.
//!
//! An informer is three parts in a row:
//!
//! ```text
//!  server ──list/watch──▶ Reflector ──records──▶ DeltaFifo ──pop──▶ (this example) store + print
//! ```
//!
//! This example wires the first two by hand (what `SharedIndexInformer` does for you) and plays the
//! processor itself: it pops each key's deltas (or a whole list, which the store takes in one step),
//! applies them to a `Store`, and prints where each one came from:
//!
//! - `list`: the first list (`Replaced` deltas),
//! - `watch`: an event on the open watch (`Added`, `Updated`, `Deleted`),
//! - `resync`: a periodic re-delivery of a cached object (`Sync`; nothing is fetched),
//! - `relist`: a list after the watch could not resume (410 Gone): `Replaced` for what exists, and a
//!   tombstone `Deleted` for what vanished while we were not watching.
//!
//! ```text
//! # a scripted in-memory server (no cluster needed):
//! cargo run -p ferrokube-examples --bin informer_deltas
//! # Pods in the KUBECONFIG cluster, until Ctrl-C:
//! cargo run -p ferrokube-examples --bin informer_deltas -- --cluster
//! ```
//!
//! The scripted server is `ferrokube::informer::fake::FakeListerWatcher`, the same seam the unit
//! tests use: it makes pods, drops the watch, and compacts its history while the watch is down, so
//! every origin shows up in a few seconds.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ferrokube::core::{Object, ObjectKey};
use ferrokube::informer::fake::FakeListerWatcher;
use ferrokube::informer::{
    Changes, DeletedObject, Delta, DeltaFifo, Indexers, ListerWatcher, Reflector, ReflectorOptions,
    ReflectorStatus, Store,
};
use ferrokube::{Api, Client};
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::watch;

/// The command line.
#[derive(clap::Parser, Debug)]
#[command(
    name = "informer_deltas",
    about = "Watch the informer machinery work, one delta at a time: where each delta came from \
             (list, watch, resync, relist).",
    args_override_self = true
)]
struct Cli {
    /// Inform on every Pod of the $KUBECONFIG cluster until Ctrl-C, instead of the scripted
    /// in-memory server.
    #[arg(long)]
    cluster: bool,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = <Cli as clap::Parser>::parse();
    if cli.cluster {
        let pods: Api<Pod> = Api::all(Client::try_default()?);
        println!("informing on every Pod in the cluster; Ctrl-C to stop");
        let machinery = Machinery::start(pods, Duration::from_secs(30));
        tokio::select! {
            _ = machinery.print_forever() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        machinery.stop();
        return Ok(());
    }
    scripted().await;
    Ok(())
}

/// A reflector feeding a fifo feeding a store: the informer without its handlers.
struct Machinery {
    store: Arc<Store<Pod>>,
    fifo: Arc<DeltaFifo<Pod>>,
    status: Arc<ReflectorStatus>,
    stop: watch::Sender<bool>,
}

impl Machinery {
    fn start<L: ListerWatcher<Pod>>(source: L, resync_every: Duration) -> Machinery {
        let store = Arc::new(Store::new(Indexers::default()));
        let fifo = Arc::new(DeltaFifo::new(store.clone()));
        let reflector = Reflector::new(source, fifo.clone(), ReflectorOptions::default());
        let status = reflector.status();
        let stop = watch::channel(false).0;
        tokio::spawn(reflector.run(stop.subscribe()));
        // The informer's resync timer, by hand: every period, queue a Sync per cached object.
        let resync = fifo.clone();
        let mut stopped = stop.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stopped.wait_for(|s| *s) => return,
                    _ = tokio::time::sleep(resync_every) => resync.resync(),
                }
            }
        });
        Machinery {
            store,
            fifo,
            status,
            stop,
        }
    }

    /// Pops one key and applies its deltas to the store, printing each; or one whole list, which
    /// goes into the store at once (no reader ever sees half of it), then is printed.
    async fn pop_one(&self) -> bool {
        self.fifo
            .pop(|popped| match popped.changes {
                Changes::Key { key, deltas } => {
                    for delta in deltas {
                        self.apply(&key, delta);
                    }
                }
                Changes::List(keys) => {
                    let mut changes = HashMap::new();
                    for (key, deltas) in &keys {
                        let last = deltas.last().filter(|d| !matches!(d, Delta::Deleted(_)));
                        changes.insert(key.clone(), last.map(|d| d.object().clone()));
                    }
                    self.store.apply(changes);
                    println!(
                        "[{:<6}] {} keys at resourceVersion {}, applied to the store in one step:",
                        if self.status.lists() > 1 {
                            "relist"
                        } else {
                            "list"
                        },
                        keys.len(),
                        popped.resource_version
                    );
                    for (key, deltas) in &keys {
                        for delta in deltas {
                            self.print(key, delta);
                        }
                    }
                }
            })
            .await
            .is_some()
    }

    async fn print_forever(&self) {
        while self.pop_one().await {}
    }

    /// Pops until nothing arrives for `quiet`.
    async fn print_until_quiet(&self, quiet: Duration) {
        while let Ok(true) = tokio::time::timeout(quiet, self.pop_one()).await {}
    }

    fn apply(&self, key: &ObjectKey, delta: Delta<Pod>) {
        match &delta {
            Delta::Deleted(_) => {
                self.store.remove(key);
            }
            Delta::Added(object)
            | Delta::Updated(object)
            | Delta::Replaced(object)
            | Delta::Sync(object) => {
                self.store.insert(object.clone());
            }
        }
        self.print(key, &delta);
    }

    fn print(&self, key: &ObjectKey, delta: &Delta<Pod>) {
        let origin = match &delta {
            Delta::Sync(_) => "resync",
            Delta::Replaced(_) if self.status.lists() > 1 => "relist",
            Delta::Replaced(_) => "list",
            Delta::Deleted(DeletedObject::FinalStateUnknown { .. }) => "relist",
            Delta::Added(_) | Delta::Updated(_) | Delta::Deleted(_) => "watch",
        };
        let (kind, note) = match &delta {
            Delta::Added(_) => ("Added", ""),
            Delta::Updated(_) => ("Updated", ""),
            Delta::Replaced(_) => ("Replaced", ""),
            Delta::Sync(_) => ("Sync", "  (cached copy, nothing fetched)"),
            Delta::Deleted(DeletedObject::Object(_)) => ("Deleted", ""),
            Delta::Deleted(DeletedObject::FinalStateUnknown { .. }) => (
                "Deleted",
                "  (tombstone: gone while we were not watching; last known state)",
            ),
        };
        let version = delta.object().resource_version().to_string();
        println!(
            "[{origin:<6}] {kind:<8} {:<20} rv={version:<3} store holds {}{note}",
            key.as_str(),
            self.store.len()
        );
    }

    fn stop(&self) {
        self.stop.send_replace(true);
        self.fifo.close();
    }
}

fn pod(name: &str, phase: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = Some(name.to_string());
    pod.metadata.namespace = Some("default".to_string());
    pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
        phase: Some(phase.to_string()),
        ..Default::default()
    });
    pod
}

/// The scripted tour: every origin of a delta, in order.
async fn scripted() {
    let quiet = Duration::from_millis(300);
    let server = FakeListerWatcher::new();
    for name in ["web-0", "web-1", "db-0"] {
        server.create(pod(name, "Pending"));
    }
    println!("== the reflector lists (3 pods), then opens a watch from the list's resourceVersion");
    let machinery = Machinery::start(server.clone(), Duration::from_secs(3600));
    machinery.print_until_quiet(quiet).await;

    println!("\n== changes on the server arrive on the watch");
    server.update(pod("web-0", "Running"));
    server.create(pod("web-2", "Pending"));
    server.delete("default/db-0");
    machinery.print_until_quiet(quiet).await;

    println!(
        "\n== the server ends the watch; the reflector resumes from rv {} (no list)",
        machinery.status.last_sync_resource_version()
    );
    server.close_watches();
    server.update(pod("web-2", "Running"));
    machinery.print_until_quiet(quiet).await;
    println!(
        "   lists so far: {}, watches opened: {}",
        machinery.status.lists(),
        machinery.status.watches()
    );

    println!(
        "\n== a resync re-delivers what is cached (handlers see it as an update with old == new)"
    );
    machinery.fifo.resync();
    machinery.print_until_quiet(quiet).await;

    println!(
        "\n== the watch drops; while it is down web-1 is deleted, cache-0 created, and the server \
         compacts its history"
    );
    server.close_watches();
    server.delete("default/web-1");
    server.create(pod("cache-0", "Pending"));
    server.compact();
    println!("   the watch from the old version gets 410 Gone, so the reflector relists");
    // The reflector waits ~1 s before retrying a watch that ended with no events.
    machinery.print_until_quiet(Duration::from_secs(3)).await;
    println!(
        "   lists so far: {}; the store holds {} pods, the server {}",
        machinery.status.lists(),
        machinery.store.len(),
        server.objects().len()
    );
    machinery.stop();
}
