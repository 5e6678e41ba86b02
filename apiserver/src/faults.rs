//! Fault injection: the failures a controller must survive, on demand and reproducible.
//!
//! | fault | what clients see |
//! |---|---|
//! | [`Faults::fail_writes`] | a fraction of creates/updates/patches/deletes answered 500, or 429 with `Retry-After` |
//! | [`Faults::conflict_updates`] | a fraction of updates and patches answered 409 Conflict |
//! | [`Faults::delay_watches`] | every watch event delivered this long after its write |
//! | [`Faults::pause`] | requests wait until [`Faults::resume`] |
//! | `close_watches`, `compact` | on the store ([`crate::Store`]): streams end; old resourceVersions get 410 |
//!
//! Which requests fail is drawn from one random generator seeded by [`Faults::seed`], so a test that
//! sends the same requests in the same order sees the same failures. The same switches are reachable
//! over HTTP at `/ferrokube/faults` (see [`FaultSettings`]), behind the server's bearer token when
//! it has one.
//!
//! # Valid settings
//!
//! A fraction is a probability: between 0 and 1, and a number (not NaN). A delay or a
//! `Retry-After` is at most an hour ([`MAX_WATCH_DELAY`], [`MAX_RETRY_AFTER_SECONDS`]); more is
//! no longer a fault a controller is meant to survive, and a delay near `u64::MAX` milliseconds
//! would overflow the clock when added to a write's time. Out-of-range values are handled in one
//! of two ways, never by a panic:
//!
//! - refused: `PUT /ferrokube/faults` answers 422 `Invalid` naming each bad field (as
//!   kube-apiserver answers an invalid object), and [`Faults::try_set`] returns a
//!   [`FaultSettingsError`];
//! - clamped: the setters ([`Faults::set`], [`Faults::fail_writes`], [`Faults::conflict_updates`],
//!   [`Faults::delay_watches`]) keep their infallible signatures and bring a value into range (NaN
//!   counts as 0: no faults).

use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::status::StatusError;

/// The longest watch delivery delay a setting may ask for: one hour. (No kube-apiserver
/// equivalent: this is a fault, not a feature of the real server.)
pub const MAX_WATCH_DELAY: Duration = Duration::from_secs(3600);

/// The largest `Retry-After` an injected 429 may carry: one hour. (kube-apiserver's own 429s say
/// 1 second.)
pub const MAX_RETRY_AFTER_SECONDS: u64 = 3600;

/// How injected write failures answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum WriteFailure {
    /// 500 InternalError.
    InternalError,
    /// 429 TooManyRequests with `Retry-After: seconds` (at most [`MAX_RETRY_AFTER_SECONDS`]).
    TooManyRequests { retry_after_seconds: u64 },
}

impl WriteFailure {
    /// The same failure with its `Retry-After` brought within [`MAX_RETRY_AFTER_SECONDS`].
    fn clamped(self) -> WriteFailure {
        match self {
            WriteFailure::InternalError => WriteFailure::InternalError,
            WriteFailure::TooManyRequests {
                retry_after_seconds,
            } => WriteFailure::TooManyRequests {
                retry_after_seconds: retry_after_seconds.min(MAX_RETRY_AFTER_SECONDS),
            },
        }
    }
}

/// The fault switches, as set and reported by `/ferrokube/faults` (all off by default). See
/// [valid settings](self#valid-settings) for the ranges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FaultSettings {
    /// Seed of the generator that picks failing requests (default 0).
    pub seed: u64,
    /// Fraction of writes that fail, 0 to 1 (default 0).
    pub fail_writes: f64,
    /// How they fail (default 500).
    pub write_failure: WriteFailure,
    /// Fraction of updates and patches answered 409, 0 to 1 (default 0).
    pub conflict_updates: f64,
    /// Watch delivery delay in milliseconds, at most an hour (default 0).
    pub watch_delay_ms: u64,
    /// Requests wait while true (default false).
    pub paused: bool,
}

impl Default for FaultSettings {
    fn default() -> FaultSettings {
        FaultSettings {
            seed: 0,
            fail_writes: 0.0,
            write_failure: WriteFailure::InternalError,
            conflict_updates: 0.0,
            watch_delay_ms: 0,
            paused: false,
        }
    }
}

