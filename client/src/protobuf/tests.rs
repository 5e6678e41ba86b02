use base64::Engine;
use ferrokube_core::ManagedFields;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::*;

/// Two objects per top-level kind of Kubernetes 1.37 (every field set; every pointer set to its
/// zero), each as client-go's protobuf body and as Go's `encoding/json` writes it; written by
/// `scripts/protobuf-schema.sh` (the embedded server's tests read the same file).
const VECTORS: &str = include_str!("../../../apiserver/tests/fixtures/protobuf/vectors.jsonl");

struct Vector {
    name: String,
    api_version: String,
    kind: String,
    protobuf: Vec<u8>,
    json: Value,
}

fn vectors() -> Vec<Vector> {
    VECTORS
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("a JSON line");
            let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            Vector {
                name: format!("{} {} ({})", text("apiVersion"), text("kind"), text("case")),
                api_version: text("apiVersion"),
                kind: text("kind"),
                protobuf: base64::engine::general_purpose::STANDARD
                    .decode(text("protobuf"))
                    .expect("base64"),
                json: v["json"].clone(),
            }
        })
        .collect()
}

/// A `null` member is the same as an absent one to every target (Go writes `null` for a nil
/// slice, map or pointer without `omitempty`; the wire has nothing there).
fn without_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(without_nulls);
        }
        Value::Array(list) => list.iter_mut().for_each(without_nulls),
        _ => {}
    }
}

fn first_difference(path: &str, ours: &Value, go: &Value) -> Option<String> {
    match (ours, go) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().find_map(|k| match (a.get(k), b.get(k)) {
                (Some(x), Some(y)) => first_difference(&format!("{path}.{k}"), x, y),
                (x, y) => Some(format!("{path}.{k}: ours {x:?}, Go {y:?}")),
            })
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(&format!("{path}[{i}]"), x, y)),
        _ if ours == go => None,
        _ => Some(format!("{path}: ours {ours}, Go {go}")),
    }
}

