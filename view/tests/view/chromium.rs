//! The live view (`ferrokube_view`) in a real browser: headless Chromium driven through
//! chromedriver (WebDriver, with `fantoccini`).
//!
//! Chromium and chromedriver come from `$CHROMIUM` / `$CHROMEDRIVER`, or from `PATH`
//! and when neither has them the harness runs `scripts/chromium.sh` once (it installs Debian's
//! `chromium` and `chromium-driver`, as root or through sudo), so README's test command needs no
//! set-up on a fresh machine. Where that script cannot install them these tests fail with the
//! command to run: they are not skipped.
//!
//! The harness ([`Browser`]) starts chromedriver on a free loopback port, waits for its `/status`
//! to say ready, opens a session with headless Chromium on a temporary profile, and on drop kills
//! chromedriver and every Chromium process of that profile.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::future::Future;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fantoccini::{Client as WebDriver, ClientBuilder, Locator};
use ferrokube_apiserver::ApiServer;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::Config;
use ferrokube_client::api::PostParams;
use ferrokube_core::Scope;
use ferrokube_runtime::controller::Action;
use ferrokube_runtime::controller::Context;
use ferrokube_runtime::controller::Controller;
use ferrokube_runtime::controller::Reconciler;
use ferrokube_view::DEFAULT_EVENTS_LIMIT;
use ferrokube_view::Journal;
use ferrokube_view::LiveView;
use hyper_util::client::legacy::connect::HttpConnector;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tracing_subscriber::prelude::*;

/// How long chromedriver has to answer `/status` with `ready: true`.
const DRIVER_READY: Duration = Duration::from_secs(20);
/// How long chromedriver has to open a Chromium session.
const SESSION: Duration = Duration::from_secs(30);
/// How long one HTTP request of the test may take.
const REQUEST: Duration = Duration::from_secs(5);
/// How long one whole test may take.
const TEST: Duration = Duration::from_secs(60);
/// How often a condition is probed while waiting for it.
const POLL: Duration = Duration::from_millis(50);

// ---------------------------------------------------------------------------------------------
// The harness.

/// `$var` if set, else the first of `names` on `PATH`; `None` if there is none.
fn find_binary(var: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "${var} is {}, which does not exist: run scripts/chromium.sh (it installs chromium and \
             chromium-driver and prints their paths)",
            path.display()
        );
        return Some(path);
    }
    let search = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&search) {
        for name in names {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// Chromium and chromedriver: from `$CHROMIUM` / `$CHROMEDRIVER` or `PATH`, else installed once per
/// test binary by the project's own script (`scripts/chromium.sh`, Debian's packages, as root or
/// through sudo), which prints their paths. Where the script cannot install them (not root, no
/// apt), the test fails with the exact command to run: it never skips itself.
fn browser_binaries() -> (PathBuf, PathBuf) {
    static FOUND: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            let chromium = find_binary("CHROMIUM", &["chromium", "chromium-browser"]);
            let chromedriver = find_binary("CHROMEDRIVER", &["chromedriver"]);
            if let (Some(chromium), Some(chromedriver)) = (chromium, chromedriver) {
                return (chromium, chromedriver);
            }
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/chromium.sh");
            eprintln!(
                "chromium / chromedriver not found: installing them with {}",
                script.display()
            );
            let output = Command::new("bash")
                .arg(&script)
                .arg("install")
                .stdin(Stdio::null())
                .stderr(Stdio::inherit())
                .output();
            let printed = match output {
                Ok(output) if output.status.success() => {
                    String::from_utf8_lossy(&output.stdout).into_owned()
                }
                Ok(output) => panic!(
                    "chromium / chromedriver not found and {} failed ({}): run `sudo {}` (it \
                     installs Debian's chromium and chromium-driver), or set $CHROMIUM and \
                     $CHROMEDRIVER; this browser test does not skip itself",
                    script.display(),
                    output.status,
                    script.display()
                ),
                Err(error) => panic!(
                    "chromium / chromedriver not found and {} could not be run ({error}): run \
                     `sudo bash {}`, or set $CHROMIUM and $CHROMEDRIVER",
                    script.display(),
                    script.display()
                ),
            };
            let path_of = |var: &str| {
                printed
                    .lines()
                    .find_map(|line| line.strip_prefix(&format!("{var}=")))
                    .map(PathBuf::from)
                    .filter(|path| path.is_file())
                    .unwrap_or_else(|| {
                        panic!(
                            "{} printed no usable {var}= line: {printed:?}",
                            script.display()
                        )
                    })
            };
            (path_of("CHROMIUM"), path_of("CHROMEDRIVER"))
        })
        .clone()
}

