//! The blocking story: run one of the queue's futures to completion on the calling thread.
//!
//! The queue's waiting is written once, as futures (`get`, `shut_down_with_drain`). A thread that is
//! not async polls that same future here and parks between polls; the waker unparks it. No runtime is
//! needed, and there is no second, condvar-based implementation of waiting to keep in step.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

struct Unparker(Thread);

impl Wake for Unparker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

thread_local! {
    /// One waker per thread, made on first use: blocking calls allocate nothing.
    static THREAD_WAKER: Waker = Waker::from(Arc::new(Unparker(thread::current())));
}

/// Polls `future` on this thread until it completes, parking while it is pending.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    THREAD_WAKER.with(|waker| {
        let mut cx = Context::from_waker(waker);
        loop {
            match future.as_mut().poll(&mut cx) {
                Poll::Ready(output) => return output,
                // A spurious unpark only costs one more poll.
                Poll::Pending => thread::park(),
            }
        }
    })
}
