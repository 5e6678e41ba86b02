//! What each URL answers. Everything is in memory: the page and the docs are compiled in, the
//! data comes from the [`Journal`].
//!
//! | method | path | answer |
//! |---|---|---|
//! | GET | `/` | the page (HTML, CSS and JS in one file) |
//! | GET | `/api/snapshot` | [`Snapshot`](super::Snapshot) |
//! | GET | `/api/events?after=SEQ[&limit=N]` | [`EventsPage`](super::EventsPage): at most N (default 1000) records after SEQ |
//! | GET | `/api/follow?key=K` | [`KeyStory`](super::KeyStory): the ring's records of K |
//! | GET | `/api/actions` | `[ActionInfo]` |
//! | POST | `/api/actions/{id}` | [`ActionOutcome`](super::ActionOutcome); 404 for an unknown id |
//! | GET | `/doc` | the embedded files: `[{"path", "stage"}]` |
//! | GET | `/doc/{path}` | that file's module docs, Markdown as plain text |
//! | GET | `/tour` | `view/docs/tour.md`, Markdown as plain text |
//!
//! A bad parameter is a 400, an unknown path a 404, a known path with the wrong method a 405.
//! Before any of that, a request whose `Host` or `Origin` names a host the view does not answer to
//! is a 403 (see [`HostGuard`]: web pages must not drive the view).

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use serde::Serialize;

use super::actions::{ActionOutcome, ActionTable};
use super::docs;
use super::host_guard::HostGuard;
use super::journal::{DEFAULT_EVENTS_LIMIT, Journal};
use super::query::{percent_decoded, query_param};

/// The page, `page.html`.
pub(crate) const PAGE: &str = include_str!("page.html");

/// What every connection's requests are answered from.
#[derive(Clone)]
pub(crate) struct ViewState {
    pub(crate) journal: Journal,
    pub(crate) actions: ActionTable,
    /// Which `Host` and `Origin` headers are answered.
    pub(crate) guard: HostGuard,
}

type Reply = Response<Full<Bytes>>;

/// The answer to `request`.
pub(crate) async fn answer<B>(request: Request<B>, state: &ViewState) -> Reply {
    if let Err(why) = state.guard.check(request.headers()) {
        tracing::warn!(path = request.uri().path(), %why, "live view: request refused");
        return text_reply(
            StatusCode::FORBIDDEN,
            format!("forbidden: {why}\n"),
            "text/plain; charset=utf-8",
        );
    }
    let path = request.uri().path();
    let query = request.uri().query();
    let method = request.method();
    let get = method == Method::GET || method == Method::HEAD;
    if let Some(id) = path.strip_prefix("/api/actions/") {
        if method != Method::POST {
            return not_allowed("POST");
        }
        return run_action(state, &percent_decoded(id, false)).await;
    }
    if let Some(doc_path) = path.strip_prefix("/doc/") {
        if !get {
            return not_allowed("GET, HEAD");
        }
        return match docs::module_docs(&percent_decoded(doc_path, false)) {
            Some(text) => text_reply(StatusCode::OK, text, "text/plain; charset=utf-8"),
            None => not_found(),
        };
    }
    let known = matches!(
        path,
        "/" | "/index.html"
            | "/api/snapshot"
            | "/api/events"
            | "/api/follow"
            | "/api/actions"
            | "/doc"
            | "/tour"
    );
    if !known {
        return not_found();
    }
    if !get {
        return not_allowed("GET, HEAD");
    }
    match path {
        "/" | "/index.html" => text_reply(StatusCode::OK, PAGE.into(), "text/html; charset=utf-8"),
        "/api/snapshot" => json_reply(StatusCode::OK, &state.journal.snapshot()),
        "/api/events" => events(state, query),
        "/api/follow" => match query_param(query, "key") {
            Some(key) => json_reply(StatusCode::OK, &state.journal.follow(&key)),
            None => bad_request("key is required"),
        },
        "/api/actions" => json_reply(StatusCode::OK, &state.actions.list()),
        "/doc" => json_reply(StatusCode::OK, &doc_index()),
        _ => text_reply(
            StatusCode::OK,
            docs::TOUR.into(),
            "text/plain; charset=utf-8",
        ),
    }
}

