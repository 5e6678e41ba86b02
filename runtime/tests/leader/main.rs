//! Leader election (`ferrokube_runtime::leader`) against the embedded API server. The manager's
//! tests, its own leader election among them, are in `tests/manager/`.

mod election;
