//! Fidelity cases of the conformance suite: behaviours controller-runtime's own envtest suites
//! (scripts/fidelity.sh) rely on, where the embedded server once differed from kube-apiserver 1.37:
//! aggregated discovery, metadata-only answers, field validation, list items, dry runs. Each case
//! runs on every target as the others do, and also looks at response headers (`Content-Type`,
//! `Warning`), which [`Seen`] does not keep.
//!
//! Part of the conformance suite (`conformance.rs`, the parent module).

use super::*;

/// What a client saw of one request, headers included.
struct Exchange {
    code: u16,
    content_type: String,
    /// Every `Warning` header, in order.
    warnings: Vec<String>,
    body: Value,
}

impl Exchange {
    fn status(&self) -> Value {
        json!({"code": self.code, "reason": self.body["reason"], "message": self.body["message"]})
    }
}

/// `method path` with `content_type` and `accept`; a refusal is reported as its Status.
async fn exchange(
    t: &Target,
    method: Method,
    path: &str,
    content_type: &str,
    accept: &str,
    body: Option<String>,
) -> Exchange {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("accept", accept)
        .body(Bytes::from(body.unwrap_or_default()))
        .expect("request");
    let call = Call {
        request,
        idempotent: false,
        streaming: false,
    };
    match t.client.send(call).await {
        Ok(response) => {
            let code = response.status().as_u16();
            let headers = response.headers();
            let content_type = headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let warnings = headers
                .get_all("warning")
                .iter()
                .filter_map(|v| v.to_str().ok().map(str::to_string))
                .collect();
            let bytes = response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes();
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            Exchange {
                code,
                content_type,
                warnings,
                body,
            }
        }
        Err(error) => {
            let api = error.api().unwrap_or_else(|| panic!("{}: {error}", t.name));
            Exchange {
                code: api.code,
                content_type: String::new(),
                warnings: Vec::new(),
                body: json!({"reason": format!("{:?}", api.reason), "message": api.message}),
            }
        }
    }
}

/// What client-go sends for discovery (its aggregated forms first, then the legacy one).
const DISCOVERY_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

/// The entry of `resource` in an aggregated discovery version.
fn discovered<'a>(version: &'a Value, resource: &str) -> &'a Value {
    version["resources"]
        .as_array()
        .and_then(|all| all.iter().find(|r| r["resource"] == resource))
        .unwrap_or(&Value::Null)
}

async fn aggregated_discovery(t: &Target, _ns: &str) -> Value {
    let get = |path: &'static str, accept: &'static str| {
        exchange(t, Method::GET, path, "application/json", accept, None)
    };
    let core = get("/api", DISCOVERY_ACCEPT).await;
    assert_eq!(core.code, 200, "{}: {:?}", t.name, core.body);
    let core_v1 = &core.body["items"][0]["versions"][0];
    let groups = get("/apis", DISCOVERY_ACCEPT).await;
    let apps = groups.body["items"]
        .as_array()
        .and_then(|items| items.iter().find(|g| g["metadata"]["name"] == "apps"))
        .cloned()
        .unwrap_or(Value::Null);
    let apps_v1 = &apps["versions"][0];
    let mut deployments = discovered(apps_v1, "deployments").clone();
    // The subresources other than /status and /scale are another piece of work; compare those two.
    if let Some(subs) = deployments["subresources"].as_array_mut() {
        subs.retain(|s| s["subresource"] == "status" || s["subresource"] == "scale");
    }
    let beta_only = get(
        "/api",
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
    )
    .await;
    let legacy = get("/apis", "application/json").await;
    for answer in [&core, &groups] {
        assert_eq!(
            (answer.content_type.as_str(), &answer.body["kind"]),
            (
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
                &json!("APIGroupDiscoveryList")
            ),
            "{}: aggregated discovery",
            t.name
        );
    }
    assert_eq!(
        discovered(core_v1, "configmaps")["scope"],
        "Namespaced",
        "{}",
        t.name
    );
    assert_eq!(legacy.body["kind"], "APIGroupList", "{}", t.name);
    json!({
        "core": [core.content_type, core.body["kind"], core.body["apiVersion"], core.body["metadata"],
                 core.body["items"][0]["metadata"], core_v1["version"], core_v1["freshness"],
                 discovered(core_v1, "configmaps")],
        "apps": [groups.content_type, groups.body["kind"], apps["versions"].as_array().map(Vec::len),
                 apps_v1["version"], apps_v1["freshness"], deployments],
        "beta_only": [beta_only.content_type, beta_only.body["kind"]],
        "legacy": [legacy.content_type, legacy.body["kind"]],
    })
}
conformance!(fidelity_aggregated_discovery, aggregated_discovery);

