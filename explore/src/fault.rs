//! Faults and fault plans: what the explorer does to a run, and where.
//!
//! A run's **points** are the moments at which the controller under test touches the world, in
//! the order they happen, counted over every incarnation of the controller (a restart goes on
//! counting):
//!
//! - `request:N`: the controller's N-th request to the API server (reads, writes and watches;
//!   not re-watches: a watch of a collection the same incarnation has watched before is an
//!   informer resuming, which decides nothing);
//! - `event:N`: the N-th watch event (`ADDED`, `MODIFIED`, `DELETED`; not bookmarks) delivered
//!   to the controller;
//! - `outside:N`: the controller's N-th call to the outside system ([`crate::OutsideClient`]).
//!
//! A fault-free run lists every point it passed ([`crate::RunOutcome::points`]). Because a run
//! is a function of its inputs, a run with a plan is the same as the fault-free run up to its
//! first fault, so `request:12` names the same request in both.
//!
//! A [`Fault`] is a class of fault placed at a point; a [`FaultPlan`] is a list of them. Both
//! print in a short text form that parses back ([`FaultPlan::from_str`]), so a failure found by
//! the search is printed as a plan a test can replay:
//!
//! ```text
//! crash-after@request:12; delay(3s)@event:4
//! ```
//!
//! | text | the fault | the research's name |
//! |---|---|---|
//! | `crash-before@P` | the controller crashes just before P (a request is not sent, an event not delivered, an outside call not made) and restarts with empty caches | intermediate state |
//! | `crash-after@P` | the request or outside call at P takes effect, the answer is lost, the controller crashes and restarts | intermediate state |
//! | `restart-lagging(K)@P` | `crash-before@P`, and the new incarnation talks to an API server replica K revisions behind, which catches up [`LAG_CATCH_UP`] later: its lists that allow a cache (`resourceVersion=0`, or not older than a version it has) show the past, its watches hold back what the replica has not reached; consistent lists and GETs read the present, as kube-apiserver's do | stale state ("time travel") |
//! | `coalesce@event:N` | event N is never delivered: the watch hides it, then ends with 410 Gone once its object changes again (or the watch idles [`COALESCE_WINDOW`]), so the informer relists past it | unobserved state |
//! | `delay(D)@event:N` | event N and everything after it on the same watch arrive D late: one informer lags another | stale state |
//! | `fail(409)@request:N`, `fail(500)`, `fail(429)` | the request is answered with that error and never reaches the server (429 carries `Retry-After: 1`) | |
//! | `fail(timeout)@request:N` | the request takes effect, and the answer is a 504 Timeout: the caller cannot tell whether it did | |
//! | `lagging-replica(N,S)@P` | from P until S more steps have settled (see [`crate::stale`]), the controller's API server replica is stuck N revisions behind where the server was at P: every watch holds lines past that revision (the new watch of a resumed or relisted informer too), lists that allow a cache are answered at it, consistent lists and GETs read the present (as kube-apiserver's do); no crash | stale state, lasting |
//! | `partition(S)@event:N` | from event N until S more steps have settled, the watch that carried it and every later watch of the same collection (an informer's resume, or its watch after a relist) deliver nothing from N's revision on | unobserved state, lasting |
//! | `lagging-replica(N,Ts)@P`, `partition(Ts)@event:N` | the same, for T seconds of virtual time from P (or until the last step has settled, if that comes first) rather than a count of steps: a window that outlives an informer's resumes and relists however the steps fall. The search tries them with a window that straddles the next step and heals halfway through its settle (see [`crate::search`]) | stale state, lasting |
//! | `compact@P` | before P, the server compacts its history and ends every watch: each informer gets 410 and relists | |
//! | `drop-watches@P` | before P, the server ends every watch: each informer resumes from its last resourceVersion | |

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How long after a lagging restart the lagging replica catches up (virtual time).
pub const LAG_CATCH_UP: Duration = Duration::from_secs(10);

/// How long a watch that hides an event waits for its object to change again before it gives up
/// and ends with 410 (virtual time).
pub const COALESCE_WINDOW: Duration = Duration::from_secs(5);

