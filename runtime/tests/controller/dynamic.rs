//! A controller over `DynamicObject`s, whose kinds are given at run time: no Rust type for the
//! custom resources, only their `ApiResource`s.
//!
//! Widgets (primary, dynamic) each own a ConfigMap (typed child) that carries the widget's
//! `spec.size` and how many Gadgets (dynamic, watched) point at the widget. The test drives it
//! through a create, an edit, an edit of the child behind the controller's back, a new gadget,
//! and checks the owner reference the controller wrote names the run-time kind. A second
//! controller, sharing the factory, watches a different dynamic kind: two `DynamicObject`
//! informers of different kinds must not be taken for one.
//!
//! Every test name contains `dynamic`.

use std::sync::Arc;
use std::time::Duration;

use ferrokube_apiserver::ApiServer;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::DynamicObject;
use ferrokube_client::api::Patch;
use ferrokube_client::api::PatchParams;
use ferrokube_client::api::PostParams;
use ferrokube_client::crd::apply_and_wait;
use ferrokube_core::ApiResource;
use ferrokube_core::ObjectKey;
use ferrokube_core::Scope;
use ferrokube_runtime::controller::Action;
use ferrokube_runtime::controller::Context;
use ferrokube_runtime::controller::Controller;
use ferrokube_runtime::controller::ControllerError;
use ferrokube_runtime::controller::Filter;
use ferrokube_runtime::controller::Objects;
use ferrokube_runtime::controller::from_fn;
use ferrokube_runtime::controller::owner::create_or_update;
use ferrokube_runtime::controller::owner::set_controller_reference;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::json;
use tokio::sync::oneshot;

const NS: &str = "default";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "dynamic.example.com".into(),
        version: "v1".into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced: true,
    }
}

/// A namespaced CRD of `resource` whose objects have a free-form `spec`.
fn crd(resource: &ApiResource) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{}", resource.plural, resource.group)},
        "spec": {
            "group": resource.group,
            "scope": "Namespaced",
            "names": {
                "kind": resource.kind,
                "plural": resource.plural,
                "singular": resource.kind.to_lowercase(),
                "listKind": format!("{}List", resource.kind),
            },
            "versions": [{
                "name": resource.version,
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": true,
                    }},
                }},
            }],
        },
    }))
    .expect("a CRD")
}

async fn served(client: &Client, resources: &[&ApiResource]) {
    for resource in resources {
        apply_and_wait(client, &crd(resource), Duration::from_secs(10))
            .await
            .expect("CRD established");
    }
}

