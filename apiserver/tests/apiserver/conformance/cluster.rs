//! Cases from what Kubernetes' own conformance specs (test/e2e of 1.20, `[sig-api-machinery]`) need
//! of a server: config keys of ConfigMaps and Secrets, the 406 of a Table asked of a kind without
//! metadata (SelfSubjectAccessReview), CRD schema defaults on requests and on reads. Compared
//! with kube-apiserver like every other case.
//!
//! Then, embedded only, what the real server leaves to kube-controller-manager and the kubelets
//! (and scripts/kube-apiserver.sh runs neither by default): Node objects of the stand-in kubelet,
//! each namespace's `default` ServiceAccount with its token secret, the `kubernetes` Service,
//! ResourceQuota admission and status.
//!
//! Part of the conformance suite (`conformance.rs`, the parent module).

use super::*;

use ferrokube_apiserver::KubeletSettings;

/// `method path` with `accept` as the Accept header.
async fn call_accepting(t: &Target, method: Method, path: &str, accept: &str, body: Value) -> Seen {
    t.raw_accepting(
        method,
        path,
        "application/json",
        accept,
        Some(body.to_string()),
    )
    .await
}

async fn config_keys(t: &Target, ns: &str) -> Value {
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let secrets = format!("/api/v1/namespaces/{ns}/secrets");
    let empty_cm = t
        .call(
            Method::POST,
            &cms,
            Some(json!({"metadata": {"name": "empty"}, "data": {"": "value"}})),
        )
        .await;
    let dots = t
        .call(
            Method::POST,
            &cms,
            Some(json!({"metadata": {"name": "dots"}, "data": {"..a": "value"}})),
        )
        .await;
    let fine = t
        .call(
            Method::POST,
            &cms,
            Some(json!({"metadata": {"name": "fine"}, "data": {"key.name_A-1": "value"}})),
        )
        .await;
    let empty_secret = t
        .call(
            Method::POST,
            &secrets,
            Some(json!({"metadata": {"name": "empty"}, "data": {"": "dmFsdWU="}})),
        )
        .await;
    for seen in [&empty_cm, &dots, &empty_secret] {
        assert_eq!(
            (seen.code, seen.reason()),
            (422, "Invalid"),
            "{}: {:?}",
            t.name,
            seen.body
        );
    }
    assert_eq!(fine.code, 201, "{}: {:?}", t.name, fine.body);
    json!({
        "emptyConfigMap": empty_cm.status(),
        "dots": dots.status(),
        "emptySecret": empty_secret.status(),
        "fine": fine.code,
    })
}
conformance!(config_map_and_secret_keys_are_validated, config_keys);

async fn access_review_tables(t: &Target, _ns: &str) -> Value {
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                        "spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}});
    let table = call_accepting(
        t,
        Method::POST,
        path,
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        review.clone(),
    )
    .await;
    assert_eq!(table.code, 406, "{}: {:?}", t.name, table.body);
    let plain = call_accepting(t, Method::POST, path, "application/json", review).await;
    assert_eq!(plain.code, 201, "{}: {:?}", t.name, plain.body);
    // Create-only: neither a list nor a watch.
    let list = call_accepting(t, Method::GET, path, "application/json", Value::Null).await;
    let watch = call_accepting(
        t,
        Method::GET,
        &format!("{path}?watch=true"),
        "application/json",
        Value::Null,
    )
    .await;
    assert_eq!(
        (list.code, watch.code),
        (405, 405),
        "{}: {:?}",
        t.name,
        list.body
    );
    json!({
        "list": list.code,
        "watch": watch.code,
        "table": table.code,
        "plain": [plain.code, plain.body["kind"], plain.body["status"]["allowed"],
                  plain.body["spec"]["nonResourceAttributes"]],
    })
}
conformance!(
    a_table_of_an_access_review_is_not_acceptable,
    access_review_tables
);

fn defaulted_crd(group: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gizmos.{group}")},
        "spec": {"group": group, "scope": "Cluster",
            "names": {"plural": "gizmos", "kind": "Gizmo"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "a": {"type": "string"},
                    "b": {"type": "string"},
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer", "default": 3},
                        "nested": {"type": "object", "default": {},
                                   "properties": {"on": {"type": "boolean", "default": true}}}}}}}}}]}})
}

