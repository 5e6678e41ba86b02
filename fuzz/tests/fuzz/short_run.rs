//! The short fuzz run of `cargo test`: each harness driven by proptest with a fixed seed and a
//! fixed number of cases (so CI is deterministic), plus every file of the committed corpus
//! (`fuzz/seeds/<target>/`) replayed.
//!
//! Longer runs: `scripts/fuzz.sh`, which runs cargo-fuzz, or these tests with more cases and
//! another seed through the environment:
//!
//! - `FERROKUBE_FUZZ_CASES=N`: cases per target (default: each target's own, see [`CASES`]);
//! - `FERROKUBE_FUZZ_SEED=S`: the seed (default [`SEED`]), printed with any failure.
//!
//! The strategies generate inputs the way the parsers see them, so that most reach past the first
//! check: kubeconfigs from real fields with good and bad values (certificates from the config
//! tests, base64 that is not, servers without a scheme...), watch bodies of real and broken event
//! lines, list bodies with items full of braces and escapes, selectors from their grammar with
//! bad pieces, and requests over real paths, query parameters, content types and patch bodies;
//! each family also mutated byte by byte, and some plain random bytes.

use std::fmt;
use std::path::Path;

use base64::Engine;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};

use ferrokube_fuzzing::server::{Request, parse_requests, render_requests};
use ferrokube_fuzzing::{
    cel_rules, field_selector, gzip_body, kubeconfig, label_selector, list_body, protobuf_body,
    protobuf_encode, protobuf_response, server_requests, watch_stream,
};

/// The default seed of the short run.
const SEED: u64 = 0x6b75_6265_6675_7a7a;

/// Cases per target in the short run: a few seconds each in a debug build on two cores.
const CASES: [(&str, u32); 11] = [
    ("kubeconfig", 2000),
    ("watch_stream", 2000),
    ("list_body", 2000),
    ("gzip_body", 1000),
    ("label_selector", 5000),
    ("field_selector", 5000),
    ("server_requests", 1000),
    ("protobuf_body", 5000),
    ("cel_rules", 150),
    ("protobuf_response", 3000),
    ("protobuf_encode", 3000),
];

/// Bytes that print as text when a case fails.
#[derive(Clone)]
struct Input(Vec<u8>);

impl fmt::Debug for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// Runs `harness` on `cases` inputs of `strategy`; panics with the smallest failing input.
fn run(target: &str, strategy: impl Strategy<Value = Input>, harness: fn(&[u8])) {
    let default_cases = CASES
        .iter()
        .find(|(name, _)| *name == target)
        .map_or(100, |(_, cases)| *cases);
    let cases = env_number("FERROKUBE_FUZZ_CASES").map_or(default_cases, |n| n as u32);
    let seed = env_number("FERROKUBE_FUZZ_SEED").unwrap_or(SEED);
    let config = RunnerConfig {
        cases,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::ChaCha,
        max_shrink_iters: 2000,
        ..RunnerConfig::default()
    };
    let mut seed_bytes = [0u8; 32];
    for (i, chunk) in seed_bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&(seed ^ i as u64).to_le_bytes());
    }
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let outcome = runner.run(&strategy, |input| {
        harness(&input.0);
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("fuzz target {target} (seed {seed}, {cases} cases): {failure}");
    }
}

/// Every file under `fuzz/seeds/<target>/`, through `harness`.
fn replay(target: &str, harness: fn(&[u8])) -> usize {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target);
    let Ok(entries) = std::fs::read_dir(&folder) else {
        panic!("no corpus at {}", folder.display());
    };
    let mut replayed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(data) = std::fs::read(&path) else {
            continue;
        };
        let outcome = std::panic::catch_unwind(|| harness(&data));
        assert!(outcome.is_ok(), "corpus file {} fails", path.display());
        replayed += 1;
    }
    assert!(replayed > 0, "the corpus of {target} is empty");
    replayed
}

// ---- mutation, shared by every family ----

/// An edit of a byte string: what a fuzzer does to a good input.
#[derive(Debug, Clone)]
enum Edit {
    Truncate(usize),
    Remove(usize),
    Insert(usize, u8),
    Replace(usize, u8),
    Duplicate(usize, usize),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let at = any::<usize>();
    let edit = prop_oneof![
        at.prop_map(Edit::Truncate),
        at.prop_map(Edit::Remove),
        (at, any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        (at, prop::sample::select(b"{}[]\",:\\\n \x00-".to_vec()))
            .prop_map(|(i, b)| Edit::Insert(i, b)),
        (at, any::<u8>()).prop_map(|(i, b)| Edit::Replace(i, b)),
        (at, 1..64usize).prop_map(|(i, n)| Edit::Duplicate(i, n)),
    ];
    vec(edit, 1..4)
}

fn mutate(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for edit in edits {
        let len = bytes.len();
        match *edit {
            Edit::Truncate(i) => bytes.truncate(i % (len + 1)),
            Edit::Remove(i) if len > 0 => {
                bytes.remove(i % len);
            }
            Edit::Insert(i, b) => bytes.insert(i % (len + 1), b),
            Edit::Replace(i, b) if len > 0 => bytes[i % len] = b,
            Edit::Duplicate(i, n) if len > 0 => {
                let start = i % len;
                let end = (start + n).min(len);
                let copy = bytes[start..end].to_vec();
                bytes.splice(end..end, copy);
            }
            _ => {}
        }
    }
    bytes
}

/// `good`, as it is (mostly), mutated, or replaced by random bytes.
fn family(good: impl Strategy<Value = Vec<u8>> + Clone + 'static) -> BoxedStrategy<Input> {
    prop_oneof![
        5 => good.clone(),
        3 => (good, edits()).prop_map(|(bytes, edits)| mutate(bytes, &edits)),
        1 => vec(any::<u8>(), 0..256),
    ]
    .prop_map(Input)
    .boxed()
}

/// Two control bytes (the chunking of chunked targets) before `body`.
fn chunked(
    body: impl Strategy<Value = Vec<u8>> + Clone + 'static,
) -> impl Strategy<Value = Vec<u8>> + Clone {
    (any::<[u8; 2]>(), body).prop_map(|(control, body)| [control.to_vec(), body].concat())
}

// ---- JSON values with Kubernetes-like keys and awkward strings ----

const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "spec",
    "status",
    "replicas",
    "selector",
    "matchLabels",
    "template",
    "containers",
    "image",
    "ports",
    "containerPort",
    "data",
    "items",
    "resourceVersion",
    "uid",
    "finalizers",
    "ownerReferences",
    "generateName",
    "generation",
    "deletionTimestamp",
    "$patch",
    "$retainKeys",
    "$setElementOrder/containers",
    "$deleteFromPrimitiveList/finalizers",
    "size",
    "color",
    "free",
    "conditions",
    "type",
    "continue",
    "remainingItemCount",
    "object",
    "op",
    "path",
    "value",
    "from",
];

