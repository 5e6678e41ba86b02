//! Errors of the client: what the API server said, and what went wrong on the way to it.
//!
//! When the API server refuses a request it answers with a `Status` object, e.g.
//!
//! ```text
//! HTTP/1.1 409 Conflict
//! {"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409,
//!  "message":"Operation cannot be fulfilled on pods \"web\": the object has been modified; ..."}
//! ```
//!
//! [`Error::Api`] carries that object decoded into an [`ApiError`], whose [`Reason`] is what controllers
//! branch on (`if err.is_conflict() { requeue }`). When the body is not a `Status` (a proxy's HTML
//! page, an empty 503), the reason is inferred from the HTTP code, as client-go does. Everything else
//! (no connection, a timeout, a body that does not decode) has its own variant, so no failure is
//! reported as something it is not.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusDetails};

use crate::config::ConfigError;

/// Every error the client returns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server answered with an error status.
    #[error("{0}")]
    Api(Box<ApiError>),
    /// The connection failed, was refused, or broke mid-request. The message carries every cause
    /// (hyper's own says only "client error (Connect)"; the reason, e.g. an invalid certificate or a
    /// proxy's 407, is further down the chain).
    #[error("transport error talking to {url}: {}", causes(.source.as_ref()))]
    Transport {
        url: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// No answer within the request timeout (default 30 s; watches have none).
    #[error("request to {url} timed out after {after:?}")]
    Timeout { url: String, after: Duration },
    /// The connection stayed silent for longer than the server promised it would (a watch: its
    /// bookmarks or its `timeoutSeconds`; a response body: the request timeout between two
    /// pieces), so it is presumed dead: a server that died without a FIN or RST, a load balancer
    /// or NAT that forgot the connection. Retried like a timeout; a watch resumes.
    #[error("no data from {url} for {after:?}: the connection is presumed dead")]
    Idle { url: String, after: Duration },
    /// A watch event or an error body longer than the client accepts (`limit` bytes): the rest
    /// was not read.
    #[error("{what} from {url} is longer than {limit} bytes")]
    TooLarge {
        what: &'static str,
        url: String,
        limit: usize,
    },
    /// A body (a response, or one line of a watch stream) did not decode as what it should be.
    #[error("could not decode {what}: {source}")]
    Decode {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// A body the server sent gzip-compressed (`Content-Encoding: gzip`) is not a valid gzip
    /// stream: a corrupt deflate block, a wrong CRC or length, or a member cut short.
    #[error("the gzip-compressed body from {url} is corrupt: {source}")]
    Decompress {
        url: String,
        #[source]
        source: std::io::Error,
    },
    /// A protobuf body (`application/vnd.kubernetes.protobuf`, see [`crate::protobuf`]) did not
    /// decode as what it should be.
    #[error("could not decode {what} (protobuf): {source}")]
    DecodeProtobuf {
        what: String,
        #[source]
        source: crate::protobuf::error::Error,
    },
    /// A request could not be built (for example a name that is not a valid URL path segment).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The configuration (kubeconfig, in-cluster files, credentials) is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A write refused by the handle's write gate ([`Client::with_write_gate`]): this process does
    /// not hold (or may no longer hold) the lease its writes depend on. **Nothing was sent.**
    ///
    /// [`Client::with_write_gate`]: crate::Client::with_write_gate
    #[error("{method} {url} was not sent: {source}")]
    NotLeader {
        method: String,
        url: String,
        /// Boxed to keep `Error` small (it is the `Err` of every request).
        source: Box<crate::write_gate::NotLeader>,
    },
}

/// The reason a `Status` gives (`metav1.StatusReason`), or the one its HTTP code implies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    AlreadyExists,
    Conflict,
    /// 410 with reason `Gone`: the requested resourceVersion is no longer available.
    Gone,
    /// 410 with reason `Expired`: e.g. an expired `continue` token, or "too old resource version".
    Expired,
    /// 422: the object failed validation; the causes are in [`ApiError::details`].
    Invalid,
    MethodNotAllowed,
    NotAcceptable,
    UnsupportedMediaType,
    TooManyRequests,
    /// 504 `Timeout`: the request could not be finished in time.
    Timeout,
    /// 500 with `ServerTimeout`: the server could not finish within its own limit; retry.
    ServerTimeout,
    InternalError,
    ServiceUnavailable,
    /// A reason this client does not know, as the server spelled it.
    Other(String),
}

