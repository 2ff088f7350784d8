//! The run-wide charts: the run over time, per pool, drawn from [`RunSeries`] with `plotters`'
//! SVG backend and set inline in the page (no script, no network: the page is one file).
//!
//! Four charts per pool: attempts, answers and refusals per second; the refused fraction
//! against the prediction's band; p50/p90/p99 latency of the successful answers; the requests
//! in flight against the pool's limits, with the target's own gauges beside them. The fault's
//! stretch is shaded on each when a fault ran, each check (or the warm-up) is marked on the
//! rates' chart, and a `--baseline` run is drawn beside this one: its series where its report
//! holds one (a report of a version that keeps them), and its summary figures (the deltas'
//! medians) as reference lines.
//!
//! Each chart's key is HTML under the picture, not `plotters`' legend: it never covers a line,
//! and every `<polyline>` in a chart but the axes' (drawn in [`AXIS`]) is then one of its
//! series, which the tests count.

use maud::{Markup, PreEscaped, html};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use plimsoll_conformance::verdict::RunReport;
use plimsoll_conformance::verdict::figure::Unit;
use plimsoll_conformance::verdict::series::{Bin, Gauge, PoolSeries, RunSeries, Span};

/// One chart's size in SVG units: two side by side fill the page's width, each still
/// readable at 1400 px.
const SIZE: (u32, u32) = (560, 300);
// plotters takes text sizes in points and writes pixels: a size of 15 is drawn 12.1 px high.
const FONT: &str = "sans-serif";

const BLUE: RGBColor = RGBColor(0x1f, 0x6f, 0xeb);
const GREEN: RGBColor = RGBColor(0x2b, 0x93, 0x48);
const ORANGE: RGBColor = RGBColor(0xf0, 0x8c, 0x00);
const GOLD: RGBColor = RGBColor(0xb0, 0x89, 0x00);
const RED: RGBColor = RGBColor(0xd6, 0x28, 0x28);
const PURPLE: RGBColor = RGBColor(0x7b, 0x2c, 0xbf);
const GREY: RGBColor = RGBColor(0x5c, 0x66, 0x72);
/// The axes and their ticks: the one colour of a `<polyline>` that is not a series.
const AXIS: RGBColor = RGBColor(0x44, 0x4c, 0x56);

/// A line of a chart: its name in the key, its colour, how thick, its points (s, value).
struct Line {
    name: String,
    colour: RGBColor,
    width: u32,
    points: Vec<(f64, f64)>,
}

impl Line {
    fn new(name: impl Into<String>, colour: RGBColor, points: Vec<(f64, f64)>) -> Line {
        Line {
            name: name.into(),
            colour,
            width: 2,
            points,
        }
    }

    /// A horizontal reference line across the run: a limit, a baseline figure.
    fn level(name: impl Into<String>, colour: RGBColor, value: f64, end_s: f64) -> Line {
        Line {
            width: 1,
            ..Line::new(name, colour, vec![(0.0, value), (end_s, value)])
        }
    }
}

/// A shaded stretch of a chart: its name in the key, colour, and rectangle in data units.
struct Shade {
    name: String,
    colour: RGBColor,
    opacity: f64,
    x: (f64, f64),
    y: Option<(f64, f64)>,
}

/// One chart: its title, the y axis, its lines and shades, and a note under it.
struct Chart {
    title: String,
    y_desc: &'static str,
    /// The y axis is a fraction, labelled in percent.
    percent: bool,
    lines: Vec<Line>,
    shades: Vec<Shade>,
    /// Names on the time axis (checks, waves), drawn above the plot.
    phases: Vec<Span>,
    note: Option<String>,
}

/// Seconds from ms.
fn s(ms: f64) -> f64 {
    ms / 1000.0
}

