//! Issue 44, item 6: a Mirror controller written as a new author would, from the README and the
//! API docs only, on the new API (`index_field` + `watches_by_index`). A `Mirror` copies one
//! ConfigMap of its namespace into every namespace whose labels its selector matches; a finalizer
//! removes the copies; `Ready` says how many copies are current. Everything above the `#[cfg(test)]`
//! line is the controller (its line count is in the issue's closing note); the test drives it on the
//! embedded server.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use ferrokube_client::Client;
use ferrokube_client::api::DeleteParams;
use ferrokube_client::api::PostParams;
use ferrokube_core::LabelSelector;
use ferrokube_core::ObjectKey;
use ferrokube_core::Scope;
use ferrokube_core::SelectorError;
use ferrokube_derive::CustomResource;
use ferrokube_runtime::controller::Action;
use ferrokube_runtime::controller::Context;
use ferrokube_runtime::controller::Controller;
use ferrokube_runtime::controller::ControllerError;
use ferrokube_runtime::controller::ReadError;
use ferrokube_runtime::controller::Reconciler;
use ferrokube_runtime::controller::conditions::ConditionBuilder;
use ferrokube_runtime::controller::conditions::set_condition;
use ferrokube_runtime::controller::conditions::update_status_from;
use ferrokube_runtime::controller::finalizer::FinalizerError;
use ferrokube_runtime::controller::finalizer::finalize;
use ferrokube_runtime::controller::owner::CreateOrUpdateError;
use ferrokube_runtime::controller::owner::create_or_update;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const FINALIZER: &str = "mirror.example.com/copies";
/// On each copy: `namespace.name` of the Mirror that made it.
const FROM: &str = "mirror.example.com/from";
const SOURCE_INDEX: &str = "spec.source";