/// A moment at which the controller touches the world. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Point {
    /// The controller's N-th request (from 1).
    Request(u64),
    /// The N-th watch event delivered to the controller (from 1).
    Event(u64),
    /// The controller's N-th call to the outside system (from 1).
    Outside(u64),
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Point::Request(n) => write!(f, "request:{n}"),
            Point::Event(n) => write!(f, "event:{n}"),
            Point::Outside(n) => write!(f, "outside:{n}"),
        }
    }
}

/// The error a [`Fault::Fail`] answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failure {
    /// 409 Conflict, as for a stale resourceVersion. Not sent to the server.
    Conflict,
    /// 500 Internal Server Error. Not sent to the server.
    Internal,
    /// 429 Too Many Requests with `Retry-After: 1`. Not sent to the server.
    TooManyRequests,
    /// 504 Timeout *after* the server applied the request: the ambiguous outcome.
    Timeout,
}

impl Failure {
    /// Every failure, in the order the search tries them.
    pub const ALL: [Failure; 4] = [
        Failure::Conflict,
        Failure::Timeout,
        Failure::Internal,
        Failure::TooManyRequests,
    ];

    /// The HTTP status the controller sees.
    pub fn status(self) -> u16 {
        match self {
            Failure::Conflict => 409,
            Failure::Internal => 500,
            Failure::TooManyRequests => 429,
            Failure::Timeout => 504,
        }
    }

    /// The `reason` of the Status body.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Failure::Conflict => "Conflict",
            Failure::Internal => "InternalError",
            Failure::TooManyRequests => "TooManyRequests",
            Failure::Timeout => "Timeout",
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Timeout => f.write_str("timeout"),
            other => write!(f, "{}", other.status()),
        }
    }
}

/// One fault at one point. See the [module docs](self) for each class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Crash just before the point; restart with empty caches.
    CrashBefore(Point),
    /// The request or outside call at the point takes effect; its answer is lost; crash and
    /// restart. (At an event: the same as [`Fault::CrashBefore`].)
    CrashAfter(Point),
    /// Crash before the point; the restart lists and watches from a replica `behind` revisions
    /// behind.
    RestartLagging {
        /// Where the crash happens.
        at: Point,
        /// How many revisions behind the replica is.
        behind: u64,
    },
    /// Hide the event at the point and make the watch relist past it (events only).
    Coalesce(Point),
    /// Deliver the event at the point, and the rest of its watch, `by` late (events only).
    Delay {
        /// The first event held back.
        at: Point,
        /// How late.
        by: Duration,
    },
    /// Answer the request at the point with `failure` (requests only).
    Fail {
        /// The request.
        at: Point,
        /// The answer.
        failure: Failure,
    },
    /// From the point until `steps` more steps have settled, the controller's replica is stuck
    /// `behind` revisions behind the server's revision at the point.
    LaggingReplica {
        /// Where the replica stops.
        at: Point,
        /// How many revisions behind the server it stops.
        behind: u64,
        /// How many steps after the current one it outlasts.
        steps: u32,
    },
    /// From the event at the point until `steps` more steps have settled, the controller's
    /// watches of that event's collection deliver nothing from its revision on (events only).
    Partition {
        /// The first event held.
        at: Point,
        /// How many steps after the current one it outlasts.
        steps: u32,
    },
    /// [`Fault::LaggingReplica`] for a span of virtual time rather than a count of steps (it
    /// ends early if the last step settles first).
    LaggingReplicaFor {
        /// Where the replica stops.
        at: Point,
        /// How many revisions behind the server it stops.
        behind: u64,
        /// How long it stays there.
        lasts: Duration,
    },
    /// [`Fault::Partition`] for a span of virtual time rather than a count of steps (it ends
    /// early if the last step settles first; events only).
    PartitionFor {
        /// The first event held.
        at: Point,
        /// How long the collection's watches hold their lines.
        lasts: Duration,
    },
    /// Compact the history and end every watch, before the point.
    Compact(Point),
    /// End every watch, before the point.
    DropWatches(Point),
}

impl Fault {
    /// Where the fault happens.
    pub fn point(&self) -> Point {
        match *self {
            Fault::CrashBefore(at)
            | Fault::CrashAfter(at)
            | Fault::RestartLagging { at, .. }
            | Fault::Coalesce(at)
            | Fault::Delay { at, .. }
            | Fault::Fail { at, .. }
            | Fault::LaggingReplica { at, .. }
            | Fault::Partition { at, .. }
            | Fault::LaggingReplicaFor { at, .. }
            | Fault::PartitionFor { at, .. }
            | Fault::Compact(at)
            | Fault::DropWatches(at) => at,
        }
    }

