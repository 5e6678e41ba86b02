//! A cleanup runs once per deletion (issue 44, item 3), on whichever server: shared by the
//! embedded server's test (`runtime/tests/controller/author_traps.rs`) and kube-apiserver's
//! (`runtime/tests/controller/e2e.rs`).
//!
//! A controller of ConfigMaps guards each with a finalizer; its cleanup counts runs per uid and
//! asks for the key back at once (and a stream source keeps every key coming back every 5 ms), so
//! the window in which a reconcile could read the object with its finalizer after the write that
//! removed it is always tried. kube-apiserver answers that write with a resourceVersion its watch has
//! delivered already and sends the DELETED event a revision later; the embedded server may
//! answer with the DELETED event's version. Either way: exactly one cleanup per deletion.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ferrokube_client::Client;
use ferrokube_client::api::Api;
use ferrokube_client::api::DeleteParams;
use ferrokube_client::api::ListParams;
use ferrokube_client::api::PostParams;
use ferrokube_core::ObjectKey;
use ferrokube_core::Scope;
use ferrokube_runtime::controller::Action;
use ferrokube_runtime::controller::Controller;
use ferrokube_runtime::controller::finalizer::finalize;
use ferrokube_runtime::controller::finalizer::has_finalizer;
use ferrokube_runtime::controller::from_fn;
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio::sync::oneshot;

const FINALIZER: &str = "cleanup.ferrokube.dev/once";
const OBJECTS: usize = 30;

/// Polls `condition` every 20 ms until it holds, for at most 60 s.
async fn eventually<F, Fut>(what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    loop {
        tick.tick().await;
        if condition().await {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what} within 60 s");
    }
}

pub async fn cleanup_runs_once_per_deletion(client: Client, namespace: &str) {
    let names: Vec<String> = (0..OBJECTS).map(|i| format!("guarded-{i}")).collect();
    let keys: Vec<ObjectKey> = names
        .iter()
        .map(|name| ObjectKey::new(Some(namespace), name))
        .collect();
    // Every key, again and again: reconciles keep coming while the deletions go through.
    let ticks = futures_util::stream::unfold(0usize, move |i| {
        let keys = keys.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Some((keys[i % keys.len()].clone(), i + 1))
        }
    });
    let cleanups: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let counted = cleanups.clone();
    let reconciler = from_fn(move |cm: Arc<ConfigMap>, ctx| {
        let counted = counted.clone();
        async move {
            let api = ctx.api_for_object(cm.as_ref());
            let done = finalize(
                &api,
                FINALIZER,
                cm,
                |_| async { Ok::<_, String>(Action::await_change()) },
                |cm| async move {
                    let uid = cm.metadata.uid.clone().unwrap_or_default();
                    *counted.lock().entry(uid).or_default() += 1;
                    // The harshest timing: the key comes back at once, while the DELETED event
                    // may still be on its way.
                    Ok(Action::requeue(Duration::ZERO))
                },
            )
            .await
            .map_err(|error| error.to_string())?;
            Ok::<_, String>(done.unwrap_or(Action::await_change()))
        }
    });
    let controller =
        Controller::<ConfigMap>::new(client.clone(), Scope::namespace(namespace)).source(ticks);
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(reconciler, async {
        let _ = stopped.await;
    }));
    let api = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let mut uids = Vec::new();
    for name in &names {
        let created = api
            .create(
                &PostParams::default(),
                &ferrokube_testkit::config_map(name, "v"),
            )
            .await
            .expect("created");
        uids.push(created.metadata.uid.expect("uid"));
    }
    eventually("every ConfigMap guarded", || {
        let api = api.clone();
        async move {
            let listed = api.list(&ListParams::default()).await.expect("lists");
            listed.items.len() == OBJECTS
                && listed
                    .items
                    .iter()
                    .all(|cm| has_finalizer(&cm.metadata, FINALIZER))
        }
    })
    .await;
    for name in &names {
        api.delete(name, &DeleteParams::default())
            .await
            .expect("deleted");
    }
    eventually("every ConfigMap gone", || {
        let api = api.clone();
        async move {
            let listed = api.list(&ListParams::default()).await.expect("lists");
            listed.items.iter().all(|cm| !names_guarded(cm))
        }
    })
    .await;
    let _ = stop.send(());
    running.await.expect("joins").expect("runs");
    let cleanups = cleanups.lock().clone();
    let wrong: Vec<(&String, u32)> = uids
        .iter()
        .map(|uid| (uid, cleanups.get(uid).copied().unwrap_or(0)))
        .filter(|(_, runs)| *runs != 1)
        .collect();
    assert!(
        wrong.is_empty(),
        "cleanups per deletion other than one (uid, runs): {wrong:?}"
    );
}

fn names_guarded(cm: &ConfigMap) -> bool {
    cm.metadata
        .name
        .as_deref()
        .is_some_and(|name| name.starts_with("guarded-"))
}
