//! The run-wide charts of the HTML report: one figure per chart, one `<polyline>` per series
//! it names, its axis labels, the fault's stretch shaded and the prediction's band when the
//! run had them, the baseline's figures as reference lines; and a run that sent nothing (or
//! kept no series) renders without a chart and without a panic.

use plimsoll_conformance::verdict::figure::{Delta, Unit};
use plimsoll_conformance::verdict::series::{Band, Gauge, Limit, RunSeries, Sent, Span};
use plimsoll_report::html;

use super::*;
use crate::xml::well_formed;

/// The figures of the page: each one's `data-series` names and its markup.
fn figures(page: &str) -> Vec<(Vec<String>, &str)> {
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(start) = rest.find("<figure class=\"chart\"") {
        let end = rest[start..].find("</figure>").expect("closed figure") + start;
        let fig = &rest[start..end];
        let key = "data-series=\"";
        let at = fig.find(key).expect("data-series") + key.len();
        let names = &fig[at..at + fig[at..].find('"').unwrap()];
        out.push((
            names.split('|').map(str::to_owned).collect(),
            &rest[start..end],
        ));
        rest = &rest[end..];
    }
    out
}

fn svg_of(figure: &str) -> &str {
    let start = figure.find("<svg").expect("a picture");
    &figure[start..figure.find("</svg>").expect("closed svg") + "</svg>".len()]
}

/// A load-like run: 8 s of requests, every fifth refused, a fault, gauges, a predicted band
/// and a baseline figure of each unit charted.
fn charted() -> RunReport {
    let mut run = sample();
    let sent: Vec<Sent> = (0..400)
        .map(|i| {
            let at = f64::from(i) * 20.0;
            let refused = i % 5 == 0;
            Sent {
                sent_ms: at,
                end_ms: at
                    + if refused {
                        3.0
                    } else {
                        120.0 + f64::from(i % 7) * 10.0
                    },
                answered: true,
                ok: !refused,
                refused,
            }
        })
        .collect();
    let limits = vec![
        Limit {
            label: "workers (2)".into(),
            value: 2.0,
        },
        Limit {
            label: "workers + queue (4)".into(),
            value: 4.0,
        },
    ];
    let warm = Span {
        label: "warm-up".into(),
        from_ms: 0.0,
        to_ms: 1000.0,
    };
    let mut series = RunSeries::new(vec![("digitize".into(), limits, sent)], vec![warm]);
    series.fault = Some(Span {
        label: "latency:latency=50".into(),
        from_ms: 0.0,
        to_ms: series.end_ms,
    });
    let pool = &mut series.pools[0];
    pool.predicted_refused = Some(Band {
        predicted: 0.2,
        low: 0.15,
        high: 0.25,
        from_ms: 1000.0,
        to_ms: 8000.0,
    });
    pool.gauges = (0..80)
        .map(|i| Gauge {
            at_ms: f64::from(i) * 100.0,
            busy: Some(2.0),
            queued: Some(f64::from(i % 3)),
        })
        .collect();
    run.series = Some(series);
    run.results[0].deltas = vec![
        Delta {
            figure: "goodput".into(),
            unit: Unit::PerSecond,
            baseline: 40.0,
            current: 39.0,
            threshold: 0.1,
            regressed: false,
        },
        Delta {
            figure: "latency p99".into(),
            unit: Unit::Ms,
            baseline: 150.0,
            current: 160.0,
            threshold: 0.1,
            regressed: false,
        },
    ];
    run
}