/// Waits (at most 20 s) until the ConfigMap `name` has `data` equal to `want`.
async fn config_map_becomes(client: &Client, name: &str, want: serde_json::Value) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let found = api.get_opt(name).await.expect("get");
        if let Some(cm) = &found {
            if serde_json::to_value(&cm.data).expect("json") == want {
                return cm.clone();
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "ConfigMap {name} never became {want}: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The widget's ConfigMap: its size and the number of gadgets naming it.
async fn reconcile_widget(
    widget: Arc<DynamicObject>,
    ctx: Context,
    gadgets: ApiResource,
) -> Result<Action, Box<dyn std::error::Error + Send + Sync>> {
    let name = widget.metadata.name.clone().unwrap_or_default();
    let size = widget.data["spec"]["size"].as_i64().unwrap_or(0);
    let pointing = ctx
        .api_dynamic(gadgets, Some(NS))
        .list(&Default::default())
        .await?
        .items
        .iter()
        .filter(|g| g.data["spec"]["widget"].as_str() == Some(name.as_str()))
        .count();
    create_or_update(
        &ctx.api_in_primary_namespace::<ConfigMap>(),
        &format!("{name}-size"),
        |cm: &mut ConfigMap| {
            set_controller_reference(&*widget, &mut cm.metadata)?;
            cm.data = Some(
                [
                    ("size".to_string(), size.to_string()),
                    ("gadgets".to_string(), pointing.to_string()),
                ]
                .into(),
            );
            Ok::<_, ferrokube_runtime::controller::owner::OwnerError>(())
        },
    )
    .await?;
    Ok(Action::await_change())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_object_controller_reconciles_a_kind_given_at_run_time() {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = ferrokube_testkit::embedded_client(&server, true);
    let (widgets, gadgets) = (resource("Widget", "widgets"), resource("Gadget", "gadgets"));
    served(&client, &[&widgets, &gadgets]).await;
    let scope = Scope::namespace(NS);

    let controller = Controller::<DynamicObject>::new(
        client.clone(),
        Objects::dynamic(widgets.clone(), scope.clone()),
    )
    .filter(Filter::generation_changed())
    .owns::<ConfigMap>(scope.clone())
    .watches(
        Objects::<DynamicObject>::dynamic(gadgets.clone(), scope.clone()),
        |gadget| {
            gadget.data["spec"]["widget"]
                .as_str()
                .map(|widget| ObjectKey::new(Some(NS), widget))
                .into_iter()
                .collect()
        },
    );
    assert_eq!(controller.controller_name(), "widget");
    let reconciler = {
        let gadgets = gadgets.clone();
        from_fn(move |widget, ctx| reconcile_widget(widget, ctx, gadgets.clone()))
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(reconciler, async {
        let _ = stopped.await;
    }));

    let widget_api = Api::dynamic(client.clone(), widgets.clone(), Some(NS));
    let widget = widget_api
        .create(
            &PostParams::default(),
            &DynamicObject::new("a", &widgets).with("spec", json!({"size": 3})),
        )
        .await
        .expect("widget");
    let cm = config_map_becomes(&client, "a-size", json!({"size": "3", "gadgets": "0"})).await;
    let owner = &cm.metadata.owner_references.as_deref().unwrap_or_default()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.uid.as_str()
        ),
        (
            "dynamic.example.com/v1",
            "Widget",
            widget.metadata.uid.as_deref().unwrap_or_default()
        ),
        "the owner reference names the kind given at run time"
    );

    // An edit of the primary (a new generation).
    widget_api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"size": 5}})),
        )
        .await
        .expect("edited");
    config_map_becomes(&client, "a-size", json!({"size": "5", "gadgets": "0"})).await;

    // The child edited behind the controller's back: `owns` finds the widget by the owner
    // reference's run-time kind and puts it back.
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .patch(
            "a-size",
            &PatchParams::default(),
            &Patch::Merge(&json!({"data": {"size": "tampered"}})),
        )
        .await
        .expect("tampered");
    config_map_becomes(&client, "a-size", json!({"size": "5", "gadgets": "0"})).await;

    // A watched object of another dynamic kind maps to the widget's key.
    Api::dynamic(client.clone(), gadgets.clone(), Some(NS))
        .create(
            &PostParams::default(),
            &DynamicObject::new("g1", &gadgets).with("spec", json!({"widget": "a"})),
        )
        .await
        .expect("gadget");
    config_map_becomes(&client, "a-size", json!({"size": "5", "gadgets": "1"})).await;

    let _ = stop.send(());
    running.await.expect("task").expect("ran");
}

/// Filters name dynamic kinds too: a filter for a dynamic kind the controller has no source of is
/// refused, as for a typed kind; and a `generation_changed` filter on a typed kind that has no
/// generation is refused whatever the primary is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_controller_refuses_filters_for_kinds_it_does_not_hear() {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = ferrokube_testkit::embedded_client(&server, true);
    let (widgets, gadgets) = (resource("Widget", "widgets"), resource("Gadget", "gadgets"));
    let scope = Scope::namespace(NS);
    let refused =
        Controller::<DynamicObject>::new(client.clone(), Objects::dynamic(widgets, scope.clone()))
            .watches(
                Objects::<DynamicObject>::dynamic(gadgets, scope.clone()),
                |_| Vec::new(),
            )
            .filter_for_dynamic::<DynamicObject>(
                &resource("Doohickey", "doohickeys"),
                Filter::labels_changed(),
            )
            .filter_for::<ConfigMap>(Filter::generation_changed())
            .run(
                from_fn(|_, _| async { Ok::<_, String>(Action::await_change()) }),
                std::future::pending(),
            )
            .await;
    let Err(ControllerError::Misconfigured { problems, .. }) = refused else {
        panic!("expected a refusal, got {refused:?}");
    };
    let text = problems.join("\n");
    assert!(
        text.contains(
            "a filter for Doohickey was given, but the controller has no source of Doohickeys"
        ),
        "{text}"
    );
    assert!(text.contains("a filter for ConfigMap"), "{text}");
    assert!(
        text.contains("ConfigMaps have no metadata.generation"),
        "{text}"
    );
    assert!(!text.contains("Gadget"), "the gadgets are heard: {text}");
}
