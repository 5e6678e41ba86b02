//! Property test: random sequences of add / add-with-priority / get / done / shutdown, run on the queue
//! and on a deliberately simple model of the rules, must agree on every `get` and on `len`.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use ferrokube_workqueue::WorkQueue;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add(u8, i32),
    Get,
    /// Done for the n-th (mod count) key being processed.
    Done(usize),
    ShutDown,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..6, prop_oneof![4 => Just(0i32), 1 => -2i32..3]).prop_map(|(k, p)| Op::Add(k, p)),
        5 => Just(Op::Get),
        4 => any::<usize>().prop_map(Op::Done),
        1 => Just(Op::ShutDown),
    ]
}

/// The rules, written as plainly as possible: linear scans, no cleverness.
#[derive(Default)]
struct Model {
    /// (key, priority, arrival order). Order is by priority, then arrival.
    queue: Vec<(u8, i32, u64)>,
    processing: Vec<u8>,
    /// Keys added while processing, with the highest priority they were added at.
    dirty_processing: Vec<(u8, i32)>,
    shut_down: bool,
    clock: u64,
}

impl Model {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn add(&mut self, key: u8, priority: i32) {
        if self.shut_down {
            return;
        }
        let now = self.tick();
        if let Some(entry) = self.queue.iter_mut().find(|e| e.0 == key) {
            if priority > entry.1 {
                *entry = (key, priority, now);
            }
        } else if self.processing.contains(&key) {
            match self.dirty_processing.iter_mut().find(|d| d.0 == key) {
                Some(d) => d.1 = d.1.max(priority),
                None => self.dirty_processing.push((key, priority)),
            }
        } else {
            self.queue.push((key, priority, now));
        }
    }

    fn get(&mut self) -> Poll<Option<u8>> {
        let best = self
            .queue
            .iter()
            .enumerate()
            .max_by_key(|(_, e)| (e.1, std::cmp::Reverse(e.2)))
            .map(|(i, _)| i);
        match best {
            Some(i) => {
                let (key, _, _) = self.queue.remove(i);
                self.processing.push(key);
                Poll::Ready(Some(key))
            }
            None if self.shut_down => Poll::Ready(None),
            None => Poll::Pending,
        }
    }

    fn done(&mut self, key: u8) {
        self.processing.retain(|&k| k != key);
        if let Some(i) = self.dirty_processing.iter().position(|d| d.0 == key) {
            let (key, priority) = self.dirty_processing.remove(i);
            let now = self.tick();
            self.queue.push((key, priority, now));
        }
    }
}

fn poll_get(queue: &WorkQueue<u8>) -> Poll<Option<u8>> {
    let mut get = pin!(queue.get());
    get.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn queue_agrees_with_the_model(ops in proptest::collection::vec(op(), 1..120)) {
        let queue: WorkQueue<u8> = WorkQueue::new();
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Add(k, p) => {
                    queue.add_with_priority(k, p);
                    model.add(k, p);
                }
                Op::Get => prop_assert_eq!(poll_get(&queue), model.get()),
                Op::Done(n) => {
                    if !model.processing.is_empty() {
                        let key = model.processing[n % model.processing.len()];
                        queue.done(&key);
                        model.done(key);
                    }
                }
                Op::ShutDown => {
                    queue.shut_down();
                    model.shut_down = true;
                }
            }
            prop_assert_eq!(queue.len(), model.queue.len());
            for k in 0..6u8 {
                prop_assert_eq!(queue.is_processing(&k), model.processing.contains(&k));
            }
        }
    }
}
