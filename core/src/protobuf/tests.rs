//! The invariants a decoder relies on, checked over the whole generated table, and lookups of the
//! kinds Go clients send most.

use std::collections::{BTreeSet, HashSet};

use super::{Field, Fold, KINDS, Label, Presence, Schema, Ty, top_level};

/// Every schema reachable from the top-level kinds.
fn all_schemas() -> Vec<&'static Schema> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut stack: Vec<&'static Schema> = KINDS.iter().map(|k| k.schema).collect();
    while let Some(schema) = stack.pop() {
        if !seen.insert(schema.name) {
            continue;
        }
        out.push(schema);
        for field in schema.fields {
            if let Some(inner) = nested(field) {
                stack.push(inner);
            }
        }
    }
    out
}

fn nested(field: &Field) -> Option<&'static Schema> {
    match field.ty {
        Ty::Message(s) | Ty::Fold(s, _) | Ty::Wrapped(s) => Some(s),
        _ => None,
    }
}

#[test]
fn kinds_are_sorted_and_unique_so_lookup_can_search_by_halves() {
    for pair in KINDS.windows(2) {
        assert!(
            (pair[0].api_version, pair[0].kind) < (pair[1].api_version, pair[1].kind),
            "{} {} before {} {}",
            pair[0].api_version,
            pair[0].kind,
            pair[1].api_version,
            pair[1].kind
        );
    }
    for k in KINDS {
        let found = top_level(k.api_version, k.kind).map(|s| s.name);
        assert_eq!(found, Some(k.schema.name), "{} {}", k.api_version, k.kind);
    }
}

#[test]
fn fields_are_sorted_unique_and_valid() {
    for schema in all_schemas() {
        for pair in schema.fields.windows(2) {
            assert!(pair[0].number < pair[1].number, "{}", schema.name);
        }
        for field in schema.fields {
            assert!(
                (1..(1 << 29)).contains(&field.number),
                "{} {}",
                schema.name,
                field.number
            );
            assert_eq!(schema.field(field.number).map(|f| f.json), Some(field.json));
            // Only an inlined struct has no JSON name, and it is a plain message.
            assert_eq!(
                field.json.is_empty(),
                field.label == Label::Inline,
                "{} {}",
                schema.name,
                field.number
            );
            if field.label == Label::Inline {
                assert!(matches!(field.ty, Ty::Message(_)), "{}", schema.name);
            }
        }
        // No two fields (inlined ones' included) write the same JSON name.
        let mut names = BTreeSet::new();
        for name in json_names(schema) {
            assert!(names.insert(name), "{}: {name} twice", schema.name);
        }
    }
}

