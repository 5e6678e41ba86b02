//! The selector targets: a `labelSelector` (shared by the informers and the embedded server) and
//! the embedded server's `fieldSelector`.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use ferrokube::apiserver::resource::{Registry, ResourceType};
use ferrokube::apiserver::selection::Selection;
use ferrokube::core::labels::LabelSelector;
use serde_json::json;

/// Parses `data` as a label selector. Properties: a failure is a `SelectorError`; a selector
/// that parses prints (`Display`) as text that parses to an equal selector; matching it against
/// no labels, and against labels made of the input's own words, returns.
pub fn label_selector(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(selector) = LabelSelector::parse(text) else {
        return;
    };
    let printed = selector.to_string();
    match LabelSelector::parse(&printed) {
        Ok(again) => assert_eq!(
            again, selector,
            "{text:?} prints as {printed:?}, which parses to another selector"
        ),
        Err(error) => panic!("{text:?} prints as {printed:?}, which does not parse: {error}"),
    }
    selector.matches(None);
    selector.matches(Some(&labels_from(text)));
}

/// Parses `data` as the embedded server's field selector for Pods (which also select on
/// `spec.nodeName`, `status.phase`, ...), with a label selector made of the same text, and
/// matches the selection against a Pod. Properties: a failure is a `StatusError` with code 400;
/// a selection that parses matches or not, without panicking.
pub fn field_selector(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let pods = pods();
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1"}});
    for (labels, fields) in [
        (None, Some(text)),
        (Some(text), None),
        (Some(text), Some(text)),
    ] {
        match Selection::parse(&pods, labels, fields) {
            Ok(selection) => {
                selection.matches(&pod);
                selection.matches(&json!(null));
                selection.matches(&json!({"metadata": 7, "spec": []}));
            }
            Err(error) => assert_eq!(error.code, 400, "{error:?}"),
        }
    }
}

fn pods() -> Arc<ResourceType> {
    static PODS: OnceLock<Option<Arc<ResourceType>>> = OnceLock::new();
    let pods = PODS.get_or_init(|| Registry::default().find("", "v1", "pods"));
    match pods {
        Some(pods) => pods.clone(),
        None => panic!("the embedded server serves no pods"),
    }
}

/// Labels whose keys and values are the words of `text`, so some requirements hold.
fn labels_from(text: &str) -> BTreeMap<String, String> {
    let words: Vec<&str> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || "-_./".contains(c)))
        .filter(|w| !w.is_empty())
        .collect();
    words
        .iter()
        .zip(words.iter().skip(1).chain(std::iter::once(&"")))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
