//! The sample ReplicaSet controller through a scripted churn (examples/src/replicaset/churn.rs) on the
//! embedded API server with watch delivery delayed 200 ms: with its stale-cache protection on, the
//! controller never has a write refused with 409, never writes a status that goes backwards, and
//! creates and deletes exactly the pods the script needs. (Without the protection the same run
//! gets 409s: `cargo run --release -p ferrokube-examples --bin bench_stale` prints both, and
//! `benches/stale/` keeps the figures.)

use std::time::Duration;

use ferrokube::Config;
use ferrokube::apiserver::{ApiServer, KubeletSettings};

// The controller is the example's own code, compiled into this test.
use ferrokube_examples::replicaset::churn;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_protection_keeps_the_replicaset_sample_free_of_409s_and_repeated_actions() {
    let server = ApiServer::new()
        .kubelet(KubeletSettings::default())
        .audit(true)
        .start()
        .await
        .expect("server starts");
    server.faults().delay_watches(Duration::from_millis(200));
    let config = Config::new(server.url().parse().expect("server url"));
    let outcome = churn::run(config, "stale-on", true, &churn::Script::default(), || {
        server.audit_log().entries()
    })
    .await
    .expect("the churn converges");
    println!("{}", outcome.json("embedded", Duration::from_millis(200)));
    assert_eq!(outcome.conflicts, 0, "{outcome:?}");
    assert_eq!(outcome.backwards_status, 0, "{outcome:?}");
    assert_eq!(outcome.extra_creates, 0, "{outcome:?}");
    assert_eq!(outcome.extra_deletes, 0, "{outcome:?}");
    assert_eq!(outcome.worst_excess, 0, "{outcome:?}");
    // The protection did something: with every watch event 200 ms late, syncs came back before
    // the caches showed the previous sync's writes.
    assert!(outcome.stale_skips > 0, "{outcome:?}");
}
