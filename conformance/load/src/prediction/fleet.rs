//! Several identical servers behind a balancer: the exact Markov chain of the fleet.
//!
//! R replicas of `c` workers and `K` queue places each do not behave like one server of R·c
//! workers: under a **random** split an attempt can land on a full replica while another has a
//! free worker, so the fleet refuses more than the pooled server would. **Least connections**
//! sends each attempt to a replica with the fewest requests in it (the connections the balancer
//! has open to it), so it refuses only when every replica is full; with `K = 0` that is exactly
//! the pooled server (an admitted request always starts at once, and the fleet is full only
//! when all R·c workers are busy), and with `K > 0` it can still queue a request behind a busy
//! worker while another replica has an idle one, which puts it between the two.
//!
//! Rather than one formula per policy, the state of the fleet is solved exactly: the occupancy
//! of every replica (in service + queued, `0..=c+K`) as a sorted vector — the replicas are
//! interchangeable, so the order does not matter — with arrivals routed by the policy and each
//! replica serving `min(n, c)` requests at rate 1/S. The chain's stationary distribution
//! (solved directly up to a few hundred states, by Gauss–Seidel beyond) gives the refused
//! fraction as the share of attempts that arrive in a state where the policy's pick is full,
//! each state weighted by its attempt intensity (N − n)/θ for closed-loop users.
//! `C(R + c + K, R)` states: 35 for three replicas of four workers, a thousand for ten; beyond
//! [`MAX_STATES`] the checker refuses the run rather than solve for minutes.
//!
//! For one replica this is the single-server chain (Engset, M/M/c/K); for Poisson arrivals and
//! a random split it is R independent M/M/c/K systems fed λ/R each; for least connections and
//! `K = 0` it is the pooled server of R·c workers. The unit tests hold it to all three, and the
//! discrete-event simulation (`simulation.rs`) routes attempts the same way to check the rest.

use std::collections::HashMap;

use super::Arrivals;

/// How the balancer picks a replica for each request: `Random`, uniformly at random whatever
/// the replicas are doing (nginx `random`); `LeastConn`, a replica with the fewest requests in
/// flight (nginx `least_conn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balancer {
    /// Uniformly at random (nginx `random`).
    Random,
    /// The fewest requests in flight (nginx `least_conn`).
    LeastConn,
}

impl Balancer {
    /// Every policy, in the order `--balancer` lists them.
    pub const ALL: [Balancer; 2] = [Balancer::Random, Balancer::LeastConn];

    /// The policy as `--balancer` takes it, and as the model's name and the manifest say it.
    pub fn as_str(self) -> &'static str {
        match self {
            Balancer::Random => "random",
            Balancer::LeastConn => "least-conn",
        }
    }
}

/// R identical replicas behind a balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fleet {
    /// How many replicas share the load (R), each with the per-replica contract's pools.
    pub replicas: u32,
    /// How a request is routed to one of them.
    pub balancer: Balancer,
}

/// Above this many states the exact chain is not solved: the think time is fitted by bisection,
/// a solve per step, so a larger fleet would take minutes (it needs another model; the checker
/// says so before the load starts). Ten replicas of four workers are 1 001 states.
pub const MAX_STATES: usize = 5_000;

/// How many occupancy states a fleet of `replicas` replicas of `places` = c + K places has:
/// the multisets of size R over `0..=places`, C(places + R, R).
pub fn state_count(replicas: u32, places: u32) -> usize {
    let (r, m) = (u128::from(replicas), u128::from(places));
    let mut count: u128 = 1;
    for i in 1..=r {
        count = count * (m + i) / i;
        if count > MAX_STATES as u128 * 1000 {
            return usize::MAX;
        }
    }
    count as usize
}

/// What the solved chain says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Solution {
    /// Share of attempts refused.
    pub(super) blocking: f64,
    /// Attempts per second.
    pub(super) attempt_rate: f64,
}