/// A fresh directory for one browser (profile and chromedriver log); removed on drop.
fn scratch_dir() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ferrokube-chromium-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("profile")).expect("scratch directory");
    dir
}

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// `GET path` on `addr` (at most [`REQUEST`]): status code and body.
async fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    request(addr, http::Method::GET, path).await
}

/// One HTTP/1.1 request without a body, at most [`REQUEST`]: status code and body.
async fn request(
    addr: SocketAddr,
    method: http::Method,
    path: &str,
) -> Result<(u16, String), String> {
    use http_body_util::BodyExt;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(HttpConnector::new());
    let request = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .map_err(|e| e.to_string())?;
    let exchange = async {
        let response = client.request(request).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    };
    tokio::time::timeout(REQUEST, exchange)
        .await
        .map_err(|_| format!("no answer within {REQUEST:?}"))?
}

/// Waits for `probe` to return `Ok`, probing every [`POLL`], for at most `limit`; then fails the
/// test with `what` and the last `Err` (what the probe saw instead).
async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + limit;
    loop {
        let last = match probe().await {
            Ok(found) => return found,
            Err(last) => last,
        };
        if Instant::now() >= deadline {
            panic!("timed out after {limit:?} waiting for {what}; last seen: {last}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Pids of the processes whose command line has `arg` (Chromium's processes of one profile).
fn pids_with_arg(arg: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            cmdline
                .split(|&b| b == 0)
                .any(|a| a == arg.as_bytes())
                .then_some(pid)
        })
        .collect()
}

/// SIGKILL to `targets` (pids, or `-pgid` for a process group); those already gone are ignored.
fn kill_all(targets: &[String]) {
    if targets.is_empty() {
        return;
    }
    let _ = Command::new("kill")
        .arg("-KILL")
        .arg("--")
        .args(targets)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// A running chromedriver and its scratch directory. Dropping it kills chromedriver, its process
/// group and every Chromium process of its profile, then removes the directory.
struct DriverProcess {
    child: Child,
    dir: PathBuf,
    /// `--user-data-dir=...`: on the command line of every Chromium process of this browser.
    profile_arg: String,
}

impl DriverProcess {
    /// The Chromium processes still alive for this profile.
    fn chromium_pids(&self) -> Vec<u32> {
        pids_with_arg(&self.profile_arg)
    }
}

impl Drop for DriverProcess {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut targets = vec![group];
        targets.extend(self.chromium_pids().iter().map(u32::to_string));
        kill_all(&targets);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// chromedriver and a headless Chromium session on it. Dropping it kills both (a test that ends
/// normally calls [`Browser::close`] first, which ends the session as WebDriver says).
struct Browser {
    driver: WebDriver,
    process: DriverProcess,
}

impl Browser {
    async fn start() -> Browser {
        let (chromium, chromedriver) = browser_binaries();
        // A port found free can be taken before chromedriver binds it: then chromedriver exits,
        // and another port (and directory) is tried.
        let mut attempt = 0;
        let (process, addr) = loop {
            attempt += 1;
            let dir = scratch_dir();
            let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let mut process = DriverProcess {
                child: spawn_chromedriver(&chromedriver, addr.port(), &dir),
                profile_arg: format!("--user-data-dir={}", dir.join("profile").display()),
                dir,
            };
            match driver_ready(&mut process.child, addr, &process.dir).await {
                Ok(()) => break (process, addr),
                Err(why) if attempt < 3 => {
                    eprintln!("chromedriver on {addr}: {why}; trying another port");
                    drop(process);
                }
                Err(why) => panic!("chromedriver did not start: {why}"),
            }
        };
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium.to_string_lossy(),
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--window-size=1400,1000",
                    "--no-first-run",
                    process.profile_arg,
                ],
            },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("a JSON object")
        };
        let mut builder = ClientBuilder::new(HttpConnector::new());
        builder.capabilities(capabilities);
        let url = format!("http://{addr}");
        let session = builder.connect(&url);
        let driver = match tokio::time::timeout(SESSION, session).await {
            Ok(Ok(driver)) => driver,
            Ok(Err(e)) => panic!(
                "no Chromium session from chromedriver ({e}); its log:\n{}",
                log_tail(&process.dir)
            ),
            Err(_) => panic!(
                "no Chromium session from chromedriver within {SESSION:?}; its log:\n{}",
                log_tail(&process.dir)
            ),
        };
        Browser { driver, process }
    }

    /// Ends the session (chromedriver closes Chromium), then drops the rest.
    async fn close(self) {
        let Browser { driver, process } = self;
        driver.close().await.expect("the session ends");
        drop(process);
    }
}

