//! Options of the API verbs, as query parameters and request bodies. Defaults are the server's.

use ferrokube_core::ManagedFields;
use ferrokube_core::shard::ShardSelector;
use serde::Serialize;

use super::query::Query;

/// `resourceVersionMatch`: how a list's `resourceVersion` is interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionMatch {
    /// Exactly this version (served from etcd history, 410 if compacted).
    Exact,
    /// This version or newer (may be served from the watch cache).
    NotOlderThan,
}

impl VersionMatch {
    fn as_str(self) -> &'static str {
        match self {
            VersionMatch::Exact => "Exact",
            VersionMatch::NotOlderThan => "NotOlderThan",
        }
    }
}

/// Options of `list`.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct ListParams {
    /// e.g. `app=web,tier!=cache`.
    pub label_selector: Option<String>,
    /// e.g. `metadata.name=web,status.phase=Running`.
    pub field_selector: Option<String>,
    /// `shardSelector`: only the objects of some hash ranges of their uid or namespace, e.g. the
    /// text of a [`ShardSelector`] (server-side sharding, Kubernetes 1.36+ with the
    /// `ShardedListAndWatch` gate; other servers ignore it, and their lists then carry no
    /// `metadata.shardInfo`).
    pub shard_selector: Option<String>,
    /// Page size; `None` lists everything in one answer.
    pub limit: Option<u32>,
    /// The `continue` token of the previous page.
    pub continue_token: Option<String>,
    /// `None`: the latest, consistent (from etcd). `Some("0")`: any version (watch cache).
    pub resource_version: Option<String>,
    pub version_match: Option<VersionMatch>,
    /// Whether the items keep `metadata.managedFields`. Default [`ManagedFields::Keep`];
    /// [`ManagedFields::Drop`] skips them while decoding, never building them (an informer's
    /// list does). Decided here, in the client: not sent.
    pub managed_fields: ManagedFields,
}

impl ListParams {
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_string());
        self
    }
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_string());
        self
    }
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }
    /// Only one shard: `selector` is sent as `shardSelector` as written (a [`ShardSelector`]'s
    /// `to_string()`, or any text, e.g. to see the server refuse it).
    pub fn shard_selector(mut self, selector: &str) -> Self {
        self.shard_selector = Some(selector.to_string());
        self
    }
    /// Only the objects `selector` selects (see [`ListParams::shard_selector`]).
    pub fn shard(self, selector: &ShardSelector) -> Self {
        self.shard_selector(&selector.to_string())
    }
    /// See [`ListParams::managed_fields`](ListParams#structfield.managed_fields).
    pub fn managed_fields(mut self, managed_fields: ManagedFields) -> Self {
        self.managed_fields = managed_fields;
        self
    }
    pub fn resource_version(mut self, version: &str, matching: Option<VersionMatch>) -> Self {
        self.resource_version = Some(version.to_string());
        self.version_match = matching;
        self
    }

    pub(crate) fn write(&self, query: &mut Query) {
        query.opt("labelSelector", self.label_selector.as_deref());
        query.opt("fieldSelector", self.field_selector.as_deref());
        query.opt("shardSelector", self.shard_selector.as_deref());
        query.opt("limit", self.limit.map(|l| l.to_string()).as_deref());
        query.opt("continue", self.continue_token.as_deref());
        query.opt("resourceVersion", self.resource_version.as_deref());
        query.opt(
            "resourceVersionMatch",
            self.version_match.map(VersionMatch::as_str),
        );
    }
}

/// Options of `watch`.
#[derive(Debug, Clone)]
#[must_use]
pub struct WatchParams {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    /// `shardSelector`, as [`ListParams::shard_selector`](ListParams#structfield.shard_selector).
    pub shard_selector: Option<String>,
    /// The server ends the watch after this long (it picks its own limit, minutes, if `None`).
    pub timeout_seconds: Option<u32>,
    /// Ask for BOOKMARK events, which carry only a newer resourceVersion. Default true.
    pub allow_bookmarks: bool,
    /// Streaming list: first an ADDED for every existing object, then a BOOKMARK annotated
    /// `k8s.io/initial-events-end` (servers ≥ 1.27 with the feature on; others answer an error).
    /// Sends `resourceVersionMatch=NotOlderThan` with it, as the API requires. Default false.
    pub send_initial_events: bool,
    /// How long the watch may bring nothing (no event, no bookmark, not a byte) before the client
    /// presumes its connection dead and ends it with [`Error::Idle`](crate::Error::Idle).
    /// Default `None`: what the server promised (a bookmark about every minute when they are
    /// allowed, the end at `timeout_seconds`), plus 30 s; see [`crate::watch`]. Not sent.
    pub idle_timeout: Option<std::time::Duration>,
    /// Whether the events' objects keep `metadata.managedFields`. Default
    /// [`ManagedFields::Keep`]; [`ManagedFields::Drop`] skips them while decoding (an informer's
    /// watch does). Not sent.
    pub managed_fields: ManagedFields,
}

