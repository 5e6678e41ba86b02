//! Server-side apply cases of the conformance suite (`PATCH` with `application/apply-patch+yaml`):
//! field managers and their `managedFields`, conflicts and `force`, ownership moving between
//! appliers and updaters, fields removed when their last owner stops applying them, and lists
//! merged by their keys (built-in types and a CRD's `x-kubernetes-list-type: map`).
//!
//! Part of the conformance suite (`conformance.rs`, the parent module); each case runs on every target as the others do.

use super::*;

const APPLY: &str = "application/apply-patch+yaml";

/// [`managed`] rows of a 1.20 server as 1.37 records them, where `managers` last applied an empty
/// `labels: {}`: 1.20 recorded nothing for an applied empty map, 1.37 owns it as a field
/// (`f:metadata: {f:labels: {}}`). On a 1.20 target each Apply row of those managers must lack
/// `f:labels` (the documented 1.20 answer) and gets it; see [`documented_with`].
fn empty_labels_owned(t: &Target, rows: Value, managers: &[&str]) -> Value {
    documented_with(t, 20, rows, |rows| {
        let mut rows = rows.clone();
        for row in rows.as_array_mut()? {
            if row[1] != "Apply" || !managers.contains(&row[0].as_str()?) {
                continue;
            }
            let fields = row.get_mut(4)?.as_object_mut()?;
            let metadata = fields.entry("f:metadata").or_insert_with(|| json!({}));
            if metadata.get("f:labels").is_some() {
                return None;
            }
            metadata["f:labels"] = json!({});
        }
        Some(rows)
    })
}

/// [`managed`] rows of a 1.20 server as 1.37 records them for the Rack's preserved `extra`: 1.20
/// owned the undeclared object `extra.free` whole (`f:free: {}`); 1.37 gives it the deduced type,
/// owned itself and key by key (`f:free: {".": {}, f:form: {}}`; see the embedded server's
/// `apply::shape`). On a 1.20 target every row that owns `extra.free` must own it whole.
fn deduced_free_owned(t: &Target, rows: Value) -> Value {
    documented_with(t, 20, rows, |rows| {
        let mut rows = rows.clone();
        for row in rows.as_array_mut()? {
            let Some(free) = row[4].pointer_mut("/f:spec/f:extra/f:free") else {
                continue;
            };
            if *free != json!({}) {
                return None;
            }
            *free = json!({".": {}, "f:form": {}});
        }
        Some(rows)
    })
}

/// `PATCH path` as server-side apply of `body` (JSON, which is YAML) by `manager`, forced or not.
async fn apply(t: &Target, path: &str, manager: Option<&str>, force: bool, body: &Value) -> Seen {
    apply_text(t, path, manager, force, &body.to_string()).await
}

async fn apply_text(
    t: &Target,
    path: &str,
    manager: Option<&str>,
    force: bool,
    body: &str,
) -> Seen {
    let mut query = Vec::new();
    if let Some(manager) = manager {
        query.push(format!("fieldManager={manager}"));
    }
    if force {
        query.push("force=true".to_string());
    }
    let separator = if path.contains('?') { '&' } else { '?' };
    let url = if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}{separator}{}", query.join("&"))
    };
    t.raw(Method::PATCH, &url, APPLY, Some(body.to_string()))
        .await
}

/// An object's `managedFields` as `[manager, operation, apiVersion, fieldsType, fieldsV1, time]`
/// (time normalized by the suite to its shape), sorted by operation, manager and apiVersion.
/// Both servers order entries by when each last changed, to the second; two writes a test makes
/// in a row fall in one second or in two as the clock pleases, so the order is not compared.
fn managed(object: &Value) -> Value {
    let entries = object["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut rows: Vec<Value> = entries
        .iter()
        .map(|e| {
            json!([
                e["manager"],
                e["operation"],
                e["apiVersion"],
                e["fieldsType"],
                e["fieldsV1"],
                e["time"]
            ])
        })
        .collect();
    rows.sort_by_key(|row| format!("{} {} {}", row[1], row[0], row[2]));
    Value::Array(rows)
}

/// The Apply entries only (Update entries of built-in workloads also list the fields the server
/// defaulted, which are not what these cases compare).
fn applied(object: &Value) -> Value {
    let all = managed(object);
    Value::Array(
        all.as_array()
            .map(|entries| {
                entries
                    .iter()
                    .filter(|e| e[1] == "Apply")
                    .cloned()
                    .collect()
            })
            .unwrap_or_default(),
    )
}

/// A failed apply's Status, with its causes sorted (the real server lists the conflicts of several
/// managers in Go map order).
fn conflict(seen: &Seen) -> Value {
    let mut status = seen.status();
    if let Some(causes) = status["details"]["causes"].as_array_mut() {
        causes.sort_by_key(|c| c.to_string());
    }
    status
}

fn cm(name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels},
           "data": data})
}

