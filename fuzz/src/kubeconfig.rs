//! The kubeconfig target: YAML in, a `Config` and a `Client` (or a `ConfigError`) out.

use std::path::{Path, PathBuf};

use futures_util::FutureExt;

use ferrokube::Client;
use ferrokube::config::{Auth, Config, Kubeconfig};

/// The folder fuzzed kubeconfigs may read files from: the certificates and keys of ferrokube's
/// config tests (client/src/config/testdata). Any path in the input is confined to it (see [`confine`]).
const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../client/src/config/testdata");

/// Parses `data` as a kubeconfig and builds the config of its current context and of each of its
/// contexts (at most 8), then a client from each config that builds, and the credentials'
/// header. Panics only if one of those panics: every failure must be a `ConfigError` (or the
/// client's `Error`).
pub fn kubeconfig(data: &[u8]) {
    // `Kubeconfig::read` reads a file to a `String`: bytes that are not UTF-8 fail there with an
    // I/O error before any parsing.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(mut parsed) = Kubeconfig::parse(text) else {
        return;
    };
    confine(&mut parsed);
    // A second copy merged in: names defined twice, the first file winning.
    let mut merged = parsed.clone();
    merged.merge(parsed.clone());
    let contexts: Vec<Option<String>> = std::iter::once(None)
        .chain(parsed.contexts.iter().map(|c| Some(c.name.clone())))
        .take(9)
        .collect();
    for context in contexts {
        let Ok(config) = Config::from_kubeconfig(&merged, context.as_deref()) else {
            continue;
        };
        // Credentials that come from a file or a plugin are not sent here: an exec plugin would
        // run a command the input names.
        if matches!(
            config.auth,
            Auth::None | Auth::Token(_) | Auth::Basic { .. }
        ) {
            let header = config.auth.header().now_or_never();
            assert!(
                header.is_some(),
                "a static credential's header must not wait"
            );
        }
        let _ = Client::new(config);
    }
}

/// Points every file a kubeconfig names into [`TESTDATA`]: a name that exists there is read
/// (so certificates and keys are reachable), any other becomes a path that does not exist. A
/// fuzzer must not read `/dev/zero` or wait on a FIFO the input happens to name.
fn confine(config: &mut Kubeconfig) {
    let inside = |path: &mut Option<PathBuf>| {
        if let Some(p) = path {
            let name = p.file_name().map(Path::new).unwrap_or(Path::new("none"));
            *p = Path::new(TESTDATA).join(name);
            if !p.is_file() {
                *p = Path::new(TESTDATA).join("does-not-exist");
            }
        }
    };
    for cluster in &mut config.clusters {
        inside(&mut cluster.cluster.certificate_authority);
    }
    for user in &mut config.users {
        inside(&mut user.user.client_certificate);
        inside(&mut user.user.client_key);
        inside(&mut user.user.token_file);
    }
}