/// The JSON shape the deserializer presents is the JSON Go writes, for every kind.
#[test]
fn protobuf_every_built_in_kind_presents_the_json_go_writes() {
    let mut failures = Vec::new();
    let all = vectors();
    for vector in &all {
        let mut go = vector.json.clone();
        without_nulls(&mut go);
        match from_slice::<Value>(&vector.protobuf, ManagedFields::Keep) {
            Ok(mut ours) => {
                without_nulls(&mut ours);
                if let Some(difference) = first_difference("", &ours, &go) {
                    failures.push(format!("{}: {difference}", vector.name));
                }
            }
            Err(error) => failures.push(format!("{}: {error}", vector.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} differ:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
    assert!(all.len() >= 190, "{}", all.len());
}

/// `K` decoded from protobuf equals `K` decoded from Go's JSON, for k8s-openapi's types.
/// True when both decoded (and were equal), false when neither did.
fn typed_equal<K: DeserializeOwned + PartialEq + std::fmt::Debug>(vector: &Vector) -> bool {
    let mut json = vector.json.clone();
    without_nulls(&mut json);
    let from_json = serde_json::from_value::<K>(json);
    let from_protobuf = from_slice::<K>(&vector.protobuf, ManagedFields::Keep);
    match (from_json, from_protobuf) {
        (Ok(json), Ok(protobuf)) => {
            assert_eq!(protobuf, json, "{}", vector.name);
            true
        }
        // Go's zero objects leave out what k8s-openapi requires (a condition's zero time):
        // neither encoding decodes then.
        (Err(_), Err(_)) => false,
        (json, protobuf) => panic!(
            "{}: from JSON {:?}, from protobuf {:?}",
            vector.name,
            json.err(),
            protobuf.err()
        ),
    }
}

#[test]
fn protobuf_k8s_openapi_types_decode_equal_to_json() {
    use k8s_openapi::api::{apps, batch, coordination, core, discovery, networking, rbac};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
    let (mut checked, mut compared) = (0, 0);
    for vector in vectors() {
        let equal = match (vector.api_version.as_str(), vector.kind.as_str()) {
            ("v1", "Pod") => typed_equal::<core::v1::Pod>(&vector),
            ("v1", "ConfigMap") => typed_equal::<core::v1::ConfigMap>(&vector),
            ("v1", "Secret") => typed_equal::<core::v1::Secret>(&vector),
            ("v1", "Node") => typed_equal::<core::v1::Node>(&vector),
            ("v1", "Service") => typed_equal::<core::v1::Service>(&vector),
            ("v1", "Event") => typed_equal::<core::v1::Event>(&vector),
            ("v1", "PersistentVolume") => typed_equal::<core::v1::PersistentVolume>(&vector),
            ("v1", "Namespace") => typed_equal::<core::v1::Namespace>(&vector),
            ("apps/v1", "Deployment") => typed_equal::<apps::v1::Deployment>(&vector),
            ("apps/v1", "ReplicaSet") => typed_equal::<apps::v1::ReplicaSet>(&vector),
            ("apps/v1", "StatefulSet") => typed_equal::<apps::v1::StatefulSet>(&vector),
            ("apps/v1", "ControllerRevision") => {
                typed_equal::<apps::v1::ControllerRevision>(&vector)
            }
            ("batch/v1", "Job") => typed_equal::<batch::v1::Job>(&vector),
            ("coordination.k8s.io/v1", "Lease") => typed_equal::<coordination::v1::Lease>(&vector),
            ("discovery.k8s.io/v1", "EndpointSlice") => {
                typed_equal::<discovery::v1::EndpointSlice>(&vector)
            }
            ("networking.k8s.io/v1", "Ingress") => typed_equal::<networking::v1::Ingress>(&vector),
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
                typed_equal::<rbac::v1::ClusterRole>(&vector)
            }
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
                typed_equal::<apiextensions::CustomResourceDefinition>(&vector)
            }
            _ => continue,
        };
        checked += 1;
        compared += usize::from(equal);
    }
    assert_eq!(checked, 36, "every listed kind, both cases");
    assert!(compared >= 20, "{compared}");
}

// ---- a small encoder for hand-made inputs ----

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn len_field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    varint(out, u64::from(number) << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    len_field(&mut type_meta, 1, api_version.as_bytes());
    len_field(&mut type_meta, 2, kind.as_bytes());
    let mut body = b"k8s\0".to_vec();
    len_field(&mut body, 1, &type_meta);
    len_field(&mut body, 2, raw);
    len_field(&mut body, 3, b"");
    len_field(&mut body, 4, b"");
    body
}

fn pod_vector() -> Vector {
    vectors()
        .into_iter()
        .find(|v| v.name == "v1 Pod (full)")
        .expect("the full Pod vector")
}

#[test]
fn protobuf_managed_fields_dropped_unread_the_rest_equal() {
    use k8s_openapi::api::core::v1::Pod;
    let vector = pod_vector();
    let kept: Pod = from_slice(&vector.protobuf, ManagedFields::Keep).expect("keep");
    assert!(
        kept.metadata
            .managed_fields
            .as_ref()
            .is_some_and(|m| !m.is_empty())
    );
    let dropped: Pod = from_slice(&vector.protobuf, ManagedFields::Drop).expect("drop");
    assert_eq!(dropped.metadata.managed_fields, None);
    let mut expected = kept;
    expected.metadata.managed_fields = None;
    assert_eq!(dropped, expected);

    // Never read: a managedFields entry whose FieldsV1 is not JSON fails a full decode only.
    let mut entry = Vec::new();
    len_field(&mut entry, 1, b"kubectl");
    let mut fields_v1 = Vec::new();
    len_field(&mut fields_v1, 1, b"{not json");
    len_field(&mut entry, 7, &fields_v1);
    let mut meta = Vec::new();
    len_field(&mut meta, 1, b"web");
    len_field(&mut meta, 17, &entry);
    let mut pod = Vec::new();
    len_field(&mut pod, 1, &meta);
    let body = envelope("v1", "Pod", &pod);
    assert!(from_slice::<Pod>(&body, ManagedFields::Keep).is_err());
    let pod: Pod = from_slice(&body, ManagedFields::Drop).expect("skipped unread");
    assert_eq!(pod.metadata.name.as_deref(), Some("web"));
}

#[test]
fn protobuf_dynamic_and_compact_targets_read_the_same_bytes() {
    use k8s_openapi::api::core::v1::Pod;
    let vector = pod_vector();
    let dynamic: crate::DynamicObject =
        from_slice(&vector.protobuf, ManagedFields::Keep).expect("dynamic");
    let from_json: crate::DynamicObject =
        serde_json::from_value(vector.json.clone()).expect("dynamic from JSON");
    assert_eq!(dynamic.metadata, from_json.metadata);
    let (mut a, mut b) = (
        Value::Object(dynamic.data.clone()),
        Value::Object(from_json.data.clone()),
    );
    without_nulls(&mut a);
    without_nulls(&mut b);
    assert_eq!(first_difference("", &a, &b), None);
    let compact: ferrokube_informer::Compact<Pod> =
        from_slice(&vector.protobuf, ManagedFields::Keep).expect("compact");
    let typed: Pod = from_slice(&vector.protobuf, ManagedFields::Keep).expect("typed");
    let mut typed_without = typed.clone();
    typed_without.metadata.managed_fields = None;
    assert_eq!(
        compact.decode().expect("decode").metadata.name,
        typed.metadata.name
    );
}

#[test]
fn protobuf_list_decodes_while_streaming_under_any_chunking() {
    use k8s_openapi::api::core::v1::Pod;
    let vector = pod_vector();
    let pod = Envelope::read(&vector.protobuf)
        .expect("envelope")
        .raw
        .to_vec();
    let mut list_meta = Vec::new();
    len_field(&mut list_meta, 2, b"42"); // resourceVersion
    len_field(&mut list_meta, 3, b"next"); // continue
    let mut list = Vec::new();
    len_field(&mut list, 1, &list_meta);
    for _ in 0..3 {
        len_field(&mut list, 2, &pod);
    }
    let body = envelope("v1", "PodList", &list);
    let expected: Pod = from_slice(&vector.protobuf, ManagedFields::Keep).expect("pod");
    let mut expected_item = expected.clone();
    // List items carry no apiVersion/kind; k8s-openapi's types do not keep them anyway.
    expected_item.metadata.managed_fields = None;
    // About 30 x 15 cuts, spread over the body.
    let cuts = |from: usize, count: usize| (from..body.len()).step_by(body.len() / count + 1);
    for (first, second) in cuts(0, 30)
        .flat_map(|first| cuts(first, 15).map(move |second| (first, second)))
        .chain([(1, 2), (body.len() - 1, body.len())])
    {
        {
            let mut decoder = ListDecoder::new(|p: Pod| p).managed_fields(ManagedFields::Drop);
            let mut told = None;
            let mut tell = Some(|m: &ListMeta| told = m.continue_.clone());
            for chunk in [&body[..first], &body[first..second], &body[second..]] {
                decoder.push_telling(chunk, &mut tell).expect("push");
            }
            let list = decoder.finish().expect("finish");
            assert_eq!(list.items.len(), 3);
            assert!(list.items.iter().all(|p| *p == expected_item));
            assert_eq!(list.resource_version(), "42");
            assert_eq!(told.as_deref(), Some("next"), "cut at {first}, {second}");
        }
    }
    // Byte by byte.
    let mut decoder = ListDecoder::new(|p: Pod| p);
    for byte in &body {
        decoder.push(std::slice::from_ref(byte)).expect("push");
    }
    assert_eq!(decoder.finish().expect("finish").items.len(), 3);
    // Cut short anywhere: an error at the latest when the body ends, never a panic.
    for end in (0..body.len()).step_by(body.len() / 500 + 1) {
        let mut decoder = ListDecoder::new(|p: Pod| p);
        let pushed = decoder.push(&body[..end]);
        assert!(pushed.is_err() || decoder.finish().is_err(), "cut at {end}");
    }
}

#[test]
fn protobuf_watch_frames_and_events() {
    use crate::watch::WatchEvent;
    use k8s_openapi::api::core::v1::Pod;
    let vector = pod_vector();
    let event = |kind: &str, object: &[u8]| {
        let mut extension = Vec::new();
        len_field(&mut extension, 1, object);
        let mut event = Vec::new();
        len_field(&mut event, 1, kind.as_bytes());
        len_field(&mut event, 2, &extension);
        let mut frame = (event.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&event);
        frame
    };
    let mut bookmark_meta = Vec::new();
    len_field(&mut bookmark_meta, 6, b"99");
    let mut bookmark = Vec::new();
    len_field(&mut bookmark, 1, &bookmark_meta);
    let mut status = Vec::new();
    len_field(&mut status, 3, b"too old");
    varint(&mut status, 6 << 3);
    varint(&mut status, 410);
    let stream = [
        event("ADDED", &vector.protobuf),
        event("BOOKMARK", &envelope("v1", "Pod", &bookmark)),
        event("ERROR", &envelope("apps/v1", "Status", &status)),
    ]
    .concat();
    for cut in 0..stream.len() {
        let mut frames = FrameDecoder::new(1 << 20);
        let mut events = Vec::new();
        for chunk in [&stream[..cut], &stream[cut..]] {
            frames.push(chunk);
            while let Some(frame) = frames.next_frame().expect("frame") {
                events.push(decode_event::<Pod>(&frame, ManagedFields::Keep).expect("event"));
            }
        }
        frames.finish().expect("whole");
        assert!(
            matches!(&events[..], [WatchEvent::Added(_), WatchEvent::Bookmark(b), WatchEvent::Error(e)]
            if b.resource_version == "99" && e.code == 410)
        );
    }
    let mut frames = FrameDecoder::new(10);
    frames.push(&[0, 0, 1, 0]);
    assert!(matches!(
        frames.next_frame(),
        Err(Error::FrameTooLarge { .. })
    ));
}

/// Bad input is a typed error: every cut of every vector, and every single-byte change of one.
#[test]
fn protobuf_bad_input_is_an_error_never_a_panic() {
    use k8s_openapi::api::core::v1::Pod;
    let vector = pod_vector();
    let every = vector.protobuf.len() / 1000 + 1;
    for end in (0..vector.protobuf.len()).step_by(every) {
        let _ = from_slice::<Pod>(&vector.protobuf[..end], ManagedFields::Keep);
        let _ = from_slice::<Value>(&vector.protobuf[..end], ManagedFields::Drop);
    }
    for at in (0..vector.protobuf.len()).step_by(every) {
        for byte in [0x02, 0xff] {
            let mut bad = vector.protobuf.clone();
            bad[at] = byte;
            let _ = from_slice::<Pod>(&bad, ManagedFields::Keep);
            let _ = from_slice::<Value>(&bad, ManagedFields::Keep);
        }
    }
    assert_eq!(
        from_slice::<Pod>(b"{}", ManagedFields::Keep),
        Err(Error::Magic)
    );
    assert!(matches!(
        from_slice::<Pod>(
            &envelope("example.com/v1", "Widget", b""),
            ManagedFields::Keep
        ),
        Err(Error::UnknownKind { .. })
    ));
    // A singular field twice is refused rather than half-applied.
    let mut pod = Vec::new();
    len_field(&mut pod, 1, b"");
    len_field(&mut pod, 1, b"");
    assert!(matches!(
        from_slice::<Pod>(&envelope("v1", "Pod", &pod), ManagedFields::Keep),
        Err(Error::Repeated { .. })
    ));
}

// ---- the encoder (core's), read back by this decoder ----

/// Every vector's JSON, encoded by core's encoder from a `serde_json::Value` and decoded again,
/// is the JSON Go writes: the encoder covers every built-in kind and every field of it.
#[test]
fn protobuf_encoder_round_trips_every_built_in_kind_from_json_values() {
    let mut failures = Vec::new();
    let all = vectors();
    for vector in &all {
        let mut go = vector.json.clone();
        without_nulls(&mut go);
        // The JSON as Go wrote it, `null`s included (a map entry whose value is `null` is an
        // entry all the same).
        let json = &vector.json;
        let encoded =
            match ferrokube_core::protobuf::encode(json, &vector.api_version, &vector.kind) {
                Ok(bytes) => bytes,
                Err(error) => {
                    failures.push(format!("{}: encode: {error}", vector.name));
                    continue;
                }
            };
        match from_slice::<Value>(&encoded, ManagedFields::Keep) {
            Ok(mut ours) => {
                without_nulls(&mut ours);
                if let Some(difference) = first_difference("", &ours, &go) {
                    failures.push(format!("{}: {difference}", vector.name));
                }
            }
            Err(error) => failures.push(format!("{}: decode: {error}", vector.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} differ:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

/// k8s-openapi's typed objects encode straight from their `Serialize` (no JSON tree) and decode
/// back equal, for the kinds a controller writes most.
fn typed_round_trip<K>(vector: &Vector) -> bool
where
    K: DeserializeOwned + serde::Serialize + PartialEq + std::fmt::Debug,
{
    let mut json = vector.json.clone();
    without_nulls(&mut json);
    let Ok(typed) = serde_json::from_value::<K>(json) else {
        // Go's zero objects leave out what k8s-openapi requires.
        return false;
    };
    let encoded = ferrokube_core::protobuf::encode(&typed, &vector.api_version, &vector.kind)
        .unwrap_or_else(|e| panic!("{}: {e}", vector.name));
    let back: K = from_slice(&encoded, ManagedFields::Keep)
        .unwrap_or_else(|e| panic!("{}: {e}", vector.name));
    assert_eq!(back, typed, "{}", vector.name);
    true
}

#[test]
fn protobuf_encoder_round_trips_k8s_openapi_types() {
    use k8s_openapi::api::{apps, batch, coordination, core, discovery, networking, rbac};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
    let mut compared = 0;
    for vector in vectors() {
        let equal = match (vector.api_version.as_str(), vector.kind.as_str()) {
            ("v1", "Pod") => typed_round_trip::<core::v1::Pod>(&vector),
            ("v1", "ConfigMap") => typed_round_trip::<core::v1::ConfigMap>(&vector),
            ("v1", "Secret") => typed_round_trip::<core::v1::Secret>(&vector),
            ("v1", "Node") => typed_round_trip::<core::v1::Node>(&vector),
            ("v1", "Service") => typed_round_trip::<core::v1::Service>(&vector),
            ("v1", "Event") => typed_round_trip::<core::v1::Event>(&vector),
            ("v1", "PersistentVolume") => typed_round_trip::<core::v1::PersistentVolume>(&vector),
            ("v1", "Namespace") => typed_round_trip::<core::v1::Namespace>(&vector),
            ("apps/v1", "Deployment") => typed_round_trip::<apps::v1::Deployment>(&vector),
            ("apps/v1", "ReplicaSet") => typed_round_trip::<apps::v1::ReplicaSet>(&vector),
            ("apps/v1", "StatefulSet") => typed_round_trip::<apps::v1::StatefulSet>(&vector),
            ("apps/v1", "ControllerRevision") => {
                typed_round_trip::<apps::v1::ControllerRevision>(&vector)
            }
            ("batch/v1", "Job") => typed_round_trip::<batch::v1::Job>(&vector),
            ("coordination.k8s.io/v1", "Lease") => {
                typed_round_trip::<coordination::v1::Lease>(&vector)
            }
            ("discovery.k8s.io/v1", "EndpointSlice") => {
                typed_round_trip::<discovery::v1::EndpointSlice>(&vector)
            }
            ("networking.k8s.io/v1", "Ingress") => {
                typed_round_trip::<networking::v1::Ingress>(&vector)
            }
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
                typed_round_trip::<rbac::v1::ClusterRole>(&vector)
            }
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
                typed_round_trip::<apiextensions::CustomResourceDefinition>(&vector)
            }
            _ => continue,
        };
        compared += usize::from(equal);
    }
    assert!(compared >= 20, "{compared}");
}

/// What has no faithful protobuf form is an error (the caller sends JSON), never a panic or a
/// silently dropped member.
#[test]
fn protobuf_encoder_refuses_what_it_cannot_write() {
    use ferrokube_core::protobuf::{EncodeError, encode};
    let cases = [
        (
            serde_json::json!({"metadata": {"name": "a"}}),
            "example.com/v1",
            "Widget",
        ),
        (
            serde_json::json!({"metadata": {"name": "a"}, "nonsense": 1}),
            "v1",
            "ConfigMap",
        ),
        (serde_json::json!({"data": {"k": 5}}), "v1", "ConfigMap"),
        (serde_json::json!({"data": ["k"]}), "v1", "ConfigMap"),
        (
            serde_json::json!({"metadata": {"creationTimestamp": "yesterday"}}),
            "v1",
            "ConfigMap",
        ),
        (
            serde_json::json!({"data": {"k": "not base64!"}}),
            "v1",
            "Secret",
        ),
        (
            serde_json::json!(["not", "an", "object"]),
            "v1",
            "ConfigMap",
        ),
        (
            serde_json::json!({"spec": {"replicas": 1e20}}),
            "apps/v1",
            "Deployment",
        ),
    ];
    for (value, api_version, kind) in cases {
        let outcome = encode(&value, api_version, kind);
        assert!(
            matches!(
                outcome,
                Err(EncodeError::UnknownKind { .. }
                    | EncodeError::UnknownField { .. }
                    | EncodeError::Shape { .. }
                    | EncodeError::Value { .. })
            ),
            "{value}: {outcome:?}"
        );
    }
    // Too deep: a CRD schema nested past the bound.
    let mut schema = serde_json::json!({"type": "object"});
    for _ in 0..80 {
        schema = serde_json::json!({"type": "object", "properties": {"x": schema}});
    }
    let crd = serde_json::json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]}});
    assert!(matches!(
        encode(&crd, "apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        Err(EncodeError::TooDeep { .. })
    ));
}

