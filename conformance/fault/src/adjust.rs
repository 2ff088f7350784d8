//! What a fault changes in the expectations: for each time bound a check judges by, how much
//! the fault adds and why, in a sentence the report shows. Checks read those bounds here, so a
//! bound is never widened silently: with no fault every addition is zero, and under a fault
//! each addition is listed in the terminal header and the JSON manifest.
//!
//! Only what follows from the fault's own numbers is added. Latency adds its one-way delay
//! (latency plus jitter, the worst draw) once per direction a bound's measurement crosses; a
//! close held back by `slow_close` reaches the server that much later. The byte-shaping toxics
//! (bandwidth, slicer) add time in proportion to the bytes a request moves, which no single
//! bound can state, so they add nothing here and their checks judge the contract's own bounds;
//! where a body a check must send cannot cross within its timeout at the fault's rate,
//! [`Adjustments::cannot_carry`] says so, and the check names that part as not applicable.

use std::time::Duration;

use plimsoll_spec::Contract;
use serde::Serialize;

use super::spec::{Fault, Stream, Toxic};

/// A time bound of the contract that a check measures on the client's clock across the
/// network, so a fault between client and server can lengthen what the client sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// A refusal's answer after its request (T3, B5): `tolerances.refusal_latency_ms`; the
    /// request goes up and the answer comes down.
    RefusalLatency,
    /// How late a timeout's answer may be (B1): `tolerances.timeout_late_ms`; up and down.
    TimeoutLate,
    /// How late the server's close of an idle connection may be seen (B4):
    /// `tolerances.timeout_late_ms`; the close comes down, the timer started when the
    /// connection opened, which the proxy does not delay.
    CloseLate,
    /// A dropped client's job stopping (B1, B3, R6): B3's `stop_within_ms`; the close goes up
    /// and the gauge showing the stop comes down.
    StopWithin,
    /// How early the close of an idle keep-alive connection may be seen (B4), timed from the
    /// answer's end: the checker's timer slack (10 ms). Jitter can deliver the answer late and
    /// the close early, so their gap can shrink by twice the jitter.
    CloseEarly,
}

/// B4's timer slack for an early close, the base of [`Bound::CloseEarly`].
const CLOSE_EARLY_SLACK_MS: u64 = 10;

impl Bound {
    const ALL: [Bound; 5] = [
        Bound::RefusalLatency,
        Bound::TimeoutLate,
        Bound::CloseLate,
        Bound::StopWithin,
        Bound::CloseEarly,
    ];

    /// The contract's value of this bound, before any fault adds to it.
    pub fn base(self, contract: &Contract) -> Duration {
        Duration::from_millis(match self {
            Bound::RefusalLatency => contract.tolerances.refusal_latency_ms,
            Bound::TimeoutLate | Bound::CloseLate => contract.tolerances.timeout_late_ms,
            Bound::StopWithin => stop_within_ms(contract),
            Bound::CloseEarly => CLOSE_EARLY_SLACK_MS,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Bound::RefusalLatency => "refusal latency",
            Bound::TimeoutLate => "timeout answer late by",
            Bound::CloseLate => "idle close late by",
            Bound::StopWithin => "stop after a disconnect",
            Bound::CloseEarly => "idle close early by",
        }
    }

    /// The directions this bound's measurement crosses: (upstream, downstream).
    fn crosses(self) -> (bool, bool) {
        match self {
            Bound::CloseLate => (false, true),
            _ => (true, true),
        }
    }
}

/// One bound lengthened by the fault: by how much, and the sentence that says why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Adjustment {
    /// The bound.
    pub bound: Bound,
    /// The contract's value, in ms.
    pub base_ms: u64,
    /// What the fault adds, in ms.
    pub added_ms: u64,
    /// Why, in words: `refusal latency: 100 ms + 2 × 60 ms (latency 50 ms + jitter 10 ms, each way)`.
    pub why: String,
}

/// Every bound's addition under one fault (none without a fault).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Adjustments {
    /// The fault, as its spec (`None`: a fault-free run).
    pub fault: Option<String>,
    /// The fault itself, for what no single bound states: the time its byte shaping takes to
    /// carry a body ([`Adjustments::cannot_carry`]).
    #[serde(skip)]
    pub toxic: Option<Fault>,
    /// The bounds the fault lengthens; a bound not listed is the contract's.
    pub adjusted: Vec<Adjustment>,
}

impl Adjustments {
    /// The additions `fault` makes to `contract`'s bounds.
    pub fn new(fault: &Fault, contract: &Contract) -> Adjustments {
        let adjusted = Bound::ALL
            .into_iter()
            .filter_map(|bound| adjustment(fault, bound, contract))
            .collect();
        Adjustments {
            fault: Some(fault.to_string()),
            toxic: Some(*fault),
            adjusted,
        }
    }

