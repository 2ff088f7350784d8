//! The closed forms: the probability that a server of `c` workers and `K` queue places is full
//! when an attempt arrives, for Poisson arrivals (Erlang-B, M/M/c/K) and for a finite
//! population of users (Engset, M/M/c/K/N), all from one birth–death chain.

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
pub(super) fn distribution(c: u32, k: u32, offered: impl Fn(usize) -> f64) -> Vec<f64> {
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::prediction) fn close(a: f64, b: f64, tol: f64) -> bool {
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
}
