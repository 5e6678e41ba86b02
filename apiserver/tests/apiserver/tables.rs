//! `kubectl get` against the embedded API server prints what it prints against a real cluster.
//!
//! kubectl asks the server for a Table (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...`)
//! and prints its columns and cells; the server computes every cell. So this test drives the real
//! `kubectl` binary: it creates the same objects on each *target* (the embedded server always; with
//! `--features e2e` and a kubeconfig, the real kube-apiserver too, as `scripts/e2e.sh` runs it), runs
//! `kubectl get <kind>` and `kubectl get <kind> -o wide` for each kind our samples and tests use, and
//! compares what kubectl printed with the expected text below, which is what kubectl prints against
//! kube-apiserver 1.20 for these objects. Ages, timestamps and the run's random suffix are normalized
//! away; everything else (headers, cell text, row order, `-o wide` columns) must match exactly.
//!
//! A second test checks the Table documents themselves over HTTP (column definitions, cell types,
//! row objects, `includeObject`, v1beta1, 406s, watches), and with `--features e2e` compares them
//! with kube-apiserver's.
//!
//! Differences that remain are listed in the `ferrokube-apiserver` crate docs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferrokube_apiserver::{ApiServer, ResourceType, RunningServer};
use ferrokube_client::Client;
use ferrokube_client::client::Call;
use http::Request;
use http_body_util::BodyExt;
use serde_json::{Value, json};

/// A server under test: kubectl's kubeconfig for it, and a client for raw requests.
struct Target {
    name: &'static str,
    /// The minor version of its release (`/version`); the embedded server's is the one it imitates.
    minor: u32,
    kubeconfig: PathBuf,
    client: Client,
    /// The embedded server, kept alive.
    _embedded: Option<RunningServer>,
    /// Scratch files (the embedded server's kubeconfig); removed on drop.
    dir: PathBuf,
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Target {
    async fn embedded(run: &str) -> Target {
        // PodTemplates as the conformance suite serves them: a registered type, printed by the
        // built-in PodTemplate printer as on kube-apiserver.
        let server = ApiServer::new()
            .register(ResourceType::new("", "v1", "PodTemplate"))
            .start()
            .await
            .expect("server starts");
        let dir = std::env::temp_dir().join(format!("ferrokube-tables-{run}"));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let kubeconfig = dir.join("kubeconfig");
        server
            .write_kubeconfig(&kubeconfig)
            .expect("kubeconfig written");
        Target {
            name: "embedded",
            minor: CURRENT_MINOR,
            kubeconfig,
            client: ferrokube_testkit::embedded_client(&server, false),
            _embedded: Some(server),
            dir,
        }
    }

    #[cfg(feature = "e2e")]
    fn real(run: &str) -> Target {
        let kubeconfig = ferrokube_client::config::kubeconfig_paths()
            .into_iter()
            .next()
            .expect("KUBECONFIG names the real server's kubeconfig");
        Target {
            name: "kube-apiserver",
            minor: CURRENT_MINOR,
            kubeconfig,
            client: ferrokube_testkit::client(None),
            _embedded: None,
            dir: std::env::temp_dir().join(format!("ferrokube-tables-real-{run}")),
        }
    }

    /// The targets of this run: the embedded server, and the real one with `--features e2e`.
    async fn all(run: &str) -> Vec<Target> {
        #[allow(unused_mut)]
        let mut targets = vec![Target::embedded(run).await];
        #[cfg(feature = "e2e")]
        {
            let mut real = Target::real(run);
            let (_, version) = real.get("/version", "application/json").await;
            real.minor = version["minor"]
                .as_str()
                .and_then(|m| m.trim_end_matches('+').parse().ok())
                .unwrap_or_else(|| panic!("kube-apiserver: no minor version in {version}"));
            targets.push(real);
        }
        targets
    }

    /// Runs kubectl against this target.
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        kubectl(&self.kubeconfig, args, stdin)
    }

    /// Runs kubectl and fails the test if it fails.
    fn kubectl_ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let output = self.kubectl(args, stdin);
        assert!(
            output.status.success(),
            "{}: kubectl {args:?} failed: {}",
            self.name,
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// GET `path` with `accept`: the status code and the JSON body.
    async fn get(&self, path: &str, accept: &str) -> (u16, Value) {
        self.send(http::Method::GET, path, accept, None).await
    }

    /// Any request with `accept` (and a JSON body): the status code and the JSON body.
    async fn send(
        &self,
        method: http::Method,
        path: &str,
        accept: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("accept", accept)
            .header("content-type", "application/json")
            .body(body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string())))
            .expect("request");
        let call = Call {
            request,
            idempotent: false,
            streaming: false,
        };
        match self.client.send(call).await {
            Ok(response) => {
                let code = response.status().as_u16();
                let body = response.into_body().collect().await.expect("body");
                let body = serde_json::from_slice(&body.to_bytes()).unwrap_or(Value::Null);
                (code, body)
            }
            Err(error) => {
                let api = error
                    .api()
                    .unwrap_or_else(|| panic!("{}: GET {path}: {error}", self.name));
                let reason = match &api.reason {
                    ferrokube_client::error::Reason::Other(other) => other.clone(),
                    known => format!("{known:?}"),
                };
                (
                    api.code,
                    json!({"code": api.code, "reason": reason, "message": api.message}),
                )
            }
        }
    }

    /// The first `count` lines of a watch on `path` with `accept`, each a JSON event.
    async fn watch_lines(&self, path: &str, accept: &str, count: usize) -> Vec<Value> {
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
        let response = self
            .client
            .send(call)
            .await
            .unwrap_or_else(|e| panic!("{}: watch {path}: {e}", self.name));
        let mut body = response.into_body();
        let mut buffer = Vec::new();
        let mut lines = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while lines.len() < count {
            let frame = tokio::time::timeout_at(deadline, body.frame()).await;
            let Ok(Some(Ok(frame))) = frame else { break };
            if let Ok(data) = frame.into_data() {
                buffer.extend_from_slice(&data);
            }
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                lines.push(serde_json::from_slice(&line).unwrap_or(Value::Null));
            }
        }
        lines
    }
}

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl is installed (it is on every machine of this project)");
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes()).expect("stdin");
    }
    child.wait_with_output().expect("kubectl runs")
}

/// A short random id (six hex digits), so that runs against a shared real server, and the tests
/// of one run, do not collide.
fn run_id() -> String {
    static COUNT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let count = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mixed = nanos ^ std::process::id().rotate_left(8) ^ count.wrapping_mul(0x9e37_79b9);
    format!("{:06x}", mixed & 0xff_ffff)
}

