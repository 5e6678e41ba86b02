//! From a URL path to what it names.
//!
//! ```text
//! /api/v1/namespaces/{ns}/pods/{name}/status         Object { pods, ns, name, Status }
//! /apis/apps/v1/namespaces/{ns}/replicasets          Collection { replicasets, ns }
//! /api/v1/pods                                       Collection { pods, all namespaces }
//! /api/v1/namespaces/{name}                          Object { namespaces, name }
//! /api, /apis, /api/v1, /apis/apps/v1, /version      discovery
//! ```

use std::sync::Arc;

use crate::resource::{Catalog, Extra, ResourceType};

/// A subresource of one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    Status,
    Scale,
    /// A Namespace's `/finalize` (PUT only): writes `spec.finalizers`.
    Finalize,
    /// One of the type's other subresources (see [`crate::subresource`]).
    Extra(Extra),
}

/// What a request path names.
#[derive(Debug, Clone)]
pub enum Route {
    Version,
    Health,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1`, `/apis/{group}/{version}`
    Resources {
        group: String,
        version: String,
    },
    /// `/ferrokube/faults`
    Faults,
    /// `/openapi/v3`
    OpenApiRoot,
    /// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`
    OpenApi(String),
    Collection {
        resource: Arc<ResourceType>,
        namespace: Option<String>,
    },
    Object {
        resource: Arc<ResourceType>,
        namespace: Option<String>,
        name: String,
        subresource: Option<Subresource>,
    },
    NotFound,
}

/// Parses `path` against the served resource types.
pub fn route(registry: &Catalog, path: &str) -> Route {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["version"] => return Route::Version,
        ["healthz" | "readyz" | "livez"] => return Route::Health,
        ["ferrokube", "faults"] => return Route::Faults,
        ["openapi", "v3"] => return Route::OpenApiRoot,
        ["openapi", "v3", rest @ ..] => return Route::OpenApi(rest.join("/")),
        ["api"] => return Route::CoreVersions,
        ["apis"] => return Route::Groups,
        ["apis", group] => return Route::Group(group.to_string()),
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Route::NotFound,
    };
    let find = |plural: &str| registry.find(group, version, plural);
    let namespaced = |plural: &str| find(plural).filter(|r| r.namespaced);
    let object =
        |resource: Arc<ResourceType>, namespace: Option<&str>, name: &str, sub: Option<&str>| {
            let subresource = match sub {
                None => None,
                Some("status") => Some(Subresource::Status),
                Some("scale") => Some(Subresource::Scale),
                Some("finalize") => Some(Subresource::Finalize),
                Some(other) => match resource.extras.iter().find(|e| e.name() == other) {
                    Some(extra) => Some(Subresource::Extra(*extra)),
                    None => return Route::NotFound,
                },
            };
            Route::Object {
                resource,
                namespace: namespace.map(str::to_string),
                name: name.to_string(),
                subresource,
            }
        };
    match rest {
        [] => Route::Resources {
            group: group.to_string(),
            version: version.to_string(),
        },
        ["namespaces", ns, plural, tail @ ..] if namespaced(plural).is_some() => {
            let Some(resource) = namespaced(plural) else {
                return Route::NotFound;
            };
            match tail {
                [] => Route::Collection {
                    resource,
                    namespace: Some(ns.to_string()),
                },
                [name] => object(resource, Some(ns), name, None),
                [name, sub] => object(resource, Some(ns), name, Some(sub)),
                _ => Route::NotFound,
            }
        }
        [plural] => match find(plural) {
            Some(resource) => Route::Collection {
                resource,
                namespace: None,
            },
            None => Route::NotFound,
        },
        [plural, name, tail @ ..] => match find(plural).filter(|r| !r.namespaced) {
            Some(resource) => match tail {
                [] => object(resource, None, name, None),
                [sub] => object(resource, None, name, Some(sub)),
                _ => Route::NotFound,
            },
            None => Route::NotFound,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn describe(path: &str) -> String {
        match route(&Catalog::default(), path) {
            Route::Collection {
                resource,
                namespace,
            } => {
                format!("collection {} {:?}", resource.plural, namespace)
            }
            Route::Object {
                resource,
                namespace,
                name,
                subresource,
            } => format!(
                "object {} {namespace:?} {name} {subresource:?}",
                resource.plural
            ),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn paths_name_collections_objects_and_subresources() {
        assert_eq!(
            describe("/api/v1/namespaces/d/pods"),
            "collection pods Some(\"d\")"
        );
        assert_eq!(describe("/api/v1/pods"), "collection pods None");
        assert_eq!(
            describe("/apis/apps/v1/namespaces/d/replicasets/w/scale"),
            "object replicasets Some(\"d\") w Some(Scale)"
        );
        assert_eq!(
            describe("/api/v1/namespaces/d"),
            "object namespaces None d None"
        );
        assert_eq!(
            describe("/api/v1/namespaces/d/status"),
            "object namespaces None d Some(Status)"
        );
        assert_eq!(describe("/api/v1/namespaces/d/widgets"), "NotFound");
        assert_eq!(describe("/api/v1/pods/x"), "NotFound");
        assert_eq!(
            describe("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/w.example.com"),
            "object customresourcedefinitions None w.example.com None"
        );
        assert_eq!(
            describe("/apis/apps/v1"),
            "Resources { group: \"apps\", version: \"v1\" }"
        );
    }
}
