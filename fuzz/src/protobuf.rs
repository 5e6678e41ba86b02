//! The protobuf target: a request body in Kubernetes' protobuf encoding, as Go clients send it for
//! every built-in kind, through the embedded server's decoder (driven by ferrokube-core's
//! generated schema table).

use ferrokube::apiserver::protobuf::decode;

/// Decodes `data` as a protobuf request body. Properties: a failure is a `DecodeError` (a 400,
/// or a 415 for what the decoder does not support) with a message; a success is a JSON object
/// with the envelope's `apiVersion` and `kind` as strings.
pub fn protobuf_body(data: &[u8]) {
    match decode(data) {
        Ok(object) => {
            assert!(object.is_object(), "decoded to a non-object: {object}");
            assert!(object["apiVersion"].is_string(), "no apiVersion: {object}");
            assert!(object["kind"].is_string(), "no kind: {object}");
        }
        Err(error) => assert!(!error.to_string().is_empty(), "an error without a message"),
    }
}
