//! # Status conditions
//!
//! A controller reports what it found in `status.conditions`: a list with at most one entry per
//! *type* (`Ready`, `Progressing`, `Degraded`, …), each saying `True`, `False` or `Unknown`, with a
//! machine-readable `reason`, a human `message`, the `observedGeneration` (the `metadata.generation`
//! of the spec the condition describes: readers compare it with the current generation to tell a
//! fresh report from a stale one) and `lastTransitionTime`, when the *status* last flipped.
//!
//! ```text
//!  reconcile: compute what holds ──▶ set_condition(&mut conditions, new)  (pure, in memory)
//!                                        │ changed?
//!                                        ▼
//!             update_status(api, name, |obj| set_condition(...)) ──▶ GET ─▶ mutate ─▶ PUT …/status
//!                                                                    ▲                   │ 409
//!                                                                    └── up to 5 tries ──┘
//! ```
//!
//! [`set_condition`] follows apimachinery's `meta.SetStatusCondition`: the transition time moves
//! only when the status changes, so re-reporting `Ready=True` on every reconcile does not make the
//! condition look new, and nothing is written when nothing changed. The type is the standard
//! `metav1.Condition` of k8s-openapi, the one custom resources use. (Built-in kinds have their own
//! condition types, e.g. `ReplicaSetCondition`; [`update_status`] works for any kind.)
//!
//! [`update_status`] is the read-modify-write of the status subresource, retried on conflict like
//! client-go's `retry.RetryOnConflict(retry.DefaultRetry, …)`. [`update_status_from`] starts from
//! the object the reconcile was given instead of a GET: no request at all when nothing changed,
//! one PUT when the cache was current, and `update_status` only after a 409:
//!
//! ```text
//!  update_status_from(api, &cached, mutate) ─▶ mutate(copy of cached) ─ false ─▶ Ok(None), no request
//!                                                  │ true
//!                                                  ▼
//!                             PUT …/status at cached's resourceVersion ─ 409 ─▶ update_status(..)
//! ```
//!
//! A `lastTransitionTime` at or before 1970-01-01T00:00:00Z counts as *unset* (the Go zero time
//! has no counterpart in k8s-openapi's required `Time`); [`ConditionBuilder`] leaves it unset so
//! that [`set_condition`] picks it.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use ferrokube_client::api::{Api, PostParams};
use ferrokube_client::error::Error;
use ferrokube_core::Object;

/// The `status` of a condition that holds.
pub const TRUE: &str = "True";
/// The `status` of a condition that does not hold.
pub const FALSE: &str = "False";
/// The `status` of a condition whose state is not known.
pub const UNKNOWN: &str = "Unknown";

/// Attempts of [`update_status`]: client-go's `retry.DefaultRetry.Steps`.
pub const UPDATE_STATUS_ATTEMPTS: u32 = 5;
/// Wait between attempts of [`update_status`], before jitter: `retry.DefaultRetry.Duration`.
pub const UPDATE_STATUS_INTERVAL: Duration = Duration::from_millis(10);
/// Up to this fraction of [`UPDATE_STATUS_INTERVAL`] is added at random: `retry.DefaultRetry.Jitter`.
pub const UPDATE_STATUS_JITTER: f64 = 0.1;

/// Puts `new` into `conditions` with `meta.SetStatusCondition`'s rules, and says whether anything
/// changed:
///
/// - no condition of `new.type_` yet: `new` is appended, its `lastTransitionTime` set to now if
///   unset (see the [module docs](self)); changed.
/// - one exists: if its `status` differs, the status is taken and `lastTransitionTime` becomes
///   `new`'s (or now, if unset); `reason`, `message` and `observedGeneration` are taken from `new`
///   (an absent observedGeneration equals 0). If the status is the same, the transition time is
///   kept whatever `new` says. Changed if any of these four fields changed.
///
/// "Now" is truncated to whole seconds, the precision the API stores, so an object written and read
/// back compares equal.
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == new.type_) else {
        let mut new = new;
        if is_unset(&new.last_transition_time) {
            new.last_transition_time = Time(now());
        }
        conditions.push(new);
        return true;
    };
    let mut changed = false;
    if existing.status != new.status {
        existing.status = new.status;
        existing.last_transition_time = if is_unset(&new.last_transition_time) {
            Time(now())
        } else {
            new.last_transition_time
        };
        changed = true;
    }
    if existing.reason != new.reason {
        existing.reason = new.reason;
        changed = true;
    }
    if existing.message != new.message {
        existing.message = new.message;
        changed = true;
    }
    if existing.observed_generation.unwrap_or(0) != new.observed_generation.unwrap_or(0) {
        existing.observed_generation = new.observed_generation;
        changed = true;
    }
    changed
}

