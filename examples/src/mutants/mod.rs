//! # The mutant corpus: deliberate bugs in our own samples (issue 29)
//!
//! A fault explorer that reports nothing proves nothing unless it is known to find real bugs. So
//! the samples carry *mutants*: each a small, deliberate departure from the correct controller,
//! switched on by a knob that defaults to off, and each a bug class that the research on
//! controller testing found in real operators:
//!
//! - **Sieve** (Sun et al., "Automatic Reliability Testing for Cluster Management Controllers",
//!   OSDI 2022) perturbs a controller's view (restarts at chosen points, stale API servers,
//!   unobserved intermediate states) and names three classes: *intermediate state*, *stale
//!   state*, *unobserved state*;
//! - **Acto** (Gu et al., "Acto: Automatic End-to-End Testing for Operation Correctness of Cloud
//!   System Management", SOSP 2023) drives operators through sequences of desired states and
//!   checks, among others, that they converge to a fixed point and report their state truly.
//!
//! For each mutant a test (names containing `explore`) runs the explorer on the sample with the
//! knob on, with a run budget and a fixed seed, and asserts that it finds the bug, with the class
//! of violation expected and a small plan; the same search on the correct sample finds nothing.
//!
//! [`corpus`] lists every mutant; each section comes from the branch that added it. Every
//! mutant is searched under the default budget and every correct sample under twice its random
//! plans; each search prints one raw benchmark line ([`mod@bench`]), which
//! `scripts/bench-explore-corpus.sh` gathers into `benches/explore/`.

pub mod bench;
pub mod bucket;
pub mod join;
pub mod rs_dns;

/// One mutant of the corpus: where it lives, what it breaks, who reported the class, and the test
/// that shows the explorer finding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// A short name, unique in the corpus (`rs-no-expectations`).
    pub name: &'static str,
    /// The sample it mutates (`replicaset`, `dns`, `bucket`).
    pub sample: &'static str,
    /// How to switch it on.
    pub knob: &'static str,
    /// The bug class, in the words of issue 29's list.
    pub class: &'static str,
    /// Where the literature reports the class.
    pub reference: &'static str,
    /// The oracle that catches it (`invariant`, `end state`, `fixed point`, `left behind`,
    /// `liveness`).
    pub oracle: &'static str,
    /// The test that finds it: `test target::test name` (`cargo test -p ferrokube-examples
    /// --test <target> <name>`).
    pub test: &'static str,
}

/// Every mutant of the corpus, section by section.
pub fn corpus() -> Vec<&'static Entry> {
    let mut all: Vec<&'static Entry> = Vec::new();
    // ---- section: the ReplicaSet and DnsRecord samples (branch mutants-a) ----
    all.extend(rs_dns::ENTRIES.iter());
    // ---- end of section mutants-a ----
    // ---- section: the Bucket sample (branch mutants-b) ----
    all.extend(bucket::ENTRIES.iter());
    // ---- end of section mutants-b ----
    // ---- section: the colourer, a join (branch excorp) ----
    all.extend(join::ENTRIES.iter());
    // ---- end of section excorp ----
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mutant_has_its_own_name_and_an_explore_test() {
        let corpus = corpus();
        let mut names: Vec<&str> = corpus.iter().map(|entry| entry.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), corpus.len(), "a name is used twice");
        for entry in corpus {
            let (_, test) = entry.test.split_once("::").unwrap_or_default();
            assert!(test.contains("explore"), "{entry:?}");
        }
    }
}
