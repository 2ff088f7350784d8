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

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::rng::SplitMix64;

/// Erlang-B blocking probability for `c` servers offered `a` Erlangs (λ·S), by the stable
/// recursion B(0) = 1, B(n) = a·B(n−1) / (n + a·B(n−1)).
pub fn erlang_b(c: u32, a: f64) -> f64 {
    (1..=c).fold(1.0, |b, n| a * b / (f64::from(n) + a * b))
}

/// M/M/c/K blocking probability (`k` waiting places, `a` = λ·S Erlangs offered).
pub fn mmck_blocking(c: u32, k: u32, a: f64) -> f64 {
    full_probability(c, k, |_| a)
}

/// Engset call congestion: the fraction of attempts refused when `n` users, each offering
/// `beta` = S/θ while idle, share `c` servers with no queue.
pub fn engset(c: u32, n: u32, beta: f64) -> f64 {
    finite_source_blocking(c, 0, n, beta)
}

/// The finite-source M/M/c/K/N call congestion (Engset with a queue): the full-system
/// probability of the chain with `n − 1` users.
pub fn finite_source_blocking(c: u32, k: u32, n: u32, beta: f64) -> f64 {
    let others = f64::from(n.saturating_sub(1));
    full_probability(c, k, |j| (others - j as f64).max(0.0) * beta)
}

/// Stationary distribution of the chain with arrival intensity `offered(j)` (in units of the
/// service rate) in state `j`, computed in log space so large `c` and load cannot overflow.
fn distribution(c: u32, k: u32, offered: impl Fn(usize) -> f64) -> Vec<f64> {
    let states = (c + k) as usize + 1;
    let mut log_p = Vec::with_capacity(states);
    log_p.push(0.0f64);
    for j in 1..states {
        let up = offered(j - 1);
        let down = j.min(c as usize) as f64;
        let prev = log_p[j - 1];
        log_p.push(if up > 0.0 {
            prev + up.ln() - down.ln()
        } else {
            f64::NEG_INFINITY
        });
    }
    let max = log_p.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = log_p.iter().map(|l| (l - max).exp()).collect();
    let total: f64 = weights.iter().sum();
    weights.into_iter().map(|w| w / total).collect()
}

fn full_probability(c: u32, k: u32, offered: impl Fn(usize) -> f64) -> f64 {
    *distribution(c, k, offered)
        .last()
        .expect("at least one state")
}

/// How the load generator produces attempts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// Open loop: a Poisson stream at this rate (attempts per second).
    Poisson { rate_per_s: f64 },
    /// Closed loop: `users` users, each waiting for its answer and then thinking an
    /// exponential time of this mean before the next attempt.
    Closed { users: u32, mean_think_s: f64 },
}

/// A server of `workers` slots and `queue` waiting places under some arrivals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    pub workers: u32,
    pub queue: u32,
    /// Mean time a worker slot is held per admitted request.
    pub mean_service_s: f64,
    pub arrivals: Arrivals,
}

