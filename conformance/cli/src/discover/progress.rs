//! Discover's progress on stderr: each [`Step`]'s line, and on an interactive stderr an
//! `indicatif` bar above which the lines scroll, showing the phase and about how long the rest
//! takes (as `check` and `load` show theirs). A bar in a log or a pipe is noise, so on any
//! other stderr the lines alone are written, plain.

use std::io::IsTerminal;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use plimsoll_conformance::discover::{Phase, Step};

/// How often the bar moves between two steps.
const TICK: Duration = Duration::from_millis(200);

/// Where the bar stands: the phase, and when the rest should be done.
struct Standing {
    phase: Phase,
    ends: Instant,
}

/// The bar and the thread that moves it between steps.
struct Drawn {
    bar: ProgressBar,
    /// None until the first step.
    standing: Arc<Mutex<Option<Standing>>>,
    stop: Sender<()>,
    ticker: JoinHandle<()>,
}

/// Discover's progress: [`Progress::step`] for each step, [`Progress::finish`] at the end.
pub(super) struct Progress {
    who: &'static str,
    drawn: Option<Drawn>,
}

impl Progress {
    /// Lines prefixed `who:`, with a bar only when stderr is a terminal.
    pub(super) fn new(who: &'static str) -> Progress {
        let drawn = std::io::stderr().is_terminal().then(|| draw(who));
        Progress { who, drawn }
    }

    /// Writes `step`'s line (above the bar when one is drawn) and moves the bar to its phase
    /// and time left.
    pub(super) fn step(&mut self, step: Step) {
        let line = format!("{}: {}", self.who, step.line);
        let Some(drawn) = &self.drawn else {
            eprintln!("{line}");
            return;
        };
        drawn.bar.println(line);
        if let Ok(mut standing) = drawn.standing.lock() {
            *standing = Some(Standing {
                phase: step.phase,
                ends: Instant::now() + step.left,
            });
        }
    }

    /// Clears the bar, so what follows starts on a clean line.
    pub(super) fn finish(mut self) {
        self.clear();
    }

    fn clear(&mut self) {
        if let Some(drawn) = self.drawn.take() {
            let _ = drawn.stop.send(());
            let _ = drawn.ticker.join();
            drawn.bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    /// An early return must not leave a half-drawn bar on the terminal.
    fn drop(&mut self) {
        self.clear();
    }
}

/// The bar, and a thread that moves it every [`TICK`] until told to stop: its length is the
/// time spent and the time left, its position the time spent, so it fills as the estimate
/// allows and never reaches the end before the measurement does.
fn draw(who: &'static str) -> Drawn {
    let bar = ProgressBar::with_draw_target(Some(1), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {prefix} [{bar:30}] {msg}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(who);
    let started = Instant::now();
    let standing = Arc::new(Mutex::new(None::<Standing>));
    let (stop, stopped) = mpsc::channel::<()>();
    let (moved, seen) = (bar.clone(), standing.clone());
    let ticker = std::thread::spawn(move || {
        loop {
            if let Ok(standing) = seen.lock()
                && let Some(standing) = standing.as_ref()
            {
                let now = Instant::now();
                let spent = now.duration_since(started);
                let left = standing.ends.saturating_duration_since(now);
                moved.set_length((spent + left).as_millis() as u64 + 1);
                moved.set_position(spent.as_millis() as u64);
                moved.set_message(format!(
                    "{} · {:.0} s spent, about {:.0} s left",
                    standing.phase.as_str(),
                    spent.as_secs_f64(),
                    left.as_secs_f64().ceil()
                ));
            }
            match stopped.recv_timeout(TICK) {
                Err(RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
            }
        }
    });
    Drawn {
        bar,
        standing,
        stop,
        ticker,
    }
}
