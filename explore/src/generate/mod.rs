//! Generated scenarios: sequences of spec changes drawn from a custom resource's schema, searched
//! with the same faults and oracles as a scenario written by hand (Acto's idea, SOSP 2023, the
//! explorer's way).
//!
//! A scenario written by hand tests the changes its author thought of. The schema knows more:
//! every field's bounds, enums, optional fields, list and map sizes. A [`Generator`] reads it
//! from the CustomResourceDefinition (the derive's `Kind::crd()`, or any CRD) and draws
//! [`Sequence`]s of edits to one object:
//!
//! - a create with every field at a typical value (its default, else the simplest admitted);
//! - each scalar set to its boundary values: an integer's minimum and maximum, one inside each,
//!   0 and ±1 where admitted; a string's empty, shortest and longest forms or each enum value;
//!   a boolean turned over;
//! - lists appended to, shortened, reversed, filled to `maxItems`, emptied (within
//!   `minItems`/`maxItems`); map keys added and removed; optional fields removed;
//! - the object deleted and re-created.
//!
//! Only values the schema admits as far as the generator can tell; a field it cannot vouch for
//! (a `pattern`, an unknown `format`, `int-or-string`) keeps its default and is never edited.
//! The server still validates (CEL rules, say): a refused step is counted, it does not fail the
//! run.
//!
//! ```text
//!  Generator::custom_resource::<Pool>()          schema.rs: Node tree of .spec
//!     │ .sequence(steps, seed)                   draw.rs: moves, seeded shuffle, the record
//!     ▼
//!  Sequence: create {..} / set /spec/replicas 0 / remove /spec/note / delete / create {..}
//!     │ Exploration::generated(generator, steps)  exploration.rs
//!     ▼
//!  per sequence: its oracles at the end of each prefix (fault-free), then the exploration's
//!  fault search over the whole: its oracles, and the end state of each faulty run against the
//!  fault-free run of the same sequence
//!     ▼ a failure
//!  shrink the sequence (drop edits, simpler values) and the plan ─▶ GeneratedFound,
//!  which replays word for word (Generated::replay)
//! ```
//!
//! Each module is a leaf or stands on the ones before it: `schema` (what the schema admits) and
//! `sequence` (edits as text and merge patches) know nothing else; `draw` makes a sequence of
//! them; `generator` reads the CRD and turns a sequence into a [`crate::Scenario`];
//! `exploration` searches and shrinks.

mod draw;
mod exploration;
mod generator;
mod schema;
mod sequence;

pub use exploration::{
    DEFAULT_SHRINK_RUNS, Generated, GeneratedFound, GeneratedReport, GeneratedSearched,
    SequenceReport,
};
pub use generator::{GENERATED, GenerateError, Generator};
pub use sequence::{Edit, Sequence, SequenceParseError};
