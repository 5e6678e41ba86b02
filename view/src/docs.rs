//! The texts the page links to, compiled into the binary: the module docs (`//!`) of the file that
//! does each stage's work, and the guided tour (`view/docs/tour.md`: inside this package, so that
//! it ships with it). Nothing is read from disk at run time, so the view works from an installed
//! binary far from its sources.
//!
//! `include_str!` embeds whole files; only their leading `//!` block is served, extracted on each
//! request (they are small, and requests are rare).

/// The guided tour, `view/docs/tour.md`.
pub(crate) const TOUR: &str = include_str!("../docs/tour.md");

/// A source file whose module docs `/doc/{path}` serves.
pub(crate) struct EmbeddedSource {
    /// The file's path from the repository's root, as it appears in the URL.
    pub(crate) path: &'static str,
    /// The pipeline stage it does the work of, as the page names it (empty for supporting files).
    pub(crate) stage: &'static str,
    source: &'static str,
}

/// Every file the page links to, in pipeline order.
pub(crate) const SOURCES: &[EmbeddedSource] = &[
    EmbeddedSource {
        path: "informer/src/reflector.rs",
        stage: "reflector",
        source: source_in(ferrokube_informer::MODULE_SOURCES, "reflector.rs"),
    },
    EmbeddedSource {
        path: "client/src/watch/decoder.rs",
        stage: "watch",
        source: source_in(ferrokube_client::MODULE_SOURCES, "watch/decoder.rs"),
    },
    EmbeddedSource {
        path: "client/src/watch/mod.rs",
        stage: "",
        source: source_in(ferrokube_client::MODULE_SOURCES, "watch/mod.rs"),
    },
    EmbeddedSource {
        path: "client/src/list_watch.rs",
        stage: "",
        source: source_in(ferrokube_client::MODULE_SOURCES, "list_watch.rs"),
    },
    EmbeddedSource {
        path: "informer/src/lister_watcher.rs",
        stage: "",
        source: source_in(ferrokube_informer::MODULE_SOURCES, "lister_watcher.rs"),
    },
    EmbeddedSource {
        path: "informer/src/delta_fifo.rs",
        stage: "fifo",
        source: source_in(ferrokube_informer::MODULE_SOURCES, "delta_fifo.rs"),
    },
    EmbeddedSource {
        path: "informer/src/shared_informer.rs",
        stage: "",
        source: source_in(ferrokube_informer::MODULE_SOURCES, "shared_informer.rs"),
    },
    EmbeddedSource {
        path: "informer/src/store.rs",
        stage: "store",
        source: source_in(ferrokube_informer::MODULE_SOURCES, "store.rs"),
    },
    EmbeddedSource {
        path: "informer/src/handler.rs",
        stage: "handler",
        source: source_in(ferrokube_informer::MODULE_SOURCES, "handler.rs"),
    },
    EmbeddedSource {
        path: "runtime/src/controller/source.rs",
        stage: "",
        source: source_in(ferrokube_runtime::MODULE_SOURCES, "controller/source.rs"),
    },
    EmbeddedSource {
        path: "workqueue/src/queue.rs",
        stage: "queue",
        source: source_in(ferrokube_workqueue::MODULE_SOURCES, "queue.rs"),
    },
    EmbeddedSource {
        path: "runtime/src/controller/worker.rs",
        stage: "reconcile",
        source: source_in(ferrokube_runtime::MODULE_SOURCES, "controller/worker.rs"),
    },
    EmbeddedSource {
        path: "runtime/src/freshness/consistency.rs",
        stage: "",
        source: source_in(
            ferrokube_runtime::MODULE_SOURCES,
            "freshness/consistency.rs",
        ),
    },
    EmbeddedSource {
        path: "client/src/client/mod.rs",
        stage: "client",
        source: source_in(ferrokube_client::MODULE_SOURCES, "client/mod.rs"),
    },
    EmbeddedSource {
        path: "client/src/api/mod.rs",
        stage: "",
        source: source_in(ferrokube_client::MODULE_SOURCES, "api/mod.rs"),
    },
    EmbeddedSource {
        path: "client/src/client/rate_limit.rs",
        stage: "",
        source: source_in(ferrokube_client::MODULE_SOURCES, "client/rate_limit.rs"),
    },
    EmbeddedSource {
        path: "runtime/src/shard/assigner.rs",
        stage: "shard",
        source: source_in(ferrokube_runtime::MODULE_SOURCES, "shard/assigner.rs"),
    },
];

/// The file `file` of a crate's embedded sources (each crate ships its own: `cargo package` takes
/// no file from outside a crate's own folder); empty if it has no such file, which the tests catch.
const fn source_in(sources: &'static [(&'static str, &'static str)], file: &str) -> &'static str {
    let mut at = 0;
    while at < sources.len() {
        if same_str(sources[at].0, file) {
            return sources[at].1;
        }
        at += 1;
    }
    ""
}

/// `a == b`, in a `const fn`.
const fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut at = 0;
    while at < a.len() {
        if a[at] != b[at] {
            return false;
        }
        at += 1;
    }
    true
}

/// The module docs of the embedded file at `path`, as Markdown.
pub(crate) fn module_docs(path: &str) -> Option<String> {
    SOURCES
        .iter()
        .find(|embedded| embedded.path == path)
        .map(|embedded| leading_doc_comment(embedded.source))
}

/// The leading `//!` lines of `source` without their `//!` (and the one space after it): the
/// Markdown rustdoc renders as the module's page.
fn leading_doc_comment(source: &str) -> String {
    let mut docs = String::new();
    for line in source.lines() {
        let Some(text) = line.trim_start().strip_prefix("//!") else {
            break;
        };
        docs.push_str(text.strip_prefix(' ').unwrap_or(text));
        docs.push('\n');
    }
    docs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_leading_doc_block_is_kept() {
        let source = "//! Title\n//!\n//!   indented\nuse x;\n//! not docs\n";
        assert_eq!(leading_doc_comment(source), "Title\n\n  indented\n");
    }

    #[test]
    fn every_embedded_file_has_module_docs() {
        for embedded in SOURCES {
            let docs = module_docs(embedded.path).unwrap_or_default();
            assert!(docs.len() > 80, "{} has no module docs", embedded.path);
        }
        assert!(module_docs("src/lib.rs").is_none());
    }

    #[test]
    fn every_doc_link_of_the_page_is_served() {
        let page = crate::routes::PAGE;
        let mut links = 0;
        for piece in page.split("href=\"/doc/").skip(1) {
            let path = piece.split('"').next().unwrap_or_default();
            assert!(module_docs(path).is_some(), "the page links to /doc/{path}");
            links += 1;
        }
        assert!(links >= 9, "the page links to {links} docs");
    }
}
