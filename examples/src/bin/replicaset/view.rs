//! The demo's live view: what the controller sees and does, redrawn in place four times a second.
//!
//! ```text
//!  step 3/6  kill 2 of web's pods, as a failing node would                       12.4 s
//!  REPLICASET      DESIRED  CURRENT  READY  AVAILABLE
//!  demo/api              2        2      2          2
//!  demo/web              6        4      4          4
//!  queue 1 · 8.0 reconciles/s · 52 syncs · 3 retries · 9 waits for a stale cache · pods +14 −6
//!  informer events: 61 ReplicaSet, 233 Pod · 2 lists · 5 watches
//! ```
//!
//! Without a terminal (a pipe, CI) the same facts become plain log lines: one per story step, and a
//! summary whenever the picture changed, at most once a second.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokube::core::LabelSelector;
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::controller::{ReplicaSetController, Stats};

pub struct View {
    controller: Arc<ReplicaSetController>,
    live: bool,
    started: Instant,
    step: Mutex<String>,
}

/// One ReplicaSet's line: name, then desired, current, ready and available pods.
struct Row {
    name: String,
    counts: [i32; 4],
}

impl Row {
    /// `demo/web 6/4/4/4`, for log lines.
    fn plain(&self) -> String {
        let [desired, current, ready, available] = self.counts;
        format!("{} {desired}/{current}/{ready}/{available}", self.name)
    }
}

/// One look at the controller.
struct Frame {
    rows: Vec<Row>,
    summary: String,
    syncs: u64,
}

impl View {
    pub fn new(controller: Arc<ReplicaSetController>, live: bool) -> View {
        View {
            controller,
            live,
            started: Instant::now(),
            step: Mutex::new(String::new()),
        }
    }

    /// Shows what the story does now (a log line without a terminal).
    pub fn step(&self, text: String) {
        if !self.live {
            println!("[{:6.1}s] {text}", self.started.elapsed().as_secs_f64());
        }
        *self.step.lock() = text;
    }

    /// A line below the view (or a log line).
    pub fn say(&self, text: &str) {
        if self.live {
            println!("{text}");
        } else {
            println!("[{:6.1}s] {text}", self.started.elapsed().as_secs_f64());
        }
    }

    /// Draws until `stop` turns true, then once more.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let every = if self.live {
            Duration::from_millis(250)
        } else {
            Duration::from_secs(1)
        };
        let mut last_syncs = 0;
        let mut drawn_lines = 0;
        let mut last_plain = String::new();
        loop {
            let frame = self.frame();
            let rate = (frame.syncs - last_syncs) as f64 / every.as_secs_f64();
            last_syncs = frame.syncs;
            if self.live {
                drawn_lines = self.draw(&frame, rate, drawn_lines);
            } else {
                let rows: Vec<String> = frame.rows.iter().map(Row::plain).collect();
                let plain = format!("{} | {}", rows.join(" | "), frame.summary);
                if plain != last_plain {
                    println!(
                        "[{:6.1}s] {plain} | {rate:.1} reconciles/s",
                        self.started.elapsed().as_secs_f64()
                    );
                    last_plain = plain;
                }
            }
            if *stop.borrow() {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = stop.changed() => {}
            }
        }
    }

    fn frame(&self) -> Frame {
        let controller = &self.controller;
        let mut replicasets = controller
            .replicasets()
            .lister()
            .list(&LabelSelector::everything());
        replicasets.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let rows = replicasets
            .iter()
            .map(|rs| {
                let status = rs.status.clone().unwrap_or_default();
                Row {
                    name: format!(
                        "{}/{}",
                        rs.metadata.namespace.as_deref().unwrap_or_default(),
                        rs.metadata.name.as_deref().unwrap_or_default()
                    ),
                    counts: [
                        rs.spec.replicas.unwrap_or(1),
                        status.replicas,
                        status.ready_replicas.unwrap_or(0),
                        status.available_replicas.unwrap_or(0),
                    ],
                }
            })
            .collect();
        let stats = controller.stats();
        let lists = controller.replicasets().reflector_status().lists()
            + controller.pods().reflector_status().lists();
        let watches = controller.replicasets().reflector_status().watches()
            + controller.pods().reflector_status().watches();
        let summary = format!(
            "queue {} · {} syncs · {} retries · {} waits for a stale cache · pods +{} −{} · informer events: {} ReplicaSet, {} Pod · {lists} lists · {watches} watches",
            controller.queue().len(),
            Stats::get(&stats.syncs),
            Stats::get(&stats.failed_syncs),
            controller.stale_skips(),
            Stats::get(&stats.pods_created),
            Stats::get(&stats.pods_deleted),
            Stats::get(&stats.replicaset_events),
            Stats::get(&stats.pod_events),
        );
        Frame {
            rows,
            summary,
            syncs: Stats::get(&stats.syncs),
        }
    }

    /// Redraws over the previous frame (`drawn` lines); returns how many lines this one took.
    fn draw(&self, frame: &Frame, rate: f64, drawn: usize) -> usize {
        let mut out = String::new();
        if drawn > 0 {
            // Up to the first line of the last frame.
            let _ = write!(out, "\x1b[{drawn}F");
        }
        let mut line = |text: String| {
            let _ = writeln!(out, "\x1b[2K{text}");
        };
        line(format!(
            "\x1b[1m{:<72}\x1b[0m {:6.1} s",
            self.step.lock().as_str(),
            self.started.elapsed().as_secs_f64()
        ));
        line(format!(
            "{:<20} {:>7} {:>8} {:>6} {:>10}",
            "REPLICASET", "DESIRED", "CURRENT", "READY", "AVAILABLE"
        ));
        for Row { name, counts } in &frame.rows {
            let [desired, current, ready, available] = counts;
            line(format!(
                "{name:<20} {desired:>7} {current:>8} {ready:>6} {available:>10}"
            ));
        }
        let (queue, rest) = frame
            .summary
            .split_once(" · ")
            .unwrap_or((&frame.summary, ""));
        line(format!("{queue} · {rate:.1} reconciles/s · {rest}"));
        let lines = 3 + frame.rows.len();
        // A frame with fewer rows than the last: clear what is left below.
        for _ in lines..drawn {
            line(String::new());
        }
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(out.as_bytes());
        let _ = stdout.flush();
        lines.max(drawn)
    }
}
