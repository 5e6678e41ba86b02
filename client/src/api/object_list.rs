//! A page of a list, as both list decoders (JSON in `list.rs`, protobuf in `crate::protobuf`)
//! produce it.
//!
//! A module of its own, importing nothing from the API layer, so that the protobuf decoder can
//! name it without the API module and the protobuf module importing each other.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// A page of a list.
#[derive(Debug, Clone, Deserialize)]
#[serde(bound = "K: DeserializeOwned")]
pub struct ObjectList<K> {
    #[serde(default)]
    pub metadata: ListMeta,
    #[serde(default)]
    pub items: Vec<K>,
}

impl<K> ObjectList<K> {
    /// The list's resourceVersion: watch from here to see every later change.
    pub fn resource_version(&self) -> &str {
        self.metadata
            .resource_version
            .as_deref()
            .unwrap_or_default()
    }

    /// The shard selector the server applied to this list (`metadata.shardInfo.selector`, in its
    /// canonical text), or `None`: a list asked with no `shardSelector`, or a server without
    /// server-side sharding (which ignores the parameter and lists every object).
    pub fn shard_selector(&self) -> Option<&str> {
        self.metadata
            .shard_info
            .as_ref()
            .map(|info| info.selector.as_str())
    }
}