fn spawn_chromedriver(path: &Path, port: u16, dir: &Path) -> Child {
    use std::os::unix::process::CommandExt;
    let stderr = std::fs::File::create(dir.join("chromedriver.stderr")).expect("a file in scratch");
    let mut log_arg = OsString::from("--log-path=");
    log_arg.push(dir.join("chromedriver.log"));
    Command::new(path)
        .arg(format!("--port={port}"))
        .arg(log_arg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        // Its own process group, which Chromium joins: one kill reaches every process.
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} ({e}): run scripts/chromium.sh",
                path.display()
            )
        })
}

/// Waits for chromedriver's `/status` to say ready; an error if it exits or takes too long.
async fn driver_ready(child: &mut Child, addr: SocketAddr, dir: &Path) -> Result<(), String> {
    let deadline = Instant::now() + DRIVER_READY;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Err(format!("exited with {status}: {}", log_tail(dir)));
        }
        let last = match http_get(addr, "/status").await {
            Ok((200, body)) => {
                let ready = serde_json::from_str::<Value>(&body)
                    .ok()
                    .and_then(|v| v.pointer("/value/ready").and_then(Value::as_bool));
                if ready == Some(true) {
                    return Ok(());
                }
                format!("not ready: {body}")
            }
            Ok((status, body)) => format!("{status}: {body}"),
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(format!("/status not ready after {DRIVER_READY:?}: {last}"));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The end of chromedriver's log and what it wrote to stderr.
fn log_tail(dir: &Path) -> String {
    let mut tail = String::new();
    for name in ["chromedriver.log", "chromedriver.stderr"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        tail.push_str(&format!("--- {name}\n"));
        tail.push_str(&lines[lines.len().saturating_sub(30)..].join("\n"));
        tail.push('\n');
    }
    tail
}

/// Runs a whole test, failing it if it takes longer than `limit` (what it holds is dropped:
/// chromedriver and Chromium are killed).
async fn within(limit: Duration, test: impl Future<Output = ()>) {
    if tokio::time::timeout(limit, test).await.is_err() {
        panic!("the test did not finish within {limit:?}");
    }
}

/// `document.querySelectorAll(css).length` in the page.
async fn count(driver: &WebDriver, css: &str) -> Result<u64, String> {
    driver
        .execute(
            "return document.querySelectorAll(arguments[0]).length;",
            vec![json!(css)],
        )
        .await
        .map_err(|e| e.to_string())?
        .as_u64()
        .ok_or_else(|| "not a number".to_string())
}

// ---------------------------------------------------------------------------------------------
// The harness on its own, with a page of its own.

const HARNESS_PAGE: &str = r#"<!doctype html>
<title>harness</title>
<button id="add">add</button>
<ul id="log"></ul>
<script>
  let n = 0;
  document.getElementById("add").addEventListener("click", () => {
    const li = document.createElement("li");
    li.dataset.seq = String(++n);
    li.textContent = "event " + n;
    document.getElementById("log").prepend(li);
  });
</script>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harness_drives_headless_chromium_and_kills_it_on_drop() {
    // Installing the browser (first test of the binary on a fresh machine) is not the test's time.
    tokio::task::spawn_blocking(browser_binaries)
        .await
        .expect("finding or installing chromium");
    within(TEST, harness_test()).await;
}

async fn harness_test() {
    use base64::Engine;
    let browser = Browser::start().await;
    let page = base64::engine::general_purpose::STANDARD.encode(HARNESS_PAGE);
    browser
        .driver
        .goto(&format!("data:text/html;base64,{page}"))
        .await
        .expect("the page loads");
    assert_eq!(browser.driver.title().await.unwrap(), "harness");
    let agent = browser
        .driver
        .execute("return navigator.userAgent;", vec![])
        .await
        .unwrap();
    assert!(
        agent.as_str().is_some_and(|a| a.contains("HeadlessChrome")),
        "not headless Chromium: {agent}"
    );

    let add = browser.driver.find(Locator::Id("add")).await.unwrap();
    add.click().await.unwrap();
    add.click().await.unwrap();
    eventually("two log entries", Duration::from_secs(5), || async {
        match count(&browser.driver, "#log li").await? {
            2 => Ok(()),
            n => Err(format!("{n} entries")),
        }
    })
    .await;
    let newest = browser
        .driver
        .find(Locator::Css("#log li:first-child"))
        .await
        .unwrap();
    assert_eq!(newest.attr("data-seq").await.unwrap().as_deref(), Some("2"));
    let png = browser.driver.screenshot().await.expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");

    // Chromium runs on this browser's own profile, and dropping the browser (no WebDriver
    // goodbye, as when a test panics) leaves none of its processes behind.
    let profile_arg = browser.process.profile_arg.clone();
    let dir = browser.process.dir.clone();
    assert!(
        !pids_with_arg(&profile_arg).is_empty(),
        "no Chromium process with {profile_arg}"
    );
    drop(browser);
    eventually(
        "Chromium's processes to end",
        Duration::from_secs(10),
        || async {
            match pids_with_arg(&profile_arg) {
                pids if pids.is_empty() => Ok(()),
                pids => Err(format!("still running: {pids:?}")),
            }
        },
    )
    .await;
    assert!(!dir.exists(), "{} not removed", dir.display());
}

// ---------------------------------------------------------------------------------------------
// The live view, with a controller on the embedded API server.

/// The stages of `#pipeline`, in the order a change goes through them.
const STAGES: [&str; 8] = [
    "reflector",
    "watch",
    "fifo",
    "store",
    "handler",
    "queue",
    "reconcile",
    "client",
];

/// What the test reads off the page in one go (see [`PROBE`]).
#[derive(Debug, serde::Deserialize)]
struct Page {
    stages: Vec<StageBox>,
    /// Per stage, the lowest `data-seq` of the `#log` entries with `data-key` = the key.
    first: BTreeMap<String, u64>,
    /// `data-seq` of the `#requests` entries for the key (by key, or made by its reconcile) that
    /// `#log` also lists as client events.
    requests: Vec<u64>,
    paused: String,
    pending: u64,
    applied: u64,
    step_enabled: bool,
}

#[derive(Debug, serde::Deserialize)]
struct StageBox {
    stage: String,
    doc: bool,
    state: Option<String>,
    count: Option<u64>,
    items: bool,
}

/// Reads [`Page`]; `arguments[0]` is the key followed.
const PROBE: &str = r##"
const key = arguments[0];
const text = (node) => (node ? node.textContent : null);
const number = (node) => (node && node.textContent.trim() !== "" ? Number(node.textContent) : null);
const stages = [...document.querySelectorAll("#pipeline .stage[data-stage]")].map((box) => ({
  stage: box.dataset.stage,
  doc: box.querySelector("a.doc") !== null,
  state: text(box.querySelector(".stage-state")),
  count: number(box.querySelector(".stage-count")),
  items: box.querySelector(".items") !== null,
}));
const first = {};
for (const li of document.querySelectorAll("#log li.event[data-seq][data-stage]")) {
  if (li.dataset.key !== key) continue;
  const seq = Number(li.dataset.seq);
  if (!(li.dataset.stage in first) || seq < first[li.dataset.stage]) first[li.dataset.stage] = seq;
}
const requests = [...document.querySelectorAll("#requests li[data-seq]")]
  .filter((li) => li.dataset.key === key)
  .map((li) => Number(li.dataset.seq))
  .filter((seq) => document.querySelector(`#log li.event[data-seq="${seq}"][data-stage="client"]`));
return {
  stages,
  first,
  requests,
  paused: document.body.dataset.paused ?? "",
  pending: number(document.getElementById("pending")) ?? 0,
  applied: number(document.getElementById("applied-seq")) ?? 0,
  step_enabled: !(document.getElementById("step")?.disabled ?? true),
};
"##;

async fn probe(driver: &WebDriver, key: &str) -> Result<Page, String> {
    let value = driver
        .execute(PROBE, vec![json!(key)])
        .await
        .map_err(|e| e.to_string())?;
    serde_json::from_value(value.clone()).map_err(|e| format!("{e}: {value}"))
}

async fn click(driver: &WebDriver, css: &str) {
    driver
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("clicking {css}: {e}"));
}