#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[resource(
    group = "example.com",
    version = "v1",
    kind = "Mirror",
    namespaced,
    status = "MirrorStatus",
    // The generated code names the client's `crd` module (the front crate re-exports it).
    crate = "ferrokube_client",
    printcolumn(name = "Copies", type = "integer", json_path = ".status.copies")
)]
#[serde(rename_all = "camelCase")]
pub struct MirrorSpec {
    /// The ConfigMap to copy, in the Mirror's namespace.
    pub source: String,
    /// Label selector of the target namespaces (`team=a`).
    pub targets: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MirrorStatus {
    pub copies: i32,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error(transparent)]
    Api(#[from] ferrokube_client::Error),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Selector(#[from] SelectorError),
    #[error(transparent)]
    Copy(#[from] CreateOrUpdateError<Infallible>),
}

fn from_label(mirror: &Mirror) -> String {
    let ns = mirror.metadata.namespace.as_deref().unwrap_or_default();
    format!(
        "{ns}.{}",
        mirror.metadata.name.as_deref().unwrap_or_default()
    )
}

pub struct Mirrors;

impl Mirrors {
    async fn apply(&self, mirror: Arc<Mirror>, ctx: &Context) -> Result<Action, MirrorError> {
        let ns = mirror.metadata.namespace.clone().unwrap_or_default();
        let targets = LabelSelector::parse(&mirror.spec.targets)?;
        let source = ctx
            .cache::<ConfigMap>(&Scope::all())?
            .get(Some(&ns), &mirror.spec.source)
            .await?;
        let namespaces = ctx
            .cache::<Namespace>(&Scope::all())?
            .list(None, &targets)
            .await?;
        let wanted: Vec<String> = match &source {
            Some(_) => namespaces
                .iter()
                .filter_map(|n| n.metadata.name.clone())
                .filter(|n| *n != ns)
                .collect(),
            None => Vec::new(),
        };
        for target in &wanted {
            let api = ctx.api_in_namespace::<ConfigMap>(target);
            create_or_update(&api, &mirror.spec.source, |copy: &mut ConfigMap| {
                let labels = copy.metadata.labels.get_or_insert_default();
                labels.insert(FROM.into(), from_label(&mirror));
                copy.data = source.as_ref().and_then(|s| s.data.clone());
                Ok::<_, Infallible>(())
            })
            .await?;
        }
        self.prune(&mirror, ctx, &wanted).await?;
        let generation = mirror.metadata.generation; // of the spec this work was done for
        let ready = ConditionBuilder::from_bool("Ready", source.is_some())
            .reason(if source.is_some() {
                "Copied"
            } else {
                "SourceMissing"
            })
            .message(format!("{} copies of {}", wanted.len(), mirror.spec.source))
            .observed_generation(generation)
            .build();
        let copies = wanted.len() as i32;
        let api = ctx.api_for_object(mirror.as_ref());
        update_status_from(&api, mirror.as_ref(), |m: &mut Mirror| {
            let status = m.status.get_or_insert_default();
            let changed = set_condition(&mut status.conditions, ready.clone());
            let counted = std::mem::replace(&mut status.copies, copies) != copies;
            changed | counted
        })
        .await?;
        Ok(Action::await_change())
    }

    /// Deletes this Mirror's copies in every namespace but `keep` (a copy already gone is fine).
    async fn prune(
        &self,
        mirror: &Mirror,
        ctx: &Context,
        keep: &[String],
    ) -> Result<(), MirrorError> {
        let mine = LabelSelector::parse(&format!("{FROM}={}", from_label(mirror)))?;
        for copy in ctx
            .cache::<ConfigMap>(&Scope::all())?
            .list(None, &mine)
            .await?
        {
            let at = copy.metadata.namespace.as_deref().unwrap_or_default();
            if !keep.iter().any(|k| k == at) {
                let name = copy.metadata.name.as_deref().unwrap_or_default();
                ctx.api_in_namespace::<ConfigMap>(at)
                    .delete_opt(name, &DeleteParams::default())
                    .await?;
            }
        }
        Ok(())
    }
}

impl Reconciler<Mirror> for Mirrors {
    type Error = FinalizerError<MirrorError>;
    async fn reconcile(&self, mirror: Arc<Mirror>, ctx: Context) -> Result<Action, Self::Error> {
        let (api, ctx) = (ctx.api_for_object(mirror.as_ref()), &ctx);
        let cleanup = async |m: Arc<Mirror>| {
            self.prune(&m, ctx, &[])
                .await
                .map(|()| Action::await_change())
        };
        let done = finalize(&api, FINALIZER, mirror, |m| self.apply(m, ctx), cleanup).await?;
        Ok(done.unwrap_or(Action::await_change()))
    }
}

/// The controller: Mirrors, their sources (through an index), their copies (by label), and the
/// namespaces (a label change may add or remove targets of any Mirror).
pub async fn run(
    client: Client,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ControllerError> {
    Controller::<Mirror>::new(client, Scope::all())
        .index_field::<Mirror>(SOURCE_INDEX, |m| {
            let ns = m.metadata.namespace.as_deref().unwrap_or_default();
            vec![format!("{ns}/{}", m.spec.source)]
        })
        .watches_by_index::<ConfigMap>(Scope::all(), SOURCE_INDEX, |cm| {
            vec![ObjectKey::of(cm).to_string()]
        })
        .watches::<ConfigMap>(Scope::all(), |copy| {
            let from = copy.metadata.labels.as_ref().and_then(|l| l.get(FROM));
            from.and_then(|f| f.split_once('.'))
                .map(|(ns, name)| ObjectKey::new(Some(ns), name))
                .into_iter()
                .collect()
        })
        .reconcile_all_on::<Namespace>(Scope::all())
        .run(Mirrors, shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrokube_apiserver::ApiServer;
    use ferrokube_client::Api;
    use ferrokube_client::crd::apply_and_wait;
    use ferrokube_testkit as common;
    use serde_json::json;

    async fn eventually<F: AsyncFnMut() -> bool>(what: &str, mut condition: F) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        while !condition().await {
            assert!(tokio::time::Instant::now() < deadline, "{what} within 30 s");
            tick.tick().await;
        }
    }

    fn namespace(name: &str, team: &str) -> Namespace {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"team": team}}}))
            .expect("ns")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn author_trap_mirror_written_from_the_docs_copies_follows_and_cleans_up() {
        let server = ApiServer::new().start().await.expect("server starts");
        let client = common::embedded_client(&server, true);
        apply_and_wait(&client, &Mirror::crd(), Duration::from_secs(30))
            .await
            .expect("crd");
        let namespaces = Api::<Namespace>::all(client.clone());
        for (name, team) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
            namespaces
                .create(&PostParams::default(), &namespace(name, team))
                .await
                .expect("ns");
        }
        let cms = |ns: &str| Api::<ConfigMap>::namespaced(client.clone(), ns);
        cms("default")
            .create(&PostParams::default(), &common::config_map("settings", "1"))
            .await
            .expect("cm");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(run(client.clone(), async {
            let _ = stopped.await;
        }));
        let mirrors = Api::<Mirror>::namespaced(client.clone(), "default");
        let spec = MirrorSpec {
            source: "settings".into(),
            targets: "team=a".into(),
        };
        mirrors
            .create(&PostParams::default(), &Mirror::new("m", spec))
            .await
            .expect("mirror");
        let value = async |ns: &str| {
            cms(ns)
                .get_opt("settings")
                .await
                .expect("get")
                .and_then(|c| c.data)
                .and_then(|d| d.get("k").cloned())
        };
        eventually("copies in a1 and a2", async || {
            value("a1").await.as_deref() == Some("1") && value("a2").await.as_deref() == Some("1")
        })
        .await;
        assert_eq!(value("b1").await, None);
        // The source changes: the copies follow (through the index).
        cms("default")
            .replace(
                "settings",
                &PostParams::default(),
                &common::config_map("settings", "2"),
            )
            .await
            .expect("edit");
        eventually("copies follow", async || {
            value("a1").await.as_deref() == Some("2") && value("a2").await.as_deref() == Some("2")
        })
        .await;
        // A copy deleted behind its back comes back (by label).
        cms("a1")
            .delete("settings", &DeleteParams::default())
            .await
            .expect("deleted");
        eventually("copy repaired", async || {
            value("a1").await.as_deref() == Some("2")
        })
        .await;
        // b1 joins team a (the Namespace watch); a2 leaves it.
        namespaces
            .replace("b1", &PostParams::default(), &namespace("b1", "a"))
            .await
            .expect("relabel");
        namespaces
            .replace("a2", &PostParams::default(), &namespace("a2", "b"))
            .await
            .expect("relabel");
        eventually("targets follow the labels", async || {
            value("b1").await.as_deref() == Some("2") && value("a2").await.is_none()
        })
        .await;
        eventually("Ready with 2 copies at generation 1", async || {
            let m = mirrors.get("m").await.expect("get");
            let status = m.status.unwrap_or_default();
            status.copies == 2
                && status.conditions.iter().any(|c| {
                    c.type_ == "Ready" && c.status == "True" && c.observed_generation == Some(1)
                })
        })
        .await;
        // Deleted: the finalizer removes every copy first.
        mirrors
            .delete("m", &DeleteParams::default())
            .await
            .expect("delete");
        eventually("copies gone and the Mirror too", async || {
            value("a1").await.is_none()
                && value("b1").await.is_none()
                && mirrors.get_opt("m").await.expect("get").is_none()
        })
        .await;
        let _ = stop.send(());
        running.await.expect("joins").expect("runs");
    }
}
