//! Protobuf on the wire, both directions, compared with kube-apiserver: objects created with
//! protobuf bodies (core's encoder, what the client sends), then read back as JSON and as protobuf
//! (a get, a list, a watch) and decoded by the client's decoder; the two encodings must give the
//! same objects on each server, and the servers the same observations: which Content-Type answers
//! which Accept header, a 404's `Status` read from protobuf, the watch's framing.
//!
//! Part of the conformance suite (`conformance.rs`, the parent module).

use super::*;

use ferrokube_client::protobuf::from_slice;
use ferrokube_core::ManagedFields;
use ferrokube_core::protobuf::wire::Reader;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const CLIENT_GO: &str = "application/vnd.kubernetes.protobuf, application/json";

/// The objects of the case: kinds with maps, bytes, quantities, int-or-strings, inline structs
/// and times.
fn objects() -> Vec<(&'static str, &'static str, &'static str, Value)> {
    vec![
        (
            "v1",
            "ConfigMap",
            "configmaps",
            json!({"metadata": {"name": "pb-cm", "labels": {"a": "b"}},
                   "data": {"k": "v", "empty": ""}, "binaryData": {"bin": "AAEC/w=="}}),
        ),
        (
            "v1",
            "Secret",
            "secrets",
            json!({"metadata": {"name": "pb-secret"}, "type": "Opaque",
                   "data": {"password": "c2VjcmV0"}}),
        ),
        (
            "v1",
            "Pod",
            "pods",
            json!({"metadata": {"name": "pb-pod", "annotations": {"note": "protobuf"}},
                   "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1",
                     "ports": [{"name": "http", "containerPort": 8080}],
                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                     "readinessProbe": {"httpGet": {"path": "/", "port": "http"}},
                     "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]}],
                     "volumes": [{"name": "cfg", "configMap": {"name": "pb-cm", "defaultMode": 420}}],
                     "terminationGracePeriodSeconds": 0}}),
        ),
        (
            "v1",
            "Service",
            "services",
            json!({"metadata": {"name": "pb-svc"},
                   "spec": {"selector": {"app": "web"},
                            "ports": [{"port": 80, "targetPort": "http", "protocol": "TCP"}]}}),
        ),
    ]
}

/// A request with a byte body; the answer's code, Content-Type and body (a non-2xx as the
/// client's decoded error: code, reason, message).
async fn send(
    t: &Target,
    method: Method,
    path: &str,
    content_type: &str,
    accept: &str,
    body: Vec<u8>,
) -> Result<(String, Bytes), Value> {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("accept", accept)
        .body(Bytes::from(body))
        .expect("request");
    let call = Call {
        request,
        idempotent: false,
        streaming: false,
    };
    match t.client.request_typed_bytes(call).await {
        Ok((content_type, body)) => Ok((content_type.unwrap_or_default(), body)),
        Err(error) => {
            let api = error.api().unwrap_or_else(|| panic!("{}: {error}", t.name));
            Err(json!({"code": api.code, "message": api.message,
                       "reason": format!("{:?}", api.reason)}))
        }
    }
}

/// A body decoded by its Content-Type, as the client decodes it.
fn decoded(t: &Target, content_type: &str, body: &[u8]) -> Value {
    if ferrokube_core::protobuf::is_protobuf(content_type) {
        from_slice::<Value>(body, ManagedFields::Keep)
            .unwrap_or_else(|e| panic!("{}: protobuf answer: {e}", t.name))
    } else {
        serde_json::from_slice(body).unwrap_or_else(|e| panic!("{}: JSON answer: {e}", t.name))
    }
}

/// The media type alone (`;stream=watch` kept: it is part of what is compared).
fn media(content_type: &str) -> String {
    content_type.replace(' ', "")
}

/// The watch's Content-Type and its first `count` events (type, object), read from protobuf
/// frames or JSON lines as the Content-Type says.
async fn watch(
    t: &Target,
    path: &str,
    accept: &str,
    count: usize,
) -> (String, Vec<(String, Value)>) {
    let request = Request::builder()
        .uri(path)
        .header("accept", accept)
        .body(Bytes::new())
        .expect("request");
    let call = Call {
        request,
        idempotent: true,
        streaming: true,
    };
    let response = t.client.send(call).await.expect("watch opens");
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let protobuf = ferrokube_core::protobuf::is_protobuf(&content_type);
    let mut body = response.into_body();
    let mut buffer = Vec::new();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while events.len() < count {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(frame))) => frame,
            _ => break,
        };
        if let Some(data) = frame.data_ref() {
            buffer.extend_from_slice(data);
        }
        loop {
            let event = if protobuf {
                let Some(head) = buffer.get(..4) else { break };
                let length = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
                if buffer.len() < 4 + length {
                    break;
                }
                let frame: Vec<u8> = buffer.drain(..4 + length).skip(4).collect();
                watch_event(t, &frame)
            } else {
                let Some(end) = buffer.iter().position(|b| *b == b'\n') else {
                    break;
                };
                let line: Vec<u8> = buffer.drain(..=end).collect();
                let event: Value = serde_json::from_slice(&line).expect("watch line is JSON");
                (
                    event["type"].as_str().unwrap_or("").to_string(),
                    event["object"].clone(),
                )
            };
            events.push(event);
        }
    }
    (content_type, events)
}