const PARTIAL: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
const PARTIAL_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

/// The keys of an object, sorted: what a metadata-only answer keeps.
fn keys(object: &Value) -> Vec<String> {
    let mut keys: Vec<String> = object
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    keys.sort();
    keys
}

async fn metadata_only(t: &Target, ns: &str) -> Value {
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let mut cm = config_map("meta", "1");
    cm["metadata"]["labels"] = json!({"app": "meta"});
    let created = t.call(Method::POST, &cms, Some(cm)).await;
    assert_eq!(created.code, 201, "{}: {:?}", t.name, created.body);
    let url = format!("{cms}/meta");
    let json = "application/json";
    let got = exchange(t, Method::GET, &url, json, PARTIAL, None).await;
    let listed = exchange(t, Method::GET, &cms, json, PARTIAL_LIST, None).await;
    let list_as_object = exchange(t, Method::GET, &cms, json, PARTIAL, None).await;
    let object_as_list = exchange(t, Method::GET, &url, json, PARTIAL_LIST, None).await;
    let patch = json!({"metadata": {"annotations": {"seen": "yes"}}}).to_string();
    let merge = "application/merge-patch+json";
    let patched = exchange(t, Method::PATCH, &url, merge, PARTIAL, Some(patch)).await;
    // A metadata-only watch from before the create: its ADDED and MODIFIED events.
    let from = created.rv() - 1;
    let watched = t
        .watch_accepting(
            &format!("{cms}?watch=1&resourceVersion={from}"),
            Some(PARTIAL),
            2,
            Duration::from_secs(10),
        )
        .await;
    for (what, answer, kind) in [
        ("get", &got.body, "PartialObjectMetadata"),
        ("list", &listed.body, "PartialObjectMetadataList"),
        ("patch", &patched.body, "PartialObjectMetadata"),
    ] {
        assert_eq!(answer["kind"], kind, "{}: {what}: {answer}", t.name);
    }
    assert_eq!(list_as_object.code, 406, "{}", t.name);
    assert_eq!(watched.len(), 2, "{}: {watched:?}", t.name);
    for (kind, object) in &watched {
        assert_eq!(
            (object["kind"].as_str(), object.get("data")),
            (Some("PartialObjectMetadata"), None),
            "{}: {kind}",
            t.name
        );
    }
    json!({
        "get": [got.code, got.body["kind"], got.body["apiVersion"], keys(&got.body),
                got.body["metadata"]["name"], got.body["metadata"]["labels"]],
        "list": [listed.code, listed.body["kind"], listed.body["apiVersion"], keys(&listed.body["metadata"]),
                 listed.body["items"][0]["kind"], keys(&listed.body["items"][0])],
        "list_as_object": list_as_object.status(),
        "object_as_list": object_as_list.status(),
        "patch": [patched.code, patched.body["kind"], keys(&patched.body),
                  patched.body["metadata"]["annotations"]],
        "watch": watched.iter()
            .map(|(kind, object)| json!([kind, object["kind"], object["apiVersion"], keys(object)]))
            .collect::<Vec<_>>(),
    })
}
conformance!(fidelity_metadata_only_answers, metadata_only);

/// A write with unknown fields under each `fieldValidation`: what it answered, which warnings it
/// sent, and whether the stored object kept them.
async fn judged(t: &Target, url: &str, directive: &str, body: &Value) -> Value {
    let query = if directive.is_empty() {
        String::new()
    } else {
        format!("?fieldValidation={directive}")
    };
    let json = "application/json";
    let seen = exchange(
        t,
        Method::POST,
        &format!("{url}{query}"),
        json,
        json,
        Some(body.to_string()),
    )
    .await;
    let kept = seen.body.get("extra").is_some()
        || seen.body["metadata"].get("foo").is_some()
        || seen.body["spec"].get("bogus").is_some();
    json!([seen.status(), seen.warnings, kept])
}

