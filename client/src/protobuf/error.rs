//! The one error type of the protobuf decoder.
//!
//! It lives in a module of its own, importing nothing from this crate, because the crate's
//! [`crate::Error`] wraps it: were it defined in `protobuf/mod.rs`, which reaches the API layer
//! through the list decoder, the two modules would import each other.

use ferrokube_core::protobuf::wire::WireError;

/// Why protobuf bytes could not be decoded. Every malformed input ends here; nothing panics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("the body does not start with the Kubernetes protobuf magic bytes \"k8s\\0\"")]
    Magic,
    #[error("truncated protobuf input in {message} at byte {at}")]
    Truncated { message: &'static str, at: usize },
    #[error("malformed varint in {message} at byte {at}")]
    Varint { message: &'static str, at: usize },
    #[error("invalid field number {number} in {message}")]
    FieldNumber { message: &'static str, number: u64 },
    #[error("{message} field {field} has wire type {wire}, which Kubernetes' messages never use")]
    WireType {
        message: &'static str,
        field: u32,
        wire: u8,
    },
    #[error("{message} field {field} has the wrong wire type for its type")]
    WrongType { message: &'static str, field: u32 },
    #[error("{message} field {field} occurs twice")]
    Repeated { message: &'static str, field: u32 },
    #[error("{message} field {field} is not valid UTF-8")]
    Utf8 { message: &'static str, field: u32 },
    #[error("{message} field {field} does not hold valid JSON: {reason}")]
    Json {
        message: &'static str,
        field: u32,
        reason: String,
    },
    #[error("{message} field {field} is not a finite number")]
    NotFinite { message: &'static str, field: u32 },
    #[error("a time {seconds} s from 1970 is outside the years 0 to 9999")]
    TimeRange { seconds: i64 },
    #[error("protobuf messages nested deeper than {limit} levels (in {message})")]
    TooDeep { message: &'static str, limit: usize },
    #[error("the protobuf envelope names no apiVersion/kind")]
    NoTypeMeta,
    #[error("unsupported protobuf contentEncoding {0:?}")]
    ContentEncoding(String),
    #[error("no protobuf schema for {api_version} {kind}")]
    UnknownKind { api_version: String, kind: String },
    #[error("a watch frame of {length} bytes is longer than the {limit}-byte limit")]
    FrameTooLarge { length: usize, limit: usize },
    #[error("the body ended inside {0}")]
    Incomplete(&'static str),
    /// What the target type refused (a wrong `kind`, a missing field, ...).
    #[error("{0}")]
    Custom(String),
}

/// The wire format's errors (core's reader) are this decoder's, variant for variant.
impl From<WireError> for Error {
    fn from(error: WireError) -> Error {
        match error {
            WireError::Truncated { message, at } => Error::Truncated { message, at },
            WireError::Varint { message, at } => Error::Varint { message, at },
            WireError::FieldNumber { message, number } => Error::FieldNumber { message, number },
            WireError::WireType {
                message,
                field,
                wire,
            } => Error::WireType {
                message,
                field,
                wire,
            },
            WireError::WrongType { message, field } => Error::WrongType { message, field },
        }
    }
}