fn text() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        "[a-z0-9]{0,8}",
        "[a-z0-9.-]{0,70}",
        r#"[\\"{}\[\],:/~ 0-9a-zé😀\n\t\u{0}]{0,12}"#,
        prop::sample::select(vec![
            "",
            "web",
            "default",
            "1",
            "-1",
            "null",
            "true",
            "99999999999999999999"
        ])
        .prop_map(str::to_string),
    ]
}

fn key() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_string),
        1 => "[a-z$/~0-9]{0,6}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> + Clone {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop::sample::select(vec![0.5f64, -1e300, 1e-300, 3.0]).prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..5).prop_map(Value::Array),
            btree_map(key(), inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A value written compact or pretty (JSON allows whitespace between any two tokens).
fn written(value: &Value, pretty: bool) -> Vec<u8> {
    let written = if pretty {
        serde_json::to_vec_pretty(value)
    } else {
        serde_json::to_vec(value)
    };
    written.unwrap_or_default()
}

// ---- kubeconfig ----

fn testdata(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../client/src/config/testdata")
        .join(name);
    base64::engine::general_purpose::STANDARD.encode(std::fs::read(path).unwrap_or_default())
}

fn kubeconfigs() -> BoxedStrategy<Input> {
    let cert = testdata("client.crt");
    let keys: Vec<String> = [
        "rsa-pkcs1.key",
        "rsa-pkcs8.key",
        "ec-sec1.key",
        "ec-pkcs8.key",
    ]
    .iter()
    .map(|k| testdata(k))
    .collect();
    // `*-data` fields: mostly absent or what belongs there, sometimes the wrong PEM or no PEM.
    let garbage = vec!["!!not base64".to_string(), "aGVsbG8=".into(), String::new()];
    let pem_data = |usual: Vec<String>| {
        let mut wrong = garbage.clone();
        wrong.extend(keys.iter().cloned());
        wrong.push(cert.clone());
        prop_oneof![
            5 => Just(None),
            4 => prop::sample::select(usual).prop_map(Some),
            1 => prop::sample::select(wrong).prop_map(Some),
        ]
    };
    let cert_data = pem_data(vec![cert.clone()]);
    let key_data = pem_data(keys.clone());
    // Mostly names that other entries refer to, so that most contexts resolve.
    let name = prop_oneof![
        9 => prop::sample::select(vec!["a", "b"]),
        1 => prop::sample::select(vec!["c", "", "dev"]),
    ];
    let server = prop_oneof![
        4 => prop::sample::select(vec!["https://127.0.0.1:6443", "http://localhost:8080/",
            "https://[::1]:6443", "https://kube.example.com/prefix"]),
        1 => prop::sample::select(vec!["ftp://x", "127.0.0.1:6443", "https://", "",
            "https://h:99999", "https://exa mple"]),
    ];
    let file = prop::option::of(prop::sample::select(vec![
        "client.crt",
        "rsa-pkcs1.key",
        "ec-sec1.key",
        "missing.pem",
        "",
        "../../Cargo.toml",
    ]));
    let cluster = (
        name.clone(),
        server,
        cert_data.clone(),
        file.clone(),
        any::<bool>(),
        prop::option::of(prop::sample::select(vec![
            "kubernetes",
            "bad name!",
            "",
            "10.0.0.1",
        ])),
        prop::option::weighted(0.1, Just("http://proxy:3128")),
    )
        .prop_map(|(name, server, ca_data, ca, insecure, tls_name, proxy)| {
            json!({"name": name, "cluster": {"server": server,
                "certificate-authority-data": ca_data, "certificate-authority": ca,
                "insecure-skip-tls-verify": insecure, "tls-server-name": tls_name,
                "proxy-url": proxy}})
        });
    let exec = prop::option::of(
        (
            prop::option::of(prop::sample::select(vec![
                "client.authentication.k8s.io/v1",
                "client.authentication.k8s.io/v1beta1",
                "client.authentication.k8s.io/v1alpha1",
                "",
            ])),
            prop::sample::select(vec!["true", "./plugin", "/bin/false", ""]),
            prop::option::of(prop::sample::select(vec![
                "Never",
                "IfAvailable",
                "Always",
                "Sometimes",
            ])),
            any::<bool>(),
        )
            .prop_map(|(version, command, mode, info)| {
                json!({"apiVersion": version, "command": command, "args": ["--x"],
                    "env": [{"name": "A", "value": "1"}], "interactiveMode": mode,
                    "provideClusterInfo": info})
            }),
    );
    let user = (
        name.clone(),
        cert_data,
        key_data,
        file.clone(),
        file,
        prop::option::of(prop::sample::select(vec!["token", "", "bad\ntoken", "é"])),
        prop::option::of(prop::sample::select(vec!["client.crt", "missing", ""])),
        prop::option::of(Just("admin")),
        exec,
        any::<bool>(),
    )
        .prop_map(
            |(
                name,
                cert,
                key,
                cert_file,
                key_file,
                token,
                token_file,
                username,
                exec,
                provider,
            )| {
                let mut user = json!({"client-certificate-data": cert, "client-key-data": key,
                "client-certificate": cert_file, "client-key": key_file, "token": token,
                "tokenFile": token_file, "username": username, "password": "p", "exec": exec});
                if provider {
                    user["auth-provider"] = json!({"name": "gcp"});
                }
                json!({"name": name, "user": user})
            },
        );
    let context = (name.clone(), name.clone(), name.clone(),
        prop::option::of(prop::sample::select(vec!["default", "", "kube-system"])))
        .prop_map(|(name, cluster, user, namespace)| {
            json!({"name": name, "context": {"cluster": cluster, "user": user, "namespace": namespace}})
        });
    let config = (
        vec(cluster, 2..4),
        vec(user, 2..4),
        vec(context, 1..3),
        prop::option::weighted(0.9, name),
        any::<bool>(),
        json_value(),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(mut clusters, mut users, contexts, current, yaml, noise, confuse)| {
                // The names contexts mostly refer to exist (the rest keep generated names).
                for entries in [&mut clusters, &mut users] {
                    for (entry, name) in entries.iter_mut().zip(["a", "b"]) {
                        entry["name"] = json!(name);
                    }
                }
                let mut config = json!({"apiVersion": "v1", "kind": "Config", "clusters": clusters,
                "users": users, "contexts": contexts, "current-context": current,
                "preferences": {}});
                if confuse {
                    // A field of the wrong type somewhere near the top.
                    config["users"] = noise;
                }
                if yaml {
                    serde_yaml_ng::to_string(&config)
                        .unwrap_or_default()
                        .into_bytes()
                } else {
                    written(&config, false)
                }
            },
        );
    family(config)
}

#[test]
fn fuzz_kubeconfig() {
    replay("kubeconfig", kubeconfig);
    run("kubeconfig", kubeconfigs(), kubeconfig);
}

// ---- watch ----

fn event_line() -> impl Strategy<Value = Vec<u8>> + Clone {
    let object = (
        prop::sample::select(vec!["ConfigMap", "Pod", "Widget"]),
        text(),
        json_value(),
    )
        .prop_map(|(kind, name, data)| {
            json!({"kind": kind, "apiVersion": "v1",
                "metadata": {"name": name, "resourceVersion": "7"}, "data": data})
        });
    prop_oneof![
        4 => (prop::sample::select(vec!["ADDED", "MODIFIED", "DELETED"]), object)
            .prop_map(|(kind, object)| written(&json!({"type": kind, "object": object}), false)),
        1 => (text(), any::<bool>()).prop_map(|(rv, end)| {
            let mut metadata = json!({"resourceVersion": rv});
            if end {
                metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
            }
            written(&json!({"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": metadata}}), false)
        }),
        1 => (any::<i64>(), text()).prop_map(|(code, message)| written(&json!({"type": "ERROR",
            "object": {"kind": "Status", "status": "Failure", "code": code, "message": message}}), false)),
        1 => (key(), json_value()).prop_map(|(kind, object)| written(&json!({"type": kind, "object": object}), false)),
        1 => json_value().prop_map(|v| written(&v, false)),
        1 => vec(any::<u8>(), 0..40),
    ]
}

