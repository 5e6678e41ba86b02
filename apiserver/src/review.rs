//! Access reviews: `SelfSubjectAccessReview` (authorization.k8s.io/v1), the question "may I do
//! this?" that `kubectl auth can-i` and test suites ask.
//!
//! A review is not an object: it is created, answered and forgotten (kube-apiserver stores nothing
//! and has no metadata for it, so it cannot be listed, fetched, or shown as a Table, and asking
//! for a Table is 406). The embedded server authorizes every request its authentication lets in,
//! so every review is answered `allowed`.

use serde_json::{Value, json};

/// The answer to a review: the request as sent, with `status.allowed` true.
pub fn allow(mut review: Value) -> Value {
    if let Some(map) = review.as_object_mut() {
        map.insert(
            "status".into(),
            json!({"allowed": true, "reason": "ferrokube-apiserver authorizes every request"}),
        );
        let metadata = map.entry("metadata").or_insert_with(|| json!({}));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.entry("creationTimestamp").or_insert(Value::Null);
        }
    }
    review
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_review_is_allowed() {
        let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                            "spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}});
        let answer = allow(review);
        assert_eq!(answer["status"]["allowed"], true);
        assert_eq!(answer["spec"]["nonResourceAttributes"]["verb"], "get");
    }
}