fn json_names(schema: &'static Schema) -> Vec<&'static str> {
    schema
        .fields
        .iter()
        .flat_map(|f| match (f.label, f.ty) {
            (Label::Inline, Ty::Message(inner)) => json_names(inner),
            _ => vec![f.json],
        })
        .collect()
}

#[test]
fn wrapped_and_folded_messages_have_the_shape_their_rules_read() {
    let mut wrapped = 0;
    let mut folds = BTreeSet::new();
    for schema in all_schemas() {
        for field in schema.fields {
            match field.ty {
                Ty::Wrapped(inner) => {
                    wrapped += 1;
                    assert_eq!(inner.fields.len(), 1, "{}", inner.name);
                    assert_eq!(inner.fields[0].number, 1);
                    assert_eq!(inner.fields[0].json, "items");
                    assert_eq!(inner.fields[0].label, Label::Repeated);
                }
                Ty::Fold(inner, fold) => {
                    folds.insert(format!("{fold:?}"));
                    let (list_name, list_number) = match fold {
                        Fold::Array => ("jSONSchemas", 2),
                        Fold::Bool => ("allows", 1),
                        Fold::StringArray => ("property", 2),
                    };
                    assert_eq!(inner.field(list_number).map(|f| f.json), Some(list_name));
                    assert!(inner.fields.iter().any(|f| f.json == "schema"));
                }
                _ => {}
            }
        }
    }
    // authentication, authorization and certificates' ExtraValue, ...
    assert!(wrapped >= 3, "{wrapped}");
    assert_eq!(folds.len(), 3, "{folds:?}");
}

#[test]
fn only_a_crd_schema_recurses() {
    // Depth-first over the schema graph: a schema met again on its own path is a cycle.
    fn walk(
        schema: &'static Schema,
        path: &mut Vec<&'static str>,
        done: &mut HashSet<&'static str>,
        cyclic: &mut BTreeSet<&'static str>,
    ) {
        if let Some(at) = path.iter().position(|n| *n == schema.name) {
            cyclic.extend(path[at..].iter().copied());
            return;
        }
        if !done.insert(schema.name) {
            return;
        }
        path.push(schema.name);
        for field in schema.fields {
            if let Some(inner) = nested(field) {
                walk(inner, path, done, cyclic);
            }
        }
        path.pop();
    }
    let mut cyclic = BTreeSet::new();
    let mut done = HashSet::new();
    for k in KINDS {
        walk(k.schema, &mut Vec::new(), &mut done, &mut cyclic);
    }
    assert!(cyclic.contains("apiextensions.v1.JSONSchemaProps"));
    for name in &cyclic {
        assert!(
            name.starts_with("apiextensions.v1.JSONSchemaProps"),
            "{name} recurses"
        );
    }
}

#[test]
fn the_kinds_go_clients_send_are_there() {
    for (api_version, kind, message) in [
        ("v1", "Pod", "core.v1.Pod"),
        ("v1", "Node", "core.v1.Node"),
        ("v1", "ServiceAccount", "core.v1.ServiceAccount"),
        ("v1", "PodList", "core.v1.PodList"),
        ("apps/v1", "ReplicaSet", "apps.v1.ReplicaSet"),
        ("autoscaling/v1", "Scale", "autoscaling.v1.Scale"),
        (
            "autoscaling/v2",
            "HorizontalPodAutoscaler",
            "autoscaling.v2.HorizontalPodAutoscaler",
        ),
        ("policy/v1", "Eviction", "policy.v1.Eviction"),
        (
            "authentication.k8s.io/v1",
            "TokenRequest",
            "authentication.v1.TokenRequest",
        ),
        (
            "certificates.k8s.io/v1",
            "CertificateSigningRequest",
            "certificates.v1.CertificateSigningRequest",
        ),
        ("coordination.k8s.io/v1", "Lease", "coordination.v1.Lease"),
        (
            "resource.k8s.io/v1",
            "ResourceClaim",
            "resource.v1.ResourceClaim",
        ),
        (
            "flowcontrol.apiserver.k8s.io/v1",
            "FlowSchema",
            "flowcontrol.v1.FlowSchema",
        ),
        (
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "apiextensions.v1.CustomResourceDefinition",
        ),
        (
            "apiregistration.k8s.io/v1",
            "APIService",
            "apiregistration.v1.APIService",
        ),
        ("meta.k8s.io/v1", "DeleteOptions", "meta.v1.DeleteOptions"),
        (
            "meta.k8s.io/v1",
            "PartialObjectMetadata",
            "meta.v1.PartialObjectMetadata",
        ),
        // Any group version: a custom resource's typed client sends its own.
        ("example.com/v1", "DeleteOptions", "meta.v1.DeleteOptions"),
    ] {
        assert_eq!(
            top_level(api_version, kind).map(|s| s.name),
            Some(message),
            "{api_version} {kind}"
        );
    }
    for (api_version, kind) in [
        ("v1", "Widget"),
        ("apps/v1beta1", "Deployment"),
        ("", "Pod"),
        ("v1", ""),
    ] {
        assert!(
            top_level(api_version, kind).is_none(),
            "{api_version} {kind}"
        );
    }
}

#[test]
fn presence_comes_from_go_pointers_and_omitempty() {
    let field = |api_version: &str, kind: &str, path: &[u32]| -> &'static Field {
        let mut schema = top_level(api_version, kind).expect("kind");
        let (last, inner) = path.split_last().expect("a path");
        for number in inner {
            schema = match schema.field(*number).map(|f| f.ty) {
                Some(Ty::Message(s)) => s,
                other => panic!("{number}: {other:?}"),
            };
        }
        schema.field(*last).expect("field")
    };
    // DeploymentSpec.replicas is *int32; ObjectMeta.name is `omitempty`; ContainerStatus.ready has
    // no omitempty; ServicePort.targetPort is a struct (IntOrString), never omitted.
    let replicas = field("apps/v1", "Deployment", &[2, 1]);
    assert_eq!(
        (replicas.json, replicas.presence),
        ("replicas", Presence::Pointer)
    );
    let name = field("v1", "Pod", &[1, 1]);
    assert_eq!((name.json, name.presence), ("name", Presence::OmitEmpty));
    assert!(!name.presence.keeps_zero());
    let ready = field("v1", "Pod", &[3, 8, 4]);
    assert_eq!((ready.json, ready.presence), ("ready", Presence::Always));
    let target = field("v1", "Service", &[2, 1, 4]);
    assert!(matches!(target.ty, Ty::IntOrString));
    assert_eq!(target.presence, Presence::Always);
    // Volume inlines its VolumeSource.
    let pod_spec = field("v1", "Pod", &[2]);
    let Ty::Message(pod_spec) = pod_spec.ty else {
        panic!("PodSpec")
    };
    let volumes = pod_spec.field(1).expect("volumes");
    assert_eq!((volumes.json, volumes.label), ("volumes", Label::Repeated));
    let Ty::Message(volume) = volumes.ty else {
        panic!("Volume")
    };
    assert_eq!(volume.field(2).map(|f| f.label), Some(Label::Inline));
}
