use std::path::PathBuf;

use super::*;

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/config/testdata")
        .join(name)
}

/// A fresh folder for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrokube-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn kubeconfig_with_user(user: &str) -> Kubeconfig {
    let text = format!(
        "current-context: c\nclusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority: {ca}\ncontexts:\n- name: c\n  context: {{cluster: k, user: u}}\nusers:\n- name: u\n  user:\n{user}",
        ca = testdata("client.crt").display()
    );
    Kubeconfig::parse(&text).expect("test kubeconfig parses")
}

#[test]
fn client_certificates_with_every_key_format() {
    for key in [
        "rsa-pkcs1.key",
        "rsa-pkcs8.key",
        "ec-sec1.key",
        "ec-pkcs8.key",
    ] {
        let user = format!(
            "    client-certificate: {}\n    client-key: {}\n",
            testdata("client.crt").display(),
            testdata(key).display()
        );
        let config = Config::from_kubeconfig(&kubeconfig_with_user(&user), None)
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        assert!(config.identity.is_some(), "{key}");
        assert_eq!(config.root_certs.as_ref().map(Vec::len), Some(1));
        assert_eq!(config.default_namespace, "default");
    }
}

#[test]
fn certificate_data_fields_are_base64() {
    let cert = std::fs::read(testdata("client.crt")).expect("cert");
    let key = std::fs::read(testdata("ec-sec1.key")).expect("key");
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let user = format!(
        "    client-certificate-data: {}\n    client-key-data: {}\n",
        b64(&cert),
        b64(&key)
    );
    let config = Config::from_kubeconfig(&kubeconfig_with_user(&user), None).expect("config");
    assert!(config.identity.is_some());

    let user = "    client-certificate-data: '!!!not base64'\n    client-key-data: AAAA\n";
    let error = Config::from_kubeconfig(&kubeconfig_with_user(user), None).expect_err("bad b64");
    assert!(
        error
            .to_string()
            .contains("user \"u\" client-certificate-data is not valid base64"),
        "{error}"
    );
}

#[test]
fn bad_pem_and_half_identities_name_the_field() {
    let dir = scratch("badpem");
    std::fs::write(dir.join("junk.key"), "not a key").expect("write");
    let user = format!(
        "    client-certificate: {}\n    client-key: {}\n",
        testdata("client.crt").display(),
        dir.join("junk.key").display()
    );
    let error = Config::from_kubeconfig(&kubeconfig_with_user(&user), None).expect_err("bad key");
    assert!(matches!(error, ConfigError::Pem { .. }), "{error}");
    assert!(error.to_string().contains("junk.key"), "{error}");

    let user = format!(
        "    client-certificate: {}\n",
        testdata("client.crt").display()
    );
    let error = Config::from_kubeconfig(&kubeconfig_with_user(&user), None).expect_err("no key");
    assert!(error.to_string().contains("client-key"), "{error}");

    let user = "    client-key: /nonexistent/k.key\n    client-certificate: /nonexistent/c.crt\n";
    let error = Config::from_kubeconfig(&kubeconfig_with_user(user), None).expect_err("no file");
    assert!(error.to_string().contains("/nonexistent/"), "{error}");
}

#[tokio::test]
async fn token_basic_and_token_file() {
    let config =
        Config::from_kubeconfig(&kubeconfig_with_user("    token: t0k\n"), None).expect("config");
    let header = config.auth.header().await.expect("header");
    assert_eq!(header.expect("some").to_str().ok(), Some("Bearer t0k"));

    let user = "    username: admin\n    password: s3cret\n";
    let config = Config::from_kubeconfig(&kubeconfig_with_user(user), None).expect("config");
    let header = config.auth.header().await.expect("header").expect("some");
    assert_eq!(header.to_str().ok(), Some("Basic YWRtaW46czNjcmV0"));

    let dir = scratch("tokenfile");
    let path = dir.join("token");
    std::fs::write(&path, "first\n").expect("write");
    let user = format!("    tokenFile: {}\n", path.display());
    let config = Config::from_kubeconfig(&kubeconfig_with_user(&user), None).expect("config");
    let read = |auth: &Auth| match auth {
        Auth::TokenFile(file) => file.token().expect("token"),
        other => panic!("not a token file: {other:?}"),
    };
    assert_eq!(read(&config.auth), "first");
    std::fs::write(&path, "second\n").expect("rewrite");
    config.auth.invalidate(); // as after a 401; otherwise the next check is within a second
    assert_eq!(read(&config.auth), "second");
}

#[tokio::test]
async fn exec_plugin_token_is_cached_and_refetched_after_invalidate() {
    let dir = scratch("exec");
    let counter = dir.join("runs");
    let script = dir.join("plugin.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho run >> {counter}\nn=$(wc -l < {counter})\ncase \"$KUBERNETES_EXEC_INFO\" in *'\"interactive\":false'*) ;; *) exit 9;; esac\nprintf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"%s-%s\"}}}}' \"$GREETING\" \"$n\"\n",
            counter = counter.display()
        ),
    )
    .expect("script");
    let user = format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: [{}]\n      env: [{{name: GREETING, value: hi}}]\n      interactiveMode: Never\n",
        script.display()
    );
    let config = Config::from_kubeconfig(&kubeconfig_with_user(&user), None).expect("config");
    let token =
        |h: Option<http::HeaderValue>| h.expect("header").to_str().expect("ascii").to_owned();
    assert_eq!(
        token(config.auth.header().await.expect("run 1")),
        "Bearer hi-1"
    );
    assert_eq!(
        token(config.auth.header().await.expect("cached")),
        "Bearer hi-1"
    );
    config.auth.invalidate();
    assert_eq!(
        token(config.auth.header().await.expect("run 2")),
        "Bearer hi-2"
    );
}

