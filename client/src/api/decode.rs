//! Decoding one object from JSON, optionally without `metadata.managedFields`.
//!
//! Why: an informer caches every object it lists and watches, and `metadata.managedFields` is
//! often the largest part of one (19.2 of 33.4 KB of a typical decoded Pod) while almost no
//! controller reads it. Dropping it after the decode (a transform) still builds it first, a tree
//! of `serde_json::Value` maps per entry, and throws it away: the peak and the allocator's work
//! are paid in full. Here it is never built: serde_json walks over its bytes (`IgnoredAny`) while
//! the rest of the object decodes into `K` through `K`'s own `Deserialize`, unchanged.
//!
//! How: two thin layers between serde_json's deserializer and `K`, and nothing below them:
//!
//! ```text
//! {"apiVersion":…, "metadata": {…, "managedFields": […], …}, "spec": {…}}
//!  └── Layer::Object: every key passes; the value of "metadata" goes through the next layer
//!                     └── Layer::Metadata: "managedFields" and its value skipped, the rest passes
//!      every other value (spec, status, labels, …) goes straight to serde_json
//! ```
//!
//! A layer reads each key of its map itself (borrowed from the input when it has no escapes),
//! decides, and hands the key to `K`'s field visitor as a string: so any `Deserialize` that takes
//! its field names as strings works through it (k8s-openapi's types, derived structs, `flatten`,
//! `DynamicObject`). Only the two maps pay the extra step; everything inside them is decoded by
//! serde_json directly.

use std::fmt;

use ferrokube_core::ManagedFields;
use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess,
    SeqAccess, Visitor,
};

/// Decodes `bytes` (one JSON object) as a `K`, keeping or skipping its `metadata.managedFields`
/// as `managed_fields` says. With [`ManagedFields::Drop`], `K`'s `metadata.managed_fields` is
/// `None` and the entries were never decoded (their bytes must still be valid JSON).
pub fn from_slice<K: DeserializeOwned>(
    bytes: &[u8],
    managed_fields: ManagedFields,
) -> Result<K, serde_json::Error> {
    match managed_fields {
        ManagedFields::Keep => serde_json::from_slice(bytes),
        ManagedFields::Drop => {
            let mut json = serde_json::Deserializer::from_slice(bytes);
            let object = K::deserialize(Layered {
                inner: &mut json,
                layer: Layer::Object,
            })?;
            json.end()?;
            Ok(object)
        }
    }
}

/// Which map a layer stands in front of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    /// The object itself: the value of its `metadata` key goes through [`Layer::Metadata`].
    Object,
    /// The object's metadata: its `managedFields` entry is skipped.
    Metadata,
}

/// A deserializer that hands its value's map to `K` through a [`LayeredMap`].
struct Layered<D> {
    inner: D,
    layer: Layer,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Layered<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let visitor = LayeredVisitor {
            inner: visitor,
            layer: self.layer,
        };
        self.inner.deserialize_any(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let visitor = LayeredVisitor {
            inner: visitor,
            layer: self.layer,
        };
        self.inner.deserialize_map(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = LayeredVisitor {
            inner: visitor,
            layer: self.layer,
        };
        self.inner.deserialize_struct(name, fields, visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let visitor = LayeredVisitor {
            inner: visitor,
            layer: self.layer,
        };
        self.inner.deserialize_option(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = LayeredVisitor {
            inner: visitor,
            layer: self.layer,
        };
        self.inner.deserialize_newtype_struct(name, visitor)
    }

    // Everything else is not a map: JSON says what it is, so asking for "any" loses nothing.
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct seq tuple tuple_struct enum identifier ignored_any
    }
}

/// Passes every call to `inner`, wrapping a map in a [`LayeredMap`] (and an option's or newtype's
/// content in another [`Layered`], so that `Option<ObjectMeta>` works too).
struct LayeredVisitor<V> {
    inner: V,
    layer: Layer,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for LayeredVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(LayeredMap {
            inner: map,
            layer: self.layer,
            metadata_next: false,
        })
    }

    fn visit_some<D: Deserializer<'de>>(self, content: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Layered {
            inner: content,
            layer: self.layer,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, content: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Layered {
            inner: content,
            layer: self.layer,
        })
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<V::Value, E> {
        self.inner.visit_bool(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<V::Value, E> {
        self.inner.visit_i64(v)
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<V::Value, E> {
        self.inner.visit_i128(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<V::Value, E> {
        self.inner.visit_u64(v)
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<V::Value, E> {
        self.inner.visit_u128(v)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<V::Value, E> {
        self.inner.visit_f64(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.inner.visit_str(v)
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        self.inner.visit_borrowed_str(v)
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        self.inner.visit_string(v)
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<V::Value, E> {
        self.inner.visit_bytes(v)
    }
    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<V::Value, E> {
        self.inner.visit_borrowed_bytes(v)
    }
    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<V::Value, E> {
        self.inner.visit_byte_buf(v)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(seq)
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(data)
    }
}

/// One map seen through a layer: reads each key itself, skips `managedFields` in the metadata,
/// and sends the object's `metadata` value through [`Layer::Metadata`].
struct LayeredMap<A> {
    inner: A,
    layer: Layer,
    /// The key just handed out was the object's `metadata`: its value goes through the metadata
    /// layer. Set by `next_key_seed`, taken by `next_value_seed`.
    metadata_next: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for LayeredMap<A> {
    type Error = A::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, A::Error> {
        loop {
            let Some(key) = self.inner.next_key::<Key<'de>>()? else {
                return Ok(None);
            };
            match self.layer {
                Layer::Metadata if key.as_str() == "managedFields" => {
                    self.inner.next_value::<IgnoredAny>()?;
                    continue;
                }
                Layer::Metadata => {}
                Layer::Object => self.metadata_next = key.as_str() == "metadata",
            }
            return match key {
                Key::Borrowed(name) => seed.deserialize(BorrowedStrDeserializer::new(name)),
                Key::Owned(name) => seed.deserialize(StringDeserializer::new(name)),
            }
            .map(Some);
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        if std::mem::take(&mut self.metadata_next) {
            self.inner.next_value_seed(LayeredSeed {
                inner: seed,
                layer: Layer::Metadata,
            })
        } else {
            self.inner.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// A seed whose value is read through a layer.
struct LayeredSeed<S> {
    inner: S,
    layer: Layer,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for LayeredSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Layered {
            inner: deserializer,
            layer: self.layer,
        })
    }
}

/// A map key, borrowed from the input when it has no escapes (the usual case), else owned.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(name) => name,
            Key::Owned(name) => name,
        }
    }
}

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Key<'de>, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::DynamicObject;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use serde_json::json;

    fn pod_json(managed_fields: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web", "namespace": "default", "resourceVersion": "7",
                "labels": {"app": "web"},
                "managedFields": managed_fields,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                     "uid": "u1", "controller": true}]
            },
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            "status": {"phase": "Running"}
        }))
        .expect("json")
    }

    fn entries() -> serde_json::Value {
        json!([{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}}])
    }

