//! Buttons on the page that do something to the running system: the demo registers the embedded
//! server's faults ("drop the watch", "kill a pod", …). An action is a plain closure that returns
//! a line of text for the page to show.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// What an action runs. Called on a blocking thread (it may take its time, or block on I/O).
pub(crate) type ActionFn = dyn Fn() -> String + Send + Sync + 'static;

/// One registered action.
#[derive(Clone)]
pub(crate) struct RegisteredAction {
    pub(crate) id: String,
    pub(crate) label: String,
    pub(crate) run: Arc<ActionFn>,
}

/// An action as `/api/actions` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionInfo {
    /// Its name in `POST /api/actions/{id}` and the button's `data-action`.
    pub id: String,
    /// The button's text.
    pub label: String,
}

/// What `POST /api/actions/{id}` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionOutcome {
    pub id: String,
    /// The text the action returned.
    pub result: String,
}

/// The registered actions, in the order they were registered.
#[derive(Clone, Default)]
pub(crate) struct ActionTable {
    /// Invariant: ids are unique (registering an id again replaces the earlier action in place).
    actions: Vec<RegisteredAction>,
}

impl ActionTable {
    pub(crate) fn register(&mut self, action: RegisteredAction) {
        match self.actions.iter_mut().find(|known| known.id == action.id) {
            Some(known) => *known = action,
            None => self.actions.push(action),
        }
    }

    pub(crate) fn list(&self) -> Vec<ActionInfo> {
        self.actions
            .iter()
            .map(|action| ActionInfo {
                id: action.id.clone(),
                label: action.label.clone(),
            })
            .collect()
    }

    pub(crate) fn get(&self, id: &str) -> Option<&RegisteredAction> {
        self.actions.iter().find(|action| action.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(id: &str, label: &str) -> RegisteredAction {
        let said = label.to_owned();
        RegisteredAction {
            id: id.into(),
            label: label.into(),
            run: Arc::new(move || said.clone()),
        }
    }

    #[test]
    fn an_id_registered_again_replaces_the_first_in_place() {
        let mut table = ActionTable::default();
        table.register(action("a", "first"));
        table.register(action("b", "second"));
        table.register(action("a", "third"));
        let labels: Vec<String> = table.list().into_iter().map(|a| a.label).collect();
        assert_eq!(labels, vec!["third", "second"]);
        let run = table.get("a").map(|a| (a.run)());
        assert_eq!(run.as_deref(), Some("third"));
        assert!(table.get("c").is_none());
    }
}