    /// Whether the fault makes the controller restart.
    pub fn restarts(&self) -> bool {
        matches!(
            self,
            Fault::CrashBefore(_) | Fault::CrashAfter(_) | Fault::RestartLagging { .. }
        )
    }

    /// Smaller versions of this fault, for shrinking (a shorter lag, a shorter delay, a plain
    /// crash for a lagging one), simplest first.
    pub(crate) fn simpler(&self) -> Vec<Fault> {
        match *self {
            Fault::RestartLagging { at, behind } => {
                let mut simpler = vec![Fault::CrashBefore(at)];
                let mut k = 1;
                while k < behind {
                    simpler.push(Fault::RestartLagging { at, behind: k });
                    k *= 2;
                }
                simpler
            }
            Fault::Delay { at, by } => {
                let mut simpler = Vec::new();
                let mut d = Duration::from_secs(1);
                while d < by {
                    simpler.push(Fault::Delay { at, by: d });
                    d *= 2;
                }
                simpler
            }
            Fault::Compact(at) => vec![Fault::DropWatches(at)],
            Fault::LaggingReplica { at, behind, steps } => (0..steps)
                .map(|steps| Fault::LaggingReplica { at, behind, steps })
                .chain((0..behind).map(|behind| Fault::LaggingReplica { at, behind, steps }))
                .collect(),
            Fault::Partition { at, steps } => (0..steps)
                .map(|steps| Fault::Partition { at, steps })
                .collect(),
            Fault::LaggingReplicaFor { at, behind, lasts } => shorter(lasts)
                .map(|lasts| Fault::LaggingReplicaFor { at, behind, lasts })
                .chain((0..behind).map(|behind| Fault::LaggingReplicaFor { at, behind, lasts }))
                .collect(),
            Fault::PartitionFor { at, lasts } => shorter(lasts)
                .map(|lasts| Fault::PartitionFor { at, lasts })
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// Whole seconds shorter than `lasts`, doubling from 1 s: a timed fault's simpler forms.
fn shorter(lasts: Duration) -> impl Iterator<Item = Duration> {
    std::iter::successors(Some(Duration::from_secs(1)), |d| Some(*d * 2))
        .take_while(move |d| *d < lasts)
}

/// A span as a plan writes it: whole seconds (`30s`) when it is whole, else milliseconds.
fn span(lasts: Duration) -> String {
    if lasts.subsec_millis() == 0 {
        format!("{}s", lasts.as_secs())
    } else {
        format!("{}ms", lasts.as_millis())
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::CrashBefore(at) => write!(f, "crash-before@{at}"),
            Fault::CrashAfter(at) => write!(f, "crash-after@{at}"),
            Fault::RestartLagging { at, behind } => write!(f, "restart-lagging({behind})@{at}"),
            Fault::Coalesce(at) => write!(f, "coalesce@{at}"),
            Fault::Delay { at, by } => write!(f, "delay({}ms)@{at}", by.as_millis()),
            Fault::Fail { at, failure } => write!(f, "fail({failure})@{at}"),
            Fault::LaggingReplica { at, behind, steps } => {
                write!(f, "lagging-replica({behind},{steps})@{at}")
            }
            Fault::Partition { at, steps } => write!(f, "partition({steps})@{at}"),
            Fault::LaggingReplicaFor { at, behind, lasts } => {
                write!(f, "lagging-replica({behind},{})@{at}", span(*lasts))
            }
            Fault::PartitionFor { at, lasts } => write!(f, "partition({})@{at}", span(*lasts)),
            Fault::Compact(at) => write!(f, "compact@{at}"),
            Fault::DropWatches(at) => write!(f, "drop-watches@{at}"),
        }
    }
}

/// A plan's text that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a fault plan: {text:?}: {why}")]
pub struct PlanParseError {
    /// The part that did not parse.
    pub text: String,
    /// What was expected.
    pub why: &'static str,
}

impl FromStr for Point {
    type Err = PlanParseError;

    fn from_str(text: &str) -> Result<Point, PlanParseError> {
        let error = |why| PlanParseError {
            text: text.to_string(),
            why,
        };
        let (kind, n) = text
            .trim()
            .split_once(':')
            .ok_or_else(|| error("a point is request:N, event:N or outside:N"))?;
        let n: u64 = n
            .parse()
            .map_err(|_| error("a point's number is a whole number"))?;
        if n == 0 {
            return Err(error("points count from 1"));
        }
        match kind {
            "request" => Ok(Point::Request(n)),
            "event" => Ok(Point::Event(n)),
            "outside" => Ok(Point::Outside(n)),
            _ => Err(error("a point is request:N, event:N or outside:N")),
        }
    }
}

/// A duration as a plan writes it: `250ms` or `3s`.
fn parse_duration(text: &str) -> Option<Duration> {
    if let Some(ms) = text.strip_suffix("ms") {
        ms.parse().ok().map(Duration::from_millis)
    } else {
        text.strip_suffix('s')?
            .parse()
            .ok()
            .map(Duration::from_secs)
    }
}

impl FromStr for Fault {
    type Err = PlanParseError;

    fn from_str(text: &str) -> Result<Fault, PlanParseError> {
        let text = text.trim();
        let error = |why| PlanParseError {
            text: text.to_string(),
            why,
        };
        let (class, at) = text
            .split_once('@')
            .ok_or_else(|| error("a fault is CLASS@POINT"))?;
        let at: Point = at.parse()?;
        let (name, argument) = match class.split_once('(') {
            Some((name, rest)) => (
                name,
                Some(
                    rest.strip_suffix(')')
                        .ok_or_else(|| error("an argument ends with ')'"))?,
                ),
            ),
            None => (class, None),
        };
        let fault = match (name, argument) {
            ("crash-before", None) => Fault::CrashBefore(at),
            ("crash-after", None) => Fault::CrashAfter(at),
            ("restart-lagging", Some(behind)) => Fault::RestartLagging {
                at,
                behind: behind
                    .parse()
                    .map_err(|_| error("restart-lagging(K): K is a number of revisions"))?,
            },
            ("coalesce", None) => Fault::Coalesce(at),
            ("delay", Some(by)) => Fault::Delay {
                at,
                by: parse_duration(by).ok_or_else(|| error("delay(D): D is like 250ms or 3s"))?,
            },
            ("fail", Some(failure)) => Fault::Fail {
                at,
                failure: match failure {
                    "409" => Failure::Conflict,
                    "500" => Failure::Internal,
                    "429" => Failure::TooManyRequests,
                    "timeout" => Failure::Timeout,
                    _ => return Err(error("fail(F): F is 409, 500, 429 or timeout")),
                },
            },
            ("lagging-replica", Some(arguments)) => {
                let window = || {
                    error(
                        "lagging-replica(N,S): N revisions behind, for S more steps (or Ts, T seconds)",
                    )
                };
                let (behind, lasts) = arguments.split_once(',').ok_or_else(window)?;
                let behind = behind.trim().parse().map_err(|_| window())?;
                match lasts.trim().parse() {
                    Ok(steps) => Fault::LaggingReplica { at, behind, steps },
                    Err(_) => Fault::LaggingReplicaFor {
                        at,
                        behind,
                        lasts: parse_duration(lasts.trim()).ok_or_else(window)?,
                    },
                }
            }
            ("partition", Some(lasts)) => match lasts.trim().parse() {
                Ok(steps) => Fault::Partition { at, steps },
                Err(_) => Fault::PartitionFor {
                    at,
                    lasts: parse_duration(lasts.trim()).ok_or_else(|| {
                        error("partition(S): S is a number of steps (or Ts, T seconds)")
                    })?,
                },
            },
            ("compact", None) => Fault::Compact(at),
            ("drop-watches", None) => Fault::DropWatches(at),
            _ => return Err(error("unknown fault class")),
        };
        let fits = match fault {
            Fault::Coalesce(_)
            | Fault::Delay { .. }
            | Fault::Partition { .. }
            | Fault::PartitionFor { .. } => {
                matches!(at, Point::Event(_))
            }
            Fault::Fail { .. } => matches!(at, Point::Request(_)),
            _ => true,
        };
        if !fits {
            return Err(error(
                "coalesce, delay and partition take an event point, fail a request point",
            ));
        }
        Ok(fault)
    }
}

/// The faults of one run, in any order (each acts at its own point). Prints as
/// `fault; fault; …` (`no faults` when empty) and parses back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FaultPlan {
    /// The faults.
    pub faults: Vec<Fault>,
}

impl FaultPlan {
    /// The plan with no faults: the reference run.
    pub fn none() -> FaultPlan {
        FaultPlan::default()
    }

