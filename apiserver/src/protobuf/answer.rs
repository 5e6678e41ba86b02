//! Answers in protobuf: what the server sends a client whose `Accept` header prefers
//! `application/vnd.kubernetes.protobuf` (client-go's clientsets, ferrokube's client), as
//! kube-apiserver 1.37.2 does.
//!
//! # Why here, and why after the fact
//!
//! Every handler of this server builds its answer as JSON (the stored objects are JSON values and
//! their bytes). Rather than teach each verb a second encoding, a whole answer is transcoded once
//! it is built (by the HTTP layer, with [`encode_value`]): its JSON is read back into a value and
//! written by core's encoder (the one the
//! client writes its bodies with), by the `apiVersion` and `kind` the answer names. A watch is a
//! stream, so its events are framed here one by one instead ([`watch_frame`]).
//!
//! ```text
//!  verb handler ── JSON answer ──▶ http's transcode: kind in core's table? ── yes ─▶ "k8s\0" + Unknown{typeMeta, raw}
//!                                                                 └─ no ──▶ the JSON as it is (a custom
//!                                                                            resource; JSON was accepted)
//!  watch event ──▶ watch_frame: 4-byte big-endian length + WatchEvent {1 type, 2 RawExtension {1 enveloped object}}
//! ```
//!
//! What kube-apiserver does and this mirrors (checked with curl against 1.37.2): the answer is
//! protobuf when the *chosen* Accept clause is protobuf (`protobuf, json` → protobuf; `json,
//! protobuf` or a lower `q` → JSON); objects, lists, a delete's `Status` and every error `Status`
//! (a custom resource's 404 included) are protobuf; a custom resource's objects are JSON when a
//! later clause takes JSON and a 406 when none does; a watch's `Content-Type` is
//! `application/vnd.kubernetes.protobuf;stream=watch`. Tables are always JSON.

use bytes::Bytes;
use ferrokube_core::protobuf::wire::{WireType, begin_len, end_len, put_bytes, put_key};
use ferrokube_core::protobuf::{EncodeError, encode};
use serde_json::Value;

/// The `Content-Type` of a protobuf watch.
pub const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// An object's (or list's, or `Status`'s) JSON value as a whole protobuf body, by the
/// `apiVersion` and `kind` it names. A `Status` is named `v1` whatever group it came from, as
/// kube-apiserver names it.
pub fn encode_value(value: &Value) -> Result<Vec<u8>, EncodeError> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = match text("kind") {
        "Status" => ("v1", "Status"),
        kind => (text("apiVersion"), kind),
    };
    encode(value, api_version, kind)
}

/// One watch event as a protobuf frame: its length (four bytes, big-endian) and
/// `WatchEvent {1 type, 2 RawExtension {1 raw}}`, `raw` being the enveloped object.
pub fn watch_frame(event: &str, object: &Value) -> Result<Bytes, EncodeError> {
    let raw = encode_value(object)?;
    let mut frame = Vec::with_capacity(raw.len() + 32);
    frame.extend_from_slice(&[0; 4]);
    put_bytes(&mut frame, 1, event.as_bytes());
    put_key(&mut frame, 2, WireType::Len);
    let start = begin_len(&mut frame);
    put_bytes(&mut frame, 1, &raw);
    end_len(&mut frame, start);
    let length = u32::try_from(frame.len() - 4)
        .map_err(|_| EncodeError::Custom(format!("a watch event of {} bytes", frame.len())))?;
    frame[..4].copy_from_slice(&length.to_be_bytes());
    Ok(Bytes::from(frame))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn protobuf_answers_decode_back_to_the_json_they_came_from() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "5"},
                        "data": {"k": "v"}});
        let body = encode_value(&cm).expect("encodes");
        assert_eq!(super::super::decode(&body).expect("decodes"), cm);
        // A Status from any group is `v1`'s.
        let status = json!({"apiVersion": "example.com/v1", "kind": "Status", "status": "Failure",
                            "code": 404, "reason": "NotFound", "message": "gone",
                            "metadata": {}});
        let decoded =
            super::super::decode(&encode_value(&status).expect("encodes")).expect("decodes");
        assert_eq!(decoded["apiVersion"], "v1");
        assert_eq!(decoded["code"], 404);
        // A custom resource has no protobuf form.
        assert!(encode_value(&json!({"apiVersion": "example.com/v1", "kind": "Widget"})).is_err());

        let frame = watch_frame("ADDED", &cm).expect("a frame");
        let length = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        assert_eq!(length, frame.len() - 4);
        // WatchEvent {1 "ADDED", 2 {1 raw}}: the raw is the enveloped object.
        let mut reader = ferrokube_core::protobuf::wire::Reader::new(&frame[4..], "WatchEvent");
        assert_eq!(reader.key().unwrap(), Some((1, WireType::Len)));
        assert_eq!(reader.len_delimited().unwrap(), b"ADDED");
        assert_eq!(reader.key().unwrap(), Some((2, WireType::Len)));
        let mut object = ferrokube_core::protobuf::wire::Reader::new(
            reader.len_delimited().unwrap(),
            "RawExtension",
        );
        assert_eq!(object.key().unwrap(), Some((1, WireType::Len)));
        assert_eq!(
            super::super::decode(object.len_delimited().unwrap()).unwrap(),
            cm
        );
    }
}