/// `len == capacity` for a decoded vector, with its path for the failure message.
fn exact<T>(path: &str, v: Option<&Vec<T>>, checked: &mut usize) {
    if let Some(v) = v {
        assert_eq!(
            v.capacity(),
            v.len(),
            "{path}: {} elements in {} slots",
            v.len(),
            v.capacity()
        );
        *checked += 1;
    }
}

#[test]
fn protobuf_repeated_fields_decode_into_vectors_without_spare_capacity() {
    use k8s_openapi::api::core::v1::Pod;
    let vector = pod_vector();
    let pod: Pod = from_slice(&vector.protobuf, ManagedFields::Drop).expect("decode");
    let from_json: Pod = serde_json::from_value(vector.json.clone()).expect("json");
    let mut expected = from_json;
    expected.metadata.managed_fields = None;
    assert_eq!(pod, expected, "the hint changes no value");

    let mut checked = 0;
    let spec = pod.spec.as_ref().expect("spec");
    exact("spec.containers", Some(&spec.containers), &mut checked);
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        exact("container.env", c.env.as_ref(), &mut checked);
        exact("container.ports", c.ports.as_ref(), &mut checked);
        exact("container.args", c.args.as_ref(), &mut checked);
        exact("container.command", c.command.as_ref(), &mut checked);
        exact(
            "container.volumeMounts",
            c.volume_mounts.as_ref(),
            &mut checked,
        );
        exact("container.envFrom", c.env_from.as_ref(), &mut checked);
    }
    exact("spec.tolerations", spec.tolerations.as_ref(), &mut checked);
    exact("spec.volumes", spec.volumes.as_ref(), &mut checked);
    exact(
        "spec.initContainers",
        spec.init_containers.as_ref(),
        &mut checked,
    );
    exact(
        "metadata.ownerReferences",
        pod.metadata.owner_references.as_ref(),
        &mut checked,
    );
    exact(
        "metadata.finalizers",
        pod.metadata.finalizers.as_ref(),
        &mut checked,
    );
    if let Some(status) = &pod.status {
        exact(
            "status.conditions",
            status.conditions.as_ref(),
            &mut checked,
        );
        exact(
            "status.containerStatuses",
            status.container_statuses.as_ref(),
            &mut checked,
        );
    }
    assert!(
        checked >= 10,
        "the full Pod sets these fields ({checked} checked)"
    );
}

