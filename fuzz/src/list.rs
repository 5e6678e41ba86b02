//! The list target: a list response body, cut into chunks, through the streaming decoder
//! ([`ListDecoder`], what `Api::list` reads a body with), compared with the whole body and with
//! serde_json reading it at once.

use ferrokube::api::{ListDecoder, ObjectList};
use ferrokube::k8s_openapi::api::core::v1::ConfigMap;
use ferrokube::k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use serde::Deserialize;
use serde_json::Value;

use crate::{chunks, split_control};

/// Decodes the body (the input after its two control bytes) pushed in chunks, and whole.
///
/// Properties: the chunked and the whole decode agree (both fail, or both give the same list);
/// when serde_json reads the body as a list object (`items` an array or null, no field twice),
/// the splitter gives the same items and metadata; decoding items as ConfigMaps fails with a
/// `serde_json::Error` where it fails.
pub fn list_body(data: &[u8]) {
    let (sizes, body) = split_control(data);
    let chunked = decode::<Value>(&chunks(body, sizes));
    let whole = decode::<Value>(&[body]);
    match (&chunked, &whole) {
        (Ok(a), Ok(b)) => assert!(
            a.items == b.items && a.metadata == b.metadata,
            "chunking ({sizes:?}) changed the list"
        ),
        (Err(_), Err(_)) => {}
        (a, b) => panic!(
            "chunking ({sizes:?}) changed the outcome: chunked {:?}, whole {:?}",
            a.as_ref().map(|l| l.items.len()),
            b.as_ref().map(|l| l.items.len())
        ),
    }
    // Only objects: serde's derived structs also accept a JSON array (`[meta, items]`), which is
    // not a list body.
    let object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if let Some(oracle) = object
        .then(|| serde_json::from_slice::<Oracle>(body).ok())
        .flatten()
    {
        let Ok(list) = &whole else {
            panic!("serde_json reads this body as a list and the splitter refuses it: {whole:?}");
        };
        assert_eq!(
            list.items,
            oracle.items.unwrap_or_default(),
            "items differ from serde_json's"
        );
        assert_eq!(
            list.metadata,
            oracle.metadata.unwrap_or_default(),
            "metadata differs from serde_json's"
        );
    }
    let _ = decode::<ConfigMap>(&chunks(body, sizes));
}

/// What serde_json makes of a list body: derived, so a field given twice is an error (the
/// splitter would take `items` twice), and other fields are ignored.
#[derive(Deserialize)]
struct Oracle {
    #[serde(default)]
    metadata: Option<ListMeta>,
    #[serde(default)]
    items: Option<Vec<Value>>,
}

fn decode<K: serde::de::DeserializeOwned>(
    pieces: &[&[u8]],
) -> Result<ObjectList<K>, serde_json::Error> {
    let mut decoder = ListDecoder::new(|item: K| item);
    for piece in pieces {
        decoder.push(piece)?;
    }
    decoder.finish()
}
