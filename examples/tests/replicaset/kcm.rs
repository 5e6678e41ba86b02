//! The upstream kube-controller-manager as a child process of a test, started with the flags its
//! version accepts, and its Prometheus metrics.
//!
//! `FERROKUBE_KCM` (from `scripts/kube-apiserver.sh env`) names the binary, which is of the same
//! release as the server. What differs between the releases the tests run on:
//!
//! - **`--port`**: the insecure HTTP port. 1.20 still has it (and serves on 10252 unless told
//!   `--port=0`); it was deprecated and then removed in 1.24, and 1.37 refuses to start when given
//!   it ("unknown flag: --port"). So it is passed only to releases before 1.24.
//! - **the secure port**: both serve `/healthz` and `/metrics` over HTTPS with a self-signed
//!   certificate (written to `--cert-dir`). Without `--authentication-kubeconfig` and
//!   `--authorization-kubeconfig` every request is anonymous and forbidden, except on the paths of
//!   `--authorization-always-allow-paths`: `/healthz` (to wait for it to be up, instead of sleeping)
//!   and `/metrics` (to read its counters).
//! - **`replicaset_controller_stale_sync_skips_total{group,resource}`**: 1.36 added a staleness
//!   mitigation to the ReplicaSet controller (feature gate `StaleControllerConsistencyReplicaSet`,
//!   beta and on by default since 1.36): before a sync it checks that its informers have caught up
//!   with the resourceVersions of its own last writes for that ReplicaSet, and when they have not it
//!   skips the sync (requeued) and counts one here, labelled with the lagging resource. Like every
//!   labelled counter it is absent from `/metrics` until its first increment, so "absent" means "no
//!   skip yet" on 1.36+ and "no such metric" before.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The counter of the ReplicaSet controller's skipped syncs (1.36+), as `/metrics` names it.
pub const STALE_SKIPS_METRIC: &str = "replicaset_controller_stale_sync_skips_total";

/// A release, as `kube-controller-manager --version` prints it (`Kubernetes v1.37.2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl Version {
    /// Parses the first `vX.Y.Z` in `text` (a suffix such as `-alpha.1` or `+abc` is ignored).
    pub fn parse(text: &str) -> Option<Version> {
        let at = text.find('v')?;
        let rest = &text[at + 1..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let mut parts = rest[..end].split('.').map(str::parse::<u32>);
        Some(Version {
            major: parts.next()?.ok()?,
            minor: parts.next()?.ok()?,
            patch: parts.next().and_then(Result::ok).unwrap_or(0),
        })
    }

    /// Whether kube-controller-manager of this release still has the insecure `--port` flag.
    pub fn has_insecure_port_flag(self) -> bool {
        (self.major, self.minor) < (1, 24)
    }

    /// Whether its ReplicaSet controller skips syncs on a stale cache by default (and counts them).
    pub fn has_stale_sync_skips(self) -> bool {
        (self.major, self.minor) >= (1, 36)
    }
}

/// The binary `FERROKUBE_KCM` names.
pub fn binary() -> String {
    std::env::var("FERROKUBE_KCM").expect(
        "FERROKUBE_KCM names the kube-controller-manager binary (scripts/kube-apiserver.sh env)",
    )
}

/// The release of the binary, from `--version`.
pub fn version() -> Version {
    let out = std::process::Command::new(binary())
        .arg("--version")
        .output()
        .expect("kube-controller-manager --version runs");
    let text = String::from_utf8_lossy(&out.stdout);
    Version::parse(&text).unwrap_or_else(|| panic!("no version in {text:?}"))
}

/// A running kube-controller-manager (killed when dropped).
pub struct Kcm {
    child: tokio::process::Child,
    pub version: Version,
    port: u16,
    pub log: PathBuf,
}

impl Kcm {
    /// Starts it against `$KUBECONFIG` running only `controllers`, with the given client limits, and
    /// waits (up to 60 s) until its `/healthz` answers ok.
    pub async fn start(controllers: &str, qps: u32, burst: u32) -> Kcm {
        let version = version();
        let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG");
        // A free port: bind to port 0, note what the system chose, release it for the child.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir = std::env::temp_dir().join(format!("ferrokube-kcm-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("cert dir");
        let log = dir.join("kube-controller-manager.log");
        let mut args = vec![
            "--kubeconfig".to_string(),
            kubeconfig,
            format!("--controllers={controllers}"),
            "--leader-elect=false".to_string(),
            "--bind-address=127.0.0.1".to_string(),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", dir.display()),
            "--authorization-always-allow-paths=/healthz,/metrics".to_string(),
            format!("--kube-api-qps={qps}"),
            format!("--kube-api-burst={burst}"),
        ];
        if version.has_insecure_port_flag() {
            args.push("--port=0".to_string());
        }
        let child = tokio::process::Command::new(binary())
            .args(&args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .kill_on_drop(true)
            .spawn()
            .expect("kube-controller-manager starts");
        let mut kcm = Kcm {
            child,
            version,
            port,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if kcm.get("/healthz").is_some_and(|body| body.trim() == "ok") {
                return kcm;
            }
            if let Ok(Some(status)) = kcm.child.try_wait() {
                panic!(
                    "kube-controller-manager {version} exited ({status}) with {args:?}:\n{}",
                    tail(&kcm.log)
                );
            }
            assert!(
                Instant::now() < deadline,
                "kube-controller-manager {version} not healthy within 60 s:\n{}",
                tail(&kcm.log)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// GET of a path on its secure port (self-signed: not verified), the body on 200.
    fn get(&self, path: &str) -> Option<String> {
        let out = std::process::Command::new("curl")
            .args(["-sk", "--max-time", "5", "--fail"])
            .arg(format!("https://127.0.0.1:{}{path}", self.port))
            .output()
            .expect("curl runs");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Its `/metrics` in Prometheus' text format.
    pub fn metrics(&self) -> String {
        self.get("/metrics").unwrap_or_else(|| {
            panic!(
                "GET /metrics of kube-controller-manager {} failed",
                self.version
            )
        })
    }

    /// The sum of [`STALE_SKIPS_METRIC`] over its label sets; `None` when absent.
    pub fn stale_skips(&self) -> Option<u64> {
        sum_of(&self.metrics(), STALE_SKIPS_METRIC)
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// The sum of the samples of `name` (`name{…} value` or `name value` lines) in Prometheus' text
/// format; `None` when there is none.
pub fn sum_of(metrics: &str, name: &str) -> Option<u64> {
    let mut total = None;
    for line in metrics.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue; // another metric whose name starts with this one
        }
        let value = rest.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
        if let Some(value) = value {
            *total.get_or_insert(0) += value as u64;
        }
    }
    total
}

/// The last lines of a log, for a failure message.
fn tail(log: &PathBuf) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[test]
fn versions_and_metric_samples_parse() {
    let v = Version::parse("Kubernetes v1.37.2").expect("parses");
    assert_eq!((v.major, v.minor, v.patch), (1, 37, 2));
    assert!(!v.has_insecure_port_flag() && v.has_stale_sync_skips());
    let old = Version::parse("Kubernetes v1.20.2").expect("parses");
    assert!(old.has_insecure_port_flag() && !old.has_stale_sync_skips());
    let text = "# HELP x_total help\n# TYPE x_total counter\n\
                x_total{group=\"\",resource=\"pods\"} 3\nx_total{group=\"apps\",resource=\"replicasets\"} 2\n\
                x_total_other 9\n";
    assert_eq!(sum_of(text, "x_total"), Some(5));
    assert_eq!(sum_of(text, "y_total"), None);
}