fn watch_bodies() -> BoxedStrategy<Input> {
    let body = (vec((event_line(), any::<bool>()), 0..6), any::<bool>()).prop_map(
        |(lines, last_newline)| {
            let mut body = Vec::new();
            for (line, crlf) in lines {
                body.extend_from_slice(&line);
                body.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
            }
            if !last_newline && body.last() == Some(&b'\n') {
                body.pop();
            }
            body
        },
    );
    family(chunked(body))
}

#[test]
fn fuzz_watch_stream() {
    replay("watch_stream", watch_stream);
    run("watch_stream", watch_bodies(), watch_stream);
}

// ---- list ----

fn list_bodies() -> BoxedStrategy<Input> {
    let metadata = prop_oneof![
        (
            text(),
            prop::option::of(text()),
            prop::option::of(any::<i64>())
        )
            .prop_map(|(rv, cont, remaining)| {
                json!({"resourceVersion": rv, "continue": cont, "remainingItemCount": remaining})
            }),
        json_value(),
    ];
    let items = prop_oneof![
        4 => vec(json_value(), 0..6).prop_map(Value::Array),
        1 => json_value(),
    ];
    let body = (
        prop::option::of(metadata),
        prop::option::of(items),
        btree_map("[a-z]{1,6}", json_value(), 0..3),
        any::<bool>(),
        any::<u8>(),
    )
        .prop_map(|(metadata, items, extra, pretty, order)| {
            let mut fields: Vec<(String, Value)> = extra.into_iter().collect();
            if let Some(metadata) = metadata {
                fields.push(("metadata".into(), metadata));
            }
            if let Some(items) = items {
                fields.push(("items".into(), items));
            }
            fields.push(("kind".into(), json!("ConfigMapList")));
            let turn = usize::from(order) % fields.len();
            fields.rotate_left(turn);
            // Written by hand so that the field order is the generated one.
            let mut body = b"{".to_vec();
            for (i, (name, value)) in fields.iter().enumerate() {
                if i > 0 {
                    body.extend_from_slice(if pretty { b",\n  " } else { b"," });
                }
                body.extend_from_slice(&written(&json!(name), false));
                body.extend_from_slice(if pretty { b" : " } else { b":" });
                body.extend_from_slice(&written(value, pretty));
            }
            body.push(b'}');
            body
        });
    family(chunked(body))
}

