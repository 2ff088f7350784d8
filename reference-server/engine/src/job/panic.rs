//! Panic capture: a panicking stage becomes a `stage_failed` answer with its message and
//! backtrace in the F3 log line, instead of text on stderr.

use std::backtrace::Backtrace;
use std::cell::{Cell, RefCell};
use std::sync::Once;

thread_local! {
    /// Set while a stage runs on this thread, so the hook knows the panic belongs to a job.
    static IN_JOB: Cell<bool> = const { Cell::new(false) };
    /// The message and backtrace of the last job panic on this thread.
    static CAPTURED: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

pub(super) fn with_panic_capture<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_JOB.with(|c| c.set(self.0));
        }
    }
    CAPTURED.with(|c| c.borrow_mut().take());
    let _reset = Reset(IN_JOB.with(|c| c.replace(true)));
    f()
}

pub(super) fn take_panic_capture() -> Option<(String, String)> {
    CAPTURED.with(|c| c.borrow_mut().take())
}

pub(super) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}

/// Installs (once) a panic hook that, for panics inside [`JobContext::run_stage`](super::JobContext::run_stage), records the
/// message and a forced backtrace for the job's error instead of printing to stderr (the server
/// logs it as one structured line, F3). Panics elsewhere go to the previous hook unchanged.
pub fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_JOB.with(Cell::get) {
                let mut message = panic_message(info.payload());
                if let Some(location) = info.location() {
                    message = format!("{message} at {location}");
                }
                let backtrace = Backtrace::force_capture().to_string();
                CAPTURED.with(|c| *c.borrow_mut() = Some((message, backtrace)));
            } else {
                previous(info);
            }
        }));
    });
}