async fn unknown_fields(t: &Target, ns: &str) -> Value {
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let mut outcomes = serde_json::Map::new();
    for (i, directive) in ["Strict", "Warn", "Ignore", ""].into_iter().enumerate() {
        let mut cm = config_map(&format!("cm-{i}"), "1");
        cm["extra"] = json!("test");
        cm["metadata"]["foo"] = json!("x");
        outcomes.insert(
            format!("configmap {directive}"),
            judged(t, &cms, directive, &cm).await,
        );
    }
    let strict = &outcomes["configmap Strict"];
    assert_eq!(strict[0]["code"], 400, "{}: {strict}", t.name);
    let warned = &outcomes["configmap Warn"];
    assert_eq!(
        warned[1].as_array().map(Vec::len),
        Some(2),
        "{}: {warned}",
        t.name
    );
    assert_eq!(warned[2], false, "{}: {warned}", t.name);
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("{ns}-node")},
                      "spec": {"invalidField": "value"}});
    let node_strict = exchange(
        t,
        Method::POST,
        "/api/v1/nodes?dryRun=All&fieldValidation=Strict",
        "application/json",
        "application/json",
        Some(node.to_string()),
    )
    .await;
    outcomes.insert("node Strict".into(), node_strict.status());
    // A custom resource: what its schema does not declare is unknown (metadata too).
    let group = format!("{ns}.ferrokube.example");
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let crd_url = format!("{crds}/widgets.{group}");
    let created_crd = t.call(Method::POST, crds, Some(widget_crd(&group))).await;
    assert_eq!(created_crd.code, 201, "{}: {:?}", t.name, created_crd.body);
    wait_for(t, &crd_url, |s| is_established(&s.body)).await;
    let widgets = format!("/apis/{group}/v1/namespaces/{ns}/widgets");
    wait_for(t, &widgets, |s| s.code == 200).await;
    for (i, directive) in ["Strict", "Warn", "Ignore"].into_iter().enumerate() {
        let mut w = widget(
            &group,
            &format!("w-{i}"),
            json!({"size": 1, "bogus": 1, "free": {"z": 1}}),
        );
        w["metadata"]["foo"] = json!("x");
        outcomes.insert(
            format!("widget {directive}"),
            judged(t, &widgets, directive, &w).await,
        );
    }
    let deleted = t.call(Method::DELETE, &crd_url, None).await;
    assert_eq!(deleted.code, 200, "{}: {:?}", t.name, deleted.body);
    Value::Object(outcomes)
}
conformance!(fidelity_unknown_fields_by_field_validation, unknown_fields);

/// An empty string is a string: a custom object's `name: ""` is stored as it is (1.20 took it for
/// `null` and refused it).
async fn empty_string_in_custom_object(t: &Target, ns: &str) -> Value {
    let group = format!("{ns}.ferrokube.example");
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let crd_url = format!("{crds}/widgets.{group}");
    let created_crd = t.call(Method::POST, crds, Some(widget_crd(&group))).await;
    assert_eq!(created_crd.code, 201, "{}: {:?}", t.name, created_crd.body);
    wait_for(t, &crd_url, |s| is_established(&s.body)).await;
    let widgets = format!("/apis/{group}/v1/namespaces/{ns}/widgets");
    wait_for(t, &widgets, |s| s.code == 200).await;
    let empty = widget(&group, "empty", json!({"size": 1, "name": ""}));
    let created = t.call(Method::POST, &widgets, Some(empty)).await;
    assert_eq!(created.code, 201, "{}: {:?}", t.name, created.body);
    let wrong = widget(&group, "wrong", json!({"size": ""}));
    let refused = t.call(Method::POST, &widgets, Some(wrong)).await;
    let deleted = t.call(Method::DELETE, &crd_url, None).await;
    assert_eq!(deleted.code, 200, "{}: {:?}", t.name, deleted.body);
    json!({"created": [created.code, created.body["spec"]], "refused": refused.status()})
}
conformance!(
    fidelity_empty_string_in_custom_object,
    empty_string_in_custom_object
);