#[test]
fn fuzz_list_body() {
    replay("list_body", list_body);
    run("list_body", list_bodies(), list_body);
}

// ---- gzip ----

/// `data` gzipped at level 1 (kube-apiserver's level).
fn gzipped(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = encoder.write_all(data);
    encoder.finish().unwrap_or_default()
}

/// List bodies as kube-apiserver compresses them: one gzip member, or (a streaming list, one
/// member per flush) the body cut into several members; then mutated like every family.
fn gzip_bodies() -> BoxedStrategy<Input> {
    let body = (list_bodies(), any::<u16>(), any::<u16>()).prop_map(|(list, a, b)| {
        let plain = list.0.get(2..).unwrap_or_default().to_vec();
        let len = plain.len();
        let (mut x, mut y) = (usize::from(a) % (len + 1), usize::from(b) % (len + 1));
        if x > y {
            std::mem::swap(&mut x, &mut y);
        }
        let mut out = Vec::new();
        for part in [&plain[..x], &plain[x..y], &plain[y..]] {
            if !part.is_empty() {
                out.extend(gzipped(part));
            }
        }
        out
    });
    family(chunked(body))
}

#[test]
fn fuzz_gzip_body() {
    replay("gzip_body", gzip_body);
    run("gzip_body", gzip_bodies(), gzip_body);
}

// ---- selectors ----

fn label_key() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        4 => "[a-z0-9]([-a-z0-9_.]{0,8}[a-z0-9])?",
        2 => ("[a-z]{1,6}(\\.[a-z]{1,4})?", "[a-z0-9]{1,6}").prop_map(|(p, n)| format!("{p}/{n}")),
        1 => "[a-z]{64}",
        1 => r#"[a-z/!=()., \t]{0,6}"#,
        1 => prop::sample::select(vec!["in", "notin", "é", "a/b/c", "/", "a/", ""]).prop_map(str::to_string),
    ]
}

fn label_value() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        4 => "[a-z0-9]([-a-z0-9_.]{0,8}[a-z0-9])?",
        1 => Just(String::new()),
        1 => "[a-z]{64}",
        1 => r#"[a-z!=(),  ]{0,5}"#,
    ]
}

fn label_selectors() -> BoxedStrategy<Input> {
    let space = prop::sample::select(vec!["", " ", "  ", "\t"]);
    let requirement = prop_oneof![
        (
            label_key(),
            prop::sample::select(vec!["=", "==", "!="]),
            label_value(),
            space.clone()
        )
            .prop_map(|(k, op, v, s)| format!("{k}{s}{op}{s}{v}")),
        (
            label_key(),
            prop::sample::select(vec!["in", "notin", "In", "inn"]),
            vec(label_value(), 0..4),
            space.clone()
        )
            .prop_map(|(k, op, vs, s)| format!("{k} {op}{s}({})", vs.join(&format!(",{s}")))),
        label_key(),
        (label_key(), space).prop_map(|(k, s)| format!("!{s}{k}")),
    ];
    let selector = (
        vec(requirement, 0..4),
        prop::sample::select(vec![",", ", ", " ,"]),
    )
        .prop_map(|(requirements, comma)| requirements.join(comma).into_bytes());
    family(selector)
}

#[test]
fn fuzz_label_selector() {
    replay("label_selector", label_selector);
    run("label_selector", label_selectors(), label_selector);
}

fn field_selectors() -> BoxedStrategy<Input> {
    let field = prop::sample::select(vec![
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "status.phase",
        "spec.restartPolicy",
        "status.podIP",
        "spec.unknown",
        "",
        ".",
        "metadata.",
        "metadata..name",
    ]);
    let requirement = (
        field,
        prop::sample::select(vec!["=", "==", "!=", "!", "=!", "==="]),
        text(),
    )
        .prop_map(|(f, op, v)| format!("{f}{op}{v}"));
    let selector = (
        vec(requirement, 0..4),
        prop::sample::select(vec![",", ", ", ",,"]),
    )
        .prop_map(|(requirements, comma)| requirements.join(comma).into_bytes());
    family(selector)
}

#[test]
fn fuzz_field_selector() {
    replay("field_selector", field_selector);
    run("field_selector", field_selectors(), field_selector);
}

// ---- the embedded server ----

/// A name longer than any kind allows (253 characters at most).
static LONG_NAME: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| "x".repeat(300));

/// The served kinds the seeded server holds one object of: API prefix, plural, kind, namespaced,
/// the seeded object's name.
const RESOURCES: &[(&str, &str, &str, bool, &str)] = &[
    ("/api/v1", "configmaps", "ConfigMap", true, "cm"),
    ("/api/v1", "pods", "Pod", true, "p"),
    ("/apis/apps/v1", "deployments", "Deployment", true, "d"),
    ("/apis/apps/v1", "replicasets", "ReplicaSet", true, "rs"),
    ("/apis/example.com/v1", "widgets", "Widget", true, "w"),
    ("/api/v1", "namespaces", "Namespace", false, "default"),
    (
        "/apis/apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        "widgets.example.com",
    ),
    ("/api/v1", "events", "Event", true, "e"),
    ("/apis/coordination.k8s.io/v1", "leases", "Lease", true, "l"),
    ("/api/v1", "secrets", "Secret", true, "s"),
];