/// The charts of the run, or nothing for a run that kept no series.
pub(super) fn section(report: &RunReport) -> Markup {
    let Some(series) = &report.series else {
        return html! {};
    };
    html! {
        section.card.charts {
            h2 { "The run over time" }
            p.muted {
                "Bins of " (format_bin(series.bin_ms)) " over " (format!("{:.1}", s(series.end_ms)))
                " s, on the checker's clock: every request as the checker sent and timed it."
                @if let Some(fault) = &series.fault {
                    " Shaded red: the fault " code { (fault.label) } " was on (the whole run: its proxy carried every request)."
                }
            }
            @if series.baseline.is_some() {
                p.muted {
                    "Thin grey lines named \"baseline run\": the --baseline run's own series, on \
                     its own clock from its start."
                }
            }
            @if report.results.iter().any(|r| !r.deltas.is_empty()) {
                p.muted {
                    "Grey levels named \"baseline\" and a check: the --baseline run's summary \
                     figures (each a median over its run), drawn as reference lines across the \
                     run, not as series over time."
                }
            }
            @if series.pools.iter().all(|p| p.bins.is_empty()) {
                p.muted { "No request was sent: nothing to chart." }
            }
            @for pool in series.pools.iter().filter(|p| !p.bins.is_empty()) {
                h3 { "Pool: " (pool.pool) }
                div.chart-grid {
                    @for chart in charts(report, series, pool) {
                        (figure(&chart, series))
                    }
                }
            }
        }
    }
}

fn format_bin(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.0} s", ms / 1000.0)
    }
}

/// One pool's charts in the making: the run, the pool, and the time axis they share.
struct Pool<'a> {
    report: &'a RunReport,
    series: &'a RunSeries,
    pool: &'a PoolSeries,
    /// This run's bins of the pool.
    now: Bins<'a>,
    /// The `--baseline` run's bins of the same pool, when its file holds them.
    before: Option<Bins<'a>>,
    end_s: f64,
}

/// One run's bins of a pool, with their width, s: what a line is computed from.
#[derive(Clone, Copy)]
struct Bins<'a> {
    pool: &'a PoolSeries,
    bin_s: f64,
}

/// The four charts of one pool.
fn charts(report: &RunReport, series: &RunSeries, pool: &PoolSeries) -> Vec<Chart> {
    let bin_s = s(series.bin_ms);
    let before = series.baseline.as_deref().and_then(|b| {
        let pool = b.pools.iter().find(|p| p.pool == pool.pool)?;
        Some(Bins {
            pool,
            bin_s: s(b.bin_ms),
        })
    });
    let p = Pool {
        report,
        series,
        pool,
        now: Bins { pool, bin_s },
        before,
        end_s: s(series.end_ms).max(bin_s),
    };
    let mut charts = vec![p.rates(), p.refused(), p.latency(), p.in_flight()];
    // A line with no point draws nothing: it is not named in the key either.
    for chart in &mut charts {
        chart.lines.retain(|l| !l.points.is_empty());
    }
    charts
}

impl Bins<'_> {
    /// The middle of bin `i`, s: where its value is drawn.
    fn mid(&self, i: usize) -> f64 {
        (i as f64 + 0.5) * self.bin_s
    }

    /// A count per bin as a rate per second.
    fn per_s(&self, f: fn(&Bin) -> u32) -> Vec<(f64, f64)> {
        let bins = self.pool.bins.iter().enumerate();
        bins.map(|(i, b)| (self.mid(i), f64::from(f(b)) / self.bin_s))
            .collect()
    }

    /// The refused fraction of every attempt sent from `from_ms` to the end of each bin.
    fn refused_since(&self, from_ms: f64) -> Vec<(f64, f64)> {
        let (mut n, mut refused) = (0u64, 0u64);
        let bins = self.pool.bins.iter().enumerate();
        bins.filter(|(i, _)| self.mid(*i) * 1000.0 >= from_ms)
            .filter_map(|(i, b)| {
                n += u64::from(b.counted);
                refused += u64::from(b.refused);
                (n > 0).then(|| (self.mid(i), refused as f64 / n as f64))
            })
            .collect()
    }

    /// A value of the bins that have it.
    fn each(&self, f: fn(&Bin) -> Option<f64>) -> Vec<(f64, f64)> {
        let bins = self.pool.bins.iter().enumerate();
        bins.filter_map(|(i, b)| f(b).map(|v| (self.mid(i), v)))
            .collect()
    }
}

