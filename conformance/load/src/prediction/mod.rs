//! The queueing-theory prediction a load profile is held to: what fraction of attempts a
//! server with `c` workers and `K` queue places must refuse, given how the load arrives.
//!
//! Every model here is a birth–death chain over the number of requests in the system
//! (0..=c+K): arrivals push it up, the `min(n, c)` busy workers pull it down at rate 1/S each.
//! What differs is the arrival intensity in state `n`:
//!
//! - open-loop Poisson arrivals at rate λ: constant λ. Refused fraction (PASTA) = the
//!   probability of a full system: **Erlang-B** for K = 0, **M/M/c/K** for K > 0.
//! - a closed population of N users, each thinking an exponential time of mean θ between
//!   answers: (N − n)/θ. An arriving user sees the system as N − 1 users would leave it (the
//!   arrival theorem), so the refused fraction is the full-system probability of the N − 1
//!   chain: **Engset** for K = 0, the finite-source M/M/c/K/N for K > 0.
//!
//! For K = 0 both results are insensitive to the service-time distribution (only its mean
//! counts), which is why the pipeline's own fixed cost on top of the exponential hold does not
//! bias the prediction. With K > 0 the exponential hold is what makes the formula apply.
//!
//! Behind a balancer ([`Fleet`]) the servers are R replicas of `c` workers and `K` places
//! each, and the chain is the fleet's (`fleet.rs`): solved exactly for the balancer's policy.

mod fleet;
mod formulas;
mod simulation;

pub use fleet::{Balancer, Fleet, MAX_STATES, state_count};
pub use formulas::{engset, erlang_b, finite_source_blocking, mmck_blocking};
pub use simulation::{dispersion, simulate};

use formulas::distribution;

/// How the load generator produces attempts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// Open loop: a Poisson stream at this rate (attempts per second).
    Poisson {
        /// λ, attempts per second.
        rate_per_s: f64,
    },
    /// Closed loop: `users` users, each waiting for its answer and then thinking an
    /// exponential time of this mean before the next attempt.
    Closed {
        /// N, the population: no more than this many attempts are ever in flight.
        users: u32,
        /// θ, seconds from an answer to the user's next attempt, on average.
        mean_think_s: f64,
    },
}

/// A server of `workers` slots and `queue` waiting places under some arrivals — or, with a
/// [`Fleet`], that many replicas of such a server behind a balancer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    /// Per replica.
    pub workers: u32,
    /// Per replica.
    pub queue: u32,
    /// Mean time a worker slot is held per admitted request.
    pub mean_service_s: f64,
    /// How the attempts come: the arrival intensity in each state of the chain.
    pub arrivals: Arrivals,
    /// `None`: one server, no balancer.
    pub fleet: Option<Fleet>,
}

impl Model {
    /// The formula's name, as the reports print it.
    pub fn formula(&self) -> String {
        let single = match (self.arrivals, self.queue) {
            (Arrivals::Poisson { .. }, 0) => "Erlang-B",
            (Arrivals::Poisson { .. }, _) => "M/M/c/K",
            (Arrivals::Closed { .. }, 0) => "Engset",
            (Arrivals::Closed { .. }, _) => "Engset with queue (M/M/c/K/N)",
        };
        match self.fleet {
            None => single.to_owned(),
            Some(f) => format!(
                "{single} chain of {} replicas, {} balancer",
                f.replicas,
                f.balancer.as_str()
            ),
        }
    }

    /// Workers of every replica together.
    pub fn total_workers(&self) -> u32 {
        self.workers * self.fleet.map_or(1, |f| f.replicas)
    }

    /// The parameters in one line.
    pub fn describe(&self) -> String {
        let replicas = match self.fleet {
            None => String::new(),
            Some(f) => format!("R={} × ", f.replicas),
        };
        let base = format!(
            "{replicas}c={}, K={}, S={:.1} ms",
            self.workers,
            self.queue,
            self.mean_service_s * 1000.0
        );
        match self.arrivals {
            Arrivals::Poisson { rate_per_s } => format!("{base}, λ={rate_per_s:.1}/s"),
            Arrivals::Closed {
                users,
                mean_think_s,
            } => {
                format!("{base}, N={users}, θ={:.1} ms", mean_think_s * 1000.0)
            }
        }
    }