/// A path for `resource` and `method`: mostly the shape the method is for (POST and lists to the
/// collection, the rest to the seeded object or a new one), sometimes another shape, namespace or
/// name, a subresource, or a path of no resource at all.
fn paths(resource: usize, method: &'static str) -> impl Strategy<Value = String> {
    let (prefix, plural, _, namespaced, seeded) = RESOURCES[resource % RESOURCES.len()];
    let namespace = prop_oneof![
        8 => Just(namespaced.then_some("default")),
        1 => prop::sample::select(vec![Some("kube-system"), Some("missing"), Some(""), Some("%2F"), None]),
    ];
    let name = prop_oneof![
        6 => Just(seeded),
        2 => Just("new"),
        1 => prop::sample::select(vec!["UPPER", "a%20b", "..", "", LONG_NAME.as_str()]),
    ];
    let collection = match method {
        "POST" => 8,
        "GET" => 3,
        _ => 1,
    };
    let shape = prop_oneof![
        collection => Just(0u8),
        6 => Just(1u8),
        2 => Just(2u8),
    ];
    let sub = prop::sample::select(vec!["status", "scale", "status", "log", "", "x/y"]);
    let structured = (namespace, name, shape, sub).prop_map(move |(ns, name, shape, sub)| {
        let mut path = prefix.to_string();
        if let Some(ns) = ns {
            path.push_str(&format!("/namespaces/{ns}"));
        }
        path.push_str(&format!("/{plural}"));
        if shape >= 1 {
            path.push_str(&format!("/{name}"));
        }
        if shape == 2 {
            path.push_str(&format!("/{sub}"));
        }
        path
    });
    prop_oneof![
        12 => structured,
        1 => prop::sample::select(vec!["/", "/api", "/apis", "/apis/apps", "/version", "/healthz",
            "/openapi/v3", "/openapi/v3/api/v1", "/openapi/v3/apis/apps/v1", "//", "/api/v1/",
            "/apis/nope/v9/things", "/api/v1/pods/p"])
            .prop_map(str::to_string),
        1 => "(/[a-z0-9.%-]{0,8}){0,6}",
    ]
}

fn queries() -> impl Strategy<Value = String> + Clone {
    let name = prop::sample::select(vec![
        "watch",
        "labelSelector",
        "fieldSelector",
        "limit",
        "continue",
        "resourceVersion",
        "resourceVersionMatch",
        "dryRun",
        "timeoutSeconds",
        "propagationPolicy",
        "gracePeriodSeconds",
        "allowWatchBookmarks",
        "sendInitialEvents",
        "orphanDependents",
        "fieldManager",
        "force",
    ]);
    let value = prop_oneof![
        prop::sample::select(vec![
            "1",
            "true",
            "0",
            "-1",
            "All",
            "NotOlderThan",
            "Exact",
            "Foreground",
            "Orphan",
            "app%3Dweb",
            "app+in+(web)",
            "metadata.name%3Dcm",
            "status.phase!=x",
            "99999999999",
            "18446744073709551616",
            "18446744073709551615",
            "9223372036854775807",
            "%zz",
            "%",
            "",
        ])
        .prop_map(str::to_string),
        text(),
    ];
    vec((name, value), 0..4).prop_map(|pairs| {
        pairs
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("&")
    })
}

/// A body for `resource`: an object of its kind (mostly), a JSON patch, any JSON, or bytes.
fn bodies(resource: usize, method: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let (prefix, _, kind, _, seeded) = RESOURCES[resource % RESOURCES.len()];
    let api_version = prefix
        .trim_start_matches("/apis/")
        .trim_start_matches("/api/");
    let name = if method == "POST" { "new" } else { seeded };
    let object = (
        prop_oneof![4 => Just(api_version), 1 => Just("v2"), 1 => Just("")],
        prop_oneof![4 => Just(kind), 1 => Just("Scale"), 1 => Just("")],
        prop_oneof![4 => Just(name), 1 => Just("Bad_Name"), 1 => Just("")],
        prop::option::of(prop::sample::select(vec!["1", "", "x", "999999"])),
        json_value(),
        json_value(),
    )
        .prop_map(|(api_version, kind, name, rv, spec, data)| {
            written(
                &json!({"apiVersion": api_version, "kind": kind,
                "metadata": {"name": name, "labels": {"app": "web"}, "resourceVersion": rv},
                "spec": spec, "data": data}),
                false,
            )
        });
    let json_patch = vec(
        (prop::sample::select(vec!["add", "remove", "replace", "move", "copy", "test", "bad"]),
         prop::sample::select(vec!["/data/a", "/data/b", "/spec/replicas", "/metadata/labels/app",
             "/spec/containers/0", "/spec/containers/-", "/spec/containers/99", "/spec/containers/01",
             "", "/", "/~2", "/a~1b", "/metadata/finalizers/0", "/metadata/name", "/kind",
             "/spec/template/spec/containers/0/ports/-", "/spec/size", "/status"]),
         json_value(),
         prop::sample::select(vec!["/data/a", "/spec", "/metadata", "", "/nope/0"])),
        0..4,
    )
    .prop_map(|ops| {
        let ops: Vec<Value> = ops
            .into_iter()
            .map(|(op, path, value, from)| json!({"op": op, "path": path, "value": value, "from": from}))
            .collect();
        written(&Value::Array(ops), false)
    });
    let patchy = if method == "PATCH" { 6 } else { 1 };
    prop_oneof![
        4 => object,
        patchy => json_patch,
        3 => json_value().prop_map(|v| written(&v, false)),
        1 => vec(any::<u8>(), 0..64),
        1 => Just(Vec::new()),
    ]
}