/// `WatchEvent {1 type, 2 RawExtension {1 raw}}`, `raw` an enveloped object.
fn watch_event(t: &Target, frame: &[u8]) -> (String, Value) {
    let (mut kind, mut object) = (String::new(), Value::Null);
    let mut reader = Reader::new(frame, "WatchEvent");
    while let Some((number, wire)) = reader.key().expect("a key") {
        let bytes = reader.len_field(number, wire).expect("a field");
        match number {
            1 => kind = String::from_utf8_lossy(bytes).into_owned(),
            2 => {
                let mut raw = Reader::new(bytes, "RawExtension");
                while let Some((number, wire)) = raw.key().expect("a key") {
                    let bytes = raw.len_field(number, wire).expect("raw");
                    object = decoded(t, PROTOBUF, bytes);
                }
            }
            _ => {}
        }
    }
    (kind, object)
}

/// Drops what differs between two reads of one object by nature of the run, not the encoding.
fn comparable(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    strip_nulls(object)
}

async fn protobuf_encodings(t: &Target, ns: &str) -> Value {
    let mut observed = serde_json::Map::new();
    let collection = |plural: &str| format!("/api/v1/namespaces/{ns}/{plural}");
    // Creates with protobuf bodies, answered in protobuf.
    let mut created = Vec::new();
    for (api_version, kind, plural, object) in objects() {
        let body = ferrokube_core::protobuf::encode(&object, api_version, kind)
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        let (content_type, answer) = send(
            t,
            Method::POST,
            &collection(plural),
            PROTOBUF,
            CLIENT_GO,
            body,
        )
        .await
        .unwrap_or_else(|e| panic!("{}: create {kind}: {e}", t.name));
        let object = decoded(t, &content_type, &answer);
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        observed.insert(
            format!("create {kind}"),
            json!([media(&content_type), name]),
        );
        created.push((kind, plural, name));
    }
    // Each object read as protobuf and as JSON: the same object.
    for (kind, plural, name) in &created {
        let path = format!("{}/{name}", collection(plural));
        let mut reads = Vec::new();
        for accept in [
            CLIENT_GO,
            "application/json",
            "application/json, application/vnd.kubernetes.protobuf",
            PROTOBUF,
        ] {
            let (content_type, body) = send(
                t,
                Method::GET,
                &path,
                "application/json",
                accept,
                Vec::new(),
            )
            .await
            .unwrap_or_else(|e| panic!("{}: get {kind}: {e}", t.name));
            reads.push((
                media(&content_type),
                comparable(decoded(t, &content_type, &body)),
            ));
        }
        let types: Vec<&str> = reads.iter().map(|(c, _)| c.as_str()).collect();
        let same = reads.windows(2).all(|pair| pair[0].1 == pair[1].1);
        assert!(same, "{}: {kind} differs by encoding: {reads:#?}", t.name);
        observed.insert(format!("get {kind}"), json!({"types": types, "same": same}));
        // A replace with a protobuf body of what was read.
        let mut object = reads[0].1.clone();
        object["metadata"]["labels"] = json!({"replaced": "yes"});
        let body = ferrokube_core::protobuf::encode(&object, "v1", kind).expect("encodes");
        let (content_type, answer) = send(t, Method::PUT, &path, PROTOBUF, CLIENT_GO, body)
            .await
            .unwrap_or_else(|e| panic!("{}: replace {kind}: {e}", t.name));
        let replaced = decoded(t, &content_type, &answer);
        observed.insert(
            format!("replace {kind}"),
            json!([media(&content_type), replaced["metadata"]["labels"]]),
        );
    }
    // Lists: the same items either way.
    for (kind, plural, _) in &created {
        let mut lists = Vec::new();
        for accept in [CLIENT_GO, "application/json"] {
            let (content_type, body) = send(
                t,
                Method::GET,
                &collection(plural),
                "application/json",
                accept,
                Vec::new(),
            )
            .await
            .unwrap_or_else(|e| panic!("{}: list {kind}: {e}", t.name));
            let list = decoded(t, &content_type, &body);
            let items: Vec<Value> = list["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(comparable)
                .collect();
            lists.push((media(&content_type), list["kind"].clone(), items));
        }
        assert_eq!(
            lists[0].2, lists[1].2,
            "{}: {kind} list differs by encoding",
            t.name
        );
        observed.insert(
            format!("list {kind}"),
            json!([lists[0].0, lists[0].1, lists[1].0, lists[0].2.len()]),
        );
    }
    // An error's Status, asked for in protobuf.
    let missing = send(
        t,
        Method::GET,
        &format!("{}/missing", collection("configmaps")),
        "application/json",
        CLIENT_GO,
        Vec::new(),
    )
    .await;
    observed.insert("get missing".into(), missing.err().unwrap_or(Value::Null));
    // A watch from the start of the namespace's history, in both encodings.
    let path = format!("{}?watch=1&resourceVersion=0", collection("configmaps"));
    let (protobuf_type, protobuf_events) = watch(t, &path, CLIENT_GO, 1).await;
    let (json_type, json_events) = watch(t, &path, "application/json", 1).await;
    let strip = |events: Vec<(String, Value)>| -> Vec<(String, Value)> {
        events
            .into_iter()
            .map(|(k, o)| (k, comparable(o)))
            .collect()
    };
    let (protobuf_events, json_events) = (strip(protobuf_events), strip(json_events));
    assert_eq!(
        protobuf_events, json_events,
        "{}: watch differs by encoding",
        t.name
    );
    let kinds: Vec<&str> = protobuf_events.iter().map(|(k, _)| k.as_str()).collect();
    observed.insert(
        "watch".into(),
        json!([media(&protobuf_type), media(&json_type), kinds]),
    );
    Value::Object(observed)
}
conformance!(
    protobuf_bodies_and_answers_in_both_encodings,
    protobuf_encodings
);