impl Reason {
    /// The reason named in a `Status`, falling back to the one `code` implies when it names none.
    pub fn new(reason: Option<&str>, code: u16) -> Reason {
        match reason.unwrap_or_default() {
            "BadRequest" => Reason::BadRequest,
            "Unauthorized" => Reason::Unauthorized,
            "Forbidden" => Reason::Forbidden,
            "NotFound" => Reason::NotFound,
            "AlreadyExists" => Reason::AlreadyExists,
            "Conflict" => Reason::Conflict,
            "Gone" => Reason::Gone,
            "Expired" => Reason::Expired,
            "Invalid" => Reason::Invalid,
            "MethodNotAllowed" => Reason::MethodNotAllowed,
            "NotAcceptable" => Reason::NotAcceptable,
            "UnsupportedMediaType" => Reason::UnsupportedMediaType,
            "TooManyRequests" => Reason::TooManyRequests,
            "Timeout" => Reason::Timeout,
            "ServerTimeout" => Reason::ServerTimeout,
            "InternalError" => Reason::InternalError,
            "ServiceUnavailable" => Reason::ServiceUnavailable,
            "" => Reason::from_code(code),
            other => Reason::Other(other.to_string()),
        }
    }

    /// The reason client-go assumes for an error response without a `Status` body.
    pub fn from_code(code: u16) -> Reason {
        match code {
            400 => Reason::BadRequest,
            401 => Reason::Unauthorized,
            403 => Reason::Forbidden,
            404 => Reason::NotFound,
            405 => Reason::MethodNotAllowed,
            406 => Reason::NotAcceptable,
            409 => Reason::Conflict,
            410 => Reason::Gone,
            415 => Reason::UnsupportedMediaType,
            422 => Reason::Invalid,
            429 => Reason::TooManyRequests,
            503 => Reason::ServiceUnavailable,
            504 => Reason::Timeout,
            500..=599 => Reason::InternalError,
            other => Reason::Other(format!("HTTP {other}")),
        }
    }
}

/// An error `Status` from the API server.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code (the `Status.code` field when the body had one).
    pub code: u16,
    pub reason: Reason,
    /// The server's message, e.g. `pods "web" not found`.
    pub message: String,
    /// Name, kind and, for `Invalid`, the field causes.
    pub details: Option<StatusDetails>,
    /// From a `Retry-After` header or `details.retryAfterSeconds`.
    pub retry_after: Option<Duration>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({:?}): {}", self.code, self.reason, self.message)
    }
}

impl ApiError {
    /// Builds the error from a `Status` object; `http_code` is used when the status has no code.
    pub fn from_status(status: Status, http_code: u16) -> ApiError {
        let code = status
            .code
            .and_then(|c| u16::try_from(c).ok())
            .filter(|c| *c >= 400)
            .unwrap_or(http_code);
        let retry_after = status
            .details
            .as_ref()
            .and_then(|d| d.retry_after_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs);
        ApiError {
            code,
            reason: Reason::new(status.reason.as_deref(), code),
            message: status.message.unwrap_or_default(),
            details: status.details,
            retry_after,
        }
    }

    /// Builds the error from an error response: its body is decoded as a `Status` if it is one,
    /// otherwise kept (shortened) as the message.
    pub fn from_response(code: u16, body: &[u8], retry_after: Option<Duration>) -> ApiError {
        let mut error = match serde_json::from_slice::<Status>(body) {
            Ok(status) if status.status.as_deref() == Some("Failure") || status.code.is_some() => {
                ApiError::from_status(status, code)
            }
            _ => {
                let text = String::from_utf8_lossy(body);
                let message: String = text.trim().chars().take(512).collect();
                ApiError {
                    code,
                    reason: Reason::from_code(code),
                    message,
                    details: None,
                    retry_after: None,
                }
            }
        };
        if retry_after.is_some() {
            error.retry_after = retry_after;
        }
        error
    }
}

impl Error {
    /// The API error, if the server answered with one.
    pub fn api(&self) -> Option<&ApiError> {
        match self {
            Error::Api(api) => Some(api),
            _ => None,
        }
    }

