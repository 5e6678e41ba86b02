//! Server-side sharded list and watch (`shardSelector`, KEP-5866, feature gate
//! `ShardedListAndWatch`), compared with kube-apiserver.
//!
//! The real server's gate is found out, not assumed: a list with a selector over the whole hash
//! space answers `metadata.shardInfo` only with the gate on. The embedded server is started with
//! the same gate, so a real server started with it (`APISERVER_FLAGS=--feature-gates=
//! ShardedListAndWatch=true scripts/kube-apiserver.sh up`) is compared with the embedded server's
//! sharding, and one started without it (scripts/e2e.sh's default) with the embedded server's
//! gate off. Embedded alone, both modes run.
//!
//! Part of the conformance suite (`conformance.rs`, the parent module).

use super::*;

use std::collections::{BTreeMap, BTreeSet};

use ferrokube_core::shard::{ShardRange, ShardSelector, shard_hash};
use k8s_openapi::api::core::v1::ConfigMap;

/// How many shards the collection is cut into.
const SHARDS: u64 = 4;
/// How many ConfigMaps the case makes (enough that four shards are all likely non-empty; the
/// case does not depend on it).
const OBJECTS: usize = 16;

fn query(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(byte as char)
            }
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

fn member(index: u64) -> ShardSelector {
    ShardSelector::member(index, SHARDS).expect("a member of four")
}

