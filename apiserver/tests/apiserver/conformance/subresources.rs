//! Cases from what controller-runtime's own envtest suites need of a server beyond plain CRUD:
//! the subresources of pods (`binding`, `eviction`, `ephemeralcontainers`, `log`, `exec`), of
//! service accounts (`token`), of CertificateSigningRequests (`approval`) and of custom resources
//! (`scale`), server-side apply on `/status` and `/scale`, and every resource type kube-apiserver
//! 1.37 lists in discovery (RBAC, PersistentVolumes, StatefulSets, `resource.k8s.io`, ...).
//! Compared with kube-apiserver like every other case.
//!
//! Part of the conformance suite (`conformance.rs`, the parent module).

use super::*;

/// A PEM certificate request (`CN=ferrokube-test`, P-256), as a CSR's `spec.request` carries it.
const CSR_REQUEST: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlIVE1Ic0NBUUF3R1RFWE1CVUdBMVVFQXd3T1ptVnljbTlyZFdKbExYUmxjM1F3V1RBVEJnY3Foa2pPUFFJQgpCZ2dxaGtqT1BRTUJCd05DQUFSc25jbmpFclhkR0FQdFE4UnQvTmlHczQ2U0QxZGo2NUJtem8xVkJ1WjQ1K2JkCncwVFFjZFk2MlZTMm51akszWmZQM0RQRjJxUU5zRWFOUE5PT01RcWFvQUF3Q2dZSUtvWkl6ajBFQXdJRFNBQXcKUlFJZ0h6eDErVU5mSDQ3VlZUa0xFTUFFYzgvVVJMa1hTZFV3TUdwM3JBOUFFRVlDSVFEUGtwUDg2cUNHYmNrYwo3MWhWdmMwNGlpN2RiV09jcHR5MEoyRmhyK3M1MXc9PQotLS0tLUVORCBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K";

