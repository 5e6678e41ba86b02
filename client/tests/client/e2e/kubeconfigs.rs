//! Kubeconfigs kubectl accepts, against the real kube-apiserver of `scripts/kube-apiserver.sh`: each
//! variant below is written to a file, given to `kubectl get --raw` (a list only an admin may read) and to ferrokube
//! (`Config::from_kubeconfig_files`, then the same `GET`), and the two must agree: what kubectl
//! accepts we accept, and what it refuses we refuse (with a typed error, not a panic).
//!
//! The variants are the ways real kubeconfigs differ from the one `kube-apiserver.sh` writes: data
//! inline or in files (relative to the kubeconfig's folder), keys in every PEM form, CA bundles with
//! unrelated certificates, Windows line endings, `tls-server-name`, `insecure-skip-tls-verify`,
//! servers with a trailing slash or by name, JSON instead of YAML, unknown fields, several files
//! merged, token files, and a cluster behind an HTTP proxy (`proxy-url`).
//!
//! Run by `scripts/e2e.sh`; needs `--features e2e` and the script's `KUBECONFIG`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine;
use bytes::Bytes;
use ferrokube_client::Client;
use ferrokube_client::Config;
use http::Request;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A minimal HTTP proxy: answers `CONNECT host:port` by opening that connection and relaying bytes
/// both ways; counts the tunnels it opened (so the test knows the proxy was really used) and
/// refuses requests without the expected `Proxy-Authorization`, when one is set.
async fn connect_proxy(authorization: Option<String>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy binds");
    let address = listener.local_addr().expect("address").to_string();
    let tunnels = Arc::new(AtomicUsize::new(0));
    let counted = tunnels.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let counted = counted.clone();
            let authorization = authorization.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                    if client.read_exact(&mut byte).await.is_err() {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_string();
                let target = head
                    .strip_prefix("CONNECT ")
                    .and_then(|rest| rest.split_whitespace().next())
                    .map(str::to_string);
                let authorized = authorization.as_ref().is_none_or(|expected| {
                    head.lines().any(|line| {
                        line.to_ascii_lowercase()
                            .starts_with("proxy-authorization:")
                            && line.ends_with(expected.as_str())
                    })
                });
                let Some(target) = target.filter(|_| authorized) else {
                    let _ = client
                        .write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
                        .await;
                    return;
                };
                let Ok(mut upstream) = TcpStream::connect(&target).await else {
                    let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                if client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .is_ok()
                {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                }
            });
        }
    });
    (address, tunnels)
}

/// What each variant asks: a list only an authenticated admin may read (anonymous requests get
/// 403 there, while `/version` would answer anyone and prove nothing about credentials).
const PROBE: &str = "/api/v1/namespaces/kube-system/configmaps?limit=1";

/// The real server's kubeconfig and its `pki/` folder.
fn real() -> (PathBuf, PathBuf, serde_yaml_ng::Value) {
    let path = PathBuf::from(
        std::env::var("KUBECONFIG").expect("KUBECONFIG names kube-apiserver.sh's kubeconfig"),
    );
    let text = std::fs::read_to_string(&path).expect("kubeconfig readable");
    let folder = path.parent().expect("kubeconfig in a folder").to_path_buf();
    let config = serde_yaml_ng::from_str(&text).expect("kubeconfig is YAML");
    (path, folder.join("pki"), config)
}