impl Pool<'_> {
    /// The `--baseline` run's line of the same figure, grey and thin, cut at this run's end
    /// (the time axis is this run's).
    fn before(&self, name: &str, points: impl Fn(&Bins<'_>) -> Vec<(f64, f64)>) -> Vec<Line> {
        let Some(before) = &self.before else {
            return Vec::new();
        };
        let mut points = points(before);
        points.retain(|p| p.0 <= self.end_s);
        vec![Line {
            width: 1,
            ..Line::new(format!("baseline run: {name}"), GREY, points)
        }]
    }

    /// A chart of this pool with no line yet: the fault shaded, if one ran.
    fn chart(&self, title: &str, y_desc: &'static str, percent: bool) -> Chart {
        Chart {
            title: title.into(),
            y_desc,
            percent,
            lines: Vec::new(),
            shades: self
                .series
                .fault
                .iter()
                .map(|f| Shade {
                    name: format!("fault {}", f.label),
                    colour: RED,
                    opacity: 0.08,
                    x: (s(f.from_ms), s(f.to_ms)),
                    y: None,
                })
                .collect(),
            phases: Vec::new(),
            note: None,
        }
    }

    /// The `--baseline` run's figures in `unit`, each a level across the run: the baseline
    /// file holds medians, not series.
    fn baseline(&self, unit: Unit) -> Vec<Line> {
        let deltas = self
            .report
            .results
            .iter()
            .flat_map(|r| r.deltas.iter().map(move |d| (r, d)));
        deltas
            .filter(|(_, d)| d.unit == unit && d.baseline.is_finite())
            .map(|(r, d)| {
                let name = format!(
                    "baseline {} {}: {}",
                    r.id,
                    d.figure,
                    unit.format(d.baseline)
                );
                Line::level(name, GREY, d.baseline, self.end_s)
            })
            .collect()
    }

    fn rates(&self) -> Chart {
        let mut chart = self.chart(
            "Attempts, answers and refusals per second",
            "per second",
            false,
        );
        chart.lines = vec![
            Line::new("attempts sent /s", BLUE, self.now.per_s(|b| b.sent)),
            Line::new("answers received /s", GREEN, self.now.per_s(|b| b.answered)),
            Line::new(
                "refusals /s (by send time)",
                ORANGE,
                self.now.per_s(|b| b.refused),
            ),
        ];
        chart
            .lines
            .extend(self.before("attempts sent /s", |b| b.per_s(|b| b.sent)));
        chart.lines.extend(self.baseline(Unit::PerSecond));
        chart.phases = self.series.phases.clone();
        chart
    }

    fn refused(&self) -> Chart {
        let mut chart = self.chart("Refused fraction", "refused / (ok + refused)", true);
        let bins = self.pool.bins.iter().enumerate();
        let fraction = bins
            .filter(|(_, b)| b.counted > 0)
            .map(|(i, b)| (self.now.mid(i), f64::from(b.refused) / f64::from(b.counted)))
            .collect();
        chart.lines = vec![Line {
            width: 1,
            ..Line::new("refused fraction per bin", ORANGE, fraction)
        }];
        let counted = "Attempts counted by the bin they were sent in; abandoned ones and other \
                       answers are not counted.";
        let Some(band) = &self.pool.predicted_refused else {
            chart.lines.push(Line {
                width: 3,
                ..Line::new("refused fraction so far", RED, self.now.refused_since(0.0))
            });
            chart
                .lines
                .extend(self.before("refused fraction so far", |b| b.refused_since(0.0)));
            chart.lines.extend(self.baseline(Unit::Fraction));
            chart.note = Some(format!(
                "{counted} The per-bin line joins the bins that counted any. No band: this run \
                 makes no queueing prediction (only the steady and overload load profiles do)."
            ));
            return chart;
        };
        let since_warm_up = self.now.refused_since(band.from_ms);
        let (from, to) = (s(band.from_ms), s(band.to_ms));
        chart.shades.insert(
            0,
            Shade {
                name: format!(
                    "predicted band {:.1}–{:.1} %",
                    band.low * 100.0,
                    band.high * 100.0
                ),
                colour: BLUE,
                opacity: 0.15,
                x: (from, to),
                y: Some((band.low, band.high)),
            },
        );
        let predicted = vec![(from, band.predicted), (to, band.predicted)];
        chart.lines.push(Line {
            width: 1,
            ..Line::new(
                format!("predicted {:.1} %", band.predicted * 100.0),
                BLUE,
                predicted,
            )
        });
        chart.lines.push(Line {
            width: 3,
            ..Line::new("refused fraction since the warm-up", RED, since_warm_up)
        });
        // The baseline's since its own warm-up, when it had a band; else from its start.
        let from = self
            .before
            .and_then(|b| b.pool.predicted_refused.as_ref().map(|b| b.from_ms));
        chart
            .lines
            .extend(self.before("refused fraction since the warm-up", |b| {
                b.refused_since(from.unwrap_or(0.0))
            }));
        chart.lines.extend(self.baseline(Unit::Fraction));
        chart.note = Some(format!(
            "{counted} The band is the verdict's: it bounds the fraction of the whole window, \
             where the line since the warm-up ends; one bin's fraction varies far more."
        ));
        chart
    }

    fn latency(&self) -> Chart {
        let quantile = |f| self.now.each(f);
        let mut chart = self.chart("Latency of the successful answers", "ms", false);
        chart.lines = vec![
            Line::new("p99", RED, quantile(|b| b.p99_ms)),
            Line::new("p90", GOLD, quantile(|b| b.p90_ms)),
            Line::new("p50", GREEN, quantile(|b| b.p50_ms)),
        ];
        chart
            .lines
            .extend(self.before("p99", |b| b.each(|b| b.p99_ms)));
        chart.lines.extend(self.baseline(Unit::Ms));
        chart.note = Some(
            "Each bin's answers by the time they arrived, from send to the whole answer. In a bin \
             of fewer than ten answers p90 and p99 are both its slowest (nearest rank): the p90 \
             line then covers the p99 one."
                .into(),
        );
        chart
    }

    fn in_flight(&self) -> Chart {
        let mut chart = self.chart("In flight against the limit", "requests", false);
        let in_flight = |b: &Bins<'_>| b.each(|b| Some(f64::from(b.in_flight)));
        chart.lines.push(Line::new(
            "in flight (the checker's: sent, not yet ended), most in the bin",
            BLUE,
            in_flight(&self.now),
        ));
        chart.lines.extend(self.before("in flight", in_flight));
        let gauge = |f: fn(&Gauge) -> Option<f64>| {
            let gauges = self.pool.gauges.iter();
            gauges
                .filter_map(|g| f(g).map(|v| (s(g.at_ms), v)))
                .collect::<Vec<_>>()
        };
        chart.lines.push(Line::new(
            "busy (the target's gauge)",
            PURPLE,
            gauge(|g| g.busy),
        ));
        chart.lines.push(Line::new(
            "queued (the target's gauge)",
            GOLD,
            gauge(|g| g.queued),
        ));
        // Limits in reds apart from each other: a check run draws one per pool.
        let reds = [RED, RGBColor(0x8a, 0x1c, 0x1c), RGBColor(0xe8, 0x59, 0x0c)];
        for (limit, red) in self.pool.limits.iter().zip(reds.into_iter().cycle()) {
            chart
                .lines
                .push(Line::level(&limit.label, red, limit.value, self.end_s));
        }
        chart.note = Some(if self.pool.gauges.is_empty() {
            "The target's busy and queue gauges were not read through this run: the line is \
             the checker's own count."
                .into()
        } else {
            "Busy and queued are the target's /metrics gauges (its claim), at the times the \
             checker read them."
                .into()
        });
        chart
    }
}

