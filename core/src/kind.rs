//! What kind of API object a Rust type holds, known when the program is compiled or only when it
//! runs.
//!
//! Most types name their kind themselves: `Pod` is the core group's `v1` `Pod`, served as `pods`,
//! and k8s-openapi writes that down as constants of [`k8s_openapi::Resource`]; a type made by
//! `#[derive(CustomResource)]` gets the same constants. Code generic over such a type needs nothing
//! more than the type.
//!
//! One type cannot: `DynamicObject` (in `ferrokube-client`) holds an object of *any* kind, so which
//! kind a given `Api`, informer or controller of it is about has to be told at run time, as an
//! [`ApiResource`]. [`Kind`] covers both with one bound:
//!
//! ```text
//!   K: Kind                         K::DynamicType     K::api_resource(&dynamic)
//!   Pod, ReplicaSet, Compact<Pod>,  ()                 from K's constants
//!   a derived custom resource
//!   DynamicObject                   ApiResource        the ApiResource given
//! ```
//!
//! The layers above take a `&K::DynamicType` wherever they need to know the kind (an informer
//! factory's `informer_for`, a controller's `Objects::dynamic`, `Api::all_with`); for the typed kinds
//! that is `&()`, and each of those layers keeps a shorter form without it. The same split is
//! kube-rs's `Resource::DynamicType`.

use std::fmt;

use k8s_openapi::NamespaceResourceScope;

use crate::object::Object;

/// Where a kind of resource is served: group, version, kind, the plural of its URLs and whether
/// it lives in namespaces. `schema.GroupVersionResource` plus the kind and scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
    /// The resource of a k8s-openapi type (or any type with its constants).
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
    pub fn path_prefix(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }
}

/// An object type together with what it takes to know its kind; see the [module docs](self).
/// Implemented for every type with k8s-openapi's constants (`DynamicType = ()`), and by
/// `DynamicObject` (`DynamicType = ApiResource`).
pub trait Kind: Object {
    /// What must be given at run time to name the kind: `()` when the type names it itself.
    type DynamicType: Clone + Eq + fmt::Debug + Send + Sync + 'static;

    /// Where objects of this kind are served. Builds a fresh value: call it when setting things
    /// up, not once per object.
    fn api_resource(dynamic: &Self::DynamicType) -> ApiResource;

    /// This object's `apiVersion` and `kind`, as an owner reference or an event names it: a typed
    /// kind's constants, a `DynamicObject`'s own fields (which every object the server returns
    /// has).
    fn api_version_and_kind(&self) -> (&str, &str);
}

impl<K: k8s_openapi::Resource + Object> Kind for K {
    type DynamicType = ();

    fn api_resource(_: &()) -> ApiResource {
        ApiResource::of::<K>()
    }

    fn api_version_and_kind(&self) -> (&str, &str) {
        (K::API_VERSION, K::KIND)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::{Namespace, Pod};

    #[test]
    fn typed_kinds_name_themselves() {
        let pods = <Pod as Kind>::api_resource(&());
        assert_eq!(
            (pods.path_prefix(), pods.plural.as_str(), pods.namespaced),
            ("/api/v1".to_string(), "pods", true)
        );
        assert_eq!(pods.api_version(), "v1");
        let sets = <ReplicaSet as Kind>::api_resource(&());
        assert_eq!(sets.path_prefix(), "/apis/apps/v1");
        assert_eq!(sets.api_version(), "apps/v1");
        assert!(!<Namespace as Kind>::api_resource(&()).namespaced);
    }
}
