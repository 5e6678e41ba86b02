//! The Mirror controller of issue 44, item 6: written as a new author would, from the README and
//! the API docs only, on the runtime's API (`index_field` + `watches_by_index`). A `Mirror` copies
//! one ConfigMap of its namespace into every namespace whose labels its selector matches; a
//! finalizer removes the copies; `Ready` says how many copies are current.
//!
//! Why it lives here: two tests drive the very same controller, so it is a module they share
//! rather than a copy in each:
//!
//! - `runtime/tests/controller/mirror.rs`: the author-trap test, on the embedded server (copies
//!   made, following the source, repaired, following namespace labels, removed by the finalizer);
//! - `examples/tests/explore_mirror.rs`: the fault explorer's search over it (every single-fault
//!   candidate, then twice the default budget's random plans), which must find nothing.
//!
//! Data flow: Mirror events, the source ConfigMap (through the `spec.source` index), each copy
//! (through its `mirror.example.com/from` label) and every Namespace change (all Mirrors) queue
//! the Mirror's key; [`Mirrors::reconcile`] reads the source and the namespaces from the caches,
//! creates or updates a copy in each target, prunes the copies of namespaces no longer wanted,
//! and writes `status.copies` and the `Ready` condition at the Mirror's generation. Deleting a
//! Mirror runs the finalizer: every copy goes before the Mirror does.

use std::convert::Infallible;
use std::sync::Arc;

use ferrokube_client::Client;
use ferrokube_client::api::DeleteParams;
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