/// The condition of type `type_`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of type `type_` is present with status `True`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == TRUE)
}

/// Removes the condition of type `type_`; returns whether there was one.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// Builds a [`Condition`] for [`set_condition`]:
///
/// ```
/// use ferrokube_runtime::controller::conditions::{ConditionBuilder, TRUE};
/// let ready = ConditionBuilder::new("Ready", TRUE)
///     .reason("AllReplicasReady")
///     .message("3/3 replicas are ready")
///     .observed_generation(Some(4))
///     .build();
/// assert_eq!(ready.status, "True");
/// ```
///
/// Defaults: empty `reason` and `message` (the API requires a non-empty, CamelCase reason for
/// `metav1.Condition`: set one), no `observedGeneration`, and an unset `lastTransitionTime`
/// (chosen by [`set_condition`]).
#[derive(Debug, Clone)]
#[must_use]
pub struct ConditionBuilder {
    condition: Condition,
}

impl ConditionBuilder {
    /// A condition of type `type_` (`Ready`, `example.com/Synced`) with `status` ([`TRUE`],
    /// [`FALSE`] or [`UNKNOWN`]).
    pub fn new(type_: impl Into<String>, status: impl Into<String>) -> ConditionBuilder {
        ConditionBuilder {
            condition: Condition {
                type_: type_.into(),
                status: status.into(),
                reason: String::new(),
                message: String::new(),
                observed_generation: None,
                last_transition_time: Time(Timestamp::UNIX_EPOCH),
            },
        }
    }

    /// A condition of type `type_` that is `True` if `holds`, else `False`.
    pub fn from_bool(type_: impl Into<String>, holds: bool) -> ConditionBuilder {
        ConditionBuilder::new(type_, if holds { TRUE } else { FALSE })
    }

    /// Why, in CamelCase (`MinimumReplicasAvailable`).
    pub fn reason(mut self, reason: impl Into<String>) -> ConditionBuilder {
        self.condition.reason = reason.into();
        self
    }

    /// Details for humans.
    pub fn message(mut self, message: impl Into<String>) -> ConditionBuilder {
        self.condition.message = message.into();
        self
    }

    /// The `metadata.generation` this condition was computed from: that of the object the
    /// reconcile did its work on (the one it was handed), read *before* the status write. Never
    /// the generation of the object a status `mutate` closure is given: after a 409 that is a
    /// fresh read, possibly of a newer spec the work never saw (see [`update_status_from`]).
    pub fn observed_generation(mut self, generation: Option<i64>) -> ConditionBuilder {
        self.condition.observed_generation = generation;
        self
    }

    /// A transition time of your own, used when the condition is new or its status changes.
    pub fn last_transition_time(mut self, time: Timestamp) -> ConditionBuilder {
        self.condition.last_transition_time = Time(time);
        self
    }

    /// The condition.
    pub fn build(self) -> Condition {
        self.condition
    }
}

impl From<ConditionBuilder> for Condition {
    fn from(builder: ConditionBuilder) -> Condition {
        builder.build()
    }
}

fn is_unset(time: &Time) -> bool {
    time.0 <= Timestamp::UNIX_EPOCH
}

/// Now, in whole seconds (the precision the API stores).
fn now() -> Timestamp {
    let now = ferrokube_core::time::now();
    Timestamp::new(now.as_second(), 0).unwrap_or(now)
}