/// The content types a request may carry, the ones its method is for first.
fn content_types(method: &'static str) -> impl Strategy<Value = Option<&'static str>> {
    let usual: Vec<Option<&'static str>> = match method {
        "PATCH" => vec![
            Some("application/merge-patch+json"),
            Some("application/json-patch+json"),
            Some("application/strategic-merge-patch+json"),
            Some("application/apply-patch+yaml"),
        ],
        "POST" | "PUT" => vec![Some("application/json")],
        _ => vec![None],
    };
    prop_oneof![
        6 => prop::sample::select(usual),
        1 => prop::sample::select(vec![
            None,
            Some("application/json"),
            Some("application/json-patch+json"),
            Some("application/vnd.kubernetes.protobuf"),
            Some("text/plain"),
            Some("application/merge-patch+json; charset=utf-8"),
        ]),
    ]
}

fn requests() -> BoxedStrategy<Input> {
    let method = prop::sample::select(vec![
        "GET", "GET", "POST", "POST", "PUT", "PATCH", "PATCH", "PATCH", "DELETE", "HEAD",
        "OPTIONS", "BREW",
    ]);
    let accept = prop::option::of(prop::sample::select(vec![
        "application/json",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        "*/*",
        "application/vnd.kubernetes.protobuf",
    ]));
    let request = (0..RESOURCES.len(), method)
        .prop_flat_map(move |(resource, method)| {
            (
                Just(method),
                paths(resource, method),
                queries(),
                content_types(method),
                accept.clone(),
                bodies(resource, method),
            )
        })
        .prop_map(|(method, path, query, content_type, accept, body)| {
            let mut headers = Vec::new();
            if let Some(content_type) = content_type {
                headers.push(("content-type".to_string(), content_type.to_string()));
            }
            if let Some(accept) = accept {
                headers.push(("accept".to_string(), accept.to_string()));
            }
            let target = if query.is_empty() {
                path
            } else {
                format!("{path}?{query}")
            };
            Request {
                method: method.to_string(),
                target,
                headers,
                body,
            }
        });
    let input = vec(request, 1..6).prop_map(|requests| render_requests(&requests));
    family(input)
}

#[test]
fn fuzz_server_requests() {
    replay("server_requests", server_requests);
    run("server_requests", requests(), server_requests);
}

#[test]
fn the_request_format_reads_back_what_it_writes() {
    let requests = vec![
        Request {
            method: "PATCH".into(),
            target: "/api/v1/namespaces/default/configmaps/cm?dryRun=All".into(),
            headers: vec![("content-type".into(), "application/merge-patch+json".into())],
            body: br#"{"data":{"b":"2"}}"#.to_vec(),
        },
        Request {
            method: "GET".into(),
            target: "/version".into(),
            headers: vec![],
            body: vec![],
        },
    ];
    assert_eq!(parse_requests(&render_requests(&requests)), requests);
}

// ---- protobuf bodies ----

/// A protobuf field: key, then a varint, eight fixed bytes or a length-prefixed value.
fn pb_field(number: u32, value: PbValue) -> Vec<u8> {
    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let mut out = Vec::new();
    match value {
        PbValue::Int(v) => {
            varint(u64::from(number) << 3, &mut out);
            varint(v, &mut out);
        }
        PbValue::Fixed64(v) => {
            varint((u64::from(number) << 3) | 1, &mut out);
            out.extend(v.to_le_bytes());
        }
        PbValue::Bytes(bytes) => {
            varint((u64::from(number) << 3) | 2, &mut out);
            varint(bytes.len() as u64, &mut out);
            out.extend(bytes);
        }
    }
    out
}

#[derive(Debug, Clone)]
enum PbValue {
    Int(u64),
    /// A `double`'s bits (JSONSchemaProps' `maximum`...), NaN and the infinities included.
    Fixed64(u64),
    Bytes(Vec<u8>),
}

/// Messages of random fields, nested a few levels: field numbers the table's messages have
/// (1..=45: PodSpec and JSONSchemaProps go past 40) and some they do not, varints of every size,
/// doubles, text and nested messages in length-delimited values.
fn pb_message() -> impl Strategy<Value = Vec<u8>> + Clone {
    let leaf = vec(
        (
            prop_oneof![8 => 1..20u32, 3 => 20..46u32, 1 => any::<u32>()],
            prop_oneof![
                any::<u64>().prop_map(PbValue::Int),
                (0..300u64).prop_map(PbValue::Int),
                any::<u64>().prop_map(PbValue::Fixed64),
                any::<f64>().prop_map(|f| PbValue::Fixed64(f.to_bits())),
                text().prop_map(|t| PbValue::Bytes(t.into_bytes())),
            ],
        ),
        0..6,
    )
    .prop_map(|fields| {
        fields
            .into_iter()
            .flat_map(|(n, v)| pb_field(n, v))
            .collect::<Vec<u8>>()
    });
    leaf.prop_recursive(4, 64, 6, |inner| {
        vec((1..46u32, inner), 0..5).prop_map(|fields| {
            fields
                .into_iter()
                .flat_map(|(n, m)| pb_field(n, PbValue::Bytes(m)))
                .collect()
        })
    })
}

/// `k8s\0` + runtime.Unknown naming `api_version` and `kind` around `raw`.
fn pb_body(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let type_meta = [
        pb_field(1, PbValue::Bytes(api_version.as_bytes().to_vec())),
        pb_field(2, PbValue::Bytes(kind.as_bytes().to_vec())),
    ]
    .concat();
    let unknown = [
        pb_field(1, PbValue::Bytes(type_meta)),
        pb_field(2, PbValue::Bytes(raw)),
    ]
    .concat();
    [b"k8s\0".to_vec(), unknown].concat()
}

/// Every kind of the decoder's table (ferrokube-core's generated one), and one it has not.
fn pb_kinds() -> Vec<(&'static str, &'static str)> {
    let mut kinds: Vec<_> = ferrokube::core::protobuf::KINDS
        .iter()
        .map(|k| (k.api_version, k.kind))
        .collect();
    kinds.push(("example.com/v1", "Widget"));
    kinds
}

