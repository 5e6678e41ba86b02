//! The client's protobuf target: a response body in Kubernetes' protobuf encoding through the
//! client's decoders (`ferrokube::protobuf`: the schema-driven serde `Deserializer`, the streaming
//! list decoder, the watch frame decoder), as a kube-apiserver would send it.

use ferrokube::core::ManagedFields;
use ferrokube::k8s_openapi::api::core::v1::Pod;
use ferrokube::protobuf::{FrameDecoder, ListDecoder, decode_event, from_slice};
use serde_json::Value;

use crate::{chunks, split_control};

/// The first byte picks the shape (one object, a list, a watch stream), the next two the chunking
/// (see [`split_control`]), the rest is the body. Properties: every failure is a typed
/// `ferrokube::protobuf::Error` with a message; one object decoded with `managedFields` dropped
/// equals the same object decoded whole, less them; a list or a watch stream decodes the same
/// whatever its chunking.
pub fn protobuf_response(data: &[u8]) {
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    let (sizes, body) = split_control(rest);
    match shape % 3 {
        0 => object(body),
        1 => list(body, sizes),
        _ => watch(body, sizes),
    }
}

fn object(body: &[u8]) {
    let kept = from_slice::<Value>(body, ManagedFields::Keep);
    let dropped = from_slice::<Value>(body, ManagedFields::Drop);
    if let Err(error) = &kept {
        assert!(!error.to_string().is_empty(), "an error without a message");
    }
    if let (Ok(mut kept), Ok(dropped)) = (kept, dropped) {
        if let Some(metadata) = kept.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("managedFields");
        }
        assert_eq!(
            kept, dropped,
            "dropping managedFields changed something else"
        );
    }
    // The typed targets: an outcome, never a panic.
    let _ = from_slice::<Pod>(body, ManagedFields::Keep);
    let _ = from_slice::<ferrokube::DynamicObject>(body, ManagedFields::Drop);
}

fn list(body: &[u8], sizes: [usize; 2]) {
    let decode = |pieces: &[&[u8]]| {
        let mut decoder = ListDecoder::new(|item: Value| item);
        for piece in pieces {
            decoder.push(piece).map_err(|e| e.to_string())?;
        }
        decoder
            .finish()
            .map(|list| (list.items, list.metadata))
            .map_err(|e| e.to_string())
    };
    let chunked = decode(&chunks(body, sizes));
    let whole = decode(&[body]);
    match (&chunked, &whole) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "chunking ({sizes:?}) changed the list"),
        (Err(_), Err(_)) => {}
        _ => panic!("chunking ({sizes:?}) changed the outcome: {chunked:?} vs {whole:?}"),
    }
}

fn watch(body: &[u8], sizes: [usize; 2]) {
    let events = |pieces: &[&[u8]]| {
        let mut frames = FrameDecoder::new(1 << 20);
        let mut out = Vec::new();
        for piece in pieces {
            frames.push(piece);
            loop {
                match frames.next_frame() {
                    Ok(Some(frame)) => out.push(
                        decode_event::<Value>(&frame, ManagedFields::Keep)
                            .map(|event| format!("{event:?}"))
                            .map_err(|e| e.to_string()),
                    ),
                    Ok(None) => break,
                    Err(error) => {
                        out.push(Err(error.to_string()));
                        return out;
                    }
                }
            }
        }
        out.push(
            frames
                .finish()
                .map(|()| String::new())
                .map_err(|e| e.to_string()),
        );
        out
    };
    assert_eq!(
        events(&chunks(body, sizes)),
        events(&[body]),
        "chunking ({sizes:?}) changed the events"
    );
}
