//! Discovery as a cost: clients read `/api` and `/apis` over and over (controller-runtime's
//! `client.New` does on every call), so the server renders each document once per set of served
//! types and answers the rest from memory. These tests count renders, not time: a server that
//! renders per request fails them however fast the machine is.

use bytes::Bytes;
use ferrokube_apiserver::resource::ResourceType;
use ferrokube_apiserver::{ApiServer, RunningServer};
use ferrokube_client::Client;
use ferrokube_client::client::Call;
use http::Request;
use http_body_util::BodyExt;
use serde_json::Value;

const AGGREGATED: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

/// `GET path` with `accept`; the status code and the body's bytes.
async fn get(client: &Client, path: &str, accept: &str) -> (u16, Bytes) {
    let request = Request::builder()
        .uri(path)
        .header("accept", accept)
        .body(Bytes::new())
        .expect("request");
    let call = Call {
        request,
        idempotent: true,
        streaming: false,
    };
    match client.send(call).await {
        Ok(response) => {
            let code = response.status().as_u16();
            let body = response.into_body().collect().await.expect("body");
            (code, body.to_bytes())
        }
        Err(error) => (error.api().map_or(0, |api| api.code), Bytes::new()),
    }
}

/// The discovery documents a client reads (both forms), each asked for `times` times; their bodies
/// from the last round.
async fn read_discovery(client: &Client, times: usize) -> Vec<Bytes> {
    let asks = [
        ("/api", AGGREGATED),
        ("/apis", AGGREGATED),
        ("/apis", "application/json"),
        ("/apis/apps", "application/json"),
        ("/api/v1", "application/json"),
        ("/apis/apps/v1", "application/json"),
    ];
    let mut last = Vec::new();
    for _ in 0..times {
        last.clear();
        for (path, accept) in asks {
            let (code, body) = get(client, path, accept).await;
            assert_eq!(code, 200, "GET {path} ({accept})");
            last.push(body);
        }
    }
    last
}

fn group_names(aggregated: &[u8]) -> Vec<String> {
    let list: Value = serde_json::from_slice(aggregated).expect("APIGroupDiscoveryList");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

async fn server() -> (RunningServer, Client) {
    let server = ApiServer::new().start().await.expect("server");
    let client = ferrokube_testkit::embedded_client(&server, false);
    (server, client)
}

#[tokio::test]
async fn documents_are_rendered_once_per_catalog_not_per_request() {
    let (server, client) = server().await;
    let before = server.discovery_renders();
    let first = read_discovery(&client, 1).await;
    let rendered = server.discovery_renders() - before;
    assert_eq!(rendered, 6, "one render per document the first time");
    let again = read_discovery(&client, 25).await;
    assert_eq!(
        server.discovery_renders() - before,
        rendered,
        "150 more requests for the same documents render nothing"
    );
    assert_eq!(first, again, "the remembered answers are the rendered ones");
}

#[tokio::test]
async fn a_new_type_is_discovered_at_once() {
    let (server, client) = server().await;
    let (_, before) = get(&client, "/apis", AGGREGATED).await;
    assert!(!group_names(&before).contains(&"widgets.example.com".to_string()));
    let renders = server.discovery_renders();
    server
        .registry()
        .register(ResourceType::new("widgets.example.com", "v1", "Widget"));
    let (_, after) = get(&client, "/apis", AGGREGATED).await;
    assert!(
        group_names(&after).contains(&"widgets.example.com".to_string()),
        "the next /apis after the types changed names the new group"
    );
    assert_eq!(server.discovery_renders(), renders + 1, "rendered anew");
    let (code, _) = get(&client, "/apis/widgets.example.com/v1", "application/json").await;
    assert_eq!(code, 200);
    // A path nobody serves is a 404 every time, and is not remembered.
    for _ in 0..3 {
        let (code, _) = get(&client, "/apis/nothing.example.com/v1", "application/json").await;
        assert_eq!(code, 404);
    }
}