    #[test]
    fn managed_fields_dropped_while_the_rest_decodes_as_before() {
        let bytes = pod_json(entries());
        let kept: Pod = from_slice(&bytes, ManagedFields::Keep).expect("keep");
        let dropped: Pod = from_slice(&bytes, ManagedFields::Drop).expect("drop");
        assert_eq!(kept.metadata.managed_fields.as_ref().map(Vec::len), Some(1));
        assert_eq!(dropped.metadata.managed_fields, None);
        let mut expected = kept;
        expected.metadata.managed_fields = None;
        assert_eq!(dropped, expected, "every other field decodes the same");
    }

    /// Proof that `Drop` never decodes them: entries of the wrong type (a number where a list of
    /// objects belongs) fail a full decode and pass this one.
    #[test]
    fn managed_fields_dropped_are_never_decoded() {
        let bytes = pod_json(json!(5));
        assert!(from_slice::<Pod>(&bytes, ManagedFields::Keep).is_err());
        let pod: Pod = from_slice(&bytes, ManagedFields::Drop).expect("skipped, not decoded");
        assert_eq!(pod.metadata.name.as_deref(), Some("web"));
        assert_eq!(pod.metadata.owner_references.map(|o| o.len()), Some(1));
    }

    #[test]
    fn managed_fields_dropped_for_dynamic_objects_and_escaped_keys() {
        let bytes = pod_json(entries());
        let object: DynamicObject = from_slice(&bytes, ManagedFields::Drop).expect("dynamic");
        assert_eq!(object.metadata.managed_fields, None);
        assert_eq!(object.metadata.name.as_deref(), Some("web"));
        assert_eq!(object.data["spec"]["containers"][0]["image"], "nginx");
        // A key spelled with an escape is the same key.
        let escaped =
            br#"{"metadata":{"name":"a","managed\u0046ields":[{"manager":1}]},"data":{"k":"v"}}"#;
        let cm: ConfigMap = from_slice(escaped, ManagedFields::Drop).expect("escaped");
        assert_eq!(cm.metadata.managed_fields, None);
        assert_eq!(
            cm.data.and_then(|d| d.get("k").cloned()).as_deref(),
            Some("v")
        );
        // A `managedFields` key outside metadata is data, not bookkeeping: kept.
        let elsewhere = br#"{"metadata":{"name":"a"},"data":{"managedFields":"x"}}"#;
        let cm: ConfigMap = from_slice(elsewhere, ManagedFields::Drop).expect("data");
        assert_eq!(
            cm.data
                .and_then(|d| d.get("managedFields").cloned())
                .as_deref(),
            Some("x")
        );
    }

    #[test]
    fn managed_fields_drop_refuses_what_a_full_decode_refuses() {
        for bad in [
            &br#"{"metadata":{"name":"a"}} trailing"#[..],
            br#"{"metadata":{"name":5}}"#,
            br#"{"metadata":{"managedFields":[}}"#,
            br#"[1,2]"#,
            b"",
        ] {
            assert!(
                from_slice::<ConfigMap>(bad, ManagedFields::Drop).is_err(),
                "{bad:?}"
            );
            assert!(
                from_slice::<ConfigMap>(bad, ManagedFields::Keep).is_err(),
                "{bad:?}"
            );
        }
    }
}
