//! What a fault does to one direction of one connection, as numbers: when a chunk is due, how
//! a write is cut and paced, whether data is dropped, how long a close is held. No sockets
//! here, so each toxic's arithmetic is tested on its own; `pump` applies it.

use std::time::Duration;

use tokio::time::Instant;

use super::spec::{Fault, Stream, Toxic};
use crate::rng::SplitMix64;

/// One direction's shaping, with its own seeded draws (jitter, slice sizes).
#[derive(Debug)]
pub(crate) struct Shape {
    /// The toxic, when the fault's stream covers this direction.
    toxic: Option<Toxic>,
    rng: SplitMix64,
    /// The latest due time handed out: chunks keep their order whatever the jitter draws.
    last_due: Option<Instant>,
    /// When the last piece's pause ends: pauses add up on this clock rather than from each
    /// wake-up, so pauses shorter than the timer's millisecond still pace at their mean.
    paced: Option<Instant>,
}

/// How far behind its pacing clock a direction may fall and still catch up (sending at once):
/// beyond it, the direction was idle, and pacing starts again from now.
const CATCH_UP: Duration = Duration::from_millis(10);

impl Shape {
    /// The shaping of `direction` (`Upstream` or `Downstream`) under `fault`, drawing from
    /// `rng`.
    pub(crate) fn new(fault: &Fault, direction: Stream, rng: SplitMix64) -> Shape {
        Shape {
            toxic: fault.stream.covers(direction).then_some(fault.toxic),
            rng,
            last_due: None,
            paced: None,
        }
    }

    /// When a chunk read at `now` may be written: `now` plus the latency drawn for it, never
    /// before the previous chunk's.
    pub(crate) fn due(&mut self, now: Instant) -> Instant {
        let delay = match self.toxic {
            Some(Toxic::Latency { latency, jitter }) => self.latency(latency, jitter),
            _ => Duration::ZERO,
        };
        let due = (now + delay).max(self.last_due.unwrap_or(now));
        self.last_due = Some(due);
        due
    }

    /// `latency` plus a uniform draw in `[-jitter, +jitter]`, at least zero.
    fn latency(&mut self, latency: Duration, jitter: Duration) -> Duration {
        if jitter.is_zero() {
            return latency;
        }
        let offset = jitter.as_secs_f64() * (2.0 * self.rng.next_f64() - 1.0);
        Duration::from_secs_f64((latency.as_secs_f64() + offset).max(0.0))
    }

    /// The next piece of a write with `remaining` bytes left, and the pause after it: a
    /// slice and the slicer's delay, a tenth of a second's worth at the bandwidth and the time
    /// it takes, or the whole rest at once.
    pub(crate) fn piece(&mut self, remaining: usize) -> (usize, Duration) {
        match self.toxic {
            Some(Toxic::Slicer {
                average_size,
                size_variation,
                delay,
            }) => {
                let span = 2 * size_variation as u64 + 1;
                let drawn = average_size - size_variation + (self.rng.next_u64() % span) as usize;
                (drawn.min(remaining), delay)
            }
            Some(Toxic::Bandwidth { rate_kb }) => {
                let per_second = rate_kb.saturating_mul(1000);
                let piece = ((per_second / 10).max(1) as usize).min(remaining);
                (
                    piece,
                    Duration::from_secs_f64(piece as f64 / per_second as f64),
                )
            }
            _ => (remaining, Duration::ZERO),
        }
    }

    /// When the pause after a piece written at `now` ends: the previous pause's end plus
    /// `pause` (already past when the timer woke late, so the next piece goes at once), or
    /// `now` plus `pause` after an idle spell.
    pub(crate) fn pace(&mut self, now: Instant, pause: Duration) -> Instant {
        let from = match self.paced {
            Some(p) if p + CATCH_UP >= now => p,
            _ => now,
        };
        let at = from + pause;
        self.paced = Some(at);
        at
    }

    /// Whether the data of this direction is dropped (`timeout`, `blackhole`).
    pub(crate) fn drops(&self) -> bool {
        matches!(self.toxic, Some(Toxic::Timeout { .. }))
    }

    /// How long a close is held back before it is passed on (`slow_close`).
    pub(crate) fn close_delay(&self) -> Duration {
        match self.toxic {
            Some(Toxic::SlowClose { delay }) => delay,
            _ => Duration::ZERO,
        }
    }

    /// Whether a close of this direction is passed on as a reset (`reset_peer:on_close=1`).
    pub(crate) fn close_resets(&self) -> bool {
        matches!(self.toxic, Some(Toxic::ResetPeer { on_close: true, .. }))
    }

    /// Whether the bytes of this direction count towards `reset_peer`'s `bytes`.
    pub(crate) fn counts_bytes(&self) -> bool {
        matches!(self.toxic, Some(Toxic::ResetPeer { bytes: Some(_), .. }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(spec: &str, direction: Stream, seed: u64) -> Shape {
        Shape::new(&spec.parse().unwrap(), direction, SplitMix64::new(seed))
    }

    #[test]
    fn jitter_stays_within_its_bounds_keeps_order_and_repeats_by_seed() {
        let draws = |seed| {
            let mut s = shape("latency:latency=50,jitter=20", Stream::Upstream, seed);
            let now = Instant::now();
            (0..500).map(|_| s.due(now) - now).collect::<Vec<_>>()
        };
        let a = draws(7);
        assert_eq!(a, draws(7));
        assert_ne!(a, draws(8));
        assert!(a.windows(2).all(|w| w[0] <= w[1]), "order kept");
        assert!(a[0] >= Duration::from_millis(30));
        assert!(*a.last().unwrap() <= Duration::from_millis(70));
    }

    #[test]
    fn a_toxic_acts_only_on_its_stream() {
        let mut s = shape("latency:latency=50,stream=upstream", Stream::Downstream, 1);
        let now = Instant::now();
        assert_eq!(s.due(now), now);
        let mut s = shape("latency:latency=50,stream=upstream", Stream::Upstream, 1);
        assert_eq!(s.due(now), now + Duration::from_millis(50));
    }

    #[test]
    fn slices_and_bandwidth_pieces_cover_the_write_exactly() {
        let mut s = shape(
            "slicer:average_size=4,size_variation=2,delay=1000",
            Stream::Both,
            3,
        );
        let (mut left, mut pieces) = (1000usize, 0);
        while left > 0 {
            let (n, pause) = s.piece(left);
            assert!((1..=6).contains(&n) && n <= left);
            assert_eq!(pause, Duration::from_millis(1));
            left -= n;
            pieces += 1;
        }
        assert!(pieces >= 1000 / 6);
        let mut s = shape("slicer:average_size=4,delay=200", Stream::Both, 3);
        let now = Instant::now();
        let us = Duration::from_micros;
        assert_eq!(s.pace(now, us(200)), now + us(200));
        // Woken 1 ms late: the next pauses count from the clock, not from the wake-up.
        assert_eq!(s.pace(now + us(1200), us(200)), now + us(400));
        assert_eq!(
            s.pace(now + Duration::from_secs(1), us(200)),
            now + Duration::from_secs(1) + us(200)
        );
        let mut s = shape("bandwidth:rate=10", Stream::Both, 3);
        let (n, pause) = s.piece(5000);
        assert_eq!((n, pause), (1000, Duration::from_millis(100)));
        assert_eq!(s.piece(1).0, 1);
    }
}