/// An RFC 3339 timestamp `days` days before now, whole seconds (microseconds with `micro`).
fn days_ago(days: u64, micro: bool) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let text = ferrokube_apiserver::meta::rfc3339(now - days * 86_400);
    if micro {
        text.replace('Z', ".000000Z")
    } else {
        text
    }
}

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: sprockets.tables.ferrokube.dev}
spec:
  group: tables.ferrokube.dev
  scope: Namespaced
  names: {plural: sprockets, singular: sprocket, kind: Sprocket, listKind: SprocketList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
    additionalPrinterColumns:
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Phase, type: string, jsonPath: .status.phase}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type==\"Ready\")].status'}
    - {name: Size, type: number, jsonPath: .spec.size}
    - {name: Paused, type: boolean, jsonPath: .spec.paused}
    - {name: Started, type: date, jsonPath: .status.startedAt}
    - {name: Tags, type: string, jsonPath: .spec.tags, priority: 1, description: The sprocket's tags}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

/// Every object the cases print, in namespace `ns` (labelled `ferrokube-tables: <run>`).
fn objects(ns: &str, run: &str) -> String {
    let ten_days = days_ago(10, false);
    let three_days = days_ago(3, false);
    let ten_days_micro = days_ago(10, true);
    let three_days_micro = days_ago(3, true);
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: pending, labels: {{app: web, ferrokube-tables: '{run}'}}}}
spec:
  containers: [{{name: c, image: nginx}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: running, labels: {{app: web}}}}
spec:
  nodeName: node-1
  readinessGates: [{{conditionType: example.com/ready}}, {{conditionType: example.com/warm}}]
  containers: [{{name: c, image: nginx}}, {{name: sidecar, image: busybox}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: crashing}}
spec:
  containers: [{{name: c, image: nginx}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: initializing}}
spec:
  initContainers: [{{name: init, image: busybox}}]
  containers: [{{name: c, image: nginx}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: done}}
spec:
  restartPolicy: Never
  containers: [{{name: c, image: nginx}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: terminating, finalizers: [example.com/hold]}}
spec:
  containers: [{{name: c, image: nginx}}]
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {{name: web, labels: {{app: web}}}}
spec:
  replicas: 3
  selector:
    matchLabels: {{app: web}}
    matchExpressions: [{{key: tier, operator: In, values: [front, back]}}]
  template:
    metadata: {{labels: {{app: web, tier: front}}}}
    spec:
      containers: [{{name: nginx, image: nginx:1.25}}, {{name: log, image: busybox}}]
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {{name: idle}}
spec:
  replicas: 0
  selector: {{matchLabels: {{app: idle}}}}
  template:
    metadata: {{labels: {{app: idle}}}}
    spec:
      containers: [{{name: c, image: nginx}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: api}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: api}}}}
  template:
    metadata: {{labels: {{app: api}}}}
    spec:
      containers: [{{name: api, image: registry.invalid/api:2}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, labels: {{ferrokube-tables: '{run}'}}}}
data: {{a: '1', b: '2'}}
binaryData: {{c: aGk=}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: empty, labels: {{ferrokube-tables: '{run}'}}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: token}}
type: kubernetes.io/basic-auth
data: {{username: YQ==, password: Yg==}}
---
apiVersion: v1
kind: Service
metadata: {{name: headless}}
spec:
  type: ClusterIP
  clusterIP: None
  clusterIPs: [None]
  selector: {{app: web}}
  ports: [{{name: http, port: 80, protocol: TCP}}, {{name: dns, port: 53, protocol: UDP}}]
---
apiVersion: v1
kind: Service
metadata: {{name: db}}
spec:
  type: ExternalName
  externalName: db.example.com
---
apiVersion: v1
kind: Event
metadata: {{name: crashing.1}}
involvedObject: {{kind: Pod, name: crashing, namespace: {ns}, fieldPath: 'spec.containers{{c}}'}}
reason: BackOff
message: '  Back-off restarting failed container  '
type: Warning
source: {{component: kubelet, host: node-1}}
firstTimestamp: '{ten_days}'
lastTimestamp: '{three_days}'
count: 12
---
apiVersion: v1
kind: Event
metadata: {{name: web.2}}
involvedObject: {{kind: ReplicaSet, name: web, namespace: {ns}}}
reason: SuccessfulCreate
message: Created pod web-x
type: Normal
eventTime: '{ten_days_micro}'
reportingComponent: replicaset-controller
reportingInstance: controller-1
action: Create
series: {{count: 4, lastObservedTime: '{three_days_micro}'}}
---
apiVersion: v1
kind: Event
metadata: {{name: bare.3}}
involvedObject: {{kind: Namespace, namespace: {ns}}}
reason: Checked
---
apiVersion: v1
kind: PodTemplate
metadata: {{name: worker}}
template:
  metadata: {{labels: {{role: worker, app: web}}}}
  spec:
    containers: [{{name: main, image: registry.invalid/worker:3}}, {{name: proxy, image: envoy}}]
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {{name: leader}}
spec: {{holderIdentity: node-a_7f3c, leaseDurationSeconds: 15}}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {{name: free}}
spec: {{leaseDurationSeconds: 15}}
---
apiVersion: tables.ferrokube.dev/v1
kind: Sprocket
metadata: {{name: full}}
spec: {{replicas: 3, size: 1.5, paused: false, tags: {{env: prod, tier: [a, b]}}}}
status:
  phase: Running
  startedAt: '{three_days}'
  conditions: [{{type: Synced, status: 'False'}}, {{type: Ready, status: 'True'}}]
---
apiVersion: tables.ferrokube.dev/v1
kind: Sprocket
metadata: {{name: odd}}
spec: {{replicas: 2.7, size: 2, paused: 'no', tags: 'x<y'}}
status: {{phase: 7, startedAt: yesterday}}
---
apiVersion: tables.ferrokube.dev/v1
kind: Sprocket
metadata: {{name: bare}}
"
    )
}

/// Pods of 1.28+ features, in the run's second namespace (so that the `kubectl get` cases, written
/// for both releases, do not list them): native sidecars (an init container with `restartPolicy:
/// Always`), counted in READY and RESTARTS once started, and a Pod held by a scheduling gate.
/// kube-apiserver 1.20 drops both fields as unknown (hence `--validate=false`).
const NEW_FEATURE_PODS: &str = "\
apiVersion: v1
kind: Pod
metadata: {name: sidecar}
spec:
  nodeName: node-1
  initContainers: [{name: log, image: busybox, restartPolicy: Always}]
  containers: [{name: c, image: nginx}]
---
apiVersion: v1
kind: Pod
metadata: {name: sidecar-starting}
spec:
  nodeName: node-1
  initContainers: [{name: log, image: busybox, restartPolicy: Always}]
  containers: [{name: c, image: nginx}]
---
apiVersion: v1
kind: Pod
metadata: {name: gated}
spec:
  schedulingGates: [{name: example.com/wait}]
  containers: [{name: c, image: nginx}]
";