/// One chart as a figure: the picture, its key, its note. `data-series` names each line, in
/// the order of the picture's `<polyline>`s.
fn figure(chart: &Chart, series: &RunSeries) -> Markup {
    let names: Vec<&str> = chart.lines.iter().map(|l| l.name.as_str()).collect();
    // A chart plotters could not draw says so in the page: a report never panics on its data.
    let svg = match draw(chart, series) {
        Ok(svg) => PreEscaped(svg),
        Err(e) => {
            PreEscaped(html! { p.reason { "This chart could not be drawn: " (e) } }.into_string())
        }
    };
    html! {
        figure.chart data-series=(names.join("|")) {
            (svg)
            figcaption {
                ul.key {
                    @for shade in &chart.shades {
                        li { span.swatch style={ "background:" (css(shade.colour, shade.opacity * 2.5)) } {} (shade.name) }
                    }
                    @for line in &chart.lines {
                        li { span.line style={ "border-color:" (css(line.colour, 1.0)) ";border-top-width:" (line.width) "px" } {} (line.name) }
                    }
                }
                @if let Some(note) = &chart.note {
                    p.muted { (note) }
                }
            }
        }
    }
}

fn css(c: RGBColor, opacity: f64) -> String {
    format!("rgba({},{},{},{:.2})", c.0, c.1, c.2, opacity.min(1.0))
}

