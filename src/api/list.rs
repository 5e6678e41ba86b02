//! Lists, decoded one item at a time.
//!
//! A list response is one JSON object, `{"kind", "apiVersion", "metadata", "items": [...]}`. Decoding
//! it into `Vec<K>` first and converting afterwards keeps every full-size object alive at once: for
//! an informer whose transform drops `managedFields` (half of a typical Pod's decoded size), that
//! peak is what the process's memory settles at. So [`ObjectList`] is decoded with a seed that
//! hands each item to a function the moment it is decoded, and keeps only what that returns.

use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use serde::de::{
    DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};

use super::ObjectList;

/// Decodes a list body, passing each item through `map` as soon as it is decoded.
pub(crate) fn decode_mapped<K, T>(
    body: &[u8],
    map: impl FnMut(K) -> T,
) -> Result<ObjectList<T>, serde_json::Error>
where
    K: DeserializeOwned,
{
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let list = MappedList {
        map,
        _item: PhantomData,
    }
    .deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(list)
}

/// The whole list object: `metadata` and `items` kept, every other field skipped.
struct MappedList<K, F> {
    map: F,
    _item: PhantomData<fn() -> K>,
}

impl<'de, K: DeserializeOwned, T, F: FnMut(K) -> T> DeserializeSeed<'de> for MappedList<K, F> {
    type Value = ObjectList<T>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, K: DeserializeOwned, T, F: FnMut(K) -> T> Visitor<'de> for MappedList<K, F> {
    type Value = ObjectList<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes list object")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut metadata = ListMeta::default();
        let mut items = Vec::new();
        while let Some(field) = map.next_key::<FieldName>()? {
            match field {
                FieldName::Metadata => {
                    metadata = map.next_value::<Option<ListMeta>>()?.unwrap_or_default();
                }
                FieldName::Items => map.next_value_seed(MappedItems {
                    map: &mut self.map,
                    into: &mut items,
                    _item: PhantomData,
                })?,
                FieldName::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(ObjectList { metadata, items })
    }
}

/// `items`: an array (or `null`) whose elements go through `map` one by one.
struct MappedItems<'a, K, T, F> {
    map: &'a mut F,
    into: &'a mut Vec<T>,
    _item: PhantomData<fn() -> K>,
}

impl<'de, K: DeserializeOwned, T, F: FnMut(K) -> T> DeserializeSeed<'de>
    for MappedItems<'_, K, T, F>
{
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, K: DeserializeOwned, T, F: FnMut(K) -> T> Visitor<'de> for MappedItems<'_, K, T, F> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of objects")
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if let Some(hint) = seq.size_hint() {
            self.into.reserve(hint);
        }
        while let Some(item) = seq.next_element::<K>()? {
            self.into.push((self.map)(item));
        }
        Ok(())
    }
}

/// The list fields we keep; anything else is skipped without being built.
enum FieldName {
    Metadata,
    Items,
    Other,
}

impl<'de> serde::Deserialize<'de> for FieldName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl Visitor<'_> for Name {
            type Value = FieldName;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E>(self, name: &str) -> Result<FieldName, E> {
                Ok(match name {
                    "metadata" => FieldName::Metadata,
                    "items" => FieldName::Items,
                    _ => FieldName::Other,
                })
            }
        }
        deserializer.deserialize_identifier(Name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn items_are_mapped_in_order_and_other_fields_skipped() {
        let body = br#"{"kind":"ConfigMapList","apiVersion":"v1",
            "metadata":{"resourceVersion":"42","continue":"next"},
            "items":[{"metadata":{"name":"a","managedFields":[{"manager":"m"}]}},
                     {"metadata":{"name":"b"}}],
            "extra":{"nested":[1,2,3]}}"#;
        let list = decode_mapped(body, |mut c: ConfigMap| {
            c.metadata.managed_fields = None;
            c.metadata.name
        })
        .unwrap();
        assert_eq!(list.items, [Some("a".to_string()), Some("b".to_string())]);
        assert_eq!(list.resource_version(), "42");
        assert_eq!(list.metadata.continue_.as_deref(), Some("next"));
    }

    #[test]
    fn null_or_missing_items_are_an_empty_list_and_bad_items_an_error() {
        let empty = decode_mapped(br#"{"metadata":{},"items":null}"#, |c: ConfigMap| c).unwrap();
        assert!(empty.items.is_empty());
        let missing = decode_mapped(br#"{"metadata":null}"#, |c: ConfigMap| c).unwrap();
        assert!(missing.items.is_empty());
        assert!(decode_mapped(br#"{"items":[{"metadata":7}]}"#, |c: ConfigMap| c).is_err());
        assert!(decode_mapped(br#"{"items":[]} trailing"#, |c: ConfigMap| c).is_err());
        assert!(decode_mapped(br#"[1,2]"#, |c: ConfigMap| c).is_err());
    }
}