/// Every resource of every group version the server lists (`/api/v1`, `/apis/{g}/{v}`), as
/// `[name, kind, namespaced, verbs, group, version, shortNames, categories]`, sorted; the groups of
/// the CRDs the suites create (`*.ferrokube.*`, `*.example`, `*.test`) left out.
async fn every_resource(t: &Target) -> Vec<Value> {
    let mut versions = vec!["/api/v1".to_string()];
    let groups = t.call(Method::GET, "/apis", None).await;
    for group in groups.body["groups"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        // Other cases' CRDs come and go meanwhile (`*.ferrokube.*`, `*.example`, `*.test`).
        if group["name"].as_str().is_some_and(|g| {
            g.contains("ferrokube") || g.ends_with(".example") || g.ends_with(".test")
        }) {
            continue;
        }
        for version in group["versions"].as_array().cloned().unwrap_or_default() {
            if let Some(gv) = version["groupVersion"].as_str() {
                versions.push(format!("/apis/{gv}"));
            }
        }
    }
    let mut rows = Vec::new();
    for path in versions {
        let list = t.call(Method::GET, &path, None).await;
        assert_eq!(list.code, 200, "{}: {path}: {:?}", t.name, list.body);
        for r in list.body["resources"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let mut verbs: Vec<String> = r["verbs"]
                .as_array()
                .map(|v| {
                    v.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            verbs.sort();
            let or_empty = |v: &Value| if v.is_null() { json!([]) } else { v.clone() };
            rows.push(json!([
                format!("{path} {}", r["name"].as_str().unwrap_or("")),
                r["kind"],
                r["namespaced"],
                verbs.join(","),
                r.get("group").cloned().unwrap_or(Value::Null),
                r.get("version").cloned().unwrap_or(Value::Null),
                or_empty(&r["shortNames"]),
                or_empty(&r["categories"]),
            ]));
        }
    }
    rows.sort_by_key(|r| r[0].to_string());
    rows
}

async fn discovery_of_everything(t: &Target, _ns: &str) -> Value {
    json!(every_resource(t).await)
}
conformance!(
    fidelity_discovery_lists_every_resource_of_1_37,
    discovery_of_everything,
    current_release_only
);

/// A write of `body` to `path` (POST) and a read back: the codes, and the kind read.
async fn stored_kind(t: &Target, path: &str, name: &str, body: Value) -> Value {
    let created = t.call(Method::POST, path, Some(body)).await;
    let read = t.call(Method::GET, &format!("{path}/{name}"), None).await;
    let listed = t.call(Method::GET, path, None).await;
    json!([
        created.code,
        read.code,
        read.body["kind"],
        listed.body["kind"]
    ])
}

async fn more_resource_types(t: &Target, ns: &str) -> Value {
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let rule = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]);
    let subject = json!([{"kind": "ServiceAccount", "name": "default", "namespace": ns}]);
    let cluster_role = stored_kind(
        t,
        &format!("{rbac}/clusterroles"),
        &format!("{ns}-reader"),
        json!({"metadata": {"name": format!("{ns}-reader")}, "rules": rule}),
    )
    .await;
    let role = stored_kind(
        t,
        &format!("{rbac}/namespaces/{ns}/roles"),
        "reader",
        json!({"metadata": {"name": "reader"}, "rules": rule}),
    )
    .await;
    let role_binding = stored_kind(
        t,
        &format!("{rbac}/namespaces/{ns}/rolebindings"),
        "read",
        json!({"metadata": {"name": "read"}, "subjects": subject,
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}}),
    )
    .await;
    let cluster_binding = stored_kind(
        t,
        &format!("{rbac}/clusterrolebindings"),
        &format!("{ns}-read"),
        json!({"metadata": {"name": format!("{ns}-read")}, "subjects": subject,
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": format!("{ns}-reader")}}),
    )
    .await;
    let core = format!("/api/v1/namespaces/{ns}");
    let endpoints = stored_kind(
        t,
        &format!("{core}/endpoints"),
        "web",
        json!({"metadata": {"name": "web"}}),
    )
    .await;
    let template = stored_kind(
        t,
        &format!("{core}/podtemplates"),
        "tpl",
        json!({"metadata": {"name": "tpl"}, "template": {"metadata": {"labels": {"a": "b"}},
               "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}),
    )
    .await;
    let limits = stored_kind(
        t,
        &format!("{core}/limitranges"),
        "limits",
        json!({"metadata": {"name": "limits"}, "spec": {"limits": [{"type": "Container",
               "max": {"cpu": "1"}}]}}),
    )
    .await;
    let claim = stored_kind(
        t,
        &format!("{core}/persistentvolumeclaims"),
        "data",
        json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
               "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    let volume = stored_kind(
        t,
        "/api/v1/persistentvolumes",
        &format!("{ns}-pv"),
        json!({"metadata": {"name": format!("{ns}-pv")}, "spec": {"capacity": {"storage": "1Gi"},
               "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/pv"}}}),
    )
    .await;
    let sets = stored_kind(
        t,
        &format!("/apis/apps/v1/namespaces/{ns}/statefulsets"),
        "db",
        json!({"metadata": {"name": "db"}, "spec": {"serviceName": "db",
               "selector": {"matchLabels": {"app": "db"}},
               "template": {"metadata": {"labels": {"app": "db"}},
                            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}),
    )
    .await;
    let classes = stored_kind(
        t,
        "/apis/resource.k8s.io/v1/deviceclasses",
        &format!("{ns}-gpu"),
        json!({"metadata": {"name": format!("{ns}-gpu")}}),
    )
    .await;
    // RBAC names are path segments, not DNS names.
    let roles = format!("{rbac}/namespaces/{ns}/roles");
    let upper = t
        .call(
            Method::POST,
            &roles,
            Some(json!({"metadata": {"name": "system:Reader_1"}, "rules": rule})),
        )
        .await;
    let dots = t
        .call(
            Method::POST,
            &roles,
            Some(json!({"metadata": {"name": ".."}, "rules": rule})),
        )
        .await;
    let statuses = t.call(Method::GET, "/api/v1/componentstatuses", None).await;
    let status_create = t
        .call(
            Method::POST,
            "/api/v1/componentstatuses",
            Some(json!({"metadata": {"name": "x"}})),
        )
        .await;
    json!({
        "clusterRole": cluster_role, "role": role, "roleBinding": role_binding,
        "clusterRoleBinding": cluster_binding, "endpoints": endpoints, "podTemplate": template,
        "limitRange": limits, "pvc": claim, "pv": volume, "statefulSet": sets,
        "deviceClass": classes,
        "componentStatuses": [statuses.code, statuses.body["kind"]],
        "componentStatusCreate": status_create.code,
        "roleNames": [upper.code, dots.status()],
    })
}
conformance!(
    fidelity_rbac_and_the_other_resource_types,
    more_resource_types,
    current_release_only
);

fn pod_named(name: &str, labels: Value) -> Value {
    json!({"metadata": {"name": name, "labels": labels},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

/// The `[manager, operation, subresource, fieldsV1]` of the entries of `manager`.
fn entries_of(object: &Value, manager: &str) -> Vec<Value> {
    object["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .filter(|e| e["manager"] == manager)
                .map(|e| {
                    json!([
                        e["manager"],
                        e["operation"],
                        e["subresource"],
                        e["fieldsV1"]
                    ])
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn apply_status_and_scale(t: &Target, ns: &str) -> Value {
    let deployments = format!("/apis/apps/v1/namespaces/{ns}/deployments");
    let url = format!("{deployments}/web");
    let deployment = json!({"metadata": {"name": "web"}, "spec": {"replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
    let created = t.call(Method::POST, &deployments, Some(deployment)).await;
    assert_eq!(created.code, 201, "{}: {:?}", t.name, created.body);
    let apply = |path: String, body: Value, query: &'static str| async move {
        t.raw(
            Method::PATCH,
            &format!("{path}?fieldManager=foo{query}"),
            "application/apply-patch+yaml",
            Some(body.to_string()),
        )
        .await
    };
    let status = apply(
        format!("{url}/status"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": 5}, "status": {"replicas": 1}}),
        "",
    )
    .await;
    let scale = apply(
        format!("{url}/scale"),
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"},
               "spec": {"replicas": 3}}),
        "&force=true",
    )
    .await;
    let after = t.call(Method::GET, &url, None).await;
    let wrong_kind = apply(
        format!("{url}/scale"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": 3}}),
        "",
    )
    .await;
    let missing = apply(
        format!("{deployments}/absent/status"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "absent"},
               "status": {"replicas": 1}}),
        "",
    )
    .await;
    json!({
        "status": [status.code, status.body["kind"], status.body["spec"]["replicas"],
                   status.body["status"]["replicas"]],
        "statusEntries": entries_of(&status.body, "foo"),
        "scale": [scale.code, scale.body["kind"], scale.body["spec"], scale.body["status"]["replicas"]],
        "after": [after.body["spec"]["replicas"], after.body["status"]["replicas"],
                  after.body["metadata"]["generation"]],
        "afterEntries": entries_of(&after.body, "foo"),
        "wrongKind": [wrong_kind.code, wrong_kind.reason()],
        "missing": missing.status(),
    })
}
conformance!(
    fidelity_server_side_apply_on_status_and_scale,
    apply_status_and_scale,
    current_release_only
);

async fn pod_subresources(t: &Target, ns: &str) -> Value {
    let pods = format!("/api/v1/namespaces/{ns}/pods");
    for name in ["a", "b", "c", "d"] {
        let created = t
            .call(
                Method::POST,
                &pods,
                Some(pod_named(name, json!({"app": name}))),
            )
            .await;
        assert_eq!(created.code, 201, "{}: {:?}", t.name, created.body);
    }
    let log_unbound = t.call(Method::GET, &format!("{pods}/a/log"), None).await;
    let exec_get = t
        .call(
            Method::GET,
            &format!("{pods}/a/exec?command=ls&stdout=true"),
            None,
        )
        .await;
    let exec_post = t
        .call(
            Method::POST,
            &format!("{pods}/a/exec?command=ls&stdout=true"),
            None,
        )
        .await;
    let node = format!("{ns}-node");
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "a"},
                         "target": {"kind": "Node", "name": node}});
    let bound = t
        .call(
            Method::POST,
            &format!("{pods}/a/binding"),
            Some(binding.clone()),
        )
        .await;
    let rebound = t
        .call(Method::POST, &format!("{pods}/a/binding"), Some(binding))
        .await;
    let bound_pod = t.call(Method::GET, &format!("{pods}/a"), None).await;
    let log_bound = t.call(Method::GET, &format!("{pods}/a/log"), None).await;
    let bind_missing = t
        .call(
            Method::POST,
            &format!("{pods}/absent/binding"),
            Some(
                json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "absent"},
                        "target": {"kind": "Node", "name": node}}),
            ),
        )
        .await;
    let ephemeral = t
        .call(Method::GET, &format!("{pods}/b/ephemeralcontainers"), None)
        .await;
    let debug = t
        .raw(
            Method::PATCH,
            &format!("{pods}/b/ephemeralcontainers"),
            "application/strategic-merge-patch+json",
            Some(
                json!({"spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox",
                    "terminationMessagePolicy": "File", "imagePullPolicy": "Always"}]}})
                .to_string(),
            ),
        )
        .await;
    let debugged = t.call(Method::GET, &format!("{pods}/b"), None).await;
    let eviction = |name: &str| {
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name},
               "deleteOptions": {"gracePeriodSeconds": 0}})
    };
    let evicted = t
        .call(
            Method::POST,
            &format!("{pods}/c/eviction"),
            Some(eviction("c")),
        )
        .await;
    let gone = t.call(Method::GET, &format!("{pods}/c"), None).await;
    let evict_missing = t
        .call(
            Method::POST,
            &format!("{pods}/absent/eviction"),
            Some(eviction("absent")),
        )
        .await;
    // A pending pod is evicted whatever its budgets say: d runs.
    let running = t
        .call(
            Method::PATCH,
            &format!("{pods}/d/status"),
            Some(json!({"status": {"phase": "Running"}})),
        )
        .await;
    assert_eq!(running.code, 200, "{}: {:?}", t.name, running.body);
    let pdbs = format!("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets");
    let pdb = t
        .call(
            Method::POST,
            &pdbs,
            Some(
                json!({"metadata": {"name": "keep-d"}, "spec": {"minAvailable": 1,
                        "selector": {"matchLabels": {"app": "d"}}}}),
            ),
        )
        .await;
    assert_eq!(pdb.code, 201, "{}: {:?}", t.name, pdb.body);
    let blocked = t
        .call(
            Method::POST,
            &format!("{pods}/d/eviction"),
            Some(eviction("d")),
        )
        .await;
    let kept = t.call(Method::GET, &format!("{pods}/d"), None).await;
    let misnamed = t
        .call(
            Method::POST,
            &format!("{pods}/d/eviction"),
            Some(eviction("other")),
        )
        .await;
    json!({
        "logUnbound": log_unbound.status(),
        "execGet": exec_get.status(),
        "execPost": exec_post.status(),
        "bound": [bound.code, bound.body["kind"], bound.body["status"]],
        "rebound": rebound.status(),
        "nodeName": bound_pod.body["spec"]["nodeName"] == json!(node),
        "logBound": log_bound.status(),
        "bindMissing": bind_missing.status(),
        "ephemeral": [ephemeral.code, ephemeral.body["kind"], ephemeral.body["metadata"]["name"]],
        "debug": [debug.code, debug.body["kind"], debug.body["spec"]["ephemeralContainers"]],
        "debugged": debugged.body["spec"]["ephemeralContainers"],
        "evicted": [evicted.code, evicted.body["kind"], evicted.body["status"]],
        "gone": gone.code,
        "evictMissing": evict_missing.status(),
        "blocked": blocked.status(),
        "kept": kept.code,
        "misnamed": misnamed.status(),
    })
}
conformance!(
    fidelity_pod_subresources,
    pod_subresources,
    current_release_only
);

