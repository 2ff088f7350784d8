//! The report renderings from a hand-built run: one pass, one fail, one skip.
//!
//! Set `PLIMSOLL_REPORT_PREVIEW=DIR` to also leave the rendered files in DIR for a look.

use std::path::Path;

use plimsoll_conformance::report::{self, html, json, junit, terminal};
use plimsoll_conformance::verdict::{CheckResult, Lane, LaneOutcome, Manifest, RunReport, Verdict};
use plimsoll_spec::{Adopted, ClauseId, Difference, Refused};
use serde_json::Value;

#[path = "reports/xml.rs"]
mod xml;
use xml::well_formed;

const FAIL_REASON: &str = "Retry-After 5 s is 400% off the p50 of 1.0 s";
const SKIP_REASON: &str = "needs --temp-dir";
const HOSTILE: &str = "<script>alert(1)</script>";

fn lane(
    label: &str,
    start: f64,
    run: Option<f64>,
    end: f64,
    outcome: LaneOutcome,
    status: Option<u16>,
) -> Lane {
    Lane {
        label: label.to_string(),
        request_id: Some(format!("req-{label}")),
        start_ms: start,
        run_start_ms: run,
        end_ms: end,
        outcome,
        status,
    }
}

fn sample() -> RunReport {
    let pass = CheckResult {
        id: "T1".into(),
        clause: "T1".into(),
        title: "At most 2 digitize jobs run at once".into(),
        expected: "at most 2 running".into(),
        observed: "2 running, 3 queued".into(),
        verdict: Verdict::Pass,
        duration_ms: 412.6,
        evidence: vec!["req-a ran 0–200 ms".into(), "req-c queued 200 ms".into()],
        trials_ms: vec![401.0, 412.6, 398.2],
        timeline: vec![
            lane("job 1", 0.0, Some(1.0), 200.0, LaneOutcome::Ok, Some(200)),
            lane("job 2", 2.0, Some(3.0), 210.0, LaneOutcome::Ok, Some(200)),
            lane("job 3", 4.0, Some(201.0), 400.0, LaneOutcome::Ok, Some(200)),
            lane("job 4", 5.0, Some(211.0), 405.0, LaneOutcome::Ok, Some(200)),
            lane("job 5", 6.0, None, 7.0, LaneOutcome::Refused, Some(503)),
        ],
    };
    let fail = CheckResult {
        id: "T3.retry-after".into(),
        clause: "T3".into(),
        title: "Retry-After tracks the median job time".into(),
        expected: "Retry-After within 20% of the observed p50 job time (1.0 s), rounded up to whole seconds"
            .into(),
        observed: format!("{HOSTILE} Retry-After: 5 s & rising"),
        verdict: Verdict::Fail(FAIL_REASON.into()),
        duration_ms: 1234.0,
        evidence: vec!["req-7 Retry-After: 5".into(), "x < y & z \"quoted\"".into()],
        trials_ms: vec![],
        timeline: vec![
            lane("<b>bold</b>", 0.0, Some(0.5), 900.0, LaneOutcome::Ok, Some(200)),
            lane("slow", 1.0, Some(300.0), 1200.0, LaneOutcome::TimedOut, Some(504)),
            lane("gone", 2.0, Some(350.0), 700.0, LaneOutcome::Cancelled, None),
            lane("broken", 3.0, Some(3.0), 50.0, LaneOutcome::Failed, Some(500)),
            lane("unknown queue", 4.0, None, 600.0, LaneOutcome::Ok, Some(200)),
            lane("refused", 5.0, None, 5.0, LaneOutcome::Refused, Some(503)),
        ],
    };
    let skip = CheckResult {
        id: "F4".into(),
        clause: "F4".into(),
        title: "Temp files are removed after failure".into(),
        expected: "no files left in the temp dir".into(),
        observed: String::new(),
        verdict: Verdict::Skip(SKIP_REASON.into()),
        duration_ms: 0.0,
        evidence: vec![],
        trials_ms: vec![],
        timeline: vec![],
    };
    RunReport {
        manifest: Manifest {
            tool: "plimsoll".into(),
            version: "0.1.0".into(),
            target: "http://127.0.0.1:8080/?a=1&b=<2>".into(),
            mode: "embedded".into(),
            contract_hash: "cbf29ce484222325".into(),
            contract_version: "1.0.0".into(),
            differences: vec![
                adopted().difference.to_string(),
                refused().difference.to_string(),
            ],
            adopted: vec![adopted()],
            refused: vec![refused()],
            claim_unreadable: None,
            scaled: true,
            strict: false,
            effective: serde_json::json!({"pools": {"digitize": {"workers": 2}}}),
            trials: 5,
            seed: 42,
            started_unix_ms: 1_767_225_600_000,
        },
        results: vec![pass, fail, skip],
    }
}