    /// The fraction of attempts refused.
    pub fn blocking(&self) -> f64 {
        if let Some(fleet) = self.fleet {
            return self.solve(fleet).blocking;
        }
        let (c, k) = (self.workers, self.queue);
        match self.arrivals {
            Arrivals::Poisson { rate_per_s } => {
                let a = rate_per_s * self.mean_service_s;
                if k == 0 {
                    erlang_b(c, a)
                } else {
                    mmck_blocking(c, k, a)
                }
            }
            Arrivals::Closed {
                users,
                mean_think_s,
            } => finite_source_blocking(c, k, users, self.mean_service_s / mean_think_s),
        }
    }

    /// Attempts per second the arrivals produce against this server.
    pub fn attempt_rate(&self) -> f64 {
        if let Some(fleet) = self.fleet {
            return self.solve(fleet).attempt_rate;
        }
        match self.arrivals {
            Arrivals::Poisson { rate_per_s } => rate_per_s,
            Arrivals::Closed {
                users,
                mean_think_s,
            } => {
                let beta = self.mean_service_s / mean_think_s;
                let n = f64::from(users);
                let p = distribution(self.workers, self.queue, |j| (n - j as f64).max(0.0) * beta);
                let thinking: f64 = p
                    .iter()
                    .enumerate()
                    .map(|(j, p)| (n - j as f64).max(0.0) * p)
                    .sum();
                thinking / mean_think_s
            }
        }
    }

    fn solve(&self, fleet: Fleet) -> fleet::Solution {
        fleet::solve(
            fleet,
            self.workers,
            self.queue,
            self.mean_service_s,
            self.arrivals,
        )
    }

    /// Admitted requests per second.
    pub fn carried_rate(&self) -> f64 {
        self.attempt_rate() * (1.0 - self.blocking())
    }

    /// The same server and users at another attempt rate: the think time is refitted (for
    /// judging what the server did with the attempts it really got, whoever slowed them).
    pub fn at_attempt_rate(&self, rate_per_s: f64) -> Model {
        let arrivals = match self.arrivals {
            Arrivals::Poisson { .. } => Arrivals::Poisson { rate_per_s },
            Arrivals::Closed {
                users,
                mean_think_s,
            } => Arrivals::Closed {
                users,
                mean_think_s: think_for_rate(self, users, rate_per_s).unwrap_or(mean_think_s),
            },
        };
        Model { arrivals, ..*self }
    }

    /// What an open-loop Poisson stream at the same attempt rate would see: the reference
    /// figure load tools that ignore the generator's own feedback would quote.
    pub fn open_loop_equivalent(&self) -> Model {
        Model {
            arrivals: Arrivals::Poisson {
                rate_per_s: self.attempt_rate(),
            },
            ..*self
        }
    }
}