/// client-go's own encodings of every built-in kind, every field set (the apiserver's fixture,
/// written by scripts/protobuf-schema.sh): the inputs that reach deepest into the table, for
/// `family` to mutate.
fn go_bodies() -> Vec<Vec<u8>> {
    const VECTORS: &str = include_str!("../../../apiserver/tests/fixtures/protobuf/vectors.jsonl");
    VECTORS
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|v| {
            base64::engine::general_purpose::STANDARD
                .decode(v["protobuf"].as_str()?)
                .ok()
        })
        .collect()
}

fn protobuf_bodies() -> BoxedStrategy<Input> {
    let random = (prop::sample::select(pb_kinds()), pb_message())
        .prop_map(|((api_version, kind), raw)| pb_body(api_version, kind, raw));
    let good = prop_oneof![1 => random, 1 => prop::sample::select(go_bodies())];
    family(good)
}

#[test]
fn fuzz_protobuf_body() {
    replay("protobuf_body", protobuf_body);
    run("protobuf_body", protobuf_bodies(), protobuf_body);
}

// ---- cel_rules: CRD validation rules at the edges of the CEL limits ----

/// A string-valued CEL expression of depth at most `depth`.
fn cel_string(depth: u32) -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        Just("self.s".to_string()),
        Just("'a'".to_string()),
        Just("r'\\'".to_string()),
        (1usize..2000).prop_map(|n| format!("'{}'", "a".repeat(n))),
        Just("self.l[0]".to_string()),
        Just("string(self.n)".to_string()),
    ];
    leaf.prop_recursive(depth, 64, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} + {b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}.replace('a', {b})")),
            inner.clone().prop_map(|a| format!("{a}.lowerAscii()")),
            (inner.clone(), 0usize..20).prop_map(|(a, n)| format!("{a}.substring({n})")),
            inner
                .clone()
                .prop_map(|a| format!("{a}.split('').join('a')")),
            (cel_list(1), inner.clone()).prop_map(|(l, a)| format!("{l}.join({a})")),
        ]
    })
    .boxed()
}

/// A list-of-strings CEL expression.
fn cel_list(depth: u32) -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        Just("self.l".to_string()),
        Just("self.m.map(k, k)".to_string()),
        Just("['a', 'b']".to_string()),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        leaf,
        cel_string(1).prop_map(|s| format!("{s}.split('')")),
        cel_string(1).prop_map(|s| format!("{s}.split('a')")),
        cel_list(depth - 1).prop_map(|l| format!("{l}.map(x, x + x)")),
        cel_list(depth - 1).prop_map(|l| format!("{l}.filter(x, x.size() > 0)")),
    ]
    .boxed()
}

/// A boolean CEL expression: comparisons, comprehensions (nested), logic; plus the shapes that
/// stress the guards: deep parentheses, long chains, undeclared names.
fn cel_bool(depth: u32) -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        Just("true".to_string()),
        Just("self.n > 0".to_string()),
        cel_string(2).prop_map(|s| format!("{s}.size() < 1000")),
        cel_string(2).prop_map(|s| format!("{s}.matches('^a*$')")),
        cel_list(2).prop_map(|l| format!("{l}.size() >= 0")),
        cel_string(1).prop_map(|s| format!("{s}.contains('b') || {s}.startsWith('a')")),
    ];
    leaf.prop_recursive(depth, 64, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} && {b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} || {b})")),
            inner.clone().prop_map(|a| format!("!({a})")),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(c, a, b)| format!("({c} ? {a} : {b})")),
            (cel_list(2), inner.clone()).prop_map(|(l, p)| format!("{l}.all(x, {p})")),
            (cel_list(2), inner.clone()).prop_map(|(l, p)| format!("{l}.exists(x, {p})")),
            (cel_list(2), cel_list(2))
                .prop_map(|(a, b)| format!("{a}.all(x, {b}.exists(y, x == y))")),
            inner
                .clone()
                .prop_map(|p| format!("has(self.s) ? {p} : true")),
            inner.prop_map(|p| format!("self == oldSelf || {p}")),
        ]
    })
    .boxed()
}

/// The guards' edge cases: nesting and chains around kube-apiserver's limits, big rules.
fn cel_extremes() -> BoxedStrategy<String> {
    prop_oneof![
        (200usize..300).prop_map(|d| format!("{}true{}", "(".repeat(d), ")".repeat(d))),
        (200usize..1200).prop_map(|n| format!("self.n{} > 0", " + 1".repeat(n))),
        (200usize..1200).prop_map(|n| format!("true{}", " && true".repeat(n))),
        (100usize..1000).prop_map(|n| {
            (0..n)
                .map(|i| format!("x{i}"))
                .collect::<Vec<_>>()
                .join(" + ")
                + " == 0"
        }),
        (1usize..6).prop_map(|n| {
            let mut s = "'a'".to_string();
            for _ in 0..n {
                s = format!("{s}.replace('a', '{}')", "a".repeat(1000));
            }
            format!("{s}.size() > 0")
        }),
        (1usize..4).prop_map(|n| {
            let mut p = "x0 == 'a'".to_string();
            for i in (1..=n).rev() {
                p = format!("self.s.split('').all(x{}, {p})", i - 1);
            }
            p
        }),
    ]
    .boxed()
}