/// One field of a [`FaultSettings`] that is out of range or of the wrong type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidField {
    /// Its JSON name: `failWrites`, `writeFailure.tooManyRequests.retryAfterSeconds`, ...
    pub field: String,
    /// The value given, as JSON.
    pub value: String,
    /// What a valid value is.
    pub detail: String,
}

/// Fault settings refused, with every field that is wrong ([`Faults::try_set`], and the 422 of
/// `PUT /ferrokube/faults`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid fault settings: {}", summary(.fields))]
pub struct FaultSettingsError {
    /// The bad fields, in the order of [`FaultSettings`]' fields (never empty).
    pub fields: Vec<InvalidField>,
}

fn summary(fields: &[InvalidField]) -> String {
    let lines: Vec<String> = fields
        .iter()
        .map(|f| format!("{}: Invalid value: {}: {}", f.field, f.value, f.detail))
        .collect();
    match lines.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

impl FaultSettingsError {
    /// The 422 `Invalid` Status, as kube-apiserver words an invalid object:
    /// `FaultSettings.ferrokube "" is invalid: failWrites: Invalid value: 1.5: must be ...`, one
    /// cause per field.
    pub fn to_status(&self) -> StatusError {
        let causes: Vec<Value> = self
            .fields
            .iter()
            .map(|f| {
                json!({"reason": "FieldValueInvalid", "field": f.field,
                       "message": format!("Invalid value: {}: {}", f.value, f.detail)})
            })
            .collect();
        StatusError {
            code: 422,
            reason: "Invalid",
            message: format!(
                "FaultSettings.ferrokube \"\" is invalid: {}",
                summary(&self.fields)
            ),
            details: Some(json!({"group": "ferrokube", "kind": "FaultSettings", "causes": causes})),
        }
    }
}

const FRACTION: &str = "must be a number between 0 and 1";

impl FaultSettings {
    /// Every field out of range; `Ok` when all are valid.
    pub fn validate(&self) -> Result<(), FaultSettingsError> {
        let mut fields = Vec::new();
        for (field, value) in [
            ("failWrites", self.fail_writes),
            ("conflictUpdates", self.conflict_updates),
        ] {
            if !(0.0..=1.0).contains(&value) {
                fields.push(InvalidField {
                    field: field.to_string(),
                    value: value.to_string(),
                    detail: FRACTION.to_string(),
                });
            }
        }
        if let WriteFailure::TooManyRequests {
            retry_after_seconds,
        } = self.write_failure
        {
            if retry_after_seconds > MAX_RETRY_AFTER_SECONDS {
                fields.push(retry_after_field(&retry_after_seconds.to_string()));
            }
        }
        if u128::from(self.watch_delay_ms) > MAX_WATCH_DELAY.as_millis() {
            fields.push(watch_delay_field(&self.watch_delay_ms.to_string()));
        }
        if fields.is_empty() {
            Ok(())
        } else {
            Err(FaultSettingsError { fields })
        }
    }

    /// The settings a JSON object (a `PUT /ferrokube/faults` body) asks for, every field checked:
    /// of the right type, in range, and known (a misspelt field is refused, not ignored). Missing
    /// fields take their defaults.
    pub fn from_json(body: &Value) -> Result<FaultSettings, FaultSettingsError> {
        let Some(object) = body.as_object() else {
            return Err(FaultSettingsError {
                fields: vec![InvalidField {
                    field: "<body>".to_string(),
                    value: short(body),
                    detail: "must be a JSON object of fault settings".to_string(),
                }],
            });
        };
        let mut settings = FaultSettings::default();
        let mut fields = Vec::new();
        let bad = |field: &str, value: &Value, detail: &str| InvalidField {
            field: field.to_string(),
            value: short(value),
            detail: detail.to_string(),
        };
        for (field, value) in object {
            match field.as_str() {
                "seed" => match value.as_u64() {
                    Some(seed) => settings.seed = seed,
                    None => fields.push(bad(field, value, "must be a whole number from 0 to 2^64-1")),
                },
                "failWrites" | "conflictUpdates" => {
                    match value.as_f64().filter(|f| (0.0..=1.0).contains(f)) {
                        Some(fraction) if field == "failWrites" => settings.fail_writes = fraction,
                        Some(fraction) => settings.conflict_updates = fraction,
                        None => fields.push(bad(field, value, FRACTION)),
                    }
                }
                "writeFailure" => match serde_json::from_value::<WriteFailure>(value.clone()) {
                    Ok(failure) => {
                        settings.write_failure = failure;
                        if failure != failure.clamped() {
                            let seconds = value.pointer("/tooManyRequests/retryAfterSeconds");
                            let given = seconds.map_or_else(|| short(value), short);
                            fields.push(retry_after_field(&given));
                        }
                    }
                    Err(_) => fields.push(bad(
                        field,
                        value,
                        "must be \"internalError\" or {\"tooManyRequests\": {\"retryAfterSeconds\": N}}",
                    )),
                },
                "watchDelayMs" => {
                    match value
                        .as_u64()
                        .filter(|ms| u128::from(*ms) <= MAX_WATCH_DELAY.as_millis())
                    {
                        Some(ms) => settings.watch_delay_ms = ms,
                        None => fields.push(watch_delay_field(&short(value))),
                    }
                }
                "paused" => match value.as_bool() {
                    Some(paused) => settings.paused = paused,
                    None => fields.push(bad(field, value, "must be true or false")),
                },
                _ => fields.push(bad(
                    field,
                    value,
                    "unknown field (known: seed, failWrites, writeFailure, conflictUpdates, watchDelayMs, paused)",
                )),
            }
        }
        if fields.is_empty() {
            Ok(settings)
        } else {
            Err(FaultSettingsError { fields })
        }
    }

    /// The same settings brought into range (see [valid settings](self#valid-settings)).
    pub fn clamped(&self) -> FaultSettings {
        FaultSettings {
            fail_writes: fraction(self.fail_writes),
            conflict_updates: fraction(self.conflict_updates),
            write_failure: self.write_failure.clamped(),
            watch_delay_ms: self
                .watch_delay_ms
                .min(u64::try_from(MAX_WATCH_DELAY.as_millis()).unwrap_or(u64::MAX)),
            ..self.clone()
        }
    }
}

fn retry_after_field(value: &str) -> InvalidField {
    InvalidField {
        field: "writeFailure.tooManyRequests.retryAfterSeconds".to_string(),
        value: value.to_string(),
        detail: format!("must be a whole number of seconds from 0 to {MAX_RETRY_AFTER_SECONDS}"),
    }
}

fn watch_delay_field(value: &str) -> InvalidField {
    InvalidField {
        field: "watchDelayMs".to_string(),
        value: value.to_string(),
        detail: format!(
            "must be a whole number of milliseconds from 0 to {}",
            MAX_WATCH_DELAY.as_millis()
        ),
    }
}

/// A value as JSON for a message, cut short: the message must not be as big as the body.
fn short(value: &Value) -> String {
    const MAX: usize = 64;
    let text = value.to_string();
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// A probability: within 0–1, NaN as 0.
fn fraction(value: f64) -> f64 {
    if value.is_nan() {
        0.0
    } else {
        value.clamp(0.0, 1.0)
    }
}

/// See the [module docs](self).
pub struct Faults {
    settings: Mutex<(FaultSettings, StdRng)>,
    paused: watch::Sender<bool>,
}

impl Default for Faults {
    fn default() -> Faults {
        Faults {
            settings: Mutex::new((FaultSettings::default(), StdRng::seed_from_u64(0))),
            paused: watch::Sender::new(false),
        }
    }
}

impl Faults {
    /// Replaces every setting at once; reseeds the generator. Values out of range are clamped
    /// (see [valid settings](self#valid-settings)); [`Faults::try_set`] refuses them instead.
    pub fn set(&self, settings: FaultSettings) {
        let settings = settings.clamped();
        self.paused.send_replace(settings.paused);
        let rng = StdRng::seed_from_u64(settings.seed);
        *self.settings.lock() = (settings, rng);
    }

    /// Replaces every setting at once if all are valid (the HTTP endpoint's `PUT`); reseeds the
    /// generator. Changes nothing when one is not.
    pub fn try_set(&self, settings: FaultSettings) -> Result<(), FaultSettingsError> {
        settings.validate()?;
        self.set(settings);
        Ok(())
    }

    /// The current settings.
    pub fn settings(&self) -> FaultSettings {
        self.settings.lock().0.clone()
    }

    /// Reseeds the generator that picks failing requests.
    pub fn seed(&self, seed: u64) {
        let mut guard = self.settings.lock();
        guard.0.seed = seed;
        guard.1 = StdRng::seed_from_u64(seed);
    }

    /// Fails `fraction` (0–1; clamped, NaN as 0) of writes with `failure` (its `Retry-After`
    /// clamped to [`MAX_RETRY_AFTER_SECONDS`]).
    pub fn fail_writes(&self, fraction: f64, failure: WriteFailure) {
        let mut guard = self.settings.lock();
        guard.0.fail_writes = self::fraction(fraction);
        guard.0.write_failure = failure.clamped();
    }

    /// Answers `fraction` (0–1; clamped, NaN as 0) of updates and patches with 409 Conflict.
    pub fn conflict_updates(&self, fraction: f64) {
        self.settings.lock().0.conflict_updates = self::fraction(fraction);
    }

    /// Delays every watch event by `delay` after its write (at most [`MAX_WATCH_DELAY`]: longer
    /// is clamped).
    pub fn delay_watches(&self, delay: Duration) {
        let millis = delay.min(MAX_WATCH_DELAY).as_millis();
        self.settings.lock().0.watch_delay_ms = u64::try_from(millis).unwrap_or(u64::MAX);
    }

    /// The current watch delivery delay.
    pub fn watch_delay(&self) -> Duration {
        Duration::from_millis(self.settings.lock().0.watch_delay_ms).min(MAX_WATCH_DELAY)
    }

    /// Makes requests wait until [`Faults::resume`].
    pub fn pause(&self) {
        self.settings.lock().0.paused = true;
        self.paused.send_replace(true);
    }

    /// Lets waiting requests through.
    pub fn resume(&self) {
        self.settings.lock().0.paused = false;
        self.paused.send_replace(false);
    }

    /// Waits while the server is paused.
    pub async fn wait_unpaused(&self) {
        let mut rx = self.paused.subscribe();
        // An error means the sender is gone, which cannot happen while `self` lives.
        let _ = rx.wait_for(|paused| !paused).await;
    }

    /// Draws whether this write fails, and how.
    pub fn write_failure(&self) -> Option<StatusError> {
        let mut guard = self.settings.lock();
        let (settings, rng) = &mut *guard;
        // The settings are in range (every way in clamps or refuses); `fraction` again costs
        // nothing and keeps `random_bool`, which panics outside 0–1, safe regardless.
        let p = fraction(settings.fail_writes);
        if p <= 0.0 || !rng.random_bool(p) {
            return None;
        }
        Some(match settings.write_failure.clamped() {
            WriteFailure::InternalError => StatusError::internal("injected fault"),
            WriteFailure::TooManyRequests {
                retry_after_seconds,
            } => StatusError::too_many_requests(retry_after_seconds),
        })
    }

    /// Draws whether this update is answered with a conflict.
    pub fn update_conflicts(&self) -> bool {
        let mut guard = self.settings.lock();
        let (settings, rng) = &mut *guard;
        let p = fraction(settings.conflict_updates);
        p > 0.0 && rng.random_bool(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn draws(faults: &Faults) -> Vec<bool> {
        (0..200).map(|_| faults.write_failure().is_some()).collect()
    }

    #[test]
    fn the_same_seed_fails_the_same_requests() {
        let faults = Faults::default();
        faults.fail_writes(0.1, WriteFailure::InternalError);
        faults.seed(7);
        let first = draws(&faults);
        faults.seed(7);
        assert_eq!(first, draws(&faults));
        let failed = first.iter().filter(|f| **f).count();
        assert!((5..=40).contains(&failed), "{failed} of 200 at 10%");
    }

    #[test]
    fn abuse_out_of_range_settings_never_panic() {
        let faults = Faults::default();
        // Through the clamping setters: every draw afterwards is a plain yes or no.
        for fraction in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.5, 1.5, 1e300] {
            faults.fail_writes(fraction, WriteFailure::InternalError);
            faults.conflict_updates(fraction);
            let _ = draws(&faults);
            let _ = faults.update_conflicts();
            let settings = faults.settings();
            assert!((0.0..=1.0).contains(&settings.fail_writes), "{fraction}");
            assert!(
                (0.0..=1.0).contains(&settings.conflict_updates),
                "{fraction}"
            );
        }
        faults.fail_writes(f64::NAN, WriteFailure::InternalError);
        assert_eq!(faults.settings().fail_writes, 0.0, "NaN means no faults");
        faults.delay_watches(Duration::MAX);
        assert_eq!(faults.watch_delay(), MAX_WATCH_DELAY);
        faults.fail_writes(
            1.0,
            WriteFailure::TooManyRequests {
                retry_after_seconds: u64::MAX,
            },
        );
        let error = faults.write_failure().expect("always fails");
        assert_eq!(error.retry_after(), Some(MAX_RETRY_AFTER_SECONDS));
        // Through `set`: clamped too; through `try_set`: refused, naming each field, unchanged.
        let absurd = FaultSettings {
            seed: 1,
            fail_writes: 7.0,
            write_failure: WriteFailure::TooManyRequests {
                retry_after_seconds: 1 << 40,
            },
            conflict_updates: f64::NAN,
            watch_delay_ms: u64::MAX,
            paused: false,
        };
        faults.set(absurd.clone());
        assert_eq!(faults.settings(), absurd.clamped());
        assert!(faults.settings().validate().is_ok());
        let _ = draws(&faults);
        faults.set(FaultSettings::default());
        let error = faults.try_set(absurd).expect_err("refused");
        let named: Vec<&str> = error.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            named,
            [
                "failWrites",
                "conflictUpdates",
                "writeFailure.tooManyRequests.retryAfterSeconds",
                "watchDelayMs"
            ]
        );
        assert_eq!(faults.settings(), FaultSettings::default());
    }

    #[test]
    fn abuse_settings_from_json_name_each_bad_field() {
        let cases = [
            (json!({"failWrites": 1.5}), "failWrites"),
            (json!({"failWrites": -0.1}), "failWrites"),
            (json!({"failWrites": "NaN"}), "failWrites"),
            (json!({"failWrites": null}), "failWrites"),
            (json!({"conflictUpdates": 2}), "conflictUpdates"),
            (json!({"watchDelayMs": -5}), "watchDelayMs"),
            (json!({"watchDelayMs": 3_600_001}), "watchDelayMs"),
            (json!({"watchDelayMs": u64::MAX}), "watchDelayMs"),
            (json!({"watchDelayMs": 1.5}), "watchDelayMs"),
            (json!({"seed": -1}), "seed"),
            (json!({"paused": "yes"}), "paused"),
            (json!({"writeFailure": "teapot"}), "writeFailure"),
            (
                json!({"writeFailure": {"tooManyRequests": {"retryAfterSeconds": -1}}}),
                "writeFailure",
            ),
            (
                json!({"writeFailure": {"tooManyRequests": {"retryAfterSeconds": 3601}}}),
                "writeFailure.tooManyRequests.retryAfterSeconds",
            ),
            (json!({"failWrite": 0.5}), "failWrite"),
            (json!([0.5]), "<body>"),
        ];
        for (body, field) in &cases {
            let error = FaultSettings::from_json(body).expect_err("invalid");
            let status = error.to_status();
            assert_eq!((status.code, status.reason), (422, "Invalid"), "{body}");
            assert!(
                status.message.contains(&format!("{field}: Invalid value")),
                "{body}: {}",
                status.message
            );
            let causes = status
                .details
                .as_ref()
                .and_then(|d| d["causes"].as_array().cloned());
            assert_eq!(
                causes.and_then(|c| c.first().map(|c| c["field"].clone())),
                Some(json!(field)),
                "{body}"
            );
        }
        let good = json!({"seed": 3, "failWrites": 1, "conflictUpdates": 0.25, "watchDelayMs": 3_600_000,
                          "writeFailure": {"tooManyRequests": {"retryAfterSeconds": 3600}}, "paused": false});
        let settings = FaultSettings::from_json(&good).expect("valid");
        assert_eq!(
            (settings.fail_writes, settings.watch_delay_ms),
            (1.0, 3_600_000)
        );
        assert_eq!(
            FaultSettings::from_json(&json!({})).ok(),
            Some(FaultSettings::default())
        );
    }

    #[test]
    fn too_many_requests_carries_retry_after() {
        let faults = Faults::default();
        faults.fail_writes(
            1.0,
            WriteFailure::TooManyRequests {
                retry_after_seconds: 2,
            },
        );
        let error = faults.write_failure().expect("always fails");
        assert_eq!((error.code, error.retry_after()), (429, Some(2)));
    }
}
