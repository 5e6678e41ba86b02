//! CRD validation rules in CEL (`x-kubernetes-validations`): the corpus of
//! `tests/fixtures/cel_corpus.json`, each case run against a server and compared with what
//! kube-apiserver 1.37.2 answered.
//!
//! A case is a CRD (group `<case>.cel.ferrokube.test`, kind `Widget`, version `v1`) whose schema is
//! the case's `spec_schema` (under `spec`) or `root_schema`, an object to create, and optionally an
//! update (PUT) and a merge patch. What a client saw of each step (the code; for a refusal the
//! Status reason, message and causes) is the case's outcome; `expect` holds the one recorded from
//! kube-apiserver 1.37.2.
//!
//! - `cel_corpus_embedded` (plain `cargo test`): every case against the embedded server must give
//!   exactly the recorded outcome, except the cases marked `embedded_differs` (a known difference,
//!   said in the case).
//! - `cel_corpus_e2e` (`--features e2e`, scripts/e2e.sh): the same cases against the kubeconfig's
//!   server. From 1.25 on, the outcomes must be the recorded ones; before (1.20.2, the default of
//!   scripts/e2e.sh), CRDs have no rules: the server drops `x-kubernetes-validations` from the
//!   schema it stores (an unknown field of a typed object) and accepts every object the rules would
//!   refuse, which is what the suite asserts there.
//!
//! With `FERROKUBE_CEL_RECORD=1`, `cel_corpus_e2e` writes the outcomes it saw into the fixture
//! instead of comparing (run it against 1.37.2 only). With `FERROKUBE_CEL_RESULTS=<folder>`, each
//! test writes one JSON line per case (name, server, outcome, match) to `<folder>/cel-<server>.jsonl`
//! (benches/conformance/ keeps one run of each).
//!
//! The real server evaluates sibling fields in a random order (Go maps), so outcomes are compared
//! with their causes sorted (and the message rebuilt from them, once it is checked to be built from
//! them in the first place).

use std::time::Duration;

use bytes::Bytes;
use ferrokube_apiserver::{ApiServer, RunningServer};
use ferrokube_client::Client;
use ferrokube_client::client::Call;
use http::{Method, Request};
use http_body_util::BodyExt;
use serde_json::{Value, json};

const CORPUS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/cel_corpus.json"
);
const NAMESPACE: &str = "cel-corpus";

/// A server under test.
struct Target {
    name: String,
    client: Client,
    _embedded: Option<RunningServer>,
}

impl Target {
    async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Option<Vec<u8>>,
    ) -> (u16, Value) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .header("accept", "application/json")
            .body(Bytes::from(body.unwrap_or_default()))
            .expect("request");
        let call = Call {
            request,
            idempotent: false,
            streaming: false,
        };
        match self.client.send(call).await {
            Ok(response) => {
                let code = response.status().as_u16();
                let bytes = response
                    .into_body()
                    .collect()
                    .await
                    .expect("body")
                    .to_bytes();
                (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
            }
            Err(error) => {
                let api = error
                    .api()
                    .unwrap_or_else(|| panic!("{}: {path}: {error}", self.name));
                let details = serde_json::to_value(&api.details).unwrap_or(Value::Null);
                let reason = match &api.reason {
                    ferrokube_client::error::Reason::Other(other) => other.clone(),
                    known => format!("{known:?}"),
                };
                (
                    api.code,
                    json!({"kind": "Status", "reason": reason, "message": api.message, "details": details}),
                )
            }
        }
    }

    async fn json(&self, method: Method, path: &str, body: Option<&Value>) -> (u16, Value) {
        let content_type = if method == Method::PATCH {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        let bytes = body.map(|b| serde_json::to_vec(b).expect("json"));
        self.send(method, path, content_type, bytes).await
    }

    /// The server's `major.minor`, from /version.
    #[cfg(feature = "e2e")]
    async fn version(&self) -> (u64, u64) {
        let (code, body) = self.json(Method::GET, "/version", None).await;
        assert_eq!(code, 200, "{}: /version: {body}", self.name);
        let number = |field: &str| {
            body[field]
                .as_str()
                .map(|s| s.trim_end_matches('+'))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0)
        };
        (number("major"), number("minor"))
    }
}

/// What a client saw of one step: `{"code"}` on success; code, reason, message and causes on a
/// refusal.
/// A client that waits for slow answers: the corpus's cases near the cost limits evaluate for
/// seconds in a debug build, longer on a loaded machine, and the client's default write deadline
/// (10 s) is about dead connections, not about a busy server (it failed this suite twice under a
/// load average of 20).
/// The embedded server's client config, never retrying: each answer is the case's outcome.
fn embedded_config(server: &ferrokube_apiserver::RunningServer) -> ferrokube_client::Config {
    let mut config = ferrokube_testkit::embedded_config(server);
    config.retry.max_retries = 0;
    config
}