#[tokio::test]
async fn a_failing_exec_plugin_is_a_typed_error() {
    let user = "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: /bin/sh\n      args: ['-c', 'echo denied >&2; exit 3']\n";
    let config = Config::from_kubeconfig(&kubeconfig_with_user(user), None).expect("config");
    let error = config.auth.header().await.expect_err("plugin fails");
    assert!(matches!(error, ConfigError::Exec { .. }), "{error}");
    assert!(error.to_string().contains("denied"), "{error}");

    let user =
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1alpha1\n      command: x\n";
    let error = Config::from_kubeconfig(&kubeconfig_with_user(user), None).expect_err("old api");
    assert!(error.to_string().contains("v1alpha1"), "{error}");
}

#[test]
fn missing_server_and_bad_urls_are_errors() {
    let config = Kubeconfig::parse(
        "current-context: c\nclusters: [{name: k, cluster: {}}]\ncontexts: [{name: c, context: {cluster: k}}]\n",
    )
    .expect("parses");
    let error = Config::from_kubeconfig(&config, None).expect_err("no server");
    assert_eq!(error.to_string(), "cluster \"k\" has no server");
    let config = Kubeconfig::parse(
        "current-context: c\nclusters: [{name: k, cluster: {server: 'ftp://x'}}]\ncontexts: [{name: c, context: {cluster: k}}]\n",
    )
    .expect("parses");
    assert!(matches!(
        Config::from_kubeconfig(&config, None),
        Err(ConfigError::InvalidUrl { .. })
    ));
}

#[test]
fn reading_files_reports_the_path() {
    let dir = scratch("files");
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "clusters: {not: [a list").expect("write");
    let error =
        Config::from_kubeconfig_files(std::slice::from_ref(&bad), None).expect_err("malformed");
    assert!(error.to_string().contains("bad.yaml"), "{error}");
    let error = Config::from_kubeconfig_files(&[dir.join("absent")], None).expect_err("absent");
    assert!(matches!(error, ConfigError::NotFound { .. }), "{error}");
}

/// A kubeconfig whose cluster `k` has `cluster_fields` (YAML lines indented by four).
fn kubeconfig_with_cluster(cluster_fields: &str) -> Kubeconfig {
    let text = format!(
        "current-context: c\nclusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:6443\n{cluster_fields}contexts:\n- name: c\n  context: {{cluster: k, user: u}}\nusers:\n- name: u\n  user: {{token: t}}\n"
    );
    Kubeconfig::parse(&text).expect("test kubeconfig parses")
}

#[tokio::test]
async fn insecure_skip_tls_verify_with_a_certificate_authority_is_refused_when_a_client_is_built() {
    let ca_pem = std::fs::read(testdata("client.crt")).expect("ca");
    let ca_data = base64::engine::general_purpose::STANDARD.encode(&ca_pem);
    for ca in [
        format!(
            "    certificate-authority: {}\n",
            testdata("client.crt").display()
        ),
        format!("    certificate-authority-data: {ca_data}\n"),
    ] {
        let kubeconfig =
            kubeconfig_with_cluster(&format!("{ca}    insecure-skip-tls-verify: true\n"));
        // Loading is not refused (nor is `kubectl config view`): client-go refuses when it builds
        // the transport.
        let config = Config::from_kubeconfig(&kubeconfig, None).expect("the kubeconfig loads");
        assert!(config.accept_invalid_certs && config.root_certs.is_some());
        let error = crate::Client::new(config).expect_err("a CA with insecure-skip-tls-verify");
        assert!(
            matches!(
                error,
                crate::Error::Config(ConfigError::InsecureWithCertificateAuthority)
            ),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains("insecure-skip-tls-verify")
                && message.contains("certificate authority"),
            "{message}"
        );
    }

    // Either one alone is accepted.
    let insecure = kubeconfig_with_cluster("    insecure-skip-tls-verify: true\n");
    let config = Config::from_kubeconfig(&insecure, None).expect("insecure alone loads");
    crate::Client::new(config).expect("insecure-skip-tls-verify without a CA builds a client");
    let verified = kubeconfig_with_cluster(&format!(
        "    certificate-authority: {}\n",
        testdata("client.crt").display()
    ));
    let config = Config::from_kubeconfig(&verified, None).expect("a CA alone loads");
    crate::Client::new(config).expect("a CA without insecure-skip-tls-verify builds a client");

    // So is a config set up in code, as an in-cluster one with the flag turned on afterwards.
    let mut config = Config::new("https://10.96.0.1:443".parse().expect("url"));
    config.root_certs = Some(parse_certs(&ca_pem, "ca").expect("ca parses"));
    config.accept_invalid_certs = true;
    assert!(matches!(
        crate::Client::new(config),
        Err(crate::Error::Config(
            ConfigError::InsecureWithCertificateAuthority
        ))
    ));
}

#[test]
fn url_passwords_are_redacted_and_the_rest_kept() {
    for (url, redacted) in [
        (
            "http://me:s3cret@proxy.example:3128",
            "http://me:<redacted>@proxy.example:3128",
        ),
        (
            "socks5://me:p%40ss@proxy.example/x?y#z",
            "socks5://me:<redacted>@proxy.example/x?y#z",
        ),
        // A user name alone stays, as Go's URL.Redacted leaves it.
        ("http://me@proxy.example", "http://me@proxy.example"),
        ("http://proxy.example/a@b", "http://proxy.example/a@b"),
        ("https://127.0.0.1:6443", "https://127.0.0.1:6443"),
        // Not a URL (no scheme): still no password.
        ("me:s3cret@proxy:3128", "me:<redacted>@proxy:3128"),
        ("", ""),
    ] {
        assert_eq!(redact_url_password(url), redacted, "{url}");
    }
}
