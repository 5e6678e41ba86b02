//! The CEL target: a CustomResourceDefinition whose schema carries one generated validation rule,
//! then an object of it created and updated, on a fresh embedded server.
//!
//! Why: a CRD's `x-kubernetes-validations` rules are programs a cluster user writes and the API
//! server runs on every write. kube-apiserver bounds them three ways (a static cost estimate at
//! CRD creation, metered evaluation with per-call and per-request limits, a recursion limit in
//! the parser); the embedded server copies each bound (`ferrokube-apiserver`'s `cel` module). A
//! rule that slips past them stops or kills the whole server: an abort on a huge allocation, a
//! stack overflow in a deep expression, an evaluation that holds the store for minutes. This
//! target generates rules at those edges (deep nesting, long chains, strings that grow with
//! `replace` and `+`, nested comprehensions over `split`, big literals, raw strings) with
//! objects of every size the schema allows.
//!
//! # Input format
//!
//! ```text
//! self.l.all(x, x.replace('a', 'aa').size() < 10)     ← the rule (any bytes, read as UTF-8)
//! ---                                                  ← a line of three dashes
//! {"s": "aaa", "n": 3, "l": ["a"], "m": {"k": "v"}}    ← the object's spec (JSON; else {})
//! ```
//!
//! # What happens to each input
//!
//! ```text
//!  fresh ApiServer ─▶ POST the CRD (spec: s string ≤ 1000, n integer, l ≤ 100 strings ≤ 100,
//!                     m ≤ 100 string values; the rule on spec)
//!                  ─▶ 201: wait until served; POST the object, PUT it with `n` changed
//!  every answer ───▶ within LIMIT (else "hang"), never a 5xx, never a dropped connection: a
//!                    rule is accepted (201) or refused (400/422) and an object is admitted or
//!                    refused (422) with a Status; a refused rule's message stays bounded
//! ```

use std::time::Duration;

use bytes::Bytes;
use ferrokube::apiserver::{ApiServer, RunningServer};
use http::Method;
use http::header::{CONTENT_TYPE, HOST};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

/// How long one answer may take before the harness calls it a hang. kube-apiserver's CEL limits
/// stop any rule long before this (a per-request cost budget); a debug build on a busy machine
/// is still far below it.
const LIMIT: Duration = Duration::from_secs(30);

/// The longest error message accepted for a refused rule: kube-apiserver caps the issues it
/// reports per rule, and a message that grows with the rule (each issue repeating the source line)
/// is a memory finding.
const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// Separates the rule from the object in an input.
const SEPARATOR: &str = "\n---\n";

/// The rule and the object's spec of an input (see the [module docs](self)). Total.
pub fn parse_input(data: &[u8]) -> (String, Value) {
    let text = String::from_utf8_lossy(data);
    let (rule, object) = match text.split_once(SEPARATOR) {
        Some((rule, object)) => (rule, object),
        None => (text.as_ref(), ""),
    };
    let spec = match serde_json::from_str::<Value>(object) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({}),
    };
    (rule.to_string(), spec)
}

/// Writes an input; [`parse_input`] reads it back.
pub fn render_input(rule: &str, spec: &Value) -> Vec<u8> {
    format!("{rule}{SEPARATOR}{spec}").into_bytes()
}

/// Installs the rule of `data` in a CRD on a fresh embedded server and writes an object of it;
/// panics on a hang, a 5xx, a dropped connection, or an unbounded error message.
pub fn cel_rules(data: &[u8]) {
    let (rule, spec) = parse_input(data);
    if rule.trim().is_empty() {
        return;
    }
    crate::on_thread_runtime(|runtime| runtime.block_on(exchange(&rule, spec)));
}

