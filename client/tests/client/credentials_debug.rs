//! No credential reaches `{:?}` or `{:#?}`: every configuration type that holds one (a token, a
//! password, a client key, an exec plugin's arguments, environment and answer, a proxy URL's
//! password, a token file's content) prints `<redacted>` in its place, and the rest as before.
//!
//! Each secret below is a distinct string; the test builds every type from a kubeconfig that holds
//! them all, fetches what the token file and the exec plugins give (so that caches hold them too),
//! and looks for each secret in every `Debug` output.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use ferrokube_client::config::Auth;
use ferrokube_client::config::Config;
use ferrokube_client::config::Kubeconfig;
use ferrokube_client::config::TokenFile;

const TOKEN: &str = "secret-kubeconfig-token-1f0e";
const PASSWORD: &str = "secret-basic-password-77aa";
const FILE_TOKEN: &str = "secret-token-file-content-c3d2";
const EXEC_ARG: &str = "secret-exec-argument-5b19";
const EXEC_ENV: &str = "secret-exec-env-value-e4e4";
const EXEC_TOKEN: &str = "secret-exec-plugin-token-90ab";
const PROXY_PASSWORD: &str = "secret-proxy-password-d00d";
const PROVIDER_TOKEN: &str = "secret-auth-provider-id-token-4242";

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/config/testdata")
        .join(name)
}

