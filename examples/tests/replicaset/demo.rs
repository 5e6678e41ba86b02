//! The demo as a user starts it (`cargo run -p ferrokube-examples`): it tells its story on the
//! embedded server and, kept running, stops gracefully on SIGTERM.

use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};

/// The demo, kept running, stops gracefully on SIGTERM and exits 0 within a few seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manager_sample_demo_exits_0_on_sigterm() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_replicaset"))
        .args(["--embedded", "--keep-running"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the demo");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(120), async {
        while let Ok(Some(line)) = lines.next_line().await {
            let over = line.contains("the story is over");
            seen.push(line);
            if over {
                return;
            }
        }
        panic!("the demo ended before its story did:\n{}", seen.join("\n"));
    })
    .await
    .expect("the story ends within 120 s");
    let pid = child.id().expect("running").to_string();
    let signalled = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-s", "TERM", &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    let exit = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits within 10 s of SIGTERM")
        .expect("wait");
    eprintln!(
        "demo exited {exit:?} {:?} after SIGTERM",
        signalled.elapsed()
    );
    assert_eq!(exit.code(), Some(0), "exit status {exit:?}");
}
