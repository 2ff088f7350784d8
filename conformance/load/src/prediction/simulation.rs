//! A discrete-event simulation of the same server under the same arrivals: it checks the
//! formulas, and measures how much wider than a binomial's the spread of a run's refused
//! fraction is (refusals cluster), which sizes the acceptance [`Interval`](super::Interval).
//! Behind a balancer it routes each attempt the way the balancer does (a uniformly random
//! replica, or one with the fewest requests in it, ties broken at random), so it checks the
//! fleet chain too.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use plimsoll_fault::rng::SplitMix64;

use super::{Arrivals, Balancer, Model};

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

/// The user is `Some(index)` in a closed model, `None` for Poisson arrivals; a departure
/// names its replica.
#[derive(PartialEq, Clone, Copy)]
enum Kind {
    Attempt(Option<u32>),
    Departure(Option<u32>, usize),
}

/// One replica's busy workers and queue.
#[derive(Default)]
struct Replica {
    busy: usize,
    queue: VecDeque<Option<u32>>,
}

impl Replica {
    fn load(&self) -> usize {
        self.busy + self.queue.len()
    }
}

/// The replica the balancer sends the next attempt to.
fn route(model: &Model, replicas: &[Replica], rng: &mut SplitMix64) -> usize {
    let n = replicas.len();
    let uniform =
        |rng: &mut SplitMix64, n: usize| ((rng.next_f64() * n as f64) as usize).min(n - 1);
    match model.fleet.map(|f| f.balancer) {
        None => 0,
        Some(Balancer::Random) => uniform(rng, n),
        Some(Balancer::LeastConn) => {
            let least = replicas.iter().map(Replica::load).min().unwrap_or(0);
            let ties: Vec<usize> = (0..n).filter(|&i| replicas[i].load() == least).collect();
            ties[uniform(rng, ties.len())]
        }
    }
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

/// The refused fraction of one simulated run of `attempts` attempts after a warm-up.
fn simulate_once(model: &Model, attempts: usize, rng: &mut SplitMix64) -> f64 {
    let mut sim = Sim::start(model, rng);
    let warm_up = attempts / 5 + 20;
    let (mut seen, mut refused) = (0usize, 0usize);
    while seen < attempts + warm_up {
        let Some(Event { at, kind }) = sim.events.pop() else {
            break;
        };
        match kind {
            Kind::Attempt(who) => {
                seen += 1;
                if sim.attempt(model, at, who, rng) && seen > warm_up {
                    refused += 1;
                }
            }
            Kind::Departure(who, r) => sim.departure(at, who, r, rng),
        }
    }
    refused as f64 / attempts as f64
}

/// The state of one simulated run: pending events and every replica's workers and queue.
struct Sim {
    events: BinaryHeap<Event>,
    replicas: Vec<Replica>,
    workers: usize,
    queue: usize,
    mean_service_s: f64,
    /// Mean time between a Poisson stream's attempts, or a closed user's mean think.
    think: f64,
}

impl Sim {
    /// Empty replicas and the first attempts: the Poisson stream's, or every user's.
    fn start(model: &Model, rng: &mut SplitMix64) -> Sim {
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
        let count = model.fleet.map_or(1, |f| f.replicas as usize);
        Sim {
            events,
            replicas: (0..count).map(|_| Replica::default()).collect(),
            workers: model.workers as usize,
            queue: model.queue as usize,
            mean_service_s: model.mean_service_s,
            think,
        }
    }

    /// The next attempt of `who` (a closed user) after a think from `at`.
    fn think_then_attempt(&mut self, at: f64, who: Option<u32>, rng: &mut SplitMix64) {
        self.events.push(Event {
            at: at + rng.exponential(self.think),
            kind: Kind::Attempt(who),
        });
    }

    /// An attempt at `at`, routed as the balancer would and admitted to a worker, queued, or
    /// refused; whether it was refused.
    fn attempt(&mut self, model: &Model, at: f64, who: Option<u32>, rng: &mut SplitMix64) -> bool {
        if who.is_none() {
            self.think_then_attempt(at, None, rng);
        }
        let r = route(model, &self.replicas, rng);
        let replica = &mut self.replicas[r];
        if replica.busy < self.workers {
            replica.busy += 1;
            self.events.push(Event {
                at: at + rng.exponential(self.mean_service_s),
                kind: Kind::Departure(who, r),
            });
            false
        } else if replica.queue.len() < self.queue {
            replica.queue.push_back(who);
            false
        } else {
            if who.is_some() {
                self.think_then_attempt(at, who, rng);
            }
            true
        }
    }

    /// A request leaves replica `r` at `at`: its user thinks again, and the queue's head (if
    /// any) takes the worker.
    fn departure(&mut self, at: f64, who: Option<u32>, r: usize, rng: &mut SplitMix64) {
        if who.is_some() {
            self.think_then_attempt(at, who, rng);
        }
        let replica = &mut self.replicas[r];
        match replica.queue.pop_front() {
            Some(next) => self.events.push(Event {
                at: at + rng.exponential(self.mean_service_s),
                kind: Kind::Departure(next, r),
            }),
            None => replica.busy -= 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Fleet;
    use super::*;

    fn agrees(m: Model) {
        let (mean, sd) = simulate(&m, 4000, 40, 11);
        let se = sd / (40f64).sqrt();
        assert!(
            (mean - m.blocking()).abs() < 4.0 * se + 0.003,
            "{} ({}): simulated {mean:.4} ± {se:.4}, formula {:.4}",
            m.formula(),
            m.describe(),
            m.blocking()
        );
    }

    #[test]
    fn simulation_agrees_with_the_fleet_chain() {
        // The fleet tests' operating point (3 replicas of 4 workers at 3 × capacity) and a
        // queue, under both balancers: the policy the chain solves is the one simulated.
        for balancer in [Balancer::Random, Balancer::LeastConn] {
            for (queue, users, think) in [(0, 96, 0.25), (2, 48, 1.0)] {
                agrees(Model {
                    workers: 4,
                    queue,
                    mean_service_s: 0.2,
                    arrivals: Arrivals::Closed {
                        users,
                        mean_think_s: think,
                    },
                    fleet: Some(Fleet {
                        replicas: 3,
                        balancer,
                    }),
                });
            }
        }
    }

    #[test]
    fn simulation_agrees_with_the_formulas() {
        let models = [
            Model {
                workers: 4,
                queue: 0,
                mean_service_s: 1.0,
                arrivals: Arrivals::Poisson { rate_per_s: 2.8 },
                fleet: None,
            },
            Model {
                workers: 4,
                queue: 2,
                mean_service_s: 1.0,
                arrivals: Arrivals::Poisson { rate_per_s: 2.8 },
                fleet: None,
            },
            Model {
                workers: 4,
                queue: 0,
                mean_service_s: 1.0,
                arrivals: Arrivals::Closed {
                    users: 16,
                    mean_think_s: 4.0,
                },
                fleet: None,
            },
            Model {
                workers: 2,
                queue: 1,
                mean_service_s: 1.0,
                arrivals: Arrivals::Closed {
                    users: 6,
                    mean_think_s: 3.0,
                },
                fleet: None,
            },
        ];
        for m in models {
            agrees(m);
        }
    }
}