impl Default for WatchParams {
    fn default() -> Self {
        WatchParams {
            label_selector: None,
            field_selector: None,
            shard_selector: None,
            timeout_seconds: None,
            allow_bookmarks: true,
            send_initial_events: false,
            idle_timeout: None,
            managed_fields: ManagedFields::Keep,
        }
    }
}

impl WatchParams {
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_string());
        self
    }
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_string());
        self
    }
    /// Only one shard: `selector` is sent as `shardSelector` as written.
    pub fn shard_selector(mut self, selector: &str) -> Self {
        self.shard_selector = Some(selector.to_string());
        self
    }
    /// Only the objects `selector` selects.
    pub fn shard(self, selector: &ShardSelector) -> Self {
        self.shard_selector(&selector.to_string())
    }
    pub fn timeout(mut self, seconds: u32) -> Self {
        self.timeout_seconds = Some(seconds);
        self
    }
    pub fn initial_events(mut self) -> Self {
        self.send_initial_events = true;
        self
    }

    pub(crate) fn write(&self, query: &mut Query, resource_version: &str) {
        query.pair("watch", "true");
        query.opt("labelSelector", self.label_selector.as_deref());
        query.opt("fieldSelector", self.field_selector.as_deref());
        query.opt("shardSelector", self.shard_selector.as_deref());
        query.opt(
            "timeoutSeconds",
            self.timeout_seconds.map(|t| t.to_string()).as_deref(),
        );
        if self.allow_bookmarks {
            query.pair("allowWatchBookmarks", "true");
        }
        if !resource_version.is_empty() {
            query.pair("resourceVersion", resource_version);
        }
        if self.send_initial_events {
            query.pair("sendInitialEvents", "true");
            query.pair("resourceVersionMatch", "NotOlderThan");
        }
    }
}

/// Options of `create` and `replace`.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct PostParams {
    /// Validate and answer without storing.
    pub dry_run: bool,
    /// Who is making the change (recorded in managedFields).
    pub field_manager: Option<String>,
}

impl PostParams {
    pub(crate) fn write(&self, query: &mut Query) {
        if self.dry_run {
            query.pair("dryRun", "All");
        }
        query.opt("fieldManager", self.field_manager.as_deref());
    }
}

/// A patch, by type (each has its own content type).
#[derive(Debug, Clone)]
pub enum Patch<P: Serialize> {
    /// RFC 7386 JSON merge patch.
    Merge(P),
    /// RFC 6902 JSON patch: a list of operations.
    Json(P),
    /// Kubernetes strategic merge patch (lists merge by key, e.g. containers by name).
    Strategic(P),
    /// Server-side apply: the fields this manager owns; needs `PatchParams::field_manager`.
    Apply(P),
}

impl<P: Serialize> Patch<P> {
    pub(crate) fn content_type(&self) -> &'static str {
        match self {
            Patch::Merge(_) => "application/merge-patch+json",
            Patch::Json(_) => "application/json-patch+json",
            Patch::Strategic(_) => "application/strategic-merge-patch+json",
            Patch::Apply(_) => "application/apply-patch+yaml",
        }
    }

    pub(crate) fn body(&self) -> &P {
        match self {
            Patch::Merge(p) | Patch::Json(p) | Patch::Strategic(p) | Patch::Apply(p) => p,
        }
    }

    pub(crate) fn is_apply(&self) -> bool {
        matches!(self, Patch::Apply(_))
    }
}

/// Options of `patch`.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct PatchParams {
    pub dry_run: bool,
    /// Required for server-side apply.
    pub field_manager: Option<String>,
    /// Server-side apply: take ownership of conflicting fields.
    pub force: bool,
}