/// The statuses of [`NEW_FEATURE_PODS`], as a kubelet would write them.
const NEW_FEATURE_STATUSES: &[(&str, &str)] = &[
    (
        "pod/sidecar",
        r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],
            "initContainerStatuses":[
              {"name":"log","image":"busybox","imageID":"","ready":true,"started":true,"restartCount":3,"state":{"running":{}}}],
            "containerStatuses":[
              {"name":"c","image":"nginx","imageID":"","ready":true,"restartCount":1,"state":{"running":{}}}]}}"#,
    ),
    (
        "pod/sidecar-starting",
        r#"{"status":{"phase":"Pending","initContainerStatuses":[
              {"name":"log","image":"busybox","imageID":"","ready":false,"started":false,"restartCount":0,"state":{"running":{}}}],
            "containerStatuses":[
              {"name":"c","image":"nginx","imageID":"","ready":false,"restartCount":0,"state":{"waiting":{"reason":"PodInitializing"}}}]}}"#,
    ),
];

/// Pod and ReplicaSet statuses, as a kubelet and a controller would write them (`/status`).
const STATUSES: &[(&str, &str)] = &[
    (
        "pod/running",
        r#"{"status":{"phase":"Running","podIP":"10.1.2.3","podIPs":[{"ip":"10.1.2.3"}],
            "conditions":[{"type":"Ready","status":"True"},{"type":"example.com/ready","status":"True"}],
            "containerStatuses":[
              {"name":"c","image":"nginx","imageID":"","ready":true,"restartCount":1,"state":{"running":{}}},
              {"name":"sidecar","image":"busybox","imageID":"","ready":true,"restartCount":0,"state":{"running":{}}}]}}"#,
    ),
    (
        "pod/crashing",
        r#"{"status":{"phase":"Running","containerStatuses":[
              {"name":"c","image":"nginx","imageID":"","ready":false,"restartCount":5,
               "state":{"waiting":{"reason":"CrashLoopBackOff"}}}]}}"#,
    ),
    (
        "pod/initializing",
        r#"{"status":{"phase":"Pending","initContainerStatuses":[
              {"name":"init","image":"busybox","imageID":"","ready":false,"restartCount":2,
               "state":{"waiting":{"reason":"PodInitializing"}}}]}}"#,
    ),
    (
        "pod/done",
        r#"{"status":{"phase":"Succeeded","containerStatuses":[
              {"name":"c","image":"nginx","imageID":"","ready":false,"restartCount":0,
               "state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]}}"#,
    ),
    (
        "replicaset/web",
        r#"{"status":{"replicas":2,"fullyLabeledReplicas":2,"readyReplicas":1,"availableReplicas":1}}"#,
    ),
];

/// Creates the run's namespaces and objects on `target`; returns the namespace.
fn create_objects(target: &Target, run: &str) -> String {
    let ns = format!("tables-{run}");
    let namespaces = format!(
        "apiVersion: v1
kind: Namespace
metadata: {{name: {ns}, labels: {{ferrokube-tables: '{run}'}}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {ns}-b, labels: {{ferrokube-tables: '{run}'}}}}
"
    );
    target.kubectl_ok(&["apply", "-f", "-"], Some(&namespaces));
    // The CRD is shared by the tests of a run (and left on a real server): two first applies at
    // once can race to create it, and one of them then fails with AlreadyExists. Try again.
    let applied = (0..3).any(|_| {
        target
            .kubectl(&["apply", "-f", "-"], Some(CRD))
            .status
            .success()
    });
    assert!(applied, "{}: the CRD applies", target.name);
    target.kubectl_ok(
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/sprockets.tables.ferrokube.dev",
        ],
        None,
    );
    target.kubectl_ok(&["apply", "-n", &ns, "-f", "-"], Some(&objects(&ns, run)));
    patch_statuses(target, &ns, STATUSES);
    target.kubectl_ok(
        &["delete", "-n", &ns, "pod/terminating", "--wait=false"],
        None,
    );
    let b = format!("{ns}-b");
    target.kubectl_ok(
        &["apply", "--validate=false", "-n", &b, "-f", "-"],
        Some(NEW_FEATURE_PODS),
    );
    patch_statuses(target, &b, NEW_FEATURE_STATUSES);
    ns
}

/// Writes each object's status through its `/status` subresource, as a kubelet or a controller
/// would (a merge patch).
fn patch_statuses(target: &Target, ns: &str, statuses: &[(&str, &str)]) {
    for (object, status) in statuses {
        let status = status.replace(char::is_whitespace, "");
        target.kubectl_ok(
            &[
                "patch",
                "-n",
                ns,
                object,
                "--subresource=status",
                "--type=merge",
                "-p",
                &status,
            ],
            None,
        );
    }
}

/// Removes what `create_objects` made (a real server without a namespace controller keeps the
/// namespaces Terminating; their contents stay with them).
fn delete_objects(target: &Target, ns: &str) {
    let unhold = r#"[{"op":"remove","path":"/metadata/finalizers"}]"#;
    let _ = target.kubectl(
        &[
            "patch",
            "-n",
            ns,
            "pod/terminating",
            "--type=json",
            "-p",
            unhold,
        ],
        None,
    );
    let b = format!("{ns}-b");
    let _ = target.kubectl(&["delete", "namespace", ns, &b, "--wait=false"], None);
}

/// The minor version of the release the embedded server imitates (see the conformance suite).
const CURRENT_MINOR: u32 = 37;

/// What kubectl prints against 1.20 where it differs from 1.37 (the expected texts above), by the
/// case's arguments. On a 1.20 server such a case must print this text, and it is not compared with
/// the embedded server's (which prints as 1.37 does).
const ON_1_20: &[(&[&str], &str)] = &[
    // An event with a series: 1.20 counted the series plus one, 1.37 prints the series' count.
    (
        &["get", "events", "-o", "wide"],
        "\
LAST SEEN   TYPE      REASON             OBJECT           SUBOBJECT            SOURCE                                MESSAGE                                FIRST SEEN   COUNT   NAME
<unknown>             Checked            namespace                                                                                                          <unknown>    1       bare.3
3d          Warning   BackOff            pod/crashing     spec.containers{c}   kubelet, node-1                       Back-off restarting failed container   10d          12      crashing.1
3d          Normal    SuccessfulCreate   replicaset/web                        replicaset-controller, controller-1   Created pod web-x                      10d          5       web.2
",
    ),
    // No convertor of its own for CRDs on 1.20: the default columns.
    (
        &["get", "customresourcedefinition", "sprockets.tables.ferrokube.dev"],
        "\
NAME                             CREATED AT
sprockets.tables.ferrokube.dev   2026-11-24T08:42:47Z
",
    ),
];

/// The text `case` prints against a server of release 1.`minor`.
fn expected_on(case: &Case, minor: u32) -> &'static str {
    ON_1_20
        .iter()
        .find(|(args, _)| minor == 20 && *args == case.args)
        .map_or(case.expected, |(_, text)| text)
}

/// Stands for the run id (as wide as one) in the cases' arguments and expected texts.
const RUN: &str = "XXXXXX";