/// Solves the chain of `fleet` replicas of `workers` + `queue` places, mean service
/// `mean_service_s`, under `arrivals`.
pub(super) fn solve(
    fleet: Fleet,
    workers: u32,
    queue: u32,
    mean_service_s: f64,
    arrivals: Arrivals,
) -> Solution {
    let places = (workers + queue) as u8;
    let states = occupancy_states(fleet.replicas as usize, places);
    let index: HashMap<&[u8], usize> = states
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_slice(), i))
        .collect();
    let intensity = |s: &[u8]| -> f64 {
        let total: f64 = s.iter().map(|&n| f64::from(n)).sum();
        match arrivals {
            Arrivals::Poisson { rate_per_s } => rate_per_s,
            Arrivals::Closed {
                users,
                mean_think_s,
            } => (f64::from(users) - total).max(0.0) / mean_think_s,
        }
    };
    let r = f64::from(fleet.replicas);
    // incoming[to] = (from, rate); out[s] = total rate out of s; refused[s] = P(refusal | s).
    let mut incoming: Vec<Vec<(usize, f64)>> = vec![Vec::new(); states.len()];
    let mut out = vec![0.0; states.len()];
    let mut refused = vec![0.0; states.len()];
    for (from, s) in states.iter().enumerate() {
        let lambda = intensity(s);
        let mut arrive = |to: Vec<u8>, rate: f64| {
            if rate > 0.0 {
                incoming[index[to.as_slice()]].push((from, rate));
                out[from] += rate;
            }
        };
        for (value, count) in groups(s) {
            let share = match fleet.balancer {
                Balancer::Random => f64::from(count) / r,
                // The least occupied replicas: the first group of the sorted vector.
                Balancer::LeastConn if value == s[0] => 1.0,
                Balancer::LeastConn => 0.0,
            };
            if value == places {
                refused[from] += share;
            } else {
                arrive(bumped(s, value, 1), lambda * share);
            }
            if value > 0 {
                let serving = f64::from(value.min(workers as u8));
                arrive(
                    bumped(s, value, -1),
                    f64::from(count) * serving / mean_service_s,
                );
            }
        }
    }
    let pi = stationary(&incoming, &out);
    let (mut attempts, mut blocked) = (0.0, 0.0);
    for (i, s) in states.iter().enumerate() {
        let a = pi[i] * intensity(s);
        attempts += a;
        blocked += a * refused[i];
    }
    Solution {
        blocking: if attempts > 0.0 {
            blocked / attempts
        } else {
            0.0
        },
        attempt_rate: attempts,
    }
}

/// Every sorted occupancy vector of `replicas` replicas with values `0..=places`, listed by
/// total occupancy.
fn occupancy_states(replicas: usize, places: u8) -> Vec<Vec<u8>> {
    fn extend(prefix: &mut Vec<u8>, left: usize, from: u8, places: u8, out: &mut Vec<Vec<u8>>) {
        if left == 0 {
            out.push(prefix.clone());
            return;
        }
        for v in from..=places {
            prefix.push(v);
            extend(prefix, left - 1, v, places, out);
            prefix.pop();
        }
    }
    let mut out = Vec::new();
    extend(&mut Vec::new(), replicas, 0, places, &mut out);
    out.sort_by_key(|s| s.iter().map(|&v| u32::from(v)).sum::<u32>());
    out
}

/// The distinct values of a sorted vector with how often each occurs.
fn groups(s: &[u8]) -> Vec<(u8, u32)> {
    let mut g: Vec<(u8, u32)> = Vec::new();
    for &v in s {
        match g.last_mut() {
            Some((last, n)) if *last == v => *n += 1,
            _ => g.push((v, 1)),
        }
    }
    g
}

/// `s` with one replica of occupancy `value` moved by `by` (±1), still sorted: raising the
/// last replica of that value, or lowering the first, keeps the order.
fn bumped(s: &[u8], value: u8, by: i8) -> Vec<u8> {
    let mut t = s.to_vec();
    let at = if by > 0 {
        s.iter().rposition(|&v| v == value)
    } else {
        s.iter().position(|&v| v == value)
    }
    .expect("the value occurs in the state");
    t[at] = value.wrapping_add_signed(by);
    t
}

/// Up to this many states the chain is solved directly (dense elimination, exact up to
/// rounding whatever the rates); above it by Gauss–Seidel sweeps.
const DIRECT_STATES: usize = 300;

/// The stationary distribution of the chain (`incoming[to]` = (from, rate), `out` = total rate
/// out of each state).
fn stationary(incoming: &[Vec<(usize, f64)>], out: &[f64]) -> Vec<f64> {
    let mut pi = if out.len() <= DIRECT_STATES {
        direct(incoming, out)
    } else {
        gauss_seidel(incoming, out)
    };
    pi.iter_mut().for_each(|p| *p = p.max(0.0));
    let total: f64 = pi.iter().sum();
    pi.iter_mut().for_each(|p| *p /= total);
    pi
}

/// Solves πQ = 0, Σπ = 1 by Gaussian elimination with partial pivoting: the balance equation
/// of the last state is replaced by the normalisation.
fn direct(incoming: &[Vec<(usize, f64)>], out: &[f64]) -> Vec<f64> {
    let n = out.len();
    // Row `to`: Σ π(from)·rate − π(to)·out(to) = 0.
    let mut a = vec![vec![0.0; n + 1]; n];
    for (to, row) in a.iter_mut().enumerate() {
        row[to] -= out[to];
        for &(from, rate) in &incoming[to] {
            row[from] += rate;
        }
    }
    a[n - 1] = vec![1.0; n + 1];
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))
            .expect("a row");
        a.swap(col, pivot);
        let p = a[col][col];
        if p == 0.0 {
            continue;
        }
        let (upper, lower) = a.split_at_mut(col + 1);
        let pivot_row = &upper[col];
        for row in lower.iter_mut() {
            let f = row[col] / p;
            if f != 0.0 {
                for (x, y) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                    *x -= f * y;
                }
            }
        }
    }
    let mut pi = vec![0.0; n];
    for row in (0..n).rev() {
        let known: f64 = (row + 1..n).map(|k| a[row][k] * pi[k]).sum();
        pi[row] = if a[row][row] == 0.0 {
            0.0
        } else {
            (a[row][n] - known) / a[row][row]
        };
    }
    pi
}

