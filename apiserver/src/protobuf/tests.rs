//! Hand-built protobuf bodies, one per kind and per rule of the module docs, and the malformed
//! inputs that must give a typed error.

use serde_json::json;

use super::{DecodeError, decode};
use ferrokube_core::protobuf::wire::WireError;

// ---- a tiny encoder, for building inputs ----

fn varint(mut value: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A message under construction.
#[derive(Default, Clone)]
struct Msg(Vec<u8>);

impl Msg {
    fn new() -> Msg {
        Msg::default()
    }
    fn int(mut self, field: u32, value: i64) -> Msg {
        varint(u64::from(field) << 3, &mut self.0);
        varint(value as u64, &mut self.0);
        self
    }
    fn bytes(mut self, field: u32, value: &[u8]) -> Msg {
        varint((u64::from(field) << 3) | 2, &mut self.0);
        varint(value.len() as u64, &mut self.0);
        self.0.extend_from_slice(value);
        self
    }
    fn str(self, field: u32, value: &str) -> Msg {
        self.bytes(field, value.as_bytes())
    }
    fn msg(self, field: u32, value: Msg) -> Msg {
        self.bytes(field, &value.0)
    }
    /// One `map<string, string>` entry.
    fn entry(self, field: u32, key: &str, value: &str) -> Msg {
        self.msg(field, Msg::new().str(1, key).str(2, value))
    }
}

/// `k8s\0` + runtime.Unknown around `object`.
fn body(api_version: &str, kind: &str, object: Msg) -> Vec<u8> {
    let unknown = Msg::new()
        .msg(1, Msg::new().str(1, api_version).str(2, kind))
        .msg(2, object)
        .str(3, "")
        .str(4, "");
    let mut out = b"k8s\0".to_vec();
    out.extend_from_slice(&unknown.0);
    out
}

/// ObjectMeta as a Go client of 1.20 writes it: every non-pointer field, most of them empty.
fn meta(name: &str) -> Msg {
    Msg::new()
        .str(1, name)
        .str(2, "")
        .str(3, "")
        .str(4, "")
        .str(5, "")
        .str(6, "")
        .int(7, 0)
        .msg(8, Msg::new())
        .str(15, "")
}

/// ObjectMeta with a name and an `app` label.
fn meta_ok(name: &str) -> Msg {
    Msg::new()
        .str(1, name)
        .str(2, "")
        .str(3, "")
        .int(7, 0)
        .msg(8, Msg::new())
        .entry(11, "app", name)
}

#[test]
fn a_namespace_has_its_name_and_labels_and_no_zero_fields() {
    let ns = Msg::new()
        .msg(1, meta("team-a").entry(11, "app", "team-a"))
        .msg(2, Msg::new())
        .msg(3, Msg::new().str(1, ""));
    let decoded = decode(&body("v1", "Namespace", ns)).expect("decodes");
    assert_eq!(
        decoded,
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": "team-a", "labels": {"app": "team-a"}},
               "spec": {}, "status": {}})
    );
}

#[test]
fn a_config_map_has_its_data_and_a_pointer_false_is_kept() {
    let cm = Msg::new()
        .msg(1, meta_ok("settings"))
        .entry(2, "mode", "fast")
        .entry(2, "size", "3")
        .msg(3, Msg::new().str(1, "blob").bytes(2, &[0, 1, 2]))
        .int(4, 0);
    let decoded = decode(&body("v1", "ConfigMap", cm)).expect("decodes");
    assert_eq!(
        decoded,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "settings", "labels": {"app": "settings"}},
               "data": {"mode": "fast", "size": "3"},
               "binaryData": {"blob": "AAEC"},
               "immutable": false})
    );
}

#[test]
fn a_secret_has_base64_data_and_its_type() {
    let secret = Msg::new()
        .msg(1, meta_ok("creds"))
        .msg(2, Msg::new().str(1, "password").bytes(2, b"s3cr\xffet"))
        // A map entry without a value: the empty value.
        .msg(2, Msg::new().str(1, "empty"))
        .str(3, "Opaque");
    let decoded = decode(&body("v1", "Secret", secret)).expect("decodes");
    assert_eq!(
        decoded["data"],
        json!({"password": "czNjcv9ldA==", "empty": ""})
    );
    assert_eq!(decoded["type"], "Opaque");
    assert!(decoded.get("immutable").is_none(), "absent stays absent");
}