/// One `kubectl get`: its arguments (the namespace is added) and what kubectl prints against
/// kube-apiserver 1.20 (with ages as they read on a fresh object; see [`grid`]).
struct Case {
    args: &'static [&'static str],
    expected: &'static str,
}

const CASES: &[Case] = &[
    Case {
        args: &["get", "pods"],
        expected: "\
NAME           READY   STATUS             RESTARTS   AGE
crashing       0/1     CrashLoopBackOff   5          1s
done           0/1     Completed          0          1s
initializing   0/1     Init:0/1           2          1s
pending        0/1     Pending            0          1s
running        2/2     Running            1          1s
terminating    0/1     Terminating        0          1s
",
    },
    Case {
        args: &["get", "pods", "-o", "wide"],
        expected: "\
NAME           READY   STATUS             RESTARTS   AGE   IP         NODE     NOMINATED NODE   READINESS GATES
crashing       0/1     CrashLoopBackOff   5          1s    <none>     <none>   <none>           <none>
done           0/1     Completed          0          1s    <none>     <none>   <none>           <none>
initializing   0/1     Init:0/1           2          1s    <none>     <none>   <none>           <none>
pending        0/1     Pending            0          1s    <none>     <none>   <none>           <none>
running        2/2     Running            1          1s    10.1.2.3   node-1   <none>           1/2
terminating    0/1     Terminating        0          1s    <none>     <none>   <none>           <none>
",
    },
    Case {
        args: &["get", "pod", "running"],
        expected: "\
NAME      READY   STATUS    RESTARTS   AGE
running   2/2     Running   1          0s
",
    },
    Case {
        args: &["get", "pods", "--show-labels", "--sort-by=.status.phase"],
        expected: "\
NAME           READY   STATUS             RESTARTS   AGE   LABELS
initializing   0/1     Init:0/1           2          0s    <none>
pending        0/1     Pending            0          0s    app=web,ferrokube-tables=XXXXXX
terminating    0/1     Terminating        0          0s    <none>
crashing       0/1     CrashLoopBackOff   5          0s    <none>
running        2/2     Running            1          0s    app=web
done           0/1     Completed          0          0s    <none>
",
    },
    Case {
        args: &["get", "replicasets"],
        expected: "\
NAME   DESIRED   CURRENT   READY   AGE
idle   0         0         0       0s
web    3         2         1       0s
",
    },
    Case {
        args: &["get", "replicasets", "-o", "wide"],
        expected: "\
NAME   DESIRED   CURRENT   READY   AGE   CONTAINERS   IMAGES               SELECTOR
idle   0         0         0       0s    c            nginx                app=idle
web    3         2         1       0s    nginx,log    nginx:1.25,busybox   app=web,tier in (back,front)
",
    },
    Case {
        args: &["get", "deployments", "-o", "wide"],
        expected: "\
NAME   READY   UP-TO-DATE   AVAILABLE   AGE   CONTAINERS   IMAGES                   SELECTOR
api    0/2     0            0           0s    api          registry.invalid/api:2   app=api
",
    },
    Case {
        args: &["get", "pods,rs", "-l", "app=web"],
        expected: "\
NAME          READY   STATUS    RESTARTS   AGE
pod/pending   0/1     Pending   0          1s
pod/running   2/2     Running   1          1s

NAME                  DESIRED   CURRENT   READY   AGE
replicaset.apps/web   3         2         1       1s
",
    },
    Case {
        args: &["get", "all"],
        expected: "\
NAME               READY   STATUS             RESTARTS   AGE
pod/crashing       0/1     CrashLoopBackOff   5          1s
pod/done           0/1     Completed          0          1s
pod/initializing   0/1     Init:0/1           2          1s
pod/pending        0/1     Pending            0          1s
pod/running        2/2     Running            1          1s
pod/terminating    0/1     Terminating        0          1s

NAME               TYPE           CLUSTER-IP   EXTERNAL-IP      PORT(S)         AGE
service/db         ExternalName   <none>       db.example.com   <none>          1s
service/headless   ClusterIP      None         <none>           80/TCP,53/UDP   1s

NAME                  READY   UP-TO-DATE   AVAILABLE   AGE
deployment.apps/api   0/2     0            0           1s

NAME                   DESIRED   CURRENT   READY   AGE
replicaset.apps/idle   0         0         0       1s
replicaset.apps/web    3         2         1       1s
",
    },
    Case {
        args: &["get", "configmaps"],
        expected: "\
NAME       DATA   AGE
empty      0      1s
settings   3      1s
",
    },
    Case {
        args: &["get", "configmaps", "-A", "-l", "ferrokube-tables=XXXXXX"],
        expected: "\
NAMESPACE       NAME       DATA   AGE
tables-XXXXXX   empty      0      1s
tables-XXXXXX   settings   3      1s
",
    },
    Case {
        // Only the test's own secret: a namespace also holds its service account's token when
        // a service account controller runs (the embedded server's always does).
        args: &["get", "secrets", "-o", "wide", "--field-selector", "type=kubernetes.io/basic-auth"],
        expected: "\
NAME    TYPE                       DATA   AGE
token   kubernetes.io/basic-auth   2      1s
",
    },
    Case {
        args: &["get", "services", "-o", "wide"],
        expected: "\
NAME       TYPE           CLUSTER-IP   EXTERNAL-IP      PORT(S)         AGE   SELECTOR
db         ExternalName   <none>       db.example.com   <none>          1s    <none>
headless   ClusterIP      None         <none>           80/TCP,53/UDP   1s    app=web
",
    },
    Case {
        args: &["get", "events"],
        expected: "\
LAST SEEN   TYPE      REASON             OBJECT           MESSAGE
<unknown>             Checked            namespace
3d          Warning   BackOff            pod/crashing     Back-off restarting failed container
3d          Normal    SuccessfulCreate   replicaset/web   Created pod web-x
",
    },
    Case {
        args: &["get", "events", "-o", "wide"],
        expected: "\
LAST SEEN   TYPE      REASON             OBJECT           SUBOBJECT            SOURCE                                MESSAGE                                FIRST SEEN   COUNT   NAME
<unknown>             Checked            namespace                                                                                                          <unknown>    1       bare.3
3d          Warning   BackOff            pod/crashing     spec.containers{c}   kubelet, node-1                       Back-off restarting failed container   10d          12      crashing.1
3d          Normal    SuccessfulCreate   replicaset/web                        replicaset-controller, controller-1   Created pod web-x                      10d          4       web.2
",
    },
    Case {
        args: &["get", "podtemplates"],
        expected: "\
NAME     CONTAINERS   IMAGES                            POD LABELS
worker   main,proxy   registry.invalid/worker:3,envoy   app=web,role=worker
",
    },
    Case {
        args: &["get", "leases"],
        expected: "\
NAME     HOLDER        AGE
free                   1s
leader   node-a_7f3c   1s
",
    },
    Case {
        args: &["get", "leases", "-o", "wide"],
        expected: "\
NAME     HOLDER        AGE
free                   1s
leader   node-a_7f3c   1s
",
    },
    Case {
        args: &["get", "sprockets"],
        expected: "\
NAME   REPLICAS   PHASE     READY   SIZE   PAUSED   STARTED     AGE
bare                                                            1s
full   3          Running   True    1.5    false    3d          1s
odd    2          7                 2               <invalid>   1s
",
    },
    Case {
        args: &["get", "sprockets", "-o", "wide"],
        expected: "\
NAME   REPLICAS   PHASE     READY   SIZE   PAUSED   STARTED     TAGS                              AGE
bare                                                                                              1s
full   3          Running   True    1.5    false    3d          {\"env\":\"prod\",\"tier\":[\"a\",\"b\"]}   1s
odd    2          7                 2               <invalid>   x<y                               1s
",
    },
    Case {
        args: &["get", "sprocket", "full"],
        expected: "\
NAME   REPLICAS   PHASE     READY   SIZE   PAUSED   STARTED   AGE
full   3          Running   True    1.5    false    3d        1s
",
    },
    Case {
        args: &["get", "sprockets.v1beta1.tables.ferrokube.dev"],
        expected: "\
NAME   AGE
bare   1s
full   1s
odd    1s
",
    },
    Case {
        args: &["get", "customresourcedefinition", "sprockets.tables.ferrokube.dev"],
        expected: "\
NAME                             SCOPE        VERSIONS              CREATED AT
sprockets.tables.ferrokube.dev   Namespaced   v1(storage),v1beta1   2026-11-26T05:42:34Z
",
    },
    Case {
        args: &["get", "namespaces", "-l", "ferrokube-tables=XXXXXX"],
        expected: "\
NAME              STATUS   AGE
tables-XXXXXX     Active   2s
tables-XXXXXX-b   Active   2s
",
    },
    Case {
        args: &["get", "namespace", "tables-XXXXXX"],
        expected: "\
NAME            STATUS   AGE
tables-XXXXXX   Active   2s
",
    },
    Case {
        args: &["get", "leases", "-l", "nothing=here"],
        expected: "No resources found in tables-XXXXXX namespace.\n",
    },
];

/// kubectl's output as a grid of cells, with what differs between runs and servers replaced:
/// ages of fresh objects (`0s` ... `9m59s`) by `<age>`, RFC 3339 timestamps by `<time>`, the run id
/// by [`RUN`]. Columns are cut where the header's names start (kubectl aligns every row to them); an
/// empty line starts a new table (`kubectl get pods,rs`).
fn grid(text: &str, run: &str) -> Vec<Vec<String>> {
    // The placeholder has the run id's width, so that kubectl's alignment holds.
    let text = text.replace(run, RUN);
    let mut rows = Vec::new();
    let mut starts: Vec<usize> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            starts.clear();
            rows.push(Vec::new());
            continue;
        }
        if starts.is_empty() {
            starts = column_starts(line);
        }
        let cells = starts
            .iter()
            .enumerate()
            .map(|(i, start)| {
                let end = starts
                    .get(i + 1)
                    .copied()
                    .unwrap_or(line.len())
                    .min(line.len());
                let cell = line.get(*start.min(&end)..end).unwrap_or("").trim();
                normalize_cell(cell)
            })
            .collect();
        rows.push(cells);
    }
    rows
}