fn adopted() -> Adopted {
    Adopted {
        difference: Difference {
            path: "clauses.T2.value.digitize_queue_capacity".into(),
            ours: Some(0.into()),
            theirs: Some(2.into()),
        },
        clause: ClauseId::T2,
        env: "QUEUE_CAPACITY".into(),
    }
}

fn refused() -> Refused {
    Refused {
        difference: Difference {
            path: "clauses.B3.value.stop_within_ms".into(),
            ours: Some(1000.into()),
            theirs: Some(5000.into()),
        },
        reason: "not an overridable field: the contract's own value applies".into(),
    }
}

/// Leaves a copy in `$PLIMSOLL_REPORT_PREVIEW` when set, for eyes and screenshots.
fn preview(name: &str, text: &str) {
    if let Ok(dir) = std::env::var("PLIMSOLL_REPORT_PREVIEW") {
        std::fs::write(Path::new(&dir).join(name), text).unwrap();
    }
}

fn lanes_total(report: &RunReport) -> usize {
    report.results.iter().map(|r| r.timeline.len()).sum()
}

fn svgs(html: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find("<svg") {
        let end = rest[start..].find("</svg>").expect("closed svg") + start + "</svg>".len();
        out.push(&rest[start..end]);
        rest = &rest[end..];
    }
    out
}

fn attr_f64(tag_text: &str, attr: &str) -> f64 {
    let key = format!(" {attr}=\"");
    let at = tag_text.find(&key).expect("attribute present") + key.len();
    let end = tag_text[at..].find('"').expect("closing quote") + at;
    tag_text[at..end].parse().expect("a number")
}

#[test]
fn junit_is_valid_xml_with_three_cases_one_failure_one_skip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junit.xml");
    let run = sample();
    junit::write(&path, &run).unwrap();
    let xml = std::fs::read_to_string(&path).unwrap();
    preview("plimsoll-junit.xml", &xml);

    well_formed(&xml).unwrap_or_else(|e| panic!("not well-formed XML ({e}):\n{xml}"));
    // A second, independent parse: quick-junit's reader is built on quick-xml.
    let parsed = quick_junit::Report::deserialize_from_str(&xml).expect("parses as JUnit XML");

    assert_eq!(parsed.name.as_ref().map(|n| n.as_str()), Some("plimsoll"));
    assert_eq!(parsed.test_suites.len(), 1);
    let suite = &parsed.test_suites[0];
    assert_eq!(suite.name.as_str(), junit::SUITE_NAME);
    assert_eq!(suite.test_cases.len(), 3);
    assert_eq!((parsed.tests, parsed.failures, parsed.skipped), (3, 1, 1));
    assert_eq!(xml.matches("<testcase ").count(), 3);
    assert_eq!(xml.matches("<failure").count(), 1);
    assert_eq!(xml.matches("<skipped").count(), 1);

    let mut failures = 0;
    let mut skips = 0;
    for (case, result) in suite.test_cases.iter().zip(&run.results) {
        assert_eq!(
            case.name.as_str(),
            format!("{} {}", result.id, result.title)
        );
        assert_eq!(case.classname.as_ref().unwrap().as_str(), result.clause);
        let time = case.time.expect("time is set").as_secs_f64() * 1000.0;
        assert!(
            (time - result.duration_ms).abs() < 1.0,
            "{time} vs {}",
            result.duration_ms
        );
        match &case.status {
            quick_junit::TestCaseStatus::Success { .. } => {
                assert_eq!(result.verdict, Verdict::Pass)
            }
            quick_junit::TestCaseStatus::NonSuccess {
                kind: quick_junit::NonSuccessKind::Failure,
                message,
                description,
                ..
            } => {
                failures += 1;
                let message = message.as_ref().unwrap().as_str();
                assert!(message.contains(&result.expected), "{message}");
                // The hostile string survives escaping and unescaping intact.
                assert!(message.contains(&result.observed), "{message}");
                assert!(message.contains(FAIL_REASON), "{message}");
                let description = description.as_ref().unwrap().as_str();
                assert!(
                    description.contains("x < y & z \"quoted\""),
                    "{description}"
                );
            }
            quick_junit::TestCaseStatus::Skipped { message, .. } => {
                skips += 1;
                assert_eq!(message.as_ref().unwrap().as_str(), SKIP_REASON);
            }
            other => panic!("unexpected status {other:?}"),
        }
        let out = case.system_out.as_ref().expect("details in system-out");
        assert!(
            out.as_str()
                .contains(&format!("expected: {}", result.expected))
        );
    }
    assert_eq!((failures, skips), (1, 1));
    // The raw text never carries the hostile markup unescaped.
    assert!(!xml.contains(HOSTILE));
}

