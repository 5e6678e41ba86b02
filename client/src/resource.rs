//! [`ApiResource`]: where a kind of resource is served (group, version, kind, plural, scope), for
//! typed kinds from k8s-openapi's constants, for others given at run time. Its own module because
//! both the verbs ([`api`](crate::api)) and the write observers
//! ([`write_observer`](crate::write_observer)) speak of it, and neither should import the other.

use k8s_openapi::NamespaceResourceScope;

/// Where a kind of resource is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiResource {
    /// `""` for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    /// The URL segment, e.g. `replicasets`.
    pub plural: String,
    pub namespaced: bool,
}

impl ApiResource {
    /// The resource of a k8s-openapi type.
    pub fn of<K: k8s_openapi::Resource>() -> ApiResource {
        ApiResource {
            group: K::GROUP.to_string(),
            version: K::VERSION.to_string(),
            kind: K::KIND.to_string(),
            plural: K::URL_PATH_SEGMENT.to_string(),
            namespaced: std::any::type_name::<K::Scope>()
                == std::any::type_name::<NamespaceResourceScope>(),
        }
    }

    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `/api/v1` or `/apis/apps/v1`: where its URLs start.
    pub(crate) fn prefix(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }
}