#[test]
fn protobuf_packed_and_unpacked_runs_count_every_element() {
    use k8s_openapi::api::core::v1::Pod;
    // PodSecurityContext.supplementalGroups (4, repeated int64): a packed run of four (300 takes
    // two bytes), then one unpacked occurrence, with another field between. Five: without the
    // count, a Vec of 8-byte elements grows 4, 8 and keeps three slots spare.
    let mut packed = Vec::new();
    for v in [1u64, 300, 5, 9] {
        varint(&mut packed, v);
    }
    let mut security = Vec::new();
    len_field(&mut security, 4, &packed);
    varint(&mut security, 2 << 3); // runAsUser
    varint(&mut security, 1000);
    varint(&mut security, 4 << 3);
    varint(&mut security, 7);
    let mut spec = Vec::new();
    len_field(&mut spec, 14, &security);
    let mut pod = Vec::new();
    len_field(&mut pod, 2, &spec);
    let body = envelope("v1", "Pod", &pod);
    let pod: Pod = from_slice(&body, ManagedFields::Keep).expect("decode");
    let groups = pod
        .spec
        .and_then(|s| s.security_context)
        .and_then(|s| s.supplemental_groups)
        .expect("supplementalGroups");
    assert_eq!(groups, vec![1, 300, 5, 9, 7]);
    assert_eq!(groups.capacity(), groups.len());
}