#[test]
fn json_round_trips_with_a_stable_field_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    let run = sample();
    json::write(&path, &run).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    preview("plimsoll-report.json", &text);
    let value: Value = serde_json::from_str(&text).expect("valid JSON");

    assert_eq!(value["results"][1]["verdict"], "fail");
    assert_eq!(value["results"][1]["reason"], FAIL_REASON);
    assert_eq!(value["results"][1]["observed"], run.results[1].observed);
    assert_eq!(value["results"][0]["verdict"], "pass");
    assert!(value["results"][0].get("reason").is_none());
    assert_eq!(value["results"][2]["verdict"], "skip");
    assert_eq!(value["results"][2]["reason"], SKIP_REASON);
    assert_eq!(value["results"][1]["timeline"][1]["outcome"], "timed_out");
    assert_eq!(
        value["results"][0]["timeline"][4]["run_start_ms"],
        Value::Null
    );
    assert_eq!(value["manifest"]["target"], run.manifest.target);
    assert_eq!(value["manifest"]["seed"], 42);
    // Adopted and refused differences, separately and structured, besides the combined list.
    assert_eq!(value["manifest"]["adopted"][0]["env"], "QUEUE_CAPACITY");
    assert_eq!(value["manifest"]["adopted"][0]["difference"]["theirs"], 2);
    assert_eq!(
        value["manifest"]["refused"][0]["difference"]["path"],
        "clauses.B3.value.stop_within_ms"
    );
    assert!(
        value["manifest"]["refused"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("not an overridable field")
    );
    assert_eq!(
        value["manifest"]["differences"].as_array().unwrap().len(),
        2
    );
    assert_eq!(
        value["manifest"]["effective"]["pools"]["digitize"]["workers"],
        2
    );

    // Declaration order, every time: diffs between two runs stay readable.
    let order = [
        "\"manifest\"",
        "\"tool\"",
        "\"target\"",
        "\"started_unix_ms\"",
        "\"results\"",
        "\"id\"",
        "\"clause\"",
        "\"title\"",
        "\"expected\"",
        "\"observed\"",
        "\"verdict\"",
        "\"duration_ms\"",
        "\"evidence\"",
        "\"timeline\"",
    ];
    // Manifest keys are looked for before `"results"`, result keys after it (the manifest's
    // adopted list has a `clause` of its own).
    let results_at = text.find("\"results\"").expect("results");
    let results_key = order.iter().position(|k| *k == "\"results\"").unwrap();
    let positions: Vec<usize> = order
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let from = if i > results_key { results_at } else { 0 };
            from + text[from..]
                .find(k)
                .unwrap_or_else(|| panic!("{k} missing"))
        })
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    assert!(text.contains("\n  \"manifest\": {"), "pretty-printed");
    assert_eq!(json::render(&run).unwrap(), text);
}