    /// Why the fault cannot carry `bytes` in `direction` within `within`, when even its
    /// fastest draw takes longer (bandwidth: the rate; slicer: the largest slices, `delay`
    /// apart): `33554433 bytes take at least 3355 ms at 10000 KB/s`. `None` when they may fit,
    /// or without a byte-shaping fault. A check uses it to say which part of it the fault
    /// removes ([`crate::checks::ctx::Ctx::fault_removes`]), never to widen a bound.
    pub fn cannot_carry(&self, bytes: u64, direction: Stream, within: Duration) -> Option<String> {
        let fault = self.toxic.filter(|f| f.stream.covers(direction))?;
        let (least, how) = match fault.toxic {
            Toxic::Bandwidth { rate_kb } => (
                Duration::from_secs_f64(bytes as f64 / (rate_kb as f64 * 1000.0)),
                format!("at {rate_kb} KB/s"),
            ),
            Toxic::Slicer {
                average_size,
                size_variation,
                delay,
            } => {
                let largest = (average_size + size_variation) as u64;
                (
                    delay * (bytes.div_ceil(largest).saturating_sub(1)).min(u32::MAX as u64) as u32,
                    format!(
                        "in slices of at most {largest} bytes, {} µs apart",
                        delay.as_micros()
                    ),
                )
            }
            _ => return None,
        };
        (least > within)
            .then(|| format!("{bytes} bytes take at least {} ms {how}", least.as_millis()))
    }

    /// The slowest and the fastest rate, in bytes per second, at which the fault lets bytes
    /// through in `direction`, when it shapes them (bandwidth; a slicer with a delay): what a
    /// trickled request's timers are judged by (`checks::bounds::trickle`). `None` when the
    /// fault does not slow that direction's bytes.
    pub fn byte_rates(&self, direction: Stream) -> Option<(f64, f64)> {
        let fault = self.toxic.filter(|f| f.stream.covers(direction))?;
        match fault.toxic {
            Toxic::Bandwidth { rate_kb } => {
                let rate = rate_kb as f64 * 1000.0;
                Some((rate, rate))
            }
            Toxic::Slicer {
                average_size,
                size_variation,
                delay,
            } if !delay.is_zero() => {
                let per = |bytes: usize| bytes as f64 / delay.as_secs_f64();
                Some((
                    per(average_size - size_variation),
                    per(average_size + size_variation),
                ))
            }
            _ => None,
        }
    }

    /// Why nothing a check judges can be observed through the fault, when that is so: a
    /// `timeout` or `blackhole` drops every byte of the direction it covers, so no request
    /// reaches the target or no answer reaches the checker. Every check is then not applicable
    /// (run by [`crate::checks::registry::run`] without a request), rather than failing on
    /// answers the fault itself withholds or waiting out each check's bounds.
    pub fn unobservable(&self) -> Option<String> {
        let fault = self.toxic?;
        let Toxic::Timeout { timeout } = fault.toxic else {
            return None;
        };
        let lost = match fault.stream {
            Stream::Upstream => "no request reaches the target",
            Stream::Downstream => "no answer reaches the checker",
            Stream::Both => "no request reaches the target and no answer the checker",
        };
        let closed = if timeout.is_zero() {
            "keeps every connection open".to_owned()
        } else {
            format!("closes each connection after {} ms", timeout.as_millis())
        };
        Some(format!(
            "it drops every byte ({}) and {closed}: {lost}, so nothing the check judges can be observed",
            fault.stream.name()
        ))
    }

    /// The least and the most the fault adds to a round trip (a request up, its answer down).
    /// A latency toxic adds its draw, `latency ± jitter` (never below 0), once per direction it
    /// covers; the other toxics add nothing a small message would notice (a byte-shaping
    /// toxic's pause falls between slices, a held-back close is no answer).
    pub fn round_trip(&self) -> (Duration, Duration) {
        let Some(Fault {
            toxic: Toxic::Latency { latency, jitter },
            stream,
        }) = self.toxic
        else {
            return (Duration::ZERO, Duration::ZERO);
        };
        let legs = [Stream::Upstream, Stream::Downstream]
            .into_iter()
            .filter(|&d| stream.covers(d))
            .count() as u32;
        (
            latency.saturating_sub(jitter) * legs,
            (latency + jitter) * legs,
        )
    }

    /// How far apart the fault can put two round trips: the most it adds to one less the least
    /// it adds to another. A check that infers when a job ran from when its answer came (the
    /// relay's held requests, R4 and R6) widens its slack by it, or names the inference as not
    /// applicable when the spread swallows what it tells apart. Only jitter spreads: a
    /// constant delay moves every answer alike.
    pub fn round_trip_spread(&self) -> Duration {
        let (least, most) = self.round_trip();
        most - least
    }