/// Read-modify-write of the object `name`'s status, retried on conflict:
///
/// 1. GET the object (the main endpoint, from the server, not a cache);
/// 2. call `mutate` on it; it returns whether it changed anything. `false`: nothing is written
///    and `Ok(None)` is returned;
/// 3. PUT it to the `status` subresource, carrying the resourceVersion the GET read (a change of
///    `metadata.resourceVersion` made by `mutate` is undone), so the write lands only on the
///    version `mutate` saw; returns `Ok(Some(object as written))`;
/// 4. if the server answers 409 Conflict (the object changed in between), go back to 1, at most
///    [`UPDATE_STATUS_ATTEMPTS`] (5) attempts in all, sleeping [`UPDATE_STATUS_INTERVAL`] (10 ms)
///    plus up to [`UPDATE_STATUS_JITTER`] (10 %) of it at random before each retry: client-go's
///    `retry.RetryOnConflict(retry.DefaultRetry, …)`. After the last attempt the conflict is
///    returned. Any other error is returned at once.
///
/// `mutate` runs once per attempt on a freshly read object, so it must compute the status from
/// what it is given (e.g. `set_condition`), not from what a previous call did. Only the status
/// reaches the server: the status subresource ignores everything else. `api` must be in the
/// object's namespace for a namespaced kind.
pub async fn update_status<K, F>(
    api: &Api<K>,
    name: &str,
    mut mutate: F,
) -> Result<Option<K>, Error>
where
    K: Object,
    F: FnMut(&mut K) -> bool,
{
    let mut attempt = 1;
    loop {
        let mut object = api.get(name).await?;
        let read_version = object.meta().resource_version.clone();
        if !mutate(&mut object) {
            return Ok(None);
        }
        object.meta_mut().resource_version = read_version;
        match api
            .replace_status(name, &PostParams::default(), &object)
            .await
        {
            Ok(written) => return Ok(Some(written)),
            Err(error) if error.is_conflict() && attempt < UPDATE_STATUS_ATTEMPTS => {
                tracing::debug!(name, attempt, %error, "status write conflicted; retrying");
                attempt += 1;
                let jitter = UPDATE_STATUS_INTERVAL
                    .mul_f64(UPDATE_STATUS_JITTER * ferrokube_core::random::unit_f64());
                tokio::time::sleep(UPDATE_STATUS_INTERVAL + jitter).await;
            }
            Err(error) => return Err(error),
        }
    }
}

