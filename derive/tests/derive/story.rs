//! The story a derived custom resource must get through on an API server, shared by the embedded
//! server's test (`derive/tests/derive/main.rs`) and the real kube-apiserver's (`derive/tests/derive/e2e.rs`):
//! install the generated CRD, create, get, list, update the status (by hand and from a running
//! controller), be refused when a validation marker is violated, show the printer columns in
//! `kubectl get`, and round-trip through `kubectl get -o yaml` and `kubectl replace`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ferrokube::api::{ListParams, Patch, PatchParams, PostParams};
use ferrokube::controller::{Action, Context, Controller, from_fn};
use ferrokube::core::Scope;
use ferrokube::crd::{CustomResourceExt, apply_and_wait};
use ferrokube::{Api, Client, CustomResource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// A gear: the custom kind of these tests (not `Sprocket`: the Table suite has that plural on the
/// same real server, and `kubectl get sprockets` would be ambiguous).
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// clippy takes two columns' identical `type = "integer"` for a repeated attribute
// (rust-clippy#12923, a false positive on helper attributes).
#[allow(clippy::duplicated_attributes)]
#[resource(
    group = "derive.ferrokube.dev",
    version = "v1",
    kind = "Gear",
    namespaced,
    status = "GearStatus",
    shortname = "gr",
    category = "ferrokube",
    printcolumn(name = "Teeth", type = "integer", json_path = ".spec.teeth"),
    printcolumn(
        name = "Finish",
        type = "string",
        json_path = ".spec.finish",
        priority = 1
    ),
    printcolumn(name = "Ready", type = "integer", json_path = ".status.readyTeeth"),
    scale(
        spec_replicas_path = ".spec.teeth",
        status_replicas_path = ".status.readyTeeth"
    ),
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct GearSpec {
    /// How many teeth.
    #[schemars(range(min = 1, max = 64))]
    pub teeth: i32,
    #[schemars(length(min = 1, max = 12), regex(pattern = r"^[a-z]+$"))]
    pub label: String,
    pub finish: Finish,
    pub note: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub enum Finish {
    Matte,
    Gloss,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GearStatus {
    pub ready_teeth: Option<i32>,
    pub observed_generation: Option<i64>,
}

/// Every shape the schema rewrite handles, in one cluster-scoped kind: the server must accept its
/// CRD as structural, and an object must come back whole (a wrong schema prunes fields silently).
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[resource(
    group = "derive.ferrokube.dev",
    version = "v1",
    kind = "Gizmo",
    status = "GizmoStatus",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct GizmoSpec {
    pub part: Option<Part>,
    pub finish: Option<Finish>,
    pub shape: Shape,
    pub labels: BTreeMap<String, String>,
    pub extra: BTreeMap<String, serde_json::Value>,
    pub anything: Option<serde_json::Value>,
    pub tags: BTreeSet<String>,
    pub port: IntOrString,
    pub ratio: f64,
    #[serde(default)]
    pub paused: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Part {
    pub id: u16,
}

/// Internally tagged: one object whose `kind` says which fields it has.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind")]
pub enum Shape {
    Circle { radius: f64 },
    Square { side: f64 },
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GizmoStatus {
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// Where the story runs.
pub struct Cluster {
    pub client: Client,
    /// The kubeconfig kubectl is given (`None`: kubectl's own, from `$KUBECONFIG`).
    pub kubeconfig: Option<PathBuf>,
    /// The namespace of the story's objects (it exists).
    pub namespace: String,
    /// Whether the server enforces `pattern` (kube-apiserver does; the embedded server does not).
    pub enforces_pattern: bool,
    /// Whether the server serves a CRD's `/scale` (kube-apiserver does; the embedded server not).
    pub serves_scale: bool,
}

pub fn spec(teeth: i32) -> GearSpec {
    GearSpec {
        teeth,
        label: "main".into(),
        finish: Finish::Matte,
        note: None,
    }
}

/// Runs kubectl; returns stdout, or stderr as the error.
pub fn kubectl(
    kubeconfig: Option<&Path>,
    args: &[&str],
    stdin: Option<&str>,
) -> Result<String, String> {
    use std::io::Write;
    // A discovery cache of its own: kubectl keeps one per host:port for minutes, and an earlier
    // embedded server on the same port served other kinds.
    let cache =
        std::env::temp_dir().join(format!("ferrokube-derive-kubectl-{}", std::process::id()));
    let mut command = Command::new("kubectl");
    command
        .args(args)
        .arg(format!("--cache-dir={}", cache.display()));
    if let Some(kubeconfig) = kubeconfig {
        command.env("KUBECONFIG", kubeconfig);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl is installed (it is on every machine of this project)");
    if let Some(mut pipe) = child.stdin.take() {
        if let Some(input) = stdin {
            pipe.write_all(input.as_bytes()).expect("stdin");
        }
    }
    let output = child.wait_with_output().expect("kubectl runs");
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

fn kubectl_ok(cluster: &Cluster, args: &[&str], stdin: Option<&str>) -> String {
    kubectl(cluster.kubeconfig.as_deref(), args, stdin)
        .unwrap_or_else(|stderr| panic!("kubectl {args:?} failed: {stderr}"))
}

/// The whole story; panics (fails the test) at the first thing that goes wrong.
pub async fn story(cluster: &Cluster) {
    let client = &cluster.client;
    let ns = cluster.namespace.as_str();

    // Install: applying twice is fine (create or replace), and both return it Established.
    for _ in 0..2 {
        let crd = apply_and_wait(client, &Gear::crd(), Duration::from_secs(30))
            .await
            .expect("the generated CRD is accepted and Established");
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        assert!(established);
    }

    // Create, get, list.
    let gears: Api<Gear> = Api::namespaced(client.clone(), ns);
    let created = gears
        .create(&PostParams::default(), &Gear::new("s1", spec(12)))
        .await
        .expect("created");
    assert_eq!(created.spec, spec(12));
    assert_eq!(created.metadata.namespace.as_deref(), Some(ns));
    assert!(created.metadata.uid.is_some());
    assert!(created.status.is_none());
    let got = gears.get("s1").await.expect("get");
    assert_eq!(got.spec, spec(12));
    assert_eq!(got.metadata.uid, created.metadata.uid);
    let listed = gears.list(&ListParams::default()).await.expect("list");
    assert_eq!(listed.items.len(), 1);
    let everywhere: Api<Gear> = Api::all(client.clone());
    let all = everywhere
        .list(&ListParams::default())
        .await
        .expect("list in every namespace");
    assert!(
        all.items
            .iter()
            .any(|s| s.metadata.uid == created.metadata.uid)
    );

    // Status through the subresource: the spec in the same body is ignored there, and the status
    // in a main-resource update is ignored too.
    let mut with_status = got.clone();
    with_status.status = Some(GearStatus {
        ready_teeth: Some(5),
        observed_generation: None,
    });
    with_status.spec.teeth = 60;
    let written = gears
        .replace_status("s1", &PostParams::default(), &with_status)
        .await
        .expect("status replaced");
    assert_eq!(written.status.as_ref().and_then(|s| s.ready_teeth), Some(5));
    assert_eq!(
        written.spec.teeth, 12,
        "the status subresource leaves spec alone"
    );
    let mut respec = written.clone();
    respec.spec.teeth = 13;
    respec.status = None;
    let updated = gears
        .replace("s1", &PostParams::default(), &respec)
        .await
        .expect("replaced");
    assert_eq!(updated.spec.teeth, 13);
    assert_eq!(
        updated.status.as_ref().and_then(|s| s.ready_teeth),
        Some(5),
        "the main resource leaves status alone"
    );

    // A controller over the derived type: it writes status.readyTeeth = spec.teeth.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let reconcile = from_fn(|gear: Arc<Gear>, ctx: Context| async move {
        let name = gear.metadata.name.clone().unwrap_or_default();
        let status = json!({"status": {
            "readyTeeth": gear.spec.teeth,
            "observedGeneration": gear.metadata.generation,
        }});
        ctx.api_for_object(gear.as_ref())
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await?;
        Ok::<_, ferrokube::Error>(Action::await_change())
    });
    let controller = Controller::<Gear>::new(client.clone(), Scope::namespace(ns));
    let running = tokio::spawn(controller.run(reconcile, async {
        let _ = stopped.await;
    }));
    gears
        .create(&PostParams::default(), &Gear::new("s2", spec(7)))
        .await
        .expect("second created");
    for (name, teeth) in [("s1", 13), ("s2", 7)] {
        let mut last = None;
        for _ in 0..200 {
            let now = gears.get(name).await.expect("get");
            last = now.status.clone();
            if last.as_ref().and_then(|s| s.ready_teeth) == Some(teeth) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            last.and_then(|s| s.ready_teeth),
            Some(teeth),
            "the controller wrote {name}'s status"
        );
    }
    let _ = stop.send(());
    running
        .await
        .expect("controller task")
        .expect("controller ran and stopped");

    // Validation markers, enforced by the server: 422 Invalid.
    let refused = |spec: GearSpec, what: &'static str| {
        let gears = gears.clone();
        async move {
            let error = gears
                .create(&PostParams::default(), &Gear::new("bad", spec))
                .await
                .expect_err(what);
            assert!(error.is_invalid(), "{what}: 422 Invalid, got {error}");
            error.to_string()
        }
    };
    let message = refused(spec(65), "teeth above maximum").await;
    assert!(message.contains("spec.teeth"), "{message}");
    let message = refused(spec(0), "teeth below minimum").await;
    assert!(message.contains("spec.teeth"), "{message}");
    let mut long = spec(3);
    long.label = "abcdefghijklmnop".into();
    let message = refused(long, "label above maxLength").await;
    assert!(message.contains("spec.label"), "{message}");
    let mut wrong = spec(3);
    wrong.label = "UPPER".into();
    if cluster.enforces_pattern {
        let message = refused(wrong, "label not matching the pattern").await;
        assert!(message.contains("spec.label"), "{message}");
    }
    // An enum value the schema does not list (written as JSON: the Rust type cannot say it).
    let raw: Api<ferrokube::DynamicObject> = Api::dynamic(
        client.clone(),
        ferrokube::ApiResource {
            group: "derive.ferrokube.dev".into(),
            version: "v1".into(),
            kind: "Gear".into(),
            plural: "gears".into(),
            namespaced: true,
        },
        Some(ns),
    );
    let bad_enum: ferrokube::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "derive.ferrokube.dev/v1", "kind": "Gear",
        "metadata": {"name": "bad-enum"},
        "spec": {"teeth": 3, "label": "x", "finish": "Chrome"},
    }))
    .expect("json");
    let error = raw
        .create(&PostParams::default(), &bad_enum)
        .await
        .expect_err("an enum value outside the schema's");
    assert!(error.is_invalid(), "{error}");

    // kubectl: the printer columns (priority 1 only with -o wide; a CRD that lists columns gets
    // NAME and its own, so the derive adds AGE last), the short name, the category.
    let table = kubectl_ok(cluster, &["get", "gears", "-n", ns], None);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "TEETH", "READY", "AGE"], "{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with("s1 "))
        .unwrap_or_else(|| panic!("s1 listed: {table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[..3], ["s1", "13", "13"], "{table}");
    let wide = kubectl_ok(cluster, &["get", "gr", "s2", "-n", ns, "-o", "wide"], None);
    let header: Vec<&str> = wide
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "TEETH", "FINISH", "READY", "AGE"],
        "{wide}"
    );
    assert!(wide.contains("Matte"), "{wide}");
    let by_category = kubectl_ok(cluster, &["get", "ferrokube", "-n", ns, "-o", "name"], None);
    assert!(
        by_category.contains("gear.derive.ferrokube.dev/s1"),
        "{by_category}"
    );

    // kubectl get -o yaml decodes into the Rust type, equal to what the API returns.
    let yaml = kubectl_ok(
        cluster,
        &["get", "gear", "s1", "-n", ns, "-o", "yaml"],
        None,
    );
    let mut from_kubectl: Gear = serde_yaml_ng::from_str(&yaml).expect("the YAML decodes");
    let mut from_api = gears.get("s1").await.expect("get");
    from_kubectl.metadata.managed_fields = None;
    from_api.metadata.managed_fields = None;
    assert_eq!(from_kubectl, from_api);
    // And back: our serialization, given to kubectl replace, is accepted and changes nothing.
    let ours = serde_yaml_ng::to_string(&from_kubectl).expect("YAML");
    kubectl_ok(cluster, &["replace", "-f", "-"], Some(&ours));
    let after = gears.get("s1").await.expect("get");
    assert_eq!(after.spec, from_api.spec);
    assert_eq!(after.status, from_api.status);
    assert_eq!(after.metadata.generation, from_api.metadata.generation);

    // The scale subresource: kubectl scale writes spec.teeth.
    if cluster.serves_scale {
        kubectl_ok(
            cluster,
            &["scale", "gear", "s2", "-n", ns, "--replicas=9"],
            None,
        );
        let scaled = gears.get("s2").await.expect("get");
        assert_eq!(scaled.spec.teeth, 9);
    }
    assert_eq!(Gear::crd_name(), "gears.derive.ferrokube.dev");

    gizmo(cluster).await;
}

/// The many-shaped kind: its CRD is accepted, and an object using every field comes back whole.
async fn gizmo(cluster: &Cluster) {
    let client = &cluster.client;
    apply_and_wait(client, &Gizmo::crd(), Duration::from_secs(30))
        .await
        .expect("the many-shaped CRD is accepted as structural");
    let gizmos: Api<Gizmo> = Api::all(client.clone());
    let name = format!("gizmo-{}", cluster.namespace);
    let _ = gizmos.delete(&name, &Default::default()).await;
    let spec = GizmoSpec {
        part: Some(Part { id: 7 }),
        finish: Some(Finish::Gloss),
        shape: Shape::Square { side: 2.5 },
        labels: BTreeMap::from([("a".into(), "b".into())]),
        extra: BTreeMap::from([("free".into(), json!({"nested": [1, "two", {"three": 3}]}))]),
        anything: Some(json!(["any", 1])),
        tags: BTreeSet::from(["x".to_string(), "y".to_string()]),
        port: IntOrString::String("http".into()),
        ratio: 0.5,
        paused: true,
    };
    let created = gizmos
        .create(&PostParams::default(), &Gizmo::new(&name, spec.clone()))
        .await
        .expect("gizmo created");
    assert_eq!(created.spec, spec, "nothing pruned");
    let mut with_status = created.clone();
    let condition = Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "Fine".into(),
        message: "all good".into(),
        observed_generation: created.metadata.generation,
        last_transition_time: Time(
            k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).expect("time"),
        ),
    };
    with_status.status = Some(GizmoStatus {
        conditions: vec![condition],
    });
    let written = gizmos
        .replace_status(&name, &PostParams::default(), &with_status)
        .await
        .expect("status with a Condition");
    assert_eq!(written.status, with_status.status);
    // The defaults and a null: a spec without `paused` gets false, `part: null` is kept as none.
    let raw: Api<ferrokube::DynamicObject> = Api::dynamic(
        client.clone(),
        ferrokube::ApiResource {
            group: "derive.ferrokube.dev".into(),
            version: "v1".into(),
            kind: "Gizmo".into(),
            plural: "gizmos".into(),
            namespaced: false,
        },
        None,
    );
    let sparse: ferrokube::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "derive.ferrokube.dev/v1", "kind": "Gizmo",
        "metadata": {"name": format!("{name}-sparse")},
        "spec": {"part": null, "finish": null, "shape": {"kind": "Circle", "radius": 1.0}, "labels": {},
                 "extra": {}, "tags": [], "port": 80, "ratio": 1},
    }))
    .expect("json");
    raw.create(&PostParams::default(), &sparse)
        .await
        .expect("sparse gizmo created");
    let sparse = gizmos
        .get(&format!("{name}-sparse"))
        .await
        .expect("decodes");
    assert!(!sparse.spec.paused);
    assert_eq!(sparse.spec.part, None);
    assert_eq!(sparse.spec.finish, None);
    assert_eq!(sparse.spec.port, IntOrString::Int(80));
    for gone in [name.clone(), format!("{name}-sparse")] {
        gizmos
            .delete(&gone, &Default::default())
            .await
            .expect("deleted");
    }
}
