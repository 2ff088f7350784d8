//! The timeline picture of one check: inline SVG, one lane per request over time, the wait in
//! the queue hatched, the run solid, coloured by outcome, refusals marked by a tick.
//!
//! Empty SVG elements are written `<rect …></rect>`, never as HTML void tags: inside `<svg>`
//! an HTML parser would take `<rect …>` as opening an element that holds everything after it.

use maud::{Markup, html};

use plimsoll_conformance::verdict::{Lane, LaneOutcome};

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
/// Longer lane labels are cut with an ellipsis so they stay left of the plot.
const MAX_LABEL_CHARS: usize = 28;

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

/// A coordinate or size with `decimals` digits: enough for a crisp picture, short markup.
fn num(v: f64, decimals: usize) -> String {
    format!("{v:.decimals$}")
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

/// The picture's layout for `n` lanes spanning `t_max` ms.
struct Layout {
    lane_h: f64,
    bar_h: f64,
    top: f64,
    axis_y: f64,
    height: f64,
    font: f64,
    label_every: usize,
    step: f64,
    axis_max: f64,
}

impl Layout {
    fn new(lanes: &[Lane]) -> Layout {
        let n = lanes.len();
        let lane_h = (MAX_LANES_H / n as f64).clamp(MIN_LANE_H, MAX_LANE_H);
        let top = LEGEND_H + 8.0;
        let axis_y = top + lane_h * n as f64;
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
        Layout {
            lane_h,
            bar_h: (lane_h * 0.62).max(3.0),
            top,
            axis_y,
            height: axis_y + 42.0,
            font: (lane_h * 0.72).clamp(MIN_LABEL_PX, 12.0),
            label_every: (MIN_LABEL_PX * 1.15 / lane_h).ceil().max(1.0) as usize,
            step,
            axis_max: (t_max / step).ceil() * step,
        }
    }

    /// The x of time `t` (ms).
    fn x(&self, t: f64) -> f64 {
        PLOT_X0 + clean(t).min(self.axis_max) / self.axis_max * (PLOT_X1 - PLOT_X0)
    }
}

/// The picture for the check at `index` (which names its hatch pattern: ids must be unique in
/// the page).
pub(super) fn svg(index: usize, lanes: &[Lane]) -> Markup {
    let n = lanes.len();
    let g = Layout::new(lanes);
    let hatch = format!("queued-{index}");
    let ticks = (g.axis_max / g.step).round() as usize;
    let decimals = if g.step >= 1.0 {
        0
    } else {
        (-g.step.log10().floor()) as usize
    };
    html! {
        svg class="timeline" viewBox={ "0 0 " (SVG_W) " " (num(g.height, 0)) } width=(SVG_W)
            height=(num(g.height, 0)) role="img" aria-label={ "Timeline of " (n) " requests" } {
            defs {
                pattern id=(hatch) width="6" height="6" patternUnits="userSpaceOnUse"
                    patternTransform="rotate(45)" {
                    rect width="6" height="6" fill="#e9edf2" {}
                    line x1="0" y1="0" x2="0" y2="6" stroke="#7d8896" stroke-width="2.2" {}
                }
            }
            (legend(&hatch))
            // Lane backgrounds first, so bars and grid lines sit on top of them.
            @for i in (0..n).step_by(2) {
                rect x=(PLOT_X0) y=(num(g.top + i as f64 * g.lane_h, 2))
                    width=(num(PLOT_X1 - PLOT_X0, 2)) height=(num(g.lane_h, 2)) fill="#f4f6f8" {}
            }
            // Axis with ticks and vertical grid lines.
            @for k in 0..=ticks {
                @let t = g.step * k as f64;
                @let tx = num(g.x(t), 2);
                line x1=(tx) y1=(num(g.top, 2)) x2=(tx) y2=(num(g.axis_y, 2)) stroke="#dde2e8"
                    stroke-width="1" {}
                line x1=(tx) y1=(num(g.axis_y, 2)) x2=(tx) y2=(num(g.axis_y + 5.0, 2))
                    stroke="#5c6672" {}
                text x=(tx) y=(num(g.axis_y + 17.0, 2)) font-size="11" text-anchor="middle"
                    class="muted" { (num(t, decimals)) }
            }
            line x1=(PLOT_X0) y1=(num(g.axis_y, 2)) x2=(PLOT_X1) y2=(num(g.axis_y, 2))
                stroke="#5c6672" {}
            text x=(num((PLOT_X0 + PLOT_X1) / 2.0, 2)) y=(num(g.axis_y + 34.0, 2)) font-size="11"
                text-anchor="middle" class="muted" { "time since the check started (ms)" }
            @for (i, lane) in lanes.iter().enumerate() {
                (lane_group(&g, &hatch, i, lane))
            }
        }
    }
}

/// The tooltip of a lane: who, how it ended, when it was sent, started and ended.
fn tooltip(lane: &Lane, start: f64, end: f64) -> String {
    let mut tip = format!("{}: {}", lane.label, outcome_label(lane.outcome));
    if let Some(status) = lane.status {
        tip.push_str(&format!(" ({status})"));
    }
    if let Some(id) = &lane.request_id {
        tip.push_str(&format!("\nrequest id {id}"));
    }
    tip.push_str(&format!("\nsent {start:.1} ms"));
    if let Some(run) = lane.run_start_ms {
        tip.push_str(&format!(", started {:.1} ms", clean(run)));
    }
    tip.push_str(&format!(", ended {end:.1} ms"));
    tip
}

/// One request's lane `i`: tooltip, label (every `label_every` lanes), bars, status note.
fn lane_group(g: &Layout, hatch: &str, i: usize, lane: &Lane) -> Markup {
    let y0 = g.top + i as f64 * g.lane_h;
    let mid = y0 + g.lane_h / 2.0;
    let bar_y = num(mid - g.bar_h / 2.0, 2);
    let bar_h = num(g.bar_h, 2);
    let colour = outcome_colour(lane.outcome);
    let start = clean(lane.start_ms);
    let end = clean(lane.end_ms).max(start);
    let (xs, xe) = (g.x(start), g.x(end));
    let label: String = if lane.label.chars().count() > MAX_LABEL_CHARS {
        let keep = MAX_LABEL_CHARS - 1;
        lane.label.chars().take(keep).chain(['…']).collect()
    } else {
        lane.label.clone()
    };
    // The status next to the bar, when lanes are tall enough to read it.
    let note = match (lane.status, lane.outcome) {
        _ if g.lane_h < 12.0 => String::new(),
        (Some(status), _) => status.to_string(),
        (None, LaneOutcome::Ok) => String::new(),
        (None, outcome) => outcome_label(outcome).to_string(),
    };
    let note_x = if lane.outcome == LaneOutcome::Refused {
        xs + (xe - xs).max(4.0) + 4.0
    } else {
        xe.max(xs + 2.0) + 4.0
    };
    html! {
        g class={ "lane " (outcome_class(lane.outcome)) } {
            title { (tooltip(lane, start, end)) }
            @if i.is_multiple_of(g.label_every) {
                text x=(num(LABEL_W, 2)) y=(num(mid, 2)) font-size=(num(g.font, 1))
                    text-anchor="end" dominant-baseline="central" { (label) }
            }
            @match (lane.outcome, lane.run_start_ms) {
                // Refusals are instant: a short bar plus a full-height tick so they stand out
                // even when the axis spans seconds.
                (LaneOutcome::Refused, _) => {
                    rect class="refused-bar" x=(num(xs, 2)) y=(bar_y)
                        width=(num((xe - xs).max(4.0), 2)) height=(bar_h) fill=(colour) {}
                    line x1=(num(xs, 2)) y1=(num(y0 + 1.0, 2)) x2=(num(xs, 2))
                        y2=(num(y0 + g.lane_h - 1.0, 2)) stroke=(colour) stroke-width="2" {}
                }
                (_, Some(run)) => {
                    @let xr = g.x(clean(run).clamp(start, end));
                    @if xr - xs > 0.5 {
                        rect class="queued" x=(num(xs, 2)) y=(bar_y) width=(num(xr - xs, 2))
                            height=(bar_h) fill={ "url(#" (hatch) ")" } stroke=(colour)
                            stroke-width="0.8" {}
                    }
                    rect class="running" x=(num(xr, 2)) y=(bar_y)
                        width=(num((xe - xr).max(2.0), 2)) height=(bar_h) fill=(colour) {}
                }
                (_, None) => {
                    rect class="span" x=(num(xs, 2)) y=(bar_y) width=(num((xe - xs).max(2.0), 2))
                        height=(bar_h) fill=(colour) {}
                }
            }
            @if !note.is_empty() {
                text x=(num(note_x, 2)) y=(num(mid, 2)) font-size=(num(g.font.min(10.5), 1))
                    dominant-baseline="central" class="muted" { (note) }
            }
        }
    }
}

/// The key above the lanes: queued, then one swatch per outcome.
fn legend(hatch: &str) -> Markup {
    const Y: f64 = 8.0;
    let entries = [
        (None, "queued"),
        (Some(LaneOutcome::Ok), "ok"),
        (Some(LaneOutcome::Refused), "refused"),
        (Some(LaneOutcome::TimedOut), "timed out"),
        (Some(LaneOutcome::Cancelled), "cancelled"),
        (Some(LaneOutcome::Failed), "failed"),
    ];
    let mut lx = PLOT_X0;
    let placed: Vec<(f64, Option<LaneOutcome>, &str)> = entries
        .into_iter()
        .map(|(outcome, text)| {
            let at = lx;
            lx += 24.0 + text.len() as f64 * 7.0 + 22.0;
            (at, outcome, text)
        })
        .collect();
    let refused = outcome_colour(LaneOutcome::Refused);
    html! {
        g class="legend" {
            @for (lx, outcome, text) in &placed {
                @match outcome {
                    None => {
                        rect x=(num(*lx, 1)) y=(Y) width="18" height="14" fill={ "url(#" (hatch) ")" }
                            stroke="#5c6672" stroke-width="0.8" {}
                    }
                    Some(LaneOutcome::Refused) => {
                        rect x=(num(lx + 6.0, 1)) y=(num(Y + 2.5, 1)) width="6" height="9"
                            fill=(refused) {}
                        line x1=(num(lx + 6.0, 1)) y1=(Y) x2=(num(lx + 6.0, 1))
                            y2=(num(Y + 14.0, 1)) stroke=(refused) stroke-width="2" {}
                    }
                    Some(outcome) => {
                        rect x=(num(*lx, 1)) y=(Y) width="18" height="14"
                            fill=(outcome_colour(*outcome)) {}
                    }
                }
                text x=(num(lx + 24.0, 1)) y=(num(Y + 7.0, 1)) font-size="12"
                    dominant-baseline="central" { (text) }
            }
            text x=(num(lx + 8.0, 1)) y=(num(Y + 7.0, 1)) font-size="12" dominant-baseline="central"
                class="muted" { "hatched: waiting in the queue · solid: running" }
        }
    }
}
