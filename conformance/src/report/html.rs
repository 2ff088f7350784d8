//! `--html FILE`: one self-contained page (inline CSS and SVG, no script, no external assets)
//! so it can be attached to a CI run or mailed and still open anywhere.
//!
//! Every check gets a timeline picture of its requests: one lane per request over time, the
//! wait in the queue hatched, the run solid, coloured by outcome. That picture is what makes
//! a FIFO or refusal verdict believable at a glance.

use std::fmt::Write as _;
use std::path::Path;

use super::format_ms;
use crate::verdict::{CheckResult, Lane, LaneOutcome, RunReport, Verdict};

/// Escapes text for HTML content and quoted attributes (also valid inside inline SVG).
///
/// Everything shown comes from the server under test or from the command line, so all of it
/// goes through here.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters are not allowed in HTML text; show them as U+FFFD.
            c if c.is_control() && !matches!(c, '\n' | '\t' | '\r') => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Escaped text, or a muted dash for an empty value (a skipped check observed nothing).
fn or_dash(text: &str) -> String {
    if text.trim().is_empty() {
        "<span class=\"muted\">—</span>".to_string()
    } else {
        escape(text)
    }
}

/// An `id` attribute for a check: ids like `T3.retry-after` must still make a valid fragment.
fn anchor(index: usize, id: &str) -> String {
    let slug: String = id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("check-{index}-{slug}")
}

fn outcome_colour(outcome: LaneOutcome) -> &'static str {
    match outcome {
        LaneOutcome::Ok => "#2b9348",
        LaneOutcome::Refused => "#f08c00",
        LaneOutcome::TimedOut => "#d62828",
        LaneOutcome::Cancelled => "#8d949e",
        LaneOutcome::Failed => "#7b2cbf",
    }
}

fn outcome_label(outcome: LaneOutcome) -> &'static str {
    match outcome {
        LaneOutcome::Ok => "ok",
        LaneOutcome::Refused => "refused",
        LaneOutcome::TimedOut => "timed out",
        LaneOutcome::Cancelled => "cancelled",
        LaneOutcome::Failed => "failed",
    }
}

fn outcome_class(outcome: LaneOutcome) -> &'static str {
    match outcome {
        LaneOutcome::Ok => "ok",
        LaneOutcome::Refused => "refused",
        LaneOutcome::TimedOut => "timed-out",
        LaneOutcome::Cancelled => "cancelled",
        LaneOutcome::Failed => "failed",
    }
}