/// Schema defaults: applied to a create's body, and to objects read back after a default was
/// added to the CRD (stored before it), as the CustomResourceDefinition defaulting spec checks.
async fn crd_defaults(t: &Target, ns: &str) -> Value {
    let group = format!("{ns}.ferrokube.example");
    let crd_path =
        format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.{group}");
    let created = t
        .call(
            Method::POST,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some(defaulted_crd(&group)),
        )
        .await;
    assert_eq!(created.code, 201, "{}: {:?}", t.name, created.body);
    wait_for(t, &crd_path, |s| is_established(&s.body)).await;
    let gizmos = format!("/apis/{group}/v1/gizmos");
    let gizmo = |name: &str, spec: Value| {
        json!({"apiVersion": format!("{group}/v1"), "kind": "Gizmo", "metadata": {"name": name},
               "spec": spec})
    };
    let first = wait_for(t, &gizmos, |s| s.code == 200).await;
    assert_eq!(first.code, 200, "{}: served", t.name);
    let one = t
        .call(
            Method::POST,
            &gizmos,
            Some(gizmo("one", json!({"size": 1}))),
        )
        .await;
    assert_eq!(one.code, 201, "{}: {:?}", t.name, one.body);
    let added = t
        .raw(
            Method::PATCH,
            &crd_path,
            "application/json-patch+json",
            Some(
                json!([{"op": "add", "value": "A",
                        "path": "/spec/versions/0/schema/openAPIV3Schema/properties/a/default"}])
                .to_string(),
            ),
        )
        .await;
    assert_eq!(added.code, 200, "{}: {:?}", t.name, added.body);
    let read = wait_for(t, &format!("{gizmos}/one"), |s| s.body["a"] == "A").await;
    let two = t
        .call(Method::POST, &gizmos, Some(gizmo("two", json!({}))))
        .await;
    let list = t.call(Method::GET, &gizmos, None).await;
    let listed: Vec<Value> = list.body["items"]
        .as_array()
        .map(|items| items.iter().map(|i| json!([i["a"], i["spec"]])).collect())
        .unwrap_or_default();
    let deleted = t.call(Method::DELETE, &crd_path, None).await;
    assert_eq!(deleted.code, 200, "{}: {:?}", t.name, deleted.body);
    json!({
        "created": one.body["spec"],
        "readWithDefault": [read.body["a"], read.body["spec"]],
        "createdWithDefault": [two.code, two.body["a"], two.body["spec"]],
        "listed": listed,
    })
}
conformance!(custom_resource_defaults_on_requests_and_reads, crd_defaults);

