//! Whole terminal transcripts and headers as snapshots (in `snapshots/` beside this file), and
//! the promise that every line fits the width and a full run fits one screen.

use plimsoll_report::terminal;

use super::*;

/// The terminal report as a snapshot: durations (at the end of a line) keep their width but
/// lose their digits, ports become `PORT`, so a snapshot changes only when the layout or the
/// words do.
fn assert_terminal_snapshot(name: &str, text: &str) {
    preview(&format!("plimsoll-{name}.txt"), text);
    insta::with_settings!({
        filters => vec![
            (r"(?m)  \d{1,2}\.\d{1,2} s$", "  #.## s"),
            (r"(?m) in \d{1,2}\.\d{1,2} s$", " in #.## s"),
            (r"127\.0\.0\.1:\d+", "127.0.0.1:PORT"),
        ],
        prepend_module_to_snapshot => false,
    }, {
        insta::assert_snapshot!(name, text);
    });
}

/// Every line of a plain terminal report: at most `terminal::WIDTH` columns, one line each
/// (nothing a terminal would wrap), no escape codes.
fn assert_fits(text: &str) {
    for line in text.lines() {
        assert!(
            line.chars().count() <= terminal::WIDTH,
            "{} columns: {line:?}",
            line.chars().count()
        );
        assert!(!line.contains('\x1b'), "{line:?}");
    }
}

/// What a full embedded run looks like: the contract check and the eighteen that follow it,
/// all passing, with the observations of a real run.
fn full_run() -> RunReport {
    let rows: [(&str, &str, &str, f64); 18] = [
        (
            "contract",
            "Effective values match the contract",
            "adopted 4 override(s): DIGITIZE_TIMEOUT_MS=2000, EXPORT_TIMEOUT_MS=1000, UPLOAD_READ_TIMEOUT_MS=1000, QUEUE_CAPACITY=2; refused 0",
            0.02,
        ),
        (
            "T1",
            "Max concurrent digitize requests",
            "busy gauge max 4; 6 of 8 admitted; at most 4 running at once (Server-Timing)",
            1440.0,
        ),
        (
            "T2",
            "Queue ordering",
            "start order [0, 1] for arrival order [0, 1]",
            1621.0,
        ),
        (
            "T3",
            "Backpressure signal",
            "69 refusals: worst 21.0 ms, median 17.0 ms; Retry-After 2 s vs p50 wait 1.50 s",
            4070.0,
        ),
        (
            "B1",
            "Per-request timeout",
            "6 timeouts: worst answered at 2005 ms, median 2004 ms",
            5252.0,
        ),
        (
            "B2",
            "Per-request memory cap",
            "header-declared 100000x100000 image: 503 memory_cap_exceeded; alloc hook past the cap: 503 memory_cap_exceeded",
            225.0,
        ),
        (
            "B3",
            "Cancellation on client disconnect",
            "running: worker stopped after worst 16 ms, median 14 ms; queued request left the queue 3 ms after the disconnect",
            1434.0,
        ),
        (
            "F1",
            "Stage failure",
            "18 injected failures and panics answered; temp dir empty",
            585.0,
        ),
        (
            "F2",
            "Invalid input",
            "15 of 15 bad inputs answered with their code",
            137.0,
        ),
        (
            "F3",
            "Error logs",
            "499 JSON lines, 0 not JSON; 122 of 122 error replies of the run have exactly one valid line",
            753.0,
        ),
        (
            "R1",
            "Bounded relay pool",
            "busy gauge max 8 (limit 8) over 62 samples; queue depth max 4; 12/12 answered, the last after 805 ms",
            810.0,
        ),
        (
            "R2",
            "No head-of-line blocking",
            "fast answered after 0.4 ms, slow after 602 ms",
            605.0,
        ),
        (
            "R3",
            "Out-of-order completion",
            "8/8 responses, each id once (8 frames); 16 pairs completed out of send order",
            426.0,
        ),
        (
            "R4",
            "Overflow queues",
            "24/24 answered; busy gauge max 8 and 8 at once by timing (limit 8)",
            925.0,
        ),
        (
            "R5",
            "Frame atomicity",
            "5 concurrent responses in 14 frames (5 multi-frame), 14 messages, 0 interleavings",
            265.0,
        ),
        (
            "R6",
            "Reconnect",
            "reconnected in 0.8 ms; new requests answered after 444 ms; healthz 200",
            697.0,
        ),
        (
            "F4",
            "Request id",
            "178 of 178 responses carried X-Request-Id; 123 of 123 error bodies repeated it",
            4.6,
        ),
        (
            "API",
            "Responses match the OpenAPI document and problem schema",
            "0 violation(s) in 178 replies",
            12_345.0,
        ),
    ];
    let mut run = sample();
    run.manifest.target = "http://127.0.0.1:41733".into();
    run.manifest.adopted = [
        "pools.digitize.deadline_ms",
        "pools.export.deadline_ms",
        "upload.read_timeout_ms",
    ]
    .iter()
    .zip([2000, 1000, 1000])
    .map(|(field, ms)| Adopted {
        difference: Difference {
            path: (*field).to_owned(),
            ours: Some(60_000.into()),
            theirs: Some(ms.into()),
        },
        clause: ClauseId::B1,
        env: field.rsplit('.').next().unwrap_or_default().to_uppercase(),
    })
    .chain([adopted()])
    .collect();
    run.manifest.refused = Vec::new();
    run.results = rows
        .iter()
        .map(|(id, title, observed, ms)| CheckResult {
            id: check(id),
            title: (*title).into(),
            expected: "the contract's value".into(),
            observed: (*observed).into(),
            verdict: Verdict::Pass,
            duration_ms: *ms,
            evidence: vec![],
            trials_ms: vec![],
            timeline: vec![],
            figures: Vec::new(),
            deltas: Vec::new(),
            waiver: None,
        })
        .collect();
    run
}