#[test]
fn a_service_has_ports_with_int_or_string_target_ports() {
    let port = |name: &str, port: i64, target: Msg| {
        Msg::new()
            .str(1, name)
            .str(2, "TCP")
            .int(3, port)
            .msg(4, target)
            .int(5, 0)
    };
    let spec = Msg::new()
        .msg(
            1,
            port("http", 80, Msg::new().int(1, 0).int(2, 8080).str(3, "")),
        )
        .msg(
            1,
            port("web", 443, Msg::new().int(1, 1).int(2, 0).str(3, "https")),
        )
        .entry(2, "app", "web")
        .str(3, "")
        .str(4, "NodePort")
        .str(7, "")
        .int(12, 0)
        .int(13, 0);
    let svc = Msg::new()
        .msg(1, meta_ok("web"))
        .msg(2, spec)
        .msg(3, Msg::new().msg(1, Msg::new()));
    let decoded = decode(&body("v1", "Service", svc)).expect("decodes");
    assert_eq!(
        decoded["spec"],
        json!({"ports": [
                   {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                   {"name": "web", "protocol": "TCP", "port": 443, "targetPort": "https"}],
               "selector": {"app": "web"}, "type": "NodePort"})
    );
    assert_eq!(decoded["status"], json!({"loadBalancer": {}}));
}

fn container() -> Msg {
    Msg::new()
        .str(1, "nginx")
        .str(2, "nginx:1.25")
        .str(3, "sh")
        .str(3, "-c")
        .str(4, "sleep 1")
        .str(5, "")
        .msg(
            6,
            Msg::new()
                .str(1, "")
                .int(2, 0)
                .int(3, 80)
                .str(4, "TCP")
                .str(5, ""),
        )
        .msg(7, Msg::new().str(1, "MODE").str(2, "fast"))
        .msg(
            8,
            Msg::new()
                .msg(
                    1,
                    Msg::new().str(1, "cpu").msg(2, Msg::new().str(1, "500m")),
                )
                .msg(
                    2,
                    Msg::new()
                        .str(1, "memory")
                        .msg(2, Msg::new().str(1, "64Mi")),
                ),
        )
        .str(13, "")
        .str(14, "")
        .int(16, 0)
        .int(17, 0)
        .int(18, 0)
        .str(20, "")
}

const CONTAINER_JSON: &str = r#"{"name": "nginx", "image": "nginx:1.25", "command": ["sh", "-c"],
    "args": ["sleep 1"], "ports": [{"containerPort": 80, "protocol": "TCP"}],
    "env": [{"name": "MODE", "value": "fast"}],
    "resources": {"limits": {"cpu": "500m"}, "requests": {"memory": "64Mi"}}}"#;