#[test]
fn html_charts_draw_one_polyline_per_series_with_axes_fault_band_and_baseline() {
    let run = charted();
    let page = html::render(&run);
    preview("plimsoll-report-charts.html", &page);
    let figures = figures(&page);
    assert_eq!(figures.len(), 4, "four charts for the one pool");
    let titles = [
        "Attempts, answers and refusals per second",
        "Refused fraction",
        "Latency of the successful answers",
        "In flight against the limit",
    ];
    for ((names, figure), title) in figures.iter().zip(titles) {
        let svg = svg_of(figure);
        well_formed(svg).unwrap_or_else(|e| panic!("{title}: SVG not well-formed ({e})"));
        assert!(svg.contains(title), "{title}");
        assert!(
            svg.contains("time since the run started (s)"),
            "{title}: x axis"
        );
        // Every polyline but the axes' (their own colour) is a series.
        let (axes, lines): (Vec<&str>, Vec<&str>) = svg
            .split("<polyline")
            .skip(1)
            .map(|p| &p[..p.find('>').expect("a closed tag")])
            .partition(|tag| tag.contains("stroke=\"#444C56\""));
        assert!(!axes.is_empty(), "{title}: the axes");
        assert_eq!(
            lines.len(),
            names.len(),
            "{title}: one line per series {names:?}"
        );
        for name in names {
            let escaped = name.replace('&', "&amp;").replace('<', "&lt;");
            assert!(figure.contains(&escaped), "{title}: {name} in the key");
        }
        // The fault's stretch, shaded on every chart and named in its key.
        assert!(figure.contains("fault latency:latency=50"), "{title}");
        assert!(
            svg.contains("opacity=\"0.08\" fill=\"#D62828\""),
            "{title}: the fault shaded"
        );
    }
    let names = |i: usize| figures[i].0.join("|");
    assert_eq!(
        names(0),
        "attempts sent /s|answers received /s|refusals /s (by send time)|baseline T1 goodput: 40.00/s"
    );
    assert!(names(1).contains("predicted 20.0 %"));
    assert!(names(1).contains("refused fraction since the warm-up"));
    assert!(figures[1].1.contains("predicted band 15.0–25.0 %"));
    assert!(svg_of(figures[1].1).contains("%"), "a percent axis");
    assert_eq!(names(2), "p99|p90|p50|baseline T1 latency p99: 150.0 ms");
    assert!(
        svg_of(figures[2].1).contains(">\nms\n</text>"),
        "the y axis says ms"
    );
    assert!(names(3).contains("busy (the target's gauge)"));
    assert!(names(3).contains("workers + queue (4)"));
    assert!(
        svg_of(figures[0].1).contains("warm-up"),
        "the phase is named"
    );
    assert!(
        page.contains("reference lines"),
        "the baseline's figures are said to be summaries"
    );
}

/// A baseline report's series (a report of this version keeps one) is drawn beside the run's:
/// one more line on each chart, named as the baseline run's.
#[test]
fn html_charts_draw_the_baseline_runs_series_beside_this_one() {
    let mut run = charted();
    let series = run.series.as_mut().unwrap();
    series.baseline = Some(Box::new(series.clone()));
    let page = html::render(&run);
    let figures = figures(&page);
    let before = [
        "baseline run: attempts sent /s",
        "baseline run: refused fraction since the warm-up",
        "baseline run: p99",
        "baseline run: in flight",
    ];
    for ((names, figure), name) in figures.iter().zip(before) {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
        let lines = svg_of(figure)
            .split("<polyline")
            .skip(1)
            .filter(|p| !p[..p.find('>').unwrap()].contains("#444C56"))
            .count();
        assert_eq!(lines, names.len(), "{names:?}");
    }
    assert!(page.contains("the --baseline run's own series"));
}

#[test]
fn html_renders_a_run_that_sent_nothing_and_one_without_series() {
    let mut run = sample();
    run.results.clear();
    run.series = Some(RunSeries::new(
        vec![("digitize".into(), Vec::new(), Vec::new())],
        Vec::new(),
    ));
    let page = html::render(&run);
    assert!(page.contains("No request was sent: nothing to chart."));
    assert!(figures(&page).is_empty());

    run.series = None;
    let page = html::render(&run);
    assert!(!page.contains("The run over time"));

    // One request that never ended, at time zero: a run of zero length still draws.
    run.series = Some(RunSeries::new(
        vec![(
            "digitize".into(),
            Vec::new(),
            vec![Sent {
                sent_ms: 0.0,
                end_ms: f64::NAN,
                answered: false,
                ok: false,
                refused: false,
            }],
        )],
        Vec::new(),
    ));
    let page = html::render(&run);
    assert_eq!(figures(&page).len(), 4);
}