/// `YYYY-MM-DD HH:MM:SS UTC` from Unix milliseconds (civil-from-days; no date crate needed).
fn utc_timestamp(unix_ms: u128) -> String {
    let secs = (unix_ms / 1000) as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

const STYLE: &str = r#"
:root { --pass:#2b9348; --fail:#d62828; --skip:#b08900; --ink:#1d232b; --muted:#5c6672; --line:#d9dee4; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
       margin: 0; background: #f6f7f9; }
main { max-width: 1180px; margin: 0 auto; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 0 0 10px; display: flex; gap: 10px; align-items: center; flex-wrap: wrap; }
h3 { font-size: 13px; margin: 14px 0 6px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 16px 18px; margin: 0 0 18px; }
.totals { font-size: 16px; font-weight: 600; margin: 6px 0 14px; }
.totals .pass { color: var(--pass); } .totals .fail { color: var(--fail); } .totals .skip { color: var(--skip); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
dl.facts ul { margin: 0; padding-left: 18px; }
table.verdicts { width: 100%; border-collapse: collapse; background: #fff; }
table.verdicts th, table.verdicts td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line);
       vertical-align: top; }
table.verdicts th { background: #eef1f4; font-weight: 600; white-space: nowrap; }
table.verdicts td.key { white-space: nowrap; }
table.verdicts td.text { overflow-wrap: anywhere; min-width: 12em; }
table.verdicts td.num { text-align: right; white-space: nowrap; }
tr.pass td:first-child { border-left: 4px solid var(--pass); }
tr.fail td:first-child { border-left: 4px solid var(--fail); }
tr.skip td:first-child { border-left: 4px solid var(--skip); }
tr.fail { background: #fdf1f1; } tr.skip { background: #fdf9ec; }
.badge { display: inline-block; white-space: nowrap; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 700;
         color: #fff; text-transform: uppercase; letter-spacing: .03em; }
.badge.pass { background: var(--pass); } .badge.fail { background: var(--fail); } .badge.skip { background: var(--skip); }
section.check.pass { border-left: 5px solid var(--pass); }
section.check.fail { border-left: 5px solid var(--fail); }
section.check.skip { border-left: 5px solid var(--skip); }
.reason { font-weight: 600; }
section.check.fail .reason { color: var(--fail); }
ul.evidence { margin: 0; padding-left: 18px; }
ul.evidence li { overflow-wrap: anywhere; }
svg.timeline { display: block; max-width: 100%; height: auto; margin-top: 8px; }
svg.timeline text { font-family: system-ui, sans-serif; fill: var(--ink); }
svg.timeline text.muted { fill: var(--muted); }
pre { background: #f3f4f6; padding: 8px 10px; border-radius: 6px; overflow-x: auto; margin: 4px 0 0; }
details summary { cursor: pointer; color: var(--muted); }
a { color: inherit; }
.muted { color: var(--muted); }
"#;

/// The whole page as a string.
pub fn render(report: &RunReport) -> String {
    let m = &report.manifest;
    let mut out = String::with_capacity(16 * 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(out, "<title>Plimsoll check: {}</title>", escape(&m.target));
    let _ = writeln!(out, "<style>{STYLE}</style>\n</head>\n<body>\n<main>");

    // Header: how the run was made.
    out.push_str("<header class=\"card\">\n<h1>Plimsoll conformance report</h1>\n");
    let _ = writeln!(
        out,
        "<p class=\"totals\"><span class=\"pass\">{} passed</span>, <span class=\"fail\">{} failed</span>, <span class=\"skip\">{} skipped</span></p>",
        report.passed(),
        report.failed(),
        report.skipped()
    );
    out.push_str("<dl class=\"facts\">\n");
    let mut fact = |name: &str, value_html: String| {
        let _ = writeln!(out, "<dt>{name}</dt><dd>{value_html}</dd>");
    };
    fact("Target", format!("<code>{}</code>", escape(&m.target)));
    fact("Mode", escape(&m.mode));
    fact(
        "Contract",
        format!(
            "version {} · hash <code>{}</code>",
            escape(&m.contract_version),
            escape(&m.contract_hash)
        ),
    );
    let differences = if m.differences.is_empty() {
        "none".to_string()
    } else {
        let items: String = m
            .differences
            .iter()
            .map(|d| format!("<li><code>{}</code></li>", escape(d)))
            .collect();
        format!("<ul>{items}</ul>")
    };
    fact(
        "Scaled",
        if m.scaled {
            "yes: differences from the contract were allowed".to_string()
        } else {
            "no".to_string()
        },
    );
    fact("Differences", differences);
    fact("Trials", m.trials.to_string());
    fact("Seed", format!("<code>{}</code>", m.seed));
    fact(
        "Tool",
        format!("{} {}", escape(&m.tool), escape(&m.version)),
    );
    fact("Started", utc_timestamp(m.started_unix_ms));
    if !m.effective.is_null() {
        let effective = serde_json::to_string_pretty(&m.effective).unwrap_or_default();
        fact(
            "Effective values",
            format!(
                "<details><summary>show</summary><pre>{}</pre></details>",
                escape(&effective)
            ),
        );
    }
    out.push_str("</dl>\n</header>\n");

    // The verdict table.
    out.push_str("<section class=\"card\">\n<h2>Verdicts</h2>\n<table class=\"verdicts\">\n");
    out.push_str("<thead><tr><th>Id</th><th>Clause</th><th>Check</th><th>Verdict</th><th>Expected</th><th>Observed</th><th>Duration</th></tr></thead>\n<tbody>\n");
    for (i, r) in report.results.iter().enumerate() {
        let label = r.verdict.label();
        let _ = writeln!(
            out,
            "<tr class=\"{label}\"><td class=\"key\"><a href=\"#{}\"><code>{}</code></a></td><td class=\"key\">{}</td><td>{}</td><td><span class=\"badge {label}\">{label}</span></td><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"num\">{}</td></tr>",
            anchor(i, &r.id),
            escape(&r.id),
            escape(&r.clause),
            escape(&r.title),
            or_dash(&r.expected),
            or_dash(&r.observed),
            escape(&format_ms(r.duration_ms)),
        );
    }
    out.push_str("</tbody>\n</table>\n</section>\n");

    for (i, r) in report.results.iter().enumerate() {
        check_section(&mut out, i, r);
    }

    out.push_str("</main>\n</body>\n</html>\n");
    out
}

fn check_section(out: &mut String, index: usize, r: &CheckResult) {
    let label = r.verdict.label();
    let _ = writeln!(
        out,
        "<section class=\"card check {label}\" id=\"{}\">",
        anchor(index, &r.id)
    );
    let _ = writeln!(
        out,
        "<h2><span class=\"badge {label}\">{label}</span> <code>{}</code> {}</h2>",
        escape(&r.id),
        escape(&r.title)
    );
    out.push_str("<dl class=\"facts\">\n");
    let _ = writeln!(out, "<dt>Clause</dt><dd>{}</dd>", escape(&r.clause));
    let _ = writeln!(out, "<dt>Expected</dt><dd>{}</dd>", or_dash(&r.expected));
    let _ = writeln!(out, "<dt>Observed</dt><dd>{}</dd>", or_dash(&r.observed));
    match &r.verdict {
        Verdict::Pass => {}
        Verdict::Fail(why) | Verdict::Skip(why) => {
            let _ = writeln!(
                out,
                "<dt>Reason</dt><dd class=\"reason\">{}</dd>",
                escape(why)
            );
        }
    }
    let _ = writeln!(
        out,
        "<dt>Duration</dt><dd>{}</dd>",
        escape(&format_ms(r.duration_ms))
    );
    if !r.trials_ms.is_empty() {
        let trials: Vec<String> = r.trials_ms.iter().map(|t| format!("{t:.1}")).collect();
        let _ = writeln!(
            out,
            "<dt>Trials (ms)</dt><dd class=\"mono\">{}</dd>",
            escape(&trials.join(", "))
        );
    }
    out.push_str("</dl>\n");

    if !r.timeline.is_empty() {
        let _ = writeln!(out, "<h3>Timeline ({} requests)</h3>", r.timeline.len());
        timeline_svg(out, index, &r.timeline);
    }

    if !r.evidence.is_empty() {
        out.push_str("<h3>Evidence</h3>\n<ul class=\"evidence\">\n");
        for line in &r.evidence {
            let _ = writeln!(out, "<li><code>{}</code></li>", escape(line));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
}

/// A tick spacing of 1, 2 or 5 × 10ⁿ giving about `target` ticks up to `max`.
fn nice_step(max: f64, target: f64) -> f64 {
    let raw = max / target;
    let magnitude = 10f64.powf(raw.log10().floor());
    let norm = raw / magnitude;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

/// A lane time as a usable number: NaN, infinities and negatives (clock hiccups) become 0.
fn clean(ms: f64) -> f64 {
    if ms.is_finite() && ms > 0.0 { ms } else { 0.0 }
}

// Geometry of the picture, in SVG user units (≈ CSS px at full width).
const SVG_W: f64 = 1100.0;
const LABEL_W: f64 = 190.0;
const PLOT_X0: f64 = LABEL_W + 12.0;
const PLOT_X1: f64 = SVG_W - 56.0;
const LEGEND_H: f64 = 30.0;
/// The lane area never grows past this, so 200 requests still fit a screen; lanes get
/// thinner instead, down to a floor where bars stay visible.
const MAX_LANES_H: f64 = 620.0;
const MAX_LANE_H: f64 = 24.0;
const MIN_LANE_H: f64 = 5.0;
/// The smallest font that stays legible; lanes thinner than this get a label every k lanes.
const MIN_LABEL_PX: f64 = 9.0;

fn timeline_svg(out: &mut String, index: usize, lanes: &[Lane]) {
    let n = lanes.len();
    let lane_h = (MAX_LANES_H / n as f64).clamp(MIN_LANE_H, MAX_LANE_H);
    let bar_h = (lane_h * 0.62).max(3.0);
    let top = LEGEND_H + 8.0;
    let lanes_h = lane_h * n as f64;
    let axis_y = top + lanes_h;
    let height = axis_y + 42.0;
    let font = (lane_h * 0.72).clamp(MIN_LABEL_PX, 12.0);
    let label_every = (MIN_LABEL_PX * 1.15 / lane_h).ceil().max(1.0) as usize;

    let t_max = lanes
        .iter()
        .flat_map(|l| {
            [
                clean(l.start_ms),
                clean(l.end_ms),
                l.run_start_ms.map_or(0.0, clean),
            ]
        })
        .fold(0.0f64, f64::max)
        .max(1.0);
    let step = nice_step(t_max, 8.0);
    let axis_max = (t_max / step).ceil() * step;
    let x = |t: f64| PLOT_X0 + clean(t).min(axis_max) / axis_max * (PLOT_X1 - PLOT_X0);
    let hatch = format!("queued-{index}");

    let _ = writeln!(
        out,
        "<svg class=\"timeline\" viewBox=\"0 0 {SVG_W} {height:.0}\" width=\"{SVG_W}\" height=\"{height:.0}\" role=\"img\" aria-label=\"Timeline of {n} requests\">"
    );
    let _ = writeln!(
        out,
        "<defs><pattern id=\"{hatch}\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#e9edf2\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#7d8896\" stroke-width=\"2.2\"/></pattern></defs>"
    );

    legend(out, &hatch);

    // Lane backgrounds first, so bars and grid lines sit on top of them.
    for i in (0..n).step_by(2) {
        let _ = writeln!(
            out,
            "<rect x=\"{PLOT_X0}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{lane_h:.2}\" fill=\"#f4f6f8\"/>",
            top + i as f64 * lane_h,
            PLOT_X1 - PLOT_X0
        );
    }

    // Axis with ticks and vertical grid lines.
    let ticks = (axis_max / step).round() as usize;
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    for k in 0..=ticks {
        let t = step * k as f64;
        let tx = x(t);
        let _ = writeln!(
            out,
            "<line x1=\"{tx:.2}\" y1=\"{top:.2}\" x2=\"{tx:.2}\" y2=\"{axis_y:.2}\" stroke=\"#dde2e8\" stroke-width=\"1\"/><line x1=\"{tx:.2}\" y1=\"{axis_y:.2}\" x2=\"{tx:.2}\" y2=\"{:.2}\" stroke=\"#5c6672\"/><text x=\"{tx:.2}\" y=\"{:.2}\" font-size=\"11\" text-anchor=\"middle\" class=\"muted\">{t:.decimals$}</text>",
            axis_y + 5.0,
            axis_y + 17.0
        );
    }
    let _ = writeln!(
        out,
        "<line x1=\"{PLOT_X0}\" y1=\"{axis_y:.2}\" x2=\"{PLOT_X1}\" y2=\"{axis_y:.2}\" stroke=\"#5c6672\"/><text x=\"{:.2}\" y=\"{:.2}\" font-size=\"11\" text-anchor=\"middle\" class=\"muted\">time since the check started (ms)</text>",
        (PLOT_X0 + PLOT_X1) / 2.0,
        axis_y + 34.0
    );

    for (i, lane) in lanes.iter().enumerate() {
        let y0 = top + i as f64 * lane_h;
        let mid = y0 + lane_h / 2.0;
        let bar_y = mid - bar_h / 2.0;
        let colour = outcome_colour(lane.outcome);
        let start = clean(lane.start_ms);
        let end = clean(lane.end_ms).max(start);
        let (xs, xe) = (x(start), x(end));

        let mut tip = format!("{}: {}", lane.label, outcome_label(lane.outcome));
        if let Some(status) = lane.status {
            let _ = write!(tip, " ({status})");
        }
        if let Some(id) = &lane.request_id {
            let _ = write!(tip, "\nrequest id {id}");
        }
        let _ = write!(tip, "\nsent {start:.1} ms");
        if let Some(run) = lane.run_start_ms {
            let _ = write!(tip, ", started {:.1} ms", clean(run));
        }
        let _ = write!(tip, ", ended {end:.1} ms");

        let _ = write!(
            out,
            "<g class=\"lane {}\"><title>{}</title>",
            outcome_class(lane.outcome),
            escape(&tip)
        );
        if i % label_every == 0 {
            let label: String = if lane.label.chars().count() > 28 {
                lane.label.chars().take(27).chain(['…']).collect()
            } else {
                lane.label.clone()
            };
            let _ = write!(
                out,
                "<text x=\"{LABEL_W:.2}\" y=\"{mid:.2}\" font-size=\"{font:.1}\" text-anchor=\"end\" dominant-baseline=\"central\">{}</text>",
                escape(&label)
            );
        }

        match (lane.outcome, lane.run_start_ms) {
            // Refusals are instant: a short bar plus a full-height tick so they stand out
            // even when the axis spans seconds.
            (LaneOutcome::Refused, _) => {
                let w = (xe - xs).max(4.0);
                let _ = write!(
                    out,
                    "<rect class=\"refused-bar\" x=\"{xs:.2}\" y=\"{bar_y:.2}\" width=\"{w:.2}\" height=\"{bar_h:.2}\" fill=\"{colour}\"/><line x1=\"{xs:.2}\" y1=\"{:.2}\" x2=\"{xs:.2}\" y2=\"{:.2}\" stroke=\"{colour}\" stroke-width=\"2\"/>",
                    y0 + 1.0,
                    y0 + lane_h - 1.0
                );
            }
            (_, Some(run)) => {
                let xr = x(clean(run).clamp(start, end));
                if xr - xs > 0.5 {
                    let _ = write!(
                        out,
                        "<rect class=\"queued\" x=\"{xs:.2}\" y=\"{bar_y:.2}\" width=\"{:.2}\" height=\"{bar_h:.2}\" fill=\"url(#{hatch})\" stroke=\"{colour}\" stroke-width=\"0.8\"/>",
                        xr - xs
                    );
                }
                let _ = write!(
                    out,
                    "<rect class=\"running\" x=\"{xr:.2}\" y=\"{bar_y:.2}\" width=\"{:.2}\" height=\"{bar_h:.2}\" fill=\"{colour}\"/>",
                    (xe - xr).max(2.0)
                );
            }
            (_, None) => {
                let _ = write!(
                    out,
                    "<rect class=\"span\" x=\"{xs:.2}\" y=\"{bar_y:.2}\" width=\"{:.2}\" height=\"{bar_h:.2}\" fill=\"{colour}\"/>",
                    (xe - xs).max(2.0)
                );
            }
        }
        // The status next to the bar, when lanes are tall enough to read it.
        if lane_h >= 12.0 {
            let note = match (lane.status, lane.outcome) {
                (Some(status), _) => status.to_string(),
                (None, LaneOutcome::Ok) => String::new(),
                (None, outcome) => outcome_label(outcome).to_string(),
            };
            if !note.is_empty() {
                let nx = if lane.outcome == LaneOutcome::Refused {
                    xs + (xe - xs).max(4.0) + 4.0
                } else {
                    xe.max(xs + 2.0) + 4.0
                };
                let _ = write!(
                    out,
                    "<text x=\"{nx:.2}\" y=\"{mid:.2}\" font-size=\"{:.1}\" dominant-baseline=\"central\" class=\"muted\">{}</text>",
                    font.min(10.5),
                    escape(&note)
                );
            }
        }
        out.push_str("</g>\n");
    }
    out.push_str("</svg>\n");
}

fn legend(out: &mut String, hatch: &str) {
    let y = 8.0;
    let mut lx = PLOT_X0;
    out.push_str("<g class=\"legend\">");
    let entries = [
        (None, "queued"),
        (Some(LaneOutcome::Ok), "ok"),
        (Some(LaneOutcome::Refused), "refused"),
        (Some(LaneOutcome::TimedOut), "timed out"),
        (Some(LaneOutcome::Cancelled), "cancelled"),
        (Some(LaneOutcome::Failed), "failed"),
    ];
    for (outcome, text) in entries {
        match outcome {
            None => {
                let _ = write!(
                    out,
                    "<rect x=\"{lx:.1}\" y=\"{y}\" width=\"18\" height=\"14\" fill=\"url(#{hatch})\" stroke=\"#5c6672\" stroke-width=\"0.8\"/>"
                );
            }
            Some(LaneOutcome::Refused) => {
                let colour = outcome_colour(LaneOutcome::Refused);
                let _ = write!(
                    out,
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"6\" height=\"9\" fill=\"{colour}\"/><line x1=\"{:.1}\" y1=\"{y}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{colour}\" stroke-width=\"2\"/>",
                    lx + 6.0,
                    y + 2.5,
                    lx + 6.0,
                    lx + 6.0,
                    y + 14.0
                );
            }
            Some(outcome) => {
                let _ = write!(
                    out,
                    "<rect x=\"{lx:.1}\" y=\"{y}\" width=\"18\" height=\"14\" fill=\"{}\"/>",
                    outcome_colour(outcome)
                );
            }
        }
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" dominant-baseline=\"central\">{text}</text>",
            lx + 24.0,
            y + 7.0
        );
        lx += 24.0 + text.len() as f64 * 7.0 + 22.0;
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" dominant-baseline=\"central\" class=\"muted\">hatched: waiting in the queue · solid: running</text>",
        lx + 8.0,
        y + 7.0
    );
    out.push_str("</g>\n");
}

/// Writes [`render`] to `path`.
pub fn write(path: &Path, report: &RunReport) -> std::io::Result<()> {
    std::fs::write(path, render(report))
}
