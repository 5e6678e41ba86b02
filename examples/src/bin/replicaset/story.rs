//! The demo's script: a short life of two ReplicaSets on the embedded API server.
//!
//! | step | what happens | what the controller must do |
//! |---|---|---|
//! | 1 | create `web` (3 pods) and `api` (2 pods, minReadySeconds 2) | create 5 pods in slow-start batches; report `available` only after 2 s of ready |
//! | 2 | scale `web` to 6 | create 3 more, not 6: expectations cover the pods it already made |
//! | 3 | kill 2 of `web`'s pods, as a failing node would | notice the deletes, create 2 replacements |
//! | 4 | scale `web` to 2 | delete 4, the least valuable first (upstream's ranking) |
//! | 5 | drop every watch, and scale `api` to 4 at once | informers resume from their last resourceVersion, nothing missed |
//! | 6 | compact the server's history, drop the watches, delete an `api` pod meanwhile | informers get 410 Gone, relist, and learn of the delete from the relist |
//!
//! After each step the story waits (up to 30 s) for the world to converge ([`World`]), then holds a
//! moment so a reader can see it. The last check is the verdict.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use ferrokube::apiserver::{
    ApiServer, KubeletSettings, RunningServer, ServerControls, WriteFailure,
};
use ferrokube::manager::shutdown_signal;
use ferrokube::view::LiveView;
use ferrokube::{Api, Client, Config};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use serde_json::json;
use tokio::sync::watch;

use crate::view::View;
use crate::world::World;
use crate::{Args, BoxError};

const NAMESPACE: &str = "demo";
/// Longest wait for convergence after one step.
const SETTLE: Duration = Duration::from_secs(30);
/// Pause after a step converged, so the view can be read.
const HOLD: Duration = Duration::from_millis(1500);

/// Plays the story; true if the world converged at the end. With `page`, serves the live view
/// (with buttons for the embedded server's faults) and prints its address first.
pub async fn run(args: &Args, live: bool, page: Option<LiveView>) -> Result<bool, BoxError> {
    let server = ApiServer::new()
        .kubelet(KubeletSettings::default())
        .start()
        .await?;
    let page = match page {
        Some(page) => Some(with_fault_buttons(page, server.controls()).serve().await?),
        None => None,
    };
    let config = Config::new(server.url().parse()?);
    let running = crate::start(config.clone(), args, std::future::pending()).await?;
    let driver = Client::new(Config {
        qps: None,
        ..config
    })?;
    let Some(controller) = running.controller.clone() else {
        return Err("the demo shows one controller: play it without --shard-ring".into());
    };
    let view = Arc::new(View::new(controller, live));
    view.say(&format!(
        "ferrokube ReplicaSet controller · embedded API server at {} · {} workers · Ctrl-C stops",
        server.url(),
        args.workers
    ));
    if let Some(page) = &page {
        view.say(&format!(
            "live view of the machinery: http://{}/ (open it in a browser)",
            page.addr()
        ));
    }
    let (stop_view, view_stopped) = watch::channel(false);
    let drawing = tokio::spawn(view.clone().run(view_stopped));

    // One listener for the whole run, from before the story starts: a SIGTERM sent as soon as
    // "the story is over" is printed must find it listening.
    let stop = shutdown_signal();
    tokio::pin!(stop);
    let started = Instant::now();
    let played = tokio::select! {
        result = play(&server, &driver, &view) => result,
        () = &mut stop => Err("interrupted by a signal".into()),
    };
    let world = World::observe(&driver, NAMESPACE).await;
    let story_time = started.elapsed();
    if args.keep_running && played.is_ok() {
        view.step(
            "the story is over; the controller keeps running (SIGTERM or Ctrl-C stops)".into(),
        );
        (&mut stop).await;
    }
    view.step("stopping: the controller (syncs in flight finish), then the informers".into());
    let stopped = running.stop().await;
    let _ = stop_view.send(true);
    let _ = drawing.await;
    if let Err(error) = stopped {
        eprintln!("replicaset: stopping the controller: {error}");
    }

    let world = world?;
    let converged = played.is_ok() && world.converged();
    let verdict = match (&played, converged) {
        (Err(error), _) => format!("NOT CONVERGED: the story stopped: {error}"),
        (Ok(()), true) => format!(
            "CONVERGED: {} ReplicaSets, {} pods, all ready and available, status current ({:.1} s)",
            world.replicasets.len(),
            world.pods(),
            story_time.as_secs_f64()
        ),
        (Ok(()), false) => format!(
            "NOT CONVERGED after {:.1} s: {world}",
            story_time.as_secs_f64()
        ),
    };
    println!("{verdict}");
    if let (Some(page), true) = (&page, live) {
        let ended = shutdown_signal();
        println!(
            "the live view stays up at http://{}/ (the controller has stopped); Ctrl-C ends",
            page.addr()
        );
        ended.await;
    }
    Ok(converged)
}

