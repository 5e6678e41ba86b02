//! Issue 44, item 6: the Mirror controller written as a new author would, from the README and the
//! API docs only (the controller is `ferrokube_testkit::mirror`, shared with the fault explorer's
//! search over it in `examples/tests/explore_mirror.rs`); the test drives it on the embedded
//! server.

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ferrokube_apiserver::ApiServer;
    use ferrokube_client::Api;
    use ferrokube_client::api::{DeleteParams, PostParams};
    use ferrokube_client::crd::apply_and_wait;
    use ferrokube_testkit as common;
    use ferrokube_testkit::mirror::{Mirror, MirrorSpec, run};
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use serde_json::json;

    async fn eventually<F: AsyncFnMut() -> bool>(what: &str, mut condition: F) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        while !condition().await {
            assert!(tokio::time::Instant::now() < deadline, "{what} within 30 s");
            tick.tick().await;
        }
    }

    fn namespace(name: &str, team: &str) -> Namespace {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"team": team}}}))
            .expect("ns")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn author_trap_mirror_written_from_the_docs_copies_follows_and_cleans_up() {
        let server = ApiServer::new().start().await.expect("server starts");
        let client = common::embedded_client(&server, true);
        apply_and_wait(&client, &Mirror::crd(), Duration::from_secs(30))
            .await
            .expect("crd");
        let namespaces = Api::<Namespace>::all(client.clone());
        for (name, team) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
            namespaces
                .create(&PostParams::default(), &namespace(name, team))
                .await
                .expect("ns");
        }
        let cms = |ns: &str| Api::<ConfigMap>::namespaced(client.clone(), ns);
        cms("default")
            .create(&PostParams::default(), &common::config_map("settings", "1"))
            .await
            .expect("cm");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(run(client.clone(), async {
            let _ = stopped.await;
        }));
        let mirrors = Api::<Mirror>::namespaced(client.clone(), "default");
        let spec = MirrorSpec {
            source: "settings".into(),
            targets: "team=a".into(),
        };
        mirrors
            .create(&PostParams::default(), &Mirror::new("m", spec))
            .await
            .expect("mirror");
        let value = async |ns: &str| {
            cms(ns)
                .get_opt("settings")
                .await
                .expect("get")
                .and_then(|c| c.data)
                .and_then(|d| d.get("k").cloned())
        };
        eventually("copies in a1 and a2", async || {
            value("a1").await.as_deref() == Some("1") && value("a2").await.as_deref() == Some("1")
        })
        .await;
        assert_eq!(value("b1").await, None);
        // The source changes: the copies follow (through the index).
        cms("default")
            .replace(
                "settings",
                &PostParams::default(),
                &common::config_map("settings", "2"),
            )
            .await
            .expect("edit");
        eventually("copies follow", async || {
            value("a1").await.as_deref() == Some("2") && value("a2").await.as_deref() == Some("2")
        })
        .await;
        // A copy deleted behind its back comes back (by label).
        cms("a1")
            .delete("settings", &DeleteParams::default())
            .await
            .expect("deleted");
        eventually("copy repaired", async || {
            value("a1").await.as_deref() == Some("2")
        })
        .await;
        // b1 joins team a (the Namespace watch); a2 leaves it.
        namespaces
            .replace("b1", &PostParams::default(), &namespace("b1", "a"))
            .await
            .expect("relabel");
        namespaces
            .replace("a2", &PostParams::default(), &namespace("a2", "b"))
            .await
            .expect("relabel");
        eventually("targets follow the labels", async || {
            value("b1").await.as_deref() == Some("2") && value("a2").await.is_none()
        })
        .await;
        eventually("Ready with 2 copies at generation 1", async || {
            let m = mirrors.get("m").await.expect("get");
            let status = m.status.unwrap_or_default();
            status.copies == 2
                && status.conditions.iter().any(|c| {
                    c.type_ == "Ready" && c.status == "True" && c.observed_generation == Some(1)
                })
        })
        .await;
        // Deleted: the finalizer removes every copy first.
        mirrors
            .delete("m", &DeleteParams::default())
            .await
            .expect("delete");
        eventually("copies gone and the Mirror too", async || {
            value("a1").await.is_none()
                && value("b1").await.is_none()
                && mirrors.get_opt("m").await.expect("get").is_none()
        })
        .await;
        let _ = stop.send(());
        running.await.expect("joins").expect("runs");
    }
}