/// A fresh folder for this test.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrokube-debug-redact-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The secrets a `Debug` output must not contain: the plain ones, and the client key as PEM, as
/// base64 and each line of its body.
fn secrets(key_pem: &str) -> Vec<String> {
    let mut secrets: Vec<String> = [
        TOKEN,
        PASSWORD,
        FILE_TOKEN,
        EXEC_ARG,
        EXEC_ENV,
        EXEC_TOKEN,
        PROXY_PASSWORD,
        PROVIDER_TOKEN,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    secrets.push(base64::engine::general_purpose::STANDARD.encode(key_pem));
    secrets.extend(
        key_pem
            .lines()
            .filter(|line| !line.starts_with("-----") && !line.is_empty())
            .map(str::to_string),
    );
    secrets
}

/// Asserts that neither `{:?}` nor `{:#?}` of `value` contains a secret; returns `{:?}`.
fn assert_redacted(what: &str, value: &impl std::fmt::Debug, secrets: &[String]) -> String {
    let plain = format!("{value:?}");
    let pretty = format!("{value:#?}");
    for secret in secrets {
        assert!(
            !plain.contains(secret.as_str()),
            "{{:?}} of {what} shows {secret:?}:\n{plain}"
        );
        assert!(
            !pretty.contains(secret.as_str()),
            "{{:#?}} of {what} shows {secret:?}:\n{pretty}"
        );
    }
    plain
}

#[tokio::test]
async fn debug_output_of_every_credential_type_is_redacted() {
    let dir = scratch();
    let key_pem = std::fs::read_to_string(testdata("ec-sec1.key")).expect("key");
    let cert_pem = std::fs::read_to_string(testdata("client.crt")).expect("cert");
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let secrets = secrets(&key_pem);

    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{FILE_TOKEN}\n")).expect("token file");
    // Two exec plugins: one answers with a token, one with a client certificate and key.
    let token_plugin = dir.join("token-plugin.sh");
    std::fs::write(
        &token_plugin,
        format!(
            "#!/bin/sh\nprintf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{EXEC_TOKEN}\"}}}}'\n"
        ),
    )
    .expect("token plugin");
    let answer = serde_json::json!({
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"clientCertificateData": cert_pem, "clientKeyData": key_pem},
    });
    let answer_file = dir.join("cert-answer.json");
    std::fs::write(&answer_file, answer.to_string()).expect("cert answer");
    let cert_plugin = dir.join("cert-plugin.sh");
    std::fs::write(
        &cert_plugin,
        format!("#!/bin/sh\ncat {}\n", answer_file.display()),
    )
    .expect("cert plugin");

    let exec = |script: &Path| {
        format!(
            "exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: ['{}', '--token={EXEC_ARG}']\n      env: [{{name: PLUGIN_SECRET, value: {EXEC_ENV}}}]\n      interactiveMode: Never",
            script.display()
        )
    };
    let kubeconfig_text = format!(
        "apiVersion: v1
kind: Config
current-context: token
clusters:
- name: k
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: {ca}
    proxy-url: http://proxyuser:{PROXY_PASSWORD}@proxy.example:3128
contexts:
- {{name: token, context: {{cluster: k, user: token}}}}
- {{name: basic, context: {{cluster: k, user: basic}}}}
- {{name: cert, context: {{cluster: k, user: cert}}}}
- {{name: token-file, context: {{cluster: k, user: token-file}}}}
- {{name: exec-token, context: {{cluster: k, user: exec-token}}}}
- {{name: exec-cert, context: {{cluster: k, user: exec-cert}}}}
users:
- name: token
  user: {{token: {TOKEN}}}
- name: basic
  user: {{username: alice, password: {PASSWORD}}}
- name: cert
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
- name: token-file
  user:
    tokenFile: {token_file}
- name: exec-token
  user:
    {exec_token}
- name: exec-cert
  user:
    {exec_cert}
- name: provider
  user:
    auth-provider:
      name: oidc
      config: {{id-token: {PROVIDER_TOKEN}, client-id: ferrokube}}
",
        ca = b64(&cert_pem),
        cert = b64(&cert_pem),
        key = b64(&key_pem),
        token_file = token_file.display(),
        exec_token = exec(&token_plugin),
        exec_cert = exec(&cert_plugin),
    );
    let kubeconfig = Kubeconfig::parse(&kubeconfig_text).expect("the kubeconfig parses");

    // The kubeconfig itself, and each of its entries.
    let shown = assert_redacted("the Kubeconfig", &kubeconfig, &secrets);
    for shown_as_before in [
        "alice",
        "/bin/sh",
        "PLUGIN_SECRET",
        "Some(\"oidc\")",
        &format!("{token_file:?}"),
        "<redacted>",
    ] {
        assert!(
            shown.contains(shown_as_before),
            "{shown_as_before} should show: {shown}"
        );
    }
    let cluster = kubeconfig.cluster("k").expect("cluster");
    let shown = assert_redacted("the Cluster", cluster, &secrets);
    assert!(
        shown.contains("http://proxyuser:<redacted>@proxy.example:3128"),
        "{shown}"
    );
    for user in &kubeconfig.users {
        assert_redacted(
            &format!("user {}", user.name),
            &kubeconfig.user(&user.name).expect("user"),
            &secrets,
        );
        if let Some(exec) = &user.user.exec {
            let shown = assert_redacted("an ExecConfig", exec, &secrets);
            assert!(
                shown.contains("/bin/sh") && shown.contains("PLUGIN_SECRET"),
                "{shown}"
            );
        }
    }

    // The config of each context, with its Auth, after the credentials have been fetched once
    // (the token file read, each plugin run: their caches hold the secrets now).
    for context in [
        "token",
        "basic",
        "cert",
        "token-file",
        "exec-token",
        "exec-cert",
    ] {
        let config = Config::from_kubeconfig(&kubeconfig, Some(context))
            .unwrap_or_else(|e| panic!("context {context}: {e}"));
        let header = config
            .auth
            .header()
            .await
            .unwrap_or_else(|e| panic!("context {context}: credentials: {e}"));
        if context == "exec-token" {
            let header = header.expect("a bearer token");
            assert_eq!(
                header.to_str().ok(),
                Some(format!("Bearer {EXEC_TOKEN}").as_str())
            );
        }
        let shown = assert_redacted(&format!("the Config of {context}"), &config, &secrets);
        assert!(
            shown.contains("proxyuser:<redacted>@proxy.example"),
            "{shown}"
        );
        assert_redacted(&format!("the Auth of {context}"), &config.auth, &secrets);
        if let Some(identity) = &config.identity {
            assert_redacted("an Identity", identity, &secrets);
        }
        match &config.auth {
            Auth::Exec(exec) => {
                assert_redacted("ExecCredentials", exec, &secrets);
                if let Some(identity) = exec.identity() {
                    assert_redacted("the plugin's Identity", &identity, &secrets);
                }
            }
            Auth::Basic { .. } => {
                let shown = format!("{:?}", config.auth);
                assert!(
                    shown.contains("alice") && shown.contains("<redacted>"),
                    "{shown}"
                );
            }
            _ => {}
        }
    }

    // A token file on its own.
    let file = TokenFile::open(token_file.clone()).expect("token file");
    assert_eq!(file.token().expect("token"), FILE_TOKEN);
    let shown = assert_redacted("a TokenFile", &file, &secrets);
    assert!(shown.contains("token"), "{shown}");
    assert_redacted(
        "Auth::TokenFile",
        &Auth::TokenFile(Arc::new(file)),
        &secrets,
    );
    // Fixed credentials set in code.
    assert_redacted("Auth::Token", &Auth::Token(TOKEN.into()), &secrets);
    assert_redacted(
        "Auth::Basic",
        &Auth::Basic {
            username: "alice".into(),
            password: PASSWORD.into(),
        },
        &secrets,
    );
    // A proxy URL set in code.
    let mut config = Config::new("https://127.0.0.1:6443".parse().expect("url"));
    config.proxy_url = Some(
        format!("socks5://proxyuser:{PROXY_PASSWORD}@proxy.example:1080")
            .parse()
            .expect("proxy url"),
    );
    config.auth = Auth::Token(TOKEN.into());
    assert_redacted("a Config with a SOCKS5 proxy", &config, &secrets);

    let _ = std::fs::remove_dir_all(&dir);
}

/// A server URL with `user:password@` (unusual, but a kubeconfig may carry one): the client's
/// `Debug` prints it without the password.
#[tokio::test]
async fn debug_of_a_client_redacts_a_password_in_its_server_url() {
    let config = ferrokube_client::Config::new(
        "https://someone:url-password-secret@127.0.0.1:6443"
            .parse()
            .expect("url"),
    );
    let client = ferrokube_client::Client::new(config).expect("client");
    for shown in [format!("{client:?}"), format!("{client:#?}")] {
        assert!(!shown.contains("url-password-secret"), "{shown}");
        assert!(shown.contains("127.0.0.1:6443"), "{shown}");
    }
}