impl PatchParams {
    /// Server-side apply as `manager`.
    pub fn apply(manager: &str) -> Self {
        PatchParams {
            field_manager: Some(manager.to_string()),
            ..PatchParams::default()
        }
    }
    pub fn force(mut self) -> Self {
        self.force = true;
        self
    }

    pub(crate) fn write(&self, query: &mut Query) {
        if self.dry_run {
            query.pair("dryRun", "All");
        }
        query.opt("fieldManager", self.field_manager.as_deref());
        if self.force {
            query.pair("force", "true");
        }
    }
}

/// How dependents are treated when their owner is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PropagationPolicy {
    /// Dependents are left without the owner.
    Orphan,
    /// The owner goes at once; the garbage collector deletes dependents after.
    Background,
    /// The owner stays (with a `foregroundDeletion` finalizer) until its blocking dependents are gone.
    Foreground,
}

/// Delete only if the object still has this uid and/or resourceVersion.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

/// Options of `delete` and `delete_collection` (sent as a `DeleteOptions` body).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
#[must_use]
pub struct DeleteParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub propagation_policy: Option<PropagationPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preconditions: Option<Preconditions>,
    #[serde(
        skip_serializing_if = "std::ops::Not::not",
        serialize_with = "dry_run_all"
    )]
    pub dry_run: bool,
}

fn dry_run_all<S: serde::Serializer>(_: &bool, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(["All"])
}

impl DeleteParams {
    pub fn background() -> Self {
        DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        }
    }
    pub fn foreground() -> Self {
        DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            ..DeleteParams::default()
        }
    }
    pub fn orphan() -> Self {
        DeleteParams {
            propagation_policy: Some(PropagationPolicy::Orphan),
            ..DeleteParams::default()
        }
    }
    pub fn grace_period(mut self, seconds: u32) -> Self {
        self.grace_period_seconds = Some(seconds);
        self
    }
    pub fn preconditions(mut self, preconditions: Preconditions) -> Self {
        self.preconditions = Some(preconditions);
        self
    }

    /// With preconditions, deleting twice cannot delete a different object: safe to retry.
    pub(crate) fn idempotent(&self) -> bool {
        self.preconditions.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_and_watch_queries() {
        let mut query = Query::default();
        ListParams::default()
            .labels("app in (web,api),tier!=cache")
            .limit(500)
            .resource_version("0", None)
            .write(&mut query);
        assert_eq!(
            query.finish(),
            "?labelSelector=app%20in%20%28web%2Capi%29%2Ctier%21%3Dcache&limit=500&resourceVersion=0"
        );
        let mut query = Query::default();
        WatchParams::default()
            .timeout(1)
            .initial_events()
            .write(&mut query, "42");
        assert_eq!(
            query.finish(),
            "?watch=true&timeoutSeconds=1&allowWatchBookmarks=true&resourceVersion=42&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        );
    }

    #[test]
    fn shard_selector_is_sent_on_lists_and_watches() {
        let selector = ShardSelector::member(3, 4).expect("member");
        let mut query = Query::default();
        ListParams::default().shard(&selector).write(&mut query);
        assert_eq!(
            query.finish(),
            "?shardSelector=shardRange%28object.metadata.uid%2C%20%270xc000000000000000%27%2C%20%270x10000000000000000%27%29"
        );
        let mut query = Query::default();
        WatchParams::default()
            .shard_selector("x || y")
            .write(&mut query, "");
        assert_eq!(
            query.finish(),
            "?watch=true&shardSelector=x%20%7C%7C%20y&allowWatchBookmarks=true"
        );
    }

    #[test]
    fn delete_options_body() {
        let params = DeleteParams::foreground()
            .grace_period(0)
            .preconditions(Preconditions {
                uid: Some("u1".into()),
                resource_version: None,
            });
        let json = serde_json::to_value(&params).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!({"propagationPolicy":"Foreground","gracePeriodSeconds":0,"preconditions":{"uid":"u1"}})
        );
        assert!(params.idempotent());
        let dry = DeleteParams {
            dry_run: true,
            ..DeleteParams::default()
        };
        assert_eq!(
            serde_json::to_value(&dry).expect("serializes"),
            serde_json::json!({"dryRun":["All"]})
        );
    }
}
