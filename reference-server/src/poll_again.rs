//! A future that wakes itself while it is being polled is polled again at once, instead of
//! going back through tokio's scheduler.
//!
//! hyper's body channel wakes its sender whenever the receiver takes a chunk, and the sender's
//! waker is the connection's own task: a handler that reads a request body (every `POST`)
//! wakes the task that is running it. tokio treats a task woken while it runs as one that
//! yielded: it goes to the back of the run queue and another worker is unparked to share it
//! (a futex wake, a context switch, often a steal to the other core). On the refusal path
//! that was one more scheduling round per request for a poll that finds nothing to do.
//! [`PollAgain`] catches the wake during the poll and polls once more itself; a future that
//! is still waking itself after that (hyper's own yield after 16 rounds, tokio's cooperative
//! budget) is handed to the scheduler as before: a busy connection still yields to the others,
//! after at most twice the work it did between yields before.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// How many times a future that woke itself is polled again within one poll of its task.
const AGAIN: usize = 1;

/// `inner`, polled again at once (up to [`AGAIN`] times) when it wakes itself during a poll.
pub(crate) struct PollAgain<F> {
    inner: F,
    catcher: Arc<Catcher>,
    waker: Waker,
}

impl<F: Future + Unpin> PollAgain<F> {
    /// Wraps `inner`; its waker is made once, so the wakers `inner` registers compare equal
    /// from poll to poll (no clone for a registration that did not change).
    pub(crate) fn new(inner: F) -> PollAgain<F> {
        let catcher = Arc::new(Catcher {
            state: AtomicU8::new(IDLE),
            task: AtomicWaker::new(),
        });
        PollAgain {
            inner,
            waker: Waker::from(catcher.clone()),
            catcher,
        }
    }

    /// The wrapped future, to act on between polls.
    pub(crate) fn get_mut(&mut self) -> &mut F {
        &mut self.inner
    }
}

impl<F: Future + Unpin> Future for PollAgain<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        this.catcher.task.register(cx.waker());
        let mut inner_cx = Context::from_waker(&this.waker);
        for _ in 0..=AGAIN {
            this.catcher.state.store(POLLING, Ordering::SeqCst);
            let polled = Pin::new(&mut this.inner).poll(&mut inner_cx);
            let woken = this.catcher.state.swap(IDLE, Ordering::SeqCst) == WOKEN;
            if polled.is_ready() || !woken {
                return polled;
            }
        }
        // Still waking itself: the scheduler decides when it runs again.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

const IDLE: u8 = 0;
const POLLING: u8 = 1;
const WOKEN: u8 = 2;

/// The inner future's waker: during a poll it only notes the wake; otherwise it wakes the
/// task.
struct Catcher {
    state: AtomicU8,
    task: AtomicWaker,
}

impl Wake for Catcher {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // A wake during the poll (from this thread or another) becomes the poll again; any
        // other wakes the task, which polls the inner future afresh.
        if let Err(IDLE) =
            self.state
                .compare_exchange(POLLING, WOKEN, Ordering::SeqCst, Ordering::SeqCst)
        {
            self.task.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// A task's waker that counts its wakes.
    #[derive(Default)]
    struct Task(AtomicUsize);

    impl Wake for Task {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A future that wakes itself during its first `wakes` polls, keeps the waker it was last
    /// given, and is ready at poll `ready_at` (never, if `None`).
    struct Script {
        polls: usize,
        wakes: usize,
        ready_at: Option<usize>,
        waker: Arc<Mutex<Option<Waker>>>,
    }

    impl Script {
        fn new(wakes: usize, ready_at: Option<usize>) -> Script {
            Script {
                polls: 0,
                wakes,
                ready_at,
                waker: Arc::default(),
            }
        }
    }

    impl Future for Script {
        type Output = ();

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls += 1;
            *self.waker.lock().unwrap() = Some(cx.waker().clone());
            if self.ready_at == Some(self.polls) {
                return Poll::Ready(());
            }
            if self.polls <= self.wakes {
                cx.waker().wake_by_ref();
            }
            Poll::Pending
        }
    }

    fn poll_once<F: Future + Unpin>(
        future: &mut PollAgain<F>,
        task: &Arc<Task>,
    ) -> Poll<F::Output> {
        let waker = Waker::from(task.clone());
        Pin::new(future).poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn a_future_that_wakes_itself_is_polled_again_without_its_task_woken() {
        let task = Arc::new(Task::default());
        let mut future = PollAgain::new(Script::new(1, Some(2)));
        assert!(poll_once(&mut future, &task).is_ready());
        assert_eq!(future.get_mut().polls, 2);
        assert_eq!(task.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn one_still_waking_itself_goes_back_to_the_scheduler() {
        let task = Arc::new(Task::default());
        let mut future = PollAgain::new(Script::new(usize::MAX, None));
        assert!(poll_once(&mut future, &task).is_pending());
        assert_eq!(future.get_mut().polls, 1 + AGAIN);
        assert_eq!(task.0.load(Ordering::SeqCst), 1, "its task is woken once");
    }

    #[test]
    fn a_wake_between_polls_wakes_the_task_from_any_thread() {
        let task = Arc::new(Task::default());
        let mut future = PollAgain::new(Script::new(0, None));
        assert!(poll_once(&mut future, &task).is_pending());
        assert_eq!(future.get_mut().polls, 1, "no wake, no second poll");
        assert_eq!(task.0.load(Ordering::SeqCst), 0);
        let kept = future.get_mut().waker.clone();
        std::thread::spawn(move || kept.lock().unwrap().take().unwrap().wake())
            .join()
            .unwrap();
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
        // Polled again, it registers the task afresh: the next wake reaches it too.
        assert!(poll_once(&mut future, &task).is_pending());
        future
            .get_mut()
            .waker
            .lock()
            .unwrap()
            .take()
            .unwrap()
            .wake();
        assert_eq!(task.0.load(Ordering::SeqCst), 2);
    }
}
