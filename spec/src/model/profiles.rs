//! `[load]`: the load profiles of `plimsoll load` (the checker's settings, not the service's).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Stage;

/// `[load]`: the profiles `plimsoll load` runs. Every rate is relative to capacity (workers /
/// mean service time), so a profile fits any pool size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Load {
    /// The stage the `hold` hook holds open: the request's "work".
    pub hold_stage: Stage,
    /// Closed-loop users (at least; more for large pools).
    pub users: u32,
    /// Half-width of the prediction's acceptance interval, in standard deviations.
    pub sigma: f64,
    /// How often `/metrics` is read while a profile runs.
    pub scrape_interval_ms: u64,
    /// Exponential holds are cut at this many means (keeps every hold far below the timeouts).
    pub max_hold_factor: u32,
    /// Attempts sent before this are left out of the prediction (the system starts empty).
    pub warm_up_ms: u64,
    /// What `plimsoll load --profile burst` runs.
    pub burst: BurstProfile,
    /// What `plimsoll load --profile steady` runs.
    pub steady: SteadyProfile,
    /// What `plimsoll load --profile overload` runs.
    pub overload: OverloadProfile,
    /// What `plimsoll load --profile soak` runs.
    pub soak: SoakProfile,
}

impl Default for Load {
    /// The embedded contract's `[load]` (read on its own, so this never recurses into
    /// [`crate::Contract::embedded`]).
    fn default() -> Load {
        #[derive(Deserialize)]
        struct OnlyLoad {
            load: Load,
        }
        toml::from_str::<OnlyLoad>(crate::EMBEDDED_TOML)
            .expect("the embedded contract has a valid [load] section")
            .load
    }
}

/// Waves of simultaneous requests: admission must be exact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BurstProfile {
    /// What the profile proves, in one sentence (the docs list it).
    pub purpose: String,
    /// Requests per wave = digitize workers x this.
    pub factor: u32,
    /// How many waves are fired; each is judged on its own.
    pub waves: u32,
    /// Every request holds this long (fixed, so the admitted ones are still running while the
    /// whole wave arrives).
    pub hold_ms: u64,
}

/// Sustained load below capacity: refusals as predicted, no added latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SteadyProfile {
    /// What the profile proves, in one sentence (the docs list it).
    pub purpose: String,
    /// Attempt rate as a multiple of capacity.
    pub load_factor: f64,
    /// Mean of the exponential hold.
    pub mean_hold_ms: u64,
    /// How long the load runs, in seconds.
    pub duration_s: u64,
    /// p99 over admitted requests of (response time - the request's own hold).
    pub latency_overhead_p99_ms: u64,
}

/// Far past capacity: no collapse, fast refusals, documented statuses only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OverloadProfile {
    /// What the profile proves, in one sentence (the docs list it).
    pub purpose: String,
    /// Attempt rate as a multiple of capacity.
    pub load_factor: f64,
    /// Mean of the exponential hold.
    pub mean_hold_ms: u64,
    /// How long the load runs, in seconds.
    pub duration_s: u64,
    /// Goodput must reach this fraction of the throughput the admission math allows.
    pub goodput_fraction: f64,
    /// p99 latency of `503 overloaded` answers.
    pub refusal_p99_ms: u64,
}

/// A long run with abandoned requests: resources stay flat, capacity comes back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SoakProfile {
    /// What the profile proves, in one sentence (the docs list it).
    pub purpose: String,
    /// Attempt rate as a multiple of capacity.
    pub load_factor: f64,
    /// Mean of the exponential hold.
    pub mean_hold_ms: u64,
    /// How long the load runs, in seconds.
    pub duration_s: u64,
    /// Share of requests whose client gives up halfway through the hold.
    pub cancel_fraction: f64,
    /// Allowed growth of the server's resident memory between warm-up and the end.
    pub rss_growth_mb: u64,
    /// Allowed growth of its open file descriptors.
    pub fd_growth: u64,
    /// Allowed growth of its per-request temp directories (after the load drains).
    pub temp_files_growth: u64,
}
