//! The HTML report: self-contained, everything from the run escaped, and a timeline picture per
//! check that stays readable however many lanes it has.

use plimsoll_report::html;

use super::*;
use crate::xml::well_formed;

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
        "pools.digitize.queue.capacity: 0 → 2 (QUEUE_CAPACITY)",
        "pools.digitize.cancellation.stop_within_ms: 1000 → 5000 — not an overridable field",
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
