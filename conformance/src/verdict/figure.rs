//! The figures a result keeps besides its verdict, so a later run can be compared with this one
//! (`--baseline`): a clause can pass in both runs while a figure got worse, and a gate should
//! say so. Each figure keeps its samples (one per trial), so the comparison can tell a change
//! from the run's own noise.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A measured quantity of one check or load verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Figure {
    /// What was measured, unique within its result (`refusal latency`).
    pub name: String,
    /// How its samples are counted.
    pub unit: Unit,
    /// Which way is better: a move the other way beyond the noise is a regression.
    pub better: Better,
    /// One value per trial; one value when the check measures once.
    pub samples: Vec<f64>,
}

/// The unit of a figure's samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Milliseconds, by the checker's clock.
    Ms,
    /// A share of attempts, 0 to 1.
    Fraction,
    /// Answers per second.
    PerSecond,
}

/// Which way a figure should move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Less is better: latencies, lateness, refused fractions.
    Lower,
    /// More is better: goodput.
    Higher,
}

impl Figure {
    /// A figure where less is better.
    pub fn lower(name: &str, unit: Unit, samples: Vec<f64>) -> Figure {
        Figure {
            name: name.to_owned(),
            unit,
            better: Better::Lower,
            samples,
        }
    }

    /// A figure where more is better.
    pub fn higher(name: &str, unit: Unit, samples: Vec<f64>) -> Figure {
        Figure {
            better: Better::Higher,
            ..Figure::lower(name, unit, samples)
        }
    }

    /// The median of the samples (the middle two averaged); `None` without samples.
    pub fn median(&self) -> Option<f64> {
        median(&self.samples)
    }

    /// A robust standard deviation of the samples: 1.4826 × their median absolute deviation
    /// (equal to the standard deviation for normal noise, unmoved by one outlier); 0 for fewer
    /// than two samples.
    pub fn spread(&self) -> f64 {
        let Some(m) = self.median().filter(|_| self.samples.len() >= 2) else {
            return 0.0;
        };
        let deviations: Vec<f64> = self.samples.iter().map(|x| (x - m).abs()).collect();
        1.4826 * median(&deviations).unwrap_or(0.0)
    }
}

fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}

impl Unit {
    /// `value` as the reports print it in this unit.
    pub fn format(self, value: f64) -> String {
        match self {
            Unit::Ms => format!("{value:.1} ms"),
            Unit::Fraction => format!("{:.1} %", value * 100.0),
            Unit::PerSecond => format!("{value:.2}/s"),
        }
    }

    /// The smallest change that can count as a regression, whatever the spread: below it two
    /// runs differ by the resolution of the measurement (a millisecond of scheduling, a couple
    /// of attempts in a hundred).
    pub fn floor(self) -> f64 {
        match self {
            Unit::Ms => 2.0,
            Unit::Fraction => 0.02,
            Unit::PerSecond => 0.0,
        }
    }
}

impl fmt::Display for Figure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.median() {
            Some(m) => write!(
                f,
                "{}: median {} of {}",
                self.name,
                self.unit.format(m),
                self.samples.len()
            ),
            None => write!(f, "{}: no sample", self.name),
        }
    }
}

/// One figure of this run against the same figure of an earlier run (`--baseline`).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Delta {
    /// The figure's name.
    pub figure: String,
    /// The unit of the medians.
    pub unit: Unit,
    /// The baseline's median.
    pub baseline: f64,
    /// This run's median.
    pub current: f64,
    /// How far the median may move the worse way before it counts as a regression: the
    /// largest of three robust standard deviations of the noisier run's samples, a tenth of the
    /// baseline's median, and the unit's floor.
    pub threshold: f64,
    /// Whether it moved the worse way by more than the threshold.
    pub regressed: bool,
}

impl Delta {
    /// `current` against `baseline`; `None` when either has no sample.
    pub fn between(baseline: &Figure, current: &Figure) -> Option<Delta> {
        let (was, now) = (baseline.median()?, current.median()?);
        let noise = 3.0 * baseline.spread().max(current.spread());
        let threshold = noise.max(0.1 * was.abs()).max(current.unit.floor());
        let worse = match current.better {
            Better::Lower => now - was,
            Better::Higher => was - now,
        };
        Some(Delta {
            figure: current.name.clone(),
            unit: current.unit,
            baseline: was,
            current: now,
            threshold,
            regressed: worse > threshold,
        })
    }
}

impl fmt::Display for Delta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let change = self.current - self.baseline;
        let sign = if change >= 0.0 { "+" } else { "−" };
        write!(
            f,
            "{}: {} → {} ({sign}{}; noise threshold {}){}",
            self.figure,
            self.unit.format(self.baseline),
            self.unit.format(self.current),
            self.unit.format(change.abs()),
            self.unit.format(self.threshold),
            if self.regressed { ": regressed" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread_are_robust_to_one_outlier() {
        let f = Figure::lower("x", Unit::Ms, vec![10.0, 11.0, 9.0, 10.0, 500.0]);
        assert_eq!(f.median(), Some(10.0));
        assert!((f.spread() - 1.4826).abs() < 1e-9, "{}", f.spread());
        assert_eq!(Figure::lower("x", Unit::Ms, vec![3.0]).spread(), 0.0);
        assert_eq!(
            Figure::lower("x", Unit::Ms, vec![1.0, 3.0]).median(),
            Some(2.0)
        );
        assert_eq!(Figure::lower("x", Unit::Ms, vec![]).median(), None);
    }

    #[test]
    fn a_move_beyond_the_noise_the_worse_way_is_a_regression() {
        let was = Figure::lower(
            "refusal latency",
            Unit::Ms,
            vec![10.0, 11.0, 9.0, 10.0, 12.0],
        );
        let same = Figure::lower(
            "refusal latency",
            Unit::Ms,
            vec![11.0, 10.0, 12.0, 9.0, 10.0],
        );
        let worse = Figure::lower(
            "refusal latency",
            Unit::Ms,
            vec![30.0, 31.0, 29.0, 30.0, 33.0],
        );
        let better = Figure::lower("refusal latency", Unit::Ms, vec![3.0, 2.0, 4.0, 3.0, 3.0]);
        assert!(!Delta::between(&was, &same).unwrap().regressed);
        let d = Delta::between(&was, &worse).unwrap();
        assert!(d.regressed, "{d}");
        assert_eq!(
            d.to_string(),
            "refusal latency: 10.0 ms → 30.0 ms (+20.0 ms; noise threshold 4.4 ms): regressed"
        );
        assert!(!Delta::between(&was, &better).unwrap().regressed);
        // A noisy baseline widens the threshold: the same move is within its noise.
        let noisy = Figure::lower(
            "refusal latency",
            Unit::Ms,
            vec![2.0, 10.0, 25.0, 4.0, 30.0],
        );
        assert!(!Delta::between(&noisy, &worse).unwrap().regressed);
        // More is better for goodput: a drop is the regression.
        let was = Figure::higher("goodput", Unit::PerSecond, vec![40.0]);
        let drop = Figure::higher("goodput", Unit::PerSecond, vec![30.0]);
        assert!(Delta::between(&was, &drop).unwrap().regressed);
        assert!(!Delta::between(&drop, &was).unwrap().regressed);
    }
}