fn patient(mut config: ferrokube_client::Config) -> Client {
    config.timeout = Some(Duration::from_secs(180));
    config.write_timeout = Some(Duration::from_secs(180));
    Client::new(config).expect("client")
}

fn outcome(code: u16, body: &Value) -> Value {
    if code < 300 {
        return json!({"code": code});
    }
    let mut seen = json!({"code": code, "reason": body["reason"], "message": body["message"]});
    if let Some(causes) = body["details"]["causes"].as_array() {
        let causes: Vec<Value> = causes
            .iter()
            .map(|c| json!({"field": c["field"], "message": c["message"], "reason": c["reason"]}))
            .collect();
        seen["causes"] = Value::Array(causes);
    }
    seen
}

/// Go's aggregate of causes: each distinct `field: message` once; several in brackets.
fn aggregate(causes: &[Value]) -> String {
    let mut lines: Vec<String> = Vec::new();
    for c in causes {
        let line = format!(
            "{}: {}",
            c["field"].as_str().unwrap_or(""),
            c["message"].as_str().unwrap_or("")
        );
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    match lines.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// An outcome with its causes sorted, and its message rebuilt from them when it was built from
/// them (see the module docs).
fn canonical(outcome: &Value) -> Value {
    let mut out = outcome.clone();
    let Some(causes) = outcome["causes"].as_array() else {
        return out;
    };
    let message = outcome["message"].as_str().unwrap_or("");
    let mut sorted = causes.clone();
    sorted.sort_by_key(|c| c.to_string());
    let built = aggregate(causes);
    if let Some(prefix) = message.strip_suffix(built.as_str()) {
        out["message"] = format!("{prefix}{}", aggregate(&sorted)).into();
    }
    out["causes"] = Value::Array(sorted);
    out
}

/// Runs one case; returns the outcome of each step (`crd`, `create`, `update`, `patch`).
async fn run_case(target: &Target, case: &Value) -> Value {
    let name = case["name"].as_str().expect("case name");
    let group = format!("{name}.cel.ferrokube.test");
    let crd_name = format!("widgets.{group}");
    let crd_path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd_name}");
    // A CRD left by an earlier run (on a real server) goes first.
    let (code, _) = target.json(Method::DELETE, &crd_path, None).await;
    if code == 200 {
        wait_for(target, &crd_path, 404).await;
    }
    let schema = match (&case["root_schema"], &case["spec_schema"]) {
        (root @ Value::Object(_), _) => root.clone(),
        (_, spec) => json!({"type": "object", "properties": {"spec": spec}}),
    };
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": schema}}]}});
    let mut seen = serde_json::Map::new();
    let (code, body) = target
        .json(
            Method::POST,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some(&crd),
        )
        .await;
    seen.insert("crd".into(), outcome(code, &body));
    if code != 201 {
        return Value::Object(seen);
    }
    let collection = format!("/apis/{group}/v1/namespaces/{NAMESPACE}/widgets");
    wait_for(target, &collection, 200).await;
    let object = match &case["raw_object"] {
        Value::Object(_) => {
            let text = case["raw_object"]
                .to_string()
                .replace("@api", &format!("{group}/v1"));
            serde_json::from_str(&text).expect("raw object")
        }
        _ => with_type(&case["object"], &group, None),
    };
    let (code, created) = target.json(Method::POST, &collection, Some(&object)).await;
    seen.insert("create".into(), outcome(code, &created));
    let item = format!("{collection}/sample");
    if code == 201 {
        if case["update"].is_object() {
            let version = created["metadata"]["resourceVersion"]
                .as_str()
                .map(str::to_string);
            let update = with_type(&case["update"], &group, version);
            let (code, body) = target.json(Method::PUT, &item, Some(&update)).await;
            seen.insert("update".into(), outcome(code, &body));
        }
        if case["patch"].is_object() {
            let (code, body) = target
                .json(Method::PATCH, &item, Some(&case["patch"]))
                .await;
            seen.insert("patch".into(), outcome(code, &body));
        }
    }
    if target._embedded.is_none() {
        // Objects of 1.20 (no rules) are checked by the caller before the CRD goes.
        if let Some(stored) = stored_schema(target, &crd_path).await {
            seen.insert("stored_schema_has_rules".into(), has_rules(&stored).into());
        }
    }
    let _ = target.json(Method::DELETE, &crd_path, None).await;
    Value::Object(seen)
}

/// The schema of the CRD as stored.
async fn stored_schema(target: &Target, crd_path: &str) -> Option<Value> {
    let (code, crd) = target.json(Method::GET, crd_path, None).await;
    (code == 200).then(|| crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone())
}

/// True if `x-kubernetes-validations` appears anywhere in `schema`.
fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            map.contains_key("x-kubernetes-validations") || map.values().any(has_rules)
        }
        Value::Array(items) => items.iter().any(has_rules),
        _ => false,
    }
}