#[test]
fn html_is_self_contained_escaped_and_draws_one_timeline_per_check_with_lanes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    let run = sample();
    html::write(&path, &run).unwrap();
    let page = std::fs::read_to_string(&path).unwrap();
    preview("plimsoll-report.html", &page);

    // One picture per check that has lanes; the skip (no lanes) has none.
    let with_lanes = run
        .results
        .iter()
        .filter(|r| !r.timeline.is_empty())
        .count();
    assert_eq!(with_lanes, 2);
    let pictures = svgs(&page);
    assert_eq!(page.matches("<svg").count(), with_lanes);
    for svg in &pictures {
        well_formed(svg).unwrap_or_else(|e| panic!("SVG not well-formed ({e}):\n{svg}"));
    }
    assert_eq!(page.matches("<g class=\"lane ").count(), lanes_total(&run));
    assert_eq!(pictures[0].matches("<g class=\"lane ").count(), 5);
    assert_eq!(pictures[1].matches("<g class=\"lane ").count(), 6);
    // Queued segments where a lane waited; refusals as their own mark; outcome classes.
    assert_eq!(pictures[0].matches("class=\"queued\"").count(), 4);
    assert_eq!(page.matches("class=\"refused-bar\"").count(), 2);
    for class in [
        "lane ok",
        "lane refused",
        "lane timed-out",
        "lane cancelled",
        "lane failed",
    ] {
        assert!(page.contains(&format!("<g class=\"{class}\"")), "{class}");
    }
    assert!(
        pictures[1].contains("class=\"span\""),
        "a lane without run_start is one segment"
    );

    // Escaping: nothing from the run becomes markup.
    assert!(!page.to_ascii_lowercase().contains("<script"));
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt; Retry-After: 5 s &amp; rising"));
    assert!(page.contains("&lt;b&gt;bold&lt;/b&gt;"));
    assert!(!page.contains("<b>bold"));
    assert!(page.contains("http://127.0.0.1:8080/?a=1&amp;b=&lt;2&gt;"));
    assert!(page.contains("x &lt; y &amp; z &quot;quoted&quot;"));

    // Self-contained: inline style, nothing fetched.
    assert!(page.contains("<style>"));
    for external in ["<link", " src=", "href=\"http", "url(http", "@import"] {
        assert!(!page.contains(external), "{external}");
    }

    // Header and table.
    for fact in [
        "embedded",
        "1.0.0",
        "cbf29ce484222325",
        "clauses.T2.value.digitize_queue_capacity: 0 → 2 (QUEUE_CAPACITY)",
        "clauses.B3.value.stop_within_ms: 1000 → 5000 — not an overridable field",
        "2026-01-01 00:00:00 UTC",
    ] {
        assert!(page.contains(fact), "{fact}");
    }
    assert!(page.contains("<dt>Seed</dt><dd><code>42</code></dd>"));
    assert!(page.contains("<dt>Trials</dt><dd>5</dd>"));
    assert!(page.contains(
        "1 passed</span>, <span class=\"fail\">1 failed</span>, <span class=\"skip\">1 skipped"
    ));
    assert_eq!(page.matches("<tr class=\"pass\">").count(), 1);
    assert_eq!(page.matches("<tr class=\"fail\">").count(), 1);
    assert_eq!(page.matches("<tr class=\"skip\">").count(), 1);
    assert_eq!(page.matches("<section class=\"card check ").count(), 3);
    assert!(page.contains(FAIL_REASON));
    assert!(page.contains(SKIP_REASON));
}

#[test]
fn html_shows_control_characters_from_the_run_as_replacement_characters() {
    let mut run = sample();
    run.results[0].observed = "bell\x07 escape\x1b[2J nul\0".into();
    run.results[0].timeline[0].label = "lane\x0c".into();
    let page = html::render(&run);
    assert!(page.contains("bell\u{FFFD} escape\u{FFFD}[2J nul\u{FFFD}"));
    assert!(page.contains("lane\u{FFFD}"));
    assert!(
        !page
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
    );
    for svg in svgs(&page) {
        well_formed(svg).unwrap();
    }
}

#[test]
fn html_timeline_stays_readable_with_many_lanes() {
    let mut run = sample();
    let lanes: Vec<Lane> = (0..60)
        .map(|i| {
            let start = i as f64 * 3.0;
            let outcome = if i % 5 == 4 {
                LaneOutcome::Refused
            } else {
                LaneOutcome::Ok
            };
            let run_start = (outcome == LaneOutcome::Ok).then_some(start + (i / 2) as f64 * 40.0);
            let end = run_start.map_or(start + 1.0, |r| r + 120.0);
            lane(
                &format!("request {i}"),
                start,
                run_start,
                end,
                outcome,
                Some(if run_start.is_some() { 200 } else { 503 }),
            )
        })
        .collect();
    run.results[0].timeline = lanes;
    let page = html::render(&run);
    preview("plimsoll-report-many.html", &page);
    let picture = svgs(&page)[0];
    well_formed(picture).unwrap();
    assert_eq!(picture.matches("<g class=\"lane ").count(), 60);
    let tag = &picture[..picture.find('>').unwrap()];
    let height = attr_f64(tag, "height");
    // Lanes shrink rather than the picture growing without bound, but stay visible.
    assert!(height <= 720.0, "height {height}");
    assert!(height >= 60.0 * 5.0, "height {height}");
    // Labels thin out instead of overlapping: fewer label texts than lanes, but some.
    let labels = picture.matches("text-anchor=\"end\"").count();
    assert!((10..60).contains(&labels), "{labels} labels");
}

