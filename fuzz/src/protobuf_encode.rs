//! The encoder's target: core's protobuf encoder (`ferrokube::core::protobuf::encode`, what the
//! client writes create and update bodies with) and the embedded server's protobuf answers
//! (`ferrokube::apiserver::protobuf::answer`), fed objects of every shape.
//!
//! Two ways in, by the first byte: a protobuf body (decoded by the client's decoder into the JSON
//! shape the encoder reads: the values a real object has), or JSON text with a kind from the
//! table (any shape at all: the encoder must refuse what does not fit, never panic).

use ferrokube::apiserver::protobuf::answer::{encode_value, watch_frame};
use ferrokube::core::ManagedFields;
use ferrokube::core::protobuf::{KINDS, encode};
use ferrokube::protobuf::from_slice;
use serde_json::Value;

/// Even first byte: the rest is a protobuf body. Properties: an object the decoder read encodes
/// (it has a protobuf form by construction) and decodes back to itself (`null`s aside); the
/// server's answer and watch frame of it encode too, and the server's decoder reads them.
///
/// Odd first byte: the rest is JSON text, encoded as the kind the first byte picks. Properties:
/// a refusal is a typed `EncodeError` with a message; what encodes decodes, and encoding that
/// again gives the same bytes' meaning (decode ∘ encode is idempotent).
pub fn protobuf_encode(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    if pick % 2 == 0 {
        from_protobuf(rest);
    } else {
        from_json(pick, rest);
    }
}

/// `apiVersion` and `kind` of a decoded object.
fn type_of(object: &Value) -> (String, String) {
    let text = |key: &str| object[key].as_str().unwrap_or_default().to_string();
    (text("apiVersion"), text("kind"))
}

/// `null` members are the same as absent ones to every reader.
fn without_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(without_nulls);
        }
        Value::Array(list) => list.iter_mut().for_each(without_nulls),
        _ => {}
    }
}

fn from_protobuf(body: &[u8]) {
    let Ok(mut object) = from_slice::<Value>(body, ManagedFields::Keep) else {
        return;
    };
    let (api_version, kind) = type_of(&object);
    let encoded = encode(&object, &api_version, &kind)
        .unwrap_or_else(|e| panic!("a decoded {api_version} {kind} does not encode: {e}"));
    let mut again = from_slice::<Value>(&encoded, ManagedFields::Keep)
        .unwrap_or_else(|e| panic!("the encoder's {api_version} {kind} does not decode: {e}"));
    without_nulls(&mut object);
    without_nulls(&mut again);
    assert_eq!(again, object, "encode then decode changed the object");
    // The server's answer path: the same bytes' meaning, read by the server's own decoder.
    let answer = encode_value(&object).expect("the server's answer encodes");
    let _ = ferrokube::apiserver::protobuf::decode(&answer);
    watch_frame("MODIFIED", &object).expect("a watch frame");
}

fn from_json(pick: u8, text: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(text) else {
        return;
    };
    let Some(kind) = KINDS.get(usize::from(pick / 2) * KINDS.len() / 128) else {
        return;
    };
    let encoded = match encode(&value, kind.api_version, kind.kind) {
        Ok(bytes) => bytes,
        Err(error) => {
            assert!(!error.to_string().is_empty(), "an error without a message");
            return;
        }
    };
    // What the encoder wrote is well-formed: the decoders read it or refuse it with a typed error
    // (a time before year 0, say), and a second round changes nothing.
    let _ = ferrokube::apiserver::protobuf::decode(&encoded);
    let Ok(mut once) = from_slice::<Value>(&encoded, ManagedFields::Keep) else {
        return;
    };
    let again = encode(&once, kind.api_version, kind.kind)
        .unwrap_or_else(|e| panic!("a decoded {} does not encode: {e}", kind.kind));
    let mut twice = from_slice::<Value>(&again, ManagedFields::Keep).expect("decodes again");
    without_nulls(&mut once);
    without_nulls(&mut twice);
    assert_eq!(
        twice, once,
        "a second encode-decode round changed the object"
    );
}