/// The embedded server with the stand-in kubelet.
async fn cluster() -> Target {
    let server = ApiServer::new()
        .kubelet(KubeletSettings::default())
        .start()
        .await
        .expect("embedded server starts");
    Target {
        name: "embedded",
        minor: CURRENT_MINOR,
        client: ferrokube_testkit::embedded_client(&server, false),
        embedded: Some(server),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubelet_registers_ready_schedulable_nodes() {
    let t = cluster().await;
    let nodes = t
        .call(
            Method::GET,
            "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse&resourceVersion=0",
            None,
        )
        .await;
    let items = nodes.body["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 3, "{:?}", nodes.body);
    for node in &items {
        let ready = node["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        assert!(ready, "{node}");
    }
    let cordoned = t
        .call(
            Method::GET,
            "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dtrue",
            None,
        )
        .await;
    assert_eq!(cordoned.body["items"].as_array().map(Vec::len), Some(0));
    // Without the kubelet there are no nodes.
    let bare = Target::embedded().await;
    let none = bare.call(Method::GET, "/api/v1/nodes", None).await;
    assert_eq!(none.body["items"].as_array().map(Vec::len), Some(0));
}

/// As 1.24 and later: each namespace gets its `default` ServiceAccount (again after a delete) and
/// no token Secret; no `kube-root-ca.crt` unless asked for (kube-controller-manager writes it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_get_a_default_service_account_and_no_token() {
    let t = Target::embedded().await;
    let kubernetes = t
        .call(
            Method::GET,
            "/api/v1/namespaces/default/services/kubernetes",
            None,
        )
        .await;
    assert_eq!(kubernetes.code, 200, "{:?}", kubernetes.body);
    assert_eq!(kubernetes.body["spec"]["clusterIP"], "10.96.0.1");
    let ns = t.namespace("accounts").await;
    let path = format!("/api/v1/namespaces/{ns}/serviceaccounts/default");
    let account = wait_for(&t, &path, |s| s.code == 200).await;
    assert_eq!(account.code, 200, "{:?}", account.body);
    // Deleted, it comes back.
    let deleted = t.call(Method::DELETE, &path, None).await;
    assert_eq!(deleted.code, 200, "{:?}", deleted.body);
    let again = wait_for(&t, &path, |s| {
        s.code == 200 && s.body["metadata"]["uid"] != account.body["metadata"]["uid"]
    })
    .await;
    assert_eq!(again.code, 200, "{:?}", again.body);
    let accounts = format!("/api/v1/namespaces/{ns}/serviceaccounts");
    let robot = t
        .call(
            Method::POST,
            &accounts,
            Some(json!({"metadata": {"name": "robot"}})),
        )
        .await;
    assert_eq!(robot.code, 201, "{:?}", robot.body);
    // Nothing else is made: the accounts list no secret, the namespace has none, and no CA
    // ConfigMap. (The server made the second `default` after the first's deletion; by then any
    // token controller would have acted on both accounts.)
    let secrets = t
        .call(
            Method::GET,
            &format!("/api/v1/namespaces/{ns}/secrets"),
            None,
        )
        .await;
    assert_eq!(secrets.body["items"], json!([]), "{:?}", secrets.body);
    for name in ["default", "robot"] {
        let seen = t
            .call(Method::GET, &format!("{accounts}/{name}"), None)
            .await;
        assert!(seen.body.get("secrets").is_none(), "{:?}", seen.body);
    }
    let ca = t
        .call(
            Method::GET,
            &format!("/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"),
            None,
        )
        .await;
    assert_eq!(ca.code, 404, "{:?}", ca.body);
}

/// `publish_root_ca`: every namespace gets `kube-root-ca.crt` (again after a delete); its `ca.crt`
/// is the server's TLS CA, empty here (plain HTTP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_get_the_root_ca_when_asked() {
    let t = Target::embedded_with(|server| server.publish_root_ca(true)).await;
    let ns = t.namespace("root-ca").await;
    let path = format!("/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt");
    let published = wait_for(&t, &path, |s| s.code == 200).await;
    assert_eq!(published.code, 200, "{:?}", published.body);
    assert_eq!(published.body["data"]["ca.crt"], json!(""));
    let deleted = t.call(Method::DELETE, &path, None).await;
    assert_eq!(deleted.code, 200, "{:?}", deleted.body);
    let again = wait_for(&t, &path, |s| {
        s.code == 200 && s.body["metadata"]["uid"] != published.body["metadata"]["uid"]
    })
    .await;
    assert_eq!(again.code, 200, "{:?}", again.body);
}

/// `legacy_service_account_tokens`, as before 1.24: every account gets a token Secret and lists it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_service_account_tokens_give_every_account_a_secret() {
    let t = Target::embedded_with(|server| server.legacy_service_account_tokens(true)).await;
    let ns = t.namespace("accounts").await;
    let account = wait_for(
        &t,
        &format!("/api/v1/namespaces/{ns}/serviceaccounts/default"),
        |s| s.body["secrets"].as_array().is_some_and(|s| !s.is_empty()),
    )
    .await;
    let secret_name = account.body["secrets"][0]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("the account lists its token: {:?}", account.body))
        .to_string();
    assert!(secret_name.starts_with("default-token-"), "{secret_name}");
    let secret = t
        .call(
            Method::GET,
            &format!("/api/v1/namespaces/{ns}/secrets/{secret_name}"),
            None,
        )
        .await;
    assert_eq!(secret.body["type"], "kubernetes.io/service-account-token");
    assert_eq!(
        secret.body["metadata"]["annotations"]["kubernetes.io/service-account.uid"],
        account.body["metadata"]["uid"]
    );
    let accounts = format!("/api/v1/namespaces/{ns}/serviceaccounts");
    t.call(
        Method::POST,
        &accounts,
        Some(json!({"metadata": {"name": "robot"}})),
    )
    .await;
    let robot = wait_for(&t, &format!("{accounts}/robot"), |s| {
        s.body["secrets"].as_array().is_some_and(|s| !s.is_empty())
    })
    .await;
    assert!(
        robot.body["secrets"][0]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("robot-token-")),
        "{:?}",
        robot.body
    );
}