#[test]
fn summary_table_totals_reasons_and_fixed_width() {
    let run = sample();
    let table = terminal::summary_table(&run, false);
    assert!(table.contains("1 passed, 1 failed, 1 skipped"), "{table}");
    assert!(!table.contains('\x1b'));
    assert!(table.contains("Failures:"));
    assert!(table.contains(&format!(
        "✗ T3.retry-after [T3] Retry-After tracks the median job time: {FAIL_REASON}"
    )));
    assert!(table.contains(&format!(
        "F4 [F4] Temp files are removed after failure: {SKIP_REASON}"
    )));

    let lines: Vec<&str> = table.lines().take(2 + run.results.len()).collect();
    assert!(lines[0].starts_with("id"), "{}", lines[0]);
    assert!(lines[0].contains(" | clause") && lines[0].ends_with(" ms"));
    println!("{table}");
    let width = lines[0].chars().count();
    for line in &lines {
        assert_eq!(line.chars().count(), width, "misaligned: {line:?}");
    }
    // The long expected value is cut with an ellipsis, not wrapped.
    assert!(
        lines[3].contains("Retry-After within 20% of the…"),
        "{}",
        lines[3]
    );
    assert!(!table.contains("rounded up to whole seconds"));
    assert!(lines[2].contains("pass") && lines[3].contains("fail") && lines[4].contains("skip"));

    let coloured = terminal::summary_table(&run, true);
    assert!(coloured.contains("\x1b[31m1 passed, 1 failed, 1 skipped\x1b[0m"));
}

#[test]
fn a_not_applicable_pass_is_counted_and_explained() {
    let mut run = sample();
    run.results[0].observed = "not applicable: queue capacity is 0".into();
    assert!(run.results[0].not_applicable());
    assert_eq!((run.passed(), run.not_applicable()), (1, 1));
    let table = terminal::summary_table(&run, false);
    assert!(
        table.contains("1 passed (1 not applicable), 1 failed, 1 skipped"),
        "{table}"
    );
    assert!(table.contains("Not applicable (passed):"), "{table}");
    assert!(
        table.contains(
            "T1 [T1] At most 2 digitize jobs run at once: not applicable: queue capacity is 0"
        ),
        "{table}"
    );
}

#[test]
fn progress_lines_are_single_lines_with_symbol_observed_expected_and_duration() {
    let mut run = sample();
    let pass = terminal::progress_line(&run.results[0], false);
    assert_eq!(
        pass,
        "✓ T1 At most 2 digitize jobs run at once: observed 2 running, 3 queued (expected at most 2 running)  413 ms"
    );
    let fail = terminal::progress_line(&run.results[1], false);
    assert!(fail.starts_with("✗ T3.retry-after "), "{fail}");
    assert!(fail.ends_with("1.23 s"), "{fail}");
    let skip = terminal::progress_line(&run.results[2], false);
    assert!(skip.starts_with("– F4 "), "{skip}");
    assert!(skip.contains(&format!("skipped: {SKIP_REASON}")), "{skip}");

    run.results[0].observed = "two\nlines\x1b[2J".into();
    let flattened = terminal::progress_line(&run.results[0], false);
    assert!(
        !flattened.contains('\n') && !flattened.contains('\x1b'),
        "{flattened:?}"
    );
    assert!(
        flattened.contains("observed two lines [2J"),
        "{flattened:?}"
    );

    let coloured = terminal::progress_line(&sample().results[0], true);
    assert!(coloured.starts_with("\x1b[32m✓ T1\x1b[0m"), "{coloured:?}");
}

#[test]
fn progress_disabled_draws_nothing_and_does_not_panic() {
    let progress = terminal::Progress::new(3, false);
    assert!(!progress.is_active());
    progress.start("T1", "title");
    progress.finish_one("line");
    progress.finish();
}

#[test]
fn write_all_writes_only_the_requested_files() {
    let dir = tempfile::tempdir().unwrap();
    let (j, x, h) = (
        dir.path().join("r.json"),
        dir.path().join("r.xml"),
        dir.path().join("r.html"),
    );
    let run = sample();
    report::write_all(&run, Some(&j), None, Some(&h)).unwrap();
    assert!(j.exists() && h.exists() && !x.exists());
    report::write_all(&run, None, Some(&x), None).unwrap();
    assert!(std::fs::read_to_string(&x).unwrap().starts_with("<?xml"));

    // A bad path is reported, and the other files are still written.
    std::fs::remove_file(&j).unwrap();
    let bad = dir.path().join("missing-dir").join("r.xml");
    let err = report::write_all(&run, Some(&j), Some(&bad), None).unwrap_err();
    assert!(err.to_string().contains("missing-dir"), "{err}");
    assert!(j.exists());
}
