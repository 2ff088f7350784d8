//! What discover tells its caller as it goes ([`Step`]): a line for the log, the phase under
//! way, and about how long the rest takes. The caller draws what it likes (the binary: an
//! `indicatif` bar on an interactive stderr, plain lines otherwise); the library draws
//! nothing. A ramp against a high ceiling can take minutes, and a person watching should see
//! that it moves and roughly when it ends.

use std::time::Duration;

/// The pause discover leaves between two phases or bursts, for the service to take its
/// workers back after the answers.
pub const SETTLE: Duration = Duration::from_millis(100);

/// A phase of the measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The bursts of 1, 2, 3, … held requests.
    Ramp,
    /// The full pool probed: the refusal and the connection after it.
    Refusal,
    /// The queue's order trial.
    Order,
    /// One request held for the user's bound, to see a deadline answer it.
    Deadline,
    /// A rate limit's bucket left to fill, nothing sent.
    Quiet,
    /// A rate limit's burst into its full bucket.
    Burst,
    /// A rate limit's rate, probed at a known pace.
    Pace,
}

impl Phase {
    /// The phase in a word, as the bar shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Ramp => "ramp",
            Phase::Refusal => "refusal",
            Phase::Deadline => "deadline",
            Phase::Order => "order",
            Phase::Quiet => "quiet",
            Phase::Burst => "burst",
            Phase::Pace => "pace",
        }
    }
}

/// One thing discover says as it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The phase under way.
    pub phase: Phase,
    /// What starts or was seen, in words: one line of the log.
    pub line: String,
    /// About how long the rest of the measurement takes, from what is known so far (an
    /// estimate on the long side, revised at every step).
    pub left: Duration,
}

/// About how long the probe of the full pool takes: a settle, then one hold while the probes
/// run.
pub(super) fn refusal_phase(hold: Duration) -> Duration {
    SETTLE + hold
}

/// About how long the order trial takes with `workers` and `queue` places: a settle, the
/// holders' hold, then one hold per wave of waiting requests and one more for the last
/// answers. None when no trial runs (fewer than two places).
pub(super) fn order_phase(hold: Duration, workers: usize, queue: usize) -> Duration {
    if queue < 2 {
        return Duration::ZERO;
    }
    let waves = queue.div_ceil(workers.max(1)) as u32;
    SETTLE + hold * (waves + 2)
}

/// About how long the ramp takes from the burst of `size` to the one of `ceiling`, then the
/// phases after it: each burst as long as the last one took (`last`, at least a hold) plus
/// the settle, then the refusal's probe and the order trial the queue seen so far (`workers`,
/// `queue`) would run.
pub(super) fn left_in_ramp(
    (size, ceiling): (usize, usize),
    hold: Duration,
    last: Duration,
    (workers, queue): (usize, usize),
) -> Duration {
    let bursts = (ceiling + 1).saturating_sub(size) as u32;
    (last.max(hold) + SETTLE) * bursts + refusal_phase(hold) + order_phase(hold, workers, queue)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLD: Duration = Duration::from_millis(400);

    #[test]
    fn the_ramp_s_time_left_counts_the_bursts_to_the_ceiling_then_the_phases_after_it() {
        // Burst 1 of 8, nothing seen yet: eight bursts of a hold and a settle, then the probe.
        assert_eq!(
            left_in_ramp((1, 8), HOLD, Duration::ZERO, (0, 0)),
            Duration::from_millis(8 * 500 + 500)
        );
        // Burst 5 of 8, the last burst took two holds, one worker and three places seen: four
        // bursts of 900 ms, the probe, and the order trial's three waves.
        assert_eq!(
            left_in_ramp((5, 8), HOLD, HOLD * 2, (1, 3)),
            Duration::from_millis(4 * 900 + 500 + 100 + 5 * 400)
        );
        // Past the ceiling (after its burst): the phases after the ramp alone.
        assert_eq!(
            left_in_ramp((9, 8), HOLD, HOLD, (1, 0)),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn no_order_trial_runs_with_fewer_than_two_places() {
        assert_eq!(order_phase(HOLD, 2, 0), Duration::ZERO);
        assert_eq!(order_phase(HOLD, 2, 1), Duration::ZERO);
        assert_eq!(order_phase(HOLD, 2, 4), SETTLE + HOLD * 4);
        assert_eq!(order_phase(HOLD, 0, 2), SETTLE + HOLD * 4);
    }
}
