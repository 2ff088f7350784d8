//! The pieces a terminal line is made of, each on its own: adopted values in words, durations,
//! one finished check's line (cut to fit, flattened, coloured) and the spinner when it is off.

use plimsoll_report::terminal;
use serde_json::Value;

use super::*;

#[test]
fn adopted_values_read_as_words_with_units() {
    let words = |path: &str, theirs: Value| {
        terminal::adopted_words(&Adopted {
            difference: Difference {
                path: path.to_owned(),
                ours: Some(0.into()),
                theirs: Some(theirs),
            },
            clause: ClauseId::T1,
            env: String::new(),
        })
    };
    let cases: [(&str, Value, &str); 8] = [
        (
            "pools.digitize.deadline_ms",
            2000.into(),
            "digitize timeout 2 s",
        ),
        (
            "pools.export.deadline_ms",
            1500.into(),
            "export timeout 1.5 s",
        ),
        (
            "upload.read_timeout_ms",
            250.into(),
            "upload read timeout 250 ms",
        ),
        (
            "connections.head_timeout_ms",
            2000.into(),
            "head timeout 2 s",
        ),
        (
            "pools.digitize.queue.capacity",
            2.into(),
            "digitize queue 2",
        ),
        (
            "pools.export.memory_cap_mb",
            512.into(),
            "export memory cap 512 MB",
        ),
        ("clauses.F3.value.stack", true.into(), "stack on"),
        ("pools.relay.workers", 8.into(), "relay workers 8"),
    ];
    for (field, theirs, shown) in cases {
        assert_eq!(words(field, theirs), shown);
    }
}

#[test]
fn durations_are_seconds_everywhere_on_the_terminal() {
    let cases = [
        (0.0, "0.00 s"),
        (4.6, "0.00 s"),
        (412.6, "0.41 s"),
        (1234.0, "1.23 s"),
        (9994.0, "9.99 s"),
        (9996.0, "10.0 s"),
        (23_456.0, "23.5 s"),
        (f64::NAN, "?"),
        (-1.0, "?"),
    ];
    for (ms, shown) in cases {
        assert_eq!(terminal::format_duration(ms), shown, "{ms}");
    }
}

#[test]
fn progress_lines_fit_and_flatten_what_the_server_sent() {
    let mut run = sample();
    let style = terminal::Style::plain();
    let pass = terminal::progress_line(&run.results[0], style);
    assert!(
        pass.starts_with("✓ T1       At most 2 digitize jobs run at once: 2 running, 3 queued "),
        "{pass:?}"
    );
    assert!(pass.ends_with("  0.41 s"), "{pass:?}");
    assert_eq!(pass.chars().count(), terminal::WIDTH, "{pass:?}");
    let skip = terminal::progress_line(&run.results[2], style);
    assert!(skip.contains(&format!("skipped: {SKIP_REASON}")), "{skip}");

    run.results[0].observed = format!("two\nlines\x1b[2J {}", "x".repeat(300));
    let flattened = terminal::progress_line(&run.results[0], style);
    assert!(
        !flattened.contains('\n') && !flattened.contains('\x1b'),
        "{flattened:?}"
    );
    assert!(flattened.contains(": two lines [2J x"), "{flattened:?}");
    assert!(
        flattened.contains("x…   0.41 s"),
        "cut to fit: {flattened:?}"
    );
    assert_eq!(flattened.chars().count(), terminal::WIDTH);

    let narrow = terminal::Style {
        color: false,
        width: 60,
    };
    assert_eq!(
        terminal::progress_line(&run.results[0], narrow)
            .chars()
            .count(),
        60
    );

    let coloured = terminal::Style {
        color: true,
        width: terminal::WIDTH,
    };
    let line = terminal::progress_line(&sample().results[0], coloured);
    assert!(line.starts_with("\x1b[32m✓ T1\x1b[0m"), "{line:?}");
    let summary = terminal::summary(&sample(), None, coloured);
    assert!(
        summary.contains("\x1b[31m1 passed, 1 failed, 1 skipped in"),
        "{summary:?}"
    );
}

#[test]
fn progress_disabled_prints_plain_lines_and_does_not_panic() {
    let progress = terminal::Progress::new(3, false);
    assert!(!progress.is_active());
    progress.start("T1", "title");
    progress.line("line");
    progress.finish();
}
