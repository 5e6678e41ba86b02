//! The instrumentation seam: one ConfigMap created on the embedded API server must show up, in
//! order, in every stage's `tracing` events (target `ferrokube_pipeline`): the watch event, the
//! DeltaFifo, the store, the handler, the workqueue, the reconcile, the reconcile's own request to
//! the API server (attributed to it through the `reconcile` span), and `done`.
//!
//! The events are read by a small layer written here, independent of `ferrokube_view`, so that
//! this test checks the emitters and not the view's reading of them.

use ferrokube_testkit as common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ferrokube_apiserver::ApiServer;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::api::PostParams;
use ferrokube_core::Scope;
use ferrokube_runtime::controller::Action;
use ferrokube_runtime::controller::Context as ReconcileContext;
use ferrokube_runtime::controller::Controller;
use ferrokube_runtime::controller::Reconciler;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// One pipeline event as the test sees it: its fields as text, plus the key of the `reconcile`
/// span it was emitted in, if any.
#[derive(Debug, Clone)]
struct Seen {
    fields: BTreeMap<String, String>,
    cause: Option<String>,
}

impl Seen {
    fn get(&self, name: &str) -> &str {
        self.fields.get(name).map_or("", String::as_str)
    }
}

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        let text = text
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .map_or(text.clone(), str::to_string);
        self.0.insert(field.name().to_string(), text);
    }
}

/// The `reconcile` span's key, kept in the span's extensions.
struct ReconcileKey(String);

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Seen>>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != "reconcile" {
            return;
        }
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let (Some(span), Some(key)) = (ctx.span(id), fields.0.remove("key")) {
            span.extensions_mut().insert(ReconcileKey(key));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() != "ferrokube_pipeline" {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let cause = ctx.event_scope(event).and_then(|scope| {
            scope
                .filter_map(|span| span.extensions().get::<ReconcileKey>().map(|k| k.0.clone()))
                .next()
        });
        self.0.lock().push(Seen {
            fields: fields.0,
            cause,
        });
    }
}

/// Creates `<name>-out`, a Secret, for each ConfigMap: a write made by the reconcile.
struct WritesASecret(Api<Secret>);

impl Reconciler<ConfigMap> for WritesASecret {
    type Error = ferrokube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        _ctx: ReconcileContext,
    ) -> Result<Action, ferrokube_client::Error> {
        let name = format!("{}-out", cm.metadata.name.as_deref().unwrap_or_default());
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name),
                ..ObjectMeta::default()
            },
            ..Secret::default()
        };
        match self.0.create(&PostParams::default(), &secret).await {
            Ok(_) => Ok(Action::await_change()),
            Err(error) if error.is_already_exists() => Ok(Action::await_change()),
            Err(error) => Err(error),
        }
    }
}

/// One stage the object must pass: what it is, and how to recognise its event.
type Step<'a> = (&'a str, &'a dyn Fn(&Seen) -> bool);

/// Polls the captured events until `found` holds (bounded: a missing stage fails the test).
async fn wait_for(capture: &Capture, what: &str, found: impl Fn(&[Seen]) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if found(&capture.0.lock()) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {what} within 20 s; events: {:#?}",
            capture.0.lock()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_object_travels_through_every_stage_in_order() {
    let capture = Capture::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(capture.clone()))
        .expect("the only subscriber of this test binary");

    let server = ApiServer::new().start().await.expect("server starts");
    let client: Client = common::embedded_client(&server, true);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let (stop, stopped) = oneshot::channel::<()>();
    let controller =
        Controller::<ConfigMap>::new(client.clone(), Scope::namespace("default")).workers(1);
    let running = tokio::spawn(controller.run(WritesASecret(secrets), async {
        let _ = stopped.await;
    }));
    // Created after the informer watches, so that it arrives as a watch event, not in the list.
    wait_for(&capture, "watch on configmaps", |seen| {
        seen.iter()
            .any(|s| s.get("stage") == "reflector" && s.get("op") == "watch_start")
    })
    .await;
    config_maps
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("a".into()),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            },
        )
        .await
        .expect("created");

    let key = "default/a";
    let steps: [Step; 12] = [
        ("the watch event", &|s| {
            s.get("stage") == "watch" && s.get("key") == key && s.get("type") == "ADDED"
        }),
        ("the fifo queueing it", &|s| {
            s.get("stage") == "fifo" && s.get("op") == "queued" && s.get("key") == key
        }),
        ("the fifo popping it", &|s| {
            s.get("stage") == "fifo" && s.get("op") == "popped" && s.get("key") == key
        }),
        ("the store applying it", &|s| {
            s.get("stage") == "store" && s.get("key") == key && s.get("state") == "stored"
        }),
        ("the handler hearing of it", &|s| {
            s.get("stage") == "handler" && s.get("op") == "notify" && s.get("key") == key
        }),
        ("the handler enqueueing its key", &|s| {
            s.get("stage") == "handler" && s.get("op") == "enqueue" && s.get("queue_key") == key
        }),
        ("the queue taking the key", &|s| {
            s.get("stage") == "queue" && s.get("op") == "add" && s.get("key") == key
        }),
        ("a worker getting the key", &|s| {
            s.get("stage") == "queue" && s.get("op") == "get" && s.get("key") == key
        }),
        ("the reconcile starting", &|s| {
            s.get("stage") == "reconcile" && s.get("op") == "start" && s.get("key") == key
        }),
        ("the reconcile's write", &|s| {
            s.get("stage") == "client"
                && s.get("verb") == "POST"
                && s.get("path").ends_with("/namespaces/default/secrets")
                && s.cause.as_deref() == Some(key)
        }),
        ("the reconcile ending", &|s| {
            s.get("stage") == "reconcile"
                && s.get("op") == "end"
                && s.get("key") == key
                && s.get("state") == "ok"
        }),
        ("done", &|s| {
            s.get("stage") == "queue"
                && s.get("op") == "done"
                && s.get("key") == key
                && s.get("state") == "gone"
        }),
    ];
    wait_for(&capture, "done for default/a", |seen| {
        seen.iter().any(|s| (steps[11].1)(s))
    })
    .await;

    let seen = capture.0.lock().clone();
    let mut from = 0;
    for (what, matches) in steps {
        let Some(at) = seen[from..].iter().position(matches) else {
            panic!(
                "{what} is missing after event {from}; the events for {key}: {:#?}",
                seen.iter()
                    .filter(|s| s.get("key") == key || s.cause.as_deref() == Some(key))
                    .collect::<Vec<_>>()
            );
        };
        from += at + 1;
    }
    // Every event names its stage and op, and the client's carries the request's status.
    assert!(
        seen.iter()
            .all(|s| !s.get("stage").is_empty() && !s.get("op").is_empty())
    );
    assert!(
        seen.iter()
            .any(|s| s.get("stage") == "client" && s.get("status") == "201")
    );

    let _ = stop.send(());
    running
        .await
        .expect("controller task")
        .expect("controller ran");
}