impl Model {
    /// The formula's name, as the reports print it.
    pub fn formula(&self) -> &'static str {
        match (self.arrivals, self.queue) {
            (Arrivals::Poisson { .. }, 0) => "Erlang-B",
            (Arrivals::Poisson { .. }, _) => "M/M/c/K",
            (Arrivals::Closed { .. }, 0) => "Engset",
            (Arrivals::Closed { .. }, _) => "Engset with queue (M/M/c/K/N)",
        }
    }

    /// The parameters in one line.
    pub fn describe(&self) -> String {
        let base = format!(
            "c={}, K={}, S={:.1} ms",
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
                mean_think_s: think_for_rate(
                    self.workers,
                    self.queue,
                    users,
                    self.mean_service_s,
                    rate_per_s,
                )
                .unwrap_or(mean_think_s),
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
/// against this server, or `None` when even zero think time cannot reach it.
pub fn think_for_rate(
    workers: u32,
    queue: u32,
    users: u32,
    mean_service_s: f64,
    target_rate: f64,
) -> Option<f64> {
    let rate = |theta: f64| {
        Model {
            workers,
            queue,
            mean_service_s,
            arrivals: Arrivals::Closed {
                users,
                mean_think_s: theta,
            },
        }
        .attempt_rate()
    };
    let (mut lo, mut hi) = (1e-6, 1e6);
    if rate(lo) < target_rate {
        return None;
    }
    // The attempt rate falls as θ grows; bisect in log space.
    for _ in 0..200 {
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
    pub low: f64,
    pub high: f64,
}

impl Interval {
    pub fn contains(&self, measured: f64) -> bool {
        (self.low..=self.high).contains(&measured)
    }

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

/// Ratio of the simulated spread of the refused fraction to the binomial one (≥ 1).
pub fn dispersion(model: &Model, attempts: usize, seed: u64) -> f64 {
    // Long enough runs for the ratio to settle, short enough to stay well under a second.
    let n = attempts.clamp(200, 1500);
    let reps = 160;
    let (mean, sd) = simulate(model, n, reps, seed);
    let binomial = (mean * (1.0 - mean) / n as f64).sqrt();
    if binomial > 0.0 && sd.is_finite() {
        (sd / binomial).max(1.0)
    } else {
        1.0
    }
}

/// Mean and standard deviation of the refused fraction over `reps` simulated runs of
/// `attempts` attempts each (after a warm-up), with exponential service and think times.
pub fn simulate(model: &Model, attempts: usize, reps: usize, seed: u64) -> (f64, f64) {
    let mut rng = SplitMix64::new(seed);
    let xs: Vec<f64> = (0..reps)
        .map(|_| simulate_once(model, attempts, &mut rng))
        .collect();
    let mean = xs.iter().sum::<f64>() / reps as f64;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (reps.max(2) - 1) as f64;
    (mean, var.sqrt())
}

/// An event of the simulation, ordered earliest first in a max-heap.
#[derive(PartialEq)]
struct Event {
    at: f64,
    kind: Kind,
}

/// The user is `Some(index)` in a closed model, `None` for Poisson arrivals.
#[derive(PartialEq, Clone, Copy)]
enum Kind {
    Attempt(Option<u32>),
    Departure(Option<u32>),
}

impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    fn cmp(&self, other: &Self) -> Ordering {
        other.at.total_cmp(&self.at)
    }
}

fn simulate_once(model: &Model, attempts: usize, rng: &mut SplitMix64) -> f64 {
    let c = model.workers as usize;
    let k = model.queue as usize;
    let s = model.mean_service_s;
    let mut events = BinaryHeap::new();
    let think = match model.arrivals {
        Arrivals::Poisson { rate_per_s } => {
            events.push(Event {
                at: rng.exponential(1.0 / rate_per_s),
                kind: Kind::Attempt(None),
            });
            1.0 / rate_per_s
        }
        Arrivals::Closed {
            users,
            mean_think_s,
        } => {
            for u in 0..users {
                events.push(Event {
                    at: rng.exponential(mean_think_s),
                    kind: Kind::Attempt(Some(u)),
                });
            }
            mean_think_s
        }
    };
    let warm_up = attempts / 5 + 20;
    let (mut busy, mut queue, mut seen, mut refused) =
        (0usize, std::collections::VecDeque::new(), 0usize, 0usize);
    while seen < attempts + warm_up {
        let Some(Event { at, kind }) = events.pop() else {
            break;
        };
        match kind {
            Kind::Attempt(who) => {
                seen += 1;
                let counted = seen > warm_up;
                if who.is_none() {
                    events.push(Event {
                        at: at + rng.exponential(think),
                        kind: Kind::Attempt(None),
                    });
                }
                if busy < c {
                    busy += 1;
                    events.push(Event {
                        at: at + rng.exponential(s),
                        kind: Kind::Departure(who),
                    });
                } else if queue.len() < k {
                    queue.push_back(who);
                } else {
                    if counted {
                        refused += 1;
                    }
                    if who.is_some() {
                        events.push(Event {
                            at: at + rng.exponential(think),
                            kind: Kind::Attempt(who),
                        });
                    }
                }
            }
            Kind::Departure(who) => {
                if who.is_some() {
                    events.push(Event {
                        at: at + rng.exponential(think),
                        kind: Kind::Attempt(who),
                    });
                }
                match queue.pop_front() {
                    Some(next) => events.push(Event {
                        at: at + rng.exponential(s),
                        kind: Kind::Departure(next),
                    }),
                    None => busy -= 1,
                }
            }
        }
    }
    refused as f64 / attempts as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn erlang_b_matches_published_tables() {
        // Textbook values (e.g. the Erlang-B tables in Kleinrock, Queueing Systems vol. 1).
        assert!(close(erlang_b(1, 1.0), 0.5, 1e-12));
        assert!(close(erlang_b(2, 1.0), 0.2, 1e-12));
        assert!(close(erlang_b(10, 5.0), 0.018_385, 1e-6));
        assert!(close(erlang_b(30, 20.0), 0.008_457_5, 1e-6));
        assert!(close(erlang_b(4, 2.8), 0.183_724, 1e-6));
        assert!(close(erlang_b(4, 12.0), 0.698_464, 1e-6));
        assert_eq!(erlang_b(0, 3.0), 1.0);
        // Large pools stay finite.
        let b = erlang_b(1000, 950.0);
        assert!(b.is_finite() && b > 0.0 && b < 0.1);
    }

    #[test]
    fn mmck_reduces_to_erlang_b_and_to_the_mm1k_closed_form() {
        for (c, a) in [(1, 1.0), (4, 2.8), (8, 10.0)] {
            assert!(close(mmck_blocking(c, 0, a), erlang_b(c, a), 1e-12));
        }
        // M/M/1/K: (1 − ρ) ρ^(K+1) / (1 − ρ^(K+2)) with K waiting places.
        let rho: f64 = 0.5;
        let closed = (1.0 - rho) * rho.powi(4) / (1.0 - rho.powi(5));
        assert!(close(mmck_blocking(1, 3, rho), closed, 1e-12));
        assert!(close(closed, 1.0 / 31.0, 1e-12));
        // Hand-computed: c=2, K=2, a=3: weights 1, 3, 4.5, 6.75, 10.125.
        assert!(close(mmck_blocking(2, 2, 3.0), 10.125 / 25.375, 1e-12));
        assert!(close(mmck_blocking(4, 2, 2.8), 0.073_873_7, 1e-6));
        // A queue only ever lowers blocking.
        assert!(mmck_blocking(4, 2, 12.0) < erlang_b(4, 12.0));
    }

    #[test]
    fn engset_matches_known_values_and_tends_to_erlang_b() {
        // One other user, one server: refused when the other one is busy, β/(1+β).
        assert!(close(engset(1, 2, 1.0), 0.5, 1e-12));
        // Textbook example: N = 4, c = 2, β = 0.5 → 3/13.
        assert!(close(engset(2, 4, 0.5), 3.0 / 13.0, 1e-12));
        assert!(close(engset(3, 10, 0.2), 0.136_807_8, 1e-6));
        assert!(close(engset(4, 64, 0.05), 0.210_104_8, 1e-6));
        // No more users than servers: nobody is ever refused.
        assert_eq!(engset(4, 4, 10.0), 0.0);
        // Many users offering the same total load approach Erlang-B.
        let a = 2.8;
        let n = 100_000;
        let beta = a / f64::from(n);
        assert!(close(engset(4, n, beta), erlang_b(4, a), 1e-3));
    }

    #[test]
    fn closed_model_attempt_rate_and_think_time_invert() {
        let theta = think_for_rate(4, 0, 64, 0.025, 112.0).unwrap();
        let m = Model {
            workers: 4,
            queue: 0,
            mean_service_s: 0.025,
            arrivals: Arrivals::Closed {
                users: 64,
                mean_think_s: theta,
            },
        };
        assert!(close(m.attempt_rate(), 112.0, 1e-6));
        assert!(close(m.at_attempt_rate(80.0).attempt_rate(), 80.0, 1e-6));
        assert_eq!(m.formula(), "Engset");
        // Carried load never exceeds the workers.
        assert!(m.carried_rate() * m.mean_service_s <= 4.0);
        // Unreachable: 2 users cannot make 1000 attempts/s against 100 ms of service.
        assert!(think_for_rate(4, 0, 2, 0.1, 1000.0).is_none());
    }

    #[test]
    fn simulation_agrees_with_the_formulas() {
        let models = [
            Model {
                workers: 4,
                queue: 0,
                mean_service_s: 1.0,
                arrivals: Arrivals::Poisson { rate_per_s: 2.8 },
            },
            Model {
                workers: 4,
                queue: 2,
                mean_service_s: 1.0,
                arrivals: Arrivals::Poisson { rate_per_s: 2.8 },
            },
            Model {
                workers: 4,
                queue: 0,
                mean_service_s: 1.0,
                arrivals: Arrivals::Closed {
                    users: 16,
                    mean_think_s: 4.0,
                },
            },
            Model {
                workers: 2,
                queue: 1,
                mean_service_s: 1.0,
                arrivals: Arrivals::Closed {
                    users: 6,
                    mean_think_s: 3.0,
                },
            },
        ];
        for m in models {
            let (mean, sd) = simulate(&m, 4000, 40, 11);
            let se = sd / (40f64).sqrt();
            assert!(
                (mean - m.blocking()).abs() < 4.0 * se + 0.003,
                "{}: simulated {mean:.4} ± {se:.4}, formula {:.4}",
                m.formula(),
                m.blocking()
            );
        }
    }

    #[test]
    fn the_interval_separates_one_worker_more_or_less() {
        // The steady profile's operating point: 0.7 × capacity, 1400 attempts.
        let service = 0.023;
        let theta = think_for_rate(4, 0, 64, service, 0.7 * 4.0 / service).unwrap();
        let model = |workers| Model {
            workers,
            queue: 0,
            mean_service_s: service,
            arrivals: Arrivals::Closed {
                users: 64,
                mean_think_s: theta,
            },
        };
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