/// One ConfigMap through two appliers and an updater: create on apply, conflicts, shared
/// ownership, force, an update taking a field, and fields removed when their last owner stops
/// applying them.
async fn apply_config_maps(t: &Target, ns: &str) -> Value {
    let url = format!("/api/v1/namespaces/{ns}/configmaps/a");
    let first = cm("a", json!({"team": "one"}), json!({"k": "1", "j": "2"}));
    let no_manager = apply(t, &url, None, false, &first).await;
    let created = apply(t, &url, Some("alice"), false, &first).await;
    let noop = apply(t, &url, Some("alice"), false, &first).await;
    // bob wants another value of alice's field: a conflict, nothing written.
    let clash = apply(
        t,
        &url,
        Some("bob"),
        false,
        &cm("a", json!({}), json!({"k": "9", "z": "3"})),
    )
    .await;
    let two = apply(
        t,
        &url,
        Some("bob"),
        false,
        &cm("a", json!({"team": "two"}), json!({"k": "9", "z": "3"})),
    )
    .await;
    // The same value: shared ownership.
    let shared = apply(
        t,
        &url,
        Some("bob"),
        false,
        &cm("a", json!({}), json!({"k": "1", "z": "3"})),
    )
    .await;
    // Forced: bob takes `j` from alice.
    let forced = apply(
        t,
        &url,
        Some("bob"),
        true,
        &cm("a", json!({}), json!({"k": "1", "z": "3", "j": "5"})),
    )
    .await;
    // An update (merge patch, no fieldManager: the User-Agent's product) takes `z` from bob.
    let updated = t
        .call(Method::PATCH, &url, Some(json!({"data": {"z": "4"}})))
        .await;
    let updated_named = t
        .call(
            Method::PATCH,
            &format!("{url}?fieldManager=carol"),
            Some(json!({"data": {"c": "1"}})),
        )
        .await;
    // alice stops applying everything but `k`: her label goes (no one else owns it); `k` stays.
    let shrunk = apply(
        t,
        &url,
        Some("alice"),
        false,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "a"}, "data": {"k": "1"}}),
    )
    .await;
    // bob stops applying: `j` goes (only bob owned it since the force), `k` stays (alice), `z`
    // stays (the updater took it).
    let bob_left = apply(
        t,
        &url,
        Some("bob"),
        false,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "a"}}),
    )
    .await;
    json!({
        "noManager": no_manager.status(),
        "created": [created.code, created.body["data"], created.body["metadata"]["labels"], managed(&created.body)],
        "noop": [noop.code, noop.rv() == created.rv(), managed(&noop.body)],
        "clash": conflict(&clash),
        "two": conflict(&two),
        // bob's applies from `shared` on carry `labels: {}`.
        "shared": [shared.code, shared.body["data"], empty_labels_owned(t, managed(&shared.body), &["bob"])],
        "forced": [forced.code, forced.body["data"], empty_labels_owned(t, managed(&forced.body), &["bob"])],
        "updated": [updated.code, updated.body["data"], empty_labels_owned(t, managed(&updated.body), &["bob"])],
        "updatedNamed": [updated_named.code, empty_labels_owned(t, managed(&updated_named.body), &["bob"])],
        "shrunk": [shrunk.code, shrunk.body["data"], shrunk.body["metadata"].get("labels"),
                   empty_labels_owned(t, managed(&shrunk.body), &["bob"])],
        "bobLeft": [bob_left.code, bob_left.body["data"], managed(&bob_left.body)],
    })
}
conformance!(server_side_apply_config_maps, apply_config_maps);

