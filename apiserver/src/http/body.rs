//! Bodies: reading a request's (at most [`MAX_BODY`] bytes, JSON or protobuf), and writing a
//! response's, a whole buffer or a stream of chunks (a watch).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body::Frame;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::request::BodyFormat;
use crate::status::StatusError;
use crate::store::Stored;

/// The largest request body accepted, of every verb and format (JSON, protobuf, merge, JSON and
/// strategic merge patches, apply YAML); more is 413 `RequestEntityTooLarge`. kube-apiserver's
/// `MaxRequestBodyBytes` (3 MiB, `k8s.io/apiserver/pkg/server/config.go`: twice etcd's 1.5 MB
/// request limit, a JSON body being larger than the protobuf stored), with its message
/// `Request entity too large: limit is 3145728`.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// See the [module docs](self).
pub enum Body {
    /// One buffer (taken on first poll).
    Full(Option<Bytes>),
    /// Chunks until the sender is dropped.
    Stream(mpsc::Receiver<Bytes>),
}

impl Body {
    /// A whole body.
    pub fn full(bytes: impl Into<Bytes>) -> Body {
        Body::Full(Some(bytes.into()))
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Body::Stream(rx) => rx
                .poll_recv(cx)
                .map(|chunk| chunk.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Body::Full(None))
    }
}

pub async fn read_body(body: Incoming) -> Result<Bytes, StatusError> {
    let limited = Limited::new(body, MAX_BODY);
    match limited.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(StatusError::too_large()),
        Err(e) => Err(StatusError::bad_request(format!(
            "reading the request body: {e}"
        ))),
    }
}

/// A JSON body (a patch) and its text.
pub async fn read_json_and_text(body: Incoming) -> Result<(Value, Bytes), StatusError> {
    let bytes = read_body(body).await?;
    let value = serde_json::from_slice(&bytes).map_err(|e| {
        StatusError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })?;
    Ok((value, bytes))
}

/// A create's or update's object: JSON, or Kubernetes protobuf (what kubectl sends for built-in
/// kinds), decoded to JSON by [`crate::protobuf`].
pub async fn read_object(body: Incoming, format: BodyFormat) -> Result<Value, StatusError> {
    read_object_and_text(body, format)
        .await
        .map(|(object, _)| object)
}

/// [`read_object`], and the JSON text the object was read from (none for protobuf): field
/// validation reads it for what the parsed value loses (key order, duplicate keys).
pub async fn read_object_and_text(
    body: Incoming,
    format: BodyFormat,
) -> Result<(Value, Option<Bytes>), StatusError> {
    if format == BodyFormat::Json {
        let (object, text) = read_json_and_text(body).await?;
        return Ok((object, Some(text)));
    }
    let bytes = read_body(body).await?;
    Ok((decode_protobuf(&bytes)?, None))
}

/// A protobuf body in its JSON form: 415 for what the decoder does not support, 400 for what is
/// malformed.
fn decode_protobuf(bytes: &[u8]) -> Result<Value, StatusError> {
    crate::protobuf::decode(bytes).map_err(|e| {
        tracing::debug!(error = %e, "protobuf body refused");
        if e.is_unsupported() {
            StatusError::unsupported_body(e.to_string())
        } else {
            StatusError::bad_request(format!("decoding the protobuf body: {e}"))
        }
    })
}

/// A create's or update's object of a custom kind. kube-apiserver decodes custom objects without
/// a default kind: a JSON body without `kind` is refused (400) quoting the body, where built-in
/// kinds take theirs from the URL.
pub async fn read_custom_object(
    body: Incoming,
    format: BodyFormat,
    kind: &str,
) -> Result<(Value, Option<Bytes>), StatusError> {
    if format != BodyFormat::Json {
        return read_object_and_text(body, format).await;
    }
    let bytes = read_body(body).await?;
    let object: Value = serde_json::from_slice(&bytes).map_err(|e| {
        StatusError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })?;
    if object
        .get("kind")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
        && object.is_object()
    {
        return Err(crate::strategy::missing_kind(kind, &bytes));
    }
    Ok((object, Some(bytes)))
}

pub async fn read_json_or_empty(body: Incoming) -> Result<Value, StatusError> {
    let bytes = read_body(body).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| StatusError::bad_request(format!("json parse error: {e}")))
}

/// A delete's `DeleteOptions` body in its JSON form: `{}` when there is none, decoded by
/// [`crate::protobuf`] when it is protobuf (client-go's typed clients send it so).
pub async fn read_delete_options(body: Incoming, format: BodyFormat) -> Result<Value, StatusError> {
    if format == BodyFormat::Json {
        return read_json_or_empty(body).await;
    }
    let bytes = read_body(body).await?;
    if bytes.is_empty() {
        return Ok(json!({}));
    }
    decode_protobuf(&bytes)
}

pub fn bytes_response(status: StatusCode, body: Bytes) -> Response<Body> {
    let mut response = Response::new(Body::full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// `value` as the JSON body, its keys in kube-apiserver's order ([`crate::wire`]).
pub fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    bytes_response(status, Bytes::from(crate::wire::to_vec(value)))
}

pub fn stored_response(status: StatusCode, stored: &Stored) -> Response<Body> {
    bytes_response(status, stored.json.clone())
}

/// The `Status` response of a failed request.
pub fn error_response(error: &StatusError) -> Response<Body> {
    let status = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(status, &error.to_status());
    if let Some(seconds) = error.retry_after() {
        if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
    }
    response
}

/// The same answer in protobuf (see [`crate::protobuf::answer`]), if it is a whole JSON body of a kind with a protobuf form; else
/// as it is (a custom resource's object, which the request accepted as JSON too).
pub fn transcode(response: Response<Body>) -> Response<Body> {
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes() == b"application/json");
    if !json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Body::Full(Some(bytes)) = body else {
        return Response::from_parts(parts, body);
    };
    let encoded = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .map(|value| crate::protobuf::answer::encode_value(&value));
    match encoded {
        Some(Ok(protobuf)) => {
            parts.headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(ferrokube_core::protobuf::CONTENT_TYPE),
            );
            Response::from_parts(parts, Body::full(protobuf))
        }
        Some(Err(error)) => {
            tracing::debug!(%error, "answer has no protobuf form: JSON");
            Response::from_parts(parts, Body::full(bytes))
        }
        None => Response::from_parts(parts, Body::full(bytes)),
    }
}