/// `textContent` of every element matching `css`.
async fn texts(driver: &WebDriver, css: &str) -> Result<Vec<String>, String> {
    let value = driver
        .execute(
            "return [...document.querySelectorAll(arguments[0])].map((n) => n.textContent);",
            vec![json!(css)],
        )
        .await
        .map_err(|e| e.to_string())?;
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// Reads the ConfigMap back, so that each reconcile makes one request (a client event caused by
/// the key's reconcile).
struct ReadBack(Api<ConfigMap>);

impl Reconciler<ConfigMap> for ReadBack {
    type Error = String;

    async fn reconcile(&self, cm: Arc<ConfigMap>, _ctx: Context) -> Result<Action, String> {
        let name = cm.metadata.name.as_deref().unwrap_or_default();
        self.0.get(name).await.map_err(|e| e.to_string())?;
        Ok(Action::await_change())
    }
}

/// Waits for the journal to hold a record of `stage`/`op` for `key` after `after`; its seq.
async fn journal_record(journal: &Journal, stage: &str, op: &str, key: &str, after: u64) -> u64 {
    eventually(
        &format!("{stage}.{op} of {key} after #{after} in the journal"),
        Duration::from_secs(15),
        || async {
            journal
                .events_after(after, DEFAULT_EVENTS_LIMIT)
                .records
                .iter()
                .find(|r| r.stage == stage && r.op == op && r.key.as_deref() == Some(key))
                .map(|r| r.seq)
                .ok_or_else(|| format!("last seq {}", journal.last_seq()))
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_view_shows_a_change_through_every_stage_steps_and_relists() {
    // Installing the browser (first test of the binary on a fresh machine) is not the test's time.
    tokio::task::spawn_blocking(browser_binaries)
        .await
        .expect("finding or installing chromium");
    within(TEST, view_test()).await;
}

async fn view_test() {
    let server = Arc::new(
        ApiServer::new()
            // No bookmarks while the test runs: nothing happens that the test did not cause.
            .bookmark_interval(Duration::from_secs(3600))
            .start()
            .await
            .expect("the embedded API server starts"),
    );
    // The fault: a write the informer does not watch (a Secret) moves the revision past the
    // informer's, the history is compacted, and the open watches end: the informer's watch from
    // its resourceVersion gets 410 and it must relist.
    let faulty = server.clone();
    let faults = AtomicUsize::new(0);
    let view = LiveView::new().action("compact", "Compact history, drop watches", move || {
        let secrets = faulty
            .api()
            .registry
            .find("", "v1", "secrets")
            .expect("secrets are served");
        let name = format!("view-fault-{}", faults.fetch_add(1, Ordering::Relaxed));
        let written = faulty
            .api()
            .create(
                &secrets,
                Some("default"),
                json!({"metadata": {"name": name}}),
                &Default::default(),
            )
            .map_or_else(|e| format!("write failed: {e:?}; "), |_| String::new());
        let rv = faulty.compact();
        let closed = faulty.close_watches();
        format!("{written}history compacted at {rv}, {closed} watches dropped")
    });
    let journal = view.journal().clone();
    tracing_subscriber::registry()
        .with(view.layer())
        .try_init()
        .expect("the only tracing subscriber of this test binary");
    let live = view.serve().await.expect("the live view serves");

    let mut config = Config::new(server.url().parse().expect("server url"));
    config.qps = None;
    let client = Client::new(config).expect("client");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let (stop, stopped) = oneshot::channel::<()>();
    let controller = tokio::spawn(
        Controller::<ConfigMap>::new(client.clone(), Scope::namespace("default"))
            .name("view-test")
            .run(ReadBack(config_maps.clone()), async {
                let _ = stopped.await;
            }),
    );

    let browser = Browser::start().await;
    let driver = &browser.driver;
    driver
        .goto(&format!("http://{}/", live.addr()))
        .await
        .expect("the view's page loads");

    // Eight stages, each with its doc link, state, count and items.
    let key = "default/view-demo";
    let page = eventually(
        "eight stages in #pipeline",
        Duration::from_secs(10),
        || async {
            let page = probe(driver, key).await?;
            match page.stages.len() {
                8 => Ok(page),
                n => Err(format!("{n} stages: {:?}", page.stages)),
            }
        },
    )
    .await;
    let names: Vec<&str> = page.stages.iter().map(|s| s.stage.as_str()).collect();
    assert_eq!(names, STAGES, "the stages of #pipeline, in order");
    for stage in &page.stages {
        assert!(
            stage.doc && stage.items && stage.state.is_some() && stage.count.is_some(),
            "stage {} lacks a.doc, .stage-state, .stage-count or .items: {stage:?}",
            stage.stage
        );
    }

    // A change made once the informer watches goes through the watch, not through a list.
    eventually(
        "the reflector watching",
        Duration::from_secs(15),
        || async {
            let state = texts(driver, r#".stage[data-stage="reflector"] .stage-state"#).await?;
            if state.iter().any(|s| s.contains("watching")) {
                Ok(())
            } else {
                Err(format!("{state:?}"))
            }
        },
    )
    .await;

    // The scripted change: one ConfigMap, followed through every stage.
    let created = config_maps
        .create(&PostParams::default(), &config_map("view-demo", "1"))
        .await
        .expect("the ConfigMap is created");
    let page = eventually(
        "the ConfigMap's key in every stage of #log",
        Duration::from_secs(15),
        || async {
            let page = probe(driver, key).await?;
            let missing: Vec<&str> = STAGES[1..7]
                .iter()
                .copied()
                .filter(|s| !page.first.contains_key(*s))
                .chain(page.requests.is_empty().then_some("client"))
                .collect();
            if missing.is_empty() {
                Ok(page)
            } else {
                Err(format!("missing {missing:?}; seen {:?}", page.first))
            }
        },
    )
    .await;
    let mut order: Vec<(&str, u64)> = STAGES[1..7].iter().map(|s| (*s, page.first[*s])).collect();
    order.push(("client", *page.requests.iter().min().expect("a request")));
    assert!(
        order.windows(2).all(|w| w[0].1 < w[1].1),
        "the key's first event per stage is not in pipeline order: {order:?}"
    );
    for stage in &page.stages {
        assert!(
            stage.count.unwrap_or(0) > 0,
            "stage {} counted no event: {stage:?}",
            stage.stage
        );
    }
    // The reconcile's round ends with the queue's done: from then on nothing happens until the
    // test changes something.
    let first_round = journal_record(&journal, "queue", "done", key, 0).await;

    // Paused, the next change waits in the page's buffer; step applies exactly one event.
    click(driver, "#pause").await;
    eventually("body[data-paused=true]", Duration::from_secs(5), || async {
        let page = probe(driver, key).await?;
        (page.paused == "true").then_some(()).ok_or(page.paused)
    })
    .await;
    let before_change = journal.last_seq().max(first_round);
    let changed = ConfigMap {
        data: config_map("view-demo", "2").data,
        ..created
    };
    config_maps
        .replace("view-demo", &PostParams::default(), &changed)
        .await
        .expect("the ConfigMap is updated");
    journal_record(&journal, "queue", "done", key, before_change).await;
    let last = journal.last_seq();
    let before = eventually(
        "the page to buffer every event up to the last",
        Duration::from_secs(10),
        || async {
            let page = probe(driver, key).await?;
            if page.pending > 0 && page.applied + page.pending == last && page.step_enabled {
                Ok(page)
            } else {
                Err(format!(
                    "applied {} pending {} step enabled {}; journal at {last}",
                    page.applied, page.pending, page.step_enabled
                ))
            }
        },
    )
    .await;
    let next = journal.events_after(before.applied, 1).records[0].seq;
    click(driver, "#step").await;
    let after = eventually("#applied-seq to move", Duration::from_secs(5), || async {
        let page = probe(driver, key).await?;
        if page.applied != before.applied {
            Ok(page)
        } else {
            Err(format!("still {}", page.applied))
        }
    })
    .await;
    assert_eq!(
        (after.applied, after.pending),
        (next, before.pending - 1),
        "one step: #applied-seq to the next seq, #pending one less (journal at {}, was {last})",
        journal.last_seq()
    );
    assert_eq!(after.paused, "true");

    // Resumed, the page catches up.
    click(driver, "#pause").await;
    eventually(
        "the page to apply the rest",
        Duration::from_secs(10),
        || async {
            let page = probe(driver, key).await?;
            if page.paused == "false" && page.pending == 0 && page.applied >= last {
                Ok(())
            } else {
                Err(format!("{page:?}"))
            }
        },
    )
    .await;

    // The fault button: history compacted and watches dropped, the informer must relist.
    let before_fault = journal.last_seq();
    click(driver, r#"#actions button[data-action="compact"]"#).await;
    eventually("the action's result", Duration::from_secs(10), || async {
        let result = texts(driver, "#action-result").await?;
        if result.iter().any(|r| r.contains("compacted")) {
            Ok(())
        } else {
            Err(format!("{result:?}"))
        }
    })
    .await;
    eventually(
        "a reflector list_start or relist in #log after the click",
        Duration::from_secs(15),
        || async {
            let value = driver
                .execute(
                    r#"return [...document.querySelectorAll('#log li.event[data-stage="reflector"]')]
                         .filter((li) => Number(li.dataset.seq) > arguments[0])
                         .map((li) => li.textContent);"#,
                    vec![json!(before_fault)],
                )
                .await
                .map_err(|e| e.to_string())?;
            let entries: Vec<String> = serde_json::from_value(value).map_err(|e| e.to_string())?;
            if entries
                .iter()
                .any(|e| e.contains("reflector.list_start") || e.contains("reflector.relist"))
            {
                Ok(())
            } else {
                Err(format!("{entries:?}"))
            }
        },
    )
    .await;

    // Clicking the key follows it: its story, from /api/follow.
    click(
        driver,
        &format!(r#"#log li.event[data-key="{key}"][data-stage="reconcile"]"#),
    )
    .await;
    eventually(
        "#follow to show the key's story",
        Duration::from_secs(10),
        || async {
            let followed = driver
                .find(Locator::Id("follow"))
                .await
                .map_err(|e| e.to_string())?
                .attr("data-key")
                .await
                .map_err(|e| e.to_string())?;
            let events = count(driver, "#follow-events li[data-seq][data-stage]").await?;
            if followed.as_deref() == Some(key) && events > 0 {
                Ok(())
            } else {
                Err(format!("data-key {followed:?}, {events} events"))
            }
        },
    )
    .await;

    if std::env::var_os("FERROKUBE_SCREENSHOT").is_some() {
        let png = driver.screenshot().await.expect("a screenshot");
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
        std::fs::create_dir_all(&docs).expect("docs/");
        std::fs::write(docs.join("view.png"), png).expect("docs/view.png written");
    }

    browser.close().await;
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(10), controller)
        .await
        .expect("the controller stops")
        .expect("the controller task")
        .expect("the controller ran");
    live.stop().await;
}

fn config_map(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("value".to_string(), value.to_string())])),
        ..ConfigMap::default()
    }
}
