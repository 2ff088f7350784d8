//! A small seeded generator for the fault proxy's draws (jitter, slice sizes), one relay check's
//! and the load profiles' random draws (think times, holds, abandonment) and the prediction's
//! simulation.
//!
//! It lives in `plimsoll-fault` because that is the lowest crate of the checker that draws: the
//! checks and the load profiles sit above it and use it from there.
//!
//! Why our own and not `rand`: `--seed N` must reproduce the same draws (think times, holds,
//! which requests are abandoned) and the same acceptance interval after any dependency
//! upgrade, because a report names its seed so that a failure can be rerun. `rand` does not promise that: its reproducibility policy allows value-breaking
//! changes in minor versions (our `Cargo.lock` already holds 0.9 and 0.10, through other
//! crates), `StdRng` and `SmallRng` are declared non-portable, and the samplers
//! (`random::<f64>()`, `rand_distr::Exp`) are no more stable than the generator under them. A
//! named portable generator (`rand_pcg`) would fix the bits but not the conversions to floats
//! and exponentials, which are most of this file. SplitMix64 is fully specified by its
//! published constants (the test below pins its reference output), so the values can only
//! change if this file does.
//!
//! The draws only need to look independent, not be unpredictable: nothing here is
//! cryptographic.

/// SplitMix64 (Steele, Lea, Flood 2014): one 64-bit state, full period, passes BigCrush.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator started at `seed`: the same seed, the same draws.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// A generator for the `index`-th stream of `seed`, so concurrent users draw from
    /// independent streams whatever order they run in.
    pub fn stream(seed: u64, index: u64) -> SplitMix64 {
        let mut g = SplitMix64::new(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        // Decorrelate neighbouring indexes before the first draw.
        g.next_u64();
        g
    }

    /// The next 64 bits: SplitMix64's published step, under every other draw.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponential with the given mean (inversion; `1 - u` is in (0, 1], so the log is finite).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.next_f64()).ln()
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_splitmix64_sequence() {
        // First outputs of SplitMix64 seeded with 0 (the published reference implementation).
        let mut g = SplitMix64::new(0);
        assert_eq!(g.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(g.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn exponential_draws_have_the_requested_mean_and_spread() {
        let mut g = SplitMix64::new(42);
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| g.exponential(20.0)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean - 20.0).abs() < 0.2, "mean {mean}");
        // An exponential's standard deviation equals its mean.
        assert!((var.sqrt() - 20.0).abs() < 0.4, "sd {}", var.sqrt());
        assert!(xs.iter().all(|x| x.is_finite() && *x >= 0.0));
    }

    #[test]
    fn streams_differ_and_repeat() {
        let a: Vec<u64> = (0..4)
            .map(|_| SplitMix64::stream(7, 1).next_u64())
            .collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(
            SplitMix64::stream(7, 1).next_u64(),
            SplitMix64::stream(7, 2).next_u64()
        );
    }
}