/// The mean think time that makes `users` closed-loop users attempt `target_rate` per second
/// against `server` (its arrivals are ignored), or `None` when even zero think time cannot
/// reach it.
pub fn think_for_rate(server: &Model, users: u32, target_rate: f64) -> Option<f64> {
    let rate = |theta: f64| {
        Model {
            arrivals: Arrivals::Closed {
                users,
                mean_think_s: theta,
            },
            ..*server
        }
        .attempt_rate()
    };
    let (mut lo, mut hi) = (1e-6, 1e6);
    if rate(lo) < target_rate {
        return None;
    }
    // The attempt rate falls as θ grows; bisect in log space. 80 halvings of the 27.6 wide
    // log range leave an error far below f64's precision (and a fleet's chain is solved at
    // every step: 16 replicas of 4 workers take 0.3 s a step in a debug build).
    for _ in 0..80 {
        let mid = (lo * hi).sqrt();
        if rate(mid) > target_rate {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some((lo * hi).sqrt())
}

/// The acceptance interval for a measured refused fraction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// The model's refused fraction.
    pub predicted: f64,
    /// Attempts the measurement counted.
    pub attempts: usize,
    /// σ of a binomial at that sample size.
    pub binomial_sigma: f64,
    /// How much wider the spread of simulated runs of the same model is than a binomial's:
    /// refusals come in bursts (a busy spell refuses several attempts in a row), so they are
    /// not independent coin flips. At least 1.
    pub dispersion: f64,
    /// How many σ the interval spans on each side.
    pub z: f64,
    /// The least refused fraction accepted (never below 0).
    pub low: f64,
    /// The most refused fraction accepted (never above 1).
    pub high: f64,
}

impl Interval {
    /// Whether a measured refused fraction is accepted, bounds included.
    pub fn contains(&self, measured: f64) -> bool {
        (self.low..=self.high).contains(&measured)
    }

    /// The spread the interval is built on: the binomial σ widened by the dispersion.
    pub fn sigma(&self) -> f64 {
        self.binomial_sigma * self.dispersion
    }
}

/// The `z`σ interval around the model's prediction for `attempts` attempts. σ is the
/// binomial one times the dispersion measured on simulated runs of the same model (seeded, so
/// the interval is reproducible); the interval is never narrower than one attempt.
pub fn interval(model: &Model, attempts: usize, z: f64, seed: u64) -> Interval {
    let p = model.blocking();
    let n = attempts.max(1) as f64;
    let binomial_sigma = (p * (1.0 - p) / n).sqrt();
    let dispersion = dispersion(model, attempts, seed);
    let half = (z * binomial_sigma * dispersion).max(1.0 / n);
    Interval {
        predicted: p,
        attempts,
        binomial_sigma,
        dispersion,
        z,
        low: (p - half).max(0.0),
        high: (p + half).min(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::formulas::tests::close;
    use super::*;

    /// One server of `workers` and no queue, `users` closed-loop users thinking `theta`.
    pub(super) fn single(workers: u32, service: f64, users: u32, theta: f64) -> Model {
        Model {
            workers,
            queue: 0,
            mean_service_s: service,
            arrivals: Arrivals::Closed {
                users,
                mean_think_s: theta,
            },
            fleet: None,
        }
    }

    #[test]
    fn closed_model_attempt_rate_and_think_time_invert() {
        let m = single(4, 0.025, 64, 1.0);
        let theta = think_for_rate(&m, 64, 112.0).unwrap();
        let m = single(4, 0.025, 64, theta);
        assert!(close(m.attempt_rate(), 112.0, 1e-6));
        assert!(close(m.at_attempt_rate(80.0).attempt_rate(), 80.0, 1e-6));
        assert_eq!(m.formula(), "Engset");
        // Carried load never exceeds the workers.
        assert!(m.carried_rate() * m.mean_service_s <= 4.0);
        // Unreachable: 2 users cannot make 1000 attempts/s against 100 ms of service.
        assert!(think_for_rate(&single(4, 0.1, 2, 1.0), 2, 1000.0).is_none());
    }

    #[test]
    fn the_interval_separates_one_worker_more_or_less() {
        // The steady profile's operating point: 0.7 × capacity, 1400 attempts.
        let service = 0.023;
        let theta = think_for_rate(&single(4, service, 64, 1.0), 64, 0.7 * 4.0 / service).unwrap();
        let model = |workers| single(workers, service, 64, theta);
        let iv = interval(&model(4), 1400, 3.0, 1);
        assert!(iv.dispersion > 1.1, "refusals cluster: {}", iv.dispersion);
        assert!(iv.contains(iv.predicted));
        assert!(
            !iv.contains(model(5).blocking()),
            "{iv:?} vs {}",
            model(5).blocking()
        );
        assert!(
            !iv.contains(model(3).blocking()),
            "{iv:?} vs {}",
            model(3).blocking()
        );
    }
}