/// Where each header name starts: names are separated by at least two spaces (kubectl pads by three)
/// and contain at most single spaces (`NOMINATED NODE`).
fn column_starts(header: &str) -> Vec<usize> {
    let bytes = header.as_bytes();
    let mut starts = Vec::new();
    for i in 0..bytes.len() {
        let starts_here = bytes[i] != b' '
            && (i == 0 || (i >= 2 && bytes[i - 1] == b' ' && bytes[i - 2] == b' '));
        if starts_here {
            starts.push(i);
        }
    }
    starts
}

fn normalize_cell(cell: &str) -> String {
    let is_fresh_age = {
        let (minutes, rest) = match cell.split_once('m') {
            Some((m, rest)) => (Some(m), rest),
            None => (None, cell),
        };
        let minutes_ok = minutes
            .is_none_or(|m| !m.is_empty() && m.len() == 1 && m.bytes().all(|b| b.is_ascii_digit()));
        let seconds_ok = match rest.strip_suffix('s') {
            Some(s) => !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()),
            None => rest.is_empty() && minutes.is_some(),
        };
        minutes_ok && seconds_ok
    };
    let is_timestamp = cell.len() == 20
        && cell.as_bytes().get(10) == Some(&b'T')
        && cell.ends_with('Z')
        && cell[..4].bytes().all(|b| b.is_ascii_digit());
    if is_fresh_age {
        "<age>".to_string()
    } else if is_timestamp {
        "<time>".to_string()
    } else {
        cell.to_string()
    }
}

/// What kubectl printed for one case on one target.
#[derive(Debug, Clone)]
struct Printed {
    stdout: String,
    stderr: String,
    success: bool,
}

