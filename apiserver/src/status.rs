//! Failed requests, as the API server reports them: a `Status` object with an HTTP code, a machine
//! reason and a human message.
//!
//! Clients branch on `code` and `reason` (client-go's `errors.IsNotFound`, ferrokube's
//! `Error::is_conflict`), and people read `message`, so both follow kube-apiserver's wording:
//! `pods "web-1" not found`, `replicasets.apps "web" already exists`, `Operation cannot be fulfilled on
//! pods "web-1": the object has been modified; please apply your changes to the latest version and try
//! again`. The conformance suite (`tests/apiserver/conformance.rs`) checks them against the real server.

use serde_json::{Value, json};

/// One field-level problem inside an `Invalid` (422) status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueTooLong`, ...
    pub reason: &'static str,
    /// `metadata.name`, `spec.containers[0].image`, ...
    pub field: String,
    /// What is wrong, e.g. `Required value`.
    pub message: String,
}

impl Cause {
    /// A value that is present but not acceptable.
    pub fn invalid(field: &str, value: &str, detail: &str) -> Cause {
        Cause {
            reason: "FieldValueInvalid",
            field: field.to_string(),
            message: format!("Invalid value: {value:?}: {detail}"),
        }
    }

    /// A value that must be present and is not.
    pub fn required(field: &str) -> Cause {
        Cause {
            reason: "FieldValueRequired",
            field: field.to_string(),
            message: "Required value".to_string(),
        }
    }

    /// A field that may not change once set.
    pub fn immutable(field: &str) -> Cause {
        Cause {
            reason: "FieldValueInvalid",
            field: field.to_string(),
            message: "Invalid value: field is immutable".to_string(),
        }
    }
}

/// A request the server refuses; rendered as a `Status` body with [`StatusError::code`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct StatusError {
    /// The HTTP status code, repeated in the body's `code`.
    pub code: u16,
    /// The machine-readable reason (`NotFound`, `Conflict`, `Expired`, ...).
    pub reason: &'static str,
    /// The human-readable message.
    pub message: String,
    /// `details` of the Status (name, group, kind, causes, retryAfterSeconds), if any.
    pub details: Option<Value>,
}

impl StatusError {
    /// A status without details. The errors about one object of a served type (`not_found`,
    /// `already_exists`, `conflict`, `invalid`, `forbidden`) are made in [`crate::resource`], next
    /// to [`ResourceType`](crate::resource::ResourceType), so that this module, which every other
    /// uses, depends on none.
    pub(crate) fn new(code: u16, reason: &'static str, message: String) -> StatusError {
        StatusError {
            code,
            reason,
            message,
            details: None,
        }
    }

    /// 404 `NotFound` for a URL that names no resource.
    pub fn no_such_resource() -> StatusError {
        let message = "the server could not find the requested resource".to_string();
        let mut error = StatusError::new(404, "NotFound", message);
        error.details = Some(json!({}));
        error
    }

    /// The `why` of a stale-resourceVersion conflict.
    pub const MODIFIED: &'static str = "the object has been modified; please apply your changes to the latest version and try again";

    /// 422 `Invalid` for a patch that cannot be applied.
    pub fn invalid_patch(message: impl Into<String>) -> StatusError {
        StatusError::new(422, "Invalid", message.into())
    }

    /// 422 `Invalid` for request options that do not validate (kube-apiserver validates
    /// DeleteOptions, for one): `<kind> "" is invalid: <why>`.
    pub fn invalid_options(kind: &str, why: &str) -> StatusError {
        StatusError::new(422, "Invalid", format!("{kind} \"\" is invalid: {why}"))
    }

    /// 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> StatusError {
        StatusError::new(400, "BadRequest", message.into())
    }

    /// 410 `Expired`: a resourceVersion or continue token older than the retained history.
    pub fn expired(message: impl Into<String>) -> StatusError {
        StatusError::new(410, "Expired", message.into())
    }

    /// 410 `Expired` for a watch or list from a resourceVersion that was compacted away.
    pub fn too_old(requested: u64, oldest: u64) -> StatusError {
        StatusError::expired(format!("too old resource version: {requested} ({oldest})"))
    }

    /// 410 `Expired` for a continue token whose snapshot was compacted away.
    pub fn continue_expired() -> StatusError {
        StatusError::expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
        )
    }

    /// 405 `MethodNotAllowed`.
    pub fn method_not_allowed(method: &str) -> StatusError {
        StatusError::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    /// 415 `UnsupportedMediaType`.
    pub fn unsupported_media_type(content_type: &str) -> StatusError {
        StatusError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format ({content_type}) - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
            ),
        )
    }

    /// 415 `UnsupportedMediaType` with a message of its own (a protobuf body this server cannot
    /// decode in full).
    pub fn unsupported_body(message: impl Into<String>) -> StatusError {
        StatusError::new(415, "UnsupportedMediaType", message.into())
    }

    /// 413 `RequestEntityTooLarge`.
    pub fn too_large() -> StatusError {
        StatusError::new(
            413,
            "RequestEntityTooLarge",
            "Request entity too large: limit is 3145728".to_string(),
        )
    }

    /// 500 `InternalError`.
    pub fn internal(message: impl Into<String>) -> StatusError {
        let mut error = StatusError::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        );
        error.details = Some(json!({"causes": [{"message": error.message.clone()}]}));
        error
    }

    /// A failure kube-apiserver reports without a reason (a Go error that is no API status, such
    /// as its storage's "resourceVersion should not be set on objects to be created"): `code` and
    /// the message as it is.
    pub fn unknown(code: u16, message: impl Into<String>) -> StatusError {
        StatusError::new(code, "", message.into())
    }

    /// 429 `TooManyRequests` with a Retry-After of `seconds`.
    pub fn too_many_requests(seconds: u64) -> StatusError {
        let mut error = StatusError::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.".to_string(),
        );
        error.details = Some(json!({"retryAfterSeconds": seconds}));
        error
    }

    /// 504 `Timeout`: a resourceVersion newer than the server has.
    pub fn too_large_resource_version(requested: u64, current: u64) -> StatusError {
        let mut error = StatusError::new(
            504,
            "Timeout",
            format!("Too large resource version: {requested}, current: {current}"),
        );
        error.details = Some(
            json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}),
        );
        error
    }

    /// Seconds for a `Retry-After` header, when the status carries one.
    pub fn retry_after(&self) -> Option<u64> {
        self.details
            .as_ref()
            .and_then(|d| d.get("retryAfterSeconds"))
            .and_then(Value::as_u64)
    }

    /// The `Status` object sent as the response body (and inside watch `ERROR` events).
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        // An unknown reason is left out, as kube-apiserver's Status leaves an empty one out.
        if let (true, Some(map)) = (self.reason.is_empty(), status.as_object_mut()) {
            map.remove("reason");
        }
        if let (Some(details), Some(map)) = (&self.details, status.as_object_mut()) {
            map.insert("details".into(), details.clone());
        }
        status
    }
}
