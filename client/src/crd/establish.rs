//! Applying a CRD and waiting until the server serves its kind.
//!
//! Creating a CustomResourceDefinition returns at once, but the kind is not served yet: the
//! server's controllers first check its names against every other kind (condition
//! `NamesAccepted`), then start serving it (condition `Established`). A client that creates an
//! object of the kind in between gets a 404. So installing a CRD is two steps:
//!
//! ```text
//!  PATCH customresourcedefinitions/NAME (server-side apply, field manager "ferrokube", force)
//!    │  create or replace: what the CRD says now is what the server holds
//!    ▼
//!  GET customresourcedefinitions/NAME every 100 ms, until one of
//!    ├─ Established=True ──────────────▶ Ok(the CRD as the server holds it)
//!    ├─ NamesAccepted=False ───────────▶ Err(NamesNotAccepted: the server's reason and message)
//!    └─ the timeout passes ────────────▶ Err(Timeout: with the last conditions seen)
//! ```
//!
//! Polling rather than a watch: the wait is short (kube-apiserver establishes within a second;
//! ferrokube's embedded server inside the write itself), and a poll survives a dropped connection
//! without code of its own.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use tokio::time::Instant;

use crate::api::{Patch, PatchParams};
use crate::{Api, Client, Error};

/// The field manager of the CRDs [`apply_and_wait`] applies.
pub const FIELD_MANAGER: &str = "ferrokube";

/// How often the CRD is read while waiting.
const POLL: Duration = Duration::from_millis(100);

/// Where a deadline too far for the clock is put instead: about thirty years ahead.
const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);

/// Why a CRD did not become Established.
#[derive(Debug, thiserror::Error)]
pub enum EstablishError {
    /// The CRD has no `metadata.name`.
    #[error("the CustomResourceDefinition has no metadata.name")]
    Unnamed,
    /// The server refused the CRD (e.g. 422: a schema that is not structural) or could not be
    /// reached.
    #[error("applying CustomResourceDefinition {name}: {source}")]
    Apply {
        name: String,
        #[source]
        source: Error,
    },
    /// Reading the CRD back failed.
    #[error("reading CustomResourceDefinition {name}: {source}")]
    Read {
        name: String,
        #[source]
        source: Error,
    },
    /// The server did not accept the names (a plural, short name or kind another CRD holds).
    #[error("CustomResourceDefinition {name}: names not accepted ({reason}): {message}")]
    NamesNotAccepted {
        name: String,
        reason: String,
        message: String,
    },
    /// Not Established within the time given.
    #[error(
        "CustomResourceDefinition {name} not Established after {after:?} (conditions: {conditions})"
    )]
    Timeout {
        name: String,
        after: Duration,
        /// The last conditions seen, as `Type=Status (reason: message)`, or `none`.
        conditions: String,
    },
}

/// Applies `crd` (creating it, or replacing what this field manager set before) and waits until
/// the server serves its kind (condition `Established=True`), for at most `timeout`. Returns the
/// CRD as the server holds it.
///
/// ```no_run
/// # async fn f(client: ferrokube_client::Client, crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition) -> Result<(), ferrokube_client::crd::EstablishError> {
/// use std::time::Duration;
/// ferrokube_client::crd::apply_and_wait(&client, &crd, Duration::from_secs(30)).await?;
/// # Ok(()) }
/// ```
pub async fn apply_and_wait(
    client: &Client,
    crd: &CustomResourceDefinition,
    timeout: Duration,
) -> Result<CustomResourceDefinition, EstablishError> {
    let name = crd.metadata.name.clone().ok_or(EstablishError::Unnamed)?;
    // A caller may pass `Duration::MAX` for "as long as it takes": `now + timeout` would overflow
    // and panic, so the deadline saturates at a far future instead.
    let now = Instant::now();
    let deadline = now
        .checked_add(timeout)
        .or_else(|| now.checked_add(FAR_FUTURE))
        .unwrap_or(now);
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut applied = api
        .patch(&name, &params, &Patch::Apply(crd))
        .await
        .map_err(|source| EstablishError::Apply {
            name: name.clone(),
            source,
        })?;
    loop {
        let conditions = applied
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default();
        let find = |type_: &str| conditions.iter().find(|c| c.type_ == type_);
        if find("Established").is_some_and(|c| c.status == "True") {
            tracing::debug!(crd = %name, "CustomResourceDefinition established");
            return Ok(applied);
        }
        if let Some(refused) = find("NamesAccepted").filter(|c| c.status == "False") {
            return Err(EstablishError::NamesNotAccepted {
                name,
                reason: refused.reason.clone().unwrap_or_default(),
                message: refused.message.clone().unwrap_or_default(),
            });
        }
        if Instant::now() + POLL > deadline {
            let seen: Vec<String> = conditions
                .iter()
                .map(|c| {
                    format!(
                        "{}={} ({}: {})",
                        c.type_,
                        c.status,
                        c.reason.as_deref().unwrap_or(""),
                        c.message.as_deref().unwrap_or("")
                    )
                })
                .collect();
            return Err(EstablishError::Timeout {
                name,
                after: timeout,
                conditions: if seen.is_empty() {
                    "none".into()
                } else {
                    seen.join(", ")
                },
            });
        }
        tokio::time::sleep(POLL).await;
        applied = api
            .get(&name)
            .await
            .map_err(|source| EstablishError::Read {
                name: name.clone(),
                source,
            })?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    #[tokio::test]
    async fn a_timeout_of_duration_max_does_not_panic() {
        // Nothing listens on port 9: the apply fails, after the deadline is computed (where
        // `Instant::now() + Duration::MAX` used to panic).
        let url = "http://127.0.0.1:9".parse().expect("url");
        let client = Client::new(Config::new(url)).expect("client");
        let mut crd = CustomResourceDefinition::default();
        crd.metadata.name = Some("widgets.example.com".into());
        let outcome = apply_and_wait(&client, &crd, Duration::MAX).await;
        assert!(
            matches!(outcome, Err(EstablishError::Apply { .. })),
            "{outcome:?}"
        );
    }
}
