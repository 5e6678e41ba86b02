//! Hostile and careless callers of the embedded server, over a real socket (issue 26): JSON patches
//! that grow the object, bodies over the limit, apply bodies that expand or nest too deep (refused
//! fast), the fault switches without the token or with absurd values, requests from web pages (DNS
//! rebinding, cross-site POSTs), and the token in files and `Debug` output.
//!
//! The client is a few lines of blocking HTTP/1.1 over `std::net::TcpStream` (one request per
//! connection), so that every header, `Host` included, is exactly what the test wrote.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use ferrokube_apiserver::http::MAX_BODY as MAX_BODY_BYTES;
use ferrokube_apiserver::patch::{MAX_JSON_PATCH_COPY_BYTES, MAX_JSON_PATCH_OPERATIONS};
use ferrokube_apiserver::{ApiServer, ResourceType, RunningServer};
use serde_json::{Value, json};

/// One answer.
#[derive(Debug)]
struct Answer {
    status: u16,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    fn message(&self) -> String {
        self.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// A request to send: method, path, extra headers, body.
struct Ask<'a> {
    method: &'a str,
    path: &'a str,
    headers: Vec<(&'a str, String)>,
    body: Vec<u8>,
}

impl<'a> Ask<'a> {
    fn new(method: &'a str, path: &'a str) -> Ask<'a> {
        Ask {
            method,
            path,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    fn header(mut self, name: &'a str, value: impl Into<String>) -> Ask<'a> {
        self.headers.push((name, value.into()));
        self
    }

    fn json(self, content_type: &'a str, body: &Value) -> Ask<'a> {
        self.bytes(content_type, body.to_string().into_bytes())
    }

    fn bytes(mut self, content_type: &'a str, body: Vec<u8>) -> Ask<'a> {
        self.headers
            .push(("Content-Type", content_type.to_string()));
        self.body = body;
        self
    }

    /// Sends it to `server` (with `Host: 127.0.0.1:<port>` unless a `Host` was given).
    async fn to(self, server: &RunningServer) -> Answer {
        let address = server.url().trim_start_matches("http://").to_string();
        let mut head = format!("{} {} HTTP/1.1\r\n", self.method, self.path);
        if !self
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("host"))
        {
            head.push_str(&format!("Host: {address}\r\n"));
        }
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            self.body.len()
        ));
        let mut raw = head.into_bytes();
        raw.extend_from_slice(&self.body);
        tokio::task::spawn_blocking(move || exchange(&address, &raw))
            .await
            .expect("the client thread")
    }
}

/// Writes `raw`, reads the answer to the end (the request said `Connection: close`).
fn exchange(address: &str, raw: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(address).expect("connect");
    // A bound on a broken test, not a synchronisation: every answer here comes at once.
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    stream.write_all(raw).expect("send the request");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("read the answer");
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Answer { status, body }
}

/// The payload of a chunked body.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

const CONFIG_MAPS: &str = "/api/v1/namespaces/default/configmaps";

async fn create_config_map(server: &RunningServer, name: &str, data: Value) {
    let created = Ask::new("POST", CONFIG_MAPS)
        .json(
            "application/json",
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}),
        )
        .to(server)
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abuse_json_patches_that_grow_the_object_are_refused() {
    let server = ApiServer::new().start().await.expect("server");
    create_config_map(&server, "grow", json!({"blob": "x".repeat(1000)})).await;
    let url = format!("{CONFIG_MAPS}/grow");
    let patch = |operations: Vec<Value>| {
        Ask::new("PATCH", &url).json("application/json-patch+json", &Value::Array(operations))
    };
    // Copies of /data into itself double it: 40 would be 2^40 KB. Refused at the 12th, past 3 MiB
    // copied; 13 (8 MB if applied) keep the test from exhausting memory without the limit.
    let doubling: Vec<Value> = (0..13)
        .map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/c{i}")}))
        .collect();
    let answer = patch(doubling).to(&server).await;
    assert_eq!(answer.status, 422, "{}", answer.body);
    assert_eq!(answer.json()["reason"], "Invalid");
    assert!(
        answer
            .message()
            .contains("Unable to complete the copy, the accumulated size increase of copy is")
            && answer.message().ends_with("exceeding the limit 3145728"),
        "{}",
        answer.message()
    );
    // Operations past 10,000: 413, as kube-apiserver.
    let tests = vec![
        json!({"op": "test", "path": "/data/blob", "value": "x"});
        MAX_JSON_PATCH_OPERATIONS + 1
    ];
    let answer = patch(tests).to(&server).await;
    assert_eq!(answer.status, 413, "{}", answer.body);
    assert_eq!(
        answer.message(),
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
    );
    // Copies just under the limit in all are applied (and the store is not wedged).
    let quarter = MAX_JSON_PATCH_COPY_BYTES / 4;
    let replace =
        vec![json!({"op": "replace", "path": "/data/blob", "value": "y".repeat(quarter)})];
    assert_eq!(patch(replace).to(&server).await.status, 200);
    let copies: Vec<Value> = (0..3)
        .map(|i| json!({"op": "copy", "from": "/data/blob", "path": format!("/data/k{i}")}))
        .collect();
    let answer = patch(copies).to(&server).await;
    assert_eq!(answer.status, 200, "{}", answer.message());
    let read = Ask::new("GET", &url).to(&server).await;
    assert_eq!(
        read.json()["data"]["k2"].as_str().map(str::len),
        Some(quarter)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abuse_bodies_over_3_mib_are_413_for_every_verb_and_format() {
    let server = ApiServer::new().start().await.expect("server");
    create_config_map(&server, "big", json!({})).await;
    let object = format!("{CONFIG_MAPS}/big");
    // A JSON string of MAX_BODY_BYTES + 1 bytes in all: the body is read to its end before the
    // refusal, so the connection closes cleanly.
    let too_big = || {
        let mut body = vec![b'"'; 1];
        body.extend(std::iter::repeat_n(b'a', MAX_BODY_BYTES - 1));
        body.push(b'"');
        body
    };
    let cases = [
        ("POST", CONFIG_MAPS, "application/json"),
        ("PUT", object.as_str(), "application/json"),
        ("PATCH", object.as_str(), "application/merge-patch+json"),
        (
            "PATCH",
            object.as_str(),
            "application/strategic-merge-patch+json",
        ),
        ("PATCH", object.as_str(), "application/json-patch+json"),
        (
            "PATCH",
            &format!("{object}?fieldManager=test"),
            "application/apply-patch+yaml",
        ),
        ("DELETE", object.as_str(), "application/json"),
        ("PUT", "/ferrokube/faults", "application/json"),
    ];
    for (method, path, content_type) in cases {
        let answer = Ask::new(method, path)
            .bytes(content_type, too_big())
            .to(&server)
            .await;
        assert_eq!(
            (answer.status, answer.message().as_str()),
            (413, "Request entity too large: limit is 3145728"),
            "{method} {path} {content_type}"
        );
    }
    // The object is still there, untouched.
    assert_eq!(Ask::new("GET", &object).to(&server).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abuse_the_fault_switches_need_the_token() {
    let token = "s3cret-t0ken";
    let server = ApiServer::new().token(token).start().await.expect("server");
    let bearer = format!("Bearer {token}");
    let settings = json!({"failWrites": 1.0});
    let asks = || {
        [
            Ask::new("GET", "/ferrokube/faults"),
            Ask::new("PUT", "/ferrokube/faults").json("application/json", &settings),
            Ask::new("POST", "/ferrokube/faults?closeWatches=1&compact=1"),
        ]
    };
    for credentials in [
        None,
        Some("Bearer wrong"),
        Some("Bearer s3cret-t0ke"),
        Some(token),
    ] {
        for ask in asks() {
            let ask = match credentials {
                Some(value) => ask.header("Authorization", value),
                None => ask,
            };
            let answer = ask.to(&server).await;
            assert_eq!(answer.status, 401, "{credentials:?}: {}", answer.body);
            assert_eq!(answer.json()["reason"], "Unauthorized");
        }
    }
    assert_eq!(
        server.faults().settings().fail_writes,
        0.0,
        "nothing switched"
    );
    for ask in asks() {
        let answer = ask
            .header("Authorization", bearer.clone())
            .to(&server)
            .await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    assert_eq!(server.faults().settings().fail_writes, 1.0);
    // Paused, the switches still answer (with the token), so `resume` gets through.
    let pause = |paused: bool| {
        Ask::new("PUT", "/ferrokube/faults")
            .header("Authorization", bearer.clone())
            .json("application/json", &json!({"paused": paused}))
    };
    assert_eq!(pause(true).to(&server).await.status, 200);
    assert_eq!(pause(false).to(&server).await.status, 200);
    // The health checks answer anyone, as kube-apiserver's do.
    for path in ["/healthz", "/livez", "/readyz"] {
        assert_eq!(
            Ask::new("GET", path).to(&server).await.status,
            200,
            "{path}"
        );
    }
    assert_eq!(Ask::new("GET", "/version").to(&server).await.status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abuse_fault_settings_out_of_range_are_422_and_never_panic() {
    let server = ApiServer::new().start().await.expect("server");
    let cases = [
        (json!({"failWrites": 1.5}), "failWrites"),
        (json!({"failWrites": -1}), "failWrites"),
        (json!({"failWrites": "NaN"}), "failWrites"),
        (json!({"conflictUpdates": 1e300}), "conflictUpdates"),
        (json!({"watchDelayMs": -5}), "watchDelayMs"),
        (json!({"watchDelayMs": u64::MAX}), "watchDelayMs"),
        (
            json!({"writeFailure": {"tooManyRequests": {"retryAfterSeconds": u64::MAX}}}),
            "writeFailure.tooManyRequests.retryAfterSeconds",
        ),
        (json!({"writeFailure": "sometimes"}), "writeFailure"),
        (json!({"paused": 1}), "paused"),
        (json!({"seed": 0.5}), "seed"),
        (json!({"failwrites": 0.5}), "failwrites"),
    ];
    for (body, field) in &cases {
        let answer = Ask::new("PUT", "/ferrokube/faults")
            .json("application/json", body)
            .to(&server)
            .await;
        assert_eq!(answer.status, 422, "{body}: {}", answer.body);
        let status = answer.json();
        assert_eq!(status["reason"], "Invalid", "{body}");
        assert_eq!(status["details"]["causes"][0]["field"], *field, "{body}");
        assert!(
            answer.message().contains(field),
            "{body}: {}",
            answer.message()
        );
    }
    let malformed = Ask::new("PUT", "/ferrokube/faults")
        .bytes("application/json", b"{\"failWrites\": ".to_vec())
        .to(&server)
        .await;
    assert_eq!(malformed.status, 400);
    // Nothing was switched, and every write still works (a probability over 1 used to panic here).
    assert_eq!(
        server.faults().settings(),
        ferrokube_apiserver::FaultSettings::default()
    );
    for i in 0..5 {
        create_config_map(&server, &format!("after-{i}"), json!({})).await;
    }
    // The largest valid values are taken.
    let edge = json!({"failWrites": 1, "conflictUpdates": 0, "watchDelayMs": 3_600_000,
                      "writeFailure": {"tooManyRequests": {"retryAfterSeconds": 3600}}});
    let answer = Ask::new("PUT", "/ferrokube/faults")
        .json("application/json", &edge)
        .to(&server)
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let refused = Ask::new("POST", CONFIG_MAPS)
        .json("application/json", &json!({"metadata": {"name": "x"}}))
        .to(&server)
        .await;
    assert_eq!(refused.status, 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abuse_requests_from_web_pages_are_refused() {
    let server = ApiServer::new()
        .allow_host("dev.example")
        .start()
        .await
        .expect("server");
    let port = server
        .url()
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_string();
    // Host: what names the server answers to (DNS rebinding makes a page's own name point here).
    let hosts = [
        (format!("127.0.0.1:{port}"), 200),
        (format!("localhost:{port}"), 200),
        (format!("[::1]:{port}"), 200),
        ("dev.example".to_string(), 200),
        (format!("evil.example:{port}"), 403),
        (format!("127.0.0.1.nip.io:{port}"), 403),
        ("192.0.2.1".to_string(), 403),
    ];
    for (host, code) in &hosts {
        for path in [
            "/version",
            "/api/v1/namespaces",
            "/ferrokube/faults",
            "/healthz",
        ] {
            let answer = Ask::new("GET", path)
                .header("Host", host.clone())
                .to(&server)
                .await;
            assert_eq!(answer.status, *code, "{host} {path}: {}", answer.body);
            if *code == 403 {
                assert_eq!(answer.json()["reason"], "Forbidden");
                assert!(
                    answer.message().contains("DNS rebinding"),
                    "{}",
                    answer.message()
                );
            }
        }
    }
    // Origin: a cross-site POST (a form, or fetch with text/plain: no preflight) is refused; the
    // server's own pages and other local ones are not.
    let origins = [
        ("https://evil.example", 403),
        ("null", 403),
        (&*format!("http://127.0.0.1:{port}"), 201),
        ("http://localhost:3000", 201),
        ("https://dev.example", 201),
    ];
    for (i, (origin, code)) in origins.iter().enumerate() {
        let object = json!({"metadata": {"name": format!("from-page-{i}")}});
        let answer = Ask::new("POST", CONFIG_MAPS)
            .header("Origin", *origin)
            .json("text/plain", &object)
            .to(&server)
            .await;
        assert_eq!(answer.status, *code, "{origin}: {}", answer.body);
    }
    for method in ["PUT", "PATCH", "DELETE"] {
        let answer = Ask::new(method, "/ferrokube/faults")
            .header("Origin", "https://evil.example")
            .json("application/merge-patch+json", &json!({}))
            .to(&server)
            .await;
        assert_eq!(answer.status, 403, "{method}");
    }
    // No Origin (curl, kubectl, client-go, ferrokube's client): as before.
    create_config_map(&server, "no-origin", json!({})).await;
    let listed = Ask::new("GET", CONFIG_MAPS).to(&server).await.json();
    let names: Vec<&str> = listed["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["metadata"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        names,
        ["from-page-2", "from-page-3", "from-page-4", "no-origin"]
    );
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abuse_the_kubeconfig_is_written_owner_only() {
    use std::os::unix::fs::PermissionsExt;

    let server = ApiServer::new()
        .token("kc-secret")
        .start()
        .await
        .expect("server");
    let dir = std::env::temp_dir().join(format!(
        "ferrokube-abuse-kubeconfig-{}-{}",
        std::process::id(),
        server.url().rsplit(':').next().unwrap_or_default()
    ));
    std::fs::create_dir_all(&dir).expect("a directory");
    let mode = |path: &std::path::Path| {
        std::fs::metadata(path)
            .expect("written")
            .permissions()
            .mode()
            & 0o777
    };
    // A new file, and one that was already there, world-readable.
    let fresh = dir.join("fresh.kubeconfig");
    let existing = dir.join("existing.kubeconfig");
    std::fs::write(&existing, "old").expect("an old file");
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o644)).expect("0644");
    for path in [&fresh, &existing] {
        server.write_kubeconfig(path).expect("kubeconfig written");
        assert_eq!(mode(path), 0o600, "{}", path.display());
        let text = std::fs::read_to_string(path).expect("read back");
        assert!(text.contains("token: kc-secret"));
    }
    // Nothing else was left behind.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("list")
        .filter_map(|entry| {
            entry
                .ok()
                .map(|e| e.file_name().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    assert_eq!(names, ["existing.kubeconfig", "fresh.kubeconfig"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abuse_debug_never_prints_the_token() {
    let secret = "do-not-print-me-0123";
    let builder = ApiServer::new().token(secret);
    let server = builder.clone().start().await.expect("server");
    let printed = [
        format!("{builder:?}"),
        format!("{builder:#?}"),
        format!("{server:?}"),
        format!("{server:#?}"),
    ];
    for text in &printed {
        assert!(!text.contains(secret), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
    }
    // Without a token there is nothing to redact, and it says so.
    assert!(format!("{:?}", ApiServer::new()).contains("token: None"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abuse_apply_bodies_that_expand_are_refused() {
    let server = ApiServer::new().start().await.expect("server");
    let url = format!("{CONFIG_MAPS}/laughs?fieldManager=test");
    // "Billion laughs": nine levels of ten aliases each, 10^9 strings if expanded. serde_yaml_ng
    // stops replaying aliases past 100 per event of the document: 400.
    let mut laughs = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let mut previous = "a";
    for name in ["b", "c", "d", "e", "f", "g", "h", "i"] {
        let aliases = vec![format!("*{previous}"); 10].join(",");
        laughs.push_str(&format!("{name}: &{name} [{aliases}]\n"));
        previous = name;
    }
    let indented: String = laughs.lines().map(|line| format!("  {line}\n")).collect();
    let body =
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: laughs\nextra:\n{indented}");
    let answer = Ask::new("PATCH", &url)
        .bytes("application/apply-patch+yaml", body.into_bytes())
        .to(&server)
        .await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert!(
        answer.message().contains("repetition limit exceeded"),
        "{}",
        answer.message()
    );
    assert_eq!(Ask::new("GET", "/healthz").to(&server).await.status, 200);
}

/// How deep the hostile bodies below nest: 100,000 levels, 600 KB of `{"a":` (under the 3 MiB body
/// limit). Without the pre-scan (`apply::nesting`) the YAML library scanned such a body for over
/// three minutes (release build) before refusing it; 10,000 levels took 5 s in a debug build.
const HOSTILE_DEPTH: usize = 100_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abuse_apply_bodies_nested_too_deep_are_refused_fast() {
    let server = ApiServer::new()
        .register(ResourceType::new("example.com", "v1", "Deep"))
        .start()
        .await
        .expect("server");
    let url = format!("{CONFIG_MAPS}/deep?fieldManager=test");
    let json = |extra: &str| {
        format!(
            r#"{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "deep"}}, "extra": {extra}}}"#
        )
    };
    let yaml = |extra: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\nextra: {extra}\n")
    };
    let n = HOSTILE_DEPTH;
    let hostile = [
        (
            "JSON objects",
            json(&format!("{}1{}", r#"{"a":"#.repeat(n), "}".repeat(n))),
        ),
        (
            "YAML flow mappings",
            yaml(&format!("{}1{}", "{a: ".repeat(n), "}".repeat(n))),
        ),
        ("YAML flow sequences, unclosed", yaml(&"[".repeat(n))),
        // Block nesting: the library reads it in linear time and refuses it itself.
        (
            "YAML block sequences",
            yaml(&format!("\n{}x", "- ".repeat(n))),
        ),
    ];
    for (what, body) in hostile {
        let started = std::time::Instant::now();
        let answer = Ask::new("PATCH", &url)
            .bytes("application/apply-patch+yaml", body.into_bytes())
            .to(&server)
            .await;
        let took = started.elapsed();
        assert_eq!(answer.status, 400, "{what}: {}", answer.body);
        assert_eq!(answer.json()["reason"], "BadRequest", "{what}");
        assert!(
            answer
                .message()
                .starts_with("error decoding YAML: recursion limit exceeded"),
            "{what}: {}",
            answer.message()
        );
        // A generous bound for a debug build on a busy machine: it takes milliseconds.
        assert!(took < Duration::from_secs(5), "{what}: {took:?}");
    }
    // Deep but valid: 50 levels, in JSON and in YAML (flow and block), are applied, to a kind
    // with no declared fields to refuse `extra` (a built-in ConfigMap's apply would be refused
    // for it: "field not declared in schema").
    let url = "/apis/example.com/v1/namespaces/default/deeps/deep?fieldManager=test".to_string();
    let json = |extra: &str| {
        format!(
            r#"{{"apiVersion": "example.com/v1", "kind": "Deep", "metadata": {{"name": "deep"}}, "extra": {extra}}}"#
        )
    };
    let yaml = |extra: &str| {
        format!("apiVersion: example.com/v1\nkind: Deep\nmetadata:\n  name: deep\nextra: {extra}\n")
    };
    let fifty_json = json(&format!("{}1{}", r#"{"a":"#.repeat(50), "}".repeat(50)));
    let fifty_flow = yaml(&format!("{}1{}", "{a: ".repeat(50), "}".repeat(50)));
    let levels: Vec<String> = (1..=50)
        .map(|level| format!("{}a:", "  ".repeat(level)))
        .collect();
    let fifty_block = yaml(&format!("\n{} 1", levels.join("\n")));
    for (i, body) in [fifty_json, fifty_flow, fifty_block]
        .into_iter()
        .enumerate()
    {
        let answer = Ask::new("PATCH", &url)
            .bytes("application/apply-patch+yaml", body.into_bytes())
            .to(&server)
            .await;
        assert_eq!(
            answer.status,
            if i == 0 { 201 } else { 200 },
            "{}",
            answer.body
        );
        let mut value = &answer.json()["extra"];
        let mut depth = 0;
        while let Some(inner) = value.get("a") {
            value = inner;
            depth += 1;
        }
        assert_eq!((depth, value), (50, &json!(1)), "body {i}");
    }
    assert_eq!(Ask::new("GET", "/healthz").to(&server).await.status, 200);
}

/// What other clients saw while one hostile write was being served (issue 42, item 2).
#[derive(Debug)]
struct Bystanders {
    /// How long the hostile write took, request sent to answer read.
    hostile: Duration,
    /// How many rounds of the other clients were answered while it still ran.
    answered_meanwhile: usize,
    /// The median time of those rounds.
    median_round: Duration,
    /// The longest any other client waited during it: the longest gap between the hostile write's
    /// start, each answer to another client, and the hostile write's end.
    longest_wait: Duration,
}

/// One round of the other clients: a GET of a Namespace, then a create in another namespace.
/// Returns how long the slower of the two took.
async fn bystander_round(server: &RunningServer, round: usize) -> Duration {
    let started = std::time::Instant::now();
    let namespace = Ask::new("GET", "/api/v1/namespaces/default")
        .to(server)
        .await;
    assert_eq!(namespace.status, 200, "{}", namespace.body);
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("bystander-{round}")}, "data": {"round": round.to_string()}});
    let created = Ask::new("POST", "/api/v1/namespaces/elsewhere/configmaps")
        .json("application/json", &config_map)
        .to(server)
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    started.elapsed()
}

/// Sends `hostile` and, until it is answered, keeps other clients asking (see [`Bystanders`]).
/// The hostile answer must have status `expect`.
async fn while_hostile(server: &RunningServer, hostile: Ask<'static>, expect: u16) -> Bystanders {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let started = std::time::Instant::now();
    let hostile_task = {
        let done = done.clone();
        let address = server.url().trim_start_matches("http://").to_string();
        let request = hostile.raw(&address);
        tokio::task::spawn_blocking(move || {
            // Set even if the exchange panics, so that the other clients stop.
            struct Done(std::sync::Arc<std::sync::atomic::AtomicBool>);
            impl Drop for Done {
                fn drop(&mut self) {
                    self.0.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            }
            let _done = Done(done);
            exchange(&address, &request)
        })
    };
    let mut rounds = Vec::new();
    let mut last = std::time::Instant::now();
    let mut longest_wait = Duration::ZERO;
    let mut round = 1000;
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        let took = bystander_round(server, round).await;
        round += 1;
        if done.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        // Answered while the hostile write still ran.
        rounds.push(took);
        longest_wait = longest_wait.max(last.elapsed());
        last = std::time::Instant::now();
    }
    let answer = hostile_task.await.expect("the hostile client");
    let hostile = started.elapsed();
    longest_wait = longest_wait.max(last.elapsed());
    assert_eq!(answer.status, expect, "{}", answer.body);
    rounds.sort();
    Bystanders {
        hostile,
        answered_meanwhile: rounds.len(),
        median_round: rounds.get(rounds.len() / 2).copied().unwrap_or(hostile),
        longest_wait,
    }
}

impl Ask<'_> {
    /// The request's bytes for the server at `address` (`host:port` or a URL).
    fn raw(&self, address: &str) -> Vec<u8> {
        let address = address.trim_start_matches("http://");
        let mut head = format!(
            "{} {} HTTP/1.1\r\nHost: {address}\r\n",
            self.method, self.path
        );
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            self.body.len()
        ));
        let mut raw = head.into_bytes();
        raw.extend_from_slice(&self.body);
        raw
    }
}

/// The bound on the other clients' typical round during the hostile write, from an unloaded
/// baseline measured by the same test: 100 ms, or ten times the median of a few unloaded rounds
/// on a machine slow enough (a loaded CI machine) that 100 ms is not much more than one round.
async fn bystander_bound(server: &RunningServer) -> Duration {
    let mut rounds = Vec::new();
    for round in 0..5 {
        rounds.push(bystander_round(server, round).await);
    }
    rounds.sort();
    Duration::from_millis(100).max(rounds[rounds.len() / 2] * 10)
}

/// Asserts that other clients were served throughout the hostile write, and that the hostile
/// write lasted long enough for that to mean something.
///
/// Behind a store lock held by the hostile write, every other client waits for its end: no round
/// is answered meanwhile, the longest wait is the hostile write's whole time. Served alongside,
/// rounds go on at their usual pace. The checks leave room for a loaded 2-core machine: the
/// typical round within `bound` (100 ms, or ten times the unloaded rounds), the longest wait
/// (a descheduled thread, one slow round) within a quarter of the hostile write and a second.
fn assert_served_throughout(what: &str, seen: &Bystanders, bound: Duration) {
    // Seconds in a debug build; half a second is still many rounds of the other clients.
    assert!(
        seen.hostile >= Duration::from_millis(500),
        "{what}: the hostile write took only {:?}, too short to tell: make it heavier",
        seen.hostile
    );
    // Ordering, not wall time: other clients were answered, several times over, while the
    // hostile write still ran.
    assert!(
        seen.answered_meanwhile >= 4,
        "{what}: other clients waited for the hostile write: {seen:?}"
    );
    assert!(
        seen.median_round <= bound,
        "{what}: the other clients' rounds took {:?} (bound {bound:?}): {seen:?}",
        seen.median_round
    );
    let longest = (seen.hostile / 4).min(Duration::from_secs(1)).max(bound);
    assert!(
        seen.longest_wait <= longest,
        "{what}: another client waited {:?} (bound {longest:?}): {seen:?}",
        seen.longest_wait
    );
}

/// A server with the namespace `elsewhere`, where the other clients create.
async fn server_with_elsewhere() -> RunningServer {
    let server = ApiServer::new().start().await.expect("server");
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}});
    let created = Ask::new("POST", "/api/v1/namespaces")
        .json("application/json", &namespace)
        .to(&server)
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    server
}

/// Lists of integers a rule loops over twice: `self.all(x, self.all(y, x >= 0))` costs
/// 5n²+6n+3 in cel-go's figures, just under the per-call limit of 10^6 at 446 items.
const RULE_ITEMS: usize = 446;
/// How many such lists (and rules) the hostile kind has: together just under the write's budget
/// of 10^7.
const RULE_LISTS: usize = 1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abuse_a_write_at_the_edge_of_the_cel_budget_stalls_no_other_client() {
    let server = server_with_elsewhere().await;
    let mut properties = serde_json::Map::new();
    for list in 0..RULE_LISTS {
        properties.insert(
            format!("l{list}"),
            json!({"type": "array", "maxItems": 500, "items": {"type": "integer"},
                   "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x >= 0))"}]}),
        );
    }
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "heavies.abuse.ferrokube.test"},
        "spec": {"group": "abuse.ferrokube.test", "scope": "Namespaced",
            "names": {"plural": "heavies", "singular": "heavy", "kind": "Heavy", "listKind": "HeavyList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": properties}}}}}]}});
    let created = Ask::new(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    )
    .json("application/json", &crd)
    .to(&server)
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    // The embedded server serves a CRD's kind once the CRD is written.
    let collection = "/apis/abuse.ferrokube.test/v1/namespaces/default/heavies";
    let listed = Ask::new("GET", collection).to(&server).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let items: Vec<usize> = (0..RULE_ITEMS).collect();
    let mut spec = serde_json::Map::new();
    for list in 0..RULE_LISTS {
        spec.insert(format!("l{list}"), json!(items));
    }
    let heavy = json!({"apiVersion": "abuse.ferrokube.test/v1", "kind": "Heavy",
        "metadata": {"name": "heavy"}, "spec": spec});
    let started = std::time::Instant::now();
    let created = Ask::new("POST", collection)
        .json("application/json", &heavy)
        .to(&server)
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    eprintln!("created the heavy object in {:?}", started.elapsed());
    let bound = bystander_bound(&server).await;
    // Every update runs all the rules again (the lists are not unchanged: the last item moves).
    let mut changed = spec.clone();
    changed.insert("l0".into(), json!((1..=RULE_ITEMS).collect::<Vec<_>>()));
    let url = format!("{collection}/heavy");
    let hostile = Ask::new("PATCH", Box::leak(url.into_boxed_str()))
        .json("application/merge-patch+json", &json!({"spec": changed}));
    let seen = while_hostile(&server, hostile, 200).await;
    eprintln!("{seen:?} bound {bound:?}");
    assert_served_throughout("a CEL rule at the edge of the budget", &seen, bound);
}

/// An HTTP/2 connection (prior knowledge, no TLS) to `server`: the request sender and the
/// connection's task, which ends when the connection does.
async fn http2_connection(
    server: &RunningServer,
) -> (
    hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>>,
    tokio::task::JoinHandle<Result<(), hyper::Error>>,
) {
    let address = server.url().trim_start_matches("http://").to_string();
    let stream = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connect");
    let (sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("HTTP/2 handshake");
    (sender, tokio::spawn(connection))
}

fn http2_get(
    server: &RunningServer,
    path: &str,
) -> http::Request<http_body_util::Empty<bytes::Bytes>> {
    http::Request::get(format!("{}{path}", server.url()))
        .body(http_body_util::Empty::new())
        .expect("request")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abuse_an_idle_http2_connection_is_closed_after_the_idle_timeout() {
    use http_body_util::BodyExt;
    let idle = Duration::from_millis(300);
    let server = ApiServer::new()
        .idle_timeout(Some(idle))
        .start()
        .await
        .expect("server");
    // A connection with a watch open: never idle.
    let (mut watching, watch_connection) = http2_connection(&server).await;
    let watch = watching
        .send_request(http2_get(&server, &format!("{CONFIG_MAPS}?watch=1")))
        .await
        .expect("the watch opens");
    assert_eq!(watch.status(), 200);
    let mut watch_body = watch.into_body();
    // A connection that makes one request, then keeps quiet.
    let (mut quiet, quiet_connection) = http2_connection(&server).await;
    // Measured from the request's sending: the server's idle time starts when it has sent the
    // answer, which the client sees a moment later (a bound from the answer's arrival would be
    // short by that moment).
    let answered = std::time::Instant::now();
    let answer = quiet
        .send_request(http2_get(&server, "/api/v1/namespaces/default"))
        .await
        .expect("answered");
    assert_eq!(answer.status(), 200);
    answer.into_body().collect().await.expect("the body");
    // The server closes it (GOAWAY): its task ends. A bound on a broken test, not a wait.
    let ended = tokio::time::timeout(Duration::from_secs(60), quiet_connection).await;
    let closed_after = answered.elapsed();
    assert!(
        matches!(ended, Ok(Ok(Ok(())))),
        "the idle connection ended cleanly: {ended:?}"
    );
    assert!(closed_after >= idle, "closed after {closed_after:?}");
    // The watching connection, older than the quiet one, is still open and delivering.
    assert!(!watch_connection.is_finished(), "a watch is not idle");
    create_config_map(&server, "seen-by-the-watch", json!({"k": "v"})).await;
    let mut received = Vec::new();
    while !String::from_utf8_lossy(&received).contains("seen-by-the-watch") {
        let frame = tokio::time::timeout(Duration::from_secs(60), watch_body.frame())
            .await
            .expect("a watch event")
            .expect("the stream goes on")
            .expect("a frame");
        if let Some(data) = frame.data_ref() {
            received.extend_from_slice(data);
        }
    }
}

/// Finalizers on the hostile ConfigMap, and as many more in the patch: about 1 MiB each.
const HOSTILE_FINALIZERS: usize = 40_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abuse_a_huge_strategic_merge_patch_of_many_finalizers_stalls_no_other_client() {
    let server = server_with_elsewhere().await;
    let finalizers = |from: usize| -> Vec<String> {
        (from..from + HOSTILE_FINALIZERS)
            .map(|i| format!("example.com/f-{i}"))
            .collect()
    };
    let many = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "many", "finalizers": finalizers(0)}, "data": {"k": "v"}});
    let started = std::time::Instant::now();
    let created = Ask::new("POST", CONFIG_MAPS)
        .json("application/json", &many)
        .to(&server)
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    eprintln!(
        "created the object with many finalizers in {:?}",
        started.elapsed()
    );
    let bound = bystander_bound(&server).await;
    // A strategic merge patch merges `finalizers` as a set: every one is looked up, validated,
    // recorded in managedFields and encoded.
    let patch = json!({"metadata": {"finalizers": finalizers(HOSTILE_FINALIZERS)}});
    let hostile = Ask::new("PATCH", "/api/v1/namespaces/default/configmaps/many")
        .json("application/strategic-merge-patch+json", &patch);
    let seen = while_hostile(&server, hostile, 200).await;
    eprintln!("{seen:?} bound {bound:?}");
    assert_served_throughout("a huge strategic merge patch", &seen, bound);
    let stored = Ask::new("GET", "/api/v1/namespaces/default/configmaps/many")
        .to(&server)
        .await;
    let count = stored.json()["metadata"]["finalizers"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(count, 2 * HOSTILE_FINALIZERS);
}