fn quota(name: &str, hard: Value, scopes: &[&str]) -> Value {
    json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name},
           "spec": {"hard": hard, "scopes": scopes}})
}

fn sized_pod(name: &str, cpu: &str, memory: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause:1",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}})
}

/// Waits until the quota's `status.used` has `expected` (a map of resource → quantity string).
async fn quota_used(t: &Target, path: &str, expected: Value) -> Seen {
    let expected = expected.as_object().cloned().unwrap_or_default();
    let seen = wait_for(t, path, |s| {
        expected
            .iter()
            .all(|(k, v)| s.body["status"]["used"].get(k) == Some(v))
    })
    .await;
    for (k, v) in &expected {
        assert_eq!(
            seen.body["status"]["used"].get(k),
            Some(v),
            "{k} in {:?}",
            seen.body["status"]
        );
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_refuse_what_exceeds_them_and_track_usage() {
    let t = Target::embedded().await;
    let ns = t.namespace("quota").await;
    let quotas = format!("/api/v1/namespaces/{ns}/resourcequotas");
    let pods = format!("/api/v1/namespaces/{ns}/pods");
    let hard = json!({"pods": "2", "cpu": "1", "memory": "500Mi", "configmaps": "1",
                      "count/replicasets.apps": "0", "resourcequotas": "1"});
    let created = t
        .call(Method::POST, &quotas, Some(quota("q", hard.clone(), &[])))
        .await;
    assert_eq!(created.code, 201, "{:?}", created.body);
    let path = format!("{quotas}/q");
    let computed = quota_used(
        &t,
        &path,
        json!({"pods": "0", "cpu": "0", "resourcequotas": "1", "configmaps": "0"}),
    )
    .await;
    assert_eq!(computed.body["status"]["hard"], hard);

    let fits = t
        .call(
            Method::POST,
            &pods,
            Some(sized_pod("fits", "500m", "252Mi")),
        )
        .await;
    assert_eq!(fits.code, 201, "{:?}", fits.body);
    quota_used(
        &t,
        &path,
        json!({"pods": "1", "cpu": "500m", "memory": "252Mi"}),
    )
    .await;
    let too_big = t
        .call(
            Method::POST,
            &pods,
            Some(sized_pod("too-big", "600m", "100Mi")),
        )
        .await;
    assert_eq!(
        too_big.status(),
        json!({"code": 403, "reason": "Forbidden",
               "message": "pods \"too-big\" is forbidden: exceeded quota: q, requested: cpu=600m, used: cpu=500m, limited: cpu=1",
               "details": {"name": "too-big", "kind": "pods"}})
    );
    let unstated = t
        .call(Method::POST, &pods, Some(pod("unstated", json!({}))))
        .await;
    assert_eq!(unstated.code, 403, "{:?}", unstated.body);
    assert!(
        unstated.body["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("failed quota: q: must specify cpu,memory")),
        "{:?}",
        unstated.body
    );
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let first = t.call(Method::POST, &cms, Some(config_map("a", "1"))).await;
    assert_eq!(first.code, 201, "{:?}", first.body);
    let second = t.call(Method::POST, &cms, Some(config_map("b", "1"))).await;
    assert_eq!((second.code, second.reason()), (403, "Forbidden"));
    let rs = t
        .call(
            Method::POST,
            &format!("/apis/apps/v1/namespaces/{ns}/replicasets"),
            Some(replica_set("web", 0)),
        )
        .await;
    assert_eq!((rs.code, rs.reason()), (403, "Forbidden"), "{:?}", rs.body);
    let another = t
        .call(
            Method::POST,
            &quotas,
            Some(quota("q2", json!({"pods": "9"}), &[])),
        )
        .await;
    assert_eq!(another.code, 403, "{:?}", another.body);

    let deleted = t.call(Method::DELETE, &format!("{pods}/fits"), None).await;
    assert_eq!(deleted.code, 200, "{:?}", deleted.body);
    quota_used(
        &t,
        &path,
        json!({"pods": "0", "cpu": "0", "memory": "0", "configmaps": "1"}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_scopes_select_pods_by_qos_and_deadline() {
    let t = Target::embedded().await;
    let ns = t.namespace("scopes").await;
    let quotas = format!("/api/v1/namespaces/{ns}/resourcequotas");
    let pods = format!("/api/v1/namespaces/{ns}/pods");
    for (name, scope) in [
        ("best-effort", "BestEffort"),
        ("not-best-effort", "NotBestEffort"),
        ("terminating", "Terminating"),
    ] {
        let created = t
            .call(
                Method::POST,
                &quotas,
                Some(quota(name, json!({"pods": "1"}), &[scope])),
            )
            .await;
        assert_eq!(created.code, 201, "{:?}", created.body);
    }
    let plain = t
        .call(Method::POST, &pods, Some(pod("plain", json!({}))))
        .await;
    assert_eq!(plain.code, 201, "{:?}", plain.body);
    quota_used(&t, &format!("{quotas}/best-effort"), json!({"pods": "1"})).await;
    quota_used(
        &t,
        &format!("{quotas}/not-best-effort"),
        json!({"pods": "0"}),
    )
    .await;
    quota_used(&t, &format!("{quotas}/terminating"), json!({"pods": "0"})).await;
    // The BestEffort quota is full; a burstable pod is charged elsewhere.
    let second = t
        .call(Method::POST, &pods, Some(pod("second", json!({}))))
        .await;
    assert_eq!(second.code, 403, "{:?}", second.body);
    let burstable = t
        .call(
            Method::POST,
            &pods,
            Some(sized_pod("burstable", "100m", "10Mi")),
        )
        .await;
    assert_eq!(burstable.code, 201, "{:?}", burstable.body);
    quota_used(
        &t,
        &format!("{quotas}/not-best-effort"),
        json!({"pods": "1"}),
    )
    .await;
    let mut deadline = sized_pod("deadline", "100m", "10Mi");
    deadline["spec"]["activeDeadlineSeconds"] = 3600.into();
    let refused = t.call(Method::POST, &pods, Some(deadline)).await;
    // NotBestEffort is full too: the deadline pod is burstable.
    assert_eq!(refused.code, 403, "{:?}", refused.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_controllers_have_defaults_status_and_scale() {
    let t = Target::embedded().await;
    let ns = t.namespace("rc").await;
    let rcs = format!("/api/v1/namespaces/{ns}/replicationcontrollers");
    let rc = json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "web"},
        "spec": {"template": {"metadata": {"labels": {"app": "web"}},
                 "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause:1"}]}}}});
    let created = t.call(Method::POST, &rcs, Some(rc)).await;
    assert_eq!(created.code, 201, "{:?}", created.body);
    assert_eq!(created.body["spec"]["replicas"], 1);
    assert_eq!(created.body["spec"]["selector"], json!({"app": "web"}));
    assert_eq!(created.body["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(created.body["status"], json!({"replicas": 0}));
    let scale = t.call(Method::GET, &format!("{rcs}/web/scale"), None).await;
    assert_eq!(scale.body["status"]["selector"], "app=web");
    assert_eq!(scale.body["spec"]["replicas"], 1);
}

/// Foreground deletion keeps a dependent that has another owner alive (it only loses the reference
/// to the deleted owner), and deletes one that has not: the garbage collector spec "should not
/// delete dependents that have both valid owner and owner that's waiting for dependents to be
/// deleted".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_deletion_spares_dependents_with_another_live_owner() {
    let t = Target::embedded().await;
    let ns = t.namespace("solid").await;
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let mut uids = Vec::new();
    for name in ["going", "staying"] {
        let owner = t
            .call(Method::POST, &cms, Some(config_map(name, "1")))
            .await;
        assert_eq!(owner.code, 201, "{:?}", owner.body);
        uids.push(owner.body["metadata"]["uid"].clone());
    }
    let reference = |name: &str, uid: &Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid});
    let mut shared = config_map("shared", "1");
    shared["metadata"]["ownerReferences"] =
        json!([reference("going", &uids[0]), reference("staying", &uids[1])]);
    let mut only = config_map("only", "1");
    only["metadata"]["ownerReferences"] = json!([reference("going", &uids[0])]);
    for dependent in [shared, only] {
        let created = t.call(Method::POST, &cms, Some(dependent)).await;
        assert_eq!(created.code, 201, "{:?}", created.body);
    }
    let deleted = t
        .raw(
            Method::DELETE,
            &format!("{cms}/going"),
            "application/json",
            Some(json!({"propagationPolicy": "Foreground"}).to_string()),
        )
        .await;
    assert_eq!(deleted.code, 200, "{:?}", deleted.body);
    let gone = wait_for(&t, &format!("{cms}/going"), |s| s.code == 404).await;
    assert_eq!(
        gone.code, 404,
        "the owner goes once its dependents are settled"
    );
    let only = wait_for(&t, &format!("{cms}/only"), |s| s.code == 404).await;
    assert_eq!(
        only.code, 404,
        "a dependent of the deleted owner alone is deleted"
    );
    let shared = t.call(Method::GET, &format!("{cms}/shared"), None).await;
    assert_eq!(shared.code, 200, "{:?}", shared.body);
    assert!(shared.body["metadata"]["deletionTimestamp"].is_null());
    assert_eq!(
        shared.body["metadata"]["ownerReferences"],
        json!([reference("staying", &uids[1])])
    );
}

/// The stand-in kubelet runs only the pods the fake nodes can take: a pod whose node selector no
/// node matches stays Pending and is marked unschedulable, as the scheduler leaves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubelet_leaves_pods_no_node_matches_pending() {
    let t = cluster().await;
    let ns = t.namespace("selector").await;
    let pods = format!("/api/v1/namespaces/{ns}/pods");
    let mut unsatisfiable = pod("unsatisfiable", json!({}));
    unsatisfiable["spec"]["nodeSelector"] =
        json!({"x-test.k8s.io/unsatisfiable": "not-schedulable"});
    let mut pinned = pod("pinned", json!({}));
    pinned["spec"]["nodeSelector"] =
        json!({"kubernetes.io/hostname": "ferrokube-node-2", "kubernetes.io/os": "linux"});
    for body in [unsatisfiable, pinned] {
        let created = t.call(Method::POST, &pods, Some(body)).await;
        assert_eq!(created.code, 201, "{:?}", created.body);
    }
    let running = wait_for(&t, &format!("{pods}/pinned"), |s| {
        s.body["status"]["phase"] == "Running"
    })
    .await;
    assert_eq!(running.body["spec"]["nodeName"], "ferrokube-node-2");
    let pending = wait_for(&t, &format!("{pods}/unsatisfiable"), |s| {
        s.body["status"]["conditions"][0]["reason"] == "Unschedulable"
    })
    .await;
    assert_eq!(
        pending.body["status"]["phase"], "Pending",
        "{:?}",
        pending.body
    );
    assert!(
        pending.body["spec"]["nodeName"].is_null(),
        "{:?}",
        pending.body
    );
}

/// A Deployment's strategy is defaulted field by field: kube-controller-manager's deployment
/// controller reads `rollingUpdate` of a RollingUpdate strategy without checking it is there.
async fn deployment_strategies(t: &Target, ns: &str) -> Value {
    let deployments = format!("/apis/apps/v1/namespaces/{ns}/deployments");
    let mut strategies = Vec::new();
    for (name, strategy) in [
        ("none", Value::Null),
        ("rolling", json!({"type": "RollingUpdate"})),
        ("surge", json!({"rollingUpdate": {"maxSurge": 2}})),
        ("recreate", json!({"type": "Recreate"})),
    ] {
        let mut deployment = replica_set(name, 1);
        deployment["kind"] = "Deployment".into();
        if !strategy.is_null() {
            deployment["spec"]["strategy"] = strategy;
        }
        let created = t.call(Method::POST, &deployments, Some(deployment)).await;
        assert_eq!(created.code, 201, "{}: {:?}", t.name, created.body);
        strategies.push(json!([name, created.body["spec"]["strategy"]]));
    }
    json!(strategies)
}
conformance!(deployment_strategies_are_defaulted, deployment_strategies);