impl Printed {
    /// Standard output, then standard error (`No resources found ...`).
    fn text(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Runs every case; [`RUN`] in an argument stands for the run id.
fn run_cases(target: &Target, ns: &str, run: &str) -> Vec<Printed> {
    CASES
        .iter()
        .map(|case| {
            let mut args: Vec<String> = case.args.iter().map(|a| a.replace(RUN, run)).collect();
            args.extend(["--namespace".to_string(), ns.to_string()]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let output = target.kubectl(&args, None);
            Printed {
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
                success: output.status.success(),
            }
        })
        .collect()
}

/// `kubectl get leases --watch --output-watch-events` while one lease is taken and then deleted:
/// the list, then one row per event (the watch asks for Tables too).
fn watch_leases(target: &Target, ns: &str) -> Printed {
    let mut child = Command::new("kubectl")
        .args([
            "get",
            "leases",
            "--watch",
            "--output-watch-events",
            "--namespace",
            ns,
        ])
        .env("KUBECONFIG", &target.kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    std::thread::sleep(Duration::from_secs(2));
    let take = r#"{"spec":{"holderIdentity":"node-b"}}"#;
    target.kubectl_ok(
        &["patch", "-n", ns, "lease/free", "--type=merge", "-p", take],
        None,
    );
    target.kubectl_ok(&["delete", "-n", ns, "lease/free"], None);
    std::thread::sleep(Duration::from_secs(2));
    let _ = child.kill();
    let output = child.wait_with_output().expect("kubectl ends");
    Printed {
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::new(),
        success: true,
    }
}

const WATCH_EXPECTED: &str = "\
EVENT      NAME     HOLDER        AGE
ADDED      free                   2s
ADDED      leader   node-a_7f3c   2s
MODIFIED   free     node-b        4s
DELETED    free     node-b        4s
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_what_it_prints_against_kube_apiserver() {
    let run = run_id();
    let targets = Target::all(&run).await;
    let result = tokio::task::spawn_blocking(move || {
        let mut failures = Vec::new();
        let mut printed_by: Vec<(&str, u32, Vec<Printed>)> = Vec::new();
        for target in &targets {
            let ns = create_objects(target, &run);
            let mut printed = run_cases(target, &ns, &run);
            printed.push(watch_leases(target, &ns));
            delete_objects(target, &ns);
            let watch = Case {
                args: &["get", "leases", "--watch", "--output-watch-events"],
                expected: WATCH_EXPECTED,
            };
            for (case, printed) in CASES.iter().chain([&watch]).zip(&printed) {
                let expected_text = expected_on(case, target.minor);
                let expected = grid(expected_text, &run);
                let actual = grid(&printed.text(), &run);
                if !printed.success || expected != actual {
                    failures.push(format!(
                        "{}: kubectl {}\n--- expected\n{}--- printed\n{}",
                        target.name,
                        case.args.join(" "),
                        expected_text,
                        printed.text()
                    ));
                }
            }
            printed_by.push((target.name, target.minor, printed));
        }
        // Both servers must print the same, case by case (also where both differ from the text).
        if let [(first, _, a), (second, second_minor, b)] = printed_by.as_slice() {
            for ((case, a), b) in CASES.iter().zip(a).zip(b) {
                if expected_on(case, *second_minor) != case.expected {
                    continue; // a documented 1.20 text, checked above
                }
                // (The watch case is compared with the expected text only: its ages depend on timing.)
                if grid(&a.text(), &run) != grid(&b.text(), &run) {
                    failures.push(format!(
                        "{first} and {second} differ: kubectl {}\n--- {first}\n{}--- {second}\n{}",
                        case.args.join(" "),
                        a.text(),
                        b.text()
                    ));
                }
            }
        }
        failures
    })
    .await;
    let failures = match result {
        Ok(failures) => failures,
        Err(panic) => std::panic::resume_unwind(panic.into_panic()),
    };
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn the_grid_cuts_columns_at_the_header_and_normalizes_ages() {
    let text = "NAME   READY   AGE   NOMINATED NODE   LAST\nweb    1/1     5s    <none>           2021-01-02T03:04:05Z\nx      0/1     9m3s                   10d\n\nNAME\nrun-abc\n";
    assert_eq!(
        grid(text, "abc"),
        [
            vec!["NAME", "READY", "AGE", "NOMINATED NODE", "LAST"],
            vec!["web", "1/1", "<age>", "<none>", "<time>"],
            vec!["x", "0/1", "<age>", "", "10d"],
            vec![],
            vec!["NAME"],
            vec!["run-XXXXXX"],
        ]
    );
    assert_eq!(normalize_cell("10m"), "10m");
    assert_eq!(normalize_cell("2m"), "<age>");
    assert_eq!(normalize_cell("m"), "m");
}

/// kubectl's Accept header for `kubectl get`.
const KUBECTL_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
const TABLE_V1: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
const TABLE_V1BETA1: &str = "application/json;as=Table;v=v1beta1;g=meta.k8s.io";

/// A Table (or Status) with what differs between runs and servers replaced: resourceVersions,
/// continue tokens, ages and timestamps, the run id; each row's object is cut to its kind, version
/// and name (kube-apiserver's metadata also has managedFields, this server's does not). A column's
/// description is only required to be there: the texts are Kubernetes' API documentation, which
/// the embedded server does not reproduce word for word (it keeps the wording of 1.20's; 1.37
/// reworded several), so they are not compared.
fn normalize(value: &Value, run: &str) -> Value {
    match value {
        Value::String(text) => {
            let text = text.replace(run, RUN);
            Value::String(normalize_cell(&text))
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| normalize(v, run)).collect()),
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (key, item) in map {
                let item = match key.as_str() {
                    "resourceVersion" | "continue"
                        if item.as_str().is_some_and(|s| !s.is_empty()) =>
                    {
                        json!("<set>")
                    }
                    "object" if item.is_object() => json!({
                        "kind": item["kind"], "apiVersion": item["apiVersion"],
                        "name": normalize(&item["metadata"]["name"], run)}),
                    "description" if item.as_str().is_some_and(|d| !d.is_empty()) => {
                        json!("<description>")
                    }
                    _ => normalize(item, run),
                };
                out.insert(key.clone(), item);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// The checks every Table must pass on every target: a cell per column in every row.
fn assert_well_formed(target: &str, what: &str, table: &Value) {
    let columns = table["columnDefinitions"].as_array().map(Vec::len);
    for row in table["rows"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        assert_eq!(
            row["cells"].as_array().map(Vec::len),
            columns,
            "{target}: {what}: a cell per column in {row}"
        );
    }
}

/// What one target answered to each Table request, normalized; with a few expectations checked on
/// the way (so that the test means something without a real server too).
async fn observe(target: &Target, ns: &str, run: &str) -> Vec<(String, Value)> {
    let mut seen = Vec::new();
    let core = format!("/api/v1/namespaces/{ns}");
    let sprockets = format!("/apis/tables.ferrokube.dev/v1/namespaces/{ns}/sprockets");
    let tables = [
        format!("{core}/pods"),
        format!("{core}-b/pods"),
        format!("{core}/configmaps"),
        // The test's own Secret only: the embedded server also puts the default ServiceAccount's
        // token there, which kube-apiserver leaves to kube-controller-manager.
        format!("{core}/secrets?fieldSelector=type%3Dkubernetes.io%2Fbasic-auth"),
        format!("{core}/services"),
        format!("{core}/events"),
        format!("/apis/apps/v1/namespaces/{ns}/replicasets"),
        format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"),
        format!("{core}/podtemplates"),
        format!("/api/v1/namespaces?labelSelector=ferrokube-tables%3D{run}"),
        sprockets.clone(),
        format!("/apis/tables.ferrokube.dev/v1beta1/namespaces/{ns}/sprockets"),
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/sprockets.tables.ferrokube.dev"
            .to_string(),
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?labelSelector=nothing%3Dhere"
            .to_string(),
    ];
    for path in &tables {
        let (code, table) = target.get(path, KUBECTL_ACCEPT).await;
        assert_eq!(code, 200, "{}: {path}: {table}", target.name);
        assert_eq!(table["kind"], "Table", "{}: {path}", target.name);
        assert_well_formed(target.name, path, &table);
        seen.push((format!("GET {path}"), normalize(&table, run)));
    }

    let (_, pods) = target.get(&format!("{core}/pods"), KUBECTL_ACCEPT).await;
    let names: Vec<&Value> = pods["columnDefinitions"]
        .as_array()
        .map(|c| c.iter().map(|c| &c["name"]).collect())
        .unwrap_or_default();
    assert_eq!(
        names,
        [
            "Name",
            "Ready",
            "Status",
            "Restarts",
            "Age",
            "IP",
            "Node",
            "Nominated Node",
            "Readiness Gates"
        ],
        "{}: pod columns",
        target.name
    );
    let done = pods["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["cells"][0] == "done"));
    assert_eq!(
        done.map(|r| r["conditions"].clone()),
        Some(
            json!([{"type": "Completed", "status": "True", "reason": "Succeeded",
                     "message": "The pod has completed successfully."}])
        ),
        "{}: a finished pod's row condition",
        target.name
    );
    assert_eq!(
        pods["rows"][0]["object"]["kind"], "PartialObjectMetadata",
        "{}: rows carry metadata by default",
        target.name
    );

    // One object, v1beta1, no row objects; the whole objects.
    let path = format!("{core}/pods/running?includeObject=None");
    let (_, one) = target.get(&path, TABLE_V1BETA1).await;
    assert_eq!(one["apiVersion"], "meta.k8s.io/v1beta1", "{}", target.name);
    assert_eq!(one["rows"][0]["object"], Value::Null, "{}", target.name);
    seen.push((format!("GET {path} (v1beta1)"), normalize(&one, run)));
    let path = format!("{sprockets}?includeObject=Object");
    let (_, whole) = target.get(&path, TABLE_V1).await;
    assert_eq!(
        whole["rows"][0]["object"]["kind"], "Sprocket",
        "{}",
        target.name
    );
    seen.push((format!("GET {path}"), normalize(&whole, run)));

    // Pages: the Table carries the list's continue token and remaining count.
    let path = format!("{core}/configmaps?limit=1");
    let (_, first) = target.get(&path, TABLE_V1).await;
    let token = first["metadata"]["continue"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        !token.is_empty(),
        "{}: a first page has a continue token: {first}",
        target.name
    );
    seen.push((format!("GET {path}"), normalize(&first, run)));
    let path = format!("{core}/configmaps?limit=1&continue={token}");
    let (_, second) = target.get(&path, TABLE_V1).await;
    assert_eq!(second["rows"][0]["cells"][0], "settings", "{}", target.name);
    seen.push((
        "GET configmaps?limit=1&continue=...".to_string(),
        normalize(&second, run),
    ));

    // Writes answer with a Table too (dry runs: nothing changes).
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "written"}, "data": {"a": "1"}});
    let path = format!("{core}/configmaps?dryRun=All");
    let (code, created) = target
        .send(http::Method::POST, &path, KUBECTL_ACCEPT, Some(cm))
        .await;
    assert_eq!(
        (code, &created["kind"]),
        (201, &json!("Table")),
        "{}: {created}",
        target.name
    );
    seen.push((format!("POST {path}"), normalize(&created, run)));
    let path = format!("{core}/configmaps/settings?dryRun=All");
    let patch = json!({"data": {"z": "26"}});
    let request = Request::builder()
        .method(http::Method::PATCH)
        .uri(&path)
        .header("accept", TABLE_V1)
        .header("content-type", "application/merge-patch+json")
        .body(Bytes::from(patch.to_string()))
        .expect("request");
    let call = Call {
        request,
        idempotent: false,
        streaming: false,
    };
    let patched = match target.client.send(call).await {
        Ok(response) => {
            let body = response.into_body().collect().await.expect("body");
            serde_json::from_slice(&body.to_bytes()).unwrap_or(Value::Null)
        }
        Err(error) => panic!("{}: PATCH {path}: {error}", target.name),
    };
    assert_eq!(
        patched["rows"][0]["cells"][1], 4,
        "{}: {patched}",
        target.name
    );
    seen.push((format!("PATCH {path}"), normalize(&patched, run)));
    // (A pod already being deleted: kube-apiserver's answer for an unscheduled pod also carries a
    // deletionTimestamp, which this server's immediate deletion does not write.)
    let path = format!("{core}/pods/terminating?dryRun=All");
    let (_, deleted) = target
        .send(http::Method::DELETE, &path, TABLE_V1, None)
        .await;
    seen.push((format!("DELETE {path}"), normalize(&deleted, run)));
    let path = format!("{core}/configmaps?dryRun=All&labelSelector=nothing%3Dhere");
    let (_, none) = target
        .send(http::Method::DELETE, &path, TABLE_V1, None)
        .await;
    seen.push((format!("DELETE {path}"), normalize(&none, run)));

    // What cannot be served.
    for (what, path, accept) in [
        (
            "a Table version that does not exist",
            format!("{core}/pods"),
            "application/json;as=Table;v=v2;g=meta.k8s.io",
        ),
        (
            "a Table of a custom resource version that does not exist",
            sprockets.clone(),
            "application/json;as=Table;v=v9;g=meta.k8s.io",
        ),
        (
            "an unknown includeObject",
            format!("{core}/pods?includeObject=Everything"),
            TABLE_V1,
        ),
    ] {
        let (code, status) = target.get(&path, accept).await;
        assert!(
            code == 406 || code == 400,
            "{}: {what}: {code} {status}",
            target.name
        );
        seen.push((what.to_string(), normalize(&status, run)));
    }
    // A Table of `/status`: 1.37's status storage converts as the object's does; 1.20's had no
    // table convertor, so a Table-only Accept was 406 ("only the following media types are
    // accepted: …") and kubectl's Accept fell back to the object itself.
    let status_path = format!("{core}/pods/running/status");
    for (what, accept) in [
        ("a Table of a subresource", TABLE_V1),
        ("a Table of a subresource, or the object", KUBECTL_ACCEPT),
    ] {
        let (code, body) = target.get(&status_path, accept).await;
        let summary = if target.minor == 20 {
            let refused = accept == TABLE_V1
                && code == 406
                && body["message"].as_str().is_some_and(|m| {
                    m.starts_with("only the following media types are accepted: application/json")
                });
            let object = accept == KUBECTL_ACCEPT && code == 200 && body["kind"] == "Pod";
            assert!(
                refused || object,
                "{} (1.20): {what}: not 1.20's documented answer: {code} {body}",
                target.name
            );
            json!({"code": 200, "kind": "Table", "rows": 1})
        } else {
            json!({"code": code, "kind": body["kind"], "rows": body["rows"].as_array().map(Vec::len)})
        };
        seen.push((what.to_string(), summary));
    }

    // A watch as Tables: one row per event, the column definitions on the first event only.
    let (_, leases) = target
        .get(
            &format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"),
            TABLE_V1,
        )
        .await;
    let rv = leases["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let path =
        format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases?watch=1&resourceVersion={rv}");
    let watch = target.watch_lines(&path, KUBECTL_ACCEPT, 2);
    let writes = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        tokio::task::block_in_place(|| {
            let take = r#"{"spec":{"holderIdentity":"node-b"}}"#;
            target.kubectl_ok(
                &["patch", "-n", ns, "lease/free", "--type=merge", "-p", take],
                None,
            );
            target.kubectl_ok(&["delete", "-n", ns, "lease/free"], None);
        });
    };
    let (events, ()) = tokio::join!(watch, writes);
    let types: Vec<&Value> = events.iter().map(|e| &e["type"]).collect();
    assert_eq!(
        types,
        ["MODIFIED", "DELETED"],
        "{}: {events:?}",
        target.name
    );
    assert!(
        events[0]["object"]["columnDefinitions"].is_array(),
        "{}: headers first",
        target.name
    );
    assert!(
        events[1]["object"]["columnDefinitions"].is_null(),
        "{}: then none",
        target.name
    );
    seen.push((
        "watch leases as Tables".to_string(),
        normalize(&Value::Array(events), run),
    ));
    if target.minor == 20 {
        documented_1_20(target, &mut seen);
    }
    seen
}

/// An observation of a 1.20 server that is its documented answer, checked, and not compared with
/// the embedded server's (which answers as 1.37 does).
fn accepted_as_1_20(reason: &str) -> Value {
    json!({"accepted as 1.20's documented answer": reason})
}

/// Where 1.20's Tables differ from 1.37's (and so from the embedded server's), each checked to be
/// what 1.20 answers, then made comparable or set aside with [`accepted_as_1_20`]:
/// - a Pod's `Restarts` column: 1.20 `integer` cells, 1.37 `string` (`5`, or `5 (3d ago)` once the
///   last restart's time is known; none is here): converted;
/// - CustomResourceDefinitions: 1.20 has no convertor of its own for them, so the default Name and
///   Created At columns; 1.37 adds Scope, Versions and (wide) Group, Kind, ShortNames, Established;
/// - Events: an event of the new API with a `series` counted the series plus one on 1.20 (5 for the
///   test's `web.2`, series count 4); 1.37 shows the series' count;
/// - the Pods of [`NEW_FEATURE_PODS`]: 1.20 drops an init container's `restartPolicy` and a Pod's
///   `schedulingGates`, so no sidecar is counted and no Pod is `SchedulingGated`.
fn documented_1_20(target: &Target, seen: &mut [(String, Value)]) {
    for (what, value) in seen.iter_mut() {
        let columns: Vec<String> = value["columnDefinitions"]
            .as_array()
            .map(|c| {
                c.iter()
                    .map(|c| c["name"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default();
        if what.contains("/customresourcedefinitions") {
            assert_eq!(
                columns,
                ["Name", "Created At"],
                "{} (1.20): {what}",
                target.name
            );
            *value = accepted_as_1_20("no CRD convertor: the default columns");
        } else if what.ends_with("/events") {
            let rows = value["rows"].as_array().cloned().unwrap_or_default();
            let web = rows.iter().find(|r| r["cells"][9] == "web.2");
            assert_eq!(
                web.map(|r| r["cells"][8].clone()),
                Some(json!(5)),
                "{} (1.20): {what}: a series counted plus one",
                target.name
            );
            *value = accepted_as_1_20("a series counted plus one");
        } else if what.ends_with("-b/pods") {
            // No sidecars and no scheduling gates on 1.20: the fields are dropped, so the sidecar
            // is an init container that never finished and the gated Pod is merely Pending.
            let rows: Vec<(String, String, String, String)> = value["rows"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| {
                    let cell = |i: usize| match &r["cells"][i] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (cell(0), cell(1), cell(2), cell(3))
                })
                .collect();
            let row = |name: &str, ready: &str, status: &str, restarts: &str| {
                (name.into(), ready.into(), status.into(), restarts.into())
            };
            assert_eq!(
                rows,
                [
                    row("gated", "0/1", "Pending", "0"),
                    row("sidecar", "0/1", "Init:0/1", "3"),
                    row("sidecar-starting", "0/1", "Init:0/1", "0"),
                ],
                "{} (1.20): {what}",
                target.name
            );
            *value = accepted_as_1_20("no native sidecars, no scheduling gates");
        } else if let Some(at) = columns.iter().position(|c| c == "Restarts") {
            let column = &mut value["columnDefinitions"][at];
            assert_eq!(column["type"], "integer", "{} (1.20): {what}", target.name);
            column["type"] = json!("string");
            for row in value["rows"].as_array_mut().into_iter().flatten() {
                let count = row["cells"][at].as_i64();
                assert!(count.is_some(), "{} (1.20): {what}: {row}", target.name);
                row["cells"][at] = json!(count.map(|c| c.to_string()));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_documents_match_kube_apiserver() {
    let run = run_id();
    let targets = Target::all(&run).await;
    let mut seen_by = Vec::new();
    for target in &targets {
        let ns = tokio::task::block_in_place(|| create_objects(target, &run));
        let seen = observe(target, &ns, &run).await;
        tokio::task::block_in_place(|| delete_objects(target, &ns));
        seen_by.push((target.name, seen));
    }
    if let [(first, a), (second, b)] = seen_by.as_slice() {
        let documented = |v: &Value| v.get("accepted as 1.20's documented answer").is_some();
        let differences: Vec<String> = a
            .iter()
            .zip(b)
            .filter(|((_, x), (_, y))| x != y && !documented(x) && !documented(y))
            .map(|((what, x), (_, y))| format!("{what}\n--- {first}\n{x:#}\n--- {second}\n{y:#}"))
            .collect();
        assert!(differences.is_empty(), "\n{}", differences.join("\n\n"));
    }
}

/// A watch for Tables that allows bookmarks gets them as Tables too: kube-apiserver converts the
/// bookmark's object (the kind with only a resourceVersion) like any other, into one row of empty
/// cells, and the first event of the watch carries the column definitions whatever its type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_watch_gets_bookmarks_as_tables() {
    let server = ApiServer::new()
        .bookmark_interval(Duration::from_millis(200))
        .start()
        .await
        .expect("server starts");
    let target = Target {
        name: "embedded",
        minor: CURRENT_MINOR,
        kubeconfig: PathBuf::new(),
        client: ferrokube_testkit::embedded_client(&server, false),
        _embedded: None,
        dir: std::env::temp_dir().join(format!("ferrokube-tables-bookmarks-{}", run_id())),
    };
    let (_, list) = target
        .get("/api/v1/namespaces/default/pods", TABLE_V1)
        .await;
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or("");
    let path = format!(
        "/api/v1/namespaces/default/pods?watch=1&allowWatchBookmarks=true&resourceVersion={rv}"
    );
    let events = target.watch_lines(&path, TABLE_V1, 2).await;
    assert_eq!(events.len(), 2, "{events:?}");
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["type"], "BOOKMARK");
        let table = &event["object"];
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["columnDefinitions"].is_array(), i == 0, "{table}");
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "",
                "0/0",
                "",
                "0",
                "<unknown>",
                "<none>",
                "<none>",
                "<none>",
                "<none>"
            ])
        );
        let object = &table["rows"][0]["object"];
        assert_eq!(object["kind"], "PartialObjectMetadata");
        assert_eq!(object["metadata"]["resourceVersion"], rv);
    }
}