/// A case's object (`spec` and so on) as a Widget named `sample`.
fn with_type(body: &Value, group: &str, resource_version: Option<String>) -> Value {
    let mut object = body.clone();
    object["apiVersion"] = format!("{group}/v1").into();
    object["kind"] = "Widget".into();
    object["metadata"] = json!({"name": "sample"});
    if let Some(version) = resource_version {
        object["metadata"]["resourceVersion"] = version.into();
    }
    object
}

/// Polls `path` until it answers `code` (a CRD going away, a new kind being served).
async fn wait_for(target: &Target, path: &str, code: u16) {
    for _ in 0..600 {
        if target.json(Method::GET, path, None).await.0 == code {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{}: {path} never answered {code}", target.name);
}

fn corpus() -> Value {
    let text = std::fs::read_to_string(CORPUS).expect("corpus readable");
    serde_json::from_str(&text).expect("corpus is JSON")
}

fn cases(corpus: &Value) -> &Vec<Value> {
    corpus["cases"].as_array().expect("cases")
}

/// Runs every case against `target` (a few at a time), in corpus order.
async fn run_all(target: &Target, corpus: &Value) -> Vec<Value> {
    let (code, body) = target
        .json(
            Method::POST,
            "/api/v1/namespaces",
            Some(&json!({"metadata": {"name": NAMESPACE}})),
        )
        .await;
    assert!(
        code == 201 || code == 409,
        "{}: namespace: {body}",
        target.name
    );
    let mut seen = Vec::new();
    for chunk in cases(corpus).chunks(8) {
        let runs = chunk.iter().map(|case| run_case(target, case));
        seen.extend(futures_util::future::join_all(runs).await);
    }
    seen
}

/// The steps of an outcome that are compared with the recorded ones.
fn compared(seen: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for step in ["crd", "create", "update", "patch"] {
        if let Some(o) = seen.get(step) {
            out.insert(step.into(), canonical(o));
        }
    }
    Value::Object(out)
}

/// Writes one line per case to `cel-<server>.jsonl` in the folder `FERROKUBE_CEL_RESULTS`, if set.
fn write_results(server: &str, corpus: &Value, seen: &[Value], matches: &[bool]) {
    let Ok(folder) = std::env::var("FERROKUBE_CEL_RESULTS") else {
        return;
    };
    let path = std::path::Path::new(&folder).join(format!("cel-{server}.jsonl"));
    let mut lines = String::new();
    for ((case, outcome), matched) in cases(corpus).iter().zip(seen).zip(matches) {
        let line = json!({"case": case["name"], "server": server, "outcome": outcome,
                          "matches_kube_apiserver_1_37_2": matched});
        lines.push_str(&line.to_string());
        lines.push('\n');
    }
    std::fs::write(&path, lines).expect("results written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cel_corpus_embedded() {
    let corpus = corpus();
    let server = ApiServer::new()
        .start()
        .await
        .expect("embedded server starts");
    let target = Target {
        name: "embedded".into(),
        client: patient(embedded_config(&server)),
        _embedded: Some(server),
    };
    let seen = run_all(&target, &corpus).await;
    let mut failures = Vec::new();
    let mut matches = Vec::new();
    for (case, outcome) in cases(&corpus).iter().zip(&seen) {
        let name = case["name"].as_str().unwrap_or("");
        assert!(
            case["expect"].is_object(),
            "{name}: no recorded outcome (record with FERROKUBE_CEL_RECORD=1, see the module docs)"
        );
        let same = compared(outcome) == compared(&case["expect"]);
        matches.push(same);
        match (same, case["embedded_differs"].as_str()) {
            (true, None) | (false, Some(_)) => {}
            (true, Some(_)) => failures.push(format!(
                "{name}: marked embedded_differs but now matches: unmark it"
            )),
            (false, None) => failures.push(format!(
                "{name}:\n  embedded: {}\n  1.37.2:   {}",
                compared(outcome),
                compared(&case["expect"])
            )),
        }
    }
    write_results("embedded", &corpus, &seen, &matches);
    let matched = matches.iter().filter(|m| **m).count();
    eprintln!(
        "cel corpus: {matched} of {} cases match kube-apiserver 1.37.2",
        matches.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        cases(&corpus).len() >= 30,
        "the corpus has at least 30 cases"
    );
}

#[cfg(feature = "e2e")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cel_corpus_e2e() {
    let mut corpus = corpus();
    let target = Target {
        name: "kube-apiserver".into(),
        client: patient(ferrokube_testkit::config(None)),
        _embedded: None,
    };
    let (major, minor) = target.version().await;
    let seen = run_all(&target, &corpus).await;
    let (_, version) = target.json(Method::GET, "/version", None).await;
    let server = format!(
        "kube-apiserver-{}",
        version["gitVersion"].as_str().unwrap_or("unknown")
    );
    if std::env::var("FERROKUBE_CEL_RECORD").is_ok_and(|v| v == "1") {
        assert!(
            (major, minor) >= (1, 37),
            "record from kube-apiserver 1.37 only"
        );
        corpus["recorded_from"] = version["gitVersion"].clone();
        let cases = corpus["cases"].as_array_mut().expect("cases");
        for (case, outcome) in cases.iter_mut().zip(&seen) {
            let mut expect = outcome.clone();
            if let Some(map) = expect.as_object_mut() {
                map.remove("stored_schema_has_rules");
            }
            case["expect"] = expect;
        }
        let text = serde_json::to_string_pretty(&corpus).expect("json");
        std::fs::write(CORPUS, text + "\n").expect("corpus written");
        write_results(&server, &corpus, &seen, &vec![true; seen.len()]);
        return;
    }
    let mut failures = Vec::new();
    let mut matches = Vec::new();
    for (case, outcome) in cases(&corpus).iter().zip(&seen) {
        let name = case["name"].as_str().unwrap_or("");
        let same = compared(outcome) == compared(&case["expect"]);
        matches.push(same);
        if (major, minor) >= (1, 25) {
            if !same {
                failures.push(format!(
                    "{name}:\n  {server}: {}\n  1.37.2:   {}",
                    compared(outcome),
                    compared(&case["expect"])
                ));
            }
            continue;
        }
        // Before 1.25 (the documented 1.20 behaviour): no CEL. Every CRD is accepted, stored
        // without its rules, and its objects are judged by the structural schema alone.
        if outcome["crd"]["code"] != 201 {
            failures.push(format!(
                "{name}: {server} refused the CRD: {}",
                outcome["crd"]
            ));
            continue;
        }
        if outcome["stored_schema_has_rules"] != false {
            failures.push(format!("{name}: {server} kept x-kubernetes-validations"));
        }
        let wanted = match name {
            // Refused without rules too: a schema error, a missing kind or apiVersion. 1.20
            // answers a custom object without apiVersion with 500 InternalError ("Object
            // 'apiVersion' is missing"): its decoder's error is not classed as a bad request,
            // which 1.37's is (400).
            "blocked-by-schema" => 422,
            "missing-kind" => 400,
            "missing-api-version" => 500,
            _ => 201,
        };
        if outcome["create"]["code"] != wanted {
            failures.push(format!(
                "{name}: {server} create: {} (want {wanted})",
                outcome["create"]
            ));
        }
        for step in ["update", "patch"] {
            if let Some(o) = outcome.get(step) {
                if o["code"] != 200 {
                    failures.push(format!("{name}: {server} {step}: {o} (want 200)"));
                }
            }
        }
    }
    write_results(&server, &corpus, &seen, &matches);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A CRD whose one rule is `rule`, named for `case`.
fn crd_with_rule(case: &str, rule: &str) -> Value {
    let group = format!("{case}.cel.ferrokube.test");
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object", "x-kubernetes-validations": [{"rule": rule}]}}}}}]}})
}

/// A 98 KB chain of 7,000 conditions compiles on kube-apiserver 1.37.2 (cel-go balances it; its
/// limit is 100,000 code points) and here. (The bounded report of a rule of 1,000 undeclared
/// names is checked in the library's tests: its 1.7 MB Status is more than the client reads.)
async fn long_and_chain(target: &Target) {
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let chain = vec!["self.n > 0"; 7000].join(" && ");
    let mut crd = crd_with_rule("long-chain", &chain);
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] =
        json!({"n": {"type": "integer"}});
    let (code, body) = target.json(Method::POST, crds, Some(&crd)).await;
    assert_eq!(code, 201, "{}: {}", target.name, body["message"]);
    let path = format!("{crds}/widgets.long-chain.cel.ferrokube.test");
    let _ = target.json(Method::DELETE, &path, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cel_long_and_chain_fidelity_embedded() {
    let server = ApiServer::new()
        .start()
        .await
        .expect("embedded server starts");
    let target = Target {
        name: "embedded".into(),
        client: patient(embedded_config(&server)),
        _embedded: Some(server),
    };
    long_and_chain(&target).await;
}

#[cfg(feature = "e2e")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cel_long_and_chain_fidelity_e2e() {
    let target = Target {
        name: "kube-apiserver".into(),
        client: patient(ferrokube_testkit::config(None)),
        _embedded: None,
    };
    if target.version().await >= (1, 25) {
        long_and_chain(&target).await;
    }
}
