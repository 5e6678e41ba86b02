//! `ferrokube::testing::ServerClient`: a client straight from a running embedded server, with no
//! client-side rate limit, over HTTP and over HTTPS with a token.

use ferrokube::Api;
use ferrokube::api::PostParams;
use ferrokube::apiserver::ApiServer;
use ferrokube::testing::ServerClient;
use k8s_openapi::api::core::v1::ConfigMap;

#[tokio::test]
async fn server_client_has_no_rate_limit_and_talks_to_the_server() {
    let server = ApiServer::new().start().await.expect("server starts");
    let config = server.config().expect("config");
    assert_eq!(config.qps, None, "no client-side rate limit");
    assert_eq!(config.with_qps(5.0, 10).qps, Some(5.0));
    let client = server.client().expect("client");
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    cms.create(
        &PostParams::default(),
        &ferrokube_testkit::config_map("web", "v"),
    )
    .await
    .expect("created");
    assert!(cms.get_opt("web").await.expect("read back").is_some());
    let params = ferrokube::api::DeleteParams::default();
    assert!(
        cms.delete_opt("web", &params)
            .await
            .expect("deleted")
            .is_some(),
        "an object that is there is deleted"
    );
    assert!(
        cms.delete_opt("web", &params)
            .await
            .expect("404 is not an error")
            .is_none(),
        "an object already gone answers None"
    );
}

#[tokio::test]
async fn server_client_follows_tls_and_token() {
    let server = ApiServer::new()
        .tls(true)
        .token("s3cret")
        .start()
        .await
        .expect("server starts");
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client().expect("client"));
    cms.create(
        &PostParams::default(),
        &ferrokube_testkit::config_map("web", "v"),
    )
    .await
    .expect("created over https with the token");
}
