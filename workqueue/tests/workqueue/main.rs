//! The workqueue's tests as one binary: the queue's rules one by one (`semantics`), the queue
//! against a simple model on random sequences (`model`, proptest), many producers and workers on
//! threads and tasks (`stress`), and the worker loop (`workers`).

mod model;
mod semantics;
mod stress;
mod workers;