fn cel_spec() -> impl Strategy<Value = Value> {
    (
        prop::option::of((0usize..1100).prop_map(|n| "a".repeat(n))),
        prop::option::of(any::<i64>()),
        prop::option::of(prop::collection::vec(
            (0usize..120).prop_map(|n| "a".repeat(n)),
            0..110,
        )),
        prop::option::of(prop::collection::btree_map(
            "[a-z]{1,8}",
            "[a-z]{0,8}",
            0..110,
        )),
    )
        .prop_map(|(s, n, l, m)| {
            let mut spec = serde_json::Map::new();
            if let Some(s) = s {
                spec.insert("s".into(), json!(s));
            }
            if let Some(n) = n {
                spec.insert("n".into(), json!(n));
            }
            if let Some(l) = l {
                spec.insert("l".into(), json!(l));
            }
            if let Some(m) = m {
                spec.insert("m".into(), json!(m));
            }
            Value::Object(spec)
        })
}

fn cel_inputs() -> BoxedStrategy<Input> {
    let rule = prop_oneof![3 => cel_bool(4), 1 => cel_extremes()];
    (rule, cel_spec())
        .prop_map(|(rule, spec)| Input(ferrokube_fuzzing::cel::render_input(&rule, &spec)))
        .boxed()
}

#[test]
fn fuzz_cel_rules() {
    replay("cel_rules", cel_rules);
    run("cel_rules", cel_inputs(), cel_rules);
}

/// The client's protobuf decoders: Go's own encodings and random messages as one object, as the
/// items of a list (`XList {1 metadata, 2 items}` in an envelope) or as watch frames, mutated.
fn protobuf_responses() -> BoxedStrategy<Input> {
    let object = (prop::sample::select(pb_kinds()), pb_message())
        .prop_map(|((api_version, kind), raw)| pb_body(api_version, kind, raw));
    let objects = prop_oneof![1 => object, 1 => prop::sample::select(go_bodies())];
    let as_list = (vec(pb_message(), 0..4), vec(1..46u32, 0..3)).prop_map(|(items, others)| {
        let mut list = pb_field(
            1,
            PbValue::Bytes(pb_field(2, PbValue::Bytes(b"7".to_vec()))),
        );
        for item in items {
            list.extend(pb_field(2, PbValue::Bytes(item)));
        }
        for number in others {
            list.extend(pb_field(number, PbValue::Int(1)));
        }
        pb_body("v1", "PodList", list)
    });
    let as_watch = vec(
        (
            prop::sample::select(vec![
                "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "X",
            ]),
            objects.clone(),
        ),
        0..4,
    )
    .prop_map(|events| {
        let mut stream = Vec::new();
        for (kind, object) in events {
            let event = [
                pb_field(1, PbValue::Bytes(kind.as_bytes().to_vec())),
                pb_field(2, PbValue::Bytes(pb_field(1, PbValue::Bytes(object)))),
            ]
            .concat();
            stream.extend((event.len() as u32).to_be_bytes());
            stream.extend(event);
        }
        stream
    });
    let shaped = prop_oneof![
        objects.prop_map(|body| (0u8, body)),
        as_list.prop_map(|body| (1u8, body)),
        as_watch.prop_map(|body| (2u8, body)),
    ];
    let good = (shaped, any::<[u8; 2]>())
        .prop_map(|((shape, body), control)| [vec![shape], control.to_vec(), body].concat());
    family(good)
}

#[test]
fn fuzz_protobuf_response() {
    replay("protobuf_response", protobuf_response);
    run("protobuf_response", protobuf_responses(), protobuf_response);
}

// ---- protobuf_encode: core's encoder and the server's protobuf answers ----

/// A JSON value of object shapes with the member names real objects use, and scalars of every
/// JSON type: what the encoder meets (and what it must refuse) when a value is not what the kind
/// says.
fn object_json() -> impl Strategy<Value = Value> {
    let names = prop::sample::select(vec![
        "metadata",
        "name",
        "namespace",
        "labels",
        "annotations",
        "spec",
        "status",
        "data",
        "binaryData",
        "containers",
        "ports",
        "port",
        "targetPort",
        "image",
        "resources",
        "requests",
        "replicas",
        "selector",
        "matchLabels",
        "template",
        "volumes",
        "configMap",
        "creationTimestamp",
        "items",
        "x",
        "apiVersion",
        "kind",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        text().prop_map(Value::String),
        Just(Value::String("2026-11-29T07:00:00Z".into())),
        Just(Value::String("AAEC".into())),
    ];
    leaf.prop_recursive(5, 48, 5, move |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            vec((names.clone(), inner), 0..5).prop_map(|members| {
                Value::Object(
                    members
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect(),
                )
            }),
        ]
    })
}

fn protobuf_encodings() -> BoxedStrategy<Input> {
    let random = (prop::sample::select(pb_kinds()), pb_message())
        .prop_map(|((api_version, kind), raw)| pb_body(api_version, kind, raw));
    let bodies = prop_oneof![1 => random, 2 => prop::sample::select(go_bodies())]
        .prop_map(|body| [vec![0u8], body].concat());
    let go_json = prop::sample::select(go_bodies()).prop_map(|body| {
        // Go's objects as JSON text, encoded as their own kind's (odd byte) or another's.
        ferrokube::protobuf::from_slice::<Value>(&body, ferrokube::core::ManagedFields::Keep)
            .ok()
            .and_then(|v| serde_json::to_vec(&v).ok())
            .unwrap_or_default()
    });
    let json = prop_oneof![
        1 => go_json,
        1 => object_json().prop_map(|v| serde_json::to_vec(&v).unwrap_or_default()),
    ];
    let as_json = (any::<u8>(), json).prop_map(|(pick, text)| [vec![pick | 1], text].concat());
    family(prop_oneof![1 => bodies, 1 => as_json].boxed())
}

#[test]
fn fuzz_protobuf_encode() {
    replay("protobuf_encode", protobuf_encode);
    run("protobuf_encode", protobuf_encodings(), protobuf_encode);
}