/// Gauss–Seidel sweeps of the balance equations π(s)·out(s) = Σ π(from)·rate, normalised after
/// each sweep (states are listed by total occupancy, so a sweep carries arrivals upwards).
fn gauss_seidel(incoming: &[Vec<(usize, f64)>], out: &[f64]) -> Vec<f64> {
    let n = out.len();
    let mut pi = vec![1.0 / n as f64; n];
    for _ in 0..20_000 {
        let mut change: f64 = 0.0;
        for s in 0..n {
            if out[s] <= 0.0 {
                continue;
            }
            let inflow: f64 = incoming[s]
                .iter()
                .map(|&(from, rate)| pi[from] * rate)
                .sum();
            let next = inflow / out[s];
            change = change.max((next - pi[s]).abs());
            pi[s] = next;
        }
        let total: f64 = pi.iter().sum();
        if total > 0.0 {
            pi.iter_mut().for_each(|p| *p /= total);
        }
        if change / total.max(f64::MIN_POSITIVE) < 1e-13 {
            break;
        }
    }
    pi
}

#[cfg(test)]
mod tests {
    use super::super::formulas::tests::close;
    use super::super::{engset, finite_source_blocking, mmck_blocking};
    use super::*;

    fn fleet(replicas: u32, balancer: Balancer) -> Fleet {
        Fleet { replicas, balancer }
    }

    fn closed(users: u32, mean_think_s: f64) -> Arrivals {
        Arrivals::Closed {
            users,
            mean_think_s,
        }
    }

    #[test]
    fn counts_and_lists_the_states() {
        assert_eq!(state_count(3, 4), 35);
        assert_eq!(occupancy_states(3, 4).len(), 35);
        assert_eq!(state_count(1, 6), 7);
        assert_eq!(state_count(10, 4), 1001);
        assert_eq!(state_count(64, 64), usize::MAX);
        assert_eq!(bumped(&[1, 2, 2, 3], 2, 1), vec![1, 2, 3, 3]);
        assert_eq!(bumped(&[1, 2, 2, 3], 2, -1), vec![1, 1, 2, 3]);
    }

    #[test]
    fn one_replica_is_the_single_server_chain() {
        for balancer in [Balancer::Random, Balancer::LeastConn] {
            for (c, k) in [(4, 0), (2, 1), (4, 2)] {
                let s = solve(fleet(1, balancer), c, k, 0.2, closed(40, 1.5));
                let want = finite_source_blocking(c, k, 40, 0.2 / 1.5);
                assert!(close(s.blocking, want, 1e-9), "{c}/{k}: {s:?} vs {want}");
            }
        }
    }

    #[test]
    fn a_random_split_of_poisson_arrivals_is_independent_replicas() {
        // λ/R to each replica: M/M/c/K at a/R.
        let s = solve(
            fleet(3, Balancer::Random),
            4,
            1,
            0.2,
            Arrivals::Poisson { rate_per_s: 45.0 },
        );
        assert!(close(
            s.blocking,
            mmck_blocking(4, 1, 45.0 * 0.2 / 3.0),
            1e-9
        ));
        assert!(close(s.attempt_rate, 45.0, 1e-12));
    }

    #[test]
    fn least_connections_without_a_queue_is_the_pooled_server() {
        let s = solve(fleet(3, Balancer::LeastConn), 4, 0, 0.2, closed(96, 0.5));
        assert!(close(s.blocking, engset(12, 96, 0.2 / 0.5), 1e-9), "{s:?}");
    }

    #[test]
    fn random_refuses_more_than_least_connections_which_is_bounded_by_the_pool() {
        for k in [0, 2] {
            let random = solve(fleet(3, Balancer::Random), 4, k, 0.2, closed(96, 0.5));
            let least = solve(fleet(3, Balancer::LeastConn), 4, k, 0.2, closed(96, 0.5));
            let pooled = finite_source_blocking(12, 3 * k, 96, 0.2 / 0.5);
            assert!(random.blocking > least.blocking, "{random:?} {least:?}");
            assert!(least.blocking >= pooled - 1e-9, "{least:?} vs {pooled}");
        }
    }
}