#[test]
fn a_deployment_keeps_zero_replicas_and_decodes_its_template() {
    let spec = Msg::new()
        .int(1, 0)
        .msg(2, Msg::new().entry(1, "app", "web"))
        .msg(
            3,
            Msg::new()
                .msg(1, Msg::new().str(1, "").entry(11, "app", "web"))
                .msg(2, Msg::new().msg(2, container()).str(3, "").str(6, "")),
        )
        .msg(
            4,
            Msg::new().str(1, "RollingUpdate").msg(
                2,
                Msg::new()
                    .msg(1, Msg::new().int(1, 0).int(2, 0))
                    .msg(2, Msg::new().int(1, 1).str(3, "25%")),
            ),
        )
        .int(5, 0)
        .int(7, 0);
    let status = Msg::new().int(1, 0).int(2, 0).int(3, 0).int(7, 0);
    let deploy = Msg::new()
        .msg(1, meta_ok("web"))
        .msg(2, spec)
        .msg(3, status);
    let decoded = decode(&body("apps/v1", "Deployment", deploy)).expect("decodes");
    let container: serde_json::Value = serde_json::from_str(CONTAINER_JSON).expect("json");
    assert_eq!(
        decoded["spec"],
        json!({"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
               "template": {"metadata": {"labels": {"app": "web"}},
                            "spec": {"containers": [container]}},
               "strategy": {"type": "RollingUpdate",
                            "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "25%"}}})
    );
    assert_eq!(decoded["status"], json!({}));
    assert_eq!(decoded["apiVersion"], "apps/v1");
}

#[test]
fn a_pod_has_its_containers_and_times_are_rfc3339() {
    let pod = Msg::new()
        .msg(
            1,
            meta_ok("p")
                .msg(9, Msg::new().int(1, 1_700_000_000).int(2, 5))
                .int(10, 0),
        )
        .msg(
            2,
            Msg::new().msg(2, container()).str(3, "Never").int(25, -5),
        )
        .msg(3, Msg::new().str(1, "Pending").msg(7, Msg::new()));
    let decoded = decode(&body("v1", "Pod", pod)).expect("decodes");
    let container: serde_json::Value = serde_json::from_str(CONTAINER_JSON).expect("json");
    assert_eq!(
        decoded["spec"],
        json!({"containers": [container], "restartPolicy": "Never", "priority": -5})
    );
    assert_eq!(
        decoded["metadata"]["deletionTimestamp"],
        "2023-11-14T22:13:20Z"
    );
    assert_eq!(decoded["metadata"]["deletionGracePeriodSeconds"], 0);
    assert!(decoded["metadata"].get("creationTimestamp").is_none());
    assert_eq!(decoded["status"], json!({"phase": "Pending"}));
}

#[test]
fn an_unknown_field_is_refused_naming_message_and_number() {
    // Container has no field 999 (in 1.37).
    let with_probe = container().msg(999, Msg::new());
    let pod = Msg::new().msg(2, Msg::new().msg(2, with_probe));
    let error = decode(&body("v1", "Pod", pod)).expect_err("refused");
    assert_eq!(
        error,
        DecodeError::UnknownField {
            message: "core.v1.Container",
            field: 999
        }
    );
    assert!(error.is_unsupported());
    let text = error.to_string();
    assert!(
        text.contains("field 999 of message core.v1.Container"),
        "{text}"
    );
    assert!(text.contains("send JSON"), "{text}");
    // ObjectMeta field 16 is not used by any release.
    let ns = Msg::new().msg(1, meta("x").msg(16, Msg::new()));
    assert_eq!(
        decode(&body("v1", "Namespace", ns)),
        Err(DecodeError::UnknownField {
            message: "meta.v1.ObjectMeta",
            field: 16
        })
    );
}

#[test]
fn an_unknown_kind_or_encoding_is_unsupported() {
    let error = decode(&body("v1", "Widget", Msg::new())).expect_err("refused");
    assert!(matches!(&error, DecodeError::UnknownKind { kind, .. } if kind == "Widget"));
    assert!(error.is_unsupported());
    let mut gzip = b"k8s\0".to_vec();
    gzip.extend(
        Msg::new()
            .msg(1, Msg::new().str(1, "v1").str(2, "Pod"))
            .str(3, "gzip")
            .0,
    );
    assert_eq!(
        decode(&gzip),
        Err(DecodeError::ContentEncoding("gzip".into()))
    );
    assert_eq!(
        decode(&body("", "", Msg::new())),
        Err(DecodeError::NoTypeMeta)
    );
}

#[test]
fn malformed_input_is_a_typed_error() {
    let good = body("v1", "ConfigMap", Msg::new().msg(1, meta_ok("c")));
    let whole = decode(&good).expect("decodes");
    assert_eq!(decode(b"{\"kind\":\"Pod\"}"), Err(DecodeError::Magic));
    assert_eq!(decode(b""), Err(DecodeError::Magic));
    // Every strict prefix past the magic is truncated somewhere, or (cut at a field boundary)
    // lacks its type meta or its object, or only the envelope's empty trailing fields.
    for end in 4..good.len() {
        let result = decode(&good[..end]);
        assert!(
            matches!(
                result,
                Err(DecodeError::Wire(WireError::Truncated { .. }) | DecodeError::NoTypeMeta)
            ) || result
                .as_ref()
                .is_ok_and(|v| v["metadata"].is_null() || *v == whole),
            "prefix {end}: {result:?}"
        );
    }
    // A varint that never ends, and one of eleven bytes.
    assert!(matches!(
        decode(b"k8s\0\x0a\xff\xff"),
        Err(DecodeError::Wire(WireError::Truncated { .. }))
    ));
    assert!(matches!(
        decode(b"k8s\0\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
        Err(DecodeError::Wire(WireError::Varint { .. }))
    ));
    // A length past the end.
    assert!(matches!(
        decode(b"k8s\0\x0a\x7f\x0a"),
        Err(DecodeError::Wire(WireError::Truncated { .. }))
    ));
    // Field number 0.
    assert!(matches!(
        decode(b"k8s\0\x02\x00"),
        Err(DecodeError::Wire(WireError::FieldNumber { number: 0, .. }))
    ));
    // The wrong wire type: ConfigMap metadata as a varint.
    let cm = Msg::new().int(1, 5);
    assert_eq!(
        decode(&body("v1", "ConfigMap", cm)),
        Err(DecodeError::Wire(WireError::WrongType {
            message: "core.v1.ConfigMap",
            field: 1,
        }))
    );
    // A fixed64 field (wire type 1) where a string is expected.
    let cm = Msg::new().msg(1, Msg(vec![0x09, 1, 2, 3, 4, 5, 6, 7, 8]));
    assert!(matches!(
        decode(&body("v1", "ConfigMap", cm)),
        Err(DecodeError::Wire(WireError::WrongType { .. }))
    ));
    // A name that is not UTF-8.
    let cm = Msg::new().msg(1, Msg::new().bytes(1, b"\xff\xfe"));
    assert_eq!(
        decode(&body("v1", "ConfigMap", cm)),
        Err(DecodeError::Utf8 {
            message: "meta.v1.ObjectMeta",
            field: 1
        })
    );
}

/// Random bytes and random edits of good bodies never panic (the fuzz target `protobuf_body` of
/// ferrokube-fuzzing, in fuzz/, runs the same property longer). A fixed xorshift sequence keeps
/// it deterministic.
#[test]
fn random_and_mutated_bodies_never_panic() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let pod = Msg::new()
        .msg(1, meta_ok("p"))
        .msg(2, Msg::new().msg(2, container()));
    let good = body("v1", "Pod", pod);
    for _ in 0..20_000 {
        let mut input = if next() % 4 == 0 {
            let mut bytes = b"k8s\0".to_vec();
            bytes.extend((0..next() % 64).map(|_| next() as u8));
            bytes
        } else {
            good.clone()
        };
        for _ in 0..1 + next() % 4 {
            let at = (next() as usize) % input.len();
            match next() % 3 {
                0 => input[at] = next() as u8,
                1 => input.truncate(at.max(4)),
                _ => input.insert(at, next() as u8),
            }
        }
        let _ = decode(&input);
    }
}

// ---- apiextensions.k8s.io/v1 CustomResourceDefinition ----

/// A CRD as client-go 1.37 sends it, and the same object as Go's `encoding/json` writes it: made by
/// `tests/fixtures/crd-protobuf/main.go` (k8s.io/apiextensions-apiserver v0.37.2).
const CRD_PB: &[u8] = include_bytes!("../../tests/fixtures/crd-protobuf/crd.pb");
const CRD_JSON: &str = include_str!("../../tests/fixtures/crd-protobuf/crd.json");

#[test]
fn a_crd_from_client_go_decodes_to_its_go_json_form() {
    let decoded = decode(CRD_PB).expect("decodes");
    let go: serde_json::Value = serde_json::from_str(CRD_JSON).expect("fixture is JSON");
    assert_eq!(decoded["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(decoded["kind"], "CustomResourceDefinition");
    assert_eq!(decoded["metadata"], go["metadata"]);
    // The whole spec, schema included, exactly as Go writes it: `served: false`, `maxLength: 0`
    // and `optionalOldSelf: false` kept, `minimum: 1` an integer, `maximum: 10.5` not, `items` a
    // schema, `additionalProperties` a schema and `false`, `default`, `enum` and `example` JSON.
    assert_eq!(decoded["spec"], go["spec"]);
    // Go writes an empty status as `{"conditions": null, "acceptedNames": {"plural": "", "kind":
    // ""}, "storedVersions": null}`: `plural` and `kind` have no `omitempty`, so their empty values
    // are kept; the nil lists were not on the wire.
    assert_eq!(
        decoded["status"],
        json!({"acceptedNames": {"plural": "", "kind": ""}})
    );
}

#[test]
fn every_prefix_of_the_crd_is_an_error_not_a_panic() {
    // Cutting the body inside a field leaves a length that runs past the end: an error. Only the
    // cuts between the envelope's fields decode: before the object (no `raw`: an empty object, as
    // in Go) and after it (before the empty contentEncoding, before the empty contentType).
    let whole = decode(CRD_PB).expect("decodes");
    let empty =
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"});
    let mut decoded = Vec::new();
    for end in 4..CRD_PB.len() {
        if let Ok(value) = decode(&CRD_PB[..end]) {
            decoded.push(value);
        }
    }
    assert_eq!(decoded, vec![empty, whole.clone(), whole]);
}

/// A CRD body around `spec`, a CustomResourceDefinitionSpec message.
fn crd(spec: Msg) -> Vec<u8> {
    body(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        Msg::new().msg(1, meta("w.example.com")).msg(2, spec),
    )
}

/// A spec with one version whose openAPIV3Schema is `props`.
fn crd_with_schema(props: Msg) -> Vec<u8> {
    let version = Msg::new()
        .str(1, "v1")
        .int(2, 1)
        .int(3, 1)
        .msg(4, Msg::new().msg(1, props));
    crd(Msg::new().str(1, "example.com").msg(7, version))
}

/// A `double` field: key with wire type 1, then eight little-endian bytes.
fn double(mut msg: Msg, field: u32, value: f64) -> Msg {
    varint((u64::from(field) << 3) | 1, &mut msg.0);
    msg.0.extend_from_slice(&value.to_le_bytes());
    msg
}

fn openapi_schema(decoded: &serde_json::Value) -> &serde_json::Value {
    &decoded["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
}

#[test]
fn schema_or_types_fold_into_their_json_shapes() {
    let string = Msg::new().str(5, "string");
    let props = Msg::new()
        .str(5, "object")
        // items: a list of schemas (jSONSchemas) wins over none.
        .msg(24, Msg::new().msg(2, string.clone()).msg(2, string.clone()))
        // additionalProperties {allows: true} without a schema: `true`.
        .msg(30, Msg::new().int(1, 1))
        // additionalItems {}: `false`.
        .msg(33, Msg::new())
        // dependencies: one a list of property names, one a schema.
        .msg(
            32,
            Msg::new()
                .str(1, "a")
                .msg(2, Msg::new().str(2, "b").str(2, "c")),
        )
        .msg(32, Msg::new().str(1, "d").msg(2, Msg::new().msg(1, string)));
    let decoded = decode(&crd_with_schema(props)).expect("decodes");
    assert_eq!(
        openapi_schema(&decoded),
        &json!({"type": "object",
                "items": [{"type": "string"}, {"type": "string"}],
                "additionalProperties": true,
                "additionalItems": false,
                "dependencies": {"a": ["b", "c"], "d": {"type": "string"}}})
    );
}

#[test]
fn doubles_are_integers_when_whole_and_json_fields_hold_any_value() {
    let props = double(double(Msg::new(), 9, -3.0), 11, 0.25);
    let props = double(props, 19, 1e300)
        .msg(8, Msg::new().bytes(1, br#"{"x": [true, null, "y"]}"#))
        .msg(20, Msg::new().bytes(1, b"3"))
        .msg(20, Msg::new());
    let decoded = decode(&crd_with_schema(props)).expect("decodes");
    assert_eq!(
        openapi_schema(&decoded),
        &json!({"maximum": -3, "minimum": 0.25, "multipleOf": 1e300,
                "default": {"x": [true, null, "y"]}, "enum": [3, null]})
    );
}

#[test]
fn crd_input_that_is_malformed_is_a_400_error() {
    // A double that is not finite.
    let error = decode(&crd_with_schema(double(Msg::new(), 9, f64::NAN))).expect_err("NaN");
    assert_eq!(
        error,
        DecodeError::NotFinite {
            message: "apiextensions.v1.JSONSchemaProps",
            field: 9
        }
    );
    assert!(!error.is_unsupported());
    // A double as a varint, and a double cut short.
    assert!(matches!(
        decode(&crd_with_schema(Msg::new().int(9, 3))),
        Err(DecodeError::Wire(WireError::WrongType { field: 9, .. }))
    ));
    let mut short = Msg::new();
    varint((9 << 3) | 1, &mut short.0);
    short.0.extend_from_slice(&[0, 0, 0]);
    assert!(matches!(
        decode(&crd_with_schema(short)),
        Err(DecodeError::Wire(WireError::Truncated { .. }))
    ));
    // A JSON field whose bytes are not JSON.
    let error = decode(&crd_with_schema(
        Msg::new().msg(8, Msg::new().bytes(1, b"{not json")),
    ))
    .expect_err("bad JSON");
    assert!(
        matches!(&error, DecodeError::Json { message, field: 8, .. }
            if *message == "apiextensions.v1.JSONSchemaProps"),
        "{error:?}"
    );
    assert!(!error.is_unsupported());
}

#[test]
fn an_unknown_crd_field_is_still_refused() {
    // JSONSchemaProps has no field 45 (in 1.37), CustomResourceDefinitionSpec no field 2 (it was
    // `version` in v1beta1).
    assert_eq!(
        decode(&crd_with_schema(Msg::new().str(45, "x"))),
        Err(DecodeError::UnknownField {
            message: "apiextensions.v1.JSONSchemaProps",
            field: 45
        })
    );
    let error = decode(&crd(Msg::new().str(2, "v1"))).expect_err("refused");
    assert_eq!(
        error,
        DecodeError::UnknownField {
            message: "apiextensions.v1.CustomResourceDefinitionSpec",
            field: 2
        }
    );
    assert!(error.is_unsupported());
    // Inside JSON {1 raw}: nothing but raw.
    assert!(matches!(
        decode(&crd_with_schema(Msg::new().msg(8, Msg::new().int(2, 1)))),
        Err(DecodeError::UnknownField { field: 2, .. })
    ));
}

#[test]
fn schemas_nested_beyond_the_limit_are_refused_not_overflowed() {
    // `not` inside `not` ...: the CRD, spec, version, validation and schema take five levels.
    let nested = |levels: usize| {
        let mut props = Msg::new().str(5, "string");
        for _ in 0..levels {
            props = Msg::new().msg(28, props);
        }
        crd_with_schema(props)
    };
    let deepest = super::MAX_DEPTH - 5;
    let decoded = decode(&nested(deepest)).expect("at the limit");
    let mut schema = openapi_schema(&decoded);
    for _ in 0..deepest {
        schema = &schema["not"];
    }
    assert_eq!(schema, &json!({"type": "string"}));
    let error = decode(&nested(deepest + 1)).expect_err("beyond the limit");
    assert_eq!(
        error,
        DecodeError::TooDeep {
            message: "apiextensions.v1.JSONSchemaProps"
        }
    );
    assert!(!error.is_unsupported());
    // Far beyond: an error, not a stack overflow.
    assert!(decode(&nested(10_000)).is_err());
}

#[test]
fn managed_fields_decode_with_their_fields_v1_as_json() {
    let entry = Msg::new()
        .str(1, "e2e.test")
        .str(2, "Update")
        .str(3, "v1")
        .msg(4, Msg::new().int(1, 86_400))
        .str(6, "FieldsV1")
        .msg(7, Msg::new().bytes(1, br#"{"f:data":{".":{}}}"#))
        .str(8, "");
    let cm = Msg::new().msg(1, meta("m").msg(17, entry));
    let decoded = decode(&body("v1", "ConfigMap", cm)).expect("decodes");
    assert_eq!(
        decoded["metadata"]["managedFields"],
        json!([{"manager": "e2e.test", "operation": "Update", "apiVersion": "v1",
                "time": "1970-01-02T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}}}}])
    );
}

#[test]
fn delete_options_decode_under_any_group_version() {
    let options = Msg::new()
        .int(1, 0)
        .msg(2, Msg::new().str(1, "uid-1").str(2, ""))
        .str(4, "Foreground")
        .str(5, "All");
    let decoded =
        decode(&body("apiextensions.k8s.io/v1", "DeleteOptions", options)).expect("decodes");
    // A grace period of 0 and an empty resourceVersion precondition are pointers: kept.
    assert_eq!(
        decoded,
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "DeleteOptions",
               "gracePeriodSeconds": 0,
               "preconditions": {"uid": "uid-1", "resourceVersion": ""},
               "propagationPolicy": "Foreground", "dryRun": ["All"]})
    );
    // An unsafe deletion is not something this server does: refused, not ignored.
    let unsafe_delete = Msg::new().int(6, 1);
    assert_eq!(
        decode(&body("meta.k8s.io/v1", "DeleteOptions", unsafe_delete)),
        Err(DecodeError::UnknownField {
            message: "meta.v1.DeleteOptions",
            field: 6
        })
    );
}

// ---- every built-in kind, as Go encodes it ----

/// Two objects per top-level kind of Kubernetes 1.37 (every field set; every pointer set to its
/// zero value), each as client-go's protobuf body and as Go's `encoding/json` writes it: written by
/// `scripts/protobuf-schema.sh` (see `scripts/protobuf-schema/vectors.go`), one JSON object a line
/// with `apiVersion`, `kind`, `case`, `protobuf` (base64) and `json`.
const VECTORS: &str = include_str!("../../tests/fixtures/protobuf/vectors.jsonl");

/// The one normalisation the comparison needs: a member whose value is `null` is the same as an
/// absent one. Go writes `null` for a nil slice, map or pointer without `omitempty` and for a zero
/// `Time`; the decoder leaves what was not on the wire out (and writes `null` for an empty
/// `RawExtension`, which Go writes as `null` too).
fn without_nulls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(without_nulls);
        }
        serde_json::Value::Array(list) => list.iter_mut().for_each(without_nulls),
        _ => {}
    }
}

/// The first path at which two JSON values differ, for a readable failure.
fn first_difference(
    path: &str,
    ours: &serde_json::Value,
    go: &serde_json::Value,
) -> Option<String> {
    use serde_json::Value;
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

#[test]
fn fidelity_every_built_in_kind_decodes_to_the_json_go_writes() {
    use base64::Engine;
    let mut kinds = std::collections::BTreeSet::new();
    let mut failures = Vec::new();
    for line in VECTORS.lines() {
        let vector: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let name = format!(
            "{} {} ({})",
            vector["apiVersion"].as_str().unwrap_or_default(),
            vector["kind"].as_str().unwrap_or_default(),
            vector["case"].as_str().unwrap_or_default()
        );
        let body = base64::engine::general_purpose::STANDARD
            .decode(vector["protobuf"].as_str().expect("protobuf"))
            .expect("base64");
        let mut go = vector["json"].clone();
        without_nulls(&mut go);
        // Without the server's refusals (REFUSED): Go fills every field, the unsafe-deletion flag
        // of DeleteOptions included; `delete_options_decode_under_any_group_version` checks the
        // refusal.
        match super::decode_with(&body, &[]) {
            Ok(mut ours) => {
                without_nulls(&mut ours);
                if let Some(difference) = first_difference("", &ours, &go) {
                    failures.push(format!("{name}: {difference}"));
                }
            }
            Err(error) => failures.push(format!("{name}: {error}")),
        }
        kinds.insert(name);
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors differ:\n{}",
        failures.len(),
        kinds.len(),
        failures.join("\n")
    );
    // Every GA kind but the lists, twice: a fixture cut short would pass vacuously.
    assert!(kinds.len() >= 190, "{}", kinds.len());
    assert!(kinds.contains("v1 Node (full)"));
    assert!(kinds.contains("apiextensions.k8s.io/v1 CustomResourceDefinition (zero)"));
}

/// Core's encoder (what the client sends and this server answers with) writes every vector's JSON
/// so that this server's decoder reads back the JSON Go writes: the two directions agree on every
/// field of every built-in kind.
#[test]
fn fidelity_protobuf_encoder_output_decodes_to_the_json_go_writes() {
    let mut failures = Vec::new();
    let mut count = 0;
    for line in VECTORS.lines() {
        let vector: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let (api_version, kind) = (
            vector["apiVersion"].as_str().unwrap_or_default(),
            vector["kind"].as_str().unwrap_or_default(),
        );
        let name = format!("{api_version} {kind} ({})", vector["case"]);
        let body = match ferrokube_core::protobuf::encode(&vector["json"], api_version, kind) {
            Ok(body) => body,
            Err(error) => {
                failures.push(format!("{name}: encode: {error}"));
                continue;
            }
        };
        let mut go = vector["json"].clone();
        without_nulls(&mut go);
        match super::decode_with(&body, &[]) {
            Ok(mut ours) => {
                without_nulls(&mut ours);
                if let Some(difference) = first_difference("", &ours, &go) {
                    failures.push(format!("{name}: {difference}"));
                }
            }
            Err(error) => failures.push(format!("{name}: {error}")),
        }
        count += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(count >= 190, "{count}");
}