fn crd(rule: &str) -> Value {
    let short = |max: u64| json!({"type": "string", "maxLength": max});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "rules.fuzz.example.com"},
        "spec": {
            "group": "fuzz.example.com", "scope": "Namespaced",
            "names": {"plural": "rules", "singular": "rule", "kind": "Rule", "listKind": "RuleList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {
                        "type": "object",
                        "properties": {
                            "s": short(1000),
                            "n": {"type": "integer"},
                            "l": {"type": "array", "maxItems": 100, "items": short(100)},
                            "m": {"type": "object", "maxProperties": 100,
                                  "additionalProperties": short(100)}
                        },
                        "x-kubernetes-validations": [{"rule": rule}]
                    }}
                }}
            }]
        }
    })
}

async fn exchange(rule: &str, spec: Value) {
    let server = match ApiServer::new().start().await {
        Ok(server) => server,
        Err(error) => panic!("fuzz harness: the server did not start: {error}"),
    };
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (status, body) = send(&server, Method::POST, crds, Some(crd(rule))).await;
    match status {
        201 => {}
        400 | 422 => {
            assert!(
                body.len() <= MAX_MESSAGE_BYTES,
                "a refused rule of {} bytes gave a {} byte answer",
                rule.len(),
                body.len()
            );
            return;
        }
        other => panic!("creating the CRD answered {other}: {}", lossy(&body)),
    }
    let rules = "/apis/fuzz.example.com/v1/namespaces/default/rules";
    // The CRD is served a moment after it is created; wait for it, boundedly.
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        let (status, body) = send(&server, Method::GET, rules, None).await;
        match status {
            200 => break,
            404 if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            other => panic!("the CRD was never served ({other}): {}", lossy(&body)),
        }
    }
    let object = |spec: &Value| {
        json!({"apiVersion": "fuzz.example.com/v1", "kind": "Rule",
               "metadata": {"name": "r", "namespace": "default"}, "spec": spec})
    };
    let (status, body) = send(&server, Method::POST, rules, Some(object(&spec))).await;
    match status {
        201 => {}
        400 | 422 => return,
        other => panic!("creating an object answered {other}: {}", lossy(&body)),
    }
    // An update runs the rule again, with `oldSelf` known (transition rules).
    let mut created: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(error) => panic!("the created object is not JSON: {error}"),
    };
    let n = created["spec"]["n"].as_i64().unwrap_or(0);
    created["spec"]["n"] = json!(n.wrapping_add(1));
    let path = format!("{rules}/r");
    let (status, body) = send(&server, Method::PUT, &path, Some(created)).await;
    if !matches!(status, 200 | 400 | 409 | 422) {
        panic!("updating the object answered {status}: {}", lossy(&body));
    }
}

fn lossy(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(2000)]).into_owned()
}

/// One request on a fresh in-memory connection; its status and whole body, within [`LIMIT`].
async fn send(
    server: &RunningServer,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Vec<u8>) {
    let mut sender = crate::server::connect(server).await;
    let bytes = body.map_or_else(Bytes::new, |value| Bytes::from(value.to_string()));
    let request = match http::Request::builder()
        .method(method.clone())
        .uri(path)
        .header(HOST, "localhost")
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(bytes))
    {
        Ok(request) => request,
        Err(error) => panic!("fuzz harness: could not build {method} {path}: {error}"),
    };
    let what = format!("{method} {path}");
    let response = match tokio::time::timeout(LIMIT, sender.send_request(request)).await {
        Err(_) => panic!("hang: no answer to {what} within {LIMIT:?}"),
        Ok(Err(error)) => panic!("the server dropped {what} without an answer: {error}"),
        Ok(Ok(response)) => response,
    };
    let status = response.status().as_u16();
    let body = match tokio::time::timeout(LIMIT, response.into_body().collect()).await {
        Err(_) => panic!("hang: the body of the answer to {what} did not end"),
        Ok(Err(error)) => panic!("the answer to {what} broke off: {error}"),
        Ok(Ok(body)) => body.to_bytes().to_vec(),
    };
    (status, body)
}
