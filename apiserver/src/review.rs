//! Reviews: the questions a client asks the server about credentials and permissions, in
//! authentication.k8s.io/v1 (`TokenReview`, `SelfSubjectReview`) and authorization.k8s.io/v1
//! (`SelfSubjectAccessReview`, `SubjectAccessReview`, `LocalSubjectAccessReview`,
//! `SelfSubjectRulesReview`). `kubectl auth can-i` and `kubectl auth whoami` ask them, and so do
//! test suites and webhooks.
//!
//! A review is not an object: it is created, answered and forgotten (kube-apiserver stores nothing
//! and has no metadata for it, so it cannot be listed, fetched, or shown as a Table, and asking
//! for a Table is 406). The answer is the request as sent with a `status` the server fills in.
//!
//! # What the embedded server answers
//!
//! It has one credential, its bearer token (or none: then it lets every request in), and one
//! caller, [`USER`], whom it authorizes to do everything. So:
//!
//! | kind | `status` |
//! |---|---|
//! | every access review | `allowed: true` |
//! | `SelfSubjectRulesReview` | one rule allowing every verb on every resource, one on every URL |
//! | `SelfSubjectReview` | `userInfo`: [`USER`] in [`GROUPS`] |
//! | `TokenReview` | `authenticated: true` and that user when `spec.token` is the server's token; else `authenticated: false` |
//!
//! kube-apiserver answers from its authenticators and authorizers; a client that branches on the
//! answer sees the same shapes.

use serde_json::{Value, json};

/// The user the embedded server takes every caller to be (the name its kubeconfig uses).
pub const USER: &str = "ferrokube";

/// The groups of [`USER`]: `system:masters`, as the cluster-admin credential of a real cluster.
pub const GROUPS: [&str; 2] = ["system:masters", "system:authenticated"];

/// The answer to a review of kind `kind` (the URL's): the request as sent, with its `status`.
/// `known_token` says whether a TokenReview's token is a credential the server accepts.
pub fn answer(kind: &str, mut review: Value, known_token: impl Fn(&str) -> bool) -> Value {
    let status = match kind {
        "TokenReview" => {
            let token = review
                .pointer("/spec/token")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !token.is_empty() && known_token(token) {
                json!({"authenticated": true, "user": user_info()})
            } else {
                json!({"authenticated": false, "user": {}})
            }
        }
        "SelfSubjectReview" => json!({"userInfo": user_info()}),
        "SelfSubjectRulesReview" => json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        }),
        _ => json!({"allowed": true, "reason": "ferrokube-apiserver authorizes every request"}),
    };
    if let Some(map) = review.as_object_mut() {
        map.insert("status".into(), status);
        let metadata = map.entry("metadata").or_insert_with(|| json!({}));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.entry("creationTimestamp").or_insert(Value::Null);
        }
    }
    review
}

fn user_info() -> Value {
    json!({"username": USER, "groups": GROUPS})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: &str) -> bool {
        false
    }

    #[test]
    fn every_access_review_is_allowed() {
        let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                            "spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}});
        let answer = answer("SelfSubjectAccessReview", review, never);
        assert_eq!(answer["status"]["allowed"], true);
        assert_eq!(answer["spec"]["nonResourceAttributes"]["verb"], "get");
        let local = json!({"kind": "LocalSubjectAccessReview", "spec": {"user": "u"}});
        assert_eq!(
            super::answer("LocalSubjectAccessReview", local, never)["status"]["allowed"],
            true
        );
    }

    #[test]
    fn a_token_review_authenticates_the_server_token_only() {
        let review = |token: &str| json!({"kind": "TokenReview", "spec": {"token": token}});
        let known = |token: &str| token == "s3cret";
        let yes = answer("TokenReview", review("s3cret"), known);
        assert_eq!(yes["status"]["authenticated"], true);
        assert_eq!(yes["status"]["user"]["username"], USER);
        assert!(yes["status"].get("allowed").is_none());
        let no = answer("TokenReview", review("guess"), known);
        assert_eq!(no["status"], json!({"authenticated": false, "user": {}}));
        // No token at all is never a credential, whatever the check says.
        let empty = answer("TokenReview", review(""), |_| true);
        assert_eq!(empty["status"]["authenticated"], false);
    }

    #[test]
    fn self_reviews_name_the_one_user_and_every_rule() {
        let whoami = answer(
            "SelfSubjectReview",
            json!({"kind": "SelfSubjectReview"}),
            never,
        );
        assert_eq!(
            whoami["status"]["userInfo"],
            json!({"username": "ferrokube", "groups": ["system:masters", "system:authenticated"]})
        );
        let rules = answer(
            "SelfSubjectRulesReview",
            json!({"kind": "SelfSubjectRulesReview", "spec": {"namespace": "n"}}),
            never,
        );
        assert_eq!(rules["status"]["resourceRules"][0]["verbs"], json!(["*"]));
        assert_eq!(rules["status"]["incomplete"], false);
    }
}