async fn tokens_and_approval(t: &Target, ns: &str) -> Value {
    let sas = format!("/api/v1/namespaces/{ns}/serviceaccounts");
    let created = t
        .call(
            Method::POST,
            &sas,
            Some(json!({"metadata": {"name": "robot"}})),
        )
        .await;
    assert_eq!(created.code, 201, "{}: {:?}", t.name, created.body);
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                         "spec": {"expirationSeconds": 3600}});
    let token = t
        .call(
            Method::POST,
            &format!("{sas}/robot/token"),
            Some(request.clone()),
        )
        .await;
    let jwt = token.body["status"]["token"].as_str().unwrap_or("");
    let token_missing = t
        .call(Method::POST, &format!("{sas}/absent/token"), Some(request))
        .await;
    let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let name = format!("{ns}-csr");
    let csr = t
        .call(
            Method::POST,
            csrs,
            Some(
                json!({"metadata": {"name": name}, "spec": {"request": CSR_REQUEST,
                "signerName": "example.com/signer", "usages": ["digital signature"]}}),
            ),
        )
        .await;
    assert_eq!(csr.code, 201, "{}: {:?}", t.name, csr.body);
    let mut approving = csr.body.clone();
    approving["status"] = json!({"conditions": [{"type": "Approved", "status": "True",
        "reason": "Test", "message": "approved by the test"}]});
    let approved = t
        .call(
            Method::PUT,
            &format!("{csrs}/{name}/approval"),
            Some(approving),
        )
        .await;
    let read = t
        .call(Method::GET, &format!("{csrs}/{name}/approval"), None)
        .await;
    let conditions = |v: &Value| {
        v["status"]["conditions"]
            .as_array()
            .map(|c| {
                c.iter()
                    .map(|c| json!([c["type"], c["status"], c["reason"]]))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    json!({
        "token": [token.code, token.body["kind"], token.body["apiVersion"],
                  token.body["spec"]["expirationSeconds"],
                  jwt.split('.').count(), token.body["status"]["expirationTimestamp"].is_string()],
        "tokenMissing": token_missing.status(),
        "approved": [approved.code, conditions(&approved.body)],
        "read": [read.code, read.body["kind"], conditions(&read.body)],
    })
}
conformance!(
    fidelity_service_account_tokens_and_csr_approval,
    tokens_and_approval,
    current_release_only
);

async fn custom_scale(t: &Target, ns: &str) -> Value {
    let group = format!("{ns}.ferrokube.example");
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("crews.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "crews", "kind": "Crew"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size",
                    "statusReplicasPath": ".status.members", "labelSelectorPath": ".status.selector"}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {
                        "members": {"type": "integer"}, "selector": {"type": "string"}}}}}}}]}});
    let created = t.call(Method::POST, crds, Some(crd)).await;
    assert_eq!(created.code, 201, "{}: {:?}", t.name, created.body);
    let crd_url = format!("{crds}/crews.{group}");
    let established = wait_for(t, &crd_url, |s| is_established(&s.body)).await;
    assert!(is_established(&established.body), "{}", t.name);
    let crews = format!("/apis/{group}/v1/namespaces/{ns}/crews");
    let discovered = wait_for(t, &format!("/apis/{group}/v1"), |s| s.code == 200).await;
    let scale_entry = discovered.body["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|e| e["name"] == "crews/scale").cloned())
        .map(|e| json!([e["kind"], e["group"], e["version"], e["verbs"]]));
    let crew = json!({"apiVersion": format!("{group}/v1"), "kind": "Crew",
                      "metadata": {"name": "one"}, "spec": {"size": 2}});
    let made = wait_for(t, &crews, |s| s.code == 200).await;
    assert_eq!(made.code, 200, "{}", t.name);
    let made = t.call(Method::POST, &crews, Some(crew)).await;
    assert_eq!(made.code, 201, "{}: {:?}", t.name, made.body);
    let url = format!("{crews}/one");
    let status = t
        .call(
            Method::PATCH,
            &format!("{url}/status"),
            Some(json!({"status": {"members": 2, "selector": "app=crew"}})),
        )
        .await;
    assert_eq!(status.code, 200, "{}: {:?}", t.name, status.body);
    let scale = t.call(Method::GET, &format!("{url}/scale"), None).await;
    let patched = t
        .call(
            Method::PATCH,
            &format!("{url}/scale"),
            Some(json!({"spec": {"replicas": 4}})),
        )
        .await;
    let mut put_body = patched.body.clone();
    put_body["spec"]["replicas"] = json!(5);
    let put = t
        .call(Method::PUT, &format!("{url}/scale"), Some(put_body))
        .await;
    let after = t.call(Method::GET, &url, None).await;
    let scale_view = |s: &Seen| {
        json!([
            s.code,
            s.body["kind"],
            s.body["apiVersion"],
            s.body["spec"],
            s.body["status"]
        ])
    };
    json!({
        "discovery": scale_entry,
        "scale": scale_view(&scale),
        "patched": scale_view(&patched),
        "put": scale_view(&put),
        "after": after.body["spec"],
    })
}
conformance!(
    fidelity_custom_resource_scale,
    custom_scale,
    current_release_only
);