fn events(state: &ViewState, query: Option<&str>) -> Reply {
    let number = |name: &str| query_param(query, name).map(|text| text.parse::<u64>());
    let after = match number("after") {
        None => 0,
        Some(Ok(after)) => after,
        Some(Err(_)) => return bad_request("after must be a sequence number"),
    };
    let limit = match number("limit") {
        None => DEFAULT_EVENTS_LIMIT,
        Some(Ok(limit)) => usize::try_from(limit).unwrap_or(usize::MAX),
        Some(Err(_)) => return bad_request("limit must be a number"),
    };
    json_reply(StatusCode::OK, &state.journal.events_after(after, limit))
}

async fn run_action(state: &ViewState, id: &str) -> Reply {
    let Some(action) = state.actions.get(id) else {
        return not_found();
    };
    let run = action.run.clone();
    match tokio::task::spawn_blocking(move || run()).await {
        Ok(result) => {
            tracing::info!(action = id, %result, "live view: action ran");
            json_reply(
                StatusCode::OK,
                &ActionOutcome {
                    id: id.to_owned(),
                    result,
                },
            )
        }
        Err(error) => {
            tracing::warn!(action = id, %error, "live view: action failed");
            json_reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                &ActionOutcome {
                    id: id.to_owned(),
                    result: format!("the action failed: {error}"),
                },
            )
        }
    }
}

/// One entry of `/doc`.
#[derive(Serialize)]
struct DocEntry {
    path: &'static str,
    stage: &'static str,
}

fn doc_index() -> Vec<DocEntry> {
    docs::SOURCES
        .iter()
        .map(|source| DocEntry {
            path: source.path,
            stage: source.stage,
        })
        .collect()
}

fn json_reply<T: Serialize>(status: StatusCode, value: &T) -> Reply {
    match serde_json::to_string(value) {
        Ok(json) => text_reply(status, json, "application/json"),
        Err(error) => {
            tracing::warn!(%error, "live view: encoding an answer failed");
            text_reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("encoding failed: {error}\n"),
                "text/plain; charset=utf-8",
            )
        }
    }
}

fn bad_request(why: &str) -> Reply {
    text_reply(
        StatusCode::BAD_REQUEST,
        format!("{why}\n"),
        "text/plain; charset=utf-8",
    )
}

fn not_found() -> Reply {
    text_reply(
        StatusCode::NOT_FOUND,
        "not found\n".into(),
        "text/plain; charset=utf-8",
    )
}

fn not_allowed(allow: &'static str) -> Reply {
    let mut reply = text_reply(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed\n".into(),
        "text/plain; charset=utf-8",
    );
    reply
        .headers_mut()
        .insert(header::ALLOW, http::HeaderValue::from_static(allow));
    reply
}

