//! The guide's "Testing your controller" (`docs/src/testing.md`), as a test: the code between the
//! `README` markers below is the chapter's block, character for character (the second test
//! checks), so the chapter's example compiles and passes.

use std::sync::Arc;
use std::time::Duration;

// README:begin
use ferrokube::api::PostParams;
use ferrokube::apiserver::ApiServer;
use ferrokube::controller::{Action, Context, Controller, Reconciler, owner};
use ferrokube::crd::apply_and_wait;
use ferrokube::informer::Scope;
use ferrokube::testing::ServerClient;
use ferrokube::{Api, CustomResource};
use k8s_openapi::api::core::v1::ConfigMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[resource(group = "example.com", version = "v1", kind = "Site", namespaced)]
pub struct SiteSpec {
    pub replicas: i32,
}

/// Keeps a ConfigMap `<site>-stamp` saying how many replicas the Site asks for.
struct Stamp;

impl Reconciler<Site> for Stamp {
    type Error = Box<dyn std::error::Error + Send + Sync>;
    async fn reconcile(&self, site: Arc<Site>, ctx: Context) -> Result<Action, Self::Error> {
        let name = format!(
            "{}-stamp",
            site.metadata.name.as_deref().unwrap_or_default()
        );
        owner::create_or_update(&ctx.api_in_primary_namespace::<ConfigMap>(), &name, |cm| {
            owner::set_controller_reference(site.as_ref(), &mut cm.metadata)?;
            cm.data = Some([("replicas".into(), site.spec.replicas.to_string())].into());
            Ok::<_, owner::OwnerError>(())
        })
        .await?;
        Ok(Action::await_change())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_testing_a_site_gets_its_stamp()
-> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let server = ApiServer::new().audit(true).start().await?; // in-process, on a free port
    let client = server.client()?; // no client-side rate limit
    apply_and_wait(&client, &Site::crd(), Duration::from_secs(10)).await?;
    let controller =
        Controller::<Site>::new(client.clone(), Scope::all()).owns::<ConfigMap>(Scope::all());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(Stamp, async {
        let _ = stopped.await;
    }));

    server.faults().conflict_updates(0.3); // 30 % of updates answer 409: the controller must cope
    let sites: Api<Site> = Api::namespaced(client.clone(), "default");
    sites
        .create(
            &PostParams::default(),
            &Site::new("blog", SiteSpec { replicas: 3 }),
        )
        .await?;
    let stamps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while stamps
        .get_opt("blog-stamp")
        .await?
        .and_then(|cm| cm.data)
        .map(|d| d["replicas"].clone())
        != Some("3".into())
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no stamp within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await; // poll the condition, bounded
    }
    // The audit log: every write the controller made, and how the server answered.
    let writes = server.audit_log().entries();
    assert!(
        writes
            .iter()
            .any(|w| w.method == "POST" && w.path.ends_with("/configmaps"))
    );
    let _ = stop.send(());
    running.await??;
    Ok(())
}
// README:end

#[test]
fn readme_testing_the_readme_shows_this_code() {
    let this = include_str!("readme_testing.rs");
    let code = this
        .split("// README:begin\n")
        .nth(1)
        .and_then(|rest| rest.split("// README:end").next())
        .expect("markers");
    let readme = include_str!("../../docs/src/testing.md");
    assert!(
        readme.contains(code),
        "docs/src/testing.md's block differs from tests/front/readme_testing.rs"
    );
}