    /// What the fault adds to `bound` (zero without a fault).
    pub fn added(&self, bound: Bound) -> Duration {
        self.adjusted
            .iter()
            .find(|a| a.bound == bound)
            .map_or(Duration::ZERO, |a| Duration::from_millis(a.added_ms))
    }

    /// `bound` as the checks judge it: the contract's value plus the fault's addition.
    pub fn bound(&self, bound: Bound, contract: &Contract) -> Duration {
        bound.base(contract) + self.added(bound)
    }

    /// `bound` in an expectation's words: `100 ms` fault-free, `100 ms + 120 ms injected`
    /// under a fault that adds to it.
    pub fn words(&self, bound: Bound, contract: &Contract) -> String {
        let base = bound.base(contract).as_millis();
        match self.added(bound).as_millis() {
            0 => format!("{base} ms"),
            added => format!("{base} ms + {added} ms injected"),
        }
    }
}

/// B3's bound: the digitize pool's on the reference surface; in another service's contract the
/// longest any pool declares (`cancellation.stop_within_ms`), and 0 where none declares one
/// (nothing then waits for a stop). Each pool's own check adds the fault's share to its own.
fn stop_within_ms(contract: &Contract) -> u64 {
    if contract.is_reference() {
        return contract.cancellation().stop_within_ms;
    }
    (contract.pools.values())
        .filter_map(|p| p.cancellation.as_ref())
        .map(|c| c.stop_within_ms)
        .max()
        .unwrap_or(0)
}

/// The worst one-way delay the fault adds to `direction`.
fn one_way(fault: &Fault, direction: Stream) -> Option<(Duration, String)> {
    if !fault.stream.covers(direction) {
        return None;
    }
    match fault.toxic {
        Toxic::Latency { latency, jitter } if !(latency + jitter).is_zero() => Some((
            latency + jitter,
            format!(
                "latency {} ms + jitter {} ms",
                latency.as_millis(),
                jitter.as_millis()
            ),
        )),
        Toxic::SlowClose { delay } if direction == Stream::Upstream => {
            Some((delay, format!("a close held back {} ms", delay.as_millis())))
        }
        _ => None,
    }
}

/// Twice the jitter of a latency toxic on the downstream: how much earlier than it happened
/// the client may see an event timed from an earlier answer.
fn close_early(fault: &Fault, contract: &Contract) -> Option<Adjustment> {
    let Toxic::Latency { jitter, .. } = fault.toxic else {
        return None;
    };
    if jitter.is_zero() || !fault.stream.covers(Stream::Downstream) {
        return None;
    }
    let base = Bound::CloseEarly.base(contract).as_millis() as u64;
    Some(Adjustment {
        bound: Bound::CloseEarly,
        base_ms: base,
        added_ms: 2 * jitter.as_millis() as u64,
        why: format!(
            "{}: {base} ms + 2 × {} ms (jitter: the answer may arrive late, the close early)",
            Bound::CloseEarly.name(),
            jitter.as_millis()
        ),
    })
}