fn text_reply(status: StatusCode, body: String, content_type: &'static str) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(body)));
    *reply.status_mut() = status;
    let headers = reply.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    // Live data: never answer from a cache.
    headers.insert(
        header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    reply
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::Empty;

    use super::*;
    use crate::actions::RegisteredAction;

    /// A view bound to `bound`, with one action that counts its runs.
    fn state(bound: SocketAddr, names: &[String]) -> (ViewState, Arc<AtomicUsize>) {
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = runs.clone();
        let mut actions = ActionTable::default();
        actions.register(RegisteredAction {
            id: "kill".into(),
            label: "Kill a pod".into(),
            run: Arc::new(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                "killed".into()
            }),
        });
        let state = ViewState {
            journal: Journal::default(),
            actions,
            guard: HostGuard::new(bound, names),
        };
        (state, runs)
    }

    fn request(method: Method, path: &str, headers: &[(&str, &str)]) -> Request<Empty<Bytes>> {
        let mut builder = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        match builder.body(Empty::new()) {
            Ok(request) => request,
            Err(error) => panic!("a test request: {error}"),
        }
    }

    /// A request (method, path, headers) and the status it must get.
    type Case<'a> = (Method, &'a str, &'a [(&'a str, &'a str)], u16);

    #[tokio::test]
    async fn abuse_web_pages_cannot_read_or_drive_the_view() {
        let (state, runs) = state(
            SocketAddr::from(([127, 0, 0, 1], 8080)),
            &["my-laptop".to_string()],
        );
        let page = "http://127.0.0.1:8080";
        // (method, path, headers, status): Host for DNS rebinding, Origin for cross-site requests.
        let cases: &[Case] = &[
            (
                Method::GET,
                "/api/snapshot",
                &[("host", "127.0.0.1:8080")],
                200,
            ),
            (
                Method::GET,
                "/api/snapshot",
                &[("host", "localhost:8080")],
                200,
            ),
            (Method::GET, "/api/snapshot", &[("host", "[::1]:8080")], 200),
            (
                Method::GET,
                "/api/snapshot",
                &[("host", "MY-LAPTOP:8080")],
                200,
            ),
            (Method::GET, "/api/snapshot", &[], 200),
            (Method::GET, "/", &[("host", "evil.example:8080")], 403),
            (
                Method::GET,
                "/api/snapshot",
                &[("host", "evil.example")],
                403,
            ),
            (
                Method::GET,
                "/api/events",
                &[("host", "127.0.0.1.nip.io:8080")],
                403,
            ),
            (
                Method::GET,
                "/api/snapshot",
                &[("host", "10.1.2.3:8080")],
                403,
            ),
            (
                Method::GET,
                "/api/snapshot",
                &[
                    ("host", "127.0.0.1:8080"),
                    ("origin", "https://evil.example"),
                ],
                403,
            ),
            (
                Method::POST,
                "/api/actions/kill",
                &[
                    ("host", "evil.example:8080"),
                    ("origin", "http://evil.example:8080"),
                ],
                403,
            ),
            (
                Method::POST,
                "/api/actions/kill",
                &[
                    ("host", "127.0.0.1:8080"),
                    ("origin", "https://evil.example"),
                ],
                403,
            ),
            (
                Method::POST,
                "/api/actions/kill",
                &[("host", "127.0.0.1:8080"), ("origin", "null")],
                403,
            ),
            (
                Method::POST,
                "/api/actions/kill",
                &[("host", "127.0.0.1:8080"), ("origin", page)],
                200,
            ),
            (
                Method::POST,
                "/api/actions/kill",
                &[("host", "127.0.0.1:8080")],
                200,
            ),
        ];
        for (method, path, headers, status) in cases {
            let reply = answer(request(method.clone(), path, headers), &state).await;
            assert_eq!(
                reply.status().as_u16(),
                *status,
                "{method} {path} {headers:?}"
            );
        }
        // Only the two allowed presses ran the action.
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn abuse_a_view_bound_elsewhere_answers_its_address_only() {
        let (specific, _) = state(SocketAddr::from(([192, 168, 1, 5], 8080)), &[]);
        let (everywhere, _) = state(SocketAddr::from(([0, 0, 0, 0], 8080)), &[]);
        let cases = [
            (&specific, "192.168.1.5:8080", 200),
            (&specific, "192.168.1.6:8080", 403),
            (&specific, "laptop.local:8080", 403),
            (&everywhere, "192.168.1.6:8080", 200),
            (&everywhere, "laptop.local:8080", 403),
        ];
        for (state, host, status) in cases {
            let reply = answer(
                request(Method::GET, "/api/actions", &[("host", host)]),
                state,
            )
            .await;
            assert_eq!(reply.status().as_u16(), status, "{host}");
        }
    }
}
