//! [`Generator`]: a CustomResourceDefinition in, seeded [`Sequence`]s and their [`Scenario`]s
//! out.
//!
//! ```text
//!  CRD (the derive's K::crd(), or any CRD as JSON)
//!   │ storage version's openAPIV3Schema.properties.spec ──▶ Node tree   (schema.rs)
//!   ▼
//!  Generator::sequence(steps, seed) ──draw──▶ Sequence                 (draw.rs, sequence.rs)
//!  Generator::scenario(&sequence)   ──▶ Scenario: one Step per edit, actor `generated`
//!        a step the server refuses (4xx: invalid value, not found, already exists) passes:
//!        it is counted (Generator::rejected, from the trace), it does not end the run
//! ```

use ferrokube_client::Api;
use ferrokube_client::DynamicObject;
use ferrokube_client::api::{DeleteParams, Patch, PatchParams, PostParams};
use ferrokube_core::kind::ApiResource;
use serde_json::Value;

use super::draw::draw;
use super::schema::Node;
use super::sequence::{Edit, Sequence};
use crate::run::{BoxError, Scenario, Step};
use crate::trace::{Trace, TraceEntry};

/// The actor of a generated scenario's requests in the trace.
pub const GENERATED: &str = "generated";

/// Why a generator could not be made from a CRD.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenerateError {
    /// The CRD could not be turned into JSON, or lacks a part the generator reads.
    #[error("the CustomResourceDefinition has no {0}")]
    Missing(&'static str),
    /// A required field admits no value the generator can vouch for (a pattern, an unknown
    /// format): every create would be refused.
    #[error(
        "no value the schema surely admits for the spec (a required field with a pattern or an unknown format, and no default?)"
    )]
    NoTypicalSpec,
}

/// Generates sequences of spec changes to one object of a custom resource kind, from its
/// schema. See the [module docs](super).
#[derive(Debug, Clone)]
pub struct Generator {
    resource: ApiResource,
    /// The spec's schema (the storage version's).
    spec: Node,
    /// Its typical value: what the first edit creates (invariant: `spec` admits it, as far as
    /// the generator can tell).
    first: Value,
    namespace: String,
    name: String,
}

impl Generator {
    /// A generator for the kind `crd` defines (a CustomResourceDefinition: the derive's
    /// `Kind::crd()`, a k8s-openapi object, or JSON), editing `default/generated`.
    pub fn from_crd(crd: impl serde::Serialize) -> Result<Generator, GenerateError> {
        let crd = serde_json::to_value(crd).map_err(|_| GenerateError::Missing("JSON form"))?;
        let spec = crd.get("spec").ok_or(GenerateError::Missing("spec"))?;
        let text = |value: Option<&Value>, what| {
            value
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or(GenerateError::Missing(what))
        };
        let versions = spec
            .get("versions")
            .and_then(Value::as_array)
            .ok_or(GenerateError::Missing("versions"))?;
        let version = versions
            .iter()
            .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            .or_else(|| versions.first())
            .ok_or(GenerateError::Missing("version"))?;
        let schema = version
            .pointer("/schema/openAPIV3Schema/properties/spec")
            .ok_or(GenerateError::Missing("openAPIV3Schema with a spec"))?;
        let names = spec.get("names");
        let resource = ApiResource {
            group: text(spec.get("group"), "group")?,
            version: text(version.get("name"), "version name")?,
            kind: text(names.and_then(|n| n.get("kind")), "kind")?,
            plural: text(names.and_then(|n| n.get("plural")), "plural")?,
            namespaced: spec.get("scope").and_then(Value::as_str) != Some("Cluster"),
        };
        let spec = Node::parse(schema);
        let first = spec.typical().ok_or(GenerateError::NoTypicalSpec)?;
        Ok(Generator {
            resource,
            spec,
            first,
            namespace: "default".into(),
            name: "generated".into(),
        })
    }

    /// A generator for the custom resource kind `K` (from `K::try_crd()`).
    pub fn custom_resource<K: ferrokube_client::crd::CustomResourceExt>()
    -> Result<Generator, GenerateError> {
        let crd = K::try_crd().map_err(|_| GenerateError::Missing("schema (try_crd failed)"))?;
        Generator::from_crd(crd)
    }

    /// The object the sequences edit (default `default/generated`; the namespace is ignored
    /// for a cluster-scoped kind).
    pub fn object(mut self, namespace: impl Into<String>, name: impl Into<String>) -> Generator {
        self.namespace = namespace.into();
        self.name = name.into();
        self
    }

    /// The world's name for the kind's objects (`plural.group`), as oracles name it.
    pub fn resource_name(&self) -> String {
        format!("{}.{}", self.resource.plural, self.resource.group)
    }

    /// The world's key of the edited object (`namespace/name`, or `name`).
    pub fn key(&self) -> String {
        if self.resource.namespaced {
            format!("{}/{}", self.namespace, self.name)
        } else {
            self.name.clone()
        }
    }

    /// `steps` edits (the first creates the object with every field at its typical value),
    /// drawn with `seed`: the same two give the same sequence. Fewer when the schema allows
    /// no more changes (a spec of one enum).
    pub fn sequence(&self, steps: usize, seed: u64) -> Sequence {
        Sequence {
            edits: draw(&self.spec, self.first.clone(), steps.max(1), seed),
        }
    }

    /// The scenario of `sequence`: one step per edit, named as the edit prints, by the actor
    /// [`GENERATED`]. A step the server refuses with a 4xx passes (see [`Generator::rejected`]).
    pub fn scenario(&self, sequence: &Sequence) -> Scenario {
        sequence
            .edits
            .iter()
            .fold(Scenario::new(), |scenario, edit| {
                let api = (
                    self.resource.clone(),
                    self.namespace.clone(),
                    self.name.clone(),
                );
                let edit = edit.clone();
                let name = edit.to_string();
                scenario.step(
                    Step::new(name, move |client| async move {
                        let (resource, namespace, name) = api;
                        let api = Api::<DynamicObject>::dynamic(
                            client,
                            resource.clone(),
                            Some(&namespace),
                        );
                        send(&api, &resource, &name, &edit).await
                    })
                    .by(GENERATED),
                )
            })
    }

    /// How many of the generated steps the server refused (4xx) in `trace`.
    pub fn rejected(trace: &Trace) -> usize {
        trace
            .entries
            .iter()
            .filter(|entry| {
                matches!(entry, TraceEntry::Request { actor, status, .. }
                    if actor == GENERATED && *status >= 400)
            })
            .count()
    }
}

/// Sends one edit; a refusal (4xx) is an answer, not a failure of the step.
async fn send(
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    name: &str,
    edit: &Edit,
) -> Result<(), BoxError> {
    let sent = match edit {
        Edit::Create { spec } => {
            let object = DynamicObject::new(name, resource).with("spec", spec.clone());
            api.create(&PostParams::default(), &object)
                .await
                .map(|_| ())
        }
        Edit::Delete => api.delete(name, &DeleteParams::default()).await.map(|_| ()),
        Edit::Set { .. } | Edit::Remove { .. } => {
            let patch = Patch::Merge(edit.merge_patch().unwrap_or(Value::Null));
            api.patch(name, &PatchParams::default(), &patch)
                .await
                .map(|_| ())
        }
    };
    match sent {
        Ok(()) => Ok(()),
        Err(error)
            if error
                .api()
                .is_some_and(|api| (400..500).contains(&api.code)) =>
        {
            tracing::debug!(%edit, %error, "the server refused a generated step");
            Ok(())
        }
        Err(error) => Err(error.into()),
    }
}
