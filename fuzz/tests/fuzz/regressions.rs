//! Every panic or hang the fuzzers found, as a named test with the input that found it. Each test
//! runs the harness of its target on that input: it failed before the fix and passes since.

use ferrokube_fuzzing::server_requests;

/// Found by reading the watch path while writing the server harness, confirmed by it: the
/// embedded server added `timeoutSeconds` to the clock, so a value near 2^64 panicked in the watch's
/// stream task (`overflow when adding duration to instant`). The client got a 200 and a body that
/// ended at once. Fixed: a timeout the clock cannot represent is no timeout.
#[test]
fn server_watch_with_a_timeout_past_the_clock() {
    server_requests(
        b"GET /api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=18446744073709551615",
    );
    server_requests(
        b"GET /api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=9223372036854775807",
    );
}

/// Found by cargo-fuzz (server_requests, 142,197th input of the second run): an input whose first
/// request has well over 100 header lines. hyper's server answered `431 Request Header Fields
/// Too Large` with an empty body, before any handler of ours, and the harness took it for an error
/// without a `Status`. A finding about the harness, not the server: it now sends at most 32
/// headers (`MAX_HEADERS`).
#[test]
fn server_request_with_more_headers_than_hyper_takes() {
    let mut input = b"GET /api".to_vec();
    for i in 0..150 {
        input.extend_from_slice(format!("\nx-header-{i}: value").as_bytes());
    }
    input.extend_from_slice(b"\n\n%%\nGET /version");
    server_requests(&input);
}