    /// A plan of one fault.
    pub fn one(fault: Fault) -> FaultPlan {
        FaultPlan {
            faults: vec![fault],
        }
    }

    /// The plan with `fault` added.
    pub fn with(mut self, fault: Fault) -> FaultPlan {
        self.faults.push(fault);
        self
    }

    /// Whether the plan has no fault.
    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }

    /// The faults placed at `point`, in plan order.
    pub(crate) fn at(&self, point: Point) -> impl Iterator<Item = &Fault> {
        self.faults
            .iter()
            .filter(move |fault| fault.point() == point)
    }
}

impl fmt::Display for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.faults.is_empty() {
            return f.write_str("no faults");
        }
        for (i, fault) in self.faults.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{fault}")?;
        }
        Ok(())
    }
}

impl FromStr for FaultPlan {
    type Err = PlanParseError;

    fn from_str(text: &str) -> Result<FaultPlan, PlanParseError> {
        let text = text.trim();
        if text.is_empty() || text == "no faults" {
            return Ok(FaultPlan::none());
        }
        let faults = text
            .split(';')
            .filter(|part| !part.trim().is_empty())
            .map(str::parse)
            .collect::<Result<_, _>>()?;
        Ok(FaultPlan { faults })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_prints_and_parses_back() {
        let plan = FaultPlan::none()
            .with(Fault::CrashAfter(Point::Request(12)))
            .with(Fault::RestartLagging {
                at: Point::Outside(2),
                behind: 5,
            })
            .with(Fault::Delay {
                at: Point::Event(4),
                by: Duration::from_millis(2500),
            })
            .with(Fault::Fail {
                at: Point::Request(3),
                failure: Failure::Timeout,
            })
            .with(Fault::Fail {
                at: Point::Request(3),
                failure: Failure::Conflict,
            })
            .with(Fault::Coalesce(Point::Event(1)))
            .with(Fault::Compact(Point::Event(9)))
            .with(Fault::DropWatches(Point::Request(1)))
            .with(Fault::CrashBefore(Point::Event(7)))
            .with(Fault::LaggingReplica {
                at: Point::Request(5),
                behind: 0,
                steps: 1,
            })
            .with(Fault::Partition {
                at: Point::Event(3),
                steps: 2,
            })
            .with(Fault::LaggingReplicaFor {
                at: Point::Request(6),
                behind: 2,
                lasts: Duration::from_secs(30),
            })
            .with(Fault::PartitionFor {
                at: Point::Event(4),
                lasts: Duration::from_millis(1500),
            });
        let text = plan.to_string();
        assert_eq!(text.parse::<FaultPlan>(), Ok(plan));
        assert_eq!("no faults".parse::<FaultPlan>(), Ok(FaultPlan::none()));
        assert_eq!(
            "lagging-replica(2,30s)@request:6; partition(45s)@event:2".parse::<FaultPlan>(),
            Ok(FaultPlan::none()
                .with(Fault::LaggingReplicaFor {
                    at: Point::Request(6),
                    behind: 2,
                    lasts: Duration::from_secs(30),
                })
                .with(Fault::PartitionFor {
                    at: Point::Event(2),
                    lasts: Duration::from_secs(45),
                }))
        );
        assert_eq!(
            "delay(3s)@event:2".parse::<Fault>(),
            Ok(Fault::Delay {
                at: Point::Event(2),
                by: Duration::from_secs(3)
            })
        );
    }

    #[test]
    fn a_bad_plan_is_a_typed_error() {
        for bad in [
            "crash@request:1",
            "crash-before@request",
            "crash-before@request:0",
            "fail(418)@request:1",
            "coalesce@request:3",
            "fail(409)@event:3",
            "delay(soon)@event:1",
            "restart-lagging(x)@request:1",
            "partition(1)@request:2",
            "lagging-replica(1)@event:2",
            "lagging-replica(1,soon)@event:2",
            "partition(30s)@request:2",
        ] {
            assert!(bad.parse::<FaultPlan>().is_err(), "{bad} parsed");
        }
    }
}