/// Requests that are not valid applies, and how updates by other means are recorded.
async fn apply_requests(t: &Target, ns: &str) -> Value {
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let url = format!("{cms}/r");
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r\n  labels:\n    tier: \"web\"\ndata:\n  k: \"1\"\n";
    let from_yaml = apply_text(t, &url, Some("yaml"), false, yaml).await;
    let wrong_name = apply(
        t,
        &url,
        Some("x"),
        false,
        &cm("other", json!({}), json!({})),
    )
    .await;
    let no_kind = apply(
        t,
        &url,
        Some("x"),
        false,
        &json!({"metadata": {"name": "r"}, "data": {"k": "2"}}),
    )
    .await;
    let garbage = apply_text(t, &url, Some("x"), false, "{not: [yaml").await;
    let with_managed = apply(
        t,
        &url,
        Some("x"),
        false,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "r", "managedFields": [{"manager": "x", "operation": "Apply"}]}}),
    )
    .await;
    let force_on_merge = t
        .call(
            Method::PATCH,
            &format!("{url}?force=true"),
            Some(json!({"data": {"k": "2"}})),
        )
        .await;
    let put = {
        let mut object = from_yaml.body.clone();
        object["data"]["k"] = json!("3");
        object["data"]["new"] = json!("n");
        t.call(
            Method::PUT,
            &format!("{url}?fieldManager=putter"),
            Some(object),
        )
        .await
    };
    let posted = t
        .call(
            Method::POST,
            &cms,
            Some(json!({"metadata": {"name": "p", "labels": {"x": "1"},
            "annotations": {"a": "b"}}, "data": {"k": "1"}})),
        )
        .await;
    let dry = apply(
        t,
        &format!("{cms}/dry?dryRun=All"),
        Some("d"),
        false,
        &cm("dry", json!({}), json!({"k": "1"})),
    )
    .await;
    let dry_gone = t.call(Method::GET, &format!("{cms}/dry"), None).await;
    json!({
        "fromYaml": [from_yaml.code, from_yaml.body["data"], managed(&from_yaml.body)],
        "wrongName": wrong_name.status(),
        // The version check of an applied configuration compares its group, version and kind at once
        // since 1.2x (k8s.io/apimachinery's managedfields versionCheckManager), naming what it got;
        // 1.20 checked the apiVersion first, in the patch handler, with its own wording.
        "noKind": documented(t, ns, 20, no_kind.status(),
            json!({"code": 400, "reason": "BadRequest", "details": null,
                   "message": "Incorrect version specified in apply patch. Specified patch version: , expected: v1"}),
            json!({"code": 400, "reason": "BadRequest", "details": null,
                   "message": "invalid object type: /, Kind="})),
        "garbage": [garbage.code, garbage.reason()],
        "withManaged": with_managed.status(),
        "forceOnMerge": force_on_merge.status(),
        "put": [put.code, managed(&put.body)],
        "posted": [posted.code, managed(&posted.body)],
        "dry": [dry.code, dry.body["data"], empty_labels_owned(t, managed(&dry.body), &["d"]), dry.status()],
        "dryGone": dry_gone.code,
    })
}
conformance!(server_side_apply_requests, apply_requests);

fn deployment(containers: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": containers}}}})
}