    fn reason_is(&self, wanted: impl Fn(&Reason) -> bool) -> bool {
        self.api().is_some_and(|api| wanted(&api.reason))
    }

    pub fn is_not_found(&self) -> bool {
        self.reason_is(|r| *r == Reason::NotFound)
    }
    pub fn is_already_exists(&self) -> bool {
        self.reason_is(|r| *r == Reason::AlreadyExists)
    }
    pub fn is_conflict(&self) -> bool {
        self.reason_is(|r| *r == Reason::Conflict)
    }
    /// 410 Gone or Expired: the resourceVersion (or continue token) is too old; relist.
    pub fn is_gone(&self) -> bool {
        self.reason_is(|r| matches!(r, Reason::Gone | Reason::Expired))
            || self.api().is_some_and(|api| api.code == 410)
    }
    pub fn is_invalid(&self) -> bool {
        self.reason_is(|r| *r == Reason::Invalid)
    }
    pub fn is_forbidden(&self) -> bool {
        self.reason_is(|r| *r == Reason::Forbidden)
    }
    pub fn is_unauthorized(&self) -> bool {
        self.reason_is(|r| *r == Reason::Unauthorized)
    }
    pub fn is_too_many_requests(&self) -> bool {
        self.reason_is(|r| *r == Reason::TooManyRequests)
    }
    /// A 5xx answer.
    pub fn is_server_error(&self) -> bool {
        self.api().is_some_and(|api| api.code >= 500)
    }
    /// A write refused by a write gate, unsent ([`Error::NotLeader`]).
    pub fn is_not_leader(&self) -> bool {
        matches!(self, Error::NotLeader { .. })
    }
    /// A timeout, ours or the server's.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. } | Error::Idle { .. })
            || self.reason_is(|r| matches!(r, Reason::Timeout | Reason::ServerTimeout))
    }
}

/// `error` and each of its sources, joined by ": ", with repeats (a wrapper that prints its
/// source's message as its own) left out.
fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let message = cause.to_string();
        if !text.ends_with(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        next = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conflict_status_decodes_with_its_reason() {
        let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be fulfilled on pods \"web\": the object has been modified","reason":"Conflict","details":{"name":"web","kind":"pods"},"code":409}"#;
        let error = Error::Api(Box::new(ApiError::from_response(409, body, None)));
        assert!(error.is_conflict());
        assert!(!error.is_not_found());
        let api = error.api().expect("api error");
        assert_eq!(api.code, 409);
        assert!(api.message.contains("has been modified"));
        assert_eq!(
            api.details.as_ref().and_then(|d| d.name.as_deref()),
            Some("web")
        );
    }

    #[test]
    fn invalid_keeps_field_causes() {
        let body = br#"{"kind":"Status","status":"Failure","reason":"Invalid","code":422,"message":"bad","details":{"causes":[{"reason":"FieldValueRequired","field":"spec.containers"}]}}"#;
        let api = ApiError::from_response(422, body, None);
        assert_eq!(api.reason, Reason::Invalid);
        let causes = api.details.and_then(|d| d.causes).unwrap_or_default();
        assert_eq!(causes[0].field.as_deref(), Some("spec.containers"));
    }

    #[test]
    fn expired_and_gone_are_both_gone() {
        let expired = br#"{"kind":"Status","status":"Failure","reason":"Expired","code":410,"message":"too old resource version: 1 (500)"}"#;
        assert!(Error::Api(Box::new(ApiError::from_response(410, expired, None))).is_gone());
        assert!(Error::Api(Box::new(ApiError::from_response(410, b"", None))).is_gone());
    }

    #[test]
    fn a_body_that_is_not_a_status_falls_back_to_the_code() {
        let api = ApiError::from_response(
            503,
            b"<html>upstream down</html>",
            Some(Duration::from_secs(3)),
        );
        assert_eq!(api.reason, Reason::ServiceUnavailable);
        assert_eq!(api.message, "<html>upstream down</html>");
        assert_eq!(api.retry_after, Some(Duration::from_secs(3)));
        let api = ApiError::from_response(429, b"", None);
        assert_eq!(api.reason, Reason::TooManyRequests);
    }

    #[test]
    fn unknown_reasons_are_kept_verbatim() {
        assert_eq!(
            Reason::new(Some("SomethingNew"), 400),
            Reason::Other("SomethingNew".into())
        );
    }
}