/// What a seq or map's access promised (`size_hint`) and what it then handed out.
#[derive(Debug, PartialEq)]
struct Hinted {
    hint: Option<usize>,
    count: usize,
}

impl<'de> serde::Deserialize<'de> for Hinted {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Hinted, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Hinted;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Hinted, A::Error> {
                let hint = map.size_hint();
                let mut count = 0;
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {
                    count += 1;
                }
                Ok(Hinted { hint, count })
            }
        }
        d.deserialize_map(V)
    }
}

#[test]
fn protobuf_map_fields_promise_their_entry_count() {
    #[derive(serde::Deserialize)]
    struct Labels {
        metadata: Meta,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        labels: Hinted,
    }
    // ObjectMeta.labels (11): three entries, the second apart from the others.
    let entry = |k: &str, v: &str| {
        let mut e = Vec::new();
        len_field(&mut e, 1, k.as_bytes());
        len_field(&mut e, 2, v.as_bytes());
        e
    };
    let mut meta = Vec::new();
    len_field(&mut meta, 11, &entry("app", "web"));
    len_field(&mut meta, 1, b"web-0");
    len_field(&mut meta, 11, &entry("tier", "front"));
    len_field(&mut meta, 11, &entry("zone", "a"));
    let mut raw = Vec::new();
    len_field(&mut raw, 1, &meta);
    let body = envelope("v1", "ConfigMap", &raw);
    let decoded: Labels = from_slice(&body, ManagedFields::Keep).expect("decode");
    assert_eq!(
        decoded.metadata.labels,
        Hinted {
            hint: Some(3),
            count: 3
        }
    );
}