fn names(list: &Value) -> BTreeSet<String> {
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `target` applies shard selectors: a list over the whole hash space says so in its
/// `metadata.shardInfo` only when it does.
async fn shards(t: &Target) -> bool {
    let everything = ShardSelector::uid(ShardRange::everything()).to_string();
    let seen = t
        .call(
            Method::GET,
            &format!(
                "/api/v1/namespaces?limit=1&shardSelector={}",
                query(&everything)
            ),
            None,
        )
        .await;
    assert_eq!(seen.code, 200, "{}: {:?}", t.name, seen.body);
    seen.body["metadata"].get("shardInfo").is_some()
}

/// Objects made, changed and deleted; four sharded lists and watches partition them exactly, each
/// object in the shard its uid's hash names; labels, limits, deletecollection, Tables and metadata
/// lists combined with a selector; bad selectors refused.
async fn shard_selector_case(t: &Target, ns: &str) -> Value {
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let before = t.call(Method::GET, &cms, None).await.rv();
    let mut uids = BTreeMap::new();
    for i in 0..OBJECTS {
        let mut cm = config_map(&format!("cm-{i:02}"), "1");
        if i % 2 == 0 {
            cm["metadata"]["labels"] = json!({"even": "yes"});
        }
        let seen = t.call(Method::POST, &cms, Some(cm)).await;
        assert_eq!(seen.code, 201, "{}: {:?}", t.name, seen.body);
        let uid = seen.body["metadata"]["uid"]
            .as_str()
            .expect("uid")
            .to_string();
        uids.insert(format!("cm-{i:02}"), uid);
    }
    for name in ["cm-00", "cm-01"] {
        let seen = t
            .call(
                Method::PATCH,
                &format!("{cms}/{name}"),
                Some(json!({"data": {"k": "2"}})),
            )
            .await;
        assert_eq!(seen.code, 200, "{}: {:?}", t.name, seen.body);
    }
    for name in ["cm-02", "cm-03"] {
        let seen = t.call(Method::DELETE, &format!("{cms}/{name}"), None).await;
        assert_eq!(seen.code, 200, "{}: {:?}", t.name, seen.body);
    }
    let live: BTreeSet<String> = uids
        .keys()
        .filter(|n| !["cm-02", "cm-03"].contains(&n.as_str()))
        .cloned()
        .collect();
    let shard_of = |name: &str| -> u64 {
        let hash = shard_hash(&uids[name]);
        (0..SHARDS)
            .find(|i| ShardRange::part(*i, SHARDS).expect("part").contains(hash))
            .expect("some part holds every hash")
    };

    // Lists: one per shard; together exactly the collection, each object where its hash says.
    let all = t.call(Method::GET, &cms, None).await;
    assert_eq!(names(&all.body), live, "{}", t.name);
    let mut union = BTreeSet::new();
    let mut echoed = Vec::new();
    for i in 0..SHARDS {
        let selector = member(i).to_string();
        let seen = t
            .call(
                Method::GET,
                &format!("{cms}?shardSelector={}", query(&selector)),
                None,
            )
            .await;
        assert_eq!(seen.code, 200, "{}: {:?}", t.name, seen.body);
        echoed.push(seen.body["metadata"]["shardInfo"]["selector"].clone());
        for name in names(&seen.body) {
            assert_eq!(shard_of(&name), i, "{}: {name} listed in shard {i}", t.name);
            assert!(
                union.insert(name.clone()),
                "{}: {name} in two shards",
                t.name
            );
        }
    }
    assert_eq!(
        union, live,
        "{}: the shards' lists partition the list",
        t.name
    );

    // Watches from before the first create: each object's events in its shard's watch alone,
    // deletions included. The count each shard owes is known from the hashes.
    let mut owed = [0usize; SHARDS as usize];
    for name in uids.keys() {
        let events = match name.as_str() {
            "cm-00" | "cm-01" | "cm-02" | "cm-03" => 2,
            _ => 1,
        };
        owed[shard_of(name) as usize] += events;
    }
    let mut watched: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for i in 0..SHARDS {
        let selector = query(&member(i).to_string());
        let path = format!("{cms}?watch=1&resourceVersion={before}&shardSelector={selector}");
        let events = t
            .watch(&path, owed[i as usize], Duration::from_secs(5))
            .await;
        assert_eq!(
            events.len(),
            owed[i as usize],
            "{}: shard {i}: {events:?}",
            t.name
        );
        for (kind, object) in events {
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string();
            assert_eq!(
                shard_of(&name),
                i,
                "{}: {kind} of {name} in shard {i}",
                t.name
            );
            watched.entry(name).or_default().push(kind);
        }
    }
    assert_eq!(
        watched.keys().cloned().collect::<BTreeSet<_>>(),
        uids.keys().cloned().collect::<BTreeSet<_>>(),
        "{}: every object's events in some shard",
        t.name
    );

    // A streaming list of one shard (the fullest, so that a page of one is not its last): its
    // objects, then the initial-events-end bookmark.
    let home = (0..SHARDS)
        .max_by_key(|i| {
            (
                live.iter().filter(|n| shard_of(n) == *i).count(),
                SHARDS - i,
            )
        })
        .expect("four shards");
    let in_home: BTreeSet<String> = live
        .iter()
        .filter(|n| shard_of(n) == home)
        .cloned()
        .collect();
    let path = format!(
        "{cms}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&shardSelector={}",
        query(&member(home).to_string())
    );
    let streamed = t
        .watch(&path, in_home.len() + 1, Duration::from_secs(5))
        .await;
    let (last, initial) = streamed.split_last().expect("events");
    assert_eq!(last.0, "BOOKMARK", "{}: {streamed:?}", t.name);
    let initial_names: BTreeSet<String> = initial
        .iter()
        .map(|(_, o)| o["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(initial_names, in_home, "{}", t.name);

    // Combined with a label selector, paged, deleted as a collection (dry run), as a Table and as
    // metadata: the shard's share of each, and where shardInfo is said.
    let selector = query(&member(home).to_string());
    let labelled = t
        .call(
            Method::GET,
            &format!("{cms}?labelSelector=even%3Dyes&shardSelector={selector}"),
            None,
        )
        .await;
    let want: BTreeSet<String> = in_home
        .iter()
        .filter(|n| n[3..].parse::<usize>().is_ok_and(|i| i % 2 == 0))
        .cloned()
        .collect();
    assert_eq!(names(&labelled.body), want, "{}", t.name);
    let page = t
        .call(
            Method::GET,
            &format!("{cms}?limit=1&shardSelector={selector}"),
            None,
        )
        .await;
    let deleted = t
        .call(
            Method::DELETE,
            &format!("{cms}?dryRun=All&shardSelector={selector}"),
            None,
        )
        .await;
    assert_eq!(names(&deleted.body), in_home, "{}", t.name);
    let table = t
        .raw_accepting(
            Method::GET,
            &format!("{cms}?shardSelector={selector}"),
            "application/json",
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            None,
        )
        .await;
    assert_eq!(
        table.body["rows"].as_array().map(Vec::len),
        Some(in_home.len()),
        "{}",
        t.name
    );
    let partial = t
        .raw_accepting(
            Method::GET,
            &format!("{cms}?shardSelector={selector}"),
            "application/json",
            "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
            None,
        )
        .await;
    assert_eq!(names(&partial.body), in_home, "{}", t.name);
    let keys = |v: &Value| -> Vec<String> {
        v["metadata"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };

    // Bad selectors, and the one kind of text that is no selector at all.
    let mut refused = serde_json::Map::new();
    for bad in [
        " ",
        "x",
        "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
        "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
        "shardRange(object.metadata.uid, 1, 2)",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'",
        "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') && shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x1000000000000000g')",
    ] {
        let list = t
            .call(
                Method::GET,
                &format!("{cms}?shardSelector={}", query(bad)),
                None,
            )
            .await;
        let watch = t
            .call(
                Method::GET,
                &format!("{cms}?watch=1&shardSelector={}", query(bad)),
                None,
            )
            .await;
        assert_eq!(list.status(), watch.status(), "{}: {bad}", t.name);
        refused.insert(bad.to_string(), list.status());
    }
    // The corners of the grammar (CEL's, then the walk's): lists only, as some are accepted.
    let mut corners = serde_json::Map::new();
    for text in [
        "shardRange(object.metadata.uid, \"0x0000000000000000\", \"0x8000000000000000\")",
        "(shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'))",
        "x.shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
        "shardRange(object.metadata.uid, r'0x0000000000000000', '0x10000000000000000')",
        "shardRange(object.metadata.uid, '\\x30x0000000000000000', '0x8000000000000000')",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') // note",
        "shardRange(object . metadata . uid, '0x0000000000000000', '0x8000000000000000')",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000') || shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')",
        "has(object.metadata.uid)",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || 1",
        "shardRange(object.metadata.uid, b'0x00', '0x80')",
        "shardRange(object.metadata.uid, null, '0x80')",
        "shardRange(object.metadata.uid, 1u, '0x80')",
        "shardRange(object.metadata.uid, 1.5, '0x80')",
        "shardRange(object.metadata.uid, true, '0x80')",
        "shardRange(object.metadata.UID, '0x0000000000000000', '0x8000000000000000')",
        "shardRange(metadata.uid, '0x0000000000000000', '0x8000000000000000')",
        "shardRange(object.metadata.uid, '0xABCDEF0000000000', '0x8000000000000000')",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x800000000000000\u{e4}')",
        "shardRange(object.metadata.uid, '0x10000000000000000', '0x10000000000000000')",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') ||",
        "shardRange(",
        "[]",
        "{}",
        "object.metadata",
        "a{}",
        "-1",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000', '0x1')",
        "shardRange()",
    ] {
        let seen = t
            .call(
                Method::GET,
                &format!("{cms}?shardSelector={}", query(text)),
                None,
            )
            .await;
        let outcome = match seen.code {
            200 => {
                // The objects listed are those of the selector the server says it applied.
                let echoed = seen.body["metadata"]["shardInfo"]["selector"]
                    .as_str()
                    .unwrap_or("");
                let applied = ferrokube_apiserver::shard::parse(echoed).expect("echo parses");
                let want: BTreeSet<String> = live
                    .iter()
                    .filter(|n| applied.matches_value(&uids[n.as_str()]))
                    .cloned()
                    .collect();
                assert_eq!(names(&seen.body), want, "{}: {text}", t.name);
                json!([200, echoed])
            }
            _ => seen.status(),
        };
        corners.insert(text.to_string(), outcome);
    }
    // A member of a hash ring owns many arcs: 400 ranges in one selector (a 42 KB query).
    let many = (1..400u64).fold(
        ShardSelector::uid(ShardRange::part(0, 400).expect("part")),
        |selector, i| selector.or(ShardRange::part(i, 400).expect("part")),
    );
    let seen = t
        .call(
            Method::GET,
            &format!("{cms}?shardSelector={}", query(&many.to_string())),
            None,
        )
        .await;
    assert_eq!(
        names(&seen.body),
        live,
        "{}: 400 ranges cover everything",
        t.name
    );
    let many_ranges = json!([
        seen.code,
        seen.body["metadata"]["shardInfo"]["selector"] == json!(many.to_string())
    ]);
    let empty = t
        .call(Method::GET, &format!("{cms}?shardSelector="), None)
        .await;
    assert_eq!(names(&empty.body), live, "{}", t.name);
    json!({
        "echoed": echoed,
        "watched": watched,
        "streamed_end": last.1["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "page": {"keys": keys(&page.body), "items": page.body["items"].as_array().map(Vec::len),
                 "shardInfo": page.body["metadata"]["shardInfo"]["selector"] == json!(member(home).to_string())},
        "deleted": {"kind": deleted.body["kind"], "keys": keys(&deleted.body)},
        "table": keys(&table.body),
        "partial": keys(&partial.body),
        "empty": keys(&empty.body),
        "refused": refused,
        "corners": corners,
        "many_ranges": many_ranges,
    })
}

/// A server without the gate: the parameter ignored, bad or not.
async fn shard_selector_ignored_case(t: &Target, ns: &str) -> Value {
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    for i in 0..4 {
        let seen = t
            .call(
                Method::POST,
                &cms,
                Some(config_map(&format!("cm-{i}"), "1")),
            )
            .await;
        assert_eq!(seen.code, 201, "{}: {:?}", t.name, seen.body);
    }
    let mut seen_lists = Vec::new();
    for text in [member(0).to_string(), "x".to_string(), " ".to_string()] {
        let list = t
            .call(
                Method::GET,
                &format!("{cms}?shardSelector={}", query(&text)),
                None,
            )
            .await;
        assert_eq!(list.code, 200, "{}: {text}: {:?}", t.name, list.body);
        assert_eq!(names(&list.body).len(), 4, "{}: {text}", t.name);
        assert!(
            list.body["metadata"].get("shardInfo").is_none(),
            "{}",
            t.name
        );
        seen_lists.push(json!([list.code, names(&list.body)]));
    }
    let path = format!(
        "{cms}?watch=1&resourceVersion=0&shardSelector={}",
        query("x")
    );
    let events = t.watch(&path, 4, Duration::from_secs(5)).await;
    assert_eq!(events.len(), 4, "{}: {events:?}", t.name);
    json!({"lists": seen_lists, "watched": events.len()})
}

/// Runs `case` on the embedded server with the gate `gated`, and on the real server (with
/// `--features e2e`) if its gate is the same; observations compared when both ran.
async fn run_sharded(gated: bool, case: &str) {
    let mut targets = Vec::new();
    #[cfg(feature = "e2e")]
    {
        let real = Target::real();
        let real_gated = shards(&real).await;
        // scripts/e2e.sh's pass with the gate on says so: the comparison must then happen.
        if gated && std::env::var_os("FERROKUBE_E2E_SHARD_SELECTOR").is_some() {
            assert!(
                real_gated,
                "the real server was started with ShardedListAndWatch but shards nothing"
            );
        }
        if real.server_minor().await >= CURRENT_MINOR && real_gated == gated {
            targets.push(real);
        }
    }
    targets.insert(
        0,
        Target::embedded_with(|server| server.sharded_list_and_watch(gated)).await,
    );
    assert_eq!(
        shards(&targets[0]).await,
        gated,
        "the embedded server's gate"
    );
    let mut observed: Vec<(&str, Value)> = Vec::new();
    for target in &targets {
        let ns = target.namespace(case).await;
        let api: ferrokube_client::Api<ConfigMap> =
            ferrokube_client::Api::namespaced(target.client.clone(), &ns);
        let detected = api.supports_shard_selector().await.expect("detection list");
        assert_eq!(detected, gated, "{}: the client's detection", target.name);
        let half = ShardSelector::uid(ShardRange::part(0, 2).expect("part"));
        let list = api
            .list(&ferrokube_client::api::ListParams::default().shard(&half))
            .await
            .expect("sharded list");
        let echoed = list.shard_selector().map(str::to_string);
        assert_eq!(echoed, gated.then(|| half.to_string()), "{}", target.name);
        let seen = match gated {
            true => shard_selector_case(target, &ns).await,
            false => shard_selector_ignored_case(target, &ns).await,
        };
        observed.push((target.name, normalize(seen, &ns)));
    }
    if std::env::var_os("SHARD_SELECTOR_SHOW").is_some() {
        for (name, seen) in &observed {
            eprintln!("SHOW {name} {seen}");
        }
    }
    let names: Vec<&str> = observed.iter().map(|(name, _)| *name).collect();
    eprintln!("{case}: compared on {names:?}");
    if let [(a, first), (b, second)] = observed.as_slice() {
        assert_eq!(first, second, "{a} and {b} disagree");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_partitions_lists_and_watches_conformance() {
    run_sharded(true, "shard-selector").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_ignored_with_the_gate_off_conformance() {
    run_sharded(false, "shard-selector-off").await;
}