/// [`update_status`] starting from the object as the reconcile got it (`cached`), which saves the
/// GET in the common case:
///
/// 1. call `mutate` on a copy of `cached`; `false`: nothing is sent at all, `Ok(None)`;
/// 2. PUT it to the `status` subresource with `cached`'s resourceVersion, so it lands only if the
///    object has not changed since the cache saw it;
/// 3. on 409 Conflict (the cache was behind, or someone wrote in between), fall back to
///    [`update_status`]: read afresh, `mutate` again, write, retried on conflict as it is.
///
/// The status written is always computed from the version it lands on. As with `update_status`,
/// `mutate` must compute the status from what it is given; `api` must be in the object's
/// namespace for a namespaced kind.
///
/// ## Where `observedGeneration` comes from
///
/// From the object the reconcile did its work on (`cached`, the one it was handed), read before
/// the call and captured by `mutate`; **not** from the object `mutate` is given. After a 409,
/// `mutate` runs on a fresh read, and if the spec changed meanwhile that read has the next
/// generation: a `Ready=True` stamped with *its* generation would claim work on a spec no reconcile
/// has seen yet, and readers comparing `observedGeneration` with `metadata.generation` would take
/// the stale report for a fresh one. (The reconcile of the new generation, which the spec change
/// queued, writes the next report.) The statuses a condition carries beside it
/// (`status.observedGeneration`) follow the same rule.
///
/// ```
/// use ferrokube_runtime::controller::conditions::{ConditionBuilder, TRUE, set_condition};
/// use k8s_openapi::api::policy::v1::PodDisruptionBudget;
///
/// // The object the reconcile was handed and did its work on: generation 1.
/// let mut reconciled = PodDisruptionBudget::default();
/// reconciled.metadata.generation = Some(1);
///
/// // Right: read the generation from it before the call, and capture it.
/// let worked_on = reconciled.metadata.generation;
/// let mut mutate = |pdb: &mut PodDisruptionBudget| {
///     let ready = ConditionBuilder::new("Ready", TRUE)
///         .reason("Done")
///         .observed_generation(worked_on) // not pdb.metadata.generation
///         .build();
///     let status = pdb.status.get_or_insert_with(Default::default);
///     set_condition(status.conditions.get_or_insert_with(Vec::new), ready)
/// };
///
/// // What update_status_from does after a 409: `mutate` on a fresh read, here of generation 2
/// // (the spec changed while the reconcile worked on generation 1).
/// let mut fresh = reconciled.clone();
/// fresh.metadata.generation = Some(2);
/// assert!(mutate(&mut fresh));
/// let conditions = fresh.status.and_then(|s| s.conditions).unwrap_or_default();
/// assert_eq!(
///     conditions[0].observed_generation,
///     Some(1),
///     "Ready speaks for the generation the work was done on"
/// );
/// ```
pub async fn update_status_from<K, F>(
    api: &Api<K>,
    cached: &K,
    mut mutate: F,
) -> Result<Option<K>, Error>
where
    K: Object,
    F: FnMut(&mut K) -> bool,
{
    let mut object = cached.clone();
    if !mutate(&mut object) {
        return Ok(None);
    }
    object.meta_mut().resource_version = cached.meta().resource_version.clone();
    let name = cached.meta().name.clone().unwrap_or_default();
    match api
        .replace_status(&name, &PostParams::default(), &object)
        .await
    {
        Ok(written) => Ok(Some(written)),
        Err(error) if error.is_conflict() => {
            tracing::debug!(name, %error, "status write from the cached object conflicted; reading afresh");
            update_status(api, &name, mutate).await
        }
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::new(seconds, 0).expect("valid timestamp")
    }

    fn ready(status: &str) -> ConditionBuilder {
        ConditionBuilder::new("Ready", status).reason("Checked")
    }

    #[test]
    fn controller_conditions_a_new_condition_is_appended_with_now_or_its_own_time() {
        let mut conditions = Vec::new();
        assert!(set_condition(&mut conditions, ready(TRUE).build()));
        assert_eq!(conditions.len(), 1);
        let stamped = conditions[0].last_transition_time.0;
        assert!(stamped > at(1_700_000_000), "now was used: {stamped}");
        assert_eq!(stamped.subsec_nanosecond(), 0, "whole seconds");

        let mut conditions = Vec::new();
        let own = ConditionBuilder::new("Synced", FALSE)
            .last_transition_time(at(1_000))
            .build();
        assert!(set_condition(&mut conditions, own));
        assert_eq!(conditions[0].last_transition_time.0, at(1_000));
    }

    #[test]
    fn controller_conditions_the_same_status_keeps_the_old_transition_time() {
        let mut conditions = vec![ready(TRUE).last_transition_time(at(1_000)).build()];
        // The same status again, even with a time of its own: the transition time stays.
        let again = ready(TRUE).last_transition_time(at(5_000)).build();
        assert!(!set_condition(&mut conditions, again), "nothing changed");
        assert_eq!(conditions[0].last_transition_time.0, at(1_000));
        // A new message alone is a change, but not a transition.
        assert!(set_condition(
            &mut conditions,
            ready(TRUE).message("still fine").build()
        ));
        assert_eq!(conditions[0].message, "still fine");
        assert_eq!(conditions[0].last_transition_time.0, at(1_000));
    }

    #[test]
    fn controller_conditions_a_changed_status_moves_the_transition_time() {
        let mut conditions = vec![ready(TRUE).last_transition_time(at(1_000)).build()];
        assert!(set_condition(
            &mut conditions,
            ready(FALSE).reason("Broken").build()
        ));
        assert_eq!(conditions[0].status, FALSE);
        assert_eq!(conditions[0].reason, "Broken");
        assert!(conditions[0].last_transition_time.0 > at(1_700_000_000));
        // With a time of its own, that time is used.
        assert!(set_condition(
            &mut conditions,
            ready(UNKNOWN).last_transition_time(at(2_000)).build()
        ));
        assert_eq!(conditions[0].last_transition_time.0, at(2_000));
        assert_eq!(conditions.len(), 1, "one condition per type");
    }

    #[test]
    fn controller_conditions_observed_generation_is_updated() {
        let mut conditions = vec![ready(TRUE).observed_generation(Some(1)).build()];
        assert!(set_condition(
            &mut conditions,
            ready(TRUE).observed_generation(Some(2)).build()
        ));
        assert_eq!(conditions[0].observed_generation, Some(2));
        // Absent and 0 are the same generation (Go's zero value).
        let mut conditions = vec![ready(TRUE).observed_generation(Some(0)).build()];
        assert!(!set_condition(&mut conditions, ready(TRUE).build()));
    }

    #[test]
    fn controller_conditions_find_is_true_and_remove() {
        let mut conditions = vec![
            ready(TRUE).build(),
            ConditionBuilder::from_bool("Degraded", false).build(),
        ];
        assert!(is_condition_true(&conditions, "Ready"));
        assert!(!is_condition_true(&conditions, "Degraded"));
        assert!(!is_condition_true(&conditions, "Missing"));
        assert_eq!(
            find_condition(&conditions, "Degraded").map(|c| c.status.as_str()),
            Some(FALSE)
        );
        assert!(remove_condition(&mut conditions, "Ready"));
        assert!(!remove_condition(&mut conditions, "Ready"));
        assert_eq!(conditions.len(), 1);
        assert!(find_condition(&conditions, "Ready").is_none());
    }
}
