//! What a fault changes in the expectations: for each time bound a check judges by, how much
//! the fault adds and why, in a sentence the report shows. Checks read those bounds here, so a
//! bound is never widened silently: with no fault every addition is zero, and under a fault
//! each addition is listed in the terminal header and the JSON manifest.
//!
//! Only what follows from the fault's own numbers is added. Latency adds its one-way delay
//! (latency plus jitter, the worst draw) once per direction a bound's measurement crosses; a
//! close held back by `slow_close` reaches the server that much later. The byte-shaping toxics
//! (bandwidth, slicer) add time in proportion to the bytes a request moves, which no single
//! bound can state, so they add nothing here and their checks judge the contract's own bounds.

use std::time::Duration;

use plimsoll_spec::Contract;
use serde::Serialize;

use super::spec::{Fault, Stream, Toxic};

/// A time bound of the contract that a check measures on the client's clock across the
/// network, so a fault between client and server can lengthen what the client sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
}

impl Bound {
    const ALL: [Bound; 4] = [
        Bound::RefusalLatency,
        Bound::TimeoutLate,
        Bound::CloseLate,
        Bound::StopWithin,
    ];

    /// The contract's value of this bound.
    fn base(self, contract: &Contract) -> Duration {
        Duration::from_millis(match self {
            Bound::RefusalLatency => contract.tolerances.refusal_latency_ms,
            Bound::TimeoutLate | Bound::CloseLate => contract.tolerances.timeout_late_ms,
            Bound::StopWithin => contract.clauses.b3.value.stop_within_ms,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Bound::RefusalLatency => "refusal latency",
            Bound::TimeoutLate => "timeout answer late by",
            Bound::CloseLate => "idle close late by",
            Bound::StopWithin => "stop after a disconnect",
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Adjustments {
    /// The fault, as its spec (`None`: a fault-free run).
    pub fault: Option<String>,
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
            adjusted,
        }
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

fn adjustment(fault: &Fault, bound: Bound, contract: &Contract) -> Option<Adjustment> {
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
        let close = adjustments("slow_close:delay=300");
        assert_eq!(close.added(Bound::StopWithin), Duration::from_millis(300));
        assert_eq!(close.added(Bound::RefusalLatency), Duration::ZERO);
    }
}