/// The top of the y axis: the highest value drawn, with room above it.
fn y_top(chart: &Chart) -> f64 {
    if chart.percent {
        return 1.0;
    }
    let most = chart
        .lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    if most <= 0.0 { 1.0 } else { most * 1.12 }
}

/// A chart's plotting area, as plotters hands it over.
type Plot<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The chart as an SVG document.
fn draw(chart: &Chart, series: &RunSeries) -> Result<String, String> {
    let end_s = s(series.end_ms).max(s(series.bin_ms));
    let top = y_top(chart);
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut plot = ChartBuilder::on(&root)
            .caption(&chart.title, (FONT, 20))
            .margin(10)
            .x_label_area_size(38)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..end_s, 0f64..top)
            .map_err(|e| e.to_string())?;
        mesh(&mut plot, chart)?;
        phases(&mut plot, &chart.phases, end_s, top)?;
        for shade in &chart.shades {
            let (y0, y1) = shade.y.unwrap_or((0.0, top));
            plot.draw_series(std::iter::once(Rectangle::new(
                [(shade.x.0, y0), (shade.x.1.min(end_s), y1)],
                shade.colour.mix(shade.opacity).filled(),
            )))
            .map_err(|e| e.to_string())?;
        }
        for line in &chart.lines {
            plot.draw_series(LineSeries::new(
                line.points.iter().copied(),
                line.colour.stroke_width(line.width),
            ))
            .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(buf)
}

/// The axes, their labels and the grid.
fn mesh(plot: &mut Plot<'_, '_>, chart: &Chart) -> Result<(), String> {
    let percent = |v: &f64| format!("{:.0} %", v * 100.0);
    let plain = |v: &f64| {
        if *v >= 100.0 || v.fract().abs() < 1e-9 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    };
    let y_fmt: &dyn Fn(&f64) -> String = if chart.percent { &percent } else { &plain };
    plot.configure_mesh()
        .x_desc("time since the run started (s)")
        .y_desc(chart.y_desc)
        .x_labels(8)
        .y_labels(6)
        .x_label_formatter(&plain)
        .y_label_formatter(y_fmt)
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 15))
        .axis_style(AXIS)
        .max_light_lines(1)
        .light_line_style(RGBColor(0xee, 0xf1, 0xf4))
        .bold_line_style(RGBColor(0xdd, 0xe2, 0xe8))
        .draw()
        .map_err(|e| e.to_string())
}

/// Phases (checks, waves, the warm-up): every other one lightly shaded, each named at the top
/// of the plot when there is room for its name.
fn phases(plot: &mut Plot<'_, '_>, phases: &[Span], end_s: f64, top: f64) -> Result<(), String> {
    for (i, phase) in phases.iter().enumerate() {
        let (x0, x1) = (s(phase.from_ms), s(phase.to_ms).min(end_s));
        if i % 2 == 0 {
            plot.draw_series(std::iter::once(Rectangle::new(
                [(x0, 0.0), (x1, top)],
                GREY.mix(0.06).filled(),
            )))
            .map_err(|e| e.to_string())?;
        }
        let px = (x1 - x0) / end_s * f64::from(SIZE.0 - 76);
        if px >= phase.label.chars().count() as f64 * 6.5 + 4.0 {
            let style = (FONT, 14).into_font().color(&GREY);
            plot.draw_series(std::iter::once(Text::new(
                phase.label.clone(),
                (x0 + end_s * 0.006, top),
                style.pos(Pos::new(HPos::Left, VPos::Top)),
            )))
            .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}
