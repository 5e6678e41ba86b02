//! kubectl 1.32 as a real client of the embedded API server (over TLS, with a bearer token and the
//! kubeconfig the server writes): apply a ReplicaSet manifest, read it back, label, scale, re-apply,
//! edit, delete; and server-side apply with two field managers. And kubectl's generators
//! (`create namespace|configmap|secret|service|deployment`, `run`), which send protobuf bodies.

use std::path::Path;
use std::process::Command;

use ferrokube_apiserver::ApiServer;
use serde_json::Value;

const MANIFEST: &str = "apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
";

/// Runs kubectl with `kubeconfig`; returns stdout, failing the test with stderr if kubectl fails.
fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        // `kubectl edit` runs this "editor" on the object's YAML.
        .env("KUBE_EDITOR", r"sed -i -e s/replicas:\ 3/replicas:\ 4/")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl is installed (it is on every machine of this project)");
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes()).expect("stdin");
    }
    let output = child.wait_with_output().expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).expect("kubectl printed JSON")
}

/// An object's managedFields as `manager operation`.
fn managers(object: &Value) -> Vec<String> {
    object["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    let text = |f: &str| e[f].as_str().unwrap_or_default().to_string();
                    format!("{} {}", text("manager"), text("operation"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Runs kubectl expecting it to fail; returns its stderr.
fn kubectl_fails(kubeconfig: &Path, args: &[&str], stdin: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl is installed");
    if let Some(mut pipe) = child.stdin.take() {
        pipe.write_all(stdin.as_bytes()).expect("stdin");
    }
    let output = child.wait_with_output().expect("kubectl runs");
    assert!(!output.status.success(), "kubectl {args:?} succeeded");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

const CONFIG_MAP: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: web}
data:
  mode: fast
  size: \"3\"
";

/// `kubectl apply --server-side`: created with kubectl's field manager, a second manager's
/// conflicting apply refused until `--force-conflicts`, a field dropped from the manifest removed,
/// and a client-side `kubectl edit` recorded as an Update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_server_side_on_the_embedded_server() {
    let server = ApiServer::new()
        .tls(true)
        .token("ssa-token")
        .start()
        .await
        .expect("server starts");
    let dir = std::env::temp_dir().join(format!("ferrokube-kubectl-ssa-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig written");

    let result = tokio::task::spawn_blocking(move || {
        let k = |args: &[&str], stdin: Option<&str>| kubectl(&kubeconfig, args, stdin);
        let ssa = ["apply", "--server-side", "-f", "-"];
        // The ConfigMap as kubectl shows it, managedFields included.
        let settings = || {
            json(&k(
                &[
                    "get",
                    "cm",
                    "settings",
                    "-o",
                    "json",
                    "--show-managed-fields",
                ],
                None,
            ))
        };
        let applied = k(&ssa, Some(CONFIG_MAP));
        assert!(
            applied.contains("configmap/settings serverside-applied"),
            "{applied}"
        );
        let cm = settings();
        assert_eq!(managers(&cm), ["kubectl Apply"]);
        assert_eq!(
            cm["metadata"]["managedFields"][0]["fieldsV1"],
            serde_json::json!({"f:data": {"f:mode": {}, "f:size": {}},
                               "f:metadata": {"f:labels": {"f:app": {}}}})
        );

        let other =
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: slow\n";
        let other_args = ["apply", "--server-side", "--field-manager=tuner", "-f", "-"];
        let refused = kubectl_fails(&kubeconfig, &other_args, other);
        assert!(refused.contains("conflict with \"kubectl\""), "{refused}");
        assert!(refused.contains(".data.mode"), "{refused}");

        let forced_args = [
            "apply",
            "--server-side",
            "--field-manager=tuner",
            "--force-conflicts",
            "-f",
            "-",
        ];
        k(&forced_args, Some(other));
        let cm = settings();
        assert_eq!(cm["data"]["mode"], "slow");
        assert_eq!(managers(&cm), ["kubectl Apply", "tuner Apply"]);

        // kubectl stops applying `size` and the label (only kubectl applied them: they go) and
        // agrees with tuner's `mode` (shared ownership: no conflict).
        k(&ssa, Some(other));
        let cm = json(&k(&["get", "cm", "settings", "-o", "json"], None));
        assert_eq!(cm["data"], serde_json::json!({"mode": "slow"}));
        assert_eq!(cm["metadata"].get("labels"), None);

        let patched = k(
            &["patch", "cm", "settings", "-p", r#"{"data":{"extra":"1"}}"#],
            None,
        );
        assert!(patched.contains("patched"), "{patched}");
        let cm = settings();
        // Apply entries come first, ordered by when each last changed something: kubectl's
        // second apply and tuner's force land in the same second or not, so their order is the
        // clock's (kube-apiserver sorts the same way). Compare them as a set.
        let mut entries = managers(&cm);
        assert_eq!(entries.pop().as_deref(), Some("kubectl-patch Update"));
        entries.sort();
        assert_eq!(entries, ["kubectl Apply", "tuner Apply"]);
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic.into_panic());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_manages_a_replicaset_on_the_embedded_server() {
    let server = ApiServer::new()
        .tls(true)
        .token("conformance-token")
        .start()
        .await
        .expect("server starts");
    let dir = std::env::temp_dir().join(format!("ferrokube-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig written");

    let result = tokio::task::spawn_blocking(move || {
        let k = |args: &[&str]| kubectl(&kubeconfig, args, None);
        let applied = kubectl(&kubeconfig, &["apply", "-f", "-"], Some(MANIFEST));
        assert!(applied.contains("replicaset.apps/web created"), "{applied}");
        let rs = json(&k(&[
            "get",
            "rs",
            "web",
            "-o",
            "json",
            "--show-managed-fields",
        ]));
        assert_eq!(rs["spec"]["replicas"], 2);
        assert_eq!(rs["metadata"]["generation"], 1);
        assert_eq!(rs["metadata"]["namespace"], "default");
        // Client-side apply is an Update by kubectl's own field manager.
        assert_eq!(managers(&rs), ["kubectl-client-side-apply Update"]);

        k(&["label", "rs", "web", "tier=front"]);
        k(&["scale", "rs", "web", "--replicas=5"]);
        let rs = json(&k(&["get", "rs", "-l", "tier=front", "-o", "json"]));
        let item = &rs["items"][0];
        assert_eq!(item["spec"]["replicas"], 5);
        assert_eq!(item["metadata"]["generation"], 2);
        assert_eq!(item["metadata"]["labels"]["tier"], "front");

        // Re-applying merges with the live object: the label kubectl added survives.
        let changed = MANIFEST.replace("replicas: 2", "replicas: 3");
        let applied = kubectl(&kubeconfig, &["apply", "-f", "-"], Some(&changed));
        assert!(applied.contains("configured"), "{applied}");
        let rs = json(&k(&["get", "replicaset.apps/web", "-o", "json"]));
        assert_eq!(rs["spec"]["replicas"], 3);
        assert_eq!(rs["metadata"]["labels"]["tier"], "front");

        let edited = k(&["edit", "rs", "web"]);
        assert!(edited.contains("edited"), "{edited}");
        let rs = json(&k(&["get", "rs", "web", "-o", "json"]));
        assert_eq!(rs["spec"]["replicas"], 4);

        let names = k(&["get", "rs", "-o", "name"]);
        assert_eq!(names.trim(), "replicaset.apps/web");
        let deleted = k(&["delete", "rs", "web"]);
        assert!(deleted.contains("deleted"), "{deleted}");
        let left = json(&k(&["get", "rs", "-o", "json"]));
        assert_eq!(left["items"].as_array().map(Vec::len), Some(0));
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic.into_panic());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_is_refused_without_the_token() {
    let server = ApiServer::new()
        .tls(true)
        .token("right")
        .start()
        .await
        .expect("server starts");
    let dir = std::env::temp_dir().join(format!("ferrokube-kubectl-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    let wrong = server.kubeconfig().replace("token: right", "token: wrong");
    std::fs::write(&kubeconfig, wrong).expect("kubeconfig written");
    let output = tokio::task::spawn_blocking(move || {
        Command::new("kubectl")
            .args(["get", "pods"])
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .expect("kubectl runs")
    })
    .await
    .expect("joined");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Unauthorized") || stderr.contains("provide credentials"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Where a generator's test keeps its kubeconfig and files.
fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrokube-kubectl-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Whether every field of `expected` is in `actual` with the same value (objects compared key by
/// key, arrays item by item); `null`s in `expected` (kubectl's `creationTimestamp: null`) are
/// skipped. Fields only in `actual` are the server's own (uid, defaults, status...).
fn contains(actual: &Value, expected: &Value, path: &str) -> Result<(), String> {
    match (actual, expected) {
        (_, Value::Null) => Ok(()),
        (Value::Object(actual), Value::Object(expected)) => {
            for (key, value) in expected.iter().filter(|(_, v)| !v.is_null()) {
                let inner = format!("{path}.{key}");
                let found = actual.get(key).ok_or_else(|| format!("{inner} missing"))?;
                contains(found, value, &inner)?;
            }
            Ok(())
        }
        (Value::Array(actual), Value::Array(expected)) if actual.len() == expected.len() => actual
            .iter()
            .zip(expected)
            .enumerate()
            .try_for_each(|(i, (a, e))| contains(a, e, &format!("{path}[{i}]"))),
        (actual, expected) if actual == expected => Ok(()),
        (actual, expected) => Err(format!(
            "{path}: {actual} where kubectl asked for {expected}"
        )),
    }
}

/// Runs one kubectl generator (`args`, without `--dry-run`) against a fresh server and checks:
/// kubectl sent a protobuf body and was answered 201; the object read back (`get`, as JSON) has
/// every field kubectl's `--dry-run=client -o json` prints for the same command. Returns the
/// object read back.
async fn generator(name: &str, args: &[&str], get: &[&str], files: &[(&str, &str)]) -> Value {
    generator_sending(
        name,
        args,
        get,
        files,
        "application/vnd.kubernetes.protobuf",
    )
    .await
}

/// [`generator`], for a command that sends its body as `content_type`.
async fn generator_sending(
    name: &str,
    args: &[&str],
    get: &[&str],
    files: &[(&str, &str)],
    content_type: &'static str,
) -> Value {
    let server = ApiServer::new()
        .tls(true)
        .token("generator-token")
        .start()
        .await
        .expect("server starts");
    let dir = temp_dir(name);
    let kubeconfig = dir.join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig written");
    for (file, text) in files {
        std::fs::write(dir.join(file), text).expect("file written");
    }
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("{dir}", &dir.display().to_string()))
        .collect();
    let get: Vec<String> = get.iter().map(|a| a.to_string()).collect();
    let result = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // Flags go before a `--` (after it, they would be the container's arguments).
        let flags_at = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        let with = |flags: &[&'static str]| {
            let mut all = args.clone();
            all.splice(flags_at..flags_at, flags.iter().copied());
            all
        };
        let dry = with(&["--dry-run=client", "-o", "json"]);
        let expected = json(&kubectl(&kubeconfig, &dry, None));

        let verbose = with(&["-v=8"]);
        let output = Command::new("kubectl")
            .args(&verbose)
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .expect("kubectl runs");
        let log = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "kubectl {args:?} failed: {log}");
        assert!(
            log.contains(&format!("Content-Type: {content_type}")),
            "kubectl {args:?} did not send {content_type} (the test no longer tests what it says): {log}"
        );
        assert!(log.contains("201 Created"), "{log}");

        let mut read = vec!["get"];
        read.extend(get.iter().map(String::as_str));
        read.extend(["-o", "json"]);
        let actual = json(&kubectl(&kubeconfig, &read, None));
        if let Err(difference) = contains(&actual, &expected, "") {
            panic!("{difference}\ncreated: {actual:#}\nkubectl asked for: {expected:#}");
        }
        let _ = std::fs::remove_dir_all(&dir);
        actual
    })
    .await;
    match result {
        Ok(actual) => actual,
        Err(panic) => std::panic::resume_unwind(panic.into_panic()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_namespace() {
    let ns = generator(
        "ns",
        &["create", "namespace", "team-a"],
        &["namespace", "team-a"],
        &[],
    )
    .await;
    assert_eq!(ns["metadata"]["name"], "team-a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_configmap_from_literals() {
    let args = [
        "create",
        "configmap",
        "settings",
        "--from-literal=mode=fast",
        "--from-literal=size=3",
    ];
    let cm = generator("cm", &args, &["configmap", "settings"], &[]).await;
    assert_eq!(cm["data"], serde_json::json!({"mode": "fast", "size": "3"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_generic_secret_from_literals() {
    let args = [
        "create",
        "secret",
        "generic",
        "creds",
        "--from-literal=password=s3cret",
    ];
    let secret = generator("secret", &args, &["secret", "creds"], &[]).await;
    assert_eq!(secret["type"], "Opaque");
    // base64 of "s3cret"
    assert_eq!(secret["data"]["password"], "czNjcmV0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_tls_secret() {
    let dir = temp_dir("tls-files");
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=web",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let cert_pem = std::fs::read_to_string(&cert).expect("cert");
    let key_pem = std::fs::read_to_string(&key).expect("key");
    let files = [
        ("tls.crt", cert_pem.as_str()),
        ("tls.key", key_pem.as_str()),
    ];
    let args = [
        "create",
        "secret",
        "tls",
        "web-tls",
        "--cert={dir}/tls.crt",
        "--key={dir}/tls.key",
    ];
    let secret = generator("tls", &args, &["secret", "web-tls"], &files).await;
    assert_eq!(secret["type"], "kubernetes.io/tls");
    use base64::Engine;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(secret["data"]["tls.crt"].as_str().unwrap_or_default())
        .expect("base64");
    assert_eq!(String::from_utf8_lossy(&decoded), cert_pem);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_docker_registry_secret() {
    let args = [
        "create",
        "secret",
        "docker-registry",
        "pull",
        "--docker-server=registry.example.com",
        "--docker-username=robot",
        "--docker-password=hunter2",
        "--docker-email=robot@example.com",
    ];
    let secret = generator("docker", &args, &["secret", "pull"], &[]).await;
    assert_eq!(secret["type"], "kubernetes.io/dockerconfigjson");
    assert!(secret["data"][".dockerconfigjson"].is_string(), "{secret}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_clusterip_service() {
    let args = [
        "create",
        "service",
        "clusterip",
        "web",
        "--tcp=80:8080",
        "--tcp=443:https",
    ];
    let svc = generator("svc-clusterip", &args, &["service", "web"], &[]).await;
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    assert_eq!(svc["spec"]["ports"][1]["targetPort"], "https");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_nodeport_service() {
    let args = [
        "create",
        "service",
        "nodeport",
        "web",
        "--tcp=80:8080",
        "--node-port=30080",
    ];
    let svc = generator("svc-nodeport", &args, &["service", "web"], &[]).await;
    assert_eq!(svc["spec"]["type"], "NodePort");
    assert_eq!(svc["spec"]["ports"][0]["nodePort"], 30080);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_loadbalancer_service() {
    let args = ["create", "service", "loadbalancer", "web", "--tcp=80:8080"];
    let svc = generator("svc-lb", &args, &["service", "web"], &[]).await;
    assert_eq!(svc["spec"]["type"], "LoadBalancer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_an_externalname_service() {
    let args = [
        "create",
        "service",
        "externalname",
        "db",
        "--external-name=db.example.com",
    ];
    let svc = generator("svc-ext", &args, &["service", "db"], &[]).await;
    assert_eq!(svc["spec"]["type"], "ExternalName");
    assert_eq!(svc["spec"]["externalName"], "db.example.com");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_deployment() {
    let args = [
        "create",
        "deployment",
        "web",
        "--image=nginx:1.25",
        "--replicas=3",
        "--port=80",
    ];
    let deploy = generator("deploy", &args, &["deployment.apps", "web"], &[]).await;
    assert_eq!(deploy["spec"]["replicas"], 3);
    assert_eq!(deploy["spec"]["selector"]["matchLabels"]["app"], "web");
    let container = &deploy["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "nginx:1.25");
    assert_eq!(container["ports"][0]["containerPort"], 80);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_runs_a_pod() {
    let args = [
        "run",
        "web",
        "--image=nginx:1.25",
        "--labels=app=web,tier=front",
        "--port=80",
        "--env=MODE=fast",
        "--env=EMPTY=",
        "--",
        "nginx",
        "-g",
        "daemon off;",
    ];
    // kubectl 1.32's `run` builds its Pod as an unstructured object and sends it as JSON; the test
    // keeps it in the suite so that a kubectl that switches to protobuf is noticed.
    let pod = generator_sending("run", &args, &["pod", "web"], &[], "application/json").await;
    assert_eq!(pod["metadata"]["labels"]["tier"], "front");
    let container = &pod["spec"]["containers"][0];
    assert_eq!(
        container["env"][0],
        serde_json::json!({"name": "MODE", "value": "fast"})
    );
    assert_eq!(
        container["args"],
        serde_json::json!(["nginx", "-g", "daemon off;"])
    );
    assert_eq!(container["ports"][0]["containerPort"], 80);
}

/// A protobuf body with a field the decoder does not know is refused with 415 and a message that
/// names the field and says to send JSON, not stored without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protobuf_body_with_an_unknown_field_is_refused_with_415() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = ApiServer::new().start().await.expect("server starts");
    let address = server.url().trim_start_matches("http://").to_string();
    // k8s\0 + Unknown{typeMeta{v1, ConfigMap}, raw: ConfigMap{metadata{name "c"}, field 9 = 1}}.
    let type_meta = [b"\x0a\x02v1".as_slice(), b"\x12\x09ConfigMap"].concat();
    let raw = [b"\x0a\x03\x0a\x01c".as_slice(), b"\x48\x01"].concat();
    let mut body = b"k8s\0".to_vec();
    body.extend([0x0a, type_meta.len() as u8]);
    body.extend(&type_meta);
    body.extend([0x12, raw.len() as u8]);
    body.extend(&raw);
    let mut request = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: {address}\r\n\
         Content-Type: application/vnd.kubernetes.protobuf\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend(&body);
    let mut stream = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connects");
    stream.write_all(&request).await.expect("sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("answer");
    assert!(answer.starts_with("HTTP/1.1 415"), "{answer}");
    assert!(
        answer.contains("field 9 of message core.v1.ConfigMap"),
        "{answer}"
    );
    assert!(answer.contains("send JSON"), "{answer}");
}

/// One HTTP/1.1 request over a fresh connection; the whole answer as text.
async fn http_exchange(address: &str, head: &str, body: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut request = format!(
        "{head}\r\nHost: {address}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend(body);
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connects");
    stream.write_all(&request).await.expect("sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("answer");
    answer
}

/// A DELETE whose `DeleteOptions` body is protobuf (client-go's typed clients send it so, e.g.
/// e2e.test deleting a CustomResourceDefinition) is decoded and obeyed: a uid precondition that
/// does not match is a 409, and the object stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protobuf_delete_options_body_is_obeyed() {
    let server = ApiServer::new().start().await.expect("server starts");
    let address = server.url().trim_start_matches("http://").to_string();
    let created = http_exchange(
        &address,
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nContent-Type: application/json",
        br#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}"#,
    )
    .await;
    assert!(created.starts_with("HTTP/1.1 201"), "{created}");
    // k8s\0 + Unknown{typeMeta{meta.k8s.io/v1, DeleteOptions},
    //                 raw: DeleteOptions{preconditions{uid "wrong"}}}.
    let type_meta = [
        b"\x0a\x0emeta.k8s.io/v1".as_slice(),
        b"\x12\x0dDeleteOptions",
    ]
    .concat();
    let raw = b"\x12\x07\x0a\x05wrong";
    let mut body = b"k8s\0".to_vec();
    body.extend([0x0a, type_meta.len() as u8]);
    body.extend(&type_meta);
    body.extend([0x12, raw.len() as u8]);
    body.extend(raw);
    let delete = "DELETE /api/v1/namespaces/default/configmaps/c HTTP/1.1\r\n\
                  Content-Type: application/vnd.kubernetes.protobuf";
    let refused = http_exchange(&address, delete, &body).await;
    assert!(refused.starts_with("HTTP/1.1 409"), "{refused}");
    assert!(refused.contains("wrong"), "{refused}");
    let read = http_exchange(
        &address,
        "GET /api/v1/namespaces/default/configmaps/c HTTP/1.1",
        b"",
    )
    .await;
    assert!(read.starts_with("HTTP/1.1 200"), "{read}");
    // An empty DeleteOptions message: deleted.
    let mut empty = b"k8s\0".to_vec();
    empty.extend([0x0a, type_meta.len() as u8]);
    empty.extend(&type_meta);
    let deleted = http_exchange(&address, delete, &empty).await;
    assert!(deleted.starts_with("HTTP/1.1 200"), "{deleted}");
}