fn adjustment(fault: &Fault, bound: Bound, contract: &Contract) -> Option<Adjustment> {
    if bound == Bound::CloseEarly {
        return close_early(fault, contract);
    }
    let (up, down) = bound.crosses();
    // slow_close delays only a close: of the bounds, only a disconnect's stop waits for one.
    if matches!(fault.toxic, Toxic::SlowClose { .. }) && bound != Bound::StopWithin {
        return None;
    }
    let legs: Vec<(Duration, String)> = [(up, Stream::Upstream), (down, Stream::Downstream)]
        .into_iter()
        .filter(|(crossed, _)| *crossed)
        .filter_map(|(_, direction)| one_way(fault, direction))
        .collect();
    let added: Duration = legs.iter().map(|(d, _)| *d).sum();
    if added.is_zero() {
        return None;
    }
    let base = bound.base(contract).as_millis() as u64;
    let why = match legs.as_slice() {
        [(d, what), (_, same)] if what == same => {
            format!("2 × {} ms ({what}, each way)", d.as_millis())
        }
        _ => legs
            .iter()
            .map(|(d, what)| format!("{} ms ({what})", d.as_millis()))
            .collect::<Vec<_>>()
            .join(" + "),
    };
    Some(Adjustment {
        bound,
        base_ms: base,
        added_ms: added.as_millis() as u64,
        why: format!("{}: {base} ms + {why}", bound.name()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adjustments(spec: &str) -> Adjustments {
        Adjustments::new(&spec.parse().unwrap(), Contract::embedded())
    }

    #[test]
    fn latency_adds_its_worst_one_way_delay_per_direction_crossed() {
        let a = adjustments("latency:latency=50,jitter=10");
        let c = Contract::embedded();
        let refusal = c.tolerances.refusal_latency_ms;
        assert_eq!(a.added(Bound::RefusalLatency), Duration::from_millis(120));
        assert_eq!(
            a.bound(Bound::RefusalLatency, c),
            Duration::from_millis(refusal + 120)
        );
        assert_eq!(a.added(Bound::CloseLate), Duration::from_millis(60));
        assert_eq!(a.added(Bound::CloseEarly), Duration::from_millis(20));
        assert_eq!(
            a.adjusted[0].why,
            format!(
                "refusal latency: {refusal} ms + 2 × 60 ms (latency 50 ms + jitter 10 ms, each way)"
            )
        );
        let up = adjustments("latency:latency=50,stream=upstream");
        assert_eq!(up.added(Bound::RefusalLatency), Duration::from_millis(50));
        assert_eq!(up.added(Bound::CloseLate), Duration::ZERO);
    }

    #[test]
    fn only_jitter_spreads_round_trips() {
        let ms = Duration::from_millis;
        assert_eq!(
            adjustments("latency:latency=50,jitter=10").round_trip_spread(),
            ms(40)
        );
        assert_eq!(
            adjustments("latency:latency=150,jitter=150,stream=downstream").round_trip_spread(),
            ms(300)
        );
        // A draw is clamped at 0: 20 ± 50 ms spans 0 to 70 ms.
        assert_eq!(
            adjustments("latency:latency=20,jitter=50").round_trip_spread(),
            ms(140)
        );
        for spec in [
            "latency:latency=500",
            "bandwidth:rate=10",
            "slow_close:delay=300",
        ] {
            assert_eq!(
                adjustments(spec).round_trip_spread(),
                Duration::ZERO,
                "{spec}"
            );
        }
        assert_eq!(Adjustments::default().round_trip_spread(), Duration::ZERO);
        assert_eq!(
            adjustments("latency:latency=500,stream=upstream").round_trip(),
            (ms(500), ms(500))
        );
        assert_eq!(
            adjustments("latency:latency=20,jitter=5").round_trip(),
            (ms(30), ms(50))
        );
    }

    #[test]
    fn only_a_fault_that_drops_bytes_leaves_nothing_to_observe() {
        let why = adjustments("blackhole:stream=downstream")
            .unobservable()
            .unwrap();
        assert_eq!(
            why,
            "it drops every byte (downstream) and keeps every connection open: no answer reaches the checker, so nothing the check judges can be observed"
        );
        let why = adjustments("timeout:timeout=500").unobservable().unwrap();
        assert!(why.contains("closes each connection after 500 ms"), "{why}");
        for spec in [
            "latency:latency=20",
            "bandwidth:rate=10",
            "reset_peer:timeout=100",
        ] {
            assert_eq!(adjustments(spec).unobservable(), None, "{spec}");
        }
        assert_eq!(Adjustments::default().unobservable(), None);
    }

    #[test]
    fn no_fault_and_byte_shaping_add_nothing() {
        let c = Contract::embedded();
        let none = Adjustments::default();
        assert_eq!(
            none.bound(Bound::TimeoutLate, c),
            Duration::from_millis(c.tolerances.timeout_late_ms)
        );
        assert!(
            adjustments("slicer:average_size=1,delay=10")
                .adjusted
                .is_empty()
        );
        assert!(adjustments("bandwidth:rate=10").adjusted.is_empty());
        let bandwidth = adjustments("bandwidth:rate=10000");
        let second = Duration::from_secs(1);
        assert_eq!(
            bandwidth.cannot_carry(33_554_433, Stream::Upstream, second),
            Some("33554433 bytes take at least 3355 ms at 10000 KB/s".into())
        );
        assert_eq!(
            bandwidth.cannot_carry(9_000_000, Stream::Upstream, second),
            None
        );
        let slicer = adjustments("slicer:average_size=1024,size_variation=512,delay=20");
        assert!(
            slicer
                .cannot_carry(58_720_256, Stream::Upstream, Duration::from_millis(700))
                .is_some()
        );
        assert_eq!(slicer.cannot_carry(1 << 20, Stream::Upstream, second), None);
        let up = adjustments("bandwidth:rate=1,stream=downstream");
        assert_eq!(up.cannot_carry(1 << 30, Stream::Upstream, second), None);
        assert_eq!(
            adjustments("slicer:average_size=100,size_variation=25,delay=50000")
                .byte_rates(Stream::Upstream),
            Some((1500.0, 2500.0))
        );
        assert_eq!(
            bandwidth.byte_rates(Stream::Downstream),
            Some((10_000_000.0, 10_000_000.0))
        );
        assert_eq!(
            adjustments("latency:latency=5").byte_rates(Stream::Upstream),
            None
        );
        let close = adjustments("slow_close:delay=300");
        assert_eq!(close.added(Bound::StopWithin), Duration::from_millis(300));
        assert_eq!(close.added(Bound::RefusalLatency), Duration::ZERO);
    }
}