fn server(config: &serde_yaml_ng::Value) -> String {
    config["clusters"][0]["cluster"]["server"]
        .as_str()
        .expect("server")
        .to_string()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// One variant: a name, and the files to write (the first is the kubeconfig).
struct Variant {
    name: &'static str,
    files: Vec<(&'static str, String)>,
}

/// A kubeconfig with one cluster, one user and one context, from their YAML bodies.
fn kubeconfig(cluster: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n{}\nusers:\n- name: u\n  user:\n{}\ncontexts:\n- name: c\n  context: {{cluster: k, user: u}}\n",
        indent(cluster),
        indent(user)
    )
}

fn indent(block: &str) -> String {
    block
        .lines()
        .map(|line| format!("    {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn read(pki: &Path, file: &str) -> String {
    std::fs::read_to_string(pki.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn variants(pki: &Path, server: &str, token: &str, proxies: &Proxies) -> Vec<Variant> {
    let ca = read(pki, "ca.crt");
    let cert = read(pki, "admin.crt");
    let key = read(pki, "admin.key");
    let ca_data = format!("certificate-authority-data: {}", b64(ca.as_bytes()));
    let user_data = format!(
        "client-certificate-data: {}\nclient-key-data: {}",
        b64(cert.as_bytes()),
        b64(key.as_bytes())
    );
    let cluster = |extra: &str| format!("server: {server}\n{ca_data}\n{extra}");
    let pkcs8 = Command::new("openssl")
        .args(["pkcs8", "-topk8", "-nocrypt", "-in"])
        .arg(pki.join("admin.key"))
        .output()
        .expect("openssl runs");
    let pkcs8 = String::from_utf8(pkcs8.stdout).expect("PEM");
    let other_ca = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "/dev/null",
            "-subj",
            "/CN=unrelated",
            "-days",
            "1",
        ])
        .output()
        .expect("openssl runs");
    let other_ca = String::from_utf8(other_ca.stdout).expect("PEM");
    let by_name = server.replace("127.0.0.1", "localhost");
    let exec_user = |version: &str| {
        format!(
            "exec:\n  apiVersion: client.authentication.k8s.io/{version}\n  command: ./plugin.sh\n  interactiveMode: Never"
        )
    };
    let plugin = |version: &str, status: serde_json::Value| {
        let credential = serde_json::json!({
            "apiVersion": format!("client.authentication.k8s.io/{version}"),
            "kind": "ExecCredential",
            "status": status,
        });
        format!("#!/bin/sh\ncat <<'EOF'\n{credential}\nEOF\n")
    };
    vec![
        Variant {
            name: "data inline (certificate-authority-data, client-*-data)",
            files: vec![("config", kubeconfig(&cluster(""), &user_data))],
        },
        Variant {
            name: "files relative to the kubeconfig's folder",
            files: vec![
                (
                    "config",
                    kubeconfig(
                        &format!("server: {server}\ncertificate-authority: pki/ca.crt"),
                        "client-certificate: pki/admin.crt\nclient-key: pki/admin.key",
                    ),
                ),
                ("pki/ca.crt", ca.clone()),
                ("pki/admin.crt", cert.clone()),
                ("pki/admin.key", key.clone()),
            ],
        },
        Variant {
            name: "an EC key in PKCS#8 (BEGIN PRIVATE KEY)",
            files: vec![(
                "config",
                kubeconfig(
                    &cluster(""),
                    &format!(
                        "client-certificate-data: {}\nclient-key-data: {}",
                        b64(cert.as_bytes()),
                        b64(pkcs8.as_bytes())
                    ),
                ),
            )],
        },
        Variant {
            name: "a CA bundle with an unrelated certificate first",
            files: vec![(
                "config",
                kubeconfig(
                    &format!(
                        "server: {server}\ncertificate-authority-data: {}",
                        b64(format!("{other_ca}{ca}").as_bytes())
                    ),
                    &user_data,
                ),
            )],
        },
        Variant {
            name: "Windows line endings in the PEM files",
            files: vec![(
                "config",
                kubeconfig(
                    &format!(
                        "server: {server}\ncertificate-authority-data: {}",
                        b64(ca.replace('\n', "\r\n").as_bytes())
                    ),
                    &format!(
                        "client-certificate-data: {}\nclient-key-data: {}",
                        b64(cert.replace('\n', "\r\n").as_bytes()),
                        b64(key.replace('\n', "\r\n").as_bytes())
                    ),
                ),
            )],
        },
        Variant {
            name: "a server URL with a trailing slash",
            files: vec![(
                "config",
                kubeconfig(
                    &format!("server: {server}/\n{ca_data}"),
                    &format!("token: {token}"),
                ),
            )],
        },
        Variant {
            name: "the server by host name (localhost)",
            files: vec![(
                "config",
                kubeconfig(
                    &format!("server: {by_name}\n{ca_data}"),
                    &format!("token: {token}"),
                ),
            )],
        },
        Variant {
            name: "tls-server-name naming another SAN of the certificate",
            files: vec![(
                "config",
                kubeconfig(
                    &cluster("tls-server-name: kubernetes.default.svc"),
                    &format!("token: {token}"),
                ),
            )],
        },
        Variant {
            name: "tls-server-name naming a host the certificate is not for (refused by both)",
            files: vec![(
                "config",
                kubeconfig(
                    &cluster("tls-server-name: elsewhere.invalid"),
                    &format!("token: {token}"),
                ),
            )],
        },
        Variant {
            name: "insecure-skip-tls-verify without a CA",
            files: vec![(
                "config",
                kubeconfig(
                    &format!("server: {server}\ninsecure-skip-tls-verify: true"),
                    &format!("token: {token}"),
                ),
            )],
        },
        Variant {
            name: "no CA at all (refused by both: the server's CA is not a system root)",
            files: vec![(
                "config",
                kubeconfig(&format!("server: {server}"), &format!("token: {token}")),
            )],
        },
        Variant {
            name: "tokenFile relative to the kubeconfig, with a trailing newline",
            files: vec![
                (
                    "config",
                    kubeconfig(&cluster(""), "tokenFile: secrets/token"),
                ),
                ("secrets/token", format!("{token}\n")),
            ],
        },
        Variant {
            name: "JSON instead of YAML",
            files: vec![(
                "config",
                serde_json::json!({
                    "apiVersion": "v1", "kind": "Config", "current-context": "c",
                    "clusters": [{"name": "k", "cluster": {"server": server,
                        "certificate-authority-data": b64(ca.as_bytes())}}],
                    "users": [{"name": "u", "user": {"token": token}}],
                    "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                })
                .to_string(),
            )],
        },
        Variant {
            name: "unknown fields, preferences, extensions, no apiVersion or kind",
            files: vec![(
                "config",
                format!(
                    "preferences: {{colors: true}}\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: {server}\n    {ca_data}\n    extensions:\n    - name: x\n      extension: {{a: 1}}\n    disable-compression: true\nusers:\n- name: u\n  user: {{token: {token}, something-new: 1}}\ncontexts:\n- name: c\n  context: {{cluster: k, user: u, namespace: kube-system}}\n"
                ),
            )],
        },
        Variant {
            name: "proxy-url: an HTTP proxy (CONNECT tunnel)",
            files: vec![(
                "config",
                kubeconfig(
                    &cluster(&format!("proxy-url: http://{}", proxies.open)),
                    &format!("token: {token}"),
                ),
            )],
        },
        Variant {
            name: "proxy-url: an HTTP proxy with user:password",
            files: vec![(
                "config",
                kubeconfig(
                    &cluster(&format!(
                        "proxy-url: http://me:s%40cret@{}",
                        proxies.guarded
                    )),
                    &format!("token: {token}"),
                ),
            )],
        },
        Variant {
            name: "proxy-url: that proxy without its password (refused by both: 407)",
            files: vec![(
                "config",
                kubeconfig(
                    &cluster(&format!("proxy-url: http://{}", proxies.guarded)),
                    &format!("token: {token}"),
                ),
            )],
        },
        Variant {
            name: "an exec plugin (v1) printing a token",
            files: vec![
                ("config", kubeconfig(&cluster(""), &exec_user("v1"))),
                (
                    "plugin.sh",
                    plugin("v1", serde_json::json!({"token": token})),
                ),
            ],
        },
        Variant {
            name: "an exec plugin (v1beta1) printing a client certificate and key",
            files: vec![
                ("config", kubeconfig(&cluster(""), &exec_user("v1beta1"))),
                (
                    "plugin.sh",
                    plugin(
                        "v1beta1",
                        serde_json::json!({"clientCertificateData": cert, "clientKeyData": key}),
                    ),
                ),
            ],
        },
        Variant {
            name: "an exec plugin printing a certificate without its key (refused by both)",
            files: vec![
                ("config", kubeconfig(&cluster(""), &exec_user("v1"))),
                (
                    "plugin.sh",
                    plugin("v1", serde_json::json!({"clientCertificateData": cert})),
                ),
            ],
        },
        Variant {
            name: "no credentials (refused by both: anonymous may not list there, 403)",
            files: vec![("config", kubeconfig(&cluster(""), "{}"))],
        },
        Variant {
            name: "a context whose user is missing (refused by both)",
            files: vec![(
                "config",
                format!(
                    "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster: {{server: {server}}}\ncontexts:\n- name: c\n  context: {{cluster: k, user: nobody}}\nusers: []\n"
                ),
            )],
        },
    ]
}

/// What kubectl says: Ok, or its error output.
fn kubectl_accepts(kubeconfig: &Path) -> Result<(), String> {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["get", "--raw", PROBE, "--request-timeout=10s"])
        .env_remove("KUBECONFIG")
        .output()
        .map_err(|e| format!("kubectl: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// What ferrokube says: Ok, or the typed error's text.
async fn ferrokube_accepts(kubeconfig: &Path) -> Result<(), String> {
    let config = Config::from_kubeconfig_files(&[kubeconfig.to_path_buf()], None)
        .map_err(|e| format!("config: {e}"))?;
    let client = Client::new(config).map_err(|e| format!("client: {e}"))?;
    let call = ferrokube_client::client::Call {
        request: Request::get(PROBE)
            .body(Bytes::new())
            .map_err(|e| e.to_string())?,
        idempotent: true,
        streaming: false,
    };
    let body = client
        .request_bytes(call)
        .await
        .map_err(|e| format!("GET {PROBE}: {e}"))?;
    if body.windows(14).any(|w| w == b"ConfigMapList\"") {
        Ok(())
    } else {
        Err(format!(
            "GET {PROBE}: unexpected body {}",
            String::from_utf8_lossy(&body)
        ))
    }
}

/// The proxies the `proxy-url` variants name.
struct Proxies {
    open: String,
    guarded: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_kubectl_accepts_ferrokube_accepts() {
    let (_, pki, real) = real();
    let server = server(&real);
    let token = real["users"]
        .as_sequence()
        .and_then(|users| users.iter().find_map(|u| u["user"]["token"].as_str()))
        .expect("a token user")
        .to_string();
    let dir = std::env::temp_dir().join(format!("ferrokube-kubeconfigs-{}", std::process::id()));
    let (open, open_tunnels) = connect_proxy(None).await;
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("me:s@cret")
    );
    let (guarded, guarded_tunnels) = connect_proxy(Some(expected)).await;
    let proxies = Proxies { open, guarded };
    let mut report = Vec::new();
    let mut disagreements = Vec::new();
    for (at, variant) in variants(&pki, &server, &token, &proxies)
        .into_iter()
        .enumerate()
    {
        let folder = dir.join(at.to_string());
        for (file, text) in &variant.files {
            let path = folder.join(file);
            std::fs::create_dir_all(path.parent().expect("folder")).expect("folder");
            std::fs::write(&path, text).expect("written");
            if file.ends_with(".sh") {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                    .expect("executable");
            }
        }
        let path = folder.join(variant.files[0].0);
        let tunnels =
            || open_tunnels.load(Ordering::SeqCst) + guarded_tunnels.load(Ordering::SeqCst);
        let before = tunnels();
        let kubectl = kubectl_accepts(&path);
        let after_kubectl = tunnels();
        let ours = ferrokube_accepts(&path).await;
        if variant.name.starts_with("proxy-url") && ours.is_ok() {
            assert!(
                tunnels() > after_kubectl && after_kubectl > before,
                "{}: the proxy was not used (tunnels: {before} before, {after_kubectl} after kubectl, {} after ferrokube)",
                variant.name,
                tunnels()
            );
        }
        report.push(format!(
            "{:70} kubectl: {:8} ferrokube: {}",
            variant.name,
            if kubectl.is_ok() {
                "accepts"
            } else {
                "refuses"
            },
            match &ours {
                Ok(()) => "accepts".to_string(),
                Err(e) => format!("refuses ({e})"),
            }
        ));
        if kubectl.is_ok() != ours.is_ok() {
            disagreements.push(format!(
                "{}: kubectl {kubectl:?}, ferrokube {ours:?}",
                variant.name
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{}", report.join("\n"));
    assert!(
        disagreements.is_empty(),
        "kubectl and ferrokube disagree:\n{}",
        disagreements.join("\n")
    );
}