/// Lists merged by their keys in a Deployment's pod template: containers by name, ports by
/// containerPort and protocol, env by name; `args` is atomic.
async fn apply_lists(t: &Target, ns: &str) -> Value {
    let url = format!("/apis/apps/v1/namespaces/{ns}/deployments/web");
    let created = apply(t, &url, Some("alice"), false, &deployment(json!([
        {"name": "c", "image": "registry.invalid/c:1", "args": ["a", "b"],
         "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 53, "protocol": "UDP"}],
         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]))).await;
    let sidecar = apply(
        t,
        &url,
        Some("bob"),
        false,
        &deployment(json!([
        {"name": "c", "env": [{"name": "Z", "value": "9"}]},
        {"name": "s", "image": "registry.invalid/s:1"}])),
    )
    .await;
    // One conflict: kube-apiserver 1.20 garbles the paths of several conflicts under one list item
    // (see the crate docs), so this case has only one.
    let clash = apply(
        t,
        &url,
        Some("bob"),
        false,
        &deployment(json!([
        {"name": "c", "image": "registry.invalid/c:2", "env": [{"name": "Z", "value": "9"}]},
        {"name": "s", "image": "registry.invalid/s:1"}])),
    )
    .await;
    // alice drops env B and port 53 and replaces args: B and 53 go, args is replaced whole.
    let shrunk = apply(
        t,
        &url,
        Some("alice"),
        false,
        &deployment(json!([
        {"name": "c", "image": "registry.invalid/c:1", "args": ["z"],
         "ports": [{"containerPort": 80, "protocol": "TCP"}],
         "env": [{"name": "A", "value": "1"}]}])),
    )
    .await;
    let no_protocol = apply(
        t,
        &url,
        Some("carol"),
        false,
        &deployment(json!([
        {"name": "c", "ports": [{"containerPort": 8080}]}])),
    )
    .await;
    let containers = |seen: &Seen| -> Value {
        let list = seen.body["spec"]["template"]["spec"]["containers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        Value::Array(
            list.iter()
                .map(|c| json!([c["name"], c["image"], c["args"], c["ports"], c["env"]]))
                .collect(),
        )
    };
    json!({
        "created": [created.code, containers(&created), applied(&created.body)],
        "sidecar": [sidecar.code, containers(&sidecar), applied(&sidecar.body)],
        "clash": conflict(&clash),
        "shrunk": [shrunk.code, containers(&shrunk), applied(&shrunk.body)],
        "noProtocol": [no_protocol.code, containers(&no_protocol), applied(&no_protocol.body)],
    })
}
conformance!(server_side_apply_merges_lists_by_key, apply_lists);

/// A CRD's lists: `x-kubernetes-list-type: map` merges by its keys, `set` by value, and a list
/// without a type is atomic.
async fn apply_custom_lists(t: &Target, ns: &str) -> Value {
    let group = format!("{ns}.ferrokube.example");
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("racks.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "racks", "kind": "Rack"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer"},
                        "slots": {"type": "array", "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["row", "col"],
                            "items": {"type": "object", "required": ["row", "col"], "properties": {
                                "row": {"type": "integer"}, "col": {"type": "string"},
                                "item": {"type": "string"}}}},
                        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                        "notes": {"type": "array", "items": {"type": "string"}},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}}]}});
    let created_crd = t.call(Method::POST, crds, Some(crd)).await;
    assert_eq!(created_crd.code, 201, "{}: {:?}", t.name, created_crd.body);
    let crd_url = format!("{crds}/racks.{group}");
    wait_for(t, &crd_url, |s| is_established(&s.body)).await;
    wait_for(t, &format!("/apis/{group}/v1"), |s| s.code == 200).await;
    let url = format!("/apis/{group}/v1/namespaces/{ns}/racks/r");
    let rack = |spec: Value| {
        json!({"apiVersion": format!("{group}/v1"), "kind": "Rack",
        "metadata": {"name": "r"}, "spec": spec})
    };
    // The real server builds the kind's apply schema a moment after it is served: retry briefly.
    let mut created = apply(
        t,
        &url,
        Some("alice"),
        false,
        &rack(json!({"size": 1,
        "slots": [{"row": 1, "col": "a", "item": "x"}], "tags": ["t1"], "notes": ["n1", "n2"],
        "extra": {"free": {"form": [1, 2]}}})),
    )
    .await;
    for _ in 0..50 {
        if created.code != 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        created = apply(
            t,
            &url,
            Some("alice"),
            false,
            &rack(json!({"size": 1,
            "slots": [{"row": 1, "col": "a", "item": "x"}], "tags": ["t1"], "notes": ["n1", "n2"],
            "extra": {"free": {"form": [1, 2]}}})),
        )
        .await;
    }
    let bob = apply(
        t,
        &url,
        Some("bob"),
        false,
        &rack(json!({
        "slots": [{"row": 2, "col": "b", "item": "y"}], "tags": ["t2"]})),
    )
    .await;
    let notes = apply(
        t,
        &url,
        Some("bob"),
        false,
        &rack(json!({
        "slots": [{"row": 2, "col": "b", "item": "y"}], "tags": ["t2"], "notes": ["mine"]})),
    )
    .await;
    let clash = apply(t, &url, Some("bob"), false, &rack(json!({
        "slots": [{"row": 1, "col": "a", "item": "z"}, {"row": 2, "col": "b", "item": "y"}], "tags": ["t2"]}))).await;
    let forced = apply(t, &url, Some("bob"), true, &rack(json!({
        "slots": [{"row": 1, "col": "a", "item": "z"}, {"row": 2, "col": "b", "item": "y"}], "tags": ["t2"],
        "notes": ["mine"]}))).await;
    // A create that is not an apply: the updater owns `spec` itself too (a custom object starts
    // from nothing).
    let posted = t
        .call(
            Method::POST,
            &format!("/apis/{group}/v1/namespaces/{ns}/racks"),
            Some(json!({"apiVersion": format!("{group}/v1"), "kind": "Rack",
                "metadata": {"name": "p", "labels": {"a": "b"}},
                "spec": {"size": 2, "slots": [{"row": 1, "col": "a"}], "notes": ["n"]}})),
        )
        .await;
    t.call(Method::DELETE, &crd_url, None).await;
    json!({
        "created": [created.code, created.body["spec"], deduced_free_owned(t, managed(&created.body))],
        "bob": [bob.code, bob.body["spec"], deduced_free_owned(t, managed(&bob.body))],
        "notes": conflict(&notes),
        "clash": conflict(&clash),
        "forced": [forced.code, forced.body["spec"], deduced_free_owned(t, managed(&forced.body))],
        "posted": [posted.code, managed(&posted.body)],
    })
}
conformance!(server_side_apply_custom_resource_lists, apply_custom_lists);