/// The page's buttons: the embedded server's faults, so a learner can watch recovery happen.
fn with_fault_buttons(page: LiveView, server: ServerControls) -> LiveView {
    const GONE: &str = "the API server has stopped";
    let drop = server.clone();
    let compact = server.clone();
    let kill = server.clone();
    let fail = server.clone();
    let conflict = server;
    page.action("drop-watches", "Drop every watch", move || match drop.close_watches() {
        Some(n) => format!("closed {n} watches: each informer resumes from its last resourceVersion"),
        None => GONE.into(),
    })
    .action("compact", "Compact history (forces a relist)", move || {
        match compact.compact_and_close_watches() {
            Some(revision) => format!(
                "history compacted at revision {revision} and watches closed: informers get 410 Gone and relist"
            ),
            None => GONE.into(),
        }
    })
    .action("kill-pods", "Kill 2 running pods", move || match kill.kill_pods(2) {
        Some(n) => format!(
            "asked to delete {n} running pods, as failing nodes would: they terminate (MODIFIED), the controller replaces them, then they go (DELETED)"
        ),
        None => GONE.into(),
    })
    .action("fail-500", "Fail half the writes with 500 (toggle)", move || {
        fail.with_faults(|faults| {
            let on = faults.settings().fail_writes == 0.0;
            faults.fail_writes(if on { 0.5 } else { 0.0 }, WriteFailure::InternalError);
            if on {
                "half of all writes now fail with 500: watch reconciles fail and back off".to_string()
            } else {
                "writes no longer fail".to_string()
            }
        })
        .unwrap_or_else(|| GONE.into())
    })
    .action("conflict-409", "Answer half the updates 409 (toggle)", move || {
        conflict
            .with_faults(|faults| {
                let on = faults.settings().conflict_updates == 0.0;
                faults.conflict_updates(if on { 0.5 } else { 0.0 });
                if on {
                    "half of all updates and patches now get 409 Conflict".to_string()
                } else {
                    "updates no longer conflict".to_string()
                }
            })
            .unwrap_or_else(|| GONE.into())
    })
}

async fn play(server: &RunningServer, driver: &Client, view: &View) -> Result<(), BoxError> {
    let replicasets: Api<ReplicaSet> = Api::namespaced(driver.clone(), NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(driver.clone(), NAMESPACE);
    let steps = 6;
    let mut step = 0;
    let mut next = |text: &str| {
        step += 1;
        view.step(format!("step {step}/{steps}  {text}"));
    };

    next("create ReplicaSets web (3 pods) and api (2 pods, minReadySeconds 2)");
    Api::<Namespace>::all(driver.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?,
        )
        .await?;
    replicasets
        .create(&PostParams::default(), &replica_set("web", 3, 0)?)
        .await?;
    replicasets
        .create(&PostParams::default(), &replica_set("api", 2, 2)?)
        .await?;
    settle(driver, view).await?;

    next("scale web to 6");
    scale(&replicasets, "web", 6).await?;
    settle(driver, view).await?;

    next("kill 2 of web's pods, as a failing node would");
    for victim in pods_of(&pods, "web").await?.into_iter().take(2) {
        pods.delete(&victim, &DeleteParams::default().grace_period(0))
            .await?;
    }
    settle(driver, view).await?;

    next("scale web to 2");
    scale(&replicasets, "web", 2).await?;
    settle(driver, view).await?;

    next("drop every watch, and scale api to 4 at once");
    let dropped = server.close_watches();
    scale(&replicasets, "api", 4).await?;
    tracing::info!(dropped, "watches closed");
    settle(driver, view).await?;

    next("compact history + drop watches (informers must relist), delete an api pod meanwhile");
    server.compact();
    server.close_watches();
    if let Some(victim) = pods_of(&pods, "api").await?.into_iter().next() {
        pods.delete(&victim, &DeleteParams::default().grace_period(0))
            .await?;
    }
    settle(driver, view).await?;
    Ok(())
}

/// Waits until the world converged (then holds a moment), or gives up after [`SETTLE`].
async fn settle(driver: &Client, view: &View) -> Result<(), BoxError> {
    let deadline = Instant::now() + SETTLE;
    loop {
        let world = World::observe(driver, NAMESPACE).await?;
        if world.converged() {
            tokio::time::sleep(HOLD).await;
            return Ok(());
        }
        if Instant::now() > deadline {
            view.say(&format!("not converged after {SETTLE:?}: {world}"));
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn scale(replicasets: &Api<ReplicaSet>, name: &str, replicas: i32) -> Result<(), BoxError> {
    let patch = Patch::Merge(json!({"spec": {"replicas": replicas}}));
    replicasets
        .patch(name, &PatchParams::default(), &patch)
        .await?;
    Ok(())
}

/// Names of the active pods labelled `app=<app>`.
async fn pods_of(pods: &Api<Pod>, app: &str) -> Result<Vec<String>, BoxError> {
    let list = pods
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await?;
    Ok(list
        .items
        .iter()
        .filter(|p| crate::controller::pod::is_active(p))
        .filter_map(|p| p.metadata.name.clone())
        .collect())
}

/// A ReplicaSet of `replicas` pause containers labelled `app=<name>`.
pub fn replica_set(
    name: &str,
    replicas: i32,
    min_ready_seconds: i32,
) -> Result<ReplicaSet, BoxError> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "minReadySeconds": min_ready_seconds,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
            },
        },
    }))?)
}
