//! kubectl 1.32 as a real client of the embedded API server (over TLS, with a bearer token and the
//! kubeconfig the server writes): apply a ReplicaSet manifest, read it back, label, scale, re-apply,
//! edit, delete; and server-side apply with two field managers.

use std::path::Path;
use std::process::Command;

use ferrokube::apiserver::ApiServer;
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
        let applied = k(&ssa, Some(CONFIG_MAP));
        assert!(
            applied.contains("configmap/settings serverside-applied"),
            "{applied}"
        );
        let cm = json(&k(
            &[
                "get",
                "cm",
                "settings",
                "-o",
                "json",
                "--show-managed-fields",
            ],
            None,
        ));
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
        let cm = json(&k(
            &[
                "get",
                "cm",
                "settings",
                "-o",
                "json",
                "--show-managed-fields",
            ],
            None,
        ));
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
        let cm = json(&k(
            &[
                "get",
                "cm",
                "settings",
                "-o",
                "json",
                "--show-managed-fields",
            ],
            None,
        ));
        assert_eq!(
            managers(&cm),
            ["kubectl Apply", "tuner Apply", "kubectl-patch Update"]
        );
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