#[test]
fn terminal_full_embedded_run_fits_one_screen() {
    let run = full_run();
    let text = terminal::transcript(&run, None, terminal::Style::plain());
    assert_fits(&text);
    let lines = text.lines().count();
    assert!(lines <= 50, "{lines} lines:\n{text}");
    // Each check once: no second table repeats them.
    for r in &run.results {
        let id = format!("✓ {} ", r.id);
        assert_eq!(text.matches(&id).count(), 1, "{id:?} in\n{text}");
    }
    assert_terminal_snapshot("terminal_full_embedded_run", &text);
}

#[test]
fn terminal_run_with_a_failure_a_skip_and_a_not_applicable_check() {
    let mut run = sample();
    run.results.push(CheckResult {
        id: check("T2"),
        title: "Queue ordering".into(),
        expected: "queued requests start in arrival order (FIFO)".into(),
        observed: "not applicable: the queue capacity is 0, so no request ever waits to be ordered"
            .into(),
        verdict: Verdict::NotApplicable(
            "the queue capacity is 0, so no request ever waits to be ordered".into(),
        ),
        duration_ms: 0.4,
        evidence: vec![],
        trials_ms: vec![],
        timeline: vec![],
        figures: Vec::new(),
        deltas: Vec::new(),
        waiver: None,
    });
    let html = Path::new("report.html");
    let text = terminal::transcript(&run, Some(html), terminal::Style::plain());
    assert_fits(&text);
    assert!(
        text.contains("1 passed, 1 not applicable, 1 failed, 1 skipped in"),
        "{text}"
    );
    // Reasons are wrapped, never cut: every word of the long ones is there.
    let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let summary = text.split("\nFailed:\n").nth(1).expect("a Failed section");
    for long in [&run.results[1].expected, &run.results[1].observed] {
        assert_eq!(
            words(summary)
                .windows(words(long).len())
                .filter(|w| *w == words(long).as_slice())
                .count(),
            1,
            "{long:?} in full in\n{summary}"
        );
    }
    assert!(summary.contains(FAIL_REASON) && summary.contains(SKIP_REASON));
    assert_terminal_snapshot("terminal_failure_skip_not_applicable", &text);
}

#[test]
fn terminal_header_embedded_and_external() {
    let mut embedded = full_run().manifest;
    embedded.trials = 5;
    let text = terminal::header(&embedded, terminal::Style::plain());
    assert!(
        text.starts_with("Checking the embedded reference server on 127.0.0.1:41733\n"),
        "{text}"
    );
    assert_terminal_snapshot("terminal_header_embedded", &text);

    let mut external = sample().manifest;
    external.mode = "external".into();
    external.target = "https://digitize.example.com:8443".into();
    external.strict = true;
    external.trials = 1;
    let text = terminal::header(&external, terminal::Style::plain());
    assert_fits(&text);
    assert!(
        text.contains("adopted from its claim: digitize queue 2"),
        "{text}"
    );
    assert!(text.contains("1 claimed value(s) refused"), "{text}");
    assert!(
        text.contains("1 trial per timing check, strict on"),
        "{text}"
    );
    assert_terminal_snapshot("terminal_header_external", &text);

    external.adopted.clear();
    external.refused.clear();
    let text = terminal::header(&external, terminal::Style::plain());
    assert!(
        text.contains("\n  judged by the contract's own values\n"),
        "{text}"
    );
}
